# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Parsers for the GPU health tools: ``nvidia-smi -q -x``, ``nvidia-smi nvlink -s``, kernel Xid lines, ``dcgmi diag``.

Pure functions from tool text to data (stdlib only, Python 3.8). Values nvidia-smi reports as
``N/A`` (or any other non-reading such as ``[N/A]``, ``Unknown Error``) become ``None``: a missing
reading is for the check to judge, never silently a zero.
"""

from __future__ import annotations

import calendar
import json
import re
import time
import xml.etree.ElementTree as ET

from ansible_collections.raygate.cluster.plugins.module_utils.gate import xid_catalog as xc

# The Xids the catalogue (xid_catalog: NVIDIA's Xid catalog, with the reasons where it is stricter)
# fails, and those it only warns on. gpu_health's xid_fatal / xid_warn add to these, they do not
# replace them.
XID_FATAL_DEFAULT = sorted(code for code, entry in xc.XIDS.items() if entry[1] == "fatal")
XID_WARN_DEFAULT = sorted(code for code, entry in xc.XIDS.items() if entry[1] in ("app", "info", "degraded"))

_NA_WORDS = ("n/a", "[n/a]", "not supported", "[not supported]", "unknown error", "[unknown error]", "")


# ---------------------------------------------------------------------------- value helpers
def _clean(text):
    if text is None:
        return None
    text = text.strip()
    if text.lower() in _NA_WORDS:
        return None
    return text


def _int(text):
    """Leading integer of a reading (``"13 C"``, ``"16x"``, ``"0"``) or None."""
    text = _clean(text)
    if text is None:
        return None
    m = re.match(r"^-?\d+", text)
    return int(m.group(0)) if m else None


def _yes_no(text):
    text = _clean(text)
    if text is None:
        return None
    low = text.lower()
    if low in ("yes", "enabled", "true"):
        return True
    if low in ("no", "disabled", "false"):
        return False
    return None


def _active(text):
    text = _clean(text)
    if text is None:
        return None
    low = text.lower()
    if low == "active":
        return True
    if low == "not active":
        return False
    return None


def _find_text(el, path):
    if el is None:
        return None
    child = el.find(path)
    if child is None:
        return None
    return _clean(child.text)


# ---------------------------------------------------------------------------- nvidia-smi -q -x
_DOCTYPE = re.compile(r"<!DOCTYPE[^>\[]*>")


def _safe_xml_root(text):
    """Parse nvidia-smi XML without ever expanding entities: refuse any DTD internal subset or ENTITY."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if re.search(r"<!ENTITY", text, re.IGNORECASE) or re.search(r"<!DOCTYPE[^>]*\[", text, re.IGNORECASE):
        raise ValueError("refusing XML with an inline DTD or ENTITY declarations")
    text = _DOCTYPE.sub("", text, count=1)
    # ElementTree refuses a str that still carries an encoding declaration only for some encodings; drop it.
    text = re.sub(r"^\s*<\?xml[^>]*\?>", "", text, count=1)
    try:
        return ET.fromstring(text)
    except ET.ParseError as exc:
        raise ValueError("nvidia-smi XML does not parse: %s" % exc) from exc


def _ecc_block(block):
    """One of ``volatile``/``aggregate`` in either schema, normalised to the sram_*/dram_* names."""
    out = {"sram_correctable": None, "sram_uncorrectable": None, "dram_correctable": None, "dram_uncorrectable": None}
    if block is None:
        return out
    single, double = block.find("single_bit"), block.find("double_bit")
    if single is not None or double is not None:
        # Older schema: single_bit/double_bit per memory location; device_memory is DRAM, the rest SRAM.
        for word, el, kind in (("single_bit", single, "correctable"), ("double_bit", double, "uncorrectable")):
            if el is None:
                continue
            parts = dict((c.tag, _int(c.text)) for c in el)
            for tag, value in parts.items():
                out["%s_%s" % (word, tag)] = value
            dram, total = parts.get("device_memory"), parts.get("total")
            others = [v for k, v in parts.items() if k not in ("device_memory", "total") and v is not None]
            out["dram_" + kind] = dram
            if total is not None and dram is not None:
                out["sram_" + kind] = total - dram
            elif others:
                out["sram_" + kind] = sum(others)
        return out
    for child in block:
        low = (child.text or "").strip().lower()
        out[child.tag] = _yes_no(child.text) if low in ("yes", "no") else _int(child.text)
    if "sram_uncorrectable" not in [c.tag for c in block]:
        # v13 splits SRAM uncorrectable errors into parity and SEC-DED counts.
        split = [out.get("sram_uncorrectable_parity"), out.get("sram_uncorrectable_secded")]
        split = [v for v in split if v is not None]
        out["sram_uncorrectable"] = sum(split) if split else None
    return out


def _retired_pages(gpu):
    el = gpu.find("retired_pages")
    return {
        "pending": _yes_no(_find_text(el, "pending_retirement")),
        "single_bit": _int(_find_text(el, "multiple_single_bit_retirement/retired_count")),
        "double_bit": _int(_find_text(el, "double_bit_retirement/retired_count")),
    }


def _remapped_rows(gpu):
    el = gpu.find("remapped_rows")
    return {
        "correctable": _int(_find_text(el, "remapped_row_corr")),
        "uncorrectable": _int(_find_text(el, "remapped_row_unc")),
        "pending": _yes_no(_find_text(el, "remapped_row_pending")),
        "failure": _yes_no(_find_text(el, "remapped_row_failure")),
    }


def _pcie(gpu):
    link = gpu.find("pci/pci_gpu_link_info")
    return {
        "gen_current": _int(_find_text(link, "pcie_gen/current_link_gen")),
        "gen_max": _int(_find_text(link, "pcie_gen/max_link_gen")),
        "width_current": _int(_find_text(link, "link_widths/current_link_width")),
        "width_max": _int(_find_text(link, "link_widths/max_link_width")),
    }


def _clock_reasons(gpu):
    """``clocks_event_reasons`` (v12+) or ``clocks_throttle_reasons`` (older), keyed without the prefix."""
    out = {"hw_slowdown": None, "hw_thermal_slowdown": None, "sw_thermal_slowdown": None, "sw_power_cap": None}
    for word in ("event", "throttle"):
        el = gpu.find("clocks_%s_reasons" % word)
        prefix = "clocks_%s_reason_" % word
        if el is None:
            continue
        for child in el:
            key = child.tag[len(prefix) :] if child.tag.startswith(prefix) else child.tag
            out[key] = _active(child.text)
        break
    return out


def _fabric(gpu):
    el = gpu.find("fabric")
    if el is None:
        return None
    state, status = _find_text(el, "state"), _find_text(el, "status")
    if state is None and status is None:
        return None
    return {"state": state, "status": status}


def _gpu(index, gpu):
    ecc = gpu.find("ecc_errors")
    return {
        "index": index,
        "minor_number": _int(_find_text(gpu, "minor_number")),
        "uuid": _find_text(gpu, "uuid"),
        "pci_bus_id": _find_text(gpu, "pci/pci_bus_id") or _clean(gpu.get("id")),
        "name": _find_text(gpu, "product_name"),
        "vbios_version": _find_text(gpu, "vbios_version"),
        "persistence_mode": _find_text(gpu, "persistence_mode"),
        "ecc_mode_current": _find_text(gpu, "ecc_mode/current_ecc"),
        "ecc_errors": {
            "volatile": _ecc_block(ecc.find("volatile") if ecc is not None else None),
            "aggregate": _ecc_block(ecc.find("aggregate") if ecc is not None else None),
        },
        "retired_pages": _retired_pages(gpu),
        "remapped_rows": _remapped_rows(gpu),
        "pcie": _pcie(gpu),
        "clocks_event_reasons": _clock_reasons(gpu),
        "temperature_c": _int(_find_text(gpu, "temperature/gpu_temp")),
        "fabric": _fabric(gpu),
        "mig_mode": _find_text(gpu, "mig_mode/current_mig"),
    }


def parse_nvsmi_xml(text):
    """``nvidia-smi -q -x`` output -> driver/CUDA versions, attached GPU count and one dict per ``<gpu>``.

    ``index`` is the position of the ``<gpu>`` element (nvidia-smi lists them in its index order);
    ``attached_gpus`` is the header's count, which may differ from ``len(gpus)``.
    Raises ValueError on unparsable XML or XML declaring entities.
    """
    root = _safe_xml_root(text)
    if root.tag != "nvidia_smi_log":
        raise ValueError("not nvidia-smi XML: root element is <%s>" % root.tag)
    return {
        "driver_version": _find_text(root, "driver_version"),
        "cuda_version": _find_text(root, "cuda_version"),
        "attached_gpus": _int(_find_text(root, "attached_gpus")),
        "gpus": [_gpu(i, g) for i, g in enumerate(root.findall("gpu"))],
    }


# ---------------------------------------------------------------------------- nvidia-smi nvlink -s
_NVL_GPU = re.compile(r"^GPU (\d+):")
_NVL_LINK = re.compile(r"^\s*Link (\d+):\s*(.*?)\s*$")
_NVL_SPEED = re.compile(r"^([\d.]+)\s*GB/s$")


def _link_state(value):
    m = _NVL_SPEED.match(value)
    if m:
        return "up", float(m.group(1))
    if "inactive" in value.lower():
        return "inactive", None
    return "down", None


def parse_nvlink_status(text):
    """``nvidia-smi nvlink -s`` -> ``{gpu_index: [{"link", "state": up|inactive|down, "speed_gbps"}]}``.

    NVML's one-line "all links are inactive" answer leaves that GPU with an empty list, as does a
    GPU without NVLink: compare the count with the expected number of links.
    """
    out = {}
    current = None
    for line in text.splitlines():
        m = _NVL_GPU.match(line)
        if m:
            current = int(m.group(1))
            out[current] = []
            continue
        m = _NVL_LINK.match(line)
        if m and current is not None:
            state, speed = _link_state(m.group(2))
            out[current].append({"link": int(m.group(1)), "state": state, "speed_gbps": speed})
    return out


# ---------------------------------------------------------------------------- kernel log Xid lines
_XID = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f.]+)\): (\d+),\s*(.*)$")
# The driver appends this to an Xid raised because of an earlier one (typically 45 after an NVLink
# fault): "NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149".
_CAUSE = re.compile(r"caused by previous Xid (\d+)")
_PID = re.compile(r"^pid=(?:'?<unknown>'?|(\d+))(?:,\s*|$)")
_NAME = re.compile(r"^name=([^,]*)(?:,\s*|$)")
_ISO = re.compile(r"(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?(Z|[+-]\d{2}:?\d{2})?(?=\s|$)")
_DMESG_T = re.compile(r"^\[(\w{3} \w{3} +\d{1,2} \d{2}:\d{2}:\d{2} \d{4})\]")
_UNIX = re.compile(r"^(\d{9,}\.\d+)\s")
_BOOT = re.compile(r"\[\s*(\d+\.\d+)\]")


