# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Parsers for nccl-tests output and NCCL_DEBUG=INFO logs, and the checks judged from them.

Pure functions from text to data (stdlib only, Python 3.8+):

``parse_nccl_tests(text)``  the result table of all_reduce_perf and friends, the device list,
                            the trailer, and every sign that the run went wrong.
``parse_transports(text)``  the ``Channel ... via ...`` lines and ``Using network X``: which
                            transport each channel uses and whether GPUDirect RDMA is engaged.
``judge(parsed, transports, min_busbw=None, require="GDRDMA")``  check results
                            ``{name, status, detail, value, threshold}``.

Lines may carry launcher prefixes: mpirun's ``[1,0]<stdout>:`` and srun's ``0: ``.
"""

import re

from ansible_collections.raygate.cluster.plugins.module_utils.checks import result as check_result

# mpirun --tag-output and srun --label prefixes. srun's label needs the trailing space so a table
# row (right-aligned numbers) is never taken for one.
_PREFIX_RE = re.compile(r"^(?:\[\d+,\d+\]<std(?:out|err)>:|\d+: )")
_DEVICE_RE = re.compile(
    r"^#\s*Rank\s+(\d+)(?:\s+Group\s+\d+)?\s+Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+\[([^\]]*)\]\s*(.*?)\s*$"
)
_PARAMS_RE = re.compile(r"^#\s*nThread\b")
_PARAM_RE = re.compile(r"(minBytes|maxBytes|step:)\s+(\d+)(\(factor\)|\(bytes\))?")
_TEST_NAME_RE = re.compile(r"\b([a-z_]+_perf(?:_mpi)?)\b")
_OOB_RE = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)")
_AVG_RE = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")
_NRANKS_RE = re.compile(r"\bnranks\s+(\d+)\b")
_NCCL_LOG_RE = re.compile(r"\bNCCL (?:INFO|WARN|TRACE)\b|^NCCL version\b")
_WARN_RE = re.compile(r"\bNCCL WARN\b")
# Lines that mean the run did not finish: nccl-tests' own failure reports, NCCL's error
# strings, and what a launcher prints when a rank dies.
_FAILURE_RE = re.compile(
    r"Test failure|Test NCCL failure|Test CUDA failure|NCCL error|ncclInternalError|ncclSystemError"
    r"|ncclUnhandledCudaError|ncclRemoteError|Segmentation fault|core dumped|exited on signal"
    r"|Primary job\s+terminated|MPI_ABORT|srun: error|Aborted\b"
)
_TRAILER_RE = re.compile(r"^#\s*(?:Out of bounds values|Avg bus bandwidth|Collective test concluded)")

_CHANNEL_RE = re.compile(
    r"\bChannel\s+(\d+)(?:/\d+)?\s*:\s*(\d+)(?:\[([^\]]*)\])?\s*->\s*(\d+)(?:\[([^\]]*)\])?"
    r"(?:\s*\[(send|receive)\])?\s+via\s+(\S+(?: Libfabric)?(?:/\S+)?)"
)
_NETWORK_RE = re.compile(r"\bUsing network\s+(.+?)\s*$")
_GDR_DISABLED_RE = re.compile(r"GPU Direct RDMA Disabled for (.+?)\s*$")
_GDR_HCA_NAME_RE = re.compile(r"HCA\s+\d+\s+'([^']+)'")
_OFI_PROVIDER_RE = re.compile(r"NET/OFI Selected Provider is\s+(\S+)")

GDR_SUFFIX = "GDRDMA"
SOCKET = "Socket"
REQUIRE_CHOICES = ("GDRDMA", "no_socket")

_GIB = 1 << 30

# Public all_reduce_perf bus bandwidth figures, keyed by (GPU model, fabric, scope).
# ``min_busbw`` is what judge() takes as min_busbw (GB/s, at ``size`` bytes, the largest size).
DEFAULT_THRESHOLDS = {
    # Source: DESIGN.md "Public thresholds": 8xH100 single-node all_reduce at 16G >= 460 GB/s busbw
    # (NVLink/NVSwitch inside one HGX node, so no network transport is involved).
    ("H100", "nvlink", "single_node"): {
        "test": "all_reduce_perf",
        "gpus": 8,
        "size": 16 * _GIB,
        "min_busbw": 460.0,
        "reference_busbw": 460.0,
    },
    # Source: DESIGN.md "Public thresholds": 8xH200 single-node all_reduce at 16G >= 431 GB/s busbw.
    ("H200", "nvlink", "single_node"): {
        "test": "all_reduce_perf",
        "gpus": 8,
        "size": 16 * _GIB,
        "min_busbw": 431.0,
        "reference_busbw": 431.0,
    },
    # Source: DESIGN.md "Public thresholds": 2x p5.48xlarge over EFA ~487 GB/s, as printed in
    # awslabs/awsome-distributed-training micro-benchmarks/nccl-tests/README.md (487.09 out-of-place
    # at 17179869184 B). That is a typical healthy result, not a floor: we fail below 95 % of it.
    ("H100", "efa", "2_node"): {
        "test": "all_reduce_perf",
        "gpus": 16,
        "size": 16 * _GIB,
        "min_busbw": 462.0,
        "reference_busbw": 487.0,
    },
}


def _strip_prefix(line):
    return _PREFIX_RE.sub("", line, count=1)


def _lines(text):
    for raw in (text or "").splitlines():
        yield _strip_prefix(raw.rstrip("\r"))


# ---------------------------------------------------------------------------- nccl-tests


def _number(token, kind):
    if token in ("N/A", "n/a", "-"):
        return None
    try:
        return kind(token)
    except ValueError:
        return None


def _column_names(line):
    """``#  size count type redop root time algbw busbw #wrong time ...`` -> names, or None."""
    body = line.lstrip("#").split()
    if not body or body[0] != "size" or "busbw" not in body:
        return None
    names = []
    for token in body:
        # ``#wrong`` is written without a space after the previous column's '#'-less name.
        names.append("wrong" if token in ("#wrong", "wrong") else token)
    return names


