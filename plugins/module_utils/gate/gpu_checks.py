# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The GPU node checks of ``gpu_health``: parsed tool data + expectations -> check results.

Pure functions (stdlib only, Python 3.8). Inputs are what ``gpu_parsers`` and ``fabric`` return;
every function returns one ``checks.result`` dict, or ``evaluate`` the whole list in CHECK_NAMES order.
A check that cannot judge (tool not asked for, reading not reported, file not captured) is ``skip``;
a missing or failing nvidia-smi fails one check, ``gpu_count``, which names the root cause once and the
checks it prevented (they skip, pointing at it): a GPU node without a working driver is unhealthy,
not unknown.
"""

from __future__ import annotations

import re

from ansible_collections.raygate.cluster.plugins.module_utils.checks import reason, result, verdict
from ansible_collections.raygate.cluster.plugins.module_utils.gate import device_access as da
from ansible_collections.raygate.cluster.plugins.module_utils.gate import fabric_counters as fc
from ansible_collections.raygate.cluster.plugins.module_utils.gate.gpu_parsers import (
    judge_nvrm,
    judge_sxid,
    judge_xid,
    worse,
)
from ansible_collections.raygate.cluster.plugins.module_utils.net.fabric import SYSFS_TO_TOOL_STATE, device_kind

CHECK_NAMES = (
    "gpu_count",
    "driver_version",
    "cuda_version",
    "persistence_mode",
    "ecc_mode",
    "ecc_uncorrectable_volatile",
    "ecc_uncorrectable_aggregate",
    "ecc_correctable_sram",
    "ecc_correctable_dram",
    "retired_pages_pending",
    "remapped_rows_pending",
    "remapped_rows_failure",
    "xid",
    "sxid",
    "kernel_errors",
    "nvlink",
    "pcie_link",
    "thermal_throttle",
    "fabric_manager",
    "dcgm_diag",
    "fabric_ports",
    "fabric_errors",
    "link_flaps",
    "gpudirect_rdma",
    "device_access",
)
# Checks judged from `nvidia-smi -q -x` (nvlink from `nvidia-smi nvlink -s`). When nvidia-smi cannot
# answer, the first (NVSMI_ROOT) fails once with the root cause and the others skip, pointing at it.
NVSMI_CHECKS = CHECK_NAMES[:12] + ("nvlink", "pcie_link", "thermal_throttle", "fabric_manager")
NVSMI_ROOT = NVSMI_CHECKS[0]
NEEDS_NVSMI = "needs nvidia-smi (see %s)" % NVSMI_ROOT
NVSMI_ACTION = (
    "install or repair the NVIDIA driver so that nvidia-smi answers (nvidia-smi -q); reboot if its kernel"
    " module does not load, then run health.yml again"
)

# SRAM (L1/L2/register file) correctable errors are rare on a healthy part and NVIDIA tracks them
# (Xid 92 "high single-bit ECC error rate", the driver's SRAM threshold flag): a few are worth a
# look. HBM (DRAM) corrects single-bit errors routinely and row remapping retires bad rows, so only
# a large count since the driver loaded is a sign of a failing stack.
ECC_CORRECTABLE_MAX_DEFAULT = {"sram": 10, "dram": 1000}
THROTTLE_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "sw_thermal_slowdown")
DMA_BUF_KERNEL = (5, 12)
FABRIC_CHOICES = ("auto", "efa", "ib", "roce", "none")
# Link flaps and error-counter growth are judged over the last day, as AzNHC's link-flap check
# (Azure/azurehpc-health-checks, customTests/azure_ib_link_flapping.nhc) does by default.
FABRIC_WINDOW_DEFAULT = 86400


# ---------------------------------------------------------------------------- helpers
def _gpu_label(gpu):
    return "GPU %s" % gpu.get("index")


def _join(items, limit=8):
    items = list(items)
    if len(items) > limit:
        return "; ".join(items[:limit]) + "; and %d more" % (len(items) - limit)
    return "; ".join(items)


def _plural(count, word):
    return "%d %s%s" % (count, word, "" if count == 1 else "s")


def version_matches(actual, wanted):
    """``wanted`` is the exact version or a prefix ending at a dot boundary ("550" matches "550.90.07")."""
    if actual is None or wanted is None:
        return False
    actual, wanted = str(actual).strip(), str(wanted).strip().rstrip(".")
    return actual == wanted or actual.startswith(wanted + ".")


def kernel_version(release):
    """``"5.15.0-105-generic"`` -> (5, 15); None when it does not start with two numbers."""
    m = re.match(r"^(\d+)\.(\d+)", str(release or ""))
    return (int(m.group(1)), int(m.group(2))) if m else None


def pci_key(bus_id):
    """A PCI address in nvidia-smi's (``00000000:18:00.0``) or the kernel's (``0000:18:00``) form -> a key."""
    parts = str(bus_id or "").lower().split(":")
    if len(parts) < 3:
        return None
    try:
        return (int(parts[-3], 16), int(parts[-2], 16), int(parts[-1].split(".")[0], 16))
    except ValueError:
        return None


def _flagged(gpus, read):
    """(flagged [(gpu, value)], reported count): GPUs where ``read`` answers truthy, and how many answered."""
    flagged, reported = [], 0
    for gpu in gpus:
        value = read(gpu)
        if value is None:
            continue
        reported += 1
        if value:
            flagged.append((gpu, value))
    return flagged, reported


# ---------------------------------------------------------------------------- nvidia-smi -q -x
def check_gpu_count(nvsmi, expected=None):
    count = len(nvsmi["gpus"])
    attached = nvsmi.get("attached_gpus")
    extra = " (header says %d attached)" % attached if attached is not None and attached != count else ""
    if expected is None:
        return result(
            "gpu_count", "skip", "%s visible%s; expected_gpus not set" % (_plural(count, "GPU"), extra), count
        )
    if count < expected:
        detail = "%d of %s visible to nvidia-smi%s: %d missing" % (
            count,
            _plural(expected, "GPU"),
            extra,
            expected - count,
        )
        return result("gpu_count", "fail", detail, count, expected)
    if count > expected:
        return result(
            "gpu_count", "warn", "%s visible, expected %d%s" % (_plural(count, "GPU"), expected, extra), count, expected
        )
    return result("gpu_count", "pass", "%s visible" % _plural(count, "GPU"), count, expected)


def check_version(name, actual, wanted=None):
    """``driver_version`` or ``cuda_version``: exact or dot-boundary prefix match."""
    label = {"driver_version": "driver version", "cuda_version": "CUDA version"}.get(name, name)
    if actual is None:
        if wanted is None:
            return result(name, "skip", "%s not reported" % label, None, None)
        return result(name, "fail", "%s not reported, expected %s" % (label, wanted), None, wanted)
    if wanted is None:
        return result(name, "skip", "%s %s (no expectation set)" % (label, actual), actual, None)
    if version_matches(actual, wanted):
        return result(name, "pass", "%s %s matches %s" % (label, actual, wanted), actual, wanted)
    return result(name, "fail", "%s %s, expected %s" % (label, actual, wanted), actual, wanted)


def _all_enabled(name, gpus, field, what):
    """Every GPU must report ``field`` as Enabled."""
    bad = ["%s: %s" % (_gpu_label(g), g.get(field) or "not reported") for g in gpus if g.get(field) != "Enabled"]
    if bad:
        return result(name, "fail", "%s not enabled: %s" % (what, _join(bad)), len(bad), 0)
    return result(name, "pass", "%s enabled on %s" % (what, _plural(len(gpus), "GPU")), 0, 0)


def check_persistence(gpus, required=True):
    if not required:
        return result("persistence_mode", "skip", "not required (require_persistence=false)")
    return _all_enabled("persistence_mode", gpus, "persistence_mode", "persistence mode")


def check_ecc_mode(gpus, required=True):
    if not required:
        return result("ecc_mode", "skip", "not required (require_ecc=false)")
    return _all_enabled("ecc_mode", gpus, "ecc_mode_current", "ECC")


def _ecc(gpu, block, key):
    return ((gpu.get("ecc_errors") or {}).get(block) or {}).get(key)


def _uncorrectable(gpu, block):
    values = [_ecc(gpu, block, "sram_uncorrectable"), _ecc(gpu, block, "dram_uncorrectable")]
    values = [v for v in values if v is not None]
    return sum(values) if values else None


def check_ecc_uncorrectable(gpus, block="volatile"):
    """``volatile`` (since the driver loaded) fails; ``aggregate`` (lifetime) only warns: row remapping
    or page retirement has dealt with an old error unless the remap/retire checks say otherwise."""
    name = "ecc_uncorrectable_" + block
    severity = "fail" if block == "volatile" else "warn"
    flagged, reported = _flagged(gpus, lambda g: _uncorrectable(g, block))
    if not reported:
        return result(
            name, "skip", "%s uncorrectable ECC counts not reported (ECC disabled or unsupported)" % block, None, 0
        )
    total = sum(v for _g, v in flagged)
    if flagged:
        items = ["%s: %d" % (_gpu_label(g), v) for g, v in flagged]
        return result(name, severity, "%s uncorrectable ECC errors: %s" % (block, _join(items)), total, 0)
    return result(name, "pass", "no %s uncorrectable ECC errors on %s" % (block, _plural(reported, "GPU")), 0, 0)


def check_ecc_correctable(gpus, kind="sram", maximum=None, fail=False):
    """Volatile correctable ``kind`` (sram|dram) errors per GPU against ``maximum``: warn (fail if ``fail``)."""
    name = "ecc_correctable_" + kind
    maximum = ECC_CORRECTABLE_MAX_DEFAULT[kind] if maximum is None else maximum
    severity = "fail" if fail else "warn"
    values = [(g, _ecc(g, "volatile", kind + "_correctable")) for g in gpus]
    reported = [(g, v) for g, v in values if v is not None]
    over = ["%s: %d" % (_gpu_label(g), v) for g, v in reported if v > maximum]
    if kind == "sram":
        # The driver's own verdict on SRAM errors (nvidia-smi XML v13 and newer).
        over += [
            "%s: SRAM error threshold exceeded" % _gpu_label(g)
            for g in gpus
            if _ecc(g, "aggregate", "sram_threshold_exceeded") is True
        ]
    if not reported and not over:
        return result(name, "skip", "volatile %s correctable ECC counts not reported" % kind.upper(), None, maximum)
    worst = max([v for _g, v in reported] or [0])
    if over:
        detail = "volatile %s correctable ECC errors above %d: %s" % (kind.upper(), maximum, _join(over))
        return result(name, severity, detail, worst, maximum)
    return result(
        name,
        "pass",
        "volatile %s correctable ECC errors at most %d (max %d)" % (kind.upper(), worst, maximum),
        worst,
        maximum,
    )


def check_retired_pending(gpus):
    flagged, reported = _flagged(gpus, lambda g: (g.get("retired_pages") or {}).get("pending"))
    if not reported:
        return result("retired_pages_pending", "skip", "page retirement not reported (row remapping GPU)", None, 0)
    if flagged:
        items = [_gpu_label(g) for g, _v in flagged]
        return result(
            "retired_pages_pending",
            "fail",
            "pages pending retirement (reset the GPU or reboot): " + _join(items),
            len(items),
            0,
        )
    return result("retired_pages_pending", "pass", "no pages pending retirement", 0, 0)


def check_remapped(gpus, field="pending"):
    """``remapped_rows_pending`` (reset needed) or ``remapped_rows_failure`` (GPU needs service)."""
    name = "remapped_rows_" + field
    flagged, reported = _flagged(gpus, lambda g: (g.get("remapped_rows") or {}).get(field))
    if not reported:
        return result(name, "skip", "row remapping not reported (pre-Ampere GPU or MIG)", None, 0)
    if flagged:
        items = [_gpu_label(g) for g, _v in flagged]
        what = (
            "row remapping pending (reset the GPU to apply it)"
            if field == "pending"
            else "row remapping failed (the GPU needs service)"
        )
        return result(name, "fail", "%s: %s" % (what, _join(items)), len(items), 0)
    word = "pending" if field == "pending" else "failed"
    return result(name, "pass", "no row remapping %s on %s" % (word, _plural(reported, "GPU")), 0, 0)


def check_pcie(gpus, enabled=True):
    """Link width below the maximum fails (a seating, riser or slot fault). A lower generation only
    warns: GPUs drop the PCIe generation themselves when idle to save power."""
    if not enabled:
        return result("pcie_link", "skip", "not checked (check_pcie=false)")
    narrow, slow, reported = [], [], 0
    for gpu in gpus:
        p = gpu.get("pcie") or {}
        if p.get("width_current") is not None and p.get("width_max") is not None:
            reported += 1
            if p["width_current"] < p["width_max"]:
                narrow.append(
                    "%s: x%d of x%d (gen %s)"
                    % (_gpu_label(gpu), p["width_current"], p["width_max"], p.get("gen_current"))
                )
        if p.get("gen_current") is not None and p.get("gen_max") is not None:
            reported += 1
            if p["gen_current"] < p["gen_max"]:
                slow.append("%s: gen %d of %d" % (_gpu_label(gpu), p["gen_current"], p["gen_max"]))
    if not reported:
        return result("pcie_link", "skip", "PCIe link not reported", None, 0)
    if narrow:
        return result("pcie_link", "fail", "PCIe link narrower than its maximum: " + _join(narrow), len(narrow), 0)
    if slow:
        detail = "PCIe link below its maximum generation (normal only while idle): " + _join(slow)
        return result("pcie_link", "warn", detail, len(slow), 0)
    return result("pcie_link", "pass", "PCIe links at full generation and width", 0, 0)


def check_throttle(gpus, enabled=True):
    """Hardware slowdown, hardware or software thermal slowdown active fails; a software power cap is normal."""
    if not enabled:
        return result("thermal_throttle", "skip", "not checked (check_throttle=false)")
    bad, reported = [], 0
    for gpu in gpus:
        reasons = gpu.get("clocks_event_reasons") or {}
        known = [r for r in THROTTLE_REASONS if reasons.get(r) is not None]
        reported += 1 if known else 0
        active = [r for r in THROTTLE_REASONS if reasons.get(r)]
        if active:
            temp = gpu.get("temperature_c")
            at = " at %d C" % temp if temp is not None else ""
            bad.append("%s: %s%s" % (_gpu_label(gpu), ", ".join(active), at))
    if not reported:
        return result("thermal_throttle", "skip", "clock event reasons not reported", None, 0)
    if bad:
        return result("thermal_throttle", "fail", "clocks slowed down: " + _join(bad), len(bad), 0)
    return result("thermal_throttle", "pass", "no hardware or thermal slowdown active", 0, 0)


def check_fabric_manager(gpus, mode="auto"):
    """NVSwitch fabric registration per GPU. ``auto``: only where nvidia-smi reports fabric state."""
    if mode == "no":
        return result("fabric_manager", "skip", "not checked (check_fabric_manager=no)")
    with_info = [g for g in gpus if g.get("fabric")]
    if not with_info:
        if mode == "yes":
            return result("fabric_manager", "fail", "no GPU reports an NVSwitch fabric state", 0, len(gpus))
        return result("fabric_manager", "skip", "no NVSwitch fabric state reported (not an NVSwitch system)")
    bad = []
    for gpu in gpus:
        fab = gpu.get("fabric") or {}
        if fab.get("state") != "Completed" or fab.get("status") != "Success":
            bad.append(
                "%s: state %s, status %s"
                % (_gpu_label(gpu), fab.get("state") or "not reported", fab.get("status") or "not reported")
            )
    if bad:
        detail = "NVSwitch fabric not ready (is nvidia-fabricmanager running?): " + _join(bad)
        return result("fabric_manager", "fail", detail, len(bad), 0)
    return result("fabric_manager", "pass", "NVSwitch fabric Completed/Success on %s" % _plural(len(gpus), "GPU"), 0, 0)


# ---------------------------------------------------------------------------- nvidia-smi nvlink -s
def check_nvlink(links, enabled=True, error=None):
    """``links`` from ``parse_nvlink_status``. Down or inactive links fail, and so does a GPU with fewer
    links up than the best GPU (NVML prints no link at all when every link of a GPU is inactive)."""
    if not enabled:
        return result("nvlink", "skip", "not checked (check_nvlink=false)")
    if error:
        return result("nvlink", "fail", error)
    if links is None:
        return result("nvlink", "skip", "NVLink status not captured")
    up = dict((gpu, sum(1 for link in items if link["state"] == "up")) for gpu, items in links.items())
    best = max(list(up.values()) or [0])
    if best == 0 and not any(links.values()):
        return result("nvlink", "skip", "no NVLink links reported (PCIe-only GPUs)", 0, None)
    bad = []
    for gpu in sorted(links):
        down = ["link %d %s" % (link["link"], link["state"]) for link in links[gpu] if link["state"] != "up"]
        if down:
            bad.append("GPU %d: %s" % (gpu, ", ".join(down)))
        elif up[gpu] < best:
            bad.append("GPU %d: %d of %d links up" % (gpu, up[gpu], best))
    if bad:
        return result("nvlink", "fail", "NVLink links not up: " + _join(bad), len(bad), 0)
    return result("nvlink", "pass", "%d NVLink links up on each of %s" % (best, _plural(len(links), "GPU")), 0, 0)


# ---------------------------------------------------------------------------- kernel log
def events_in_window(events, window=0, now=None, uptime=None):
    """The events (Xids, SXids, ...) of the last ``window`` seconds: ``wall`` stamps against ``now``,
    ``boot`` stamps against ``uptime`` (seconds since boot). ``window`` 0, an unknown reference, or an
    undated line keep it."""
    if not window:
        return list(events)
    ref = {"wall": now, "boot": uptime}
    out = []
    for event in events:
        base = ref.get(event.get("clock"))
        if event.get("timestamp") is None or base is None or event["timestamp"] >= base - window:
            out.append(event)
    return out


xids_in_window = events_in_window


def _group(events, key, judge):
    """Events -> [(key, events, judged)] in order of first appearance; ``judged`` is the worst verdict."""
    groups = {}
    for event in events:
        k = key(event)
        judged = judge(event)
        if k not in groups:
            groups[k] = ([], judged)
        items, worst = groups[k]
        items.append(event)
        groups[k] = (items, worse(worst, judged))
    return [(k, items, judged) for k, (items, judged) in groups.items()]


def _finding(check, code, pci, gpus_by_bus, items, judged, message, **extra):
    stamps = [e for e in items if e.get("timestamp") is not None]
    out = {
        "check": check,
        "code": code,
        "pci": pci,
        "gpu": gpus_by_bus.get(pci_key(pci)) if pci else None,
        "count": len(items),
        "first_seen": min(e["timestamp"] for e in stamps) if stamps else None,
        "last_seen": max(e["timestamp"] for e in stamps) if stamps else None,
        "clock": stamps[0]["clock"] if stamps else None,
        "message": message,
    }
    out.update(judged)
    out.update(extra)
    return out


def _by_bus(gpus):
    return dict((pci_key(g.get("pci_bus_id")), g.get("index")) for g in gpus or [])


def xid_findings(xids, gpus=None, fatal=None, warn=None):
    """One finding per (Xid, PCI address, cause) with its count, first/last seen and verdict."""
    by_bus = _by_bus(gpus)

    def judge(x):
        return judge_xid(x["xid"], x.get("message") or "", fatal, warn, x.get("cause"))

    out = []
    for (num, pci, cause), items, judged in _group(xids or [], lambda x: (x["xid"], x["pci"], x.get("cause")), judge):
        out.append(_finding("xid", num, pci, by_bus, items, judged, items[0].get("message") or "", cause=cause))
    return out


def sxid_findings(sxids):
    """One finding per (SXid, NVSwitch PCI address); fatal if any of its lines says so."""
    out = []
    for (num, pci), items, judged in _group(
        sxids or [], lambda x: (x["sxid"], x["pci"]), lambda x: judge_sxid(x["sxid"], x.get("fatal"))
    ):
        said = [e for e in items if e.get("fatal") is not None] or items
        links = sorted(set(e["link"] for e in items if e.get("link") is not None))
        extra = {"switch": items[0].get("switch"), "links": links}
        out.append(_finding("sxid", num, pci, {}, items, judged, said[0].get("message") or "", **extra))
    return out


def kernel_error_findings(nvrm, denied, gpus=None):
    """One finding per (driver error kind, PCI address) and per (denylist pattern, PCI address)."""
    by_bus = _by_bus(gpus)
    out = []
    groups = _group(nvrm or [], lambda x: (x["kind"], x["pci"]), lambda x: judge_nvrm(x["kind"]))
    for (kind, pci), items, judged in groups:
        out.append(_finding("kernel_errors", kind, pci, by_bus, items, judged, items[0]["message"]))
    for (pattern, pci), items, judged in _group(
        denied or [], lambda x: (x["pattern"], x["pci"]), lambda x: judge_nvrm("denied")
    ):
        found = _finding("kernel_errors", "denied", pci, by_bus, items, judged, items[0]["message"])
        found["pattern"] = pattern
        out.append(found)
    return out


def _where(finding):
    pci, index = finding.get("pci"), finding.get("gpu")
    if not pci:
        return ""
    return " on GPU %s (%s)" % (index, pci) if index is not None else " on %s" % pci


def _times(finding):
    return " x%d" % finding["count"] if finding["count"] > 1 else ""


def _summary(name, findings, entry, value, scope, clean):
    """One check result from findings: the worst status, severity and action; fails listed first."""
    suffix = " (%s)" % scope if scope else ""
    bad = [f for f in findings if f["status"] in ("fail", "warn")]
    if not bad:
        return result(name, "pass", clean + suffix, 0, 0)
    worst = bad[0]
    for f in bad[1:]:
        worst = worse(worst, f)
    ordered = [f for f in bad if f["status"] == "fail"] + [f for f in bad if f["status"] != "fail"]
    detail = _join(entry(f) for f in ordered) + suffix
    return result(name, worst["status"], detail, value, 0, worst["severity"], worst["action"])


def check_xid(xids, gpus=None, fatal=None, warn=None, error=None, scope=""):
    """Xids from the kernel log (already limited to the window), judged by the catalogue (xid_catalog)
    with ``fatal``/``warn`` overriding it. One entry per (Xid, GPU, cause), with its count.

    An Xid the driver says was caused by an earlier one is judged as that one. ``scope`` says where
    the lines come from ("journal since boot, last 3600 s").
    """
    if error:
        return result("xid", "warn", "kernel log not read: %s" % error)
    if xids is None:
        return result("xid", "skip", "kernel log not captured")

    def entry(f):
        caused = " caused by Xid %d" % f["cause"] if f.get("cause") is not None else ""
        return "Xid %d [%s]%s%s%s: %s" % (f["code"], f["label"], caused, _where(f), _times(f), f["message"][:120])

    findings = xid_findings(xids, gpus, fatal, warn)
    return _summary("xid", findings, entry, len(xids), scope, "no Xid errors")


def check_sxid(sxids, error=None, scope=""):
    """NVSwitch SXids from the kernel log (already windowed): one entry per (SXid, NVSwitch)."""
    if error:
        return result("sxid", "skip", "kernel log not read (see xid)")
    if sxids is None:
        return result("sxid", "skip", "kernel log not captured")

    def entry(f):
        links = " link %s" % ",".join(str(n) for n in f["links"]) if f["links"] else ""
        where = " on %s (%s)%s" % (f["switch"], f["pci"], links)
        return "SXid %d [%s]%s%s: %s" % (f["code"], f["label"], where, _times(f), f["meaning"][:120])

    return _summary("sxid", sxid_findings(sxids), entry, len(sxids), scope, "no NVSwitch SXid errors")


def check_kernel_errors(nvrm, denied=None, gpus=None, error=None, scope=""):
    """GPU driver errors without an Xid number (a GPU fallen off the bus, RmInitAdapter, GSP timeouts)
    and lines matching gpu_health's kernel_deny, already windowed."""
    if error:
        return result("kernel_errors", "skip", "kernel log not read (see xid)")
    if nvrm is None:
        return result("kernel_errors", "skip", "kernel log not captured")

    def entry(f):
        what = "denylisted /%s/" % f["pattern"] if f["code"] == "denied" else f["meaning"]
        return "%s%s%s: %s" % (what, _where(f), _times(f), f["message"][:120])

    findings = kernel_error_findings(nvrm, denied, gpus)
    count = len(nvrm) + len(denied or [])
    return _summary("kernel_errors", findings, entry, count, scope, "no GPU driver errors without an Xid")


