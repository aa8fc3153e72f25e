"""gpu_checks: each check on parsed data shaped like gpu_parsers' and fabric's output."""

import copy

import pytest

from ansible_collections.raygate.cluster.plugins.module_utils.checks import STATUSES
from ansible_collections.raygate.cluster.plugins.module_utils.gate import gpu_checks as gc
from ansible_collections.raygate.cluster.plugins.module_utils.net import fabric

BUSES = ["18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"]


def ecc_block(sc=0, su=0, dc=0, du=0):
    return {"sram_correctable": sc, "sram_uncorrectable": su, "dram_correctable": dc, "dram_uncorrectable": du}


def gpu(index=0, **changes):
    """One GPU as parse_nvsmi_xml returns it: a healthy H100 unless ``changes`` say otherwise."""
    g = {
        "index": index,
        "minor_number": index,
        "uuid": "GPU-%d" % index,
        "pci_bus_id": "00000000:%s:00.0" % BUSES[index],
        "name": "NVIDIA H100 80GB HBM3",
        "persistence_mode": "Enabled",
        "ecc_mode_current": "Enabled",
        "ecc_errors": {"volatile": ecc_block(), "aggregate": ecc_block()},
        "retired_pages": {"pending": None, "single_bit": None, "double_bit": None},
        "remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False},
        "pcie": {"gen_current": 5, "gen_max": 5, "width_current": 16, "width_max": 16},
        "clocks_event_reasons": {
            "hw_slowdown": False,
            "hw_thermal_slowdown": False,
            "sw_thermal_slowdown": False,
            "sw_power_cap": True,
        },
        "temperature_c": 35,
        "fabric": {"state": "Completed", "status": "Success"},
        "mig_mode": "Disabled",
    }
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(g.get(key), dict):
            g[key] = dict(g[key], **value)
        else:
            g[key] = value
    return g


def node(n=8, **per_gpu):
    """``per_gpu``: {"g3": {changes}} applies to GPU 3."""
    return [gpu(i, **per_gpu.get("g%d" % i, {})) for i in range(n)]


def nvsmi(gpus, driver="550.90.07", cuda="12.4"):
    return {"driver_version": driver, "cuda_version": cuda, "attached_gpus": len(gpus), "gpus": gpus}


# ------------------------------------------------------------------ helpers
@pytest.mark.parametrize(
    "actual, wanted, ok",
    [
        ("550.90.07", "550.90.07", True),
        ("550.90.07", "550", True),
        ("550.90.07", "550.90", True),
        ("550.90.07", "550.", True),
        ("5500.1", "550", False),
        ("550.90.07", "550.9", False),
        ("12.4", "12.4", True),
        ("12.4", "12", True),
        ("12.40", "12.4", False),
        (None, "550", False),
    ],
)
def test_version_matches_at_dot_boundaries(actual, wanted, ok):
    assert gc.version_matches(actual, wanted) is ok


def test_kernel_version_and_pci_key():
    assert gc.kernel_version("5.15.0-105-generic") == (5, 15)
    assert gc.kernel_version("6.1.0-18-amd64") == (6, 1)
    assert gc.kernel_version("weird") is None
    assert gc.pci_key("00000000:9B:00.0") == gc.pci_key("0000:9b:00") == (0, 0x9B, 0)
    assert gc.pci_key("00000001:18:00.0") != gc.pci_key("0000:18:00")
    assert gc.pci_key("nonsense") is None


# ------------------------------------------------------------------ gpu_count / versions
def test_gpu_count():
    assert gc.check_gpu_count(nvsmi(node(8)), 8)["status"] == "pass"
    missing = gc.check_gpu_count(nvsmi(node(7)), 8)
    assert missing["status"] == "fail" and missing["value"] == 7 and missing["threshold"] == 8
    assert "1 missing" in missing["detail"]
    assert gc.check_gpu_count(nvsmi(node(8)), 4)["status"] == "warn"
    skipped = gc.check_gpu_count(nvsmi(node(8)), None)
    assert skipped["status"] == "skip" and skipped["value"] == 8


