"""The GPU simulators (sim/gpu_sim.py) on this host, no sandbox: every tool runs as a subprocess
against scenario files in a tmp dir, and its output goes through OUR parsers
(plugins/module_utils/gate/gpu_parsers.py, nccl_parsers.py). A healthy node must parse clean; each
fault must show exactly in the field it is about and nowhere else. Where ../shared/samples is
present, the simulated output is also compared with real output for structure.
"""

import copy
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.raygate.cluster.plugins.module_utils import _runner
from ansible_collections.raygate.cluster.plugins.module_utils.gate import (
    device_access,
    fabric_counters,
    fingerprint,
    gpu_checks,
    gpu_parsers,
    nccl_parsers,
)
from ansible_collections.raygate.cluster.plugins.module_utils.net import fabric
from ansible_collections.raygate.cluster.plugins.modules import gpu_health, nccl_test

HERE = os.path.dirname(os.path.abspath(__file__))
SIM_DIR = os.path.join(HERE, "sim")
GPU_SIM = os.path.join(SIM_DIR, "gpu_sim.py")
RAYGATE_SIM = os.path.join(SIM_DIR, "raygate_sim.py")
SAMPLES = os.path.join(HERE, "..", "..", "..", "shared", "samples")
EPOCH = "1763719200"  # 2025-11-21T10:00:00Z
BUSES = ["0000:18:00", "0000:2a:00", "0000:3a:00", "0000:5d:00", "0000:9a:00", "0000:ab:00", "0000:ba:00", "0000:db:00"]
HOSTS = "127.0.0.1 localhost\n198.18.0.1 rg-host\n198.18.0.11 node1\n198.18.0.12 node2\n198.18.0.13 node3\n"
SWEEP = ["-b", "8", "-e", "16G", "-f", "2"]
PAIR = ["-np", "16", "-H", "node1:8,node2:8", "--allow-run-as-root", "-x", "NCCL_DEBUG=INFO"]

needs_samples = pytest.mark.skipif(not os.path.isdir(SAMPLES), reason="../shared/samples is not present")


class Sim:
    """Runs the simulated tools as node1 of a tmp world: its scenario, /etc/hosts, peers' scenarios."""

    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.scenarios = tmp_path / "scenarios"
        self.scenarios.mkdir()
        (tmp_path / "hosts").write_text(HOSTS)
        self.scenario({})

    def scenario(self, data, host=None):
        """node1's own scenario (host None), or a peer's as published by sandbox.sh scenario."""
        path = self.tmp / "scenario.json" if host is None else self.scenarios / ("%s.json" % host)
        path.write_text(json.dumps(data))

    def env(self, extra=None, hostname="node1"):
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LC_ALL": "C",
            "RAYGATE_SIM_SCENARIO": str(self.tmp / "scenario.json"),
            "RAYGATE_SIM_SCENARIOS_DIR": str(self.scenarios),
            "RAYGATE_SIM_HOSTS_FILE": str(self.tmp / "hosts"),
            "RAYGATE_SIM_HOSTNAME": hostname,
            "RAYGATE_SIM_EPOCH": EPOCH,
        }
        env.update(extra or {})
        return env

    def run(self, tool, *args, env=None, hostname="node1"):
        cmd = [sys.executable, "-B", GPU_SIM, "tool", tool, tool, *args]
        return subprocess.run(cmd, capture_output=True, text=True, env=self.env(env, hostname), timeout=60, check=False)

    def ok(self, tool, *args, **kw):
        result = self.run(tool, *args, **kw)
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout

    def build(self, root=None):
        root = root or self.tmp / "root"
        cmd = [sys.executable, "-B", RAYGATE_SIM, "build", "--scenario", str(self.tmp / "scenario.json")]
        subprocess.run(cmd + ["--root", str(root)], check=True, capture_output=True, env=self.env())
        return root


@pytest.fixture
def sim(tmp_path):
    return Sim(tmp_path)


def gpu_spec(*faults, **keys):
    spec = dict(keys)
    spec["faults"] = list(faults)
    return {"gpu": spec}


# ------------------------------------------------------------------------- node summary


def summary(sim):
    """Every field the gpu_health checks read, from the simulated node, through our parsers."""
    nvsmi = gpu_parsers.parse_nvsmi_xml(sim.ok("nvidia-smi", "-q", "-x"))
    nvlink = gpu_parsers.parse_nvlink_status(sim.ok("nvidia-smi", "nvlink", "-s"))
    dcgm = gpu_parsers.parse_dcgmi_diag(sim.ok("dcgmi", "diag", "-r", "2", "-j"))
    root = sim.build()
    kern = (root / "var" / "log" / "kern.log").read_text()
    kernel = gpu_parsers.parse_kernel_log(kern)
    version = root / "proc" / "driver" / "nvidia" / "version"
    gpus = {}
    for g in nvsmi["gpus"]:
        gpus[g["index"]] = {
            "name": g["name"],
            "pci": g["pci_bus_id"],
            "persistence": g["persistence_mode"],
            "ecc_mode": g["ecc_mode_current"],
            "ecc": g["ecc_errors"],
            "retired_pending": g["retired_pages"]["pending"],
            "remapped": g["remapped_rows"],
            "pcie": g["pcie"],
            "slowdown": (g["clocks_event_reasons"]["hw_slowdown"], g["clocks_event_reasons"]["hw_thermal_slowdown"]),
            "fabric": g["fabric"],
            "mig": g["mig_mode"],
            "links_down": [x["link"] for x in nvlink[g["index"]] if x["state"] != "up"],
            "links": len(nvlink[g["index"]]),
        }
    return {
        "driver": nvsmi["driver_version"],
        "cuda": nvsmi["cuda_version"],
        "attached": nvsmi["attached_gpus"],
        "gpus": gpus,
        "dcgm": (dcgm["overall"], [(t["name"], t["gpus"]) for t in dcgm["tests"] if t["status"] != "pass"]),
        "xids": [(x["xid"], x["pci"]) for x in gpu_parsers.parse_xids(kern)],
        "nvrm": [(e["kind"], e["pci"]) for e in kernel["nvrm"]],
        "sxids": [(x["sxid"], x["pci"], x["fatal"], x["link"]) for x in kernel["sxids"]],
        "peermem": (root / "sys" / "module" / "nvidia_peermem" / "initstate").exists(),
        "open_module": version.exists() and "Open Kernel Module" in version.read_text(),
    }


@pytest.fixture(scope="module")
def healthy(tmp_path_factory):
    return summary(Sim(tmp_path_factory.mktemp("healthy")))


def test_healthy_default_is_eight_clean_h100(healthy):
    assert (healthy["driver"], healthy["cuda"], healthy["attached"]) == ("550.90.07", "12.4", 8)
    assert sorted(healthy["gpus"]) == list(range(8))
    zero = {"sram_correctable": 0, "sram_uncorrectable": 0, "dram_correctable": 0, "dram_uncorrectable": 0}
    for index, g in healthy["gpus"].items():
        assert g["name"] == "NVIDIA H100 80GB HBM3"
        assert g["pci"].lower() == "0000" + BUSES[index] + ".0"
        assert (g["persistence"], g["ecc_mode"], g["mig"]) == ("Enabled", "Enabled", "Disabled")
        assert g["ecc"] == {"volatile": zero, "aggregate": zero}
        assert g["retired_pending"] is not True
        assert g["remapped"] == {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}
        assert g["pcie"] == {"gen_current": 5, "gen_max": 5, "width_current": 16, "width_max": 16}
        assert g["slowdown"] == (False, False)
        assert g["fabric"] == {"state": "Completed", "status": "Success"}
        assert (g["links"], g["links_down"]) == (18, [])
    assert healthy["dcgm"] == ("pass", [])
    assert healthy["xids"] == [] and healthy["nvrm"] == [] and healthy["sxids"] == []
    assert healthy["peermem"] and healthy["open_module"]