def kernel_findings(evidence, expect, gpus=None):
    """Every finding behind the xid, sxid and kernel_errors checks (for gpu_health's kernel_findings)."""
    e, x = evidence, expect
    if e.get("xid_error") or e.get("xids") is None:
        return []
    return (
        xid_findings(e.get("xids"), gpus, x.get("xid_fatal"), x.get("xid_warn"))
        + sxid_findings(e.get("sxids"))
        + kernel_error_findings(e.get("nvrm"), e.get("denied"), gpus)
    )


# ---------------------------------------------------------------------------- dcgmi diag
def check_dcgm(parsed, level=0, error=None):
    """``parse_dcgmi_diag`` output. ``level`` 0 skips unless a capture is judged (``level`` None)."""
    what = "dcgmi diag" if level is None else "dcgmi diag -r %d" % level
    if level == 0:
        return result("dcgm_diag", "skip", "not run (dcgm_diag_level=0)")
    if error:
        return result("dcgm_diag", "fail", error, None, level)
    if parsed is None:
        return result("dcgm_diag", "skip", "dcgmi diag output not captured")
    tests = parsed.get("tests") or []
    overall = parsed.get("overall")
    if overall in ("fail", "warn"):
        items = []
        for t in tests:
            if t["status"] != overall:
                continue
            gpus = " on GPU %s" % ",".join(str(g) for g in t["gpus"]) if t.get("gpus") else ""
            info = (t.get("info") or "").splitlines()
            items.append("%s %s%s%s" % (t["name"], t["status"], gpus, ": " + info[0][:160] if info else ""))
        return result("dcgm_diag", overall, "%s: %s" % (what, _join(items)), len(items), level)
    passed = sum(1 for t in tests if t["status"] == "pass")
    return result("dcgm_diag", "pass", "%s: %d tests passed" % (what, passed), 0, level)