def test_gpu_count_mentions_a_header_that_disagrees():
    data = nvsmi(node(7))
    data["attached_gpus"] = 8
    assert "header says 8 attached" in gc.check_gpu_count(data, 8)["detail"]


def test_versions():
    assert gc.check_version("driver_version", "550.90.07", "550")["status"] == "pass"
    bad = gc.check_version("driver_version", "535.161.08", "550")
    assert bad["status"] == "fail" and bad["detail"] == "driver version 535.161.08, expected 550"
    assert gc.check_version("cuda_version", "12.4", None)["status"] == "skip"
    assert gc.check_version("cuda_version", None, "12.4")["status"] == "fail"
    assert gc.check_version("cuda_version", None, None)["status"] == "skip"


# ------------------------------------------------------------------ modes
def test_persistence_and_ecc_mode():
    gpus = node(4, g2={"persistence_mode": "Disabled", "ecc_mode_current": None})
    bad = gc.check_persistence(gpus)
    assert bad["status"] == "fail" and bad["detail"] == "persistence mode not enabled: GPU 2: Disabled"
    assert gc.check_persistence(gpus, required=False)["status"] == "skip"
    ecc = gc.check_ecc_mode(gpus)
    assert ecc["status"] == "fail" and "GPU 2: not reported" in ecc["detail"]
    assert gc.check_ecc_mode(node(4))["status"] == "pass"
    assert gc.check_ecc_mode(gpus, required=False)["status"] == "skip"


# ------------------------------------------------------------------ ECC counters
def test_uncorrectable_volatile_fails_aggregate_warns():
    gpus = node(4, g1={"ecc_errors": {"volatile": ecc_block(su=1, du=2), "aggregate": ecc_block(du=5)}})
    vol = gc.check_ecc_uncorrectable(gpus, "volatile")
    assert vol["status"] == "fail" and vol["value"] == 3 and "GPU 1: 3" in vol["detail"]
    agg = gc.check_ecc_uncorrectable(gpus, "aggregate")
    assert agg["status"] == "warn" and agg["value"] == 5 and agg["name"] == "ecc_uncorrectable_aggregate"
    assert gc.check_ecc_uncorrectable(node(4), "volatile")["status"] == "pass"


def test_uncorrectable_not_reported_skips():
    none = {"sram_correctable": None, "sram_uncorrectable": None, "dram_correctable": None, "dram_uncorrectable": None}
    gpus = [gpu(i, ecc_errors={"volatile": none, "aggregate": none}) for i in range(2)]
    assert gc.check_ecc_uncorrectable(gpus, "volatile")["status"] == "skip"
    assert gc.check_ecc_correctable(gpus, "dram")["status"] == "skip"


def test_correctable_thresholds_and_severity():
    gpus = node(3, g0={"ecc_errors": {"volatile": ecc_block(sc=11, dc=1000)}})
    sram = gc.check_ecc_correctable(gpus, "sram")
    assert sram["status"] == "warn" and sram["value"] == 11 and sram["threshold"] == 10
    assert gc.check_ecc_correctable(gpus, "sram", fail=True)["status"] == "fail"
    assert gc.check_ecc_correctable(gpus, "sram", maximum=11)["status"] == "pass"
    dram = gc.check_ecc_correctable(gpus, "dram")
    assert dram["status"] == "pass" and dram["value"] == 1000 and dram["threshold"] == 1000
    assert gc.check_ecc_correctable(gpus, "dram", maximum=999)["status"] == "warn"
    assert gc.ECC_CORRECTABLE_MAX_DEFAULT == {"sram": 10, "dram": 1000}


