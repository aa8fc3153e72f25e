"""The fabric simulators inside sandbox nodes: default IB scenario, switching a node to EFA,
and fabric detection (plugins/module_utils/net/fabric.py) run inside the nodes against them.

Needs root, `ip` and `unshare`; skipped otherwise. Replaces any sandbox that is up and
leaves none behind.
"""

import json
import os

import pytest
from sandbox_run import HERE, STATE, needs_sandbox, sandbox

from ansible_collections.raygate.cluster.plugins.module_utils.net import fabric

REPO = os.path.dirname(os.path.dirname(HERE))
SIM_ROOT = "/opt/raygate-sim"

pytestmark = needs_sandbox

# Runs inside a node with the node's python3. The checkout may not be visible there (CI
# clones under /tmp, which each node covers with its own tmpfs), so the module_utils are
# written into the node's /tmp as the package layout Ansible ships them in.
MODULE_UTILS = os.path.join(REPO, "plugins", "module_utils")
SOURCES = {}
for _name in ("net/__init__.py", "net/fabric.py", "_runner.py"):
    with open(os.path.join(MODULE_UTILS, _name)) as _fh:
        SOURCES[_name] = _fh.read()
DETECT = """
import json, os, sys
base = "/tmp/raygate-detect"
pkg = os.path.join(base, "ansible_collections", "raygate", "cluster", "plugins", "module_utils")
os.makedirs(os.path.join(pkg, "net"), exist_ok=True)
for name, text in %r.items():
    with open(os.path.join(pkg, name), "w") as fh:
        fh.write(text)
sys.path.insert(0, base)
from ansible_collections.raygate.cluster.plugins.module_utils.net import fabric
from ansible_collections.raygate.cluster.plugins.module_utils._runner import CommandRunner
result = fabric.gather(CommandRunner(timeout=60), root=%r)
result.pop("devices")
print(json.dumps(result))
""" % (SOURCES, SIM_ROOT)


def over_ssh(index, script, check=True):
    return sandbox("ssh", str(index), script, check=check)


def detect_in(index):
    return json.loads(sandbox("exec", str(index), "python3", "-c", DETECT).stdout)


def scenario_file(tmp_path, data, name="scenario.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


@pytest.fixture(scope="module")
def nodes():
    sandbox("up", "2")
    yield 2
    sandbox("down")


def test_default_scenario_is_an_ib_ndr_node(nodes):
    scenario = json.loads(sandbox("exec", "1", "cat", "/etc/raygate-sim/scenario.json").stdout)
    assert scenario["fabric"]["type"] == "ib" and scenario["fabric"]["devices"] == 8
    # Over SSH, as Ansible reaches the node: the simulated tools are on its PATH.
    assert over_ssh(1, "command -v ibstat fi_info ibv_devinfo").stdout.split() == [
        "/usr/local/bin/ibstat",
        "/usr/local/bin/fi_info",
        "/usr/local/bin/ibv_devinfo",
    ]
    cas = fabric.parse_ibstat(over_ssh(1, "ibstat").stdout)
    assert [ca["name"] for ca in cas] == ["mlx5_%d" % i for i in range(8)]
    for ca in cas:
        assert [(p["state"], p["rate_gbps"], p["link_layer"]) for p in ca["ports"]] == [("Active", 400.0, "InfiniBand")]
    # Per-node state lives in the node's copy-on-write /etc and /opt, not on the host.
    assert not os.path.exists("/etc/raygate-sim/scenario.json")
    assert os.path.exists(f"{STATE}/node1/upper/opt/raygate-sim/sys/class/infiniband/mlx5_7")


def test_switch_node2_to_efa(nodes, tmp_path):
    path = scenario_file(tmp_path, {"fabric": {"type": "efa"}, "gpus": {"count": 8}})
    sandbox("scenario", "2", path)
    result = over_ssh(2, "fi_info -p efa -t FI_EP_RDM")
    entries = fabric.parse_fi_info(result.stdout)
    assert len(entries) == 32
    assert {(e["provider"], e["type"], e["protocol"]) for e in entries} == {("efa", "FI_EP_RDM", "FI_PROTO_EFA")}
    assert all(e["domain"].startswith("rdmap") and e["domain"].endswith("-rdm") for e in entries)
    # ibstat lists no EFA device; node 1 is untouched and still has no efa provider.
    assert over_ssh(2, "ibstat; echo rc=$?").stdout == "rc=0\n"
    node1 = over_ssh(1, "fi_info -p efa -t FI_EP_RDM", check=False)
    assert (node1.returncode, node1.stderr.strip()) == (61, "fi_getinfo: -61 (No data available)")
    # Installing the same scenario again changes nothing and leaves no debris.
    sandbox("scenario", "2", path)
    assert sandbox("exec", "2", "ls", "-A", SIM_ROOT).stdout.split() == ["dev", "proc", "sys", "usr"]
    assert len(fabric.parse_fi_info(over_ssh(2, "fi_info -p efa -t FI_EP_RDM").stdout)) == 32


def test_bad_scenario_changes_nothing(nodes, tmp_path):
    before = sandbox("exec", "2", "cat", "/etc/raygate-sim/scenario.json").stdout
    result = sandbox("scenario", "2", scenario_file(tmp_path, {"fabric": {"type": "ib", "rate": 300}}), check=False)
    assert result.returncode != 0 and "fabric.rate" in result.stderr
    assert sandbox("exec", "2", "cat", "/etc/raygate-sim/scenario.json").stdout == before
    assert sandbox("scenario", "9", scenario_file(tmp_path, {}), check=False).returncode != 0


def test_detection_inside_the_nodes(nodes):
    ib = detect_in(1)
    assert ib["fabric"] == "ib"
    assert ib["active_ports"] == ["mlx5_%d:1" % i for i in range(8)]
    assert set(ib["rate_gbps"].values()) == {400.0}
    assert ib["tools"] == {"fi_info": "/usr/local/bin/fi_info", "ibstat": "/usr/local/bin/ibstat"}
    assert ib["libfabric_efa"] is False
    assert ib["warnings"] == []
    # <root>/sys/class/net is the node's own: only lo and eth0.
    assert ib["interfaces"] == ["eth0", "lo"]
    efa = detect_in(2)
    assert efa["fabric"] == "efa"
    assert len(efa["active_ports"]) == 32 and set(efa["rate_gbps"].values()) == {100.0}
    assert efa["libfabric_efa"] is True
    assert efa["warnings"] == []


def test_ports_down_scenario_is_seen_inside(nodes, tmp_path):
    sandbox("scenario", "1", scenario_file(tmp_path, {"fabric": {"type": "ib", "down": [2], "eth_devices": 1}}))
    result = detect_in(1)
    assert result["fabric"] == "ib"
    assert result["down_ports"] == ["mlx5_2:1"]
    assert len(result["active_ports"]) == 7 and "mlx5_8:1" not in result["active_ports"]


def test_down_removes_everything(nodes):
    sandbox("down")
    assert not os.path.exists(STATE)
    assert sandbox("status", check=False).returncode != 0