def _parse_row(tokens, names):
    """A table row -> row dict, or None when it does not fit the header."""
    if len(tokens) != len(names):
        return None
    row = {"size": None, "count": None, "type": None, "redop": None, "root": None, "oop": None, "ip": None}
    halves = []
    current = None
    for name, token in zip(names, tokens):
        if name in ("size", "count", "root"):
            value = _number(token, int)
            if value is None and name != "root":
                return None
            row[name] = value
        elif name in ("type", "redop"):
            row[name] = token
        else:
            if name == "time":
                current = {"time_us": None, "algbw": None, "busbw": None, "wrong": None, "error": None}
                halves.append(current)
            if current is None:
                return None
            if name == "time":
                current["time_us"] = _number(token, float)
            elif name in ("algbw", "busbw", "error"):
                current[name] = _number(token, float)
            elif name == "wrong":
                current["wrong"] = _number(token, int)
    if halves:
        row["oop"] = halves[0]
    if len(halves) > 1:
        row["ip"] = halves[1]
    return row


def _row_tokens_look_numeric(tokens):
    return bool(tokens) and tokens[0].isdigit()


def _sweep_params(line):
    params = {}
    for key, value, mode in _PARAM_RE.findall(line):
        if key == "step:":
            params["step"] = int(value)
            params["step_mode"] = "bytes" if mode == "(bytes)" else "factor"
        else:
            params[key] = int(value)
    return params


def _truncated(rows, params):
    """True when the sweep's parameters say another size should have followed the last row."""
    if not rows or "maxBytes" not in params or "step" not in params:
        return False
    last = rows[-1]["size"]
    step = params["step"]
    if params["step_mode"] == "factor":
        following = last * step if step > 1 else last
    else:
        following = last + step
    return following > last and following <= params["maxBytes"]