def test_sram_threshold_flag_of_the_driver_trips_the_sram_check():
    agg = dict(ecc_block(), sram_threshold_exceeded=True)
    gpus = node(2, g1={"ecc_errors": {"aggregate": agg}})
    res = gc.check_ecc_correctable(gpus, "sram")
    assert res["status"] == "warn" and "GPU 1: SRAM error threshold exceeded" in res["detail"]
    assert gc.check_ecc_correctable(gpus, "dram")["status"] == "pass"


# ------------------------------------------------------------------ retirement and remapping
def test_retired_pages_pending():
    assert gc.check_retired_pending(node(2))["status"] == "skip"
    older = [gpu(0, retired_pages={"pending": False}), gpu(1, retired_pages={"pending": True})]
    res = gc.check_retired_pending(older)
    assert res["status"] == "fail" and res["detail"].endswith("GPU 1") and res["value"] == 1
    assert gc.check_retired_pending([gpu(0, retired_pages={"pending": False})])["status"] == "pass"


@pytest.mark.parametrize("field, needle", [("pending", "reset the GPU"), ("failure", "needs service")])
def test_remapped_rows(field, needle):
    gpus = node(8, g3={"remapped_rows": {field: True}})
    res = gc.check_remapped(gpus, field)
    assert res["name"] == "remapped_rows_" + field
    assert res["status"] == "fail" and needle in res["detail"] and res["detail"].endswith("GPU 3")
    assert gc.check_remapped(node(8), field)["status"] == "pass"
    mig = [gpu(0, remapped_rows={"pending": None, "failure": None})]
    assert gc.check_remapped(mig, field)["status"] == "skip"


# ------------------------------------------------------------------ PCIe, throttling, fabric manager
def test_pcie_width_fails_generation_warns():
    narrow = node(2, g1={"pcie": {"gen_current": 3, "width_current": 8}})
    res = gc.check_pcie(narrow)
    assert res["status"] == "fail" and "GPU 1: x8 of x16 (gen 3)" in res["detail"]
    idle = node(2, g0={"pcie": {"gen_current": 1}})
    res = gc.check_pcie(idle)
    assert res["status"] == "warn" and "GPU 0: gen 1 of 5" in res["detail"]
    assert gc.check_pcie(node(2))["status"] == "pass"
    assert gc.check_pcie(narrow, enabled=False)["status"] == "skip"
    unknown = [gpu(0, pcie={"gen_current": None, "gen_max": None, "width_current": None, "width_max": None})]
    assert gc.check_pcie(unknown)["status"] == "skip"


@pytest.mark.parametrize("reason", ["hw_slowdown", "hw_thermal_slowdown", "sw_thermal_slowdown"])
def test_throttle_reasons_that_fail(reason):
    gpus = node(2, g1={"clocks_event_reasons": {reason: True}, "temperature_c": 91})
    res = gc.check_throttle(gpus)
    assert res["status"] == "fail" and res["detail"] == "clocks slowed down: GPU 1: %s at 91 C" % reason


def test_throttle_power_cap_passes_and_unknown_skips():
    assert gc.check_throttle(node(2))["status"] == "pass"  # sw_power_cap is Active in node()
    assert gc.check_throttle(node(2, g0={"clocks_event_reasons": {"hw_slowdown": True}}), False)["status"] == "skip"
    blank = dict.fromkeys(["hw_slowdown", "hw_thermal_slowdown", "sw_thermal_slowdown", "sw_power_cap"])
    assert gc.check_throttle([gpu(0, clocks_event_reasons=blank)])["status"] == "skip"


def test_fabric_manager_modes():
    down = node(2, g1={"fabric": {"state": "In Progress", "status": None}})
    res = gc.check_fabric_manager(down)
    assert res["status"] == "fail" and "GPU 1: state In Progress, status not reported" in res["detail"]
    assert gc.check_fabric_manager(node(2))["status"] == "pass"
    pcie_only = [gpu(i, fabric=None) for i in range(2)]
    assert gc.check_fabric_manager(pcie_only, "auto")["status"] == "skip"
    assert gc.check_fabric_manager(pcie_only, "yes")["status"] == "fail"
    assert gc.check_fabric_manager(down, "no")["status"] == "skip"


