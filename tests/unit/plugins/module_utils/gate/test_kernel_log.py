"""The kernel log beyond plain Xids: Xid-less driver errors, "caused by previous Xid", NVSwitch SXids,
the catalogue, dedup with first/last seen, the window, and allow/deny patterns.

Fixtures are short excerpts of real kernel logs posted publicly, exactly as posted, each with its
source; the real samples in ../shared/samples are read where present.
"""

import re

import pytest
from real_samples import needs_samples
from real_samples import sample as _sample

from ansible_collections.raygate.cluster.plugins.module_utils.gate import gpu_checks as gc
from ansible_collections.raygate.cluster.plugins.module_utils.gate import gpu_parsers as gp
from ansible_collections.raygate.cluster.plugins.module_utils.gate import xid_catalog as xc


def gpus(*buses):
    return [{"index": i, "pci_bus_id": "00000000:%s:00.0" % b} for i, b in enumerate(buses)]


# ------------------------------------------------------------------ fixtures from public reports
# NVIDIA/NVSentinel issue 155 ("Handle GPU falling even when there is no XID"): dmesg of a
# 570 driver, one record over three lines, no Xid.
FALLEN_MULTILINE = """[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0
               NVRM: (PCI ID: 10de:26b5) installed in this system has
               NVRM: fallen off the bus and is not responding to commands.
[ 1843.439662] NVRM: The NVIDIA probe routine failed for 1 device(s).
"""
# Bumblebee-Project/Bumblebee issue 554: the older one-line form.
FALLEN_OLD = """[   49.261458] NVRM: GPU at 0000:01:00.0 has fallen off the bus.
[   49.261465] NVRM: os_pci_init_handle: invalid context!
[   49.261472] NVRM: GPU at 0000:01:00.0 has fallen off the bus.
"""
# NVIDIA/gpu-operator issue 1146: RmInitAdapter failures in a syslog file.
INIT_FAILED = """Dec  2 11:49:53 worker4 kernel: [  885.242168] NVRM: GPU 0000:0a:00.0: RmInitAdapter failed! (0x24:0x72:1568)
Dec  2 11:49:53 worker4 kernel: [  885.242457] NVRM: GPU 0000:0a:00.0: rm_init_adapter failed, device minor number 5
Dec  2 11:50:34 worker4 kernel: [  926.232044] NVRM: GPU 0000:0a:00.0: RmInitAdapter failed! (0x24:0x72:1568)
"""  # noqa: E501
# NVIDIA/open-gpu-kernel-modules issue 789 ("RmInitAdapter failed!"): GSP firmware does not start.
GSP_INIT = """[  903.609564] NVRM: RmInitAdapter: Cannot initialize GSP firmware RM
[  903.610907] NVRM: GPU 0000:98:00.0: RmInitAdapter failed! (0x62:0x65:1792)
[  903.611884] NVRM: GPU 0000:98:00.0: rm_init_adapter failed, device minor number 0
"""
# NVIDIA/open-gpu-kernel-modules issue 1120: GSP-FMC boot error on an RTX 5080.
GSP_FMC = "[ 43.337565] NVRM: kgspBootstrap_GH100: GSP-FMC reported an error while attempting to boot GSP: 0xb\n"
# NVIDIA/open-gpu-kernel-modules issue 1150 (comment by jed-hacker): Xid 45 blamed on NVLink Xids.
CAUSED_BY = """kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149
kernel: NVRM: Xid (PCI:0000:ed:00): 45, pid=1818992, name=python3, Ch 0000000c caused by previous Xid 145
kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000002 caused by previous Xid 149
"""
# leptonai/gpud pull request 1160: NVLink5 Xids that say Nonfatal / Fatal themselves.
NVLINK5 = """NVRM: Xid (PCI:0000:01:00): 144, SAW_MVB Nonfatal XC0 i0 Link 0 (0x00000001 0x00000008 0x00000000 0x00000000 0x00000000 0x00000000)
NVRM: Xid (PCI:0000:00:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x026001c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)
"""  # noqa: E501
# NVIDIA/nvtrust issue 124: an NVSwitch event prints Data, the Non-fatal line and Severity.
SXID_NONFATAL = """[   38.175561] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Data {0x0000002b, 0x0000002b, 0x00000000, 0x0000002b, 0x80005302, 0x00000000, 0x00000000, 0x00000000, 0x00000000}
[   38.178720] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal, Link 44 Minion Link DLREQ interrupt
[   38.180708] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Severity 0 Engine instance 44 Sub-engine instance 00
[   38.183583] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Data {0x0000002c, 0x0000002c, 0x00000000, 0x0000002c, 0x80005302, 0x00000000, 0x00000000, 0x00000000, 0x00000000}
[   38.187830] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal, Link 45 Minion Link DLREQ interrupt
"""  # noqa: E501
# leptonai/gpud pull request 338: dmesg --decode --time-format iso, the Data line only.
SXID_DATA_ONLY = (
    "kern  :err   : 2025-01-25T10:34:54,859532+00:00 nvidia-nvswitch1: SXid (PCI:0000:84:00.0): 12028, "
    "Data {0x000001c0, 0x00bd5c8a, 0x00000500, 0x00000064, 0x00000000, 0x40008000, 0x5a001100, 0x00000000, "
    "0x00000000}\n"
)
# Hugging Face dataset LHRS-UM-FERI/MENTHOS-dataset-rootcause (kernel log lines labelled by root cause):
# fatal link faults on two switches and a non-fatal heartbeat timeout.
SXID_FATAL = """nvidia-nvswitch0: SXid (PCI:0000:c2:00.0): 20034, Fatal, Link 28 LTSSM Fault Up
nvidia-nvswitch0: SXid (PCI:0000:c2:00.0): 20034, Fatal, Link 29 LTSSM Fault Up
nvidia-nvswitch2: SXid (PCI:0000:c4:00.0): 10002, Severity 5 Engine instance 00 Sub-engine instance 00
nvidia-nvswitch3: SXid (PCI:0000:c5:00.0): 19084, Non-fatal, Link 10 AN1 Heartbeat Timeout Error (First)
"""