def test_healthy_details(sim):
    xml = sim.ok("nvidia-smi", "-q", "-x")
    assert '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">' in xml and "<!ENTITY" not in xml
    uuids = [g["uuid"] for g in gpu_parsers.parse_nvsmi_xml(xml)["gpus"]]
    assert len(set(uuids)) == 8 and all(re.match(r"^GPU-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}$", u) for u in uuids)
    listing = sim.ok("nvidia-smi", "-L").splitlines()
    assert listing == ["GPU %d: NVIDIA H100 80GB HBM3 (UUID: %s)" % (i, u) for i, u in enumerate(uuids)]
    links = gpu_parsers.parse_nvlink_status(sim.ok("nvidia-smi", "nvlink", "-s", "-i", "3"))
    assert list(links) == [3] and {x["speed_gbps"] for x in links[3]} == {26.562}
    csv = sim.ok("nvidia-smi", "--query-gpu=index,pci.bus_id,memory.total,remapped_rows.pending", "--format=csv")
    assert csv.splitlines()[:2] == [
        "index, pci.bus_id, memory.total [MiB], remapped_rows.pending",
        "0, 00000000:18:00.0, 81559 MiB, No",
    ]
    bare = sim.ok("nvidia-smi", "--query-gpu=uuid,memory.total", "--format=csv,noheader,nounits", "-i", "1")
    assert bare == "%s, 81559\n" % uuids[1]
    # Output is a function of the scenario and the host name only.
    assert sim.ok("nvidia-smi", "-q", "-x") == xml
    assert sim.ok("nvidia-smi", "-q", "-x", hostname="node2") != xml
    table = gpu_parsers.parse_dcgmi_diag(sim.ok("dcgmi", "diag", "-r", "3"))
    assert table["overall"] == "pass" and table["metadata"]["Driver Version Detected"] == "550.90.07"
    assert {t["category"] for t in table["tests"]} == {"Deployment", "Integration", "Hardware", "Stress"}


def test_h200_model(sim):
    sim.scenario(gpu_spec(model="H200", count=4, driver="570.86.15", cuda="12.8"))
    parsed = gpu_parsers.parse_nvsmi_xml(sim.ok("nvidia-smi", "-q", "-x"))
    assert (parsed["driver_version"], parsed["cuda_version"], parsed["attached_gpus"]) == ("570.86.15", "12.8", 4)
    assert {g["name"] for g in parsed["gpus"]} == {"NVIDIA H200"}


# Each fault and what it must change in the healthy summary (and nothing else).
def _set(path, value):
    def apply(s):
        node = s
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return apply


def _all_gpus(key, value):
    def apply(s):
        for g in s["gpus"].values():
            g[key] = value

    return apply


def _ecc(index, field, value):
    def apply(s):
        for block in ("volatile", "aggregate"):
            s["gpus"][index]["ecc"][block][field] = value

    return apply


def _drop(*indexes):
    def apply(s):
        for i in indexes:
            del s["gpus"][i]
        s["attached"] -= len(indexes)

    return apply


def _ecc_off(index):
    def apply(s):
        s["gpus"][index]["ecc_mode"] = "Disabled"
        for block in ("volatile", "aggregate"):
            s["gpus"][index]["ecc"][block] = dict.fromkeys(s["gpus"][index]["ecc"][block])

    return apply


FAULT_CASES = {
    "ecc_uncorrectable": ({"type": "ecc_uncorrectable", "gpu": 2, "count": 3}, [_ecc(2, "dram_uncorrectable", 3)]),
    "ecc_correctable": (
        {"type": "ecc_correctable", "gpu": 1, "count": 250, "kind": "sram"},
        [_ecc(1, "sram_correctable", 250)],
    ),
    "ecc_correctable_dram": ({"type": "ecc_correctable", "gpu": 6}, [_ecc(6, "dram_correctable", 200)]),
    "ecc_disabled": ({"type": "ecc_disabled", "gpu": 4}, [_ecc_off(4)]),
    "persistence_off": ({"type": "persistence_off"}, [_all_gpus("persistence", "Disabled")]),
    "retired_pending": ({"type": "retired_pending", "gpu": 5}, [_set(["gpus", 5, "retired_pending"], True)]),
    "remap_pending": (
        {"type": "remap_pending", "gpu": 3},
        [_set(["gpus", 3, "remapped", "pending"], True), _set(["gpus", 3, "remapped", "uncorrectable"], 1)],
    ),
    "remap_failure": ({"type": "remap_failure", "gpu": 6}, [_set(["gpus", 6, "remapped", "failure"], True)]),
    "xid": ({"type": "xid", "xid": 79, "gpu": 3}, [_set(["xids"], [(79, "0000:5d:00")])]),
    "xid_app": ({"type": "xid", "xid": 13}, [_set(["xids"], [(13, "0000:18:00")])]),
    "fallen_off_bus": (
        {"type": "fallen_off_bus", "gpu": 3},
        [_set(["nvrm"], [("fallen_off_bus", "0000:5d:00"), ("probe_failed", "0000:5d:00")])],
    ),
    "sxid": (
        {"type": "sxid", "sxid": 20034, "switch": 1, "port": 28},
        [_set(["sxids"], [(20034, "0000:c3:00.0", f, link) for f, link in ((None, None), (True, 28), (None, None))])],
    ),
    "nvlink_down": ({"type": "nvlink_down", "gpu": 2, "link": 5}, [_set(["gpus", 2, "links_down"], [5])]),
    "pcie_downgraded": (
        {"type": "pcie_downgraded", "gpu": 7},
        [_set(["gpus", 7, "pcie"], {"gen_current": 3, "gen_max": 5, "width_current": 8, "width_max": 16})],
    ),
    "missing_gpu": ({"type": "missing_gpu", "count": 2}, [_drop(6, 7)]),
    "thermal_throttle": ({"type": "thermal_throttle", "gpu": 0}, [_set(["gpus", 0, "slowdown"], (True, True))]),
    "fabric_manager_down": (
        {"type": "fabric_manager_down"},
        [_all_gpus("fabric", {"state": "In Progress", "status": None})],
    ),
    "dcgm_fail": ({"type": "dcgm_fail", "gpu": 3}, [_set(["dcgm"], ("fail", [("GPU Memory", [3])]))]),
    "dcgm_fail_deployment": (
        {"type": "dcgm_fail", "test": "Page Retirement/Row Remap", "gpu": 1},
        [_set(["dcgm"], ("fail", [("Page Retirement/Row Remap", [1])]))],
    ),
    "no_gdr": ({"type": "no_gdr"}, [_set(["peermem"], False), _set(["open_module"], False)]),
    "socket_fallback": ({"type": "socket_fallback"}, []),
    "low_bandwidth": ({"type": "low_bandwidth", "factor": 0.25}, []),
    "wrong_values": ({"type": "wrong_values"}, []),
    "nccl_abort": ({"type": "nccl_abort"}, []),
}


@pytest.mark.parametrize("case", sorted(FAULT_CASES))
def test_each_fault_shows_only_where_expected(sim, healthy, case):
    fault, changes = FAULT_CASES[case]
    sim.scenario(gpu_spec(fault))
    expected = copy.deepcopy(healthy)
    for change in changes:
        change(expected)
    assert summary(sim) == expected


def test_nvlink_all_down_and_dcgm_text_table(sim):
    down = [{"type": "nvlink_down", "gpu": 1, "link": link} for link in range(18)]
    sim.scenario(gpu_spec(*down, {"type": "dcgm_fail", "gpu": 5}))
    text = sim.ok("nvidia-smi", "nvlink", "-s")
    assert "NVML: Unable to retrieve NVLink information as all links are inactive" in text
    assert gpu_parsers.parse_nvlink_status(text)[1] == []
    table = gpu_parsers.parse_dcgmi_diag(sim.ok("dcgmi", "diag", "-r", "2"))
    assert table["overall"] == "fail"
    assert [(t["name"], t["status"], t["gpus"]) for t in table["tests"] if t["status"] != "pass"] == [
        ("GPU Memory", "fail", [5])
    ]
    # A level that does not run the named test does not report it.
    assert gpu_parsers.parse_dcgmi_diag(sim.ok("dcgmi", "diag", "-r", "1", "-j"))["overall"] == "pass"