# ------------------------------------------------------------------ NVLink
def links(n_gpus=2, n_links=4, bad=()):
    """parse_nvlink_status output; ``bad``: [((gpu, link), state)]."""
    bad = dict(bad)
    out = {}
    for g in range(n_gpus):
        out[g] = []
        for link in range(n_links):
            state = bad.get((g, link), "up")
            out[g].append({"link": link, "state": state, "speed_gbps": 26.562 if state == "up" else None})
    return out


def test_nvlink_pass_and_down_links():
    assert gc.check_nvlink(links())["status"] == "pass"
    res = gc.check_nvlink(links(bad=[((1, 2), "inactive"), ((1, 3), "down")]))
    assert res["status"] == "fail" and res["detail"] == "NVLink links not up: GPU 1: link 2 inactive, link 3 down"


def test_nvlink_gpu_with_no_links_listed_while_others_have_them():
    data = links(3)
    data[2] = []
    res = gc.check_nvlink(data)
    assert res["status"] == "fail" and "GPU 2: 0 of 4 links up" in res["detail"]


def test_nvlink_none_at_all_skips_and_errors_fail():
    assert gc.check_nvlink({0: [], 1: []})["status"] == "skip"
    assert gc.check_nvlink({})["status"] == "skip"
    assert gc.check_nvlink(None)["status"] == "skip"
    assert gc.check_nvlink(links(), enabled=False)["status"] == "skip"
    assert gc.check_nvlink(None, error="nvidia-smi nvlink -s failed")["status"] == "fail"


# ------------------------------------------------------------------ Xid
def xid(num, pci="0000:18:00", ts=None, clock=None, message="msg"):
    return {"xid": num, "pci": pci, "pid": 1, "name": "p", "message": message, "timestamp": ts, "clock": clock}


def test_xid_fatal_fails_and_names_the_gpu():
    res = gc.check_xid([xid(79, "0000:9a:00"), xid(79, "0000:9a:00"), xid(13)], node(8), scope="dmesg")
    assert res["status"] == "fail" and res["value"] == 3
    assert "Xid 79 [fatal] on GPU 4 (0000:9a:00) x2: msg" in res["detail"]
    assert "Xid 13 [application] on GPU 0 (0000:18:00): msg" in res["detail"]
    assert res["detail"].endswith("(dmesg)")


def test_xid_application_and_unlisted_warn():
    assert gc.check_xid([xid(13)], node(1))["status"] == "warn"
    res = gc.check_xid([xid(999, "0000:77:00")], node(1))
    assert res["status"] == "warn" and "Xid 999 [unlisted] on 0000:77:00" in res["detail"]


def test_xid_lists_are_configurable():
    assert gc.check_xid([xid(13)], node(1), fatal=[13])["status"] == "fail"
    assert gc.check_xid([xid(79)], node(1), fatal=[], warn=[79])["status"] == "warn"


def test_xid_none_errors_and_not_captured():
    assert gc.check_xid([], node(1))["status"] == "pass"
    assert gc.check_xid(None, node(1))["status"] == "skip"
    res = gc.check_xid(None, node(1), error="dmesg failed (1): Operation not permitted")
    assert res["status"] == "warn" and "Operation not permitted" in res["detail"]


def test_xids_in_window_by_clock():
    xids = [xid(79, ts=100.0, clock="boot"), xid(13, ts=9000.0, clock="boot"), xid(48, ts=1000.0, clock="wall")]
    xids.append(xid(63))  # undated: always kept
    kept = gc.xids_in_window(xids, 3600, now=2000.0, uptime=10000.0)
    assert [x["xid"] for x in kept] == [13, 48, 63]
    assert gc.xids_in_window(xids, 0, now=2000.0, uptime=10000.0) == xids
    # No boot reference (uptime unknown): boot-stamped lines are kept rather than dropped.
    assert [x["xid"] for x in gc.xids_in_window(xids, 10, now=2000.0, uptime=None)] == [79, 13, 63]


