"""Fabric detection against simulated sysfs trees, the simulated tools, and real tool outputs."""

import glob
import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

from ansible_collections.raygate.cluster.plugins.module_utils._runner import CommandError, CommandRunner
from ansible_collections.raygate.cluster.plugins.module_utils.net import fabric

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
SIM_DIR = os.path.join(REPO, "tests", "sandbox", "sim")
SAMPLES = os.path.join(REPO, "..", "shared", "samples")


def _load_sim():
    spec = importlib.util.spec_from_file_location("raygate_sim", os.path.join(SIM_DIR, "raygate_sim.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules["raygate_sim"] = module
    spec.loader.exec_module(module)
    return module


sim = _load_sim()


def tree(tmp_path, name="node", **fabric_spec):
    root = str(tmp_path / name)
    sim.build_tree(root, fabric_spec)
    return root


def tool(root, *args):
    env = dict(os.environ, RAYGATE_SIM_ROOT=root, LC_ALL="C")
    proc = subprocess.run(
        [os.path.join(SIM_DIR, "bin", args[0])] + list(args[1:]),
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )
    return proc.returncode, proc.stdout, proc.stderr


def sysfs_file(root, device, *parts):
    return os.path.join(root, "sys", "class", "infiniband", device, *parts)


def write(path, content):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(content + "\n")


# ------------------------------------------------------------------ sysfs + detect


def test_default_ib_node_is_eight_active_ndr_ports(tmp_path):
    root = tree(tmp_path, type="ib")
    result = fabric.detect(fabric.read_sysfs(root))
    assert result["fabric"] == "ib"
    assert result["active_ports"] == ["mlx5_%d:1" % i for i in range(8)]
    assert result["down_ports"] == []
    assert set(result["rate_gbps"].values()) == {400.0}
    assert len(result["netdevs"]) == 8 and all(n.startswith("ibp") for n in result["netdevs"])
    assert result["gid_index"] is None
    assert result["libfabric_efa"] is None
    assert result["warnings"] == []
    dev = result["devices"][0]
    assert dev["driver"] == "mlx5_core" and dev["kind"] == "ib"
    assert dev["ports"][0]["state"] == "ACTIVE" and dev["ports"][0]["phys_state"] == "LinkUp"
    assert dev["ports"][0]["link_layer"] == "InfiniBand"


def test_efa_node_like_p5(tmp_path):
    root = tree(tmp_path, type="efa")
    devices = fabric.read_sysfs(root)
    assert len(devices) == 32
    assert {d["driver"] for d in devices} == {"efa"} and {d["kind"] for d in devices} == {"efa"}
    assert devices[0]["ports"][0]["link_layer"] == "Unspecified"
    rc, out, _err = tool(root, "fi_info", "-p", "efa", "-t", "FI_EP_RDM")
    assert rc == 0
    result = fabric.detect(devices, fi_info=fabric.parse_fi_info(out), ibstat=[])
    assert result["fabric"] == "efa"
    assert len(result["active_ports"]) == 32 and set(result["rate_gbps"].values()) == {100.0}
    assert result["netdevs"] == [] and result["gid_index"] is None
    assert result["libfabric_efa"] is True
    # ibstat lists no EFA device (not an IB node type): no disagreement to report.
    assert result["warnings"] == []


def test_efa_without_libfabric_provider_warns(tmp_path):
    root = tree(tmp_path, type="efa", devices=2)
    result = fabric.detect(fabric.read_sysfs(root), fi_info=[])
    assert result["libfabric_efa"] is False
    assert any("no efa provider" in w for w in result["warnings"])


def test_roce_node_reports_gid_index_and_netdevs(tmp_path):
    root = tree(tmp_path, type="roce", devices=4)
    result = fabric.detect(fabric.read_sysfs(root))
    assert result["fabric"] == "roce"
    assert result["gid_index"] == 3
    assert result["netdevs"] == ["enp16s0np0", "enp21s0np0", "enp26s0np0", "enp31s0np0"]
    assert result["warnings"] == []
    port = result["devices"][0]["ports"][0]
    assert (port["link_layer"], port["rocev2_gid_index"], port["netdev"]) == ("Ethernet", 3, "enp16s0np0")


def test_no_rdma_hardware(tmp_path):
    net = tmp_path / "net"
    for name in ("lo", "eth0"):
        (net / name).mkdir(parents=True)
    root = str(tmp_path / "node")
    assert sim.build_tree(root, {"type": "none"}, net_target=str(net)) == []
    assert fabric.read_sysfs(root) == []
    assert fabric.read_netdevs(root) == ["eth0", "lo"]
    result = fabric.detect([], fi_info=[])
    assert (result["fabric"], result["active_ports"], result["libfabric_efa"]) == ("none", [], False)


def test_class_net_points_at_the_real_interfaces(tmp_path):
    root = tree(tmp_path, type="none")
    assert os.readlink(os.path.join(root, "sys", "class", "net")) == "/sys/class/net"


def test_ib_with_ports_down(tmp_path):
    root = tree(tmp_path, type="ib", down=[3, 5])
    result = fabric.detect(fabric.read_sysfs(root))
    assert result["fabric"] == "ib"
    assert result["down_ports"] == ["mlx5_3:1", "mlx5_5:1"]
    assert len(result["active_ports"]) == 6 and "mlx5_3:1" not in result["rate_gbps"]
    assert len(result["netdevs"]) == 6
    assert any("mlx5_3:1 (DOWN)" in w and "mlx5_5:1" in w for w in result["warnings"])
    down = fabric.read_sysfs(root)[3]["ports"][0]
    assert (down["state"], down["phys_state"]) == ("DOWN", "Polling")


def test_ib_node_ignores_its_ethernet_devices(tmp_path):
    root = tree(tmp_path, type="ib", eth_devices=2, eth_down=[1])
    devices = fabric.read_sysfs(root)
    assert [d["kind"] for d in devices] == ["ib"] * 8 + ["roce"] * 2
    result = fabric.detect(devices)
    assert result["fabric"] == "ib"
    assert result["active_ports"] == ["mlx5_%d:1" % i for i in range(8)]
    assert result["down_ports"] == []  # mlx5_9 is down, but it is not part of the IB fabric
    assert "mlx5_8:1" not in result["rate_gbps"]
    assert not any(n.startswith("enp") for n in result["netdevs"])
    assert result["warnings"] == []


@pytest.mark.parametrize("kind", ["ib", "efa", "roce"])
def test_all_ports_down_still_names_the_fabric(tmp_path, kind):
    root = tree(tmp_path, type=kind, devices=4, down=[0, 1, 2, 3])
    result = fabric.detect(fabric.read_sysfs(root))
    assert result["fabric"] == kind
    assert result["active_ports"] == [] and result["rate_gbps"] == {} and result["netdevs"] == []
    assert len(result["down_ports"]) == 4
    assert result["gid_index"] is None


def test_mixed_rates_warn(tmp_path):
    root = tree(tmp_path, type="roce", devices=2, eth_devices=1)
    result = fabric.detect(fabric.read_sysfs(root))
    assert result["rate_gbps"] == {"mlx5_0:1": 400.0, "mlx5_1:1": 400.0, "mlx5_2:1": 100.0}
    assert any("different rates" in w and "mlx5_2:1=100" in w for w in result["warnings"])


def test_efa_wins_over_ethernet_devices(tmp_path):
    root = tree(tmp_path, type="efa", devices=2, eth_devices=1)
    result = fabric.detect(fabric.read_sysfs(root))
    assert result["fabric"] == "efa"
    assert result["active_ports"] == ["rdmap16s0:1", "rdmap21s0:1"]


def test_gid_index_missing_on_one_port(tmp_path):
    root = tree(tmp_path, type="roce", devices=3)
    os.remove(sysfs_file(root, "mlx5_1", "ports", "1", "gid_attrs", "types", "3"))
    result = fabric.detect(fabric.read_sysfs(root))
    assert result["gid_index"] is None
    assert any("no IPv4 RoCE v2 GID on mlx5_1:1" in w for w in result["warnings"])


def test_gid_index_differs_between_ports(tmp_path):
    root = tree(tmp_path, type="roce", devices=2)
    port = sysfs_file(root, "mlx5_1", "ports", "1")
    write(os.path.join(port, "gids", "5"), "0000:0000:0000:0000:0000:ffff:0a64:0105")
    write(os.path.join(port, "gid_attrs", "types", "5"), "RoCE v2")
    write(os.path.join(port, "gid_attrs", "types", "3"), "IB/RoCE v1")
    devices = fabric.read_sysfs(root)
    assert [d["ports"][0]["rocev2_gid_index"] for d in devices] == [3, 5]
    result = fabric.detect(devices)
    assert result["gid_index"] is None
    assert any("differs" in w and "mlx5_0:1=3" in w and "mlx5_1:1=5" in w for w in result["warnings"])


def test_rocev2_gid_must_be_ipv4_mapped(tmp_path):
    root = tree(tmp_path, type="roce", devices=1)
    port = sysfs_file(root, "mlx5_0", "ports", "1")
    for index in ("2", "3"):
        os.remove(os.path.join(port, "gid_attrs", "types", index))
    # Index 1 is RoCE v2 but link-local IPv6: not what NCCL_IB_GID_INDEX should pick.
    assert fabric.read_sysfs(root)[0]["ports"][0]["rocev2_gid_index"] is None


def test_vpi_device_counts_only_its_infiniband_port(tmp_path):
    root = tree(tmp_path, type="ib", devices=1)
    port2 = sysfs_file(root, "mlx5_0", "ports", "2")
    write(os.path.join(port2, "state"), "4: ACTIVE")
    write(os.path.join(port2, "link_layer"), "Ethernet")
    result = fabric.detect(fabric.read_sysfs(root))
    assert result["fabric"] == "ib"
    assert result["active_ports"] == ["mlx5_0:1"]


def test_malformed_and_missing_files_give_none(tmp_path):
    root = tree(tmp_path, type="ib", devices=3)
    port0 = sysfs_file(root, "mlx5_0", "ports", "1")
    os.remove(os.path.join(port0, "rate"))
    write(os.path.join(port0, "state"), "garbage")
    os.remove(sysfs_file(root, "mlx5_1", "device"))
    os.remove(sysfs_file(root, "mlx5_1", "ports", "1", "link_layer"))
    shutil.rmtree(sysfs_file(root, "mlx5_2", "ports"))
    os.mkdir(sysfs_file(root, "mlx5_2", "ports"))
    os.mkdir(os.path.join(port0, "phys_state.d"))
    os.remove(os.path.join(port0, "phys_state"))
    os.rename(os.path.join(port0, "phys_state.d"), os.path.join(port0, "phys_state"))  # a dir: unreadable
    write(sysfs_file(root, "stray-file"), "not a device")
    devices = fabric.read_sysfs(root)
    assert [d["name"] for d in devices] == ["mlx5_0", "mlx5_1", "mlx5_2"]
    port = devices[0]["ports"][0]
    assert (port["rate_gbps"], port["state"], port["phys_state"]) == (None, "garbage", None)
    assert devices[1]["driver"] is None and devices[1]["kind"] == "other"
    assert devices[1]["ports"][0]["link_layer"] is None and devices[1]["ports"][0]["netdev"] is None
    assert devices[2]["ports"] == [] and devices[2]["kind"] == "other"
    result = fabric.detect(devices)
    assert result["fabric"] == "ib"
    assert result["active_ports"] == [] and result["down_ports"] == ["mlx5_0:1"]


def test_absent_or_unreadable_class_dir(tmp_path):
    assert fabric.read_sysfs(str(tmp_path / "nowhere")) == []
    assert fabric.read_netdevs(str(tmp_path / "nowhere")) == []
    write(str(tmp_path / "sys" / "class" / "infiniband"), "a file, not a dir")
    assert fabric.read_sysfs(str(tmp_path)) == []


def test_natural_device_order(tmp_path):
    root = tree(tmp_path, type="ib", devices=12)
    assert [d["name"] for d in fabric.read_sysfs(root)][-3:] == ["mlx5_9", "mlx5_10", "mlx5_11"]


def test_rebuild_replaces_the_tree(tmp_path):
    root = tree(tmp_path, type="ib")
    sim.build_tree(root, {"type": "efa", "devices": 2})
    assert [d["name"] for d in fabric.read_sysfs(root)] == ["rdmap16s0", "rdmap21s0"]
    assert sorted(os.listdir(root)) == ["sys"]  # no leftovers of the swap


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"type": "myrinet"}, "fabric.type"),
        ({"type": "ib", "rate": 300}, "fabric.rate"),
        ({"type": "ib", "devices": 2, "down": [2]}, r"no device \[2\]"),
        ({"type": "ib", "devices": -1}, "fabric.devices"),
        ({"type": "ib", "speed": 400}, "unknown fabric keys: speed"),
    ],
)
def test_bad_scenarios_are_refused(tmp_path, spec, message):
    with pytest.raises(sim.ScenarioError, match=message):
        sim.build_tree(str(tmp_path), spec)


