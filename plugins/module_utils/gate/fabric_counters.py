# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""RDMA port error counters from sysfs: what they are, how much growth is too much, and the
checks ``fabric_errors``, ``link_flaps`` (gpu_health) and ``nccl_fabric_errors`` (nccl_test).

Where the kernel puts them (Linux ``Documentation/ABI/stable/sysfs-class-infiniband``):
``<dev>/ports/<n>/counters/`` holds the InfiniBand PortCounters a port's PMA reports (mlx5 gives
them on RoCE ports too; a device without a PMA answers ``N/A (no PMA)``), and the optional
``hw_counters/`` directories, per port and per device, hold what the driver adds: mlx5's
transport counters (``rnr_nak_retry_err``, ``local_ack_timeout_err``, ...) and the EFA driver's
statistics (``rx_drops``, RDMA work-request errors, the SRD network counters of Nitro v4 and
later, and the admin-queue counters such as ``no_completion_cmds``; names as in the kernel's
``drivers/infiniband/hw/efa``). Each ``hw_counters`` directory also has ``lifespan``, which is
not a counter.

Counters only grow (a reset, ``perfquery -R`` or a driver reload, starts them at zero again), so a
check judges how much a counter grew over an interval: a window of snapshots kept in a small state
file for gpu_health, the test's own duration for nccl_test. The thresholds, in COUNTERS, are the
most growth allowed, either a count in the interval (``count``) or an average rate over it
(``per_hour``, the interval counted as at least an hour so a short one cannot inflate the rate).