def _max_size_busbw(rows):
    if not rows:
        return None
    largest = max(row["size"] for row in rows)
    best = None
    for row in rows:
        if row["size"] != largest:
            continue
        for half in (row["oop"], row["ip"]):
            if half and half["busbw"] is not None and (best is None or half["busbw"] > best):
                best = half["busbw"]
    return best


def _empty_result():
    return {
        "test": None,
        "rows": [],
        "avg_busbw": None,
        "out_of_bounds": None,
        "wrong_total": 0,
        "max_size_busbw": None,
        "aborted": False,
        "errors": [],
        "devices": [],
        "nranks": None,
    }


def _device(match):
    rank, pid, host, device, bus_id, name = match.groups()
    return {"rank": int(rank), "host": host, "pid": int(pid), "device": int(device), "bus_id": bus_id, "name": name}


def parse_nccl_tests(text):
    """nccl-tests output (e.g. ``all_reduce_perf``) -> dict; see module docstring of the keys.

    Each row is ``{size, count, type, redop, root, oop, ip}``, ``oop``/``ip`` being
    ``{time_us, algbw, busbw, wrong, error}``: ``wrong`` is None when the column reads ``N/A``
    (validation off) or when an older build prints an ``error`` column instead (``error`` then
    holds its value). ``root`` is None when the build has no root column. A missing trailer is not
    an error by itself (excerpts drop it); a table is judged cut short when the ``# nThread``
    header says a larger size should have followed, or when a header has no rows at all.
    """
    result = _empty_result()
    names = None
    in_table = False
    trailer_seen = False
    params = {}
    nranks_logged = None
    errors = result["errors"]
    for line in _lines(text):
        stripped = line.strip()
        if not stripped:
            continue
        if result["test"] is None and ("Collective test starting" in line or "_perf" in line):
            found = _TEST_NAME_RE.search(line)
            if found:
                result["test"] = found.group(1)
        if _WARN_RE.search(line):
            errors.append(stripped)
            continue
        if _FAILURE_RE.search(line):
            errors.append(stripped)
            result["aborted"] = True
            continue
        if _NCCL_LOG_RE.search(line):
            found = _NRANKS_RE.search(line)
            if found:
                nranks_logged = max(nranks_logged or 0, int(found.group(1)))
            continue
        if stripped.startswith("#"):
            _parse_comment(stripped, result, params)
            header = _column_names(stripped)
            if header is not None:
                names = header
                in_table = True
            if _TRAILER_RE.match(stripped):
                trailer_seen = True
                in_table = False
            continue
        if not in_table:
            continue
        tokens = stripped.split()
        row = _parse_row(tokens, names) if _row_tokens_look_numeric(tokens) else None
        if row is None:
            errors.append("unexpected line in the result table: %s" % stripped)
            continue
        result["rows"].append(row)

    _finish(result, names, params, trailer_seen, nranks_logged)
    return result


def _parse_comment(line, result, params):
    found = _DEVICE_RE.match(line)
    if found:
        result["devices"].append(_device(found))
        return
    if _PARAMS_RE.match(line):
        params.update(_sweep_params(line))
        return
    found = _OOB_RE.match(line)
    if found:
        result["out_of_bounds"] = int(found.group(1))
        return
    found = _AVG_RE.match(line)
    if found:
        result["avg_busbw"] = _number(found.group(1), float)