# ----------------------------------------------------- simulators agree with sysfs

TOOL_STATE = {"ACTIVE": "Active", "DOWN": "Down"}


def tool_view(devices):
    """read_sysfs devices as ibstat would print them."""
    return {
        d["name"]: [
            (p["port"], TOOL_STATE[p["state"]], p["phys_state"], p["rate_gbps"], p["link_layer"]) for p in d["ports"]
        ]
        for d in devices
    }


def parsed_view(cas):
    return {
        ca["name"]: [(p["port"], p["state"], p["phys_state"], p["rate_gbps"], p["link_layer"]) for p in ca["ports"]]
        for ca in cas
    }


@pytest.mark.parametrize(
    "spec",
    [
        {"type": "ib", "down": [3], "eth_devices": 2, "eth_down": [0]},
        {"type": "roce", "devices": 12, "down": [5, 11], "rate": 200},
        {"type": "efa", "devices": 4, "down": [2]},
    ],
    ids=["ib", "roce", "efa"],
)
def test_simulated_tools_agree_with_sysfs(tmp_path, spec):
    root = tree(tmp_path, **spec)
    devices = fabric.read_sysfs(root)
    ib_type = [d for d in devices if d["kind"] != "efa"]
    rc, out, err = tool(root, "ibstat")
    assert (rc, err) == (0, "")
    ibstat = fabric.parse_ibstat(out)
    assert parsed_view(ibstat) == tool_view(ib_type)
    assert {ca["ca_type"] for ca in ibstat} <= {"MT4129", "MT4125"}
    rc, out, _err = tool(root, "ibv_devinfo", "-v")
    assert rc == 0
    devinfo = fabric.parse_ibv_devinfo(out)
    # ibv_devinfo also lists EFA devices, without a physical state (it prints one for IB transport only).
    expected = tool_view(devices)
    for dev in devices:
        if dev["kind"] == "efa":
            expected[dev["name"]] = [(n, s, None, r, ll) for n, s, _phys, r, ll in expected[dev["name"]]]
    assert parsed_view(devinfo) == expected
    rc, out, _err = tool(root, "ibv_devinfo")
    assert {p["rate_gbps"] for d in fabric.parse_ibv_devinfo(out) for p in d["ports"]} == {None}
    rc, out, err = tool(root, "fi_info", "-p", "efa", "-t", "FI_EP_RDM")
    fi_info = fabric.parse_fi_info(out + err)
    efa = [d["name"] for d in devices if d["kind"] == "efa"]
    assert [e["domain"] for e in fi_info] == [name + "-rdm" for name in efa]
    assert rc == (0 if efa else 61)
    result = fabric.detect(devices, fi_info=fi_info, ibstat=ibstat)
    assert not [w for w in result["warnings"] if "ibstat" in w or "fi_info" in w or "efa provider" in w]
    assert result["libfabric_efa"] is bool(efa)