def test_no_gpu_model(sim):
    sim.scenario({"gpu": {"model": "none"}})
    result = sim.run("nvidia-smi", "-q", "-x")
    assert result.returncode == 9 and "couldn't communicate with the NVIDIA driver" in result.stdout
    assert sim.run("dcgmi", "diag", "-r", "1").returncode != 0
    perf = sim.run("all_reduce_perf", "-g", "8")
    assert perf.returncode != 0 and "CUDA driver version is insufficient" in perf.stdout
    assert nccl_parsers.parse_nccl_tests(perf.stdout)["aborted"]
    root = sim.build()
    assert not (root / "proc" / "driver" / "nvidia").exists()
    assert not (root / "sys" / "module" / "nvidia_peermem").exists()
    assert (root / "sys" / "class" / "infiniband" / "mlx5_0").is_dir()


def test_bad_options_fail_like_the_tools(sim):
    smi = sim.run("nvidia-smi", "--bogus")
    assert smi.returncode == 2 and "Please run 'nvidia-smi -h'" in smi.stdout
    field = sim.run("nvidia-smi", "--query-gpu=index,nonsense", "--format=csv")
    assert field.returncode == 2 and 'Field "nonsense" is not a valid field to query.' in field.stdout
    assert sim.run("nvidia-smi", "-i", "9", "-L").returncode == 6
    assert sim.run("dcgmi", "diag", "-r", "7").returncode != 0
    assert sim.run("dcgmi", "diag", "--nope").returncode != 0
    perf = sim.run("all_reduce_perf", "-q", "1")
    assert perf.returncode != 0 and "USAGE: all_reduce_perf" in perf.stdout
    mpi = sim.run("mpirun", "--no-such-thing", "all_reduce_perf")
    assert mpi.returncode != 0 and 'unknown option "--no-such-thing"' in mpi.stderr


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"model": "A100"}, "gpu.model"),
        ({"count": 9}, "gpu.count"),
        ({"faults": [{"type": "meltdown"}]}, "gpu.faults[0].type"),
        ({"faults": [{"type": "xid", "gpu": 8}]}, "bad gpu 8"),
        ({"faults": [{"type": "low_bandwidth", "factor": 2}]}, "bad factor"),
        ({"faults": [{"type": "low_bandwidth", "scope": "pair"}]}, "bad scope"),
        ({"faults": [{"type": "missing_gpu", "count": 8}]}, "at least one"),
        ({"nvswitch": False, "faults": [{"type": "fabric_manager_down"}]}, "nvswitch"),
        ({"nvswitch": False, "faults": [{"type": "sxid"}]}, "sxid needs nvswitch: true"),
        ({"faults": [{"type": "sxid", "switch": 4}]}, "bad switch 4"),
        ({"faults": [{"type": "sxid", "sxid": 79}]}, "bad sxid 79"),
        ({"colour": "green"}, "unknown gpu keys"),
        ({"vbios": "96.00"}, "gpu.vbios"),
        ({"vbios": {"8": "96.00.99.00.01"}}, "no GPU '8'"),
        ({"nccl": "2.21"}, "gpu.nccl"),
    ],
)
def test_bad_gpu_scenarios_change_nothing(sim, bad, message):
    path = sim.tmp / "node.json"
    path.write_text('{"fabric": {"type": "ib"}}')
    cmd = [sys.executable, "-B", RAYGATE_SIM, "set-scenario", "--scenario", str(path), "--root", str(sim.tmp / "r")]
    result = subprocess.run(
        cmd, input=json.dumps({"gpu": bad}), capture_output=True, text=True, env=sim.env(), check=False
    )
    assert result.returncode == 2 and message in result.stderr
    assert path.read_text() == '{"fabric": {"type": "ib"}}'


def test_build_keeps_the_fabric_tree_and_replaces_gpu_files(sim):
    sim.scenario({"fabric": {"type": "efa", "devices": 2}, "gpu": {"faults": [{"type": "xid", "xid": 48, "gpu": 1}]}})
    root = sim.build()
    assert sorted(os.listdir(root / "sys" / "class" / "infiniband")) == ["rdmap16s0", "rdmap21s0"]
    assert (root / "sys" / "module" / "nvidia_peermem" / "initstate").read_text() == "live\n"
    assert sorted(os.listdir(root)) == ["dev", "proc", "sys", "usr", "var"]
    assert os.listdir(root / "usr" / "lib" / "x86_64-linux-gnu") == ["libnccl.so.2.21.5"]
    kern = (root / "var" / "log" / "kern.log").read_text()
    xids = gpu_parsers.parse_xids(kern)
    assert [(x["xid"], x["pci"], x["clock"]) for x in xids] == [(48, "0000:2a:00", "boot")]
    assert re.match(r"^\w{3} [ \d]\d \d\d:\d\d:\d\d node1 kernel: \[ *\d+\.\d{6}\] NVRM: Xid", kern.splitlines()[-1])
    sim.scenario({"gpu": {"faults": [{"type": "no_gdr"}]}})
    sim.build(root)
    assert not (root / "sys" / "module" / "nvidia_peermem").exists()
    assert (root / "sys" / "class" / "infiniband" / "mlx5_7").is_dir()
    assert gpu_parsers.parse_xids((root / "var" / "log" / "kern.log").read_text()) == []


def test_build_makes_the_driver_device_files_its_params_say(sim):
    """As on the H100 of shared/DESIGN.md's device run: 0666 root:root and DeviceFileMode 438 by default;
    a device_files fault narrows both, which gpu_health's device_access reads."""
    sim.scenario(gpu_spec(count=2))
    root = sim.build()
    names = [os.path.basename(p) for p in device_access.device_files(str(root / "dev"))]
    assert names == ["nvidiactl", "nvidia-uvm", "nvidia0", "nvidia1"]
    first = device_access.describe(str(root / "dev" / "nvidia0"))
    assert (first["mode"][1:], first["owner"], first["group"]) == ("rw-rw-rw-", "root", "root")
    params = device_access.read_params(str(root))
    assert params == {"DeviceFileUID": 0, "DeviceFileGID": 0, "DeviceFileMode": 0o666}
    sim.scenario(gpu_spec({"type": "device_files"}, count=2))
    sim.build(root)
    narrowed = device_access.describe(str(root / "dev" / "nvidiactl"))
    assert (narrowed["mode"][1:], narrowed["group"], narrowed["group_rw"]) == ("rw-rw----", "video", True)
    assert device_access.read_params(str(root))["DeviceFileMode"] == 0o660
    sim.scenario({"gpu": {"model": "none"}})
    sim.build(root)
    assert device_access.device_files(str(root / "dev")) == []


# NVIDIA/nvtrust issue 124: a real non-fatal SXid event (Data, the Non-fatal line, Severity).
REAL_SXID = """[   38.175561] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Data {0x0000002b, 0x0000002b, 0x00000000, 0x0000002b, 0x80005302, 0x00000000, 0x00000000, 0x00000000, 0x00000000}
[   38.178720] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal, Link 44 Minion Link DLREQ interrupt
[   38.180708] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Severity 0 Engine instance 44 Sub-engine instance 00
"""  # noqa: E501
# NVIDIA/NVSentinel issue 155: the driver's three-line fallen-off-the-bus record, as dmesg shows it.
REAL_FALLEN = """[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0
               NVRM: (PCI ID: 10de:26b5) installed in this system has
               NVRM: fallen off the bus and is not responding to commands.
[ 1843.439662] NVRM: The NVIDIA probe routine failed for 1 device(s).
"""


def _kernel_checks(kern, gpus):
    parsed = gpu_parsers.parse_kernel_log(kern)
    return (
        gpu_checks.check_xid(parsed["xids"], gpus),
        gpu_checks.check_sxid(parsed["sxids"]),
        gpu_checks.check_kernel_errors(parsed["nvrm"], parsed["denied"], gpus),
    )