# ---------------------------------------------------------------------------- RDMA fabric
def devices_from_tools(ibstat=None, fi_info=None):
    """Captured ``parse_ibstat``/``parse_fi_info`` output -> devices shaped like ``fabric.read_sysfs``,
    so ``fabric.detect`` decides from captures as from sysfs. fi_info lists usable EFA devices only:
    each ``efa`` domain counts as one active port of unknown rate."""
    tool_to_sysfs = {tool: sysfs for sysfs, tool in SYSFS_TO_TOOL_STATE.items()}
    devices = []
    for ca in ibstat or []:
        ports = []
        for p in ca.get("ports", []):
            ports.append(
                {
                    "port": p["port"],
                    "state": tool_to_sysfs.get(p.get("state"), p.get("state")),
                    "phys_state": p.get("phys_state"),
                    "rate_gbps": p.get("rate_gbps"),
                    "link_layer": p.get("link_layer"),
                    "netdev": None,
                    "rocev2_gid_index": None,
                }
            )
        devices.append({"name": ca["name"], "driver": None, "kind": device_kind(None, ports), "ports": ports})
    seen = set()
    for entry in fi_info or []:
        if entry.get("provider") != "efa" or not entry.get("domain"):
            continue
        name = re.sub(r"-(rdm|dgrm)$", "", entry["domain"])
        if name in seen:
            continue
        seen.add(name)
        port = {"port": 1, "state": "ACTIVE", "phys_state": None, "rate_gbps": None, "link_layer": None}
        port.update(netdev=None, rocev2_gid_index=None)
        devices.append({"name": name, "driver": "efa", "kind": "efa", "ports": [port]})
    return devices