def test_ibstat_options_and_errors(tmp_path):
    root = tree(tmp_path, type="ib", devices=3, down=[1])
    assert tool(root, "ibstat", "-l")[1] == "mlx5_0\nmlx5_1\nmlx5_2\n"
    rc, out, _err = tool(root, "ibstat", "mlx5_1")
    assert rc == 0 and [ca["name"] for ca in fabric.parse_ibstat(out)] == ["mlx5_1"]
    rc, out, _err = tool(root, "ibstat", "mlx5_1", "1")
    assert rc == 0 and out.startswith("CA: 'mlx5_1'\nPort 1:\nState: Down\n")
    assert fabric.parse_ibstat(out)[0]["ports"][0]["state"] == "Down"
    rc, out, _err = tool(root, "ibstat", "-s")
    assert rc == 0 and "Port 1:" not in out and out.count("CA '") == 3
    rc, out, err = tool(root, "ibstat", "mlx5_7")
    assert rc == 255 and out == "" and "ibpanic:" in err and "'mlx5_7' IB device can't be found" in err
    rc, out, err = tool(root, "ibstat", "--bogus")
    assert rc == 2


def test_ibv_devinfo_options_and_errors(tmp_path):
    root = tree(tmp_path, type="roce", devices=2)
    assert tool(root, "ibv_devinfo", "-l")[1] == "2 HCAs found:\n\tmlx5_0\n\tmlx5_1\n\n"
    rc, out, _err = tool(root, "ibv_devinfo", "-d", "mlx5_1")
    parsed = fabric.parse_ibv_devinfo(out)
    assert rc == 0 and [d["name"] for d in parsed] == ["mlx5_1"] and parsed[0]["ca_type"] == "MT4129"
    assert "vendor_id:\t\t\t0x02c9" in out and "transport:\t\t\tInfiniBand (0)" in out
    rc, _out, err = tool(root, "ibv_devinfo", "-d", "mlx5_9")
    assert (rc, err) == (255, "IB device 'mlx5_9' wasn't found\n")
    empty = tree(tmp_path, "empty", type="none")
    rc, _out, err = tool(empty, "ibv_devinfo")
    assert (rc, err) == (255, "No IB devices found\n")
    assert tool(empty, "ibv_devinfo", "-l")[1] == "0 HCAs found:\n\n"
    rc, out, err = tool(empty, "ibstat")
    assert (rc, out, err) == (0, "", "")