def test_kernel_log_faults_fail_gpu_healths_checks(sim):
    faults = [
        {"type": "fallen_off_bus", "gpu": 3},
        {"type": "sxid", "sxid": 20034, "switch": 1, "port": 28},
        {"type": "sxid", "sxid": 22013, "switch": 0, "port": 44},
    ]
    sim.scenario(gpu_spec(*faults))
    kern = (sim.build() / "var" / "log" / "kern.log").read_text()
    gpus = gpu_parsers.parse_nvsmi_xml(sim.ok("nvidia-smi", "-q", "-x"))["gpus"]
    xid, sxid, kernel = _kernel_checks(kern, gpus)
    assert xid["status"] == "pass"
    assert (sxid["status"], sxid["severity"], sxid["action"]) == ("fail", "do-not-allocate", "reboot the node")
    assert sxid["detail"].startswith("SXid 20034 [fatal] on nvidia-nvswitch1 (0000:c3:00.0) link 28 x3")
    assert "SXid 22013 [info] on nvidia-nvswitch0 (0000:c2:00.0) link 44 x3" in sxid["detail"]
    assert (kernel["status"], kernel["action"]) == ("fail", "reboot the node")
    assert kernel["detail"].startswith("GPU has fallen off the bus (no Xid")
    assert "on GPU 3 (0000:5d:00)" in kernel["detail"]
    # Only the fault's own lines: a healthy build judges clean.
    sim.scenario({})
    clean = _kernel_checks((sim.build() / "var" / "log" / "kern.log").read_text(), gpus)
    assert [r["status"] for r in clean] == ["pass", "pass", "pass"]


def test_kernel_log_fault_lines_have_the_real_shape(sim):
    sim.scenario(gpu_spec({"type": "fallen_off_bus", "gpu": 1}, {"type": "sxid", "sxid": 22013, "port": 44}))
    kern = (sim.build() / "var" / "log" / "kern.log").read_text()

    number = re.compile(r"0x[0-9a-f]+|[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}(?:\.\d)?|[0-9a-f]{4}:[0-9a-f]{4}|\d+")

    def shape(text, keep):
        # The message part of the matching lines (no time, host or prefix), numbers and addresses as N.
        lines = [x for x in text.splitlines() if keep(x)]
        return [number.sub("N", re.sub(r"^.*?(NVRM:|nvidia-nvswitch)", r"\1", x)) for x in lines]

    def sxid(x):
        return "nvidia-nvswitch" in x

    def record(x):
        return "NVRM: The NVIDIA GPU" in x or x.startswith("               NVRM:")

    assert shape(kern, sxid) == shape(REAL_SXID, sxid)
    assert shape(kern, record) == shape(REAL_FALLEN, record)
    parsed = [gpu_parsers.parse_kernel_log(t) for t in (kern, REAL_FALLEN + REAL_SXID)]
    assert [[e["kind"] for e in p["nvrm"]] for p in parsed] == [["fallen_off_bus", "probe_failed"]] * 2
    assert [[s["fatal"] for s in p["sxids"]] for p in parsed] == [[None, False, None]] * 2


def test_tool_wrappers(sim, tmp_path):
    for tool in ("nvidia-smi", "dcgmi", "all_reduce_perf", "mpirun"):
        path = os.path.join(SIM_DIR, "bin", tool)
        assert os.stat(path).st_mode & 0o777 == 0o755
        with open(path) as fh:
            assert 'gpu_sim.py" tool %s "$0" "$@"' % tool in fh.read()
    link = tmp_path / "nvidia-smi"
    link.symlink_to(os.path.join(SIM_DIR, "bin", "nvidia-smi"))
    result = subprocess.run([str(link), "-L"], capture_output=True, text=True, env=sim.env(), check=False)
    assert result.returncode == 0 and len(result.stdout.splitlines()) == 8


# ---------------------------------------------------------------------------- port counters


def counters_dir(root, device, where="counters"):
    if where == "device":
        return root / "sys" / "class" / "infiniband" / device / "hw_counters"
    return root / "sys" / "class" / "infiniband" / device / "ports" / "1" / where


def read_counter(root, device, name, where="counters"):
    return int((counters_dir(root, device, where) / name).read_text())


def test_healthy_trees_have_zero_errors_and_busy_traffic_counters(sim):
    sim.scenario({"fabric": {"type": "ib", "devices": 2, "down": [1]}})
    root = sim.build()
    pma = counters_dir(root, "mlx5_0")
    assert {"symbol_error", "link_downed", "excessive_buffer_overrun_errors", "port_xmit_data"} <= set(os.listdir(pma))
    assert read_counter(root, "mlx5_0", "symbol_error") == 0
    # Traffic counters read like a node that has run things; a down port has moved less.
    assert read_counter(root, "mlx5_0", "port_xmit_data") > 10**9 > read_counter(root, "mlx5_1", "port_xmit_data") > 0
    assert (counters_dir(root, "mlx5_0", "hw_counters") / "lifespan").read_text() == "10\n"
    devices = fabric.read_sysfs(str(root))
    snap = fabric_counters.snapshot(str(root), devices)
    assert sorted(snap) == ["mlx5_0:1", "mlx5_1:1"]
    assert {v for values in snap.values() for v in values.values()} == {0}
    sim.scenario({"fabric": {"type": "efa", "devices": 1, "counters": {"0": {"no_completion_cmds": 2}}}})
    root = sim.build()
    assert read_counter(root, "rdmap16s0", "no_completion_cmds", "device") == 2
    assert read_counter(root, "rdmap16s0", "keep_alive_rcvd", "device") > 0
    assert read_counter(root, "rdmap16s0", "rdma_read_wr_err", "hw_counters") == 0
    assert not counters_dir(root, "rdmap16s0").exists()


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"type": "ib", "counters": {"9": {"symbol_error": 1}}}, "fabric.counters: no device 9 (there are 8)"),
        ({"type": "ib", "counters": {"0": {"rx_drops": 1}}}, "an InfiniBand port has no counter 'rx_drops'"),
        ({"type": "efa", "grow_in_test": {"0": {"link_downed": 1}}}, "an EFA device has no counter 'link_downed'"),
        ({"type": "roce", "counters": {"0": {"symbol_error": -1}}}, "must be an integer of 0 or more"),
        ({"type": "ib", "grow_in_test": ["mlx5_0"]}, "fabric.grow_in_test must map device indexes"),
    ],
)
def test_bad_counter_scenarios_are_refused(sim, bad, message):
    sim.scenario({"fabric": bad})
    cmd = [sys.executable, "-B", RAYGATE_SIM, "build", "--scenario", str(sim.tmp / "scenario.json")]
    result = subprocess.run(
        cmd + ["--root", str(sim.tmp / "r")], capture_output=True, text=True, env=sim.env(), check=False
    )
    assert result.returncode == 2 and message in result.stderr


def test_counters_grow_while_the_test_runs_on_this_node_only(sim):
    grow = {"3": {"link_downed": 1, "symbol_error": 200}}
    sim.scenario({"fabric": {"type": "ib", "grow_in_test": grow}})
    root = sim.build()
    env = {"RAYGATE_SIM_ROOT": str(root)}
    perf(sim, *SWEEP, "-g", "8", env=env)
    assert (read_counter(root, "mlx5_3", "link_downed"), read_counter(root, "mlx5_3", "symbol_error")) == (1, 200)
    assert read_counter(root, "mlx5_2", "link_downed") == 0
    # mpirun grows the launcher's counters (the only tree it can reach), once per job.
    mpirun(sim, *PAIR, "all_reduce_perf", *SWEEP, "-g", "1", env=env)
    assert read_counter(root, "mlx5_3", "link_downed") == 2
    # A peer's growth is the peer's own: it does not reach this node's tree.
    sim.scenario({"fabric": {"type": "ib", "grow_in_test": grow}}, host="node2")
    sim.scenario({"fabric": {"type": "ib"}})
    mpirun(sim, *PAIR, "all_reduce_perf", *SWEEP, "-g", "1", env=env)
    assert read_counter(root, "mlx5_3", "link_downed") == 2