def check_fabric_ports(info, fabric="auto", expected_ports=None, expected_rate=None):
    """``info`` from ``fabric.gather``/``detect`` (None: not captured). Fails when the expected fabric is
    absent, fewer than ``expected_ports`` are active, or an active port is slower than ``expected_rate``;
    without ``expected_ports`` fails only when no port is active and warns when some are down."""
    if fabric == "none":
        return result("fabric_ports", "skip", "not checked (fabric=none)")
    if info is None:
        return result("fabric_ports", "skip", "RDMA ports not captured (ibstat.txt, fi_info.txt)")
    found = info.get("fabric") or "none"
    active, down = list(info.get("active_ports") or []), list(info.get("down_ports") or [])
    if fabric != "auto" and found != fabric:
        seen = "no RDMA device" if found == "none" else "a %s fabric" % found
        return result(
            "fabric_ports", "fail", "expected a %s fabric, found %s" % (fabric, seen), len(active), expected_ports
        )
    if found == "none":
        if expected_ports:
            return result(
                "fabric_ports",
                "fail",
                "expected %d active RDMA ports, found no RDMA device" % expected_ports,
                0,
                expected_ports,
            )
        return result("fabric_ports", "skip", "no RDMA fabric on this node (TCP only)", 0, expected_ports)
    problems = []
    if expected_ports is not None and len(active) < expected_ports:
        problems.append("%d of %d expected %s ports active" % (len(active), expected_ports, found))
    elif expected_ports is None and not active:
        problems.append("no active %s port" % found)
    if expected_rate is not None:
        rates = info.get("rate_gbps") or {}
        slow = ["%s %g Gb/s" % (p, rates[p]) for p in active if rates.get(p) is not None and rates[p] < expected_rate]
        if slow:
            problems.append("slower than %d Gb/s: %s" % (expected_rate, ", ".join(slow)))
    down_text = "down: %s" % ", ".join(down) if down else ""
    if problems:
        return result(
            "fabric_ports",
            "fail",
            "; ".join(problems + ([down_text] if down_text else [])),
            len(active),
            expected_ports,
        )
    summary = "%d %s ports active" % (len(active), found)
    if down and expected_ports is None:
        return result(
            "fabric_ports", "warn", "%s, %d %s" % (summary, len(down), down_text), len(active), expected_ports
        )
    if down:
        summary += " (%d more %s)" % (len(down), down_text)
    return result("fabric_ports", "pass", summary, len(active), expected_ports)