Pure functions of files under ``root`` and of plain data (stdlib only, Python 3.8).
"""

from __future__ import annotations

import json
import os
import re

from ansible_collections.raygate.cluster.plugins.module_utils.checks import result

COUNT = "count"
PER_HOUR = "per_hour"
PORT_DIRS = ("counters", "hw_counters")
STATE_VERSION = 1
# Snapshots kept in the state file: one per gate run, so four a day for a day is plenty.
MAX_SNAPSHOTS = 96
# A window's start is known only to the nearest snapshot before it; growth over a span longer than
# this many windows (no snapshot near the start: first run on a long-running node, or a stale state
# file) may be older than the window, and a breach then only warns.
SPAN_SLACK = 1.5

_PHYSICAL = "reseat or replace the cable/transceiver of %s, then clear its counters (perfquery -R)"
_PATH = "check the fabric path of %s (its switch port, cabling and routing); run the pair tests again"
_EFA = "check %s with the AWS EFA troubleshooting steps; stop and start the instance if it persists"
_CONFIG = "check the link configuration of %s (subnet manager, VL and buffer settings) and its cable"


def _spec(where, unit, limit, status, action, source):
    return {"where": where, "unit": unit, "max": limit, "status": status, "action": action, "source": source}


# Every counter raygate reads, with its default limit (None: read and reported, not judged), the
# status a breach gives, the remedy, and where the limit comes from. NVSentinel: NVIDIA NVSentinel,
# docs/configuration/nic-health-monitor.md (its default counter thresholds: "delta 0" means any
# growth; rates per second or minute are converted to per hour). AzNHC: Azure/azurehpc-health-checks,
# customTests/azure_ib_link_flapping.nhc (5 or more link flaps in 24 h fails).
COUNTERS = {
    # counters/: the port's PMA PortCounters (InfiniBand, and RoCE on mlx5).
    "symbol_error": _spec(
        "counters", PER_HOUR, 120, "fail", _PHYSICAL, "NVSentinel symbol_error_fatal: over 120/h breaks the IBTA BER"
    ),
    "link_error_recovery": _spec(
        "counters", PER_HOUR, 300, "warn", _PHYSICAL, "NVSentinel: over 5/min is link retraining (micro-flaps)"
    ),
    "link_downed": _spec(
        "counters", COUNT, 4, "fail", _PHYSICAL, "AzNHC: 5 or more link flaps in 24 h fail; NVSentinel: any is fatal"
    ),
    "port_rcv_errors": _spec("counters", PER_HOUR, 36000, "warn", _PHYSICAL, "NVSentinel: over 10/s (CRC errors)"),
    "port_xmit_discards": _spec("counters", PER_HOUR, 360000, "warn", _PATH, "NVSentinel: over 100/s (congestion)"),
    "local_link_integrity_errors": _spec(
        "counters", COUNT, 0, "fail", _PHYSICAL, "NVSentinel: any growth is fatal (physical errors over the cap)"
    ),
    "excessive_buffer_overrun_errors": _spec(
        "counters", COUNT, 0, "fail", _CONFIG, "NVSentinel: any growth is fatal (lossless contract broken)"
    ),
    "port_rcv_remote_physical_errors": _spec("counters", COUNT, None, "warn", _PATH, "reported only"),
    "port_rcv_switch_relay_errors": _spec("counters", COUNT, None, "warn", _PATH, "reported only"),
    "port_xmit_constraint_errors": _spec("counters", COUNT, None, "warn", _CONFIG, "reported only"),
    "port_rcv_constraint_errors": _spec("counters", COUNT, None, "warn", _CONFIG, "reported only"),
    "VL15_dropped": _spec("counters", COUNT, None, "warn", _CONFIG, "reported only"),
    # hw_counters/ of mlx5 ports (InfiniBand and RoCE).
    "rnr_nak_retry_err": _spec(
        "hw_counters",
        COUNT,
        0,
        "warn",
        _PATH,
        "NVSentinel: any growth is fatal; raygate warns, since a receiver short of buffers also raises it",
    ),
    "local_ack_timeout_err": _spec("hw_counters", PER_HOUR, 3600, "warn", _PATH, "NVSentinel: over 1/s"),
    "roce_slow_restart": _spec("hw_counters", PER_HOUR, 36000, "warn", _PATH, "NVSentinel: over 10/s (RoCE)"),
    "req_transport_retries_exceeded": _spec("hw_counters", COUNT, None, "warn", _PATH, "reported only"),
    "packet_seq_err": _spec("hw_counters", COUNT, None, "warn", _PATH, "reported only"),
    "out_of_sequence": _spec("hw_counters", COUNT, None, "warn", _PATH, "reported only"),
    "implied_nak_seq_err": _spec("hw_counters", COUNT, None, "warn", _PATH, "reported only"),
    # hw_counters/ of EFA ports (per port; the admin-queue ones per device on newer kernels).
    "rdma_read_wr_err": _spec("hw_counters", COUNT, 0, "warn", _EFA, "NVSentinel: a degradation signal"),
    "rdma_write_wr_err": _spec("hw_counters", COUNT, 0, "warn", _EFA, "NVSentinel: a degradation signal"),
    "retrans_timeout_events": _spec("hw_counters", COUNT, 0, "warn", _EFA, "NVSentinel: a degradation signal"),
    "unresponsive_remote_events": _spec("hw_counters", COUNT, 0, "warn", _EFA, "NVSentinel: a degradation signal"),
    "impaired_remote_conn_events": _spec("hw_counters", COUNT, 0, "warn", _EFA, "NVSentinel: a degradation signal"),
    "rx_drops": _spec("hw_counters", COUNT, None, "warn", _EFA, "reported only (receive-buffer pressure also drops)"),
    "no_completion_cmds": _spec("hw_counters", COUNT, 0, "fail", _EFA, "NVSentinel: any growth is fatal"),
    "cmds_err": _spec("hw_counters", COUNT, None, "warn", _EFA, "reported only"),
}
FLAP_COUNTER = "link_downed"
# Kinds of port whose counters are read; other kinds of RDMA device are not the GPU fabric.
KINDS = ("ib", "roce", "efa")

_INT_RE = re.compile(r"^\d+$")


def _natural_key(name):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def parse_value(text):
    """A sysfs counter file's content -> int, or None for ``N/A (no PMA)`` and anything else unreadable."""
    text = (text or "").strip()
    return int(text) if _INT_RE.match(text) else None