def _iso_seconds(m):
    year, month, day, hh, mm, ss = (int(m.group(i)) for i in range(1, 7))
    frac = float("0." + m.group(7)) if m.group(7) else 0.0
    fields = (year, month, day, hh, mm, ss, 0, 0, -1)
    tz = m.group(8)
    if tz is None:
        return time.mktime(fields) + frac
    offset = 0
    if tz != "Z":
        digits = tz[1:].replace(":", "")
        offset = (int(digits[:2]) * 60 + int(digits[2:])) * 60
        offset = -offset if tz[0] == "-" else offset
    return calendar.timegm(fields) - offset + frac


def _timestamp(prefix):
    """(seconds, clock) from what precedes ``NVRM:``; clock ``wall`` (epoch) or ``boot`` (dmesg's own)."""
    m = _DMESG_T.match(prefix)
    if m:
        # dmesg -T prints the node's local time.
        return time.mktime(time.strptime(m.group(1), "%a %b %d %H:%M:%S %Y")), "wall"
    m = _ISO.search(prefix)
    if m:
        return _iso_seconds(m), "wall"
    m = _UNIX.match(prefix)
    if m:
        return float(m.group(1)), "wall"
    m = _BOOT.search(prefix)
    if m:
        return float(m.group(1)), "boot"
    return None, None