def check_gdr(fabric, evidence, required=True):
    """GPUDirect RDMA on an RDMA fabric: ``nvidia_peermem`` loaded, or dma-buf (the open kernel module on
    Linux 5.12+). ``evidence``: ``{peermem: bool, driver: /proc/driver/nvidia/version text or None,
    kernel: release}``, or None when not captured."""
    if not required:
        return result("gpudirect_rdma", "skip", "not required (require_gdr=false)")
    if fabric == "none":
        return result("gpudirect_rdma", "skip", "no RDMA fabric: GPUDirect RDMA not needed")
    if evidence is None or fabric is None:
        return result("gpudirect_rdma", "skip", "GPUDirect RDMA evidence not captured")
    if evidence.get("peermem"):
        return result("gpudirect_rdma", "pass", "nvidia_peermem loaded (peer memory)", "peermem")
    driver = evidence.get("driver")
    release = evidence.get("kernel")
    kernel = kernel_version(release)
    open_module = driver is not None and "Open Kernel Module" in driver
    if open_module and kernel is not None and kernel >= DMA_BUF_KERNEL:
        return result("gpudirect_rdma", "pass", "dma-buf: open kernel module on Linux %s" % release, "dma-buf")
    if driver is None:
        why = "no NVIDIA driver loaded"
    elif not open_module:
        why = "proprietary kernel module (dma-buf needs the open one)"
    else:
        why = "Linux %s is older than 5.12 (no dma-buf)" % release
    return result(
        "gpudirect_rdma", "fail", "no GPUDirect RDMA for %s: nvidia_peermem not loaded and %s" % (fabric, why), None
    )