def test_fi_info_options_and_errors(tmp_path):
    root = tree(tmp_path, type="efa", devices=2)
    rc, out, _err = tool(root, "fi_info", "-p", "efa")
    types = [e["type"] for e in fabric.parse_fi_info(out)]
    assert rc == 0 and types == ["FI_EP_RDM", "FI_EP_DGRAM"] * 2
    rc, out, err = tool(root, "fi_info", "-p", "tcp")
    assert (rc, out, err) == (61, "", "fi_getinfo: -61 (No data available)\n")
    rc, _out, err = tool(root, "fi_info", "-t", "FI_EP_BOGUS")
    assert rc == 22 and "Unrecognized endpoint type" in err
    rc, out, _err = tool(root, "fi_info", "--version")
    assert rc == 0 and "libfabric api:" in out
    assert fabric.parse_fi_info(out) == []


def test_ibstat_disagreeing_with_sysfs_is_named(tmp_path):
    root = tree(tmp_path, type="ib", devices=4)
    ibstat = fabric.parse_ibstat(tool(root, "ibstat")[1])
    write(sysfs_file(root, "mlx5_2", "ports", "1", "state"), "1: DOWN")
    shutil.rmtree(sysfs_file(root, "mlx5_3"))
    result = fabric.detect(fabric.read_sysfs(root), ibstat=ibstat)
    assert "mlx5_2:1: ibstat says Active, sysfs says DOWN" in result["warnings"]
    assert "ibstat reports mlx5_3, which sysfs does not show" in result["warnings"]
    partial = [ca for ca in ibstat if ca["name"] != "mlx5_0"]
    result = fabric.detect(fabric.read_sysfs(root), ibstat=partial)
    assert "ibstat does not report mlx5_0, which sysfs shows" in result["warnings"]