# ------------------------------------------------------------------ DCGM
def dcgm(*tests):
    parsed = {"tests": [], "overall": "pass", "metadata": {}}
    for name, status, gpus, info in tests:
        parsed["tests"].append({"name": name, "category": "Hardware", "status": status, "gpus": gpus, "info": info})
    found = set(t["status"] for t in parsed["tests"])
    parsed["overall"] = "fail" if "fail" in found else "warn" if "warn" in found else "pass"
    return parsed


def test_dcgm_levels_and_results():
    assert gc.check_dcgm(None, 0)["status"] == "skip"
    ok = gc.check_dcgm(dcgm(("Memory", "pass", [], ""), ("PCIe", "skip", [], "")), 1)
    assert ok["status"] == "pass" and ok["detail"] == "dcgmi diag -r 1: 1 tests passed" and ok["threshold"] == 1
    bad = gc.check_dcgm(dcgm(("Memory", "fail", [3], "GPU 3 miscompare\nmore"), ("PCIe", "warn", [1], "")), 2)
    assert bad["status"] == "fail" and bad["detail"] == "dcgmi diag -r 2: Memory fail on GPU 3: GPU 3 miscompare"
    warn = gc.check_dcgm(dcgm(("Targeted Power", "warn", [1], "")), 3)
    assert warn["status"] == "warn" and "Targeted Power warn on GPU 1" in warn["detail"]
    assert gc.check_dcgm(None, 1, error="dcgmi not found")["status"] == "fail"
    captured = gc.check_dcgm(dcgm(("Memory", "pass", [], "")), None)
    assert captured["status"] == "pass" and captured["detail"].startswith("dcgmi diag:")
    assert gc.check_dcgm(None, None)["detail"] == "dcgmi diag output not captured"


# ------------------------------------------------------------------ fabric ports
def info(kind="ib", active=8, down=(), rate=400.0):
    names = ["mlx5_%d:1" % i for i in range(active + len(down)) if i not in down]
    return {
        "fabric": kind,
        "active_ports": names[:active],
        "down_ports": ["mlx5_%d:1" % i for i in down],
        "rate_gbps": dict((n, rate) for n in names[:active]),
    }


def test_fabric_ports_without_expectations():
    assert gc.check_fabric_ports(info())["status"] == "pass"
    some = gc.check_fabric_ports(info(active=6, down=(1, 5)))
    assert some["status"] == "warn" and some["detail"] == "6 ib ports active, 2 down: mlx5_1:1, mlx5_5:1"
    none_up = gc.check_fabric_ports(info(active=0, down=(0, 1)))
    assert none_up["status"] == "fail" and none_up["detail"].startswith("no active ib port")


def test_fabric_ports_with_expectations():
    short = gc.check_fabric_ports(info(active=6, down=(1, 5)), expected_ports=8)
    assert short["status"] == "fail" and short["detail"].startswith("6 of 8 expected ib ports active")
    enough = gc.check_fabric_ports(info(active=8, down=(9,)), expected_ports=8)
    assert enough["status"] == "pass" and "1 more down" in enough["detail"]
    slow = gc.check_fabric_ports(info(rate=200.0), expected_rate=400)
    assert slow["status"] == "fail" and "slower than 400 Gb/s: mlx5_0:1 200 Gb/s" in slow["detail"]
    assert gc.check_fabric_ports(info(rate=400.0), expected_rate=400)["status"] == "pass"


