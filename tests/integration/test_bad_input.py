"""Bad input stops site.yml before any node is changed, naming the host, the value and the fix.

Input that is wrong for the whole cluster (the inventory, the version, the port plan) stops the
run on the controller or in the preflight. A node whose own state is wrong (a port taken, another
Python) leaves the run unchanged, named with the fix, and the cluster comes up on the others.
"""

import json
import os
import re

from conftest import ROOT, STATE, needs_root, node, playbook

pytestmark = needs_root


def test_two_bad_nodes_are_left_out_each_with_its_own_reason(pristine, inventory_copy):
    # One run, two nodes wrong in different ways, both left out before any change and each named
    # with its own step and error: node2 has a port of the plan taken by another program; node3's
    # interpreter claims another Python patch level, as after an unattended upgrade (ray#44063).
    server = "setsid python3 -m http.server 8077 --bind 198.18.0.12 >/dev/null 2>&1 < /dev/null &"
    rc, out = node(2, server + " echo started")
    assert rc == 0, out
    fake = os.path.join(STATE, "fakepy")
    os.makedirs(fake, exist_ok=True)
    with open(os.path.join(fake, "python3"), "w") as fh:
        fh.write('#!/bin/sh\nif [ "$1" = "-c" ]; then echo 3.11.99; exit 0; fi\nexec /usr/bin/python3 "$@"\n')
    os.chmod(os.path.join(fake, "python3"), 0o755)
    (inventory_copy / "host_vars").mkdir()
    (inventory_copy / "host_vars" / "node3.yml").write_text("raygate_python: %s/python3\n" % fake)
    try:
        assert node(2, "for i in $(seq 100); do ss -ltnH | grep -q ':8077 ' && exit 0; sleep 0.1; done; exit 1")[0] == 0
        # Two of three nodes bad is past the circuit breaker's 50%; the breaker is not this test's.
        rc, out = playbook("site.yml", "-e", "raygate_health_breaker_threshold=0", inventory=str(inventory_copy))
        left_out_unchanged(
            rc,
            out,
            {
                "node2": ("preflight", ["port 8077 is already bound by python3", "raygate_port_offset"]),
                "node3": ("versions", ["Ray or Python versions differ between nodes"]),
            },
        )
        lines = [line.split() for line in out.splitlines() if line.strip().startswith("node3 ")]
        assert ["node3", "2.60.0", "3.11.99", "python"] in lines
    finally:
        node(2, "pkill -f 'http.server 8077'")
        playbook("teardown.yml", "-e", "raygate_teardown_purge=true", inventory=str(inventory_copy))


def left_out_unchanged(rc, out, left_out):
    """The run built the cluster without the hosts of LEFT_OUT ({host: (task, needles)}), which the
    summary names each with its step and error, and nothing was changed on them."""
    assert rc == 0, out[-4000:]
    with open(os.path.join(ROOT, "artifacts", "runs", "site.json")) as fh:
        summary = json.load(fh)
    assert summary["result"] == "degraded" and sorted(summary["out"]) == sorted(left_out), summary
    for host, (task, needles) in left_out.items():
        assert summary["out"][host]["task"] == task, summary
        for needle in needles:
            assert needle in summary["out"][host]["error"], summary
        index = int(host[len("node") :])
        rc, left = node(index, "ls -d /opt/raygate /etc/raygate /run/raygate 2>/dev/null; pgrep -a -x raylet")
        assert left.strip() == "", "%s was changed: %s" % (host, left)


def test_unknown_ray_version(pristine):
    rc, out = playbook("site.yml", "-e", "raygate_ray_version=2.99.0")
    assert rc != 0
    assert "Ray 2.99.0 for Python 3.11" in out and "is not in the wheelhouse" in out
    # The wheelhouse may hold other versions too (make day2 adds the one it upgrades from).
    assert re.search(r"available: [0-9., ]*2\.60\.0", out), out[-3000:]


def test_mixed_ray_versions_stop_on_the_controller(pristine, inventory_copy):
    (inventory_copy / "host_vars").mkdir()
    (inventory_copy / "host_vars" / "node3.yml").write_text('raygate_ray_version: "2.59.0"\n')
    rc, out = playbook("site.yml", inventory=str(inventory_copy))
    assert rc != 0
    assert "raygate_ray_version differs between hosts" in out
    assert "'2.59.0' on node3" in out
    recap = out.split("PLAY RECAP")[-1]
    assert "localhost" in recap and not any(n in recap for n in ("node1", "node2", "node3"))  # no node contacted


def test_no_head(pristine, inventory_copy):
    hosts = (inventory_copy / "hosts.yml").read_text()
    hosts = hosts.replace("    ray_head:\n      hosts:\n        node1:\n          ansible_host: 198.18.0.11\n", "")
    (inventory_copy / "hosts.yml").write_text(hosts)
    rc, out = playbook("site.yml", inventory=str(inventory_copy))
    assert rc != 0
    assert "must hold exactly one host (the Ray head); found none" in out


def test_two_heads(pristine, inventory_copy):
    hosts = (inventory_copy / "hosts.yml").read_text()
    head = "          ansible_host: 198.18.0.11\n"
    hosts = hosts.replace(head, head + "        node2:\n", 1)
    (inventory_copy / "hosts.yml").write_text(hosts)
    rc, out = playbook("site.yml", inventory=str(inventory_copy))
    assert rc != 0
    assert "found node1, node2" in out and "node2 is in both" in out


def test_overlapping_ports(pristine):
    rc, out = playbook("site.yml", "-e", '{"raygate_ports": {"dashboard": 6379}}')
    assert rc != 0
    assert "host node1:" in out and "6379" in out and "dashboard" in out


def test_worker_range_in_ephemeral_range(pristine):
    rc, out = playbook("site.yml", "-e", '{"raygate_ports": {"min_worker": 40000, "max_worker": 40999}}')
    assert rc != 0
    assert "ip_local_port_range" in out and "40000" in out