# ------------------------------------------------------------------ Xid-less driver errors
def test_fallen_off_the_bus_over_three_lines_takes_the_record_address_and_time():
    out = gp.parse_kernel_log(FALLEN_MULTILINE)
    assert out["xids"] == [] and out["sxids"] == []
    assert [(e["kind"], e["pci"], e["timestamp"], e["clock"]) for e in out["nvrm"]] == [
        ("fallen_off_bus", "0000:b3:00", 1843.308145, "boot"),
        ("probe_failed", "0000:b3:00", 1843.439662, "boot"),
    ]
    res = gc.check_kernel_errors(out["nvrm"], out["denied"], gpus("18", "b3"))
    assert res["status"] == "fail" and res["severity"] == "do-not-allocate"
    assert res["action"] == xc.REBOOT_NODE
    assert res["detail"].startswith("GPU has fallen off the bus (no Xid")
    assert "on GPU 1 (0000:b3:00)" in res["detail"]


def test_fallen_off_the_bus_old_form_dedups_per_gpu():
    out = gp.parse_kernel_log(FALLEN_OLD)
    [finding] = gc.kernel_error_findings(out["nvrm"], out["denied"])
    assert (finding["code"], finding["pci"], finding["count"]) == ("fallen_off_bus", "0000:01:00", 2)
    assert (finding["first_seen"], finding["last_seen"]) == (49.261458, 49.261472)


def test_rm_init_adapter_failures_in_syslog_wall_clock():
    now = gp.line_timestamp("Dec  2 12:00:00 worker4 kernel: x", 1e9)[0]
    out = gp.parse_kernel_log(INIT_FAILED, now)
    assert set(e["kind"] for e in out["nvrm"]) == {"init_failed"}
    assert set(e["clock"] for e in out["nvrm"]) == {"wall"}
    [finding] = gc.kernel_error_findings(out["nvrm"], [], gpus("0a"))
    assert (finding["gpu"], finding["count"], finding["status"]) == (0, 3, "fail")
    assert finding["last_seen"] - finding["first_seen"] == 41.0


def test_gsp_boot_failures():
    out = gp.parse_kernel_log(GSP_INIT + GSP_FMC)
    assert [(e["kind"], e["pci"]) for e in out["nvrm"]] == [
        ("gsp_init", None),
        ("init_failed", "0000:98:00"),
        ("init_failed", "0000:98:00"),
        ("gsp_init", None),
    ]
    findings = gc.kernel_error_findings(out["nvrm"], [])
    assert [(f["code"], f["count"]) for f in findings] == [("gsp_init", 2), ("init_failed", 2)]
    res = gc.check_kernel_errors(out["nvrm"], [])
    assert res["status"] == "fail" and "GSP firmware failed to boot x2" in res["detail"]


def test_every_driver_error_pattern_has_a_class_and_an_action_from_the_fixed_set():
    for key, rx, meaning, klass, action in xc.NVRM_ERRORS:
        re.compile(rx)
        assert klass in xc.CLASSES and action in xc.ACTIONS and meaning, key
        assert gp.judge_nvrm(key)["status"] == "fail"


