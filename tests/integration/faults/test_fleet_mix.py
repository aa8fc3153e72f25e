"""The fault mix at fleet scale, small (issue 27, item 4): health.yml over 30 light sandbox nodes
with one node of each fault of bench/fault_mix.py, all in one run: dead (sshd gone), dark mid-run
(link down over a persisted connection), flaky (5% packet loss), slow (tools ten times slower),
hung (nvidia-smi never returns), a fatal Xid, and a degraded uplink only the pair tests find.

The run must end (no hang), and fault_mix.judge must find nothing wrong: the breaker holds, each of
the five that cannot be used is named with its own reason in the report and the run summary, and
every other node (the flaky and the slow one included) is in healthy_hosts.txt. bench/scale.py runs
the same mix on 5% of 1,000 nodes.

Run with the fault suite (`make faults`); it owns the sandbox while it runs (after test_faults.py's
3-node cluster is down).
"""

import json
import os
import re
import subprocess
import sys
import time

import pytest
from conftest import ROOT, SANDBOX, VENV_BIN, needs_root, run, scratch_inventory

sys.path.insert(0, os.path.join(ROOT, "bench"))
import fault_mix  # noqa: E402

pytestmark = needs_root

NODES = 30
MIX = fault_mix.assign(NODES, len(fault_mix.KINDS))
BY_KIND = {kind: index for index, kind in MIX.items()}
# A hang guard, not a timing assertion: a run that outlives it hung.
HANG = 600
QUERY_TIMEOUT = 10


def hosts_yml():
    lines = ["---", "ray_cluster:", "  children:", "    ray_head:", "      hosts:"]
    lines += ["        node1:", "          ansible_host: %s" % fault_mix.ip(1), "    ray_workers:", "      hosts:"]
    for i in range(2, NODES + 1):
        lines += ["        node%d:" % i, "          ansible_host: %s" % fault_mix.ip(i)]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    rc, out = run([SANDBOX, "up", str(NODES), "--light"], timeout=600)
    assert rc == 0, out
    base = tmp_path_factory.mktemp("fleet-mix")
    settings = "raygate_health_query_timeout: %d\n" % QUERY_TIMEOUT
    inv = scratch_inventory(base / "inventory", base, "fleet", hosts=hosts_yml(), settings=settings)
    yield {"base": base, "inv": inv}
    run(fault_mix.link_command(BY_KIND["dark"], True))
    run([SANDBOX, "down"], timeout=600)


def prepare(fleet):
    """Every fault but the dark node's, which goes dark once the run has started."""
    ping = fault_mix.apply(MIX, fleet["base"], os.path.join(VENV_BIN, "ansible"), fleet["inv"], playbook_env())
    assert ping.returncode == 0, ping.stdout[-3000:] + ping.stderr[-3000:]


def playbook_env():
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    env["ANSIBLE_COLLECTIONS_PATH"] = os.path.join(ROOT, ".build", "collections")
    return env


def health_run(fleet):
    """health.yml; the dark node's link goes down when the node play starts. (rc, output)."""
    args = [os.path.join(VENV_BIN, "ansible-playbook"), "-i", fleet["inv"], os.path.join(ROOT, "health.yml")]
    env = playbook_env()
    start = time.monotonic()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT,
                            stdin=subprocess.DEVNULL)  # fmt: skip
    lines, dark = [], False
    for line in proc.stdout:
        lines.append(line)
        if not dark and re.match(r"^PLAY \[Check the health of every node\]", line):
            rc, out = run(fault_mix.link_command(BY_KIND["dark"], False))
            assert rc == 0, out
            dark = True
        if time.monotonic() - start > HANG:
            proc.kill()
            pytest.fail("health.yml hung for more than %ss:\n%s" % (HANG, "".join(lines)[-4000:]))
    assert dark, "the node play never started:\n" + "".join(lines)[-4000:]
    return proc.wait(), "".join(lines)


def test_one_run_names_each_fault_with_its_own_reason_and_keeps_every_healthy_node(fleet):
    assert sorted(MIX.values()) == sorted(fault_mix.KINDS)
    prepare(fleet)
    rc, out = health_run(fleet)
    top = fleet["base"] / "health"
    report_dir = top / sorted(os.listdir(top))[-1]
    with open(report_dir / "report.json") as fh:
        report = json.load(fh)
    with open(report_dir / "healthy_hosts.txt") as fh:
        healthy = fh.read().split()
    with open(fleet["base"] / "runs" / "health.json") as fh:
        summary = json.load(fh)
    problems = fault_mix.judge(MIX, NODES, report, healthy, summary, QUERY_TIMEOUT)
    assert problems == [], "\n".join(problems) + "\n" + out[-6000:]
    assert summary["result"] == "degraded" and rc == 0, out[-6000:]