def _split_fields(rest):
    pid = name = None
    m = _PID.match(rest)
    if m:
        pid = int(m.group(1)) if m.group(1) else None
        rest = rest[m.end() :]
    m = _NAME.match(rest)
    if m:
        name = _clean(m.group(1).strip("'"))
        if name == "<unknown>":
            name = None
        rest = rest[m.end() :]
    return pid, name, rest.strip()


def _xid_event(m):
    """The fields of one ``NVRM: Xid`` match, without its time."""
    pid, name, message = _split_fields(m.group(3))
    cause = _CAUSE.search(message)
    return {
        "xid": int(m.group(2)),
        "pci": m.group(1).lower(),
        "pid": pid,
        "name": name,
        "message": message,
        "cause": int(cause.group(1)) if cause else None,
    }


def parse_xids(text, since=None):
    """Kernel log text -> one dict per ``NVRM: Xid`` line, in log order.

    Each: ``xid`` (int), ``pci`` (``"0000:9b:00"``), ``pid`` (int or None), ``name`` (process or None),
    ``message``, ``cause`` (N of the driver's "caused by previous Xid N", else None), ``timestamp`` and
    ``clock``: ``wall`` (epoch seconds: ISO, ``dmesg -T``, unix) or ``boot`` (plain dmesg ``[ 1234.5]``),
    both None when the line has no time. ``since`` drops lines stamped earlier (compare in the same
    clock); undated lines are always kept.
    """
    out = []
    for line in text.splitlines():
        m = _XID.search(line)
        if not m:
            continue
        ts, clock = _timestamp(line[: m.start()])
        if since is not None and ts is not None and ts < since:
            continue
        event = _xid_event(m)
        event["timestamp"], event["clock"] = ts, clock
        out.append(event)
    return out