def _read_dir(path, names):
    out = {}
    try:
        entries = os.listdir(path)
    except OSError:
        return out
    for name in entries:
        if name not in names:
            continue
        try:
            with open(os.path.join(path, name), encoding="utf-8", errors="replace") as fh:
                value = parse_value(fh.read())
        except OSError:
            continue
        if value is not None:
            out[name] = value
    return out


def location(device, port=None):
    """``mlx5_3:1`` for a port, the device name alone for a device-wide counter."""
    return device if port is None else "%s:%d" % (device, port)


def describe(loc):
    """``mlx5_3:1`` -> ``mlx5_3 port 1`` (as remedies say it); a device stays as it is."""
    device, sep, port = loc.rpartition(":")
    return "%s port %s" % (device, port) if sep and port.isdigit() else loc


def snapshot(root, devices, kinds=KINDS):
    """The known counters (COUNTERS) of every port of ``devices`` (``fabric.read_sysfs``) whose kind is in
    ``kinds``, and of their devices' own ``hw_counters``: ``{location: {counter: value}}``.

    A port or device without any readable known counter is left out; ``N/A`` values are left out.
    """
    names = set(COUNTERS)
    out = {}
    for dev in devices or []:
        base = os.path.join(root, "sys", "class", "infiniband", dev["name"])
        ports = [p for p in dev.get("ports", []) if _port_kind(dev, p) in kinds]
        if not ports:
            continue
        for port in ports:
            values = {}
            for sub in PORT_DIRS:
                values.update(_read_dir(os.path.join(base, "ports", str(port["port"]), sub), names))
            if values:
                out[location(dev["name"], port["port"])] = values
        device_values = _read_dir(os.path.join(base, "hw_counters"), names)
        if device_values:
            out[location(dev["name"])] = device_values
    return out


def _port_kind(device, port):
    if device.get("kind") == "efa":
        return "efa"
    return {"InfiniBand": "ib", "Ethernet": "roce"}.get(port.get("link_layer"), "other")


# --------------------------------------------------------------------------- growth


def _increment(before, after):
    """Growth from ``before`` to ``after``; a smaller ``after`` means the counter was reset in between."""
    if before is None:
        return after
    return after - before if after >= before else after


def delta(before, after):
    """Growth of each counter between two snapshots: ``{location: {counter: growth}}`` (all counters,
    zeros included). A location or counter missing before counts from zero."""
    out = {}
    for loc, values in after.items():
        old = before.get(loc, {})
        out[loc] = dict((name, _increment(old.get(name), value)) for name, value in values.items())
    return out


def _add(total, step):
    for loc, values in step.items():
        into = total.setdefault(loc, {})
        for name, value in values.items():
            into[name] = into.get(name, 0) + value


def window_growth(history, current, now, window, boot_time=None, boot_id=None):
    """How much each counter grew within the last ``window`` seconds (0: since boot).

    ``history``: earlier snapshots ``[{time, boot_id, counters}]``; only those of this boot count
    (same ``boot_id`` when both are known, taken after ``boot_time``). The growth is summed over
    consecutive snapshots from the newest one taken at or before the window's start (or from zero
    at boot when there is none) to ``current``. Returns ``{growth: {location: {counter: n}},
    since: epoch or None (the interval's start; None when the boot time is unknown), span: seconds
    or None, within: whether the span is close enough to the window to judge at full severity}``.
    """
    same = sorted((s for s in history if _same_boot(s, boot_time, boot_id) and s["time"] <= now), key=_time)
    base = None
    if window:
        before = [s for s in same if s["time"] <= now - window]
        base = before[-1] if before else None
    later = [s for s in same if base is None or s["time"] > base["time"]]
    previous = base["counters"] if base else {}
    growth = {}
    for snap in later:
        _add(growth, delta(previous, snap["counters"]))
        previous = snap["counters"]
    _add(growth, delta(previous, current))
    since = base["time"] if base else boot_time
    span = None if since is None else max(0.0, now - since)
    within = not window or (span is not None and span <= SPAN_SLACK * window)
    return {"growth": growth, "since": since, "span": span, "within": within}