def _finish(result, names, params, trailer_seen, nranks_logged):
    rows = result["rows"]
    if names is not None and not rows:
        result["aborted"] = True
        result["errors"].append("the result table has a header but no rows")
    elif not trailer_seen and _truncated(rows, params):
        result["aborted"] = True
        result["errors"].append(
            "the result table stops at %d bytes before maxBytes %d" % (rows[-1]["size"], params["maxBytes"])
        )
    if names is None and (params or result["devices"]):
        result["aborted"] = True
        result["errors"].append("no result table")
    result["wrong_total"] = sum(
        half["wrong"] for row in rows for half in (row["oop"], row["ip"]) if half and half["wrong"] is not None
    )
    result["max_size_busbw"] = _max_size_busbw(rows)
    ranks = {device["rank"] for device in result["devices"]}
    result["nranks"] = len(ranks) if ranks else nranks_logged


# ---------------------------------------------------------------------------- NCCL INFO transports


def _channel(match):
    channel, src, src_bus, dst, dst_bus, direction, via = match.groups()
    parts = via.split("/")
    transport = parts[0]
    net = parts[1] if transport == "NET" and len(parts) > 1 else None
    return {
        "channel": int(channel),
        "from": src,
        "to": dst,
        "from_bus": src_bus,
        "to_bus": dst_bus,
        "direction": direction,
        "via": via,
        "transport": transport,
        "net": net,
        "gdr": GDR_SUFFIX in parts[1:],
    }


def _gdr_disabled_name(rest):
    found = _GDR_HCA_NAME_RE.search(rest)
    return found.group(1) if found else rest


def parse_transports(text):
    """NCCL_DEBUG=INFO log -> ``{channels, network, networks, gdr_disabled_hcas, ofi_provider, fallback}``.

    ``channels``: one entry per distinct ``Channel N : a[bus] -> b[bus] [send] via T/...`` line,
    ``{channel, from, to, from_bus, to_bus, direction, via, transport, net, gdr}``; ``net`` is the
    network plugin's name for NET channels (``IB``, ``Socket``, ``AWS Libfabric``, ``Libfabric``,
    ``IBext_v8``...) and ``gdr`` is True for a ``/GDRDMA`` path. ``network`` is the first
    ``Using network X`` name (``networks`` all of them, in order). ``fallback`` is True when NCCL
    settled on TCP sockets: a ``Using network Socket`` line or a ``NET/Socket`` channel. A plugin
    that failed and was replaced (``NET/OFI`` lines followed by ``Using network IB``) is not one.
    """
    channels = []
    seen = set()
    networks = []
    disabled = []
    provider = None
    for line in _lines(text):
        if "NCCL" not in line and "via" not in line:
            continue
        found = _CHANNEL_RE.search(line)
        if found:
            entry = _channel(found)
            key = (entry["channel"], entry["from"], entry["to"], entry["direction"], entry["via"])
            if key not in seen:
                seen.add(key)
                channels.append(entry)
            continue
        found = _NETWORK_RE.search(line)
        if found:
            if found.group(1) not in networks:
                networks.append(found.group(1))
            continue
        found = _GDR_DISABLED_RE.search(line)
        if found:
            name = _gdr_disabled_name(found.group(1))
            if name not in disabled:
                disabled.append(name)
            continue
        found = _OFI_PROVIDER_RE.search(line)
        if found and provider is None:
            provider = found.group(1)
    fallback = SOCKET in networks or any(ch["net"] == SOCKET for ch in channels)
    return {
        "channels": channels,
        "network": networks[0] if networks else None,
        "networks": networks,
        "gdr_disabled_hcas": disabled,
        "ofi_provider": provider,
        "fallback": fallback,
    }


# ---------------------------------------------------------------------------- checks


def _check_busbw(parsed, min_busbw):
    value = parsed.get("max_size_busbw")
    if value is None:
        return check_result("nccl_busbw", "fail", "no bus bandwidth was measured", None, min_busbw)
    rows = parsed.get("rows") or []
    size = max(row["size"] for row in rows) if rows else None
    where = "at %d bytes" % size if size is not None else "at the largest size"
    if min_busbw is None:
        detail = "busbw %.2f GB/s %s; no threshold given" % (value, where)
        return check_result("nccl_busbw", "skip", detail, value, None)
    if value < min_busbw:
        detail = "busbw %.2f GB/s %s is below %.2f GB/s" % (value, where, min_busbw)
        return check_result("nccl_busbw", "fail", detail, value, min_busbw)
    detail = "busbw %.2f GB/s %s >= %.2f GB/s" % (value, where, min_busbw)
    return check_result("nccl_busbw", "pass", detail, value, min_busbw)