def test_fi_info_efa_without_efa_devices_warns():
    entry = {"provider": "efa", "fabric": "efa", "domain": "rdmap16s0-rdm"}
    result = fabric.detect([], fi_info=[entry])
    assert result["libfabric_efa"] is True and result["fabric"] == "none"
    assert any("sysfs shows no EFA device" in w for w in result["warnings"])


# ------------------------------------------------------------------------- gather


class ScriptedRunner:
    """which() from a dict; run() answers from a dict of argv tuples, or raises CommandError."""

    def __init__(self, paths, answers):
        self.paths, self.answers, self.ran = paths, answers, []

    def which(self, name, extra_dirs=()):
        # As CommandRunner.which searches: the name on PATH, then in each extra dir.
        for key in [name] + [os.path.join(d, name) for d in extra_dirs]:
            if self.paths.get(key):
                return self.paths[key]
        return None

    def run(self, args):
        self.ran.append(list(args))
        answer = self.answers[tuple(args)]
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_gather_uses_the_tools_it_finds(tmp_path):
    root = tree(tmp_path, type="ib", devices=2)
    ibstat_out = tool(root, "ibstat")[1]
    runner = ScriptedRunner(
        {"/opt/amazon/efa/bin/fi_info": "/opt/amazon/efa/bin/fi_info", "ibstat": "/usr/sbin/ibstat"},
        {
            ("/opt/amazon/efa/bin/fi_info", "-p", "efa", "-t", "FI_EP_RDM"): (
                61,
                "",
                "fi_getinfo: -61 (No data available)\n",
            ),
            ("/usr/sbin/ibstat",): (0, ibstat_out, ""),
        },
    )
    result = fabric.gather(runner, root=root)
    assert runner.ran == [["/opt/amazon/efa/bin/fi_info", "-p", "efa", "-t", "FI_EP_RDM"], ["/usr/sbin/ibstat"]]
    assert result["tools"] == {"fi_info": "/opt/amazon/efa/bin/fi_info", "ibstat": "/usr/sbin/ibstat"}
    assert result["fabric"] == "ib" and result["active_ports"] == ["mlx5_0:1", "mlx5_1:1"]
    assert result["libfabric_efa"] is False
    assert result["warnings"] == []  # exit 61 is fi_info's "no provider" answer, not a failure
    assert result["interfaces"] == fabric.read_netdevs(root)