def _time(snap):
    return snap["time"]


def _same_boot(snap, boot_time, boot_id):
    if boot_id and snap.get("boot_id") and snap["boot_id"] != boot_id:
        return False
    return boot_time is None or snap["time"] >= boot_time


# --------------------------------------------------------------------------- state file


def load_state(text):
    """The snapshots of a state file's text; [] for an empty file. ValueError when it is not one."""
    if not (text or "").strip():
        return []
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError("not JSON: %s" % exc) from exc
    if not isinstance(data, dict) or not isinstance(data.get("snapshots"), list):
        raise ValueError("no snapshots list")
    out = []
    for snap in data["snapshots"]:
        if not isinstance(snap, dict) or not isinstance(snap.get("time"), (int, float)):
            continue
        counters = snap.get("counters")
        if not isinstance(counters, dict):
            continue
        clean = {}
        for loc, values in counters.items():
            if isinstance(values, dict):
                clean[str(loc)] = dict(
                    (str(k), v) for k, v in values.items() if isinstance(v, int) and not isinstance(v, bool)
                )
        out.append({"time": float(snap["time"]), "boot_id": snap.get("boot_id"), "counters": clean})
    return out


def dump_state(history, current, now, window, boot_time=None, boot_id=None):
    """The state file's new text: this boot's snapshots still needed for ``window`` plus ``current``."""
    same = sorted((s for s in history if _same_boot(s, boot_time, boot_id)), key=lambda s: s["time"])
    if window:
        start = now - window
        older = [s for s in same if s["time"] <= start]
        same = older[-1:] + [s for s in same if s["time"] > start]
    same.append({"time": now, "boot_id": boot_id, "counters": current})
    same = same[-MAX_SNAPSHOTS:]
    return json.dumps({"version": STATE_VERSION, "snapshots": same}, sort_keys=True) + "\n"


# --------------------------------------------------------------------------- judging


def limits(overrides=None):
    """``{counter: max or None}``: the defaults of COUNTERS with ``overrides`` applied."""
    out = dict((name, spec["max"]) for name, spec in COUNTERS.items())
    out.update(overrides or {})
    return out


def validate_thresholds(overrides):
    """Problems with a thresholds dict (unknown counter, negative or non-numeric limit), as strings."""
    problems = []
    for name, value in (overrides or {}).items():
        if name not in COUNTERS:
            problems.append("unknown counter %r (known: %s)" % (name, ", ".join(sorted(COUNTERS))))
        elif value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
            problems.append("%s must be a number of 0 or more, or null to not judge it, not %r" % (name, value))
    return problems


def _hours(span):
    return max(1.0, (span or 0.0) / 3600.0)


def _measure(name, growth, span):
    """The number compared with the counter's limit: its growth, or its growth per hour."""
    if COUNTERS[name]["unit"] == PER_HOUR:
        return growth / _hours(span)
    return growth


def _limit_text(name, limit):
    return "%g/h" % limit if COUNTERS[name]["unit"] == PER_HOUR else "%g" % limit


def breaches(growth, maxima, span, names=None, any_growth=False):
    """``[{location, counter, growth, measured, max, status}]`` of counters over their limit.

    ``names``: only these counters (default all). ``any_growth``: a ``count`` counter breaches on any
    growth whatever its limit (a test's short interval); ``per_hour`` ones are still judged by rate.
    Counters whose limit is None are not judged.
    """
    out = []
    for loc in sorted(growth, key=_natural_key):
        for name in sorted(growth[loc]):
            if name not in COUNTERS or (names is not None and name not in names):
                continue
            limit = maxima.get(name)
            value = growth[loc][name]
            if limit is None or value <= 0:
                continue
            measured = _measure(name, value, span)
            if any_growth and COUNTERS[name]["unit"] == COUNT:
                over = True
            else:
                over = measured > limit
            if over:
                out.append(
                    {
                        "location": loc,
                        "counter": name,
                        "growth": value,
                        "measured": measured,
                        "max": limit,
                        "status": COUNTERS[name]["status"],
                    }
                )
    return out