def classify_xid(xid, fatal=None, warn=None):
    """``fail`` for an Xid the catalogue (or ``fatal``) calls fatal, ``warn`` for any other one."""
    return judge_xid(xid, "", fatal, warn)["status"]


# ---------------------------------------------------------------------------- dcgmi diag
_RANK = {"skip": 0, "pass": 1, "warn": 2, "fail": 3}


def _status(word):
    low = str(word or "").strip().lower()
    if low.startswith("pass"):
        return "pass"
    if low.startswith("fail") or low.startswith("error"):
        return "fail"
    if low.startswith("warn"):
        return "warn"
    if low.startswith("skip") or low.startswith("not run") or low.startswith("not_run") or low == "":
        return "skip"
    return None


def _worst(statuses):
    statuses = [s for s in statuses if s]
    return max(statuses, key=lambda s: _RANK[s]) if statuses else "skip"


def _overall(tests):
    found = set(t["status"] for t in tests)
    for status in ("fail", "warn"):
        if status in found:
            return status
    return "pass"


def _gpu_ids(value):
    if value is None:
        return []
    if isinstance(value, int):
        return [value]
    return [int(x) for x in re.findall(r"\d+", str(value))]


def _json_messages(res):
    msgs = []
    for key in ("info", "warnings", "errors", "warning", "error"):
        val = res.get(key)
        for item in val if isinstance(val, list) else [val]:
            if isinstance(item, dict):
                item = item.get("warning") or item.get("error") or item.get("message") or item.get("msg")
            if item:
                msgs.append(str(item).strip())
    return msgs


def _json_test(category, test):
    results = [r for r in test.get("results") or [] if isinstance(r, dict)]
    per = []
    msgs = []
    for res in results:
        ids = res.get("gpu_ids", res.get("gpu_id", res.get("entity_id")))
        per.append((_status(res.get("status")) or "warn", _gpu_ids(ids)))
        msgs.extend(_json_messages(res))
    status = _worst(pair[0] for pair in per)
    gpus = sorted(set(g for s, ids in per if s == status for g in ids))
    return {"name": test.get("name"), "category": category, "status": status, "gpus": gpus, "info": "\n".join(msgs)}


def _parse_dcgm_json(data):
    diag = data
    for key, val in data.items():
        if "diagnostic" in key.lower() and isinstance(val, dict):
            diag = val
            break
    tests = []
    for cat in diag.get("test_categories") or []:
        if not isinstance(cat, dict):
            continue
        for test in cat.get("tests") or []:
            if isinstance(test, dict):
                tests.append(_json_test(cat.get("category"), test))
    for holder in (data, diag):
        err = holder.get("runtime_error")
        if err:
            tests.append({"name": "runtime_error", "category": None, "status": "fail", "gpus": [], "info": str(err)})
            break
    meta = {"version": diag.get("version", data.get("version"))}
    return {"tests": tests, "overall": _overall(tests), "metadata": meta}