def test_gather_without_tools_and_with_failing_ones(tmp_path):
    root = tree(tmp_path, type="ib", devices=2)
    result = fabric.gather(ScriptedRunner({}, {}), root=root)
    assert result["tools"] == {"fi_info": None, "ibstat": None}
    assert result["libfabric_efa"] is None and result["fabric"] == "ib"
    partial = tool(root, "ibstat", "mlx5_0")[1]
    runner = ScriptedRunner(
        {"fi_info": "/usr/bin/fi_info", "ibstat": "/usr/sbin/ibstat"},
        {
            ("/usr/bin/fi_info", "-p", "efa", "-t", "FI_EP_RDM"): CommandError("fi_info did not finish within 30s"),
            ("/usr/sbin/ibstat",): (255, partial, "ibpanic: [9] main: stat of IB device 'mlx5_1' failed: Success\n"),
        },
    )
    result = fabric.gather(runner, root=root)
    assert result["libfabric_efa"] is None
    assert result["warnings"][:2] == [
        "fi_info did not finish within 30s",
        "ibstat exited 255: ibpanic: [9] main: stat of IB device 'mlx5_1' failed: Success",
    ]
    assert "ibstat does not report mlx5_1, which sysfs shows" in result["warnings"]


def test_gather_end_to_end_with_the_simulators(tmp_path):
    root = tree(tmp_path, type="efa", devices=3)
    path = os.pathsep.join([os.path.join(SIM_DIR, "bin"), os.environ.get("PATH", "/usr/bin:/bin")])
    runner = CommandRunner(timeout=30, base_env={"PATH": path, "RAYGATE_SIM_ROOT": root})
    result = fabric.gather(runner, root=root)
    assert result["tools"]["fi_info"] == os.path.join(SIM_DIR, "bin", "fi_info")
    assert result["fabric"] == "efa" and result["libfabric_efa"] is True
    assert result["active_ports"] == ["rdmap16s0:1", "rdmap21s0:1", "rdmap26s0:1"]
    assert result["warnings"] == []


# ------------------------------------------------------------------------ parsers


def test_parse_ibv_devinfo_verbose_rate_and_phys_state():
    text = (
        "hca_id:\tmlx5_0\n\ttransport:\t\t\tInfiniBand (0)\n\tvendor_id:\t\t\t0x02c9\n"
        "\tvendor_part_id:\t\t\t4129\n\tDevice ports:\n\t\tport:\t1\n"
        "\t\t\tstate:\t\t\tPORT_INIT (2)\n\t\t\tlink_layer:\t\tInfiniBand\n"
        "\t\t\tactive_width:\t\t4X (2)\n\t\t\tactive_speed:\t\t100.0 Gbps (128)\n"
        "\t\t\tphys_state:\t\tLINK_UP (5)\n\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:a088:c203:00da:6300\n"
    )
    (dev,) = fabric.parse_ibv_devinfo(text)
    assert dev["ca_type"] == "MT4129"
    assert dev["ports"] == [
        {"port": 1, "state": "Initializing", "phys_state": "LinkUp", "rate_gbps": 400.0, "link_layer": "InfiniBand"}
    ]