class Exit(Exception):
    def __init__(self, result):
        super().__init__(json.dumps(result, default=str))
        self.result = result


def test_nccl_test_blames_the_port_whose_counter_grew_during_the_run(sim, monkeypatch):
    """nccl_test (the module, with its real command runner) runs the simulated all_reduce_perf."""
    sim.scenario({"fabric": {"type": "roce", "grow_in_test": {"5": {"link_downed": 1, "symbol_error": 3}}}})
    root = sim.build()
    for key, value in sim.env({"RAYGATE_SIM_ROOT": str(root)}).items():
        monkeypatch.setenv(key, value)

    def leave(self, **result):
        raise Exit(result)

    def fail(self, msg, **result):
        raise Exit(dict(result, failed=True, msg=msg))

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", leave)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail)
    args = {"gpus": 8, "binary": os.path.join(SIM_DIR, "bin", "all_reduce_perf"), "sysfs_root": str(root)}
    with patch_module_args(args), pytest.raises(Exit) as exc:
        nccl_test.main()
    result = exc.value.result
    checks = {c["name"]: c for c in result["checks"]}
    assert checks["nccl_completed"]["status"] == "pass", result
    blame = checks["nccl_fabric_errors"]
    assert blame["status"] == "fail" and blame["severity"] == "do-not-allocate"
    # symbol_error +3 in a short test is under 120/h: only the link-down is a breach.
    assert blame["detail"].startswith("mlx5_5:1 link_downed +1 (max 4) during the "), blame
    assert "mlx5_5 port 1" in blame["action"]
    assert result["healthy"] is False


# ----------------------------------------------------------------- firmware drift, fingerprint

DRIFTED = {
    "gpu": {"driver": "535.161.08", "vbios": {"2": "96.00.99.00.01"}, "nccl": "2.18.3"},
    "fabric": {"type": "ib", "firmware": {"5": "28.41.1000"}},
}


class ModuleExit(Exception):
    pass


def run_gpu_health(sim, monkeypatch, args):
    """gpu_health's main() against the simulated tools, found on a PATH of only what they need."""
    bin_dir = sim.tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    tools = {"nvidia-smi": os.path.join(SIM_DIR, "bin", "nvidia-smi"), "ibstat": os.path.join(SIM_DIR, "bin", "ibstat")}
    tools.update({name: shutil.which(name) for name in ("bash", "dirname", "readlink")}, python3=sys.executable)
    for name, target in tools.items():
        if not (bin_dir / name).exists():
            (bin_dir / name).symlink_to(target)
    for key, value in sim.env({"PATH": str(bin_dir), "RAYGATE_SIM_ROOT": str(sim.tmp / "root")}).items():
        monkeypatch.setenv(key, value)
    answers = []

    def exit_json(self, **kwargs):
        answers.append(kwargs)
        raise ModuleExit()

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", lambda self, msg, **kw: pytest.fail(msg))
    with patch_module_args(args), pytest.raises(ModuleExit):
        gpu_health.main()
    return answers[0]


def live_args(root):
    return {
        "expected_gpus": 8,
        "fabric": "ib",
        "sysfs_root": str(root),
        "kernel_log": str(root / "var" / "log" / "kern.log"),
        "require_gdr": False,
    }


def test_firmware_drift_shows_in_the_live_fingerprint(sim, monkeypatch):
    root = sim.build()
    healthy = run_gpu_health(sim, monkeypatch, live_args(root))
    assert healthy["verdict"] == "pass", healthy["reasons"]
    sim.scenario(DRIFTED)
    sim.build(root)
    drifted = run_gpu_health(sim, monkeypatch, live_args(root))
    # Firmware drift alone is no fault: the node still passes every check of its own.
    assert drifted["verdict"] == "pass", drifted["reasons"]
    before, after = healthy["fingerprint"], drifted["fingerprint"]
    assert (before["driver"], before["vbios"], before["hca_firmware"], before["nccl"]) == (
        "550.90.07",
        ["96.00.74.00.0D"],
        ["28.39.1002"],
        ["2.21.5"],
    )
    assert (after["driver"], after["vbios"], after["hca_firmware"], after["nccl"]) == (
        "535.161.08",
        ["96.00.74.00.0D", "96.00.99.00.01"],
        ["28.39.1002", "28.41.1000"],
        ["2.18.3"],
    )
    differ = [f for f in fingerprint.FIELDS if fingerprint.text(before[f]) != fingerprint.text(after[f])]
    assert differ == ["driver", "vbios", "hca_firmware", "nccl"]
    assert after["gpu_count"] == 8 and after["pcie_link"] == ["x16/x16"]


def test_firmware_drift_shows_in_a_captured_fingerprint(sim, monkeypatch):
    sim.scenario(DRIFTED)
    root = sim.build()
    cap = sim.tmp / "cap"
    cap.mkdir()
    (cap / "nvidia-smi.xml").write_text(sim.ok("nvidia-smi", "-q", "-x"))
    env = sim.env({"RAYGATE_SIM_ROOT": str(root)})
    cmd = [sys.executable, "-B", RAYGATE_SIM, "tool", "ibstat", "ibstat"]
    ibstat = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    (cap / "ibstat.txt").write_text(ibstat.stdout)
    (cap / "kern.log").write_text((root / "var" / "log" / "kern.log").read_text())
    found = run_gpu_health(sim, monkeypatch, {"capture_dir": str(cap)})["fingerprint"]
    assert found["driver"] == "535.161.08"
    assert found["vbios"] == ["96.00.74.00.0D", "96.00.99.00.01"]
    assert found["hca_firmware"] == ["28.39.1002", "28.41.1000"]
    # The simulated boot banner names the kernel the host runs; NCCL is not captured.
    assert found["kernel"] == os.uname().release and found["nccl"] is None


def test_hung_nvidia_smi_is_judged_within_its_query_bound_naming_the_tool(sim, monkeypatch):
    # nvidia-smi on a GPU fallen off the bus never returns and its output stays open after the kill
    # (gpu_sim._hang). gpu_health gives up after query_timeout plus the runner's grace, not the
    # 600 s of timeout, and says so once: gpu_count fails with the root cause, the other nvidia-smi
    # checks skip pointing at it, and dcgmi is not run.
    monkeypatch.setenv("RAYGATE_SIM_HANG_SECONDS", "20")
    monkeypatch.setattr(_runner, "KILL_GRACE", 1)
    sim.scenario(gpu_spec({"type": "nvsmi_hang"}))
    root = sim.build()
    args = dict(live_args(root), timeout=600, query_timeout=2, dcgm_diag_level=1)
    answer = run_gpu_health(sim, monkeypatch, args)
    assert answer["verdict"] == "fail" and not answer["healthy"]
    checks = {c["name"]: c for c in answer["checks"]}
    root_cause = checks["gpu_count"]
    assert root_cause["status"] == "fail", root_cause
    assert root_cause["detail"].startswith(
        "nvidia-smi -q -x did not answer within 2s (query_timeout) and did not end when killed"
    ), root_cause
    assert "stuck in the driver, as on a GPU fallen off the bus" in root_cause["detail"], root_cause
    assert "dcgm_diag" in root_cause["detail"]  # named among the checks it prevented
    needs = [n for n, c in checks.items() if c["status"] == "skip" and "see gpu_count" in (c.get("detail") or "")]
    assert "ecc_mode" in needs and "dcgm_diag" in needs, checks
    # The cause is said once, not once per check.
    said = [c for c in answer["checks"] if "did not answer" in (c.get("detail") or "")]
    assert len(said) == 1, said