_SECTION = re.compile(r"^[|+]-+\s+(\S[^-+|]*?)\s+-+\+")
_STATUS_LINE = re.compile(r"^(Pass|Fail|Warn\w*|Skip\w*|Not Run|Error)\b(?:\s*-\s*(.*))?$", re.IGNORECASE)


def _table_rows(text):
    """(section, name, [value lines]) for each row, wrapped cells joined and status lines kept apart."""
    rows = []
    section = None
    for line in text.splitlines():
        line = line.rstrip()
        m = _SECTION.match(line)
        if m:
            section = m.group(1).strip()
            continue
        if not line.startswith("|") or line.startswith("|="):
            continue
        parts = line[1:].split("|", 1)
        if len(parts) < 2:
            continue
        name = parts[0].strip()
        cell = parts[1].rstrip()
        cell = cell[:-1].rstrip() if cell.endswith("|") else cell
        cell = cell[1:] if cell.startswith(" ") else cell
        if name:
            rows.append([section, name, [cell.strip()]])
        elif rows:
            values = rows[-1][2]
            if _STATUS_LINE.match(cell.strip()):
                values.append(cell.strip())
            else:
                # DCGM wraps at a fixed width, mid-word: a leading space in the continuation is a real one.
                values[-1] = values[-1] + cell
    return rows


def _text_test(section, name, values):
    per = []
    for value in values:
        m = _STATUS_LINE.match(value)
        if m:
            ids = _gpu_ids(m.group(2)) if m.group(2) and "all" not in m.group(2).lower() else []
            per.append((_status(m.group(1)), ids))
    status = _worst(pair[0] for pair in per)
    gpus = sorted(set(g for s, ids in per if s == status for g in ids))
    return {"name": name, "category": section, "status": status, "gpus": gpus, "info": ""}


def _parse_dcgm_table(text):
    tests = []
    meta = {}
    for section, name, values in _table_rows(text):
        value = "\n".join(values)
        if name == "Diagnostic" and value == "Result":
            continue
        if section == "Metadata":
            meta[name] = value
            continue
        last = tests[-1] if tests and tests[-1]["category"] == section else None
        if name in ("Warning", "Info", "Error"):
            if last is not None:
                last["info"] = (last["info"] + "\n" + value).strip()
                if name == "Error":
                    last["status"] = "fail"
                continue
            if name == "Error":
                tests.append({"name": name, "category": section, "status": "fail", "gpus": [], "info": value})
                tests[-1]["gpus"] = _gpu_ids(" ".join(re.findall(r"GPU (\d+)", value)))
                continue
        tests.append(_text_test(section, name, values))
    if not tests and not meta:
        raise ValueError("no dcgmi diag results found")
    return {"tests": tests, "overall": _overall(tests), "metadata": meta}


def parse_dcgmi_diag(text):
    """``dcgmi diag`` output (``-j`` JSON, possibly after stray lines, or the text table) -> tests and overall.

    Each test: ``name``, ``category``, ``status`` (pass|fail|warn|skip: the worst over its GPUs),
    ``gpus`` (the GPU ids that status applies to; empty when DCGM says ``All`` or names none) and
    ``info`` (warnings and messages joined by newlines). ``overall`` is fail/warn/pass over the tests.
    ``metadata`` carries the table's Metadata rows or the JSON's ``version``.
    Raises ValueError when neither form is found.
    """
    start = text.find("{")
    if start >= 0:
        try:
            data = json.loads(text[start:])
        except ValueError:
            data = None
        if isinstance(data, dict):
            return _parse_dcgm_json(data)
    return _parse_dcgm_table(text)


# ---------------------------------------------------------------------------- kernel log timestamps
# Added for gpu_health: classic rsyslog/syslog lines carry a wall-clock date without a year before the
# kernel's own boot-relative stamp ("Nov 21 10:00:01 node3 kernel: [ 1234.567890] NVRM: ..."). The
# wall date is the one comparable with "now", so it wins over the bracketed boot seconds.
_SYSLOG = re.compile(r"^([A-Z][a-z]{2}) +(\d{1,2}) (\d{2}):(\d{2}):(\d{2})\s")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_NVRM = "NVRM:"


