# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The catalogue gpu_health judges kernel log lines by: Xids, NVSwitch SXids, Xid-less NVRM errors.

Data only (AnsiballZ ships module_utils as .py files, so the table is Python, not YAML); the
judging lives in gpu_parsers (``judge_xid``, ``judge_sxid``, ``judge_nvrm``).

Sources:
- Xids: NVIDIA, "Analyzing Xid Errors with the Xid Catalog" (Ampere and newer GPUs),
  https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html - the Description column
  gives the meaning, the "Resolution Bucket (Immediate Action)" column the class and action:
  RESTART_APP -> app / restart the job; IGNORE -> info; RESET_GPU -> fatal / reset the GPU;
  RESTART_BM -> fatal / reboot the node; CHECK_MECHANICALS -> fatal / repair. Codes the catalogue
  marks "Unused" on A100/H100/B100/GB200 are left out (they judge as unlisted) except 61.
  Where this table is stricter than NVIDIA's immediate action, the entry says why: a gate admits
  nodes before work lands on them, so it fails what needs a reset before the next job.
- Row remapping ("reset gpu to activate"): NVIDIA, "GPU Memory Error Management",
  https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/
- SXids: NVIDIA Fabric Manager User Guide (DU-09883-001), appendix D "NVSwitch SXid Errors":
  non-fatal (D.4), fatal (D.5) and always fatal (D.6) tables.
- Xid-less NVRM lines: the driver's own wording, as posted in public bug reports; each pattern
  below has a real line among the fixtures of tests/unit/plugins/module_utils/gate/test_kernel_log.py,
  with its source named there.
