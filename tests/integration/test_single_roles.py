"""Two of the component roles used alone in a user's own play (issue 42), on the sandbox's nodes:

- the health gate over a fleet with no Ray settings at all (no Ray version, CPUs or memory, no
  ray_head group): the node that fails leaves the play, so the user's next task runs on the healthy
  ones only, and the report names it with its reason;
- the firewall alone: the port plan open to the given sources only, on nftables, then closed again
  with raygate_firewall_state absent; a second run of each changes nothing.
"""

import glob
import json
import os

import pytest
import yaml
from conftest import ROOT, SANDBOX, VENV_BIN, node, recap, run

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root and the sandbox")

SCENARIOS = os.path.join(ROOT, "molecule", "health_gate", "scenarios")
# How a user reaches the nodes: the sandbox's connection settings, nothing of raygate's but the
# GPU checks' own (what the simulated nodes need: their sysfs root, kernel log and GPU model).
CONNECTION = """\
ansible_user: root
ansible_python_interpreter: /usr/bin/python3
ansible_ssh_private_key_file: /srv/raygate/sandbox/id_ed25519
ansible_ssh_common_args: -o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no -o ConnectTimeout=10
"""
# The health gate's fleet: no ray_head group, no Ray at all.
FLEET = """\
gpu_fleet:
  hosts:
    node1: {ansible_host: 198.18.0.11}
    node2: {ansible_host: 198.18.0.12}
    node3: {ansible_host: 198.18.0.13}
"""
# The firewall's: a Ray cluster's groups (the head opens what only the head listens on).
ADDRESSES = {"node1": "198.18.0.11", "node2": "198.18.0.12", "node3": "198.18.0.13"}
CLUSTER = yaml.safe_dump(
    {
        "gpu_fleet": {
            "children": {
                "ray_head": {"hosts": {"node1": {"ansible_host": ADDRESSES["node1"]}}},
                "ray_workers": {"hosts": {h: {"ansible_host": ADDRESSES[h]} for h in ("node2", "node3")}},
            }
        }
    }
)


def user_play(tmp_path, name, group_vars, tasks, hosts=FLEET):
    """A user's own inventory (group gpu_fleet) and playbook; returns (rc, output) of its run."""
    inv = tmp_path / ("inv-" + name)
    (inv / "group_vars").mkdir(parents=True, exist_ok=True)
    (inv / "hosts.yml").write_text(hosts)
    (inv / "group_vars" / "gpu_fleet.yml").write_text(CONNECTION + group_vars)
    (tmp_path / (name + ".yml")).write_text(tasks)
    cmd = [os.path.join(VENV_BIN, "ansible-playbook"), "-i", str(inv), str(tmp_path / (name + ".yml"))]
    return run(cmd, timeout=900)


HEALTH_PLAY = """\
- name: Gate the fleet, then use the healthy nodes
  hosts: gpu_fleet
  gather_facts: false
  roles:
    - role: raygate.cluster.health_gate
  tasks:
    - name: What a user does next, on the nodes that passed only
      ansible.builtin.copy:
        dest: /tmp/passed-the-gate
        content: "yes\\n"
        mode: "0644"
"""


def test_the_health_gate_role_alone_over_a_fleet_without_ray(sandbox3, tmp_path):
    reports = tmp_path / "health"
    settings = (
        "raygate_num_gpus: 8\nraygate_nccl_sysfs_root: /opt/raygate-sim\nraygate_health_sysfs_root: /opt/raygate-sim\n"
        "raygate_health_gpu_model: H100\nraygate_health_kernel_log: /var/log/kern.log\n"
        "raygate_health_dcgm_diag_level: 1\nraygate_health_report_dir: %s\n" % reports
    )
    rc, out = run([SANDBOX, "scenario", "3", os.path.join(SCENARIOS, "node3-remap-pending.json")])
    assert rc == 0, out
    default = tmp_path / "default.json"
    default.write_text("{}")
    try:
        for index in (1, 2, 3):
            node(index, "rm -f /tmp/passed-the-gate")
        rc, out = user_play(tmp_path, "gate", settings, HEALTH_PLAY)
        assert rc == 0, out
        passed = {i: node(i, "test -e /tmp/passed-the-gate")[0] == 0 for i in (1, 2, 3)}
        assert passed == {1: True, 2: True, 3: False}, out
        (path,) = glob.glob(os.path.join(str(reports), "*", "report.json"))
        with open(path, encoding="utf-8") as fh:
            report = json.load(fh)
        assert sorted(report["healthy"]) == ["node1", "node2"], report["message"]
        (bad,) = [n for n in report["nodes"] if n["host"] == "node3"]
        failed = [c["name"] for c in bad["checks"] if c["status"] == "fail"]
        assert any("remap" in name for name in failed), bad["checks"]
        # Nothing of Ray's was asked for or made: no virtualenv, no Ray process.
        for index in (1, 2, 3):
            rc, found = node(index, "ls -d /opt/raygate 2>/dev/null; pgrep -a -x raylet")
            assert found.strip() == "", "node%d: %s" % (index, found)
    finally:
        rc, out = run([SANDBOX, "scenario", "3", str(default)])
        assert rc == 0, out


FIREWALL_PLAY = """\
- name: Only the cluster's firewall
  hosts: gpu_fleet
  gather_facts: false
  roles:
    - role: raygate.cluster.firewall
"""


def test_the_firewall_role_alone_opens_the_plan_and_closes_it(sandbox3, tmp_path):
    settings = "raygate_firewall_sources: [198.18.0.0/24]\nraygate_firewall_backend: nftables\n"
    changed = []
    try:
        for state in ("present", "present", "absent", "absent"):
            rc, out = user_play(
                tmp_path, "fw", settings + "raygate_firewall_state: %s\n" % state, FIREWALL_PLAY, CLUSTER
            )
            assert rc == 0, out
            counts = recap(out)
            assert set(counts) == {"node1", "node2", "node3"}, out
            changed.append({host: int(c["changed"]) for host, c in counts.items()})
            ruleset = {i: node(i, "nft list ruleset")[1] for i in (1, 2, 3)}
            if state == "present":
                for index, text in ruleset.items():
                    # the plan's worker ports on every node, open to the sources given
                    assert "-10999 }" in text and "198.18.0.0/24" in text, "node%d: %s" % (index, text)
                # the GCS port (6379) only where the GCS listens: the head
                assert ["6379" in ruleset[i] for i in (1, 2, 3)] == [True, False, False], ruleset
            else:
                assert all("raygate" not in text for text in ruleset.values()), ruleset
        # the first run of each state changed every node; the second changed nothing
        assert [all(c.values()) for c in changed[0::2]] == [True, True], changed
        assert [any(c.values()) for c in changed[1::2]] == [False, False], changed
    finally:
        user_play(tmp_path, "fw", settings + "raygate_firewall_state: absent\n", FIREWALL_PLAY, CLUSTER)