def test_parsers_take_empty_or_foreign_text():
    for parse in (fabric.parse_fi_info, fabric.parse_ibstat, fabric.parse_ibv_devinfo):
        assert parse("") == [] and parse(None) == []
        assert parse("bash: command not found\n") == []
    assert fabric.parse_fi_info("fi_getinfo: -61 (No data available)\n") == []
    assert fabric.parse_ibv_devinfo("No IB devices found\n") == []
    assert fabric.parse_rate("2.5 Gb/sec (1X SDR)") == 2.5
    assert fabric.parse_rate("56 (FDR10)") == 56.0
    assert fabric.parse_rate("n/a") is None


# ------------------------------------------------------------------ real samples

needs_samples = pytest.mark.skipif(not os.path.isdir(SAMPLES), reason="shared samples not present")


def sample(name):
    path = os.path.join(SAMPLES, name)
    if not os.path.exists(path):
        pytest.skip("sample %s not present" % name)
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def by_name(cas):
    return {ca["name"]: ca for ca in cas}


def port1(ca):
    p = ca["ports"][0]
    return (p["state"], p["phys_state"], p["rate_gbps"], p["link_layer"])


def as_sysfs(cas):
    """Tool-parsed CAs as read_sysfs devices, to run detect's rules on real nodes."""
    state = {"Active": "ACTIVE", "Down": "DOWN", "Initializing": "INIT", "Armed": "ARMED"}
    devices = []
    for ca in cas:
        ports = [dict(p, state=state.get(p["state"]), netdev=None, rocev2_gid_index=None) for p in ca["ports"]]
        devices.append(
            {"name": ca["name"], "driver": "mlx5_core", "kind": fabric.device_kind(None, ports), "ports": ports}
        )
    return devices


@needs_samples
@pytest.mark.parametrize(
    "pattern", ["fi_info_*.txt", "ibstat_*.txt", "ibv_devinfo_*.txt"], ids=["fi_info", "ibstat", "ibv_devinfo"]
)
def test_every_sample_parses_to_something(pattern):
    parse = {"fi_info": fabric.parse_fi_info, "ibstat": fabric.parse_ibstat, "ibv_devinfo": fabric.parse_ibv_devinfo}
    paths = glob.glob(os.path.join(SAMPLES, pattern))
    if not paths:
        pytest.skip("no %s samples" % pattern)
    for path in paths:
        assert os.path.exists(path + ".meta.md"), path
        with open(path, encoding="utf-8") as fh:
            parsed = parse[pattern.split("_*")[0]](fh.read())
        assert parsed, path


@needs_samples
def test_sample_fi_info_two_eks_pods():
    entries = fabric.parse_fi_info(sample("fi_info_p_efa_2pods_eks_g4dn.txt"))
    # One entry per MPI rank (pod), the ssh warnings and mpirun tags stripped.
    assert len(entries) == 2
    for entry in entries:
        assert entry == {
            "provider": "efa",
            "fabric": "efa",
            "domain": "rdmap197s0-rdm",
            "version": "116.10",
            "type": "FI_EP_RDM",
            "protocol": "FI_PROTO_EFA",
        }
    assert fabric.detect([], fi_info=entries)["libfabric_efa"] is True


@needs_samples
def test_sample_ibstat_a100_hdr_partial_output_before_ibpanic():
    cas = fabric.parse_ibstat(sample("ibstat_a100_azure_8xHDR_ibpanic_exit255.txt"))
    assert [ca["name"] for ca in cas] == ["mlx5_%d" % i for i in range(8)]
    assert {ca["ca_type"] for ca in cas} == {"MT4124"}
    assert {port1(ca) for ca in cas} == {("Active", "LinkUp", 200.0, "InfiniBand")}
    result = fabric.detect(as_sysfs(cas))
    assert (result["fabric"], len(result["active_ports"]), result["down_ports"]) == ("ib", 8, [])