def unjudged(growth, maxima, names=None):
    """``location counter +n`` for counters that grew but are not judged (limit None)."""
    out = []
    for loc in sorted(growth, key=_natural_key):
        for name in sorted(growth[loc]):
            if name in COUNTERS and (names is None or name in names) and maxima.get(name) is None:
                if growth[loc][name] > 0:
                    out.append("%s %s +%d" % (loc, name, growth[loc][name]))
    return out


def _breach_text(b):
    name = b["counter"]
    if COUNTERS[name]["unit"] == PER_HOUR:
        rate = "%.1f/h" % b["measured"]
        return "%s %s +%d (%s, max %s)" % (b["location"], name, b["growth"], rate, _limit_text(name, b["max"]))
    return "%s %s +%d (max %s)" % (b["location"], name, b["growth"], _limit_text(name, b["max"]))


def _actions(found):
    """One remedy per location (the first breach's counter decides), at most three."""
    seen, out = set(), []
    for b in found:
        if b["location"] in seen:
            continue
        seen.add(b["location"])
        out.append(COUNTERS[b["counter"]]["action"] % describe(b["location"]))
    more = len(seen) - 3
    return "; ".join(out[:3]) + ("; and %d more" % more if more > 0 else "")


def _join(items, limit=8):
    items = list(items)
    if len(items) > limit:
        return "; ".join(items[:limit]) + "; and %d more" % (len(items) - limit)
    return "; ".join(items)


def _interval_text(info, window):
    span = info.get("span")
    if span is None:
        return "since the counters were last cleared (boot time unknown)"
    if not window:
        return "since boot %s ago" % _duration(span)
    if info.get("within"):
        return "in the last %s" % _duration(span)
    return "over %s (no snapshot near the start of the %s window)" % (_duration(span), _duration(window))