def _gpu_sim_module():
    spec = importlib.util.spec_from_file_location("gpu_sim_under_test", GPU_SIM)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_slow_node_answers_as_a_healthy_one_only_later(sim):
    # The fleet mix's slow node: its tools say what a healthy node's say; each waits (times - 1) x
    # its own run before it exits (slow_delay), so the checks take ten times as long by default.
    healthy = sim.ok("nvidia-smi", "-q", "-x")
    sim.scenario(gpu_spec({"type": "slow", "times": 2}))
    assert sim.ok("nvidia-smi", "-q", "-x") == healthy
    gpu_sim = _gpu_sim_module()
    slow = gpu_sim.normalize_gpu(gpu_spec({"type": "slow"})["gpu"])
    assert gpu_sim.slow_delay(slow, 0.25) == pytest.approx(0.25 * 9)
    assert gpu_sim.slow_delay(gpu_sim.normalize_gpu({}), 0.25) == 0.0
    for times in (1, 101, 2.5, True):
        with pytest.raises(gpu_sim.GpuScenarioError, match="times"):
            gpu_sim.normalize_gpu(gpu_spec({"type": "slow", "times": times})["gpu"])


def test_hca_firmware_scenario_reaches_sysfs_ibstat_and_ibv_devinfo(sim):
    sim.scenario({"fabric": {"type": "roce", "devices": 2, "firmware": "28.41.1000"}})
    root = sim.build()
    assert (root / "sys" / "class" / "infiniband" / "mlx5_1" / "fw_ver").read_text().strip() == "28.41.1000"
    env = sim.env({"RAYGATE_SIM_ROOT": str(root)})
    for tool, needle in (("ibstat", "Firmware version: 28.41.1000"), ("ibv_devinfo", "fw_ver:\t\t\t\t28.41.1000")):
        out = subprocess.run(
            [sys.executable, "-B", RAYGATE_SIM, "tool", tool, tool], capture_output=True, text=True, env=env, check=True
        )
        assert out.stdout.count(needle) == 2, out.stdout


@pytest.mark.parametrize(
    "fabric, message",
    [
        ({"type": "efa", "firmware": "28.41.1000"}, "not of efa"),
        ({"type": "ib", "firmware": {"8": "28.41.1000"}}, "no device '8'"),
        ({"type": "ib", "firmware": "28.41"}, "does not look like"),
    ],
)
def test_bad_hca_firmware_scenarios_are_refused(sim, fabric, message):
    sim.scenario({"fabric": fabric})
    cmd = [sys.executable, "-B", RAYGATE_SIM, "build", "--scenario", str(sim.tmp / "scenario.json")]
    cmd += ["--root", str(sim.tmp / "r")]
    result = subprocess.run(cmd, capture_output=True, text=True, env=sim.env(), check=False)
    assert result.returncode != 0 and message in result.stderr


# ---------------------------------------------------------------------------- nccl-tests


def perf(sim, *args, env=None, rc=0):
    result = sim.run("all_reduce_perf", *args, env=env)
    assert result.returncode == rc, result.stdout + result.stderr
    return result.stdout


def mpirun(sim, *args, env=None, rc=0):
    result = sim.run("mpirun", *args, env=env)
    assert result.returncode == rc, result.stdout[-3000:] + result.stderr
    return result


def test_single_node_healthy(sim):
    out = perf(sim, *SWEEP, "-g", "8")
    parsed = nccl_parsers.parse_nccl_tests(out)
    assert parsed["test"] is None or parsed["test"] == "all_reduce_perf"
    assert parsed["nranks"] == 8 and not parsed["aborted"] and parsed["errors"] == []
    assert [d["bus_id"] for d in parsed["devices"]] == BUSES
    assert {d["name"] for d in parsed["devices"]} == {"NVIDIA H100 80GB HBM3"}
    assert parsed["rows"][-1]["size"] == 16 << 30 and len(parsed["rows"]) == 32
    assert 460 <= parsed["max_size_busbw"] <= 490
    assert (parsed["wrong_total"], parsed["out_of_bounds"]) == (0, 0)
    assert 0 < parsed["avg_busbw"] < parsed["max_size_busbw"]
    assert "NCCL INFO" not in out
    checks = nccl_parsers.judge(parsed, None, min_busbw=460)
    assert [c["status"] for c in checks] == ["pass", "pass", "pass", "skip"]
    # Same host, same numbers; another host, other (still healthy) numbers.
    assert perf(sim, *SWEEP, "-g", "8") == out
    other = sim.run("all_reduce_perf", *SWEEP, "-g", "8", hostname="node3").stdout
    assert nccl_parsers.parse_nccl_tests(other)["max_size_busbw"] != parsed["max_size_busbw"]


def test_single_node_nccl_info_has_no_net_channels(sim):
    out = perf(sim, *SWEEP, "-g", "8", env={"NCCL_DEBUG": "INFO"})
    transports = nccl_parsers.parse_transports(out)
    assert transports["channels"] and {c["transport"] for c in transports["channels"]} == {"P2P"}
    assert transports["network"] == "IB" and not transports["fallback"]
    assert any(
        re.match(r"^node1:\d+:\d+ \[0\] NCCL INFO NCCL version 2\.\d+\.\d+\+cuda12\.4$", x) for x in out.split("\n")
    )
    parsed = nccl_parsers.parse_nccl_tests(out)
    assert not parsed["aborted"] and parsed["errors"] == [] and parsed["nranks"] == 8
    assert nccl_parsers.judge(parsed, transports, min_busbw=460)[3]["status"] == "skip"


def test_single_node_h200(sim):
    sim.scenario(gpu_spec(model="H200"))
    parsed = nccl_parsers.parse_nccl_tests(perf(sim, *SWEEP, "-g", "8"))
    assert parsed["max_size_busbw"] >= 431 and {d["name"] for d in parsed["devices"]} == {"NVIDIA H200"}


def test_more_gpus_than_the_node_has(sim):
    out = perf(sim, "-g", "9", rc=2)
    assert "Test CUDA failure" in out and "'invalid device ordinal'" in out
    parsed = nccl_parsers.parse_nccl_tests(out)
    assert parsed["aborted"] and parsed["rows"] == []
    sim.scenario(gpu_spec({"type": "missing_gpu"}))
    assert "invalid device ordinal" in perf(sim, "-g", "8", rc=2)
    assert nccl_parsers.parse_nccl_tests(perf(sim, "-g", "7"))["nranks"] == 7


def test_fabric_manager_down_fails_cuda(sim):
    sim.scenario(gpu_spec({"type": "fabric_manager_down"}))
    out = perf(sim, "-g", "8", rc=2)
    assert "'system not yet initialized'" in out and nccl_parsers.parse_nccl_tests(out)["aborted"]


def test_single_node_faults(sim):
    healthy = nccl_parsers.parse_nccl_tests(perf(sim, *SWEEP, "-g", "8"))["max_size_busbw"]
    sim.scenario(gpu_spec({"type": "low_bandwidth", "factor": 0.5}))
    low = nccl_parsers.parse_nccl_tests(perf(sim, *SWEEP, "-g", "8"))
    assert 0.45 * healthy < low["max_size_busbw"] < 0.55 * healthy
    assert nccl_parsers.judge(low, None, min_busbw=460)[0]["status"] == "fail"
    # A network-only slowdown leaves the node's own test alone.
    sim.scenario(gpu_spec({"type": "low_bandwidth", "factor": 0.5, "scope": "network"}))
    own = nccl_parsers.parse_nccl_tests(perf(sim, *SWEEP, "-g", "8"))["max_size_busbw"]
    assert own == healthy
    sim.scenario(gpu_spec({"type": "wrong_values", "count": 4}))
    out = perf(sim, *SWEEP, "-g", "8", rc=1)
    wrong = nccl_parsers.parse_nccl_tests(out)
    assert wrong["wrong_total"] == 8 and wrong["out_of_bounds"] == 8 and "# Out of bounds values : 8 FAILED" in out
    assert wrong["rows"][-1]["oop"]["wrong"] == 4 and wrong["rows"][-2]["oop"]["wrong"] == 0
    assert nccl_parsers.judge(wrong, None)[1]["status"] == "fail"
    unchecked = nccl_parsers.parse_nccl_tests(perf(sim, *SWEEP, "-g", "8", "-c", "0"))
    assert unchecked["rows"][-1]["oop"]["wrong"] is None
    sim.scenario(gpu_spec({"type": "nccl_abort"}))
    out = perf(sim, *SWEEP, "-g", "8", env={"NCCL_DEBUG": "WARN"}, rc=3)
    aborted = nccl_parsers.parse_nccl_tests(out)
    assert aborted["aborted"] and 0 < len(aborted["rows"]) < 32
    assert "Test NCCL failure" in out and "NCCL WARN" in out
    assert nccl_parsers.judge(aborted, None)[2]["status"] == "fail"