def test_xid_lines_are_not_read_twice_as_driver_errors():
    line = "[ 3.0] NVRM: Xid (PCI:0000:18:00): 79, pid=1, name=a, GPU has fallen off the bus.\n"
    out = gp.parse_kernel_log(line)
    assert [x["xid"] for x in out["xids"]] == [79] and out["nvrm"] == []


# ------------------------------------------------------------------ caused by an earlier Xid
def test_caused_by_previous_xid_is_judged_by_the_cause():
    out = gp.parse_kernel_log(CAUSED_BY)
    assert [(x["xid"], x["cause"]) for x in out["xids"]] == [(45, 149), (45, 145), (45, 149)]
    findings = gc.xid_findings(out["xids"], gpus("dc", "ed"))
    assert [(f["code"], f["cause"], f["gpu"], f["count"]) for f in findings] == [(45, 149, 0, 2), (45, 145, 1, 1)]
    # 149 (NETIR) is link-fatal in every row of NVIDIA's decode table; 145 depends on bits not decoded.
    assert [(f["status"], f["severity"]) for f in findings] == [("fail", "do-not-allocate"), ("warn", "degraded")]
    res = gc.check_xid(out["xids"], gpus("dc", "ed"))
    assert res["status"] == "fail" and res["action"] == xc.RESET_GPU
    assert "Xid 45 [fatal] caused by Xid 149 on GPU 0 (0000:dc:00) x2" in res["detail"]
    # A plain 45 (an aborted job) only warns.
    assert gp.judge_xid(45, "Ch 00000008")["status"] == "warn"


def test_caused_by_follows_the_overrides_of_the_cause():
    xids = gp.parse_kernel_log(CAUSED_BY)["xids"]
    assert gc.check_xid(xids, fatal=[145])["detail"].count("[fatal]") == 2
    assert gc.check_xid(xids, warn=[149])["status"] == "warn"


# ------------------------------------------------------------------ catalogue
def test_nvlink5_xids_say_their_own_fatality():
    xids = gp.parse_kernel_log(NVLINK5)["xids"]
    verdicts = [gp.judge_xid(x["xid"], x["message"]) for x in xids]
    assert [(v["status"], v["severity"]) for v in verdicts] == [("warn", "info"), ("fail", "do-not-allocate")]


def test_xid_154_follows_the_recovery_action_it_names():
    # The wording of NVIDIA's Xid catalog (Xid 154 trigger conditions).
    reboot = gp.judge_xid(154, "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)")
    assert (reboot["status"], reboot["action"]) == ("fail", xc.REBOOT_NODE)
    reset = gp.judge_xid(154, "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)")
    assert (reset["status"], reset["action"]) == ("fail", xc.RESET_GPU)
    assert (
        gp.judge_xid(154, "GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)")["severity"]
        == "info"
    )


def test_catalogue_entries_are_well_formed():
    for code, (meaning, klass, action) in xc.XIDS.items():
        assert meaning and klass in set(xc.CLASSES) | {"nvlink5", "recovery"}, code
        assert action is None or action in xc.ACTIONS, code
        if klass == "fatal":
            assert action, "fatal Xid %d needs an action" % code
    for code, (name, kind) in xc.SXIDS.items():
        assert name and kind in ("info", "degraded", "fatal", "always_fatal"), code
    # Stricter than NVIDIA's immediate action where a reset must come before the next job.
    assert gp.classify_xid(63) == "fail" and gp.classify_xid(92) == "fail"
    # NVIDIA's catalog: 69 is RESTART_APP, 79 RESTART_BM, 94 restart the app and reset when convenient.
    assert gp.judge_xid(69)["label"] == "application"
    assert gp.judge_xid(79)["action"] == xc.REBOOT_NODE
    assert (gp.judge_xid(94)["status"], gp.judge_xid(94)["severity"]) == ("warn", "degraded")
    assert gp.judge_xid(999)["label"] == "unlisted" and gp.judge_xid(999)["status"] == "warn"


def test_overrides_sit_on_top_of_the_catalogue():
    assert gp.judge_xid(13, fatal=[13])["status"] == "fail"
    assert gp.judge_xid(13, fatal=[13])["action"] == xc.RESTART_JOB
    assert gp.judge_xid(999, fatal=[999])["action"] == xc.RESET_GPU
    assert gp.judge_xid(79, warn=[79])["status"] == "warn"
    assert gp.judge_xid(79, fatal=[79], warn=[79])["status"] == "fail"
    # Another code in the override list changes nothing for 48.
    assert gp.judge_xid(48, fatal=[13])["status"] == "fail"


