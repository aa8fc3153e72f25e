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

# Xid classification. Source: NVIDIA's Xid catalog for Ampere and newer
# (docs.nvidia.com/deploy/xid-errors, "Resolution Bucket (Immediate Action)") and the dynamic page
# retirement / row remapping docs (docs.nvidia.com/deploy/dynamic-page-retirement).
# Fatal: the catalog's action is a GPU reset, node reboot or service, i.e. the GPU must not take work:
#   48 DBE (uncorrectable ECC), 61/62 internal micro-controller halt, 63 row remap / page retirement
#   pending ("reset gpu to activate"), 64 remap / retirement failure, 69 graphics engine class error,
#   74 NVLink error, 79 GPU fallen off the bus, 92 high single-bit ECC rate, 95 uncontained ECC error,
#   119/120 GSP RPC timeout / GSP error, 140 unrecovered ECC error.
XID_FATAL_DEFAULT = [48, 61, 62, 63, 64, 69, 74, 79, 92, 95, 119, 120, 140]
# Application-level: the catalog's action is RESTART_APP (the faulting program is at fault, the GPU is
# fine): 13 graphics engine exception (bad address in a kernel), 31 GPU memory page fault (invalid
# access), 43 GPU stopped processing (channel killed after an app fault), 45 preemptive cleanup after
# an earlier error. 94 (contained ECC error) is RESTART_APP too; the row remap it triggers shows up
# as Xid 63 and as remapped_rows.pending, which are fatal.
XID_WARN_DEFAULT = [13, 31, 43, 45, 94]

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


def parse_xids(text, since=None):
    """Kernel log text -> one dict per ``NVRM: Xid`` line, in log order.

    Each: ``xid`` (int), ``pci`` (``"0000:9b:00"``), ``pid`` (int or None), ``name`` (process or None),
    ``message``, ``timestamp`` and ``clock``: ``wall`` (epoch seconds: ISO, ``dmesg -T``, unix) or
    ``boot`` (plain dmesg ``[ 1234.5]``), both None when the line has no time. ``since`` drops lines
    stamped earlier (compare in the same clock); undated lines are always kept.
    """
    out = []
    for line in text.splitlines():
        m = _XID.search(line)
        if not m:
            continue
        ts, clock = _timestamp(line[: m.start()])
        if since is not None and ts is not None and ts < since:
            continue
        pid, name, message = _split_fields(m.group(3))
        out.append(
            {
                "xid": int(m.group(2)),
                "pci": m.group(1).lower(),
                "pid": pid,
                "name": name,
                "message": message,
                "timestamp": ts,
                "clock": clock,
            }
        )
    return out


def classify_xid(xid, fatal=None, warn=None):
    """``fail`` for a fatal Xid, ``warn`` for an application-level or unknown one."""
    fatal = XID_FATAL_DEFAULT if fatal is None else fatal
    return "fail" if xid in fatal else "warn"


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


def line_timestamp(line, now=None):
    """(seconds, clock) of one kernel log line, as ``parse_xids`` would stamp it, syslog dates first.

    A classic syslog date (``Nov 21 10:00:01``, local time, no year: the year is that of ``now`` unless
    that lies in the future) gives ``wall``; otherwise the same forms ``parse_xids`` reads. Only the
    text before ``NVRM:`` is looked at, so a message cannot fake a time. (None, None) when undated.
    """
    m = _SYSLOG.match(line)
    if m:
        seconds = _syslog_seconds(m, now)
        if seconds is not None:
            return seconds, "wall"
    cut = line.find(_NVRM)
    return _timestamp(line if cut < 0 else line[:cut])


def kernel_log_xids(text, now=None):
    """``parse_xids`` over a kernel log, with each Xid stamped by ``line_timestamp`` (syslog dates first)."""
    out = []
    for line in text.splitlines():
        if "Xid" not in line:
            continue
        for xid in parse_xids(line):
            xid["timestamp"], xid["clock"] = line_timestamp(line, now)
            out.append(xid)
    return out


def newest_timestamps(text, now=None):
    """``{"wall": newest epoch seconds or None, "boot": newest boot seconds or None}`` over all lines."""
    newest = {"wall": None, "boot": None}
    for line in text.splitlines():
        seconds, clock = line_timestamp(line, now)
        if clock and (newest[clock] is None or seconds > newest[clock]):
            newest[clock] = seconds
    return newest