def _duration(seconds):
    seconds = int(round(seconds))
    if seconds >= 3600:
        return "%g h" % round(seconds / 3600.0, 1)
    if seconds >= 60:
        return "%d min" % (seconds // 60)
    return "%d s" % seconds


def _skip_reason(info, fabric):
    if fabric == "none":
        return "not checked (fabric=none)"
    if info is None:
        return "port counters not read (not captured)"
    if info.get("fabric") == "none":
        return "no RDMA fabric on this node"
    if not info.get("growth"):
        return "no port error counters in sysfs (no PMA, or a driver without them)"
    return None


def check_fabric_errors(info, maxima, fabric="auto", window=0):
    """gpu_health's ``fabric_errors``: every judged counter but ``link_downed`` over its limit.

    ``info``: ``window_growth(...)`` plus ``fabric`` (the fabric found) and optional ``state_error``;
    None when not read.
    """
    why = _skip_reason(info, fabric)
    if why:
        return result("fabric_errors", "skip", why)
    names = set(COUNTERS) - {FLAP_COUNTER}
    found = breaches(info["growth"], maxima, info.get("span"), names)
    interval = _interval_text(info, window)
    notes = []
    quiet = unjudged(info["growth"], maxima, names)
    if quiet:
        notes.append("grew, not judged: " + _join(quiet, 4))
    if info.get("state_error"):
        notes.append(info["state_error"])
    suffix = (" (%s)" % "; ".join(notes)) if notes else ""
    ports = len([loc for loc in info["growth"] if ":" in loc])
    if not found:
        detail = "no error counter over its limit on %d %s ports %s%s" % (
            ports,
            info.get("fabric") or "RDMA",
            interval,
            suffix,
        )
        return result("fabric_errors", "pass", detail, 0, 0)
    # A fail-class breach fails only when the interval is the window; over a longer one it may be old.
    status = "fail" if info.get("within") and any(b["status"] == "fail" for b in found) else "warn"
    detail = "%s %s%s" % (_join(_breach_text(b) for b in found), interval, suffix)
    return result("fabric_errors", status, detail, len(found), 0, action=_actions(found))


def check_link_flaps(info, maxima, fabric="auto", window=0):
    """gpu_health's ``link_flaps``: ``link_downed`` growth per port. Over its limit (default 4: AzNHC fails
    at 5 in 24 h) fails; fewer but some warn (NVSentinel counts any as fatal)."""
    why = _skip_reason(info, fabric)
    if why:
        return result("link_flaps", "skip", why)
    limit = maxima.get(FLAP_COUNTER)
    if limit is None:
        return result("link_flaps", "skip", "not judged (fabric_error_thresholds.link_downed is null)")
    downs = [(loc, values[FLAP_COUNTER]) for loc, values in info["growth"].items() if FLAP_COUNTER in values]
    if not downs:
        return result("link_flaps", "skip", "no link_downed counter on these ports (EFA has none)", None, limit)
    downs.sort(key=lambda item: _natural_key(item[0]))
    interval = _interval_text(info, window)
    flapped = [(loc, n) for loc, n in downs if n > 0]
    worst = max(n for _loc, n in downs)
    if not flapped:
        return result("link_flaps", "pass", "no link went down on %d ports %s" % (len(downs), interval), 0, limit)
    listed = _join("%s down %d time%s" % (loc, n, "" if n == 1 else "s") for loc, n in flapped)
    over = [(loc, n) for loc, n in flapped if n > limit]
    action = "; ".join(_PHYSICAL % describe(loc) for loc, _n in (over or flapped)[:3])
    if over and info.get("within"):
        detail = "%s %s (more than %d fails)" % (listed, interval, limit)
        return result("link_flaps", "fail", detail, worst, limit, action=action)
    detail = "%s %s" % (listed, interval)
    if over:
        detail += " (more than %d, but possibly before the window)" % limit
    return result("link_flaps", "warn", detail, worst, limit, action=action)


def check_test_deltas(before, after, maxima, seconds, name="nccl_fabric_errors"):
    """nccl_test's check: error counters that grew while the test ran blame their port.

    ``before``/``after``: ``snapshot`` results (None: not read). Any growth of a judged ``count``
    counter breaches; ``per_hour`` ones by their rate over the test (counted as at least an hour).
    """
    if before is None or after is None:
        return result(name, "skip", "port counters not read")
    if not before and not after:
        return result(name, "skip", "no RDMA port error counters on this node", 0, 0)
    grown = delta(before, after)
    found = breaches(grown, maxima, seconds, any_growth=True)
    quiet = unjudged(grown, maxima)
    suffix = (" (grew, not judged: %s)" % _join(quiet, 4)) if quiet else ""
    during = "during the %s test" % _duration(seconds)
    ports = len([loc for loc in after if ":" in loc])
    if not found:
        return result(name, "pass", "no error counter grew on %d ports %s%s" % (ports, during, suffix), 0, 0)
    status = "fail" if any(b["status"] == "fail" for b in found) else "warn"
    detail = "%s %s%s" % (_join(_breach_text(b) for b in found), during, suffix)
    return result(name, status, detail, len(found), 0, action=_actions(found))


def summary(info):
    """What gpu_health returns about the counters: the nonzero growth per location and the interval."""
    if info is None or not info.get("growth"):
        return None
    grown = {}
    for loc, values in info["growth"].items():
        nonzero = dict((k, v) for k, v in values.items() if v)
        if nonzero:
            grown[loc] = nonzero
    return {"since": info.get("since"), "span": info.get("span"), "grown": grown}