# ------------------------------------------------------------------ SXids
def test_sxid_lines_of_one_event_dedup_and_the_word_decides():
    out = gp.parse_kernel_log(SXID_NONFATAL)
    assert [(s["sxid"], s["switch"], s["pci"], s["fatal"], s["link"]) for s in out["sxids"]] == [
        (22013, "nvidia-nvswitch3", "0000:04:00.0", None, None),
        (22013, "nvidia-nvswitch3", "0000:04:00.0", False, 44),
        (22013, "nvidia-nvswitch3", "0000:04:00.0", None, None),
        (22013, "nvidia-nvswitch3", "0000:04:00.0", None, None),
        (22013, "nvidia-nvswitch3", "0000:04:00.0", False, 45),
    ]
    assert out["xids"] == [] and out["nvrm"] == []
    [finding] = gc.sxid_findings(out["sxids"])
    assert (finding["count"], finding["links"], finding["status"], finding["severity"]) == (5, [44, 45], "warn", "info")
    assert finding["message"] == "Non-fatal, Link 44 Minion Link DLREQ interrupt"
    res = gc.check_sxid(out["sxids"], scope="dmesg")
    assert res["status"] == "warn" and res["detail"].startswith("SXid 22013 [info] on nvidia-nvswitch3 (0000:04:00.0)")
    assert res["detail"].endswith("(dmesg)") and " x5" in res["detail"]


def test_sxid_catalogue_decides_when_the_line_does_not_say():
    out = gp.parse_kernel_log(SXID_DATA_ONLY)
    [event] = out["sxids"]
    assert (event["sxid"], event["fatal"], event["clock"]) == (12028, None, "wall")
    res = gc.check_sxid(out["sxids"])
    assert (res["status"], res["severity"], res["action"]) == ("warn", "degraded", xc.RESET_GPU)


def test_fatal_sxids_fail_with_a_reboot():
    out = gp.parse_kernel_log(SXID_FATAL)
    findings = gc.sxid_findings(out["sxids"])
    assert [(f["code"], f["switch"], f["count"], f["status"]) for f in findings] == [
        (20034, "nvidia-nvswitch0", 2, "fail"),
        (10002, "nvidia-nvswitch2", 1, "warn"),
        (19084, "nvidia-nvswitch3", 1, "warn"),
    ]
    assert findings[0]["links"] == [28, 29] and findings[1]["label"] == "unlisted"
    res = gc.check_sxid(out["sxids"])
    assert (res["status"], res["action"]) == ("fail", xc.REBOOT_NODE)
    assert res["detail"].startswith("SXid 20034 [fatal] on nvidia-nvswitch0 (0000:c2:00.0) link 28,29 x2")
    # Always-fatal codes fail whatever the line says; a listed fatal one said Non-fatal only warns.
    assert gp.judge_sxid(12020, fatal=False)["status"] == "fail"
    assert gp.judge_sxid(20034, fatal=False)["status"] == "warn"
    assert gp.judge_sxid(22013, fatal=True)["status"] == "fail"


def test_sxid_timestamps_ignore_the_message():
    line = "[  38.5] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal, Link 44 at [ 99.0]"
    assert gp.line_timestamp(line) == (38.5, "boot")
    assert gp.line_timestamp("nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, at [ 99.0]") == (None, None)


# ------------------------------------------------------------------ allow / deny
def test_deny_fails_a_line_without_an_xid_and_allow_wins():
    text = FALLEN_OLD + "[ 50.0] mlx5_core 0000:ab:00.0: mlx5_health_report: FW fatal error\n"
    out = gp.parse_kernel_log(text, deny=[r"mlx5_core .*fatal error"])
    [denied] = out["denied"]
    assert (denied["pattern"], denied["pci"], denied["timestamp"]) == (r"mlx5_core .*fatal error", "0000:ab:00", 50.0)
    res = gc.check_kernel_errors(out["nvrm"], out["denied"])
    assert res["status"] == "fail" and "denylisted /mlx5_core .*fatal error/ on 0000:ab:00" in res["detail"]
    allowed = gp.parse_kernel_log(text, allow=["fallen off the bus", "mlx5"], deny=["mlx5"])
    assert allowed == {"xids": [], "sxids": [], "nvrm": [], "denied": []}


def test_allow_skips_even_an_xid():
    line = "[ 3.0] NVRM: Xid (PCI:0000:18:00): 79, pid=1, name=a, GPU has fallen off the bus.\n"
    assert gp.parse_kernel_log(line, allow=[r"PCI:0000:18:00\): 79"])["xids"] == []