def _syslog_seconds(m, now):
    """Local-time epoch of a year-less syslog date: this year, or last year if that would be in the future."""
    month = _MONTHS.index(m.group(1)) + 1 if m.group(1) in _MONTHS else None
    if month is None:
        return None
    now = time.time() if now is None else now
    year = time.localtime(now).tm_year
    fields = [year, month, int(m.group(2)), int(m.group(3)), int(m.group(4)), int(m.group(5)), 0, 0, -1]
    try:
        seconds = time.mktime(tuple(fields))
        if seconds > now + 86400:
            fields[0] = year - 1
            seconds = time.mktime(tuple(fields))
    except (OverflowError, ValueError):
        return None
    return seconds


def _prefix_end(line):
    """Where the message of a kernel log line starts: at ``NVRM:`` or ``nvidia-nvswitchN:``, else None."""
    cuts = [i for i in (line.find(_NVRM), line.find(_NVSWITCH)) if i >= 0]
    return min(cuts) if cuts else None


def line_timestamp(line, now=None):
    """(seconds, clock) of one kernel log line, as ``parse_xids`` would stamp it, syslog dates first.

    A classic syslog date (``Nov 21 10:00:01``, local time, no year: the year is that of ``now`` unless
    that lies in the future) gives ``wall``; otherwise the same forms ``parse_xids`` reads. Only the
    text before ``NVRM:`` (or ``nvidia-nvswitchN:``) is looked at, so a message cannot fake a time.
    (None, None) when undated.
    """
    m = _SYSLOG.match(line)
    if m:
        seconds = _syslog_seconds(m, now)
        if seconds is not None:
            return seconds, "wall"
    cut = _prefix_end(line)
    return _timestamp(line if cut is None else line[:cut])


def kernel_log_xids(text, now=None):
    """``parse_xids`` over a kernel log, with each Xid stamped by ``line_timestamp`` (syslog dates first)."""
    return parse_kernel_log(text, now)["xids"]


def newest_timestamps(text, now=None):
    """``{"wall": newest epoch seconds or None, "boot": newest boot seconds or None}`` over all lines."""
    newest = {"wall": None, "boot": None}
    for line in text.splitlines():
        seconds, clock = line_timestamp(line, now)
        if clock and (newest[clock] is None or seconds > newest[clock]):
            newest[clock] = seconds
    return newest


# ---------------------------------------------------------------------------- kernel log: the rest
# NVSwitch errors: "nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal, Link 44 Minion Link
# DLREQ interrupt". One event prints several lines with the same code (Data {...}, the Fatal/Non-fatal
# line, Severity ...); only one of them carries the word.
_SXID = re.compile(
    r"(nvidia-nvswitch\d+): SXid \((?:PCI:)?([0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+(?:\.[0-7])?)\): (\d+),\s*(.*)$"
)
_SXID_WORD = re.compile(r"^(Fatal|Non-fatal)\b", re.IGNORECASE)
_LINK = re.compile(r"\bLink (\d+)\b")
_NVSWITCH = "nvidia-nvswitch"
# A PCI address in a message: "GPU 0000:0a:00.0:", "GPU at PCI:0000:9b:00" (never "PCI ID: 10de:26b5").
_PCI_IN_TEXT = re.compile(r"(?:PCI:)?\b([0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})\b")
# The driver prints some errors as one record over several lines; dmesg and journalctl show the
# rest indented, without a time: "NVRM: The NVIDIA GPU 0000:b3:00.0" / "NVRM: (PCI ID: 10de:26b5)
# installed in this system has" / "NVRM: fallen off the bus and is not responding to commands."
_RECORD_HEAD = re.compile(r"The NVIDIA GPU (?:PCI:)?([0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})")
_RECORD_LINES = 4
_NVRM_ERRORS = [(key, re.compile(rx)) for key, rx, _meaning, _klass, _action in xc.NVRM_ERRORS]
_NVRM_BY_KEY = dict((entry[0], entry) for entry in xc.NVRM_ERRORS)
_RECOVERY_TO = re.compile(r"to 0x[0-9A-Fa-f]+ \(([^)]*)\)")
_NVLINK5_WORD = re.compile(r"\b(Nonfatal|Non-fatal|Fatal)\b", re.IGNORECASE)
_RANK_SEVERITY = {"do-not-allocate": 2, "degraded": 1, "info": 0}


