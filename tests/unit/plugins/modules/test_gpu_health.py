"""gpu_health through the command harness: gpu_health.yml lists the cases.

Tool outputs are built here from small specs shaped like the sandbox scenario's ``gpu`` key
(``{count, model, driver, cuda, nvswitch, faults: [{type, gpu, ...}]}``), so a case says which
fault it injects instead of carrying pages of XML. Keys a case may add for this file:
- ``gpu``: that spec; gives the names ``{nvsmi}`` (``nvidia-smi -q -x``) and ``{nvlink}``.
- ``dcgm``: ``{fail: {test, gpu}}`` or ``{}``; gives ``{dcgm}`` (``dcgmi diag -j``).
- ``fabric_tree``: a scenario ``fabric`` dict; builds the sysfs tree under ``{sim}`` with the sandbox's
  own generator and gives ``{ibstat}`` (the simulated ibstat's output for it).
- ``kernel_release``: what the node's kernel answers (default 6.1.0-18-amd64).
- ``fabric_state``: earlier counter snapshots ``[{age: seconds before now, counters, boot_id}]`` written
  as the state file ``{state}`` before the run (boot_id defaults to this boot's, BOOT_ID).
- ``state_after``: how many snapshots ``{state}`` holds after the run (0: the file must not exist).
- ``gpu.vbios``: as the sandbox scenario's: one VBIOS version for every GPU, or {index: version}.
- ``statuses``: {check name: expected status}; ``details``: {check name: [substrings of its detail]}.
The clocks are fixed: now is NOW (epoch), the node booted UPTIME seconds ago, its boot id is BOOT_ID.
"""

import importlib.util
import json
import os
import subprocess
import sys

import pytest
from harness import expand, load_cases, run_case

from ansible_collections.raygate.cluster.plugins.module_utils.gate import collectors, gpu_checks
from ansible_collections.raygate.cluster.plugins.modules import gpu_health

HERE = os.path.dirname(__file__)
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
SIM_DIR = os.path.join(ROOT, "tests", "sandbox", "sim")
CASES = load_cases(os.path.join(HERE, "gpu_health.yml"))

NOW = 1763719200.0  # 2025-11-21T10:00:00Z
UPTIME = 100000.0
BOOT_ID = "3f0e51b2-5d3c-4a1e-9c3b-6c1a2f0d7e11"
BUSES = ["18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"]
MODELS = {"H100": "NVIDIA H100 80GB HBM3", "H200": "NVIDIA H200"}
VBIOS = "96.00.74.00.0D"