def _pair(sim, *extra, env=None, rc=0, host_args=None):
    args = list(PAIR) if host_args is None else host_args
    result = mpirun(sim, *args, *extra, "all_reduce_perf", *SWEEP, "-g", "1", env=env, rc=rc)
    return result, nccl_parsers.parse_nccl_tests(result.stdout), nccl_parsers.parse_transports(result.stdout)


def test_two_nodes_over_ib(sim):
    result, parsed, transports = _pair(sim)
    assert parsed["nranks"] == 16 and not parsed["aborted"] and parsed["errors"] == []
    assert [d["host"] for d in parsed["devices"]] == ["node1"] * 8 + ["node2"] * 8
    assert [d["device"] for d in parsed["devices"]] == list(range(8)) * 2
    assert 355 <= parsed["max_size_busbw"] <= 380
    net = [c for c in transports["channels"] if c["transport"] == "NET"]
    assert net and all(c["net"] == "IB" and c["gdr"] for c in net)
    assert {c["via"] for c in net} == {"NET/IB/%d/GDRDMA" % n for n in range(8)}
    assert {c["direction"] for c in net} == {"send", "receive"}
    # Every NET channel joins a rank of node1 with one of node2.
    assert all((int(c["from"]) < 8) != (int(c["to"]) < 8) for c in net)
    assert (transports["network"], transports["fallback"], transports["gdr_disabled_hcas"]) == ("IB", False, [])
    checks = nccl_parsers.judge(parsed, transports, min_busbw=300)
    assert [c["status"] for c in checks] == ["pass"] * 4
    assert result.stderr == ""


def test_two_nodes_by_address_and_tagged(sim):
    hosts = ["-H", "198.18.0.11:8,198.18.0.12:8", "-np", "16", "--allow-run-as-root", "--tag-output"]
    result, parsed, transports = _pair(sim, host_args=hosts + ["-x", "NCCL_DEBUG=INFO"])
    assert result.stdout.startswith("[1,0]<stdout>:# nThread 1 nGpus 1 minBytes 8 maxBytes 17179869184")
    assert any(line.startswith("[1,15]<stdout>:node2:") for line in result.stdout.splitlines())
    assert {d["host"] for d in parsed["devices"]} == {"node1", "node2"} and parsed["nranks"] == 16
    assert all(c["gdr"] for c in transports["channels"] if c["transport"] == "NET")


def test_nccl_debug_reaches_remote_ranks_only_with_x(sim):
    result, unused_parsed, unused_transports = _pair(sim, host_args=PAIR[:5], env={"NCCL_DEBUG": "INFO"})
    lines = result.stdout.splitlines()
    assert any(line.startswith("node1:") for line in lines)
    assert not any(line.startswith("node2:") for line in lines)


def test_two_nodes_faults_of_either_host(sim):
    base = nccl_parsers.parse_nccl_tests(_pair(sim)[0].stdout)["max_size_busbw"]
    sim.scenario(gpu_spec({"type": "socket_fallback"}), host="198.18.0.12")
    unused_result, parsed, transports = _pair(sim)
    net = [c for c in transports["channels"] if c["transport"] == "NET"]
    assert transports["fallback"] and transports["network"] == "Socket"
    assert net and all(c["net"] == "Socket" and not c["gdr"] for c in net)
    assert parsed["max_size_busbw"] < 10 and not parsed["aborted"]
    assert nccl_parsers.judge(parsed, transports, min_busbw=300)[3]["status"] == "fail"

    sim.scenario(gpu_spec({"type": "no_gdr"}), host="node2")
    (sim.scenarios / "198.18.0.12.json").unlink()
    unused_result, parsed, transports = _pair(sim)
    net = [c for c in transports["channels"] if c["transport"] == "NET"]
    assert net and all(c["net"] == "IB" and not c["gdr"] for c in net)
    assert transports["gdr_disabled_hcas"] and set(transports["gdr_disabled_hcas"]) <= {"mlx5_%d" % i for i in range(8)}
    assert not transports["fallback"] and parsed["max_size_busbw"] < base
    assert nccl_parsers.judge(parsed, transports, require="GDRDMA")[3]["status"] == "fail"

    sim.scenario(gpu_spec({"type": "low_bandwidth", "factor": 0.5}), host="node2")
    unused_result, parsed, unused_transports = _pair(sim)
    assert 0.45 * base < parsed["max_size_busbw"] < 0.55 * base
    sim.scenario(gpu_spec({"type": "low_bandwidth", "factor": 0.5, "scope": "network"}), host="node2")
    unused_result, parsed, unused_transports = _pair(sim)
    assert 0.45 * base < parsed["max_size_busbw"] < 0.55 * base

    sim.scenario(gpu_spec({"type": "wrong_values"}))
    sim.scenario({}, host="node2")
    unused_result, parsed, unused_transports = _pair(sim, rc=1)
    assert parsed["wrong_total"] > 0

    sim.scenario(gpu_spec({"type": "nccl_abort"}), host="node2")
    result, parsed, unused_transports = _pair(sim, rc=3)
    assert parsed["aborted"] and "Test NCCL failure" in result.stdout
    assert "remote process exited or there was a network error" in result.stdout
    assert "mpirun detected that one or more processes exited with non-zero status" in result.stderr


def test_two_nodes_fabrics(sim):
    sim.scenario({"fabric": {"type": "efa"}})
    sim.scenario({"fabric": {"type": "efa"}}, host="node2")
    unused_result, parsed, transports = _pair(sim)
    net = [c for c in transports["channels"] if c["transport"] == "NET"]
    assert transports["network"] == "AWS Libfabric" and not transports["fallback"]
    assert net and all(c["net"] == "AWS Libfabric" and c["gdr"] for c in net)
    assert len({c["via"] for c in net}) > 8
    assert 465 <= parsed["max_size_busbw"] <= 490
    # A pair of an EFA node and an IB node has no common RDMA fabric: TCP sockets.
    sim.scenario({"fabric": {"type": "ib"}}, host="node2")
    unused_result, parsed, transports = _pair(sim)
    assert transports["fallback"] and parsed["max_size_busbw"] < 10


def test_mpirun_launch_errors(sim):
    if os.geteuid() == 0:
        refused = mpirun(sim, "-np", "2", "-H", "node1,node2", "all_reduce_perf", rc=1)
        assert "mpirun has detected an attempt to run as root" in refused.stderr
        allowed = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
        mpirun(sim, "-np", "2", "-H", "node1,node2", "all_reduce_perf", "-b", "1M", "-e", "1M", env=allowed)
    slots = mpirun(sim, "--allow-run-as-root", "-np", "16", "-H", "node1,node2", "all_reduce_perf", rc=1)
    assert "There are not enough slots available in the system to satisfy the 16" in slots.stderr
    unknown = mpirun(sim, "--allow-run-as-root", "-np", "2", "-H", "node1,node9", "all_reduce_perf", rc=1)
    assert "Could not resolve hostname node9" in unknown.stderr
    names = mpirun(sim, "--allow-run-as-root", "-N", "2", "-H", "node1:2,node2:2", "hostname")
    assert names.stdout.split() == ["node1", "node1", "node2", "node2"]
    # -N 1 with -g 8: one process per host drives all 8 GPUs; -g 9 does not fit.
    unused_result, parsed, unused_transports = _pair(
        sim, host_args=["-N", "1", "-H", "node1,node2", "--allow-run-as-root"]
    )
    assert parsed["nranks"] == 2
    sim.scenario(gpu_spec({"type": "missing_gpu"}), host="node2")
    result = mpirun(sim, "--allow-run-as-root", "-N", "1", "-H", "node1,node2", "all_reduce_perf", "-g", "8", rc=2)
    assert "node2: Test CUDA failure" in result.stdout and "invalid device ordinal" in result.stdout