def compile_patterns(patterns, name="patterns"):
    """Regular expressions (strings or compiled) -> compiled; ValueError naming ``name[i]`` for a bad one."""
    out = []
    for i, pattern in enumerate(patterns or ()):
        if hasattr(pattern, "search"):
            out.append(pattern)
            continue
        if not isinstance(pattern, str) or pattern == "":
            raise ValueError("%s[%d] must be a non-empty regular expression, not %r" % (name, i, pattern))
        try:
            out.append(re.compile(pattern))
        except re.error as exc:
            raise ValueError("%s[%d] %r is not a valid regular expression: %s" % (name, i, pattern, exc)) from exc
    return out


def _pci_in(text):
    m = _PCI_IN_TEXT.search(text or "")
    return m.group(1).lower() if m else None


def _sxid_event(m):
    rest = m.group(4).strip()
    word = _SXID_WORD.match(rest)
    link = _LINK.search(rest)
    return {
        "sxid": int(m.group(3)),
        "switch": m.group(1),
        "pci": m.group(2).lower(),
        "fatal": (word.group(1).lower() == "fatal") if word else None,
        "link": int(link.group(1)) if link else None,
        "message": rest,
    }


def _nvrm_error(text):
    """The NVRM_ERRORS key the text after ``NVRM:`` matches, or None."""
    for key, rx in _NVRM_ERRORS:
        if rx.search(text):
            return key
    return None


def _record(state, nvrm, ts, clock, line):
    """Track a multi-line NVRM record: returns (ts, clock, pci) to use for this line."""
    head = _RECORD_HEAD.search(nvrm) if nvrm is not None else None
    if head:
        state.update(pci=head.group(1).lower(), ts=ts, clock=clock, left=_RECORD_LINES)
        return ts, clock, state["pci"]
    if nvrm is None or not state.get("left"):
        return ts, clock, None
    state["left"] -= 1
    if ts is None and line[:1].isspace():
        ts, clock = state["ts"], state["clock"]
    return ts, clock, state["pci"]


def parse_kernel_log(text, now=None, allow=None, deny=None):
    """Kernel log text -> ``{"xids", "sxids", "nvrm", "denied"}``: lists of events in log order.

    - ``xids``: as ``parse_xids`` (with ``cause``), stamped by ``line_timestamp``.
    - ``sxids``: ``{sxid, switch, pci, fatal (True/False, None when the line does not say), link,
      message}``.
    - ``nvrm``: GPU driver errors without an Xid number (xid_catalog.NVRM_ERRORS): ``{kind, pci,
      message}``; the continuation lines of a multi-line record take its time and PCI address.
    - ``denied``: lines matching a ``deny`` pattern: ``{pattern, pci, message}``.
    Every event also has ``timestamp`` and ``clock``. A line matching an ``allow`` pattern is skipped
    entirely. ``allow``/``deny``: regular expressions (ValueError on a bad one).
    """
    allow = compile_patterns(allow, "kernel_allow")
    deny = compile_patterns(deny, "kernel_deny")
    out = {"xids": [], "sxids": [], "nvrm": [], "denied": []}
    record = {}
    for line in text.splitlines():
        if not line.strip() or any(p.search(line) for p in allow):
            continue
        cut = line.find(_NVRM)
        nvrm = line[cut + len(_NVRM) :].strip() if cut >= 0 else None
        m = _XID.search(line) if nvrm is not None else None
        s = _SXID.search(line) if m is None and _NVSWITCH in line else None
        denied = next((p for p in deny if p.search(line)), None)
        if nvrm is None and s is None and denied is None:
            continue  # most of a journal: not worth a timestamp
        ts, clock = line_timestamp(line, now)
        ts, clock, record_pci = _record(record, nvrm, ts, clock, line)
        stamp = {"timestamp": ts, "clock": clock}
        if m:
            out["xids"].append(dict(_xid_event(m), **stamp))
        elif s:
            out["sxids"].append(dict(_sxid_event(s), **stamp))
        elif nvrm is not None:
            kind = _nvrm_error(nvrm)
            if kind:
                pci = _pci_in(nvrm) or record_pci
                out["nvrm"].append(dict({"kind": kind, "pci": pci, "message": nvrm[:300]}, **stamp))
        if denied is not None:
            where = line[_prefix_end(line) or 0 :]
            entry = {"pattern": denied.pattern, "pci": _pci_in(where), "message": line.strip()[:300]}
            out["denied"].append(dict(entry, **stamp))
    return out