# ---------------------------------------------------------------------------- the whole node
def gpu_tool_failed(message, skipped=(), also=()):
    """The nvidia-smi checks when the tool is missing or fails: NVSMI_ROOT fails once with ``message``,
    the root cause, and names the checks it prevented; those skip with NEEDS_NVSMI. Names in
    ``skipped`` were not asked for (they skip as "not checked"); ``also`` names checks outside
    NVSMI_CHECKS that it prevented too (dcgm_diag), listed after the others."""
    prevented = [name for name in NVSMI_CHECKS[1:] if name not in skipped] + list(also)
    detail = message
    if prevented:
        detail += "; not run: %s (%s)" % (", ".join(prevented), _plural(len(prevented), "check"))
    out = [result(NVSMI_ROOT, "fail", detail, action=NVSMI_ACTION)]
    for name in NVSMI_CHECKS[1:]:
        out.append(result(name, "skip", "not checked" if name in skipped else NEEDS_NVSMI))
    return out


def nvsmi_results(e, x, dcgm_prevented):
    """(the results of the checks that read nvidia-smi, the GPUs it listed) for ``evaluate``'s evidence
    and expectations; ``dcgm_prevented``: dcgm_diag did not run for want of nvidia-smi."""
    asked = {
        "persistence_mode": x.get("require_persistence", True),
        "ecc_mode": x.get("require_ecc", True),
        "nvlink": x.get("check_nvlink", True),
        "pcie_link": x.get("check_pcie", True),
        "thermal_throttle": x.get("check_throttle", True),
        "fabric_manager": x.get("check_fabric_manager", "auto") != "no",
    }
    skipped = [name for name, on in asked.items() if not on]
    nvsmi = e.get("nvsmi")
    if e.get("nvsmi_error"):
        gpu = gpu_tool_failed(e["nvsmi_error"], skipped, ("dcgm_diag",) if dcgm_prevented else ())
        gpus = []
    elif nvsmi is None:
        gone = "nvidia-smi output not captured"
        gpu = [result(name, "skip", "not checked" if name in skipped else gone) for name in NVSMI_CHECKS]
        gpus = []
    else:
        gpus = nvsmi["gpus"]
        cmax = x.get("ecc_correctable_max") or {}
        fail_ce = x.get("fail_on_ecc_correctable", False)
        gpu = [
            check_gpu_count(nvsmi, x.get("expected_gpus")),
            check_version("driver_version", nvsmi.get("driver_version"), x.get("driver_version")),
            check_version("cuda_version", nvsmi.get("cuda_version"), x.get("cuda_version")),
            check_persistence(gpus, x.get("require_persistence", True)),
            check_ecc_mode(gpus, x.get("require_ecc", True)),
            check_ecc_uncorrectable(gpus, "volatile"),
            check_ecc_uncorrectable(gpus, "aggregate"),
            check_ecc_correctable(gpus, "sram", cmax.get("sram"), fail_ce),
            check_ecc_correctable(gpus, "dram", cmax.get("dram"), fail_ce),
            check_retired_pending(gpus),
            check_remapped(gpus, "pending"),
            check_remapped(gpus, "failure"),
            check_nvlink(e.get("nvlink"), x.get("check_nvlink", True), e.get("nvlink_error")),
            check_pcie(gpus, x.get("check_pcie", True)),
            check_throttle(gpus, x.get("check_throttle", True)),
            check_fabric_manager(gpus, x.get("check_fabric_manager", "auto")),
        ]
    return gpu, gpus