"""

from __future__ import annotations

# ------------------------------------------------------------------ recommended actions
# A fixed set, so reports and automation can act on them (worst first is not implied).
RESTART_JOB = "restart the job"
RESET_GPU = "reset the GPU"
REBOOT_NODE = "reboot the node"
REPAIR = "drain and send for repair"
FIX_DRIVER = "fix the driver install"
ACTIONS = (RESTART_JOB, RESET_GPU, REBOOT_NODE, REPAIR, FIX_DRIVER)

# ------------------------------------------------------------------ classes
# class -> (check status, severity). fatal: the node must not take work; degraded: usable, fix it
# soon; app: the faulting program is at fault, the GPU is fine; info: nothing to do.
CLASSES = {
    "fatal": ("fail", "do-not-allocate"),
    "degraded": ("warn", "degraded"),
    "app": ("warn", "info"),
    "info": ("warn", "info"),
}
# How check details name a class.
LABELS = {"fatal": "fatal", "degraded": "degraded", "app": "application", "info": "info"}

# ------------------------------------------------------------------ Xids
# code -> (meaning, class, action). Class "nvlink5" (144-150): the line itself says Fatal or
# Nonfatal (NVIDIA's WORKFLOW_NVLINK5_ERR); without the word the entry's fallback class applies.
# Class "recovery" (154): the line names the recovery action the driver now requires.
_APP = "app"
XIDS = {
    8: ("GPU stopped processing", _APP, RESTART_JOB),
    11: ("invalid or corrupted push buffer stream", _APP, RESTART_JOB),
    13: ("graphics engine exception", _APP, RESTART_JOB),
    14: ("fake or injected error", "info", None),
    25: ("invalid or illegal push buffer stream", _APP, RESTART_JOB),
    31: ("GPU memory page fault", _APP, RESTART_JOB),
    32: ("invalid or corrupted push buffer stream (DMA controller fault)", _APP, RESTART_JOB),
    37: ("driver firmware error", "info", None),
    38: ("driver firmware error (watchdog)", "info", None),
    39: ("copy engine exception", _APP, RESTART_JOB),
    40: ("copy engine exception", _APP, RESTART_JOB),
    41: ("copy engine exception", _APP, RESTART_JOB),
    43: ("GPU stopped processing (the application hit a fault; the GPU stays healthy)", _APP, RESTART_JOB),
    44: ("graphics engine fault during context switch", "info", None),
    45: ("preemptive cleanup after an earlier error or an aborted job", _APP, RESTART_JOB),
    46: ("GPU stopped processing (timeout)", "fatal", RESET_GPU),
    48: ("double bit ECC error", "fatal", RESET_GPU),
    54: ("auxiliary power is not connected to the GPU board", "fatal", REPAIR),
    60: ("video processor exception", _APP, RESTART_JOB),
    # Unused on Ampere and newer; on older GPUs a PMU breakpoint (internal micro-controller).
    61: ("internal micro-controller breakpoint (older GPUs)", "fatal", RESET_GPU),
    62: ("internal micro-controller halt", "fatal", RESET_GPU),
    # NVIDIA: IGNORE (the GPU keeps working). Stricter here: the remap or retirement takes effect
    # only after a GPU reset, and remapped_rows_pending fails until then too.
    63: ("row remap or page retirement pending (reset the GPU to apply it)", "fatal", RESET_GPU),
    64: ("row remap or page retirement failure", "fatal", RESET_GPU),
    66: ("illegal access by driver", "info", None),
    67: ("illegal access by driver", "info", None),
    68: ("NVDEC0 exception", _APP, RESTART_JOB),
    69: ("graphics engine class error", _APP, RESTART_JOB),
    70: ("copy engine error (CE3)", _APP, RESTART_JOB),
    71: ("copy engine error (CE4)", _APP, RESTART_JOB),
    72: ("copy engine error (CE5)", _APP, RESTART_JOB),
    74: ("NVLink error", "fatal", RESET_GPU),
    75: ("copy engine error (CE6)", _APP, RESTART_JOB),
    76: ("copy engine error (CE7)", _APP, RESTART_JOB),
    77: ("copy engine error (CE8)", _APP, RESTART_JOB),
    79: ("GPU has fallen off the bus", "fatal", REBOOT_NODE),
    80: ("corrupted data sent to the GPU", _APP, RESTART_JOB),
    82: ("NVJPG0 error", _APP, RESTART_JOB),
    83: ("NVDEC1 error", _APP, RESTART_JOB),
    84: ("NVDEC2 error", _APP, RESTART_JOB),
    85: ("copy engine error (CE9)", _APP, RESTART_JOB),
    86: ("OFA exception", _APP, RESTART_JOB),
    88: ("NVDEC3 error", _APP, RESTART_JOB),
    89: ("NVDEC4 error", _APP, RESTART_JOB),
    # NVIDIA: IGNORE now, CONTACT_SUPPORT to investigate. Stricter here: a GPU whose single-bit
    # error rate is excessive goes for service before it takes a job.
    92: ("high single-bit ECC error rate", "fatal", REPAIR),
    93: ("InfoROM wear limit reached (non-fatal)", "info", None),
    # NVIDIA: restart the application; reset the GPU when convenient.
    94: ("contained memory error (the job must restart; reset the GPU when convenient)", "degraded", RESET_GPU),
    95: ("uncontained memory error", "fatal", RESET_GPU),
    96: ("NVDEC5 error", _APP, RESTART_JOB),
    97: ("NVDEC6 error", _APP, RESTART_JOB),
    98: ("NVDEC7 error", _APP, RESTART_JOB),
    99: ("NVJPG1 error", _APP, RESTART_JOB),
    100: ("NVJPG2 error", _APP, RESTART_JOB),
    101: ("NVJPG3 error", _APP, RESTART_JOB),
    102: ("NVJPG4 error", _APP, RESTART_JOB),
    103: ("NVJPG5 error", _APP, RESTART_JOB),
    104: ("NVJPG6 error", _APP, RESTART_JOB),
    105: ("NVJPG7 error", _APP, RESTART_JOB),
    106: ("SMBPBI test message", "info", None),
    107: ("SMBPBI test message", "info", None),
    109: ("context switch timeout", "fatal", RESET_GPU),
    # NVIDIA: revert hardware changes and cold reset the system.
    110: ("security fault", "fatal", REBOOT_NODE),
    119: ("GSP RPC timeout", "fatal", RESET_GPU),
    120: ("GSP error", "fatal", RESET_GPU),
    121: ("corrected C2C NVLink errors", "info", None),
    126: ("copy engine error (CE10)", _APP, RESTART_JOB),
    127: ("copy engine error (CE11)", _APP, RESTART_JOB),
    128: ("copy engine error (CE12)", _APP, RESTART_JOB),
    129: ("copy engine error (CE13)", _APP, RESTART_JOB),
    130: ("copy engine error (CE14)", _APP, RESTART_JOB),
    131: ("copy engine error (CE15)", _APP, RESTART_JOB),
    132: ("copy engine error (CE16)", _APP, RESTART_JOB),
    133: ("copy engine error (CE17)", _APP, RESTART_JOB),
    134: ("copy engine error (CE18)", _APP, RESTART_JOB),
    135: ("copy engine error (CE19)", _APP, RESTART_JOB),
    136: ("NVLink training failed", "fatal", RESET_GPU),
    137: ("NVLink privilege error (illegal peer-to-peer access, usually the application)", _APP, RESTART_JOB),
    139: ("OFA1 error", _APP, RESTART_JOB),
    140: ("unrecovered ECC error", "fatal", RESET_GPU),
    141: ("CUDA fast path error", "info", None),
    143: ("GPU initialization error", "fatal", RESET_GPU),
    144: ("NVLink SAW error", "nvlink5", RESET_GPU),
    145: ("NVLink RLW error", "nvlink5", RESET_GPU),
    146: ("NVLink TLW error", "nvlink5", RESET_GPU),
    147: ("NVLink TREX error", "nvlink5", RESET_GPU),
    148: ("NVLink NVLPW_CTRL error", "nvlink5", RESET_GPU),
    149: ("NVLink NETIR error", "nvlink5", RESET_GPU),
    150: ("NVLink MSE error", "nvlink5", RESET_GPU),
    154: ("GPU recovery action changed", "recovery", None),
    155: ("NVLink link down by software", "fatal", RESET_GPU),
    156: ("resource retirement event", "fatal", RESET_GPU),
    157: ("resource retirement failure", "info", None),
    158: ("GPU fatal timeout", "fatal", RESET_GPU),
    159: ("CHI non-data error", "info", None),
    160: ("channel retirement event", "info", None),
    161: ("channel retirement failure", "info", None),
    171: ("uncorrectable DRAM error (details of Xid 48)", "fatal", RESET_GPU),
    172: ("uncorrectable SRAM error (details of Xid 48)", "fatal", RESET_GPU),
}
# Xids 144-150 without the Fatal/Nonfatal word: every NETIR (149) row of NVIDIA's decode table is
# "Link Fatal"; the others depend on bits this table does not decode.
NVLINK5_FALLBACK = {149: "fatal"}
NVLINK5_DEFAULT = "degraded"

# Xid 154 "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)": the
# action in the second parentheses (the values NVIDIA's catalogue lists) -> (class, action).
RECOVERY_ACTIONS = {
    "none": ("info", None),
    "drain p2p": ("degraded", RESET_GPU),
    "drain and reset": ("fatal", RESET_GPU),
    "gpu reset required": ("fatal", RESET_GPU),
    "node reboot required": ("fatal", REBOOT_NODE),
}

# An Xid this table does not list: it warns, so a new driver's codes are seen, not silently passed.
UNLISTED = ("unlisted Xid (see NVIDIA's Xid catalog)", "degraded", None)

# ------------------------------------------------------------------ NVSwitch SXids
# code -> (name, kind). kind: "info" (non-fatal, no impact), "degraded" (non-fatal with an
# impact), "fatal" (the guide's fatal table: fatal unless the line says Non-fatal), "always_fatal".
_SBE = "single-bit ECC error (corrected)"
SXIDS = {
    11004: ("ingress invalid ACL (fabric partition misconfigured)", "degraded"),
    11012: (_SBE, "info"),
    11021: (_SBE, "info"),
    11022: (_SBE, "info"),
    11023: (_SBE, "info"),
    12021: (_SBE, "info"),
    12023: (_SBE, "info"),
    12028: ("egress non-posted PRIV error", "degraded"),
    15008: (_SBE, "info"),
    15011: (_SBE, "info"),
    19049: (_SBE, "info"),
    19055: (_SBE, "info"),
    19057: (_SBE, "info"),
    19059: (_SBE, "info"),
    19062: (_SBE, "info"),
    19065: (_SBE, "info"),
    19068: (_SBE, "info"),
    19071: (_SBE, "info"),
    19084: ("AN1 heartbeat timeout (usually with a fatal SXid)", "degraded"),
    20001: ("TX replay error (NVLink retransmits)", "degraded"),
    20012: ("broken or inconsistent connection", "degraded"),
    22013: ("Minion link DLREQ interrupt (safe to ignore)", "info"),
    24001: (_SBE, "info"),
    24002: (_SBE, "info"),
    24003: (_SBE, "info"),
    11001: ("ingress invalid command", "fatal"),
    11009: ("ingress invalid VCSet", "fatal"),
    11013: ("ingress header DBE", "fatal"),
    11018: ("ingress RID DBE", "fatal"),
    11019: ("ingress RLAN DBE", "fatal"),
    11020: ("ingress control parity", "fatal"),
    12001: ("egress crossbar overflow", "fatal"),
    12002: ("egress packet route", "fatal"),
    12022: ("egress input ECC DBE", "fatal"),
    12024: ("egress output ECC DBE", "fatal"),
    12025: ("egress credit overflow", "fatal"),
    12026: ("egress destination request ID error", "fatal"),
    12027: ("egress destination response ID error", "fatal"),
    12030: ("egress control parity error", "fatal"),
    12031: ("egress credit parity error", "fatal"),
    12032: ("egress flit type mismatch", "fatal"),
    14017: ("TS ATO timeout", "fatal"),
    15001: ("route buffer over/underflow", "fatal"),
    15006: ("route transdone over/underflow", "fatal"),
    15009: ("route GLT DBE", "fatal"),
    15010: ("route parity", "fatal"),
    15012: ("route incoming DBE", "fatal"),
    15013: ("route credit parity", "fatal"),
    19047: ("NCISOC header ECC DBE", "fatal"),
    19048: ("NCISOC data ECC DBE", "fatal"),
    19054: ("HDR RAM ECC DBE", "fatal"),
    19056: ("DAT0 RAM ECC DBE", "fatal"),
    19058: ("DAT1 RAM ECC DBE", "fatal"),
    19060: ("CREQ RAM header ECC DBE", "fatal"),
    19061: ("CREQ RAM data ECC DBE", "fatal"),
    19063: ("response RAM header ECC DBE", "fatal"),
    19064: ("response RAM data ECC DBE", "fatal"),
    19066: ("COM RAM header ECC DBE", "fatal"),
    19067: ("COM RAM data ECC DBE", "fatal"),
    19069: ("RSP1 RAM header ECC DBE", "fatal"),
    19070: ("RSP1 RAM data ECC DBE", "fatal"),
    20034: ("LTSSM fault up (the link went down from active)", "fatal"),
    22012: ("Minion link NA interrupt", "fatal"),
    24004: ("sourcetrack TCEN0 crumbstore DBE", "fatal"),
    24005: ("sourcetrack TCEN0 TD crumbstore DBE", "fatal"),
    24006: ("sourcetrack TCEN1 crumbstore DBE", "fatal"),
    24007: ("sourcetrack timeout", "fatal"),
    12020: ("egress sequence ID error", "always_fatal"),
    22003: ("Minion halt", "always_fatal"),
    22011: ("Minion exterror", "always_fatal"),
    23001: ("ingress SRC-VC buffer overflow", "always_fatal"),
    23002: ("ingress SRC-VC buffer underflow", "always_fatal"),
    23003: ("egress DST-VC credit overflow", "always_fatal"),
    23004: ("egress DST-VC credit underflow", "always_fatal"),
    23005: ("ingress packet burst error", "always_fatal"),
    23006: ("ingress packet sticky error", "always_fatal"),
    23007: ("possible bubbles at ingress", "always_fatal"),
    23008: ("ingress packet invalid destination", "always_fatal"),
    23009: ("ingress packet parity error", "always_fatal"),
    23010: ("ingress SRC-VC buffer overflow", "always_fatal"),
    23011: ("ingress SRC-VC buffer underflow", "always_fatal"),
    23012: ("egress DST-VC credit overflow", "always_fatal"),
    23013: ("egress DST-VC credit underflow", "always_fatal"),
    23014: ("ingress packet burst error", "always_fatal"),
}
# A fatal SXid resets the NVSwitch fabric: on bare metal that means every GPU and NVSwitch
# (the guide's "reset all GPUs and all NVSwitches"), which a node reboot does.
SXID_FATAL_ACTION = REBOOT_NODE
SXID_DEGRADED_ACTION = RESET_GPU

# ------------------------------------------------------------------ NVRM errors without an Xid
# Matched against the text after "NVRM:" of lines that are not Xid lines; the first that matches
# wins. (key, regular expression, meaning, class, action).
NVRM_ERRORS = (
    (
        "fallen_off_bus",
        r"fallen off the bus",
        "GPU has fallen off the bus (no Xid: the driver lost it, often at probe time)",
        "fatal",
        REBOOT_NODE,
    ),
    (
        "gsp_timeout",
        r"GSP RM heartbeat timed out|Heartbeat timed out|GSP RPC timeout|Rate limiting GSP RPC error prints"
        r"|Timeout waiting for RPC from GSP|of waiting for RPC response from GPU\d* ?GSP",
        "GSP firmware timed out (heartbeat or RPC)",
        "fatal",
        RESET_GPU,
    ),
    (
        "gsp_init",
        r"Cannot initialize GSP firmware RM|GSP-FMC reported an error|failed to wait for GFW boot complete",
        "GSP firmware failed to boot",
        "fatal",
        REBOOT_NODE,
    ),
    (
        "init_failed",
        r"RmInitAdapter failed|rm_init_adapter(?:\(\d+\))? failed",
        "the driver could not initialise the GPU (RmInitAdapter failed)",
        "fatal",
        REBOOT_NODE,
    ),
    (
        "probe_failed",
        r"NVIDIA probe routine failed|None of the NVIDIA (?:graphics adapters|devices) were initialized"
        r"|NVIDIA init module failed",
        "the driver probed no GPU",
        "fatal",
        FIX_DRIVER,
    ),
)
# A line the user denylisted (gpu_health kernel_deny).
DENIED = ("denylisted kernel log line", "fatal", None)