# ---------------------------------------------------------------------------- judging (xid_catalog)
def _verdict(klass, action, meaning, label=None):
    status, severity = xc.CLASSES[klass]
    return {
        "status": status,
        "severity": severity,
        "action": action,
        "meaning": meaning,
        "label": label or xc.LABELS[klass],
    }


def worse(a, b):
    """The worse of two verdicts (fail over warn, then by severity); ``a`` on a tie."""
    rank_a = (a["status"] == "fail", _RANK_SEVERITY[a["severity"]])
    rank_b = (b["status"] == "fail", _RANK_SEVERITY[b["severity"]])
    return b if rank_b > rank_a else a


def _nvlink5(code, message):
    word = _NVLINK5_WORD.search(message or "")
    if word:
        return "fatal" if word.group(1).lower() == "fatal" else "info"
    return xc.NVLINK5_FALLBACK.get(code, xc.NVLINK5_DEFAULT)


def _recovery(message):
    m = _RECOVERY_TO.search(message or "")
    target = m.group(1).strip() if m else None
    klass, action = xc.RECOVERY_ACTIONS.get((target or "").lower(), ("degraded", None))
    meaning = "GPU recovery action changed to %s" % target if target else "GPU recovery action changed"
    return klass, action, meaning


def judge_xid(xid, message="", fatal=None, warn=None, cause=None):
    """``{status, severity, action, meaning, label}`` of one Xid line by the catalogue.

    An Xid the driver says was ``cause``d by an earlier one is judged as that one. ``fatal`` and
    ``warn`` (gpu_health's xid_fatal / xid_warn) override the catalogue: a code in ``fatal`` fails,
    one in ``warn`` (and not in ``fatal``) at most warns. An Xid the catalogue does not list warns,
    labelled unlisted.
    """
    code = cause if cause is not None else xid
    meaning, klass, action = xc.XIDS.get(code, xc.UNLISTED)
    own = message if cause is None else ""
    label = None if code in xc.XIDS else "unlisted"
    if klass == "nvlink5":
        klass = _nvlink5(code, own)
        action = action if klass != "info" else None
    elif klass == "recovery":
        klass, action, meaning = _recovery(own)
    if fatal and code in fatal:
        klass, action, label = "fatal", action or xc.RESET_GPU, None
    elif warn and code in warn and klass == "fatal":
        klass, label = "degraded", None
    return _verdict(klass, action, meaning, label)


def judge_sxid(sxid, fatal=None):
    """The verdict on one NVSwitch SXid; ``fatal`` is what the line itself says (None: it does not).

    Always-fatal codes fail whatever the line says; otherwise the line's own word wins (the guide's
    fatal table lists errors that are fatal only when the driver reports them so), then the
    catalogue. An SXid the catalogue does not list warns unless its line says Fatal.
    """
    name, kind = xc.SXIDS.get(sxid, (None, None))
    meaning = name or "unlisted SXid (see NVIDIA's Fabric Manager guide)"
    label = None if name else "unlisted"
    if kind == "always_fatal" or fatal is True or (fatal is None and kind == "fatal"):
        return _verdict("fatal", xc.SXID_FATAL_ACTION, meaning)
    if kind == "info":
        return _verdict("info", None, meaning)
    return _verdict("degraded", xc.SXID_DEGRADED_ACTION, meaning, label)


def judge_nvrm(kind):
    """The verdict on one Xid-less driver error (an xid_catalog.NVRM_ERRORS key), or a ``denied`` line."""
    if kind == "denied":
        meaning, klass, action = xc.DENIED
    else:
        _key, _rx, meaning, klass, action = _NVRM_BY_KEY[kind]
    return _verdict(klass, action, meaning)
