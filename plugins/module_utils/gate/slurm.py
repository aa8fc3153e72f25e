# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Slurm as the health gate's scheduler: hostlists, scontrol/sinfo output, and the drain decision.

Pure functions of text and data; the module (slurm_gate) and the inventory plugin run the
commands. Formats are Slurm 22.05's as seen on the sandbox Slurm (tests/sandbox/slurm.sh):

- ``scontrol show node -o``: one line per node of ``Key=Value`` pairs separated by spaces;
  ``Reason=`` comes last and its value has spaces, followed by `` [user@YYYY-MM-DDTHH:MM:SS]``.
- ``State=`` is a base state with ``+FLAG`` suffixes (``IDLE+DRAIN``, ``MIXED+DRAIN``,
  ``DOWN+NOT_RESPONDING``); sinfo's compact forms add ``*`` (not responding), ``~``, ``#``...
- hostlists: ``node[1-3,7],gpu-a[01-02]`` (zero padding kept; several bracket groups allowed).

The drain rules (after LBNL NHC and Azure's health checks): a failing or unreachable node is
drained with reason ``raygate: <check>: <detail>``; a passing node is resumed only when its reason
starts with ``raygate:``; a node drained or down for any other reason is left as it is. raygate
only ever drains (never DOWN): a node running jobs goes DRAINING and its jobs finish.
"""

from __future__ import annotations

import re

PREFIX = "raygate:"
DEFAULT_REASON_MAX = 80
# Base states in which a node is out of service whatever its flags.
OUT_BASES = ("DOWN", "ERROR", "FUTURE")
# Flags that take a node out of service (set by an admin, by Slurm, or by us).
OUT_FLAGS = ("DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING", "MAINT", "REBOOT_ISSUED", "REBOOT_REQUESTED")
BUSY_BASES = ("ALLOCATED", "MIXED", "COMPLETING")
# sinfo's compact state suffixes: * not responding, ~ powered off, # powering up, % powering down,
# ! pending power down, $ maintenance reservation, @ pending reboot, ^ rebooting, - planned.
_SUFFIXES = "*~#%!$@^-"
_REASON_TAIL = re.compile(r"^(.*?)\s*\[([^\]@\s]+)@([0-9T:-]+)\](.*)$")
_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_/:.]*)=")
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
_TAIL_NUMBER = re.compile(r"^(.*?)(\d+)$")
_UNPRINTABLE = re.compile(r"[^\x20-\x7e]+")
_SPACES = re.compile(r"\s+")


# ---- hostlists ----------------------------------------------------------------------------


def _split_top(text, sep=","):
    """Split on ``sep`` outside brackets."""
    parts, depth, current = [], 0, []
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise ValueError("unbalanced ']' in hostlist %r" % text)
        if char == sep and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth:
        raise ValueError("unbalanced '[' in hostlist %r" % text)
    parts.append("".join(current))
    return parts


def _expand_ranges(body, text):
    """``1-3,07`` -> ['1', '2', '3', '07']; a range keeps the zero padding of its first number."""
    out = []
    for item in body.split(","):
        match = _RANGE.match(item.strip())
        if not match:
            raise ValueError("bad range %r in hostlist %r" % (item, text))
        low, high = match.group(1), match.group(2)
        if high is None:
            out.append(low)
            continue
        if int(high) < int(low):
            raise ValueError("range %s-%s runs backwards in hostlist %r" % (low, high, text))
        width = len(low) if low.startswith("0") or len(low) == len(high) else 0
        out.extend(str(n).zfill(width) for n in range(int(low), int(high) + 1))
    return out


def _expand_one(item, text):
    """One hostlist element, possibly with several bracket groups (their product, in order)."""
    names = [""]
    rest = item
    while rest:
        start = rest.find("[")
        if start < 0:
            names = [n + rest for n in names]
            break
        end = rest.find("]", start)
        if end < 0:
            raise ValueError("unbalanced '[' in hostlist %r" % text)
        prefix, body, rest = rest[:start], rest[start + 1 : end], rest[end + 1 :]
        names = [n + prefix + part for n in names for part in _expand_ranges(body, text)]
    return names


def expand_hostlist(text):
    """Slurm hostlist -> node names in order, duplicates kept once: ``node[1-2],gpu07`` ->
    ``['node1', 'node2', 'gpu07']``. Spaces around commas are ignored. Raises ValueError on
    malformed text (unbalanced brackets, a bad or backwards range)."""
    out, seen = [], set()
    for item in _split_top((text or "").strip()):
        item = item.strip()
        if not item:
            continue
        for name in _expand_one(item, text):
            if name not in seen:
                seen.add(name)
                out.append(name)
    return out


def _ranges(numbers, width):
    """Sorted unique ints -> ``1-3,7`` with every number padded to ``width``."""
    parts, start, prev = [], None, None
    for number in numbers + [None]:
        if start is not None and (number is None or number != prev + 1):
            low, high = str(start).zfill(width), str(prev).zfill(width)
            parts.append(low if start == prev else "%s-%s" % (low, high))
            start = None
        if number is not None and start is None:
            start = number
        prev = number
    return ",".join(parts)


def _number_key(prefix, digits, padded_widths):
    """A name's group: zero-padded numbers group by width; a plain number joins the padded group
    of its own width when there is one (gpu01,gpu10 -> gpu[01,10]), else the plain group."""
    width = len(digits)
    if (digits.startswith("0") and width > 1) or width in padded_widths.get(prefix, ()):
        return (prefix, width)
    return (prefix, 0)


def compress_hostlist(names):
    """Node names -> a Slurm hostlist: names sharing a prefix and a number width are folded into
    one bracket group (``node1,node2,node3`` -> ``node[1-3]``). Groups keep the order of their
    first name; names without a trailing number stay as they are."""
    matches = [(name, _TAIL_NUMBER.match(name)) for name in names]
    padded = {}
    for _name, match in matches:
        if match and match.group(2).startswith("0") and len(match.group(2)) > 1:
            padded.setdefault(match.group(1), set()).add(len(match.group(2)))
    groups, order = {}, []
    for name, match in matches:
        key = _number_key(match.group(1), match.group(2), padded) if match else (name, None)
        if key not in groups:
            groups[key] = set()
            order.append(key)
        if match:
            groups[key].add(int(match.group(2)))
    parts = []
    for key in order:
        prefix, width = key
        if width is None:
            parts.append(prefix)
            continue
        numbers = sorted(groups[key])
        body = _ranges(numbers, width)
        parts.append("%s%s" % (prefix, body) if len(numbers) == 1 else "%s[%s]" % (prefix, body))
    return ",".join(parts)


# ---- scontrol and sinfo output ------------------------------------------------------------


def parse_record(line, free_reason=False):
    """One ``scontrol show <thing> -o`` line -> {Key: Value}. With ``free_reason`` (node records,
    whose reason is free text) a ``Reason=`` value runs to its `` [user@time]`` stamp (kept as
    ``ReasonUser`` and ``ReasonTime``) or to the end of the line."""
    line = line.strip()
    at = line.find(" Reason=") + 1 if free_reason else -1
    if at <= 0:
        return _fields(line)
    head, reason = line[:at], line[at + len("Reason=") :]
    match = _REASON_TAIL.match(reason)
    fields = _fields(head + " " + (match.group(4) if match else ""))
    fields["Reason"] = (match.group(1) if match else reason).strip()
    if match:
        fields["ReasonUser"], fields["ReasonTime"] = match.group(2), match.group(3)
    return fields


def _fields(line):
    keys = list(_KEY.finditer(line))
    fields = {}
    for index, match in enumerate(keys):
        end = keys[index + 1].start() if index + 1 < len(keys) else len(line)
        fields[match.group(1)] = line[match.end() : end].strip()
    return fields


def split_state(state):
    """``MIXED+DRAIN`` -> ('MIXED', ['DRAIN']); ``idle*`` -> ('IDLE', ['NOT_RESPONDING'])."""
    state = (state or "").strip().upper()
    flags = []
    while state and state[-1] in _SUFFIXES:
        if state[-1] == "*":
            flags.append("NOT_RESPONDING")
        state = state[:-1]
    parts = state.split("+")
    return parts[0], flags + [p for p in parts[1:] if p]


def node_info(fields):
    """The parts of one node record the decision reads: name, address, state, reason."""
    base, flags = split_state(fields.get("State"))
    reason = fields.get("Reason")
    if reason in ("(null)", "none", "None"):
        reason = ""
    return {
        "name": fields.get("NodeName"),
        "address": fields.get("NodeAddr") or fields.get("NodeName"),
        "hostname": fields.get("NodeHostName") or fields.get("NodeName"),
        "state": fields.get("State", ""),
        "base": base,
        "flags": flags,
        "reason": reason or "",
        "partitions": [p for p in (fields.get("Partitions") or "").split(",") if p],
        "gres": fields.get("Gres", ""),
        "cpus_alloc": _int(fields.get("CPUAlloc")),
    }


def _int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def parse_show_node(text):
    """``scontrol show node -o`` output -> {node name: node_info}. Lines without NodeName= are skipped."""
    nodes = {}
    for line in (text or "").splitlines():
        if "NodeName=" not in line:
            continue
        info = node_info(parse_record(line, free_reason=True))
        if info["name"]:
            nodes[info["name"]] = info
    return nodes


def parse_show_job(text):
    """``scontrol show job -o <id>`` output -> the first job's fields, with ``nodes`` (NodeList expanded)."""
    for line in (text or "").splitlines():
        if "JobId=" in line:
            fields = parse_record(line)
            nodelist = fields.get("NodeList", "")
            fields["nodes"] = [] if nodelist in ("", "(null)") else expand_hostlist(nodelist)
            return fields
    raise ValueError("no job in scontrol output: %r" % (text or "")[:200])


def parse_sinfo_nodes(text, sep="|"):
    """``sinfo -h -N -o '%N|%T|%E'`` output -> [{name, state, reason}] (one line per node and partition)."""
    rows = []
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        parts = line.split(sep, 2) + ["", ""]
        reason = parts[2].strip()
        rows.append({"name": parts[0].strip(), "state": parts[1].strip(), "reason": "" if reason == "none" else reason})
    return rows


# ---- the decision -------------------------------------------------------------------------


def out_of_service(node):
    """Whether a node is drained, draining, down or failed, whoever did it."""
    return node["base"] in OUT_BASES or any(flag in OUT_FLAGS for flag in node["flags"])


def ours(node):
    return node["reason"].startswith(PREFIX)


def clean(text):
    """One line of printable ASCII (Slurm stores the reason as given; keep it readable in sinfo)."""
    return _SPACES.sub(" ", _UNPRINTABLE.sub(" ", str(text))).strip()


def drain_reason(reasons, limit=DEFAULT_REASON_MAX):
    """``raygate: <check>: <detail>`` from a node's report reasons (``check: detail`` each), cut to
    ``limit`` characters. A node that did not answer (check ``reachable``) says ``unreachable``;
    more reasons than the first are counted (``(+2 more)``)."""
    if limit < len(PREFIX) + 8:
        raise ValueError("reason limit %d is too short" % limit)
    reasons = [clean(r) for r in reasons or [] if clean(r)] or ["failed the health gate"]
    first = reasons[0]
    if first.startswith("reachable:"):
        first = "unreachable:" + first[len("reachable:") :]
    more = " (+%d more)" % (len(reasons) - 1) if len(reasons) > 1 else ""
    text = "%s %s" % (PREFIX, first)
    if len(text) + len(more) > limit:
        text = text[: max(len(PREFIX) + 1, limit - len(more) - 3)].rstrip() + "..."
    return (text + more)[:limit]


def update_command(name, action, reason=None):
    """The scontrol arguments (after ``scontrol``) for one action; values are single argv
    elements, so a reason with spaces needs no quoting."""
    if action == "drain":
        return ["update", "NodeName=%s" % name, "State=DRAIN", "Reason=%s" % reason]
    if action == "resume":
        return ["update", "NodeName=%s" % name, "State=RESUME"]
    raise ValueError("no command for action %r" % action)


def _entry(host, name, action, note, node=None, reason=None):
    return {
        "host": host,
        "node": name,
        "action": action,
        "note": note,
        "state": node["state"] if node else None,
        "reason": node["reason"] if node else None,
        "new_reason": reason,
        "args": update_command(name, action, reason) if action in ("drain", "resume") else None,
    }


def _failing(host, name, node, reasons, breaker, limit):
    reason = drain_reason(reasons, limit)
    if out_of_service(node) and not ours(node):
        why = node["reason"] or "no reason given"
        return _entry(host, name, "none", "left alone: %s for another reason (%s)" % (node["state"], why), node)
    if out_of_service(node) and node["reason"] == reason:
        return _entry(host, name, "none", "already drained by raygate", node)
    if breaker:
        return _entry(host, name, "none", "circuit breaker tripped: not drained (would: %s)" % reason, node)
    if out_of_service(node):
        return _entry(host, name, "drain", "drained again with the new reason", node, reason)
    if node["base"] in BUSY_BASES:
        return _entry(host, name, "drain", "draining: its running jobs finish first", node, reason)
    return _entry(host, name, "drain", "drained", node, reason)


def _passing(host, name, node):
    if not out_of_service(node):
        return _entry(host, name, "none", "in service", node)
    if ours(node):
        return _entry(host, name, "resume", "resumed (raygate had drained it)", node)
    why = node["reason"] or "no reason given"
    return _entry(host, name, "none", "left alone: %s for another reason (%s)" % (node["state"], why), node)


def decide(healthy, unhealthy, nodes, names=None, skipped=(), breaker_tripped=False, reason_max=DEFAULT_REASON_MAX):
    """One entry per host of the report: what to do with its Slurm node.

    ``healthy``: hosts that passed (re-checked); ``unhealthy``: {host: [reasons]}; ``skipped``:
    hosts not re-checked (left as they are); ``nodes``: parse_show_node of the cluster; ``names``:
    {host: Slurm node name} (default: the host's own name). Each entry: {host, node, action:
    drain|resume|none, note, state, reason, new_reason, args}. With ``breaker_tripped`` nothing
    is drained or resumed: the report then lists every node as healthy (it evicts nobody), so a
    node that failed would look like one to resume.
    """
    names = names or {}
    out = []
    hosts = [(h, "skipped") for h in skipped] + [(h, "unhealthy") for h in unhealthy]
    hosts += [(h, "healthy") for h in healthy if h not in unhealthy and h not in skipped]
    for host, verdict in hosts:
        name = str(names.get(host) or host)
        node = nodes.get(name)
        if node is None:
            out.append(_entry(host, name, "none", "not a Slurm node (scontrol does not list %s)" % name))
        elif breaker_tripped and verdict == "healthy":
            out.append(_entry(host, name, "none", "circuit breaker tripped: not resumed, left as it is", node))
        elif verdict == "skipped":
            out.append(_entry(host, name, "none", "not re-checked in this run: left as it is", node))
        elif verdict == "unhealthy":
            out.append(_failing(host, name, node, unhealthy[host], breaker_tripped, reason_max))
        else:
            out.append(_passing(host, name, node))
    return out


def summary_lines(entries, mode):
    """Human lines for the play output: one per node, what happened (or would, in report mode)."""
    verb = {"drain": "drain", "resume": "resume"}
    lines = []
    for entry in entries:
        if entry["action"] in verb:
            done = entry["action"] + ("ed" if entry["action"] == "drain" else "d")
            what = done if mode == "drain" else "would %s" % verb[entry["action"]]
            detail = entry["new_reason"] or entry["note"]
            # A drain's note adds what matters beyond the reason (running jobs, a changed reason).
            extra = "; %s" % entry["note"] if entry["action"] == "drain" and entry["note"] != "drained" else ""
            lines.append("slurm %s: %s (%s)%s" % (entry["node"], what, detail, extra))
        else:
            lines.append("slurm %s: %s" % (entry["node"], entry["note"]))
    return lines