def test_bad_patterns_are_refused_with_their_index():
    with pytest.raises(ValueError, match=r"kernel_deny\[1\] '\(oops' is not a valid regular expression"):
        gp.compile_patterns(["ok", "(oops"], "kernel_deny")
    with pytest.raises(ValueError, match=r"kernel_allow\[0\] must be a non-empty regular expression"):
        gp.compile_patterns([""], "kernel_allow")
    with pytest.raises(ValueError):
        gp.parse_kernel_log("x", deny=["[unclosed"])


# ------------------------------------------------------------------ window
def test_window_applies_to_every_kind_of_event():
    text = SXID_NONFATAL + FALLEN_OLD + "[ 5000.0] NVRM: Xid (PCI:0000:18:00): 13, pid=1, name=a, x\n"
    out = gp.parse_kernel_log(text, deny=["invalid context"])
    kept = dict((k, gc.events_in_window(v, 100, None, 5050.0)) for k, v in out.items())
    assert [x["xid"] for x in kept["xids"]] == [13]
    assert kept["sxids"] == [] and kept["nvrm"] == [] and kept["denied"] == []


def test_checks_without_a_kernel_log():
    assert gc.check_sxid(None)["status"] == "skip"
    assert gc.check_kernel_errors(None)["status"] == "skip"
    assert gc.check_sxid([], error="dmesg failed")["detail"] == "kernel log not read (see xid)"
    assert gc.check_kernel_errors([], [])["status"] == "pass"
    assert gc.kernel_findings({"xids": None}, {}) == []


# ------------------------------------------------------------------ the real samples
@needs_samples
def test_sample_xid119_gsp_timeout_is_one_finding_plus_the_rate_limit_line():
    out = gp.parse_kernel_log(_sample("dmesg_xid119_gsp_timeout_h100_xe9680.txt"))
    [finding] = gc.xid_findings(out["xids"])
    assert (finding["code"], finding["pci"], finding["count"], finding["clock"]) == (119, "0000:9b:00", 5, "wall")
    assert finding["last_seen"] - finding["first_seen"] == 355.0
    assert (finding["status"], finding["action"]) == ("fail", xc.RESET_GPU)
    # "Rate limiting GSP RPC error prints ... The GPU likely needs to be reset." carries no Xid.
    [gsp] = out["nvrm"]
    assert (gsp["kind"], gsp["pci"]) == ("gsp_timeout", "0000:9b:00")
    assert gc.check_kernel_errors(out["nvrm"], out["denied"])["status"] == "fail"
    assert gc.check_sxid(out["sxids"])["status"] == "pass"


@needs_samples
def test_sample_app_fault_warns_with_restart_the_job():
    out = gp.parse_kernel_log(_sample("dmesg_xid13_43_app_fault.txt"))
    res = gc.check_xid(out["xids"], gpus("38"))
    assert (res["status"], res["severity"], res["action"]) == ("warn", "info", xc.RESTART_JOB)
    assert res["detail"].startswith("Xid 13 [application] on GPU 0 (0000:38:00) x16")
    assert gc.check_kernel_errors(out["nvrm"], out["denied"])["status"] == "pass"


@needs_samples
def test_sample_dbe_row_remap_and_peermem_noise():
    text = _sample("dmesg_xid48_63_94_dbe_rowremap.txt")
    out = gp.parse_kernel_log(text)
    findings = gc.xid_findings(out["xids"], gpus("19"))
    assert [(f["code"], f["count"], f["status"]) for f in findings] == [
        (48, 1, "fail"),
        (63, 1, "fail"),
        (94, 9, "warn"),
    ]
    assert gc.check_kernel_errors(out["nvrm"], out["denied"])["status"] == "pass"
    # The peermem lines are noise until someone denylists them; allowing them wins over denying.
    peermem = r"nvidia-peermem nv_get_p2p_free_callback:\d+ ERROR"
    denied = gp.parse_kernel_log(text, deny=[peermem])["denied"]
    assert len(denied) == 30 and gc.check_kernel_errors([], denied)["detail"].count("x30") == 1
    assert gp.parse_kernel_log(text, allow=[peermem], deny=[peermem])["denied"] == []


@needs_samples
def test_sample_single_undated_line_stays_in_any_window():
    out = gp.parse_kernel_log(_sample("dmesg_xid63_row_remapper_single_line_mleng.txt"))
    kept = gc.events_in_window(out["xids"], 60, 1e12, 1e6)
    assert [(x["xid"], x["timestamp"]) for x in kept] == [(63, None)]
    [finding] = gc.xid_findings(kept)
    assert finding["first_seen"] is None and finding["clock"] is None