@needs_samples
def test_sample_ibstat_h100_ndr_plus_bond():
    cas = by_name(fabric.parse_ibstat(sample("ibstat_h100_8xNDR400_all_active_plus_bond.txt")))
    ib = ["mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9"]
    assert sorted(cas) == sorted(ib + ["mlx5_bond_0"])
    for name in ib:
        assert cas[name]["ca_type"] == "MT4129"
        assert port1(cas[name]) == ("Active", "LinkUp", 400.0, "InfiniBand")
    assert cas["mlx5_bond_0"]["ca_type"] == "MT41692"
    assert port1(cas["mlx5_bond_0"]) == ("Active", "LinkUp", 200.0, "Ethernet")
    result = fabric.detect(as_sysfs(cas.values()))
    assert result["fabric"] == "ib"
    assert sorted(result["active_ports"]) == sorted(n + ":1" for n in ib)  # the bond is not IB
    assert set(result["rate_gbps"].values()) == {400.0}


@needs_samples
def test_sample_ibstat_h100_ib_active_eth_down():
    cas = by_name(fabric.parse_ibstat(sample("ibstat_h100_8xNDR_ib_active_eth_ports_down.txt")))
    assert len(cas) == 12
    ib = ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"]
    for name in ib:
        assert port1(cas[name]) == ("Active", "LinkUp", 400.0, "InfiniBand")
    for name in ("mlx5_2", "mlx5_7", "mlx5_8"):
        assert port1(cas[name]) == ("Down", "Disabled", 40.0, "Ethernet")
    assert port1(cas["mlx5_1"]) == ("Active", "LinkUp", 100.0, "Ethernet")
    result = fabric.detect(as_sysfs(cas.values()))
    # A healthy IB node: its Ethernet ports being down is none of the compute fabric's business.
    assert result["fabric"] == "ib"
    assert sorted(result["active_ports"]) == sorted(n + ":1" for n in ib)
    assert result["down_ports"] == [] and result["warnings"] == []


@needs_samples
def test_sample_ibstat_h100_roce_two_ports_down():
    cas = by_name(fabric.parse_ibstat(sample("ibstat_h100_roce_2of8_400G_down.txt")))
    assert len(cas) == 12
    assert {port1(ca)[3] for ca in cas.values()} == {"Ethernet"}
    cx7 = sorted(n for n, ca in cas.items() if ca["ca_type"] == "MT4129")
    cx6 = sorted(n for n, ca in cas.items() if ca["ca_type"] == "MT4125")
    assert len(cx7) == 8 and len(cx6) == 4
    down = sorted(n for n in cx7 if port1(cas[n])[0] == "Down")
    assert down == ["mlx5_11", "mlx5_5"]
    for name in down:
        assert port1(cas[name]) == ("Down", "Disabled", 40.0, "Ethernet")
    assert {port1(cas[n]) for n in cx7 if n not in down} == {("Active", "LinkUp", 400.0, "Ethernet")}
    assert {port1(cas[n]) for n in cx6} == {("Active", "LinkUp", 100.0, "Ethernet")}
    result = fabric.detect(as_sysfs(cas.values()))
    assert result["fabric"] == "roce"
    assert sorted(result["down_ports"]) == ["mlx5_11:1", "mlx5_5:1"]
    assert len(result["active_ports"]) == 10
    assert any("different rates" in w for w in result["warnings"])


@needs_samples
def test_sample_ibv_devinfo_connectx3_port2_down():
    devices = fabric.parse_ibv_devinfo(sample("ibv_devinfo_2x_connectx3_port2_down.txt"))
    assert [d["name"] for d in devices] == ["mlx4_1", "mlx4_0"]
    for dev in devices:
        assert dev["ca_type"] == "MT4099"
        assert [(p["port"], p["state"], p["link_layer"]) for p in dev["ports"]] == [
            (1, "Active", "InfiniBand"),
            (2, "Down", "InfiniBand"),
        ]
        # Without -v there is neither a rate nor a physical state to report.
        assert {(p["rate_gbps"], p["phys_state"]) for p in dev["ports"]} == {(None, None)}
    result = fabric.detect(as_sysfs(devices))
    assert sorted(result["active_ports"]) == ["mlx4_0:1", "mlx4_1:1"]
    assert sorted(result["down_ports"]) == ["mlx4_0:2", "mlx4_1:2"]