def _check_wrong(parsed):
    wrong = parsed.get("wrong_total") or 0
    oob = parsed.get("out_of_bounds")
    rows = parsed.get("rows") or []
    counted = any(half and half["wrong"] is not None for row in rows for half in (row["oop"], row["ip"]))
    if wrong or oob:
        detail = "%d wrong values in the table, out of bounds: %s" % (wrong, "unknown" if oob is None else oob)
        return check_result("nccl_wrong", "fail", detail, wrong + (oob or 0), 0)
    if not counted and oob is None:
        return check_result("nccl_wrong", "skip", "results were not validated (#wrong is N/A or absent)", None, 0)
    return check_result("nccl_wrong", "pass", "no wrong values", 0, 0)


def _check_completed(parsed):
    errors = parsed.get("errors") or []
    if parsed.get("aborted"):
        return check_result("nccl_completed", "fail", "run aborted: %s" % "; ".join(errors[:3]), len(errors), 0)
    if not parsed.get("rows"):
        return check_result("nccl_completed", "fail", "no result rows", 0, None)
    if errors:
        return check_result("nccl_completed", "warn", "completed with: %s" % "; ".join(errors[:3]), len(errors), 0)
    return check_result("nccl_completed", "pass", "%d sizes measured" % len(parsed["rows"]), 0, 0)


def _net_forms(net_channels):
    forms = set()
    for ch in net_channels:
        forms.add("NET/%s%s" % (ch["net"], "/" + GDR_SUFFIX if ch["gdr"] else ""))
    return sorted(forms)


def _check_transport(transports, require):
    name = "nccl_transport"
    if transports is None:
        return check_result(name, "skip", "no NCCL INFO log to read transports from", None, require)
    net_channels = [ch for ch in transports.get("channels") or [] if ch["transport"] == "NET"]
    forms = _net_forms(net_channels)
    if transports.get("fallback"):
        detail = "NCCL fell back to TCP sockets (network %s)" % transports.get("network")
        return check_result(name, "fail", detail, ", ".join(forms) or transports.get("network"), require)
    if not net_channels:
        detail = "no NET channels (single-node run or no channel lines in the log)"
        return check_result(name, "skip", detail, transports.get("network"), require)
    value = ", ".join(forms)
    if require == GDR_SUFFIX:
        without = [ch for ch in net_channels if not ch["gdr"]]
        if without:
            detail = "%d of %d NET channels without GPUDirect RDMA (%s)" % (len(without), len(net_channels), value)
            return check_result(name, "fail", detail, value, require)
    disabled = transports.get("gdr_disabled_hcas") or []
    if disabled:
        detail = "%d NET channels via %s; GPU Direct RDMA disabled for %s" % (
            len(net_channels),
            value,
            ", ".join(disabled),
        )
        return check_result(name, "warn", detail, value, require)
    return check_result(name, "pass", "%d NET channels via %s" % (len(net_channels), value), value, require)


def judge(parsed, transports, min_busbw=None, require=GDR_SUFFIX):
    """Check results from ``parse_nccl_tests`` and ``parse_transports`` output.

    ``require``: ``GDRDMA`` (every NET channel must use GPUDirect RDMA), ``no_socket`` or None
    (only TCP fallback fails). ``transports`` may be None when no NCCL INFO log was captured.
    Returns ``[nccl_busbw, nccl_wrong, nccl_completed, nccl_transport]`` check dicts.
    """
    if require is not None and require not in REQUIRE_CHOICES:
        raise ValueError("require must be one of %s or None, not %r" % (", ".join(REQUIRE_CHOICES), require))
    return [
        _check_busbw(parsed, min_busbw),
        _check_wrong(parsed),
        _check_completed(parsed),
        _check_transport(transports, require),
    ]