def test_fabric_ports_fabric_kind():
    assert gc.check_fabric_ports(info(), fabric="none")["status"] == "skip"
    assert gc.check_fabric_ports(None)["status"] == "skip"
    wrong = gc.check_fabric_ports(info("roce"), fabric="ib")
    assert wrong["status"] == "fail" and wrong["detail"] == "expected a ib fabric, found a roce fabric"
    tcp = {"fabric": "none", "active_ports": [], "down_ports": [], "rate_gbps": {}}
    assert gc.check_fabric_ports(tcp)["status"] == "skip"
    assert gc.check_fabric_ports(tcp, expected_ports=2)["status"] == "fail"
    assert gc.check_fabric_ports(tcp, fabric="efa")["status"] == "fail"


def test_devices_from_captured_tools_feed_fabric_detect():
    ibstat = [
        {
            "name": "mlx5_0",
            "ca_type": "MT4129",
            "ports": [
                {"port": 1, "state": "Active", "phys_state": "LinkUp", "rate_gbps": 400.0, "link_layer": "InfiniBand"}
            ],
        },
        {
            "name": "mlx5_1",
            "ca_type": "MT4129",
            "ports": [
                {"port": 1, "state": "Down", "phys_state": "Disabled", "rate_gbps": 10.0, "link_layer": "InfiniBand"}
            ],
        },
    ]
    found = fabric.detect(gc.devices_from_tools(ibstat=ibstat))
    assert found["fabric"] == "ib" and found["active_ports"] == ["mlx5_0:1"] and found["down_ports"] == ["mlx5_1:1"]
    fi_info = [
        {"provider": "efa", "domain": "rdmap16s27-rdm"},
        {"provider": "efa", "domain": "rdmap16s27-dgrm"},
        {"provider": "efa", "domain": "rdmap32s27-rdm"},
        {"provider": "tcp", "domain": "eth0"},
    ]
    found = fabric.detect(gc.devices_from_tools(fi_info=fi_info))
    assert found["fabric"] == "efa" and found["active_ports"] == ["rdmap16s27:1", "rdmap32s27:1"]
    assert fabric.detect(gc.devices_from_tools())["fabric"] == "none"


# ------------------------------------------------------------------ GPUDirect RDMA
PROPRIETARY = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.90.07  Fri May 31 09:35:42 UTC 2024"
OPEN = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.90.07  Release Build"


@pytest.mark.parametrize(
    "evidence, status, needle",
    [
        ({"peermem": True, "driver": PROPRIETARY, "kernel": "5.4.0"}, "pass", "nvidia_peermem"),
        ({"peermem": False, "driver": OPEN, "kernel": "5.15.0-105-generic"}, "pass", "dma-buf"),
        ({"peermem": False, "driver": OPEN, "kernel": "5.12.0"}, "pass", "dma-buf"),
        ({"peermem": False, "driver": OPEN, "kernel": "5.11.22"}, "fail", "older than 5.12"),
        ({"peermem": False, "driver": PROPRIETARY, "kernel": "6.8.0"}, "fail", "proprietary kernel module"),
        ({"peermem": False, "driver": None, "kernel": "6.8.0"}, "fail", "no NVIDIA driver loaded"),
    ],
)
def test_gdr_evidence(evidence, status, needle):
    res = gc.check_gdr("ib", evidence)
    assert res["status"] == status and needle in res["detail"]


def test_gdr_skips():
    evidence = {"peermem": False, "driver": None, "kernel": "6.8.0"}
    assert gc.check_gdr("none", evidence)["status"] == "skip"
    assert gc.check_gdr("ib", evidence, required=False)["status"] == "skip"
    assert gc.check_gdr("ib", None)["status"] == "skip"
    assert gc.check_gdr(None, evidence)["status"] == "skip"