def _load_sim():
    spec = importlib.util.spec_from_file_location("raygate_sim", os.path.join(SIM_DIR, "raygate_sim.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sim = _load_sim()


# ------------------------------------------------------------------ nvidia-smi -q -x
def _faults(spec, index):
    return [f for f in spec.get("faults", []) if f.get("gpu", 0) == index]


def _kind(faults, name):
    return [f for f in faults if f["type"] == name]


def _ecc(faults):
    unc = sum(f.get("count", 1) for f in _kind(faults, "ecc_uncorrectable"))
    sram = sum(f.get("count", 200) for f in _kind(faults, "ecc_correctable") if f.get("kind", "dram") == "sram")
    dram = sum(f.get("count", 200) for f in _kind(faults, "ecc_correctable") if f.get("kind", "dram") == "dram")
    if _kind(faults, "ecc_disabled"):
        block = "".join("<%s>N/A</%s>" % (t, t) for t in ("sram_correctable", "sram_uncorrectable"))
        block += "".join("<%s>N/A</%s>" % (t, t) for t in ("dram_correctable", "dram_uncorrectable"))
        return "<ecc_errors><volatile>%s</volatile><aggregate>%s</aggregate></ecc_errors>" % (block, block)
    block = (
        "<sram_correctable>%d</sram_correctable><sram_uncorrectable>0</sram_uncorrectable>"
        "<dram_correctable>%d</dram_correctable><dram_uncorrectable>%d</dram_uncorrectable>" % (sram, dram, unc)
    )
    return "<ecc_errors><volatile>%s</volatile><aggregate>%s</aggregate></ecc_errors>" % (block, block)


def _gpu(spec, index):
    faults = _faults(spec, index)
    all_faults = spec.get("faults", [])
    bus = BUSES[index]
    pcie = (_kind(faults, "pcie_downgraded") or [{}])[0]
    gen, width = (pcie.get("gen", 3), pcie.get("width", 8)) if pcie else (5, 16)
    hot = bool(_kind(faults, "thermal_throttle"))
    active = "Active" if hot else "Not Active"
    fabric = ""
    if spec.get("nvswitch", True):
        down = bool(_kind(all_faults, "fabric_manager_down"))
        fabric = "<fabric><state>%s</state><status>%s</status></fabric>" % (
            "Not Started" if down else "Completed",
            "N/A" if down else "Success",
        )
    retired = "Yes" if _kind(faults, "retired_pending") else "N/A"
    return "\n".join(
        [
            '<gpu id="00000000:%s:00.0">' % bus,
            "<product_name>%s</product_name>" % MODELS[spec.get("model", "H100")],
            "<vbios_version>%s</vbios_version>" % _vbios(spec, index),
            "<persistence_mode>%s</persistence_mode>"
            % ("Disabled" if _kind(all_faults, "persistence_off") else "Enabled"),
            "<uuid>GPU-%08d-0000-0000-0000-%012d</uuid>" % (index, index),
            "<minor_number>%d</minor_number>" % index,
            "<pci><pci_bus_id>00000000:%s:00.0</pci_bus_id><pci_gpu_link_info>" % bus,
            "<pcie_gen><max_link_gen>5</max_link_gen><current_link_gen>%d</current_link_gen></pcie_gen>" % gen,
            "<link_widths><max_link_width>16x</max_link_width><current_link_width>%dx</current_link_width>"
            "</link_widths></pci_gpu_link_info></pci>" % width,
            "<clocks_event_reasons><clocks_event_reason_sw_power_cap>Active</clocks_event_reason_sw_power_cap>",
            "<clocks_event_reason_hw_slowdown>%s</clocks_event_reason_hw_slowdown>" % active,
            "<clocks_event_reason_hw_thermal_slowdown>%s</clocks_event_reason_hw_thermal_slowdown>" % active,
            "<clocks_event_reason_sw_thermal_slowdown>Not Active</clocks_event_reason_sw_thermal_slowdown>",
            "</clocks_event_reasons>",
            "<ecc_mode><current_ecc>%s</current_ecc></ecc_mode>"
            % ("Disabled" if _kind(faults, "ecc_disabled") else "Enabled"),
            _ecc(faults),
            "<retired_pages><pending_retirement>%s</pending_retirement></retired_pages>" % retired,
            "<remapped_rows><remapped_row_corr>0</remapped_row_corr><remapped_row_unc>%d</remapped_row_unc>"
            % (1 if _kind(faults, "remap_pending") else 0),
            "<remapped_row_pending>%s</remapped_row_pending><remapped_row_failure>%s</remapped_row_failure>"
            "</remapped_rows>"
            % ("Yes" if _kind(faults, "remap_pending") else "No", "Yes" if _kind(faults, "remap_failure") else "No"),
            "<temperature><gpu_temp>%d C</gpu_temp></temperature>" % (93 if hot else 34),
            fabric,
            "</gpu>",
        ]
    )


def _vbios(spec, index):
    """The sandbox scenario's ``vbios``: one version for every GPU, or {index: version} for some."""
    value = spec.get("vbios") or {}
    if isinstance(value, str):
        return value
    return value.get(index, value.get(str(index), VBIOS))


def _visible(spec):
    missing = sum(f.get("count", 1) for f in spec.get("faults", []) if f["type"] == "missing_gpu")
    return spec.get("count", 8) - missing


def nvsmi_xml(spec):
    gpus = [_gpu(spec, i) for i in range(_visible(spec))]
    return "\n".join(
        [
            '<?xml version="1.0" ?>',
            '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">',
            "<nvidia_smi_log>",
            "<driver_version>%s</driver_version>" % spec.get("driver", "550.90.07"),
            "<cuda_version>%s</cuda_version>" % spec.get("cuda", "12.4"),
            "<attached_gpus>%d</attached_gpus>" % len(gpus),
        ]
        + gpus
        + ["</nvidia_smi_log>", ""]
    )


def nvlink_text(spec, links=18):
    lines = []
    down = [(f.get("gpu", 0), f.get("link", 0)) for f in spec.get("faults", []) if f["type"] == "nvlink_down"]
    for i in range(_visible(spec)):
        lines.append("GPU %d: %s (UUID: GPU-%08d-0000-0000-0000-%012d)" % (i, MODELS[spec.get("model", "H100")], i, i))
        for link in range(links):
            lines.append("\t Link %d: %s" % (link, "<inactive>" if (i, link) in down else "26.562 GB/s"))
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ dcgmi diag -j
def dcgm_json(spec, gpus=8):
    fail = spec.get("fail")
    ids = ",".join(str(i) for i in range(gpus))
    memory = []
    for i in range(gpus):
        bad = fail and fail.get("test", "Memory") == "Memory" and fail.get("gpu", 0) == i
        res = {"gpu_id": str(i), "status": "FAIL" if bad else "PASS"}
        if bad:
            res["warnings"] = [{"warning": "GPU %d: memory test found a miscompare" % i}]
        memory.append(res)
    data = {
        "DCGM Diagnostic": {
            "test_categories": [
                {
                    "category": "Deployment",
                    "tests": [{"name": "Denylist", "results": [{"gpu_ids": ids, "status": "PASS"}]}],
                },
                {"category": "Hardware", "tests": [{"name": "Memory", "results": memory}]},
            ],
            "version": "3.3.9",
        }
    }
    return json.dumps(data, indent=1)


def sim_ibstat(root):
    env = dict(os.environ, RAYGATE_SIM_ROOT=root, LC_ALL="C")
    proc = subprocess.run(
        [sys.executable, "-B", os.path.join(SIM_DIR, "raygate_sim.py"), "tool", "ibstat", "ibstat"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _brace(text):
    # harness expands names with str.format once: keep JSON braces literal.
    return text.replace("{", "{{").replace("}", "}}")


def prepare(case, tmp_path):
    case = dict(case)
    names = dict(case.get("names", {}))
    names.setdefault("sim", "{tmp}/sim")
    names.setdefault("state", "{tmp}/state/fabric-counters.json")
    sim_root = str(tmp_path / "sim")
    if "gpu" in case:
        names["nvsmi"] = nvsmi_xml(case["gpu"])
        names["nvlink"] = nvlink_text(case["gpu"])
        names["nvsmi_capture"] = names["nvsmi"]
    if "dcgm" in case:
        names["dcgm"] = _brace(dcgm_json(case["dcgm"] or {}))
    if "fabric_tree" in case:
        sim.build_tree(sim_root, sim.normalize_fabric(case["fabric_tree"]), net_target=str(tmp_path / "net"))
        names["ibstat"] = sim_ibstat(sim_root)
    if "fabric_state" in case:
        snapshots = [
            {"time": NOW - snap["age"], "boot_id": snap.get("boot_id", BOOT_ID), "counters": snap["counters"]}
            for snap in case["fabric_state"]
        ]
        (tmp_path / "state").mkdir()
        (tmp_path / "state" / "fabric-counters.json").write_text(json.dumps({"version": 1, "snapshots": snapshots}))
    case["names"] = names
    return case


def state_snapshots(tmp_path):
    path = tmp_path / "state" / "fabric-counters.json"
    if not path.exists():
        return 0
    return len(json.loads(path.read_text())["snapshots"])


@pytest.fixture()
def fixed_node(monkeypatch):
    monkeypatch.setattr(collectors, "_now", lambda: NOW)
    monkeypatch.setattr(collectors, "_uptime", lambda: UPTIME)
    monkeypatch.setattr(collectors, "boot_id", lambda: BOOT_ID)

    def release(value):
        monkeypatch.setattr(collectors, "_kernel_release", lambda: value)

    return release


@pytest.mark.parametrize("case", CASES)
def test_gpu_health(case, tmp_path, monkeypatch, fixed_node):
    fixed_node(case.get("kernel_release", "6.1.0-18-amd64"))
    case = prepare(case, tmp_path)
    result = run_case(case, gpu_health.main, tmp_path, monkeypatch)
    if result.get("failed"):
        return
    assert result["changed"] is False
    assert [c["name"] for c in result["checks"]] == list(gpu_checks.CHECK_NAMES)
    by_name = dict((c["name"], c) for c in result["checks"])
    for name, status in case.get("statuses", {}).items():
        assert by_name[name]["status"] == status, "%s: %r" % (name, by_name[name])
    for name, needles in expand(case.get("details", {}), {"tmp": str(tmp_path)}).items():
        for needle in needles:
            assert needle in by_name[name]["detail"], "%s lacks %r: %r" % (name, needle, by_name[name]["detail"])
    failing = [c["name"] for c in result["checks"] if c["status"] == "fail"]
    assert result["healthy"] is (not failing)
    assert [r.split(":")[0] for r in result["reasons"]] == failing
    assert result["checked_at"] == NOW
    if "state_after" in case:
        assert state_snapshots(tmp_path) == case["state_after"]