def test_forced_network(sim):
    unused_result, unused_parsed, transports = _pair(sim, "-x", "NCCL_NET=Socket")
    assert transports["fallback"]
    result, parsed, unused_transports = _pair(sim, "-x", "NCCL_NET=AWS Libfabric", rc=3)
    assert parsed["aborted"] and "network AWS Libfabric not found" in result.stdout


# ------------------------------------------------------------------ against real samples


def _sample(name):
    with open(os.path.join(SAMPLES, name), encoding="utf-8", errors="replace") as fh:
        return fh.read()


def _xml_root(text):
    text = re.sub(r"<!DOCTYPE[^>]*>", "", text)
    return ET.fromstring(re.sub(r"^\s*<\?xml[^>]*\?>", "", text))


@needs_samples
def test_xml_structure_matches_real_nvidia_smi(sim):
    real = [
        _xml_root(_sample(n)) for n in sorted(os.listdir(SAMPLES)) if n.startswith("nvsmi_qx_") and n.endswith(".xml")
    ]
    assert real
    ours = _xml_root(sim.ok("nvidia-smi", "-q", "-x"))
    assert [c.tag for c in ours if c.tag != "gpu"] == [c.tag for c in real[0] if c.tag != "gpu"]
    real_gpu_tags = set(c.tag for root in real for c in root.find("gpu"))
    assert set(c.tag for c in ours.find("gpu")) <= real_gpu_tags
    for path in ("pci/pci_gpu_link_info/pcie_gen", "pci/pci_gpu_link_info/link_widths", "clocks_event_reasons"):
        real_tags = set(
            c.tag for root in real if root.find("gpu/" + path) is not None for c in root.find("gpu/" + path)
        )
        assert set(c.tag for c in ours.find("gpu/" + path)) <= real_tags, path
    volatile = set(c.tag for root in real for c in root.find("gpu/ecc_errors/volatile"))
    assert set(c.tag for c in ours.find("gpu/ecc_errors/volatile")) <= volatile
    remapped = set(c.tag for root in real for c in root.find("gpu/remapped_rows"))
    assert set(c.tag for c in ours.find("gpu/remapped_rows")) <= remapped
    header = sim.ok("nvidia-smi", "-q", "-x").splitlines()[:2]
    assert header[1] == _sample("nvsmi_qx_a100_sxm4_80gb_mig_535_telegraf.xml").splitlines()[1]


@needs_samples
def test_nccl_tests_layout_matches_real_output(sim):
    real = [line.rstrip() for line in _sample("nccltests_allreduce_2node_16xh100_gcp_a3mega_avg70.txt").splitlines()]
    ours = [line.rstrip() for line in perf(sim, *SWEEP, "-g", "8").splitlines()]

    def headers(lines):
        return [x for x in lines if x.startswith("#") and ("size" in x or "out-of-place" in x or "(B)" in x)]

    assert headers(ours) == headers(real)
    words = re.compile(r"[A-Za-z][A-Za-z ]*[a-z]")
    assert words.findall(ours[0]) == words.findall(real[0])  # "# nThread .. graph: 0" with the same keys
    rank = re.compile(
        r"^#  Rank +\d+ Group +\d+ Pid +\d+ on +\S+ device +\d+ \[[0-9a-f]{4}:[0-9a-f]{2}:00\] NVIDIA H100"
    )
    assert all(rank.match(x) for x in ours if "Rank" in x) and all(rank.match(x) for x in real if "Rank" in x)
    row = re.compile(r"^( +\d+){2} +float +sum +-1( +[\d.]+){3} +\d+( +[\d.]+){3} +\d+$")
    assert [bool(row.match(x)) for x in ours if x and not x.startswith("#")] == [True] * 32
    assert all(row.match(x) for x in real if x and not x.startswith("#"))
    assert [re.sub(r"[\d.]+", "N", x) for x in ours[-3:-1]] == [re.sub(r"[\d.]+", "N", x) for x in real[-2:]]
    assert [x[:25] for x in ours[-3:-1]] == [x[:25] for x in real[-2:]]


@needs_samples
def test_nccl_info_wording_matches_real_logs(sim):
    real = _sample("nccl_info_2node_roce_gdrdma_ofi_plugin_fallback_to_ib.txt")
    ours = _pair(sim)[0].stdout
    prefix = re.compile(r"^\S+:\d+:\d+ \[\d+\] NCCL INFO ")
    shape = re.compile(r"Channel \d\d/0 : \d+\[\d\] -> \d+\[\d\] \[(send|receive)\] via NET/IB/\d/GDRDMA$")
    for text in (real, ours):
        lines = [prefix.sub("", x) for x in text.splitlines() if prefix.match(x)]
        assert any(shape.match(x) for x in lines)
        assert "Using network IB" in lines
        assert any(x.startswith("NET/IB : Using [0]mlx5_0:1/") for x in lines)
        assert any(
            re.match(r"^ncclCommInitRank comm 0x[0-9a-f]+ rank \d+ nranks 16 cudaDev \d .* - Init START$", x)
            for x in lines
        )


@needs_samples
def test_other_formats_match_real_samples(sim):
    # nvlink -s: the same line shapes.
    link = re.compile(r"^(GPU \d: .+ \(UUID: GPU-[0-9a-f-]+\)|\t Link \d+: [\d.]+ GB/s)$")
    assert all(link.match(x) for x in _sample("nvsmi_nvlink_s_a100_good.txt").splitlines())
    assert all(link.match(x) for x in sim.ok("nvidia-smi", "nvlink", "-s").splitlines())
    # dcgmi diag table: the same frame, separators and Deployment tests as DCGM 3.3.
    real = _sample("dcgmi_diag_r2_p4de_8xA100_pass.txt").splitlines()[1:]
    ours = sim.ok("dcgmi", "diag", "-r", "2").splitlines()
    assert ours[:5] == real[:5]
    assert [x for x in ours if x.startswith(("+-----", "|-----"))] == [
        x for x in real if x.startswith(("+-----", "|-----"))
    ]

    def deployment(lines):
        start = [i for i, x in enumerate(lines) if "Deployment" in x][0]
        return [x.split("|")[1].strip() for x in lines[start + 1 : start + 10]]

    assert deployment(ours) == deployment(real)
    real_json = json.loads(_sample("dcgmi_diag_json_dcgm310_8gpu_pass_with_warning_prefix.txt").split("\n", 1)[1])
    ours_json = json.loads(sim.ok("dcgmi", "diag", "-r", "1", "-j"))
    assert list(ours_json) == list(real_json)
    assert sorted(ours_json["DCGM GPU Diagnostic"]) == sorted(real_json["DCGM GPU Diagnostic"])
    # --query-gpu: our header names are nvidia-smi's.
    real_header = _sample("nvsmi_querygpu_csv_h100_single_load_590.txt").splitlines()[0].split(", ")
    fields = "index,name,uuid,pci.bus_id,memory.total,power.draw,temperature.gpu,ecc.mode.current,fabric.state"
    ours_header = sim.ok("nvidia-smi", "--query-gpu=" + fields, "--format=csv").splitlines()[0].split(", ")
    assert set(ours_header) <= set(real_header)
    # Kernel log Xid lines: parsed like the real ones.
    sample = gpu_parsers.parse_xids(_sample("dmesg_xid48_63_94_dbe_rowremap.txt"))[0]
    sim.scenario(gpu_spec({"type": "xid", "xid": 48}))
    ours_xid = gpu_parsers.parse_xids((sim.build() / "var" / "log" / "kern.log").read_text())[0]
    assert (ours_xid["pid"], ours_xid["name"]) == (sample["pid"], sample["name"]) == (None, None)
    assert ours_xid["message"].split(" at ")[0] == sample["message"].split(" at ")[0]