# ------------------------------------------------------------------ the whole node
def healthy_evidence():
    return {
        "nvsmi": nvsmi(node(8)),
        "nvlink": links(8, 18),
        "xids": [],
        "sxids": [],
        "nvrm": [],
        "denied": [],
        "xid_scope": "journal since boot",
        "dcgm": dcgm(("Memory", "pass", [], "")),
        "dcgm_level": 1,
        "fabric": info(),
        "fabric_counters": {
            "fabric": "ib",
            "growth": {"mlx5_0:1": {"symbol_error": 0, "link_downed": 0}},
            "since": 1763715600.0,
            "span": 3600.0,
            "within": True,
        },
        "gdr": {"peermem": True, "driver": PROPRIETARY, "kernel": "6.1.0"},
    }


def test_evaluate_healthy_node_in_contract_order():
    results = gc.evaluate(healthy_evidence(), {"expected_gpus": 8, "driver_version": "550", "cuda_version": "12.4"})
    assert [r["name"] for r in results] == list(gc.CHECK_NAMES)
    assert len(gc.CHECK_NAMES) == 25
    assert all(r["status"] in STATUSES for r in results)
    statuses = dict((r["name"], r["status"]) for r in results)
    assert statuses.pop("retired_pages_pending") == "skip"
    assert statuses.pop("device_access") == "skip"  # no service_user
    assert set(statuses.values()) == {"pass"}
    assert gc.summarize(results) == {"verdict": "pass", "healthy": True, "reasons": [], "warn_reasons": []}


def test_evaluate_tool_failure_fails_gpu_count_once_and_skips_the_rest():
    evidence = healthy_evidence()
    evidence.update(nvsmi=None, nvsmi_error="nvidia-smi -q -x failed (rc 9): no driver")
    results = gc.evaluate(evidence, {"check_nvlink": False, "check_fabric_manager": "no"})
    by = dict((r["name"], r) for r in results)
    assert by["gpu_count"]["status"] == "fail"
    assert by["gpu_count"]["detail"].startswith("nvidia-smi -q -x failed (rc 9): no driver; not run: driver_version")
    for name in gc.NVSMI_CHECKS[1:]:
        wanted = "not checked" if name in ("nvlink", "fabric_manager") else gc.NEEDS_NVSMI
        assert by[name]["status"] == "skip" and by[name]["detail"] == wanted
    assert by["xid"]["status"] == "pass" and by["fabric_ports"]["status"] == "pass"
    summary = gc.summarize(results)
    assert summary["healthy"] is False and len(summary["reasons"]) == 1
    assert summary["reasons"][0].startswith("gpu_count: nvidia-smi -q -x failed (rc 9): no driver; not run: ")


def test_evaluate_not_captured_skips_gpu_checks():
    results = gc.evaluate({"dcgm_level": None}, {})
    assert set(r["status"] for r in results) == {"skip"}
    assert gc.summarize(results)["verdict"] == "pass"


def test_evaluate_passes_options_through():
    evidence = healthy_evidence()
    evidence["nvsmi"]["gpus"][2]["ecc_errors"]["volatile"]["sram_correctable"] = 50
    evidence["fabric"] = info(active=7, down=(7,))
    expect = {"ecc_correctable_max": {"sram": 100, "dram": 1000}, "expected_ports": 8, "fabric": "ib"}
    by = dict((r["name"], r) for r in gc.evaluate(copy.deepcopy(evidence), expect))
    assert by["ecc_correctable_sram"]["status"] == "pass" and by["ecc_correctable_sram"]["threshold"] == 100
    assert by["fabric_ports"]["status"] == "fail"
    by = dict((r["name"], r) for r in gc.evaluate(evidence, {"fail_on_ecc_correctable": True}))
    assert by["ecc_correctable_sram"]["status"] == "fail"
    assert by["fabric_ports"]["status"] == "warn"


def test_summarize_reasons_and_warnings():
    results = gc.evaluate(healthy_evidence(), {})
    results[12] = dict(results[12], status="warn", detail="Xid 13 [application] on GPU 0")
    summary = gc.summarize(results)
    assert summary["verdict"] == "warn" and summary["healthy"] is True
    assert summary["warn_reasons"] == ["xid: Xid 13 [application] on GPU 0"]