# ---------------------------------------------------------------------------- thresholds and fabric

_IB_USING_RE = re.compile(r"\bNET/IB\s*:\s*Using\s+(.*)$")
SCOPES = ("single_node", "2_node")


_MODEL_WORD_RE = re.compile(r"^[A-Z]{1,2}[0-9]{1,3}[A-Z]?$")


def gpu_model_of(parsed):
    """The GPU model named in the device list (``NVIDIA H100 80GB HBM3`` -> ``H100``), or None.

    A model of DEFAULT_THRESHOLDS wins; otherwise the first model-like word (``A100``, ``L40S``).
    """
    known = {key[0] for key in DEFAULT_THRESHOLDS}
    other = None
    for device in parsed.get("devices") or []:
        for word in re.split(r"[\s-]+", device.get("name") or ""):
            if word in known:
                return word
            if other is None and _MODEL_WORD_RE.match(word):
                other = word
    return other


def fabric_of(text, transports=None):
    """The fabric NCCL used, from its INFO log: ``efa``, ``ib``, ``roce``, ``socket`` or None.

    IB and RoCE share NCCL's IB plugin; its ``NET/IB : Using [0]mlx5_0:1/RoCE`` line tells them
    apart. EFA shows as the ``Libfabric``/``AWS Libfabric`` network (or the OFI ``efa`` provider).
    """
    transports = transports if transports is not None else parse_transports(text)
    if transports.get("fallback"):
        return "socket"
    names = [transports.get("network") or ""]
    names.extend(ch["net"] or "" for ch in transports.get("channels") or [] if ch["transport"] == "NET")
    if any("Libfabric" in name for name in names) or transports.get("ofi_provider") == "efa":
        return "efa"
    if any(name.startswith("IB") for name in names):
        for line in _lines(text):
            found = _IB_USING_RE.search(line)
            if found:
                return "roce" if "/RoCE" in found.group(1) else "ib"
        return "ib"
    return None


def default_threshold(gpu_model, fabric, scope, nranks=None, max_size=None):
    """``(min_busbw, detail)`` from DEFAULT_THRESHOLDS, or ``(None, why not)``.

    ``scope``: ``single_node`` (looked up as fabric ``nvlink``: one HGX node talks over NVSwitch)
    or ``2_node``. A figure applies only to a run like the one it was measured on: the same
    number of ranks (when known) and a sweep reaching its size, since busbw grows with size.
    """
    if scope not in SCOPES:
        raise ValueError("scope must be one of %s, not %r" % (", ".join(SCOPES), scope))
    if not gpu_model:
        return None, "the GPU model is unknown (no device list in the output); set gpu_model or min_busbw"
    if scope != "single_node" and not fabric:
        return None, "the fabric is unknown (no NCCL network in the output); set fabric or min_busbw"
    key = (gpu_model, "nvlink" if scope == "single_node" else fabric, scope)
    entry = DEFAULT_THRESHOLDS.get(key)
    what = "%s %s" % (gpu_model, scope if scope == "single_node" else "%s over %s" % (scope, fabric))
    if entry is None:
        return None, "no default threshold for %s; set min_busbw" % what
    if nranks is not None and nranks != entry["gpus"]:
        return None, "the default threshold for %s is for %d GPUs, this run had %d; set min_busbw" % (
            what,
            entry["gpus"],
            nranks,
        )
    if max_size is not None and max_size < entry["size"]:
        return None, "the default threshold for %s is at %d bytes, this run stopped at %d; set min_busbw" % (
            what,
            entry["size"],
            max_size,
        )
    return entry["min_busbw"], "default threshold for %s: %.2f GB/s" % (what, entry["min_busbw"])