def evaluate(evidence, expect):
    """All checks in CHECK_NAMES order.

    ``evidence``: ``nvsmi`` (parsed or None), ``nvsmi_error`` (message: gpu_count fails with it, the
    root cause, and the other GPU checks skip), ``dcgm_needs_nvsmi`` (dcgmi was not run for it),
    ``nvlink``/``nvlink_error``, ``xids``/``sxids``/``nvrm``/``denied`` (parse_kernel_log's lists, already
    windowed, or None: not captured)/``xid_error`` (the kernel log could not be read)/``xid_scope``,
    ``dcgm``/``dcgm_error``/``dcgm_level`` (None: judge a capture), ``fabric`` (detect() dict or None),
    ``fabric_counters`` (``fabric_counters.window_growth`` plus ``fabric``, or None: not read),
    ``gdr`` (check_gdr evidence or None), ``device_access`` (device_access.gather's, or None).
    ``expect``: the module's options by name.
    """
    e = evidence
    x = expect
    # dcgmi is not run without a working nvidia-smi (collectors.Live.dcgm): one more check it prevented.
    dcgm_prevented = bool(e.get("nvsmi_error") and e.get("dcgm_needs_nvsmi"))
    gpu, gpus = nvsmi_results(e, x, dcgm_prevented)
    scope, kernel_error = e.get("xid_scope", ""), e.get("xid_error")
    xid = check_xid(e.get("xids"), gpus, x.get("xid_fatal"), x.get("xid_warn"), kernel_error, scope)
    sxid = check_sxid(e.get("sxids"), kernel_error, scope)
    kernel = check_kernel_errors(e.get("nvrm"), e.get("denied"), gpus, kernel_error, scope)
    dcgm = check_dcgm(e.get("dcgm"), e.get("dcgm_level", x.get("dcgm_diag_level", 0)), e.get("dcgm_error"))
    if dcgm_prevented:
        dcgm = result("dcgm_diag", "skip", "not run: " + NEEDS_NVSMI)
    fabric_info = e.get("fabric")
    wanted = x.get("fabric", "auto")
    ports = check_fabric_ports(fabric_info, wanted, x.get("expected_ports"), x.get("expected_port_rate_gbps"))
    fabric_name = wanted if wanted != "auto" else (fabric_info or {}).get("fabric")
    gdr = check_gdr(fabric_name, e.get("gdr"), x.get("require_gdr", True))
    maxima = fc.limits(x.get("fabric_error_thresholds"))
    window = x.get("fabric_window", FABRIC_WINDOW_DEFAULT)
    errors = fc.check_fabric_errors(e.get("fabric_counters"), maxima, wanted, window)
    flaps = fc.check_link_flaps(e.get("fabric_counters"), maxima, wanted, window)
    access = da.check(e.get("device_access"), bool(e.get("nvsmi_error")))
    by_name = dict((r["name"], r) for r in gpu + [xid, sxid, kernel, dcgm, ports, errors, flaps, gdr, access])
    return [by_name[name] for name in CHECK_NAMES]


def summarize(results):
    """``{verdict, healthy, reasons, warn_reasons}`` of a node's check results."""
    node = verdict(results)
    return {
        "verdict": node,
        "healthy": node != "fail",
        "reasons": [reason(r) for r in results if r["status"] == "fail"],
        "warn_reasons": [reason(r) for r in results if r["status"] == "warn"],
    }
