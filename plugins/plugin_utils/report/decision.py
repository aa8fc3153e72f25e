# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The health gate's decision and its reports, built from check results alone.

``build_report()`` turns the per-node check lists into one report dict (the content of
report.json); every ``render_*`` function is a pure function of that dict, so the play
summary, Markdown, JUnit, the healthy host list and the Prometheus textfiles always agree.
"""

from __future__ import annotations

import datetime
import json
import math
import re
import xml.etree.ElementTree as ET

from ansible_collections.raygate.cluster.plugins.module_utils.checks import (
    DEFAULT_SEVERITY,
    SEVERITIES,
    STATUSES,
    reason,
    verdict,
)
from ansible_collections.raygate.cluster.plugins.module_utils.gate.fingerprint import FIELDS as FINGERPRINT_FIELDS
from ansible_collections.raygate.cluster.plugins.module_utils.gate.fingerprint import text as fingerprint_text
from ansible_collections.raygate.cluster.plugins.plugin_utils import breaker, fleet
from ansible_collections.raygate.cluster.plugins.plugin_utils.remedies import (
    default_action,
    severity_rank,
    worst_severity,
)

SOURCES = ("gpu_health", "nccl_test", "nccl_pairs")
ROLES = ("head", "worker")
NODE_STATUSES = ("checked", "skipped", "unreachable", "failed")
# A node that left the run before or during the gate: one failing check says why.
LEFT_CHECKS = {"unreachable": "reachable", "failed": "run"}
# Prometheus encoding of a check status (documented in the metric's HELP).
STATUS_CODES = {"pass": 0, "warn": 1, "fail": 2, "skip": -1}
FILES = (
    ("json", "report.json"),
    ("markdown", "report.md"),
    ("junit", "junit.xml"),
    ("healthy_hosts", "healthy_hosts.txt"),
)
CLASS_PREFIX = "raygate.health."
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# Characters XML 1.0 cannot carry at all, even escaped.
_XML_BAD = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_MD_SPECIAL = re.compile(r"([\\`*\[\]<>|&#])")
_MD_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
_NEWLINES = re.compile(r"\r\n|\r|\n")
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


# ---- time and identifiers ---------------------------------------------------------------


def iso_utc(epoch):
    """``2026-01-02T03:04:05Z`` for a Unix time (seconds)."""
    return datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def default_run_id(epoch):
    """``YYYYmmddTHHMMSSZ`` (UTC) for a Unix time: the default report directory name."""
    return datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def check_run_id(run_id):
    """Return ``run_id`` if it is one safe path component, else raise ValueError."""
    if not isinstance(run_id, str) or not _RUN_ID.match(run_id):
        raise ValueError(
            "run_id %r must be one directory name: letters, digits, '.', '_' or '-', not starting with '.' or '-'"
            % (run_id,)
        )
    return run_id


# ---- input ------------------------------------------------------------------------------


def _plain(value):
    """A copy of ``value`` made of plain JSON types (task args may arrive as str/dict subclasses)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return str(value)


def _check(host, raw):
    if not isinstance(raw, dict):
        raise ValueError("node %s: every check must be a dict, got %r" % (host, raw))
    missing = [k for k in ("name", "status", "source") if not raw.get(k)]
    if missing:
        raise ValueError("node %s: a check lacks %s: %r" % (host, ", ".join(missing), raw))
    for key, allowed in (("status", STATUSES), ("source", SOURCES)):
        if raw[key] not in allowed:
            raise ValueError("node %s: check %s has %s %r, not one of %s" % (host, raw["name"], key, raw[key], allowed))
    out = {
        "name": str(raw["name"]),
        "status": str(raw["status"]),
        "detail": "" if raw.get("detail") is None else str(raw["detail"]),
        "value": _plain(raw.get("value")),
        "threshold": _plain(raw.get("threshold")),
        "source": str(raw["source"]),
    }
    if raw.get("severity") and raw["severity"] not in SEVERITIES:
        raise ValueError(
            "node %s: check %s has severity %r, not one of %s" % (host, raw["name"], raw["severity"], SEVERITIES)
        )
    return with_remedy(out, raw.get("severity"), raw.get("action"))


def with_remedy(check, severity=None, action=None):
    """``check`` with the severity and action a failing or warning one must carry (a pass or skip
    carries neither): those given, else the status's default severity and the check's default action."""
    check = dict(check)
    check.pop("severity", None)
    check.pop("action", None)
    if check["status"] in DEFAULT_SEVERITY:
        check["severity"] = severity or DEFAULT_SEVERITY[check["status"]]
        check["action"] = str(action) if action else default_action(check["name"], check["status"])
    return check


def _made_check(name, detail):
    """A failing check the report makes itself (source health_report, not one of SOURCES)."""
    made = {"name": name, "status": "fail", "detail": detail, "value": None, "threshold": None}
    return with_remedy(dict(made, source="health_report"))


def _fingerprint(host, raw):
    """A node's fingerprint as plain values of the known fields (others are dropped), or None."""
    if raw is None or raw == {}:
        return None
    if not isinstance(raw, dict):
        raise ValueError("node %s: fingerprint must be a dict, got %r" % (host, raw))
    return dict((field, _plain(raw.get(field))) for field in FINGERPRINT_FIELDS)


def normalize_nodes(nodes):
    """Validate the gate's input and return plain copies of the nodes, in the order given.

    Each node: ``{host, role: head|worker, address, status, skip_reason, error, fingerprint, checks}``, status
    one of checked, skipped, unreachable (it did not answer), failed (a step failed on it).
    A checked node without any check result gets one failing ``checks`` check (source
    ``health_report``): a node whose checks did not run must not pass the gate. An unreachable
    or failed node gets one failing ``reachable`` or ``run`` check whose detail is its error.
    Every failing or warning check gets a severity and an action (``with_remedy``). A checked
    node's ``fingerprint`` (gpu_health's) is kept, others are dropped.
    Raises ValueError naming the node on any malformed entry or duplicate host or check.
    """
    if not isinstance(nodes, list) or not nodes:
        raise ValueError("nodes must be a non-empty list")
    out, seen = [], set()
    for raw in nodes:
        if not isinstance(raw, dict) or not raw.get("host"):
            raise ValueError("every node needs a host: %r" % (raw,))
        host = str(raw["host"])
        if host in seen:
            raise ValueError("node %s is listed twice" % host)
        seen.add(host)
        role = raw.get("role") or "worker"
        status = raw.get("status") or "checked"
        if role not in ROLES:
            raise ValueError("node %s: role %r is not one of %s" % (host, role, ROLES))
        if status not in NODE_STATUSES:
            raise ValueError("node %s: status %r is not one of %s" % (host, status, NODE_STATUSES))
        checks = [_check(host, c) for c in (raw.get("checks") or [])]
        keys = [(c["name"], c["source"]) for c in checks]
        dupes = sorted(set(k for k in keys if keys.count(k) > 1))
        if dupes:
            raise ValueError("node %s: check %s from %s appears more than once" % ((host,) + dupes[0]))
        if status in LEFT_CHECKS:
            detail = str(raw.get("error") or "no error was recorded")
            checks = [_made_check(LEFT_CHECKS[status], detail)]
        elif status == "checked" and not checks:
            checks = [_made_check("checks", "no check results were given for this node")]
        out.append(
            {
                "host": host,
                "role": str(role),
                "address": None if raw.get("address") is None else str(raw["address"]),
                "status": str(status),
                "skip_reason": str(raw["skip_reason"]) if raw.get("skip_reason") else None,
                "fingerprint": _fingerprint(host, raw.get("fingerprint")) if status == "checked" else None,
                "checks": checks,
            }
        )
    return out


# ---- the decision -----------------------------------------------------------------------


def judge_node(node, fail_on_warn=False):
    """``{verdict, healthy, severity, reasons, warn_reasons}`` for one normalized node.

    verdict: ``pass|warn|fail`` from its checks, or ``skipped`` (a running member that was
    not re-checked: it counts as healthy). severity: the worst of its failing and warning
    checks (None without any). reasons: the failing checks as ``name: detail``, plus the
    warning ones when ``fail_on_warn``; warn_reasons: the warning checks.
    """
    warn_reasons = [reason(c) for c in node["checks"] if c["status"] == "warn"]
    if node["status"] == "skipped":
        return {"verdict": "skipped", "healthy": True, "severity": None, "reasons": [], "warn_reasons": []}
    node_verdict = verdict(node["checks"])
    reasons = [reason(c) for c in node["checks"] if c["status"] == "fail"]
    if fail_on_warn:
        reasons += warn_reasons
    healthy = node_verdict == "pass" or (node_verdict == "warn" and not fail_on_warn)
    return {
        "verdict": node_verdict,
        "healthy": healthy,
        "severity": worst_severity(node["checks"]),
        "reasons": reasons,
        "warn_reasons": warn_reasons,
    }


def _head_of(nodes, head):
    heads = [n["host"] for n in nodes if n["role"] == "head"]
    if len(heads) > 1:
        raise ValueError("more than one node has role head: %s" % ", ".join(heads))
    if not head:
        if not heads:
            raise ValueError("no head: set head or give one node role head")
        return heads[0]
    head = str(head)
    if heads and heads[0] != head:
        raise ValueError("head is %s but node %s has role head" % (head, heads[0]))
    return head


def _message(head, head_entry, healthy, total, min_healthy, unhealthy):
    counts = "%d healthy of %d, need %d" % (len(healthy), total, min_healthy)
    problems = []
    if head_entry is None:
        problems.append("head %s is not among the nodes (it failed or was unreachable before the gate)" % head)
    elif not head_entry["healthy"]:
        problems.append("head %s is unhealthy (%s)" % (head, "; ".join(head_entry["reasons"]) or "no reason given"))
    if len(healthy) < min_healthy:
        problems.append(counts)
    if problems:
        return "health gate failed: " + "; ".join(problems)
    message = "health gate passed: %s; head %s is healthy" % (counts, head)
    if unhealthy:
        message += "; left out: %s" % ", ".join(unhealthy)
    return message


def _add_drift_checks(nodes, table, mode):
    """Each checked node with a fingerprint gets its ``fleet_drift`` check (none when ``mode`` is off)."""
    for node in nodes:
        if node["status"] != "checked" or not node["fingerprint"]:
            continue
        check = fleet.drift_check(node["fingerprint"], table, mode)
        if check is not None:
            made = dict(check, source="health_report")
            node["checks"].append(with_remedy(made, check.get("severity"), check.get("action")))


def _fleet_view(nodes, fleet_expect, mode):
    """(fleet report, {host: fingerprint}) for the checked nodes that reported a fingerprint."""
    prints = [(n["host"], n["fingerprint"]) for n in nodes if n["status"] == "checked" and n["fingerprint"]]
    table = fleet.fleet_table(prints, fleet_expect)
    drift = {}
    for host, node_fp in prints:
        found = fleet.node_drift(node_fp, table)
        if found:
            drift[host] = found
    view = {"nodes": table["nodes"], "mode": mode, "fields": table["fields"], "drift": drift}
    return view, dict(prints)


def build_report(
    nodes,
    head=None,
    min_healthy=1,
    fail_on_warn=False,
    valid_for=86400,
    checked_at=0,
    run_id=None,
    fleet_drift="warn",
    fleet_expect=None,
    breaker_threshold=breaker.DEFAULT_THRESHOLD,
    breaker_min_nodes=breaker.DEFAULT_MIN_NODES,
    pairs=None,
):
    """The whole report (the content of report.json) for the gate's input.

    ``head`` defaults to the node with role head; a head missing from ``nodes`` is unhealthy.
    ``checked_at`` is a Unix time in seconds; ``run_id`` defaults to ``default_run_id(checked_at)``.
    ``fleet_drift`` (warn, fail, off) is the status of a node whose fingerprint differs from
    ``fleet_expect`` or the fleet's majority (``fleet.py``); ``breaker_threshold`` (percent, 0 off)
    and ``breaker_min_nodes`` set the circuit breaker (``breaker.py``): when it trips nobody is left
    out (``healthy`` lists every node, ``unhealthy`` is empty) and ``ok`` is false.
    Raises ValueError on bad input.
    Returned keys: run_id, checked_at, valid_until (ISO 8601 UTC), checked_at_epoch,
    valid_until_epoch, head, min_healthy, valid_for, fail_on_warn, ok, head_healthy, enough,
    breaker_tripped, message, healthy (hosts, input order), unhealthy {host: reasons}, warned {host:
    warn_reasons}, severities {host: worst severity}, thresholds {check: [distinct thresholds]},
    breaker (its state), fleet (the fleet view), nodes (each node with verdict, healthy, severity,
    reasons, warn_reasons, fingerprint and its checks), pairs (``pairs`` as given: what the pair
    nccl-tests did, ``gate.pair_run()``; None when none ran).
    """
    if pairs is not None and not isinstance(pairs, dict):
        raise ValueError("pairs must be a mapping or None, not %r" % (pairs,))
    if isinstance(min_healthy, bool) or not isinstance(min_healthy, int) or min_healthy < 1:
        raise ValueError("min_healthy must be an integer >= 1, not %r" % (min_healthy,))
    if isinstance(valid_for, bool) or not isinstance(valid_for, int) or valid_for < 1:
        raise ValueError("valid_for must be a number of seconds >= 1, not %r" % (valid_for,))
    if fleet_drift not in fleet.MODES:
        raise ValueError("fleet_drift must be one of %s, not %r" % (", ".join(fleet.MODES), fleet_drift))
    breaker.check_settings(breaker_threshold, breaker_min_nodes)
    checked_at = int(checked_at)
    run_id = check_run_id(run_id if run_id else default_run_id(checked_at))
    normalized = normalize_nodes(nodes)
    fleet_view, fingerprints = _fleet_view(normalized, fleet_expect, fleet_drift)
    _add_drift_checks(normalized, fleet_view, fleet_drift)
    entries = []
    for node in normalized:
        entry = dict(node)
        entry.update(judge_node(node, fail_on_warn))
        entries.append(entry)
    head = _head_of(entries, head)
    # A head missing from the nodes left the play before the gate: unhealthy, not a bad argument.
    head_entry = ([e for e in entries if e["host"] == head] or [None])[0]
    head_healthy = bool(head_entry and head_entry["healthy"])
    judged_healthy = [e["host"] for e in entries if e["healthy"]]
    state = breaker.judge(entries, breaker_threshold, breaker_min_nodes, fingerprints)
    if state["tripped"]:
        # Suspect a common cause: leave nobody out, and stop.
        healthy, unhealthy = [e["host"] for e in entries], {}
        message = breaker.message(state)
        if not head_healthy:
            # The run stops for the breaker; say too that the head itself failed.
            reasons = "; ".join(head_entry["reasons"]) if head_entry else "not in the report"
            message += "; head %s is unhealthy (%s)" % (head, reasons or "no reason given")
    else:
        healthy = judged_healthy
        unhealthy = {e["host"]: e["reasons"] for e in entries if not e["healthy"]}
        message = _message(head, head_entry, healthy, len(entries), min_healthy, list(unhealthy))
    warned = {e["host"]: e["warn_reasons"] for e in entries if e["warn_reasons"]}
    thresholds = {}
    for entry in entries:
        for check in entry["checks"]:
            seen = thresholds.setdefault(check["name"], [])
            if check["threshold"] is not None and check["threshold"] not in seen:
                seen.append(check["threshold"])
    valid_until = checked_at + valid_for
    enough = len(judged_healthy) >= min_healthy
    return {
        "run_id": run_id,
        "checked_at": iso_utc(checked_at),
        "valid_until": iso_utc(valid_until),
        "checked_at_epoch": checked_at,
        "valid_until_epoch": valid_until,
        "head": head,
        "min_healthy": min_healthy,
        "valid_for": valid_for,
        "fail_on_warn": bool(fail_on_warn),
        "ok": head_healthy and enough and not state["tripped"],
        "head_healthy": head_healthy,
        "enough": enough,
        "breaker_tripped": state["tripped"],
        "message": message,
        "healthy": healthy,
        "unhealthy": unhealthy,
        "warned": warned,
        "severities": {e["host"]: e["severity"] for e in entries if e["severity"]},
        "thresholds": {k: v for k, v in sorted(thresholds.items()) if v},
        "breaker": state,
        "fleet": fleet_view,
        "pairs": _plain(pairs),
        "nodes": entries,
    }


# ---- renderings -------------------------------------------------------------------------


def _text(value):
    """A cell's text for a check value or threshold."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def _node_reasons(entry):
    if entry["verdict"] == "skipped":
        return ["skipped: %s" % (entry["skip_reason"] or "not re-checked")]
    return entry["reasons"] or entry["warn_reasons"]


def _visible(text):
    """``text`` with control characters (a terminal escape, NUL) shown as ``\\xNN`` instead."""
    return _CONTROL.sub(lambda m: "\\x%02x" % ord(m.group(0)), str(text))


def _one_line(text):
    return _NEWLINES.sub(" ", _visible(text))


def render_json(report):
    return json.dumps(report, indent=2, sort_keys=False) + "\n"


def md_escape(text):
    """``text`` as one Markdown table cell: table and inline syntax escaped, newlines as <br>."""
    text = _MD_SPECIAL.sub(r"\\\1", _visible(text))
    text = _MD_UNDERSCORE.sub(r"\\_", text)
    return _NEWLINES.sub("<br>", text)


def _md_row(cells):
    return "| " + " | ".join(md_escape(c) for c in cells) + " |"


MD_HOSTS = 20


def _md_hosts(hosts):
    """Up to MD_HOSTS host names, then how many more (report.json has them all)."""
    shown = ", ".join(hosts[:MD_HOSTS])
    return shown + (" and %d more" % (len(hosts) - MD_HOSTS) if len(hosts) > MD_HOSTS else "")


def _value_note(info, value):
    if value["value"] is None:
        return "not read"
    if info["expected"] is not None:
        return "pinned" if fleet.pinned_match(value["value"].split(", "), info["expected"]) else "differs from the pin"
    if info["majority"] is not None:
        return "majority" if value["value"] == info["majority"] else "differs from the majority"
    return "no majority" if info["split"] else ""


def _md_breaker(report):
    state = report["breaker"]
    if not state["tripped"]:
        return ["- circuit breaker: %s" % md_escape(state["detail"])]
    lines = ["- circuit breaker: **TRIPPED**: %s; nobody was left out" % md_escape(state["detail"])]
    return lines + ["  - likely: %s" % md_escape(cause) for cause in state["causes"]]


def _md_fleet(report):
    view = report["fleet"]
    if not view["nodes"]:
        return []
    lines = [
        "",
        "## Fleet versions",
        "",
        "%d nodes reported their versions; fleet drift: %s." % (view["nodes"], view["mode"]),
        "",
        "| field | value | nodes | hosts | note |",
        "| --- | --- | --- | --- | --- |",
    ]
    for field, info in view["fields"].items():
        for value in info["values"]:
            cells = [field, "(not read)" if value["value"] is None else value["value"], str(value["count"])]
            lines.append(_md_row(cells + [_md_hosts(value["hosts"]), _value_note(info, value)]))
    return lines


def _md_pairs_summary(report):
    pairs = report.get("pairs")
    if not pairs:
        return []
    return [
        "- pair nccl-tests: %d test(s) in %d round(s): %d planned, %d retest phase(s)"
        % (len(pairs["tests"]), pairs["rounds"], pairs["planned_rounds"], pairs["retest_phases"])
    ]


def _md_pairs(report):
    """The pair nccl-tests in the order they ran: round, phase, hosts, verdict, bus bandwidth, transport."""
    pairs = report.get("pairs")
    if not pairs or not pairs["tests"]:
        return []
    lines = ["", "## Pair nccl-tests", "", "| round | phase | hosts | verdict | busbw, GB/s | transport |"]
    lines.append("| --- | --- | --- | --- | --- | --- |")
    for test in pairs["tests"]:
        cells = [_text(test["round"]), test["phase"], " + ".join(test["hosts"]), _text(test["verdict"])]
        lines.append(_md_row(cells + [_text(test["busbw"]), _text(test["transport"])]))
    return lines


def render_markdown(report):
    """report.md: the decision, a summary table (host, role, verdict, severity, healthy, reasons), the
    fleet's versions, then one table per node (check, status, severity, value, threshold, detail, action)."""
    lines = [
        "# raygate health report %s" % md_escape(report["run_id"]),
        "",
        "- result: **%s**" % ("passed" if report["ok"] else "FAILED"),
        "- %s" % md_escape(report["message"]),
        "- checked at %s, valid until %s" % (report["checked_at"], report["valid_until"]),
        "- head: %s; min_healthy: %d; fail_on_warn: %s"
        % (md_escape(report["head"]), report["min_healthy"], str(report["fail_on_warn"]).lower()),
    ]
    lines += _md_breaker(report)
    lines += _md_pairs_summary(report)
    lines += [
        "",
        "## Nodes",
        "",
        "| host | role | verdict | severity | healthy | reasons |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for entry in report["nodes"]:
        cells = [entry["host"], entry["role"], entry["verdict"], entry["severity"] or ""]
        cells.append("yes" if entry["healthy"] else "no")
        lines.append(_md_row(cells + ["; ".join(_node_reasons(entry))]))
    lines += _md_fleet(report)
    lines += _md_pairs(report)
    for entry in report["nodes"]:
        lines += ["", "## %s (%s, %s)" % (md_escape(entry["host"]), entry["role"], entry["verdict"]), ""]
        if entry["address"]:
            lines += ["address: %s" % md_escape(entry["address"]), ""]
        if entry["status"] == "skipped":
            lines += ["Not re-checked: %s" % md_escape(entry["skip_reason"] or "no reason given"), ""]
        if not entry["checks"]:
            continue
        lines += [
            "| check | status | severity | value | threshold | detail | action |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for check in entry["checks"]:
            cells = [check["name"], check["status"], check.get("severity", "")]
            cells += [_text(check["value"]), _text(check["threshold"]), check["detail"], check.get("action", "")]
            lines.append(_md_row(cells))
    return "\n".join(lines) + "\n"


def _xml(text):
    return _XML_BAD.sub(lambda m: "\\x%02x" % ord(m.group(0)) if ord(m.group(0)) < 256 else "?", str(text))


def _junit_case(suite, host, check):
    case = ET.SubElement(suite, "testcase", classname=_xml(CLASS_PREFIX + host), name=_xml(check["name"]))
    body = "%s: %s\nvalue: %s\nthreshold: %s\nsource: %s" % (
        check["status"],
        check["detail"],
        _text(check["value"]),
        _text(check["threshold"]),
        check["source"],
    )
    if check.get("severity"):
        body += "\nseverity: %s\naction: %s" % (check["severity"], check.get("action", ""))
        props = ET.SubElement(case, "properties")
        for key in ("severity", "action"):
            ET.SubElement(props, "property", name=key, value=_xml(check.get(key, "")))
    if check["status"] == "fail":
        ET.SubElement(case, "failure", message=_xml(check["detail"]), type="fail").text = _xml(body)
    elif check["status"] == "skip":
        ET.SubElement(case, "skipped", message=_xml(check["detail"]))
    else:
        ET.SubElement(case, "system-out").text = _xml(body)


def render_junit(report):
    """junit.xml: one <testsuite> per node, one <testcase> per check; a skipped node is one skipped case."""
    stamp = report["checked_at"].rstrip("Z")
    root = ET.Element("testsuites", name="raygate.health")
    totals = {"tests": 0, "failures": 0, "skipped": 0}
    for entry in report["nodes"]:
        host = entry["host"]
        suite = ET.SubElement(root, "testsuite", name=_xml(host), hostname=_xml(host), timestamp=stamp)
        props = ET.SubElement(suite, "properties")
        for key in ("role", "verdict", "severity", "address", "skip_reason"):
            if entry[key] is not None:
                ET.SubElement(props, "property", name=key, value=_xml(entry[key]))
        if entry["status"] == "skipped":
            case = ET.SubElement(suite, "testcase", classname=_xml(CLASS_PREFIX + host), name="node")
            ET.SubElement(case, "skipped", message=_xml(entry["skip_reason"] or "not re-checked"))
            counts = {"tests": 1, "failures": 0, "skipped": 1}
        else:
            for check in entry["checks"]:
                _junit_case(suite, host, check)
            statuses = [c["status"] for c in entry["checks"]]
            counts = {"tests": len(statuses), "failures": statuses.count("fail"), "skipped": statuses.count("skip")}
        for key, count in counts.items():
            suite.set(key, str(count))
            totals[key] += count
        suite.set("errors", "0")
    for key, count in totals.items():
        root.set(key, str(count))
    root.set("errors", "0")
    if hasattr(ET, "indent"):  # Python 3.9+ (this renders on the controller)
        ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def render_healthy_hosts(report):
    return "".join(host + "\n" for host in report["healthy"])


def _fleet_lines(report):
    """One line per fingerprint field the fleet disagrees on: each value with its nodes."""
    lines = []
    for field, info in report["fleet"]["fields"].items():
        known = [v for v in info["values"] if v["value"] is not None]
        if len(known) < 2:
            continue
        parts = []
        for value in known:
            if value["count"] > 3:
                parts.append("%s on %d nodes" % (value["value"], value["count"]))
            else:
                parts.append("%s on %s" % (value["value"], ", ".join(value["hosts"])))
        lines.append(_one_line("fleet %s: %s" % (field, "; ".join(parts))))
    return lines


def render_summary(report):
    """Fixed-width table lines for the play output, the fleet's disagreements, then the message."""
    rows = [("HOST", "ROLE", "VERDICT", "SEVERITY", "HEALTHY", "REASONS")]
    for entry in report["nodes"]:
        cells = (entry["host"], entry["role"], entry["verdict"], entry["severity"] or "-")
        cells += ("yes" if entry["healthy"] else "no",)
        rows.append(tuple(_one_line(c) for c in cells) + (_one_line("; ".join(_node_reasons(entry))),))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = []
    for row in rows:
        lines.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:5])) + "  " + row[5])
    lines = [line.rstrip() for line in lines]
    return lines + _fleet_lines(report) + [_one_line(report["message"])]


def prom_label(value):
    """A Prometheus label value, escaped for the text exposition format."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _prom_number(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _is_number(value):
    return isinstance(value, (int, float))


METRICS = (
    (
        "raygate_health_breaker_tripped",
        "1 when the raygate health gate's circuit breaker tripped on this run (nobody was left out), else 0.",
    ),
    (
        "raygate_health_check_severity",
        "Severity of a failing or warning raygate health check: 3 do-not-allocate, 2 degraded, 1 info;"
        " the action label is the recommended remedy.",
    ),
    (
        "raygate_health_check_status",
        "Result of one raygate health check: 0 pass, 1 warn, 2 fail, -1 skip (not measured).",
    ),
    (
        "raygate_health_check_value",
        "Numeric value one raygate health check measured (unit as in the check's detail); absent when not numeric.",
    ),
    ("raygate_health_checked_at_seconds", "Unix time of the raygate health gate run that checked this node."),
    (
        "raygate_health_fingerprint_info",
        "Versions this node reported to the raygate health gate (one label per field it could read); always 1.",
    ),
    ("raygate_health_node_healthy", "1 when this node passed the raygate health gate, else 0."),
    (
        "raygate_health_node_severity",
        "Worst severity of this node's failing or warning raygate health checks: 3 do-not-allocate, 2 degraded,"
        " 1 info, 0 none.",
    ),
    ("raygate_health_valid_until_seconds", "Unix time after which this node's raygate health result is stale."),
)


def _sample(name, labels, value):
    inner = ",".join('%s="%s"' % (k, prom_label(v)) for k, v in sorted(labels.items()))
    return "%s{%s} %s" % (name, inner, _prom_number(value))


def render_textfile(report, host):
    """Prometheus textfile (node_exporter textfile collector) for one checked node."""
    entry = [e for e in report["nodes"] if e["host"] == host][0]
    samples = {name: [] for name, help_text in METRICS}
    samples["raygate_health_node_healthy"].append(
        _sample("raygate_health_node_healthy", {"host": host, "role": entry["role"]}, int(entry["healthy"]))
    )
    samples["raygate_health_checked_at_seconds"].append(
        _sample("raygate_health_checked_at_seconds", {"host": host}, report["checked_at_epoch"])
    )
    samples["raygate_health_valid_until_seconds"].append(
        _sample("raygate_health_valid_until_seconds", {"host": host}, report["valid_until_epoch"])
    )
    samples["raygate_health_breaker_tripped"].append(
        _sample("raygate_health_breaker_tripped", {"host": host}, int(report["breaker_tripped"]))
    )
    samples["raygate_health_node_severity"].append(
        _sample("raygate_health_node_severity", {"host": host}, severity_rank(entry["severity"]))
    )
    if entry.get("fingerprint"):
        labels = {"host": host}
        for field in FINGERPRINT_FIELDS:
            if fingerprint_text(entry["fingerprint"][field]) is not None:
                labels[field] = fingerprint_text(entry["fingerprint"][field])
        samples["raygate_health_fingerprint_info"].append(_sample("raygate_health_fingerprint_info", labels, 1))
    for check in entry["checks"]:
        labels = {"host": host, "check": check["name"], "source": check["source"]}
        samples["raygate_health_check_status"].append(
            _sample("raygate_health_check_status", labels, STATUS_CODES[check["status"]])
        )
        if check.get("severity"):
            severity = dict(labels, severity=check["severity"], action=check.get("action", ""))
            rank = severity_rank(check["severity"])
            samples["raygate_health_check_severity"].append(_sample("raygate_health_check_severity", severity, rank))
        if _is_number(check["value"]):
            samples["raygate_health_check_value"].append(_sample("raygate_health_check_value", labels, check["value"]))
    lines = []
    for name, help_text in METRICS:
        if not samples[name]:
            continue
        lines += ["# HELP %s %s" % (name, help_text), "# TYPE %s gauge" % name]
        lines += sorted(samples[name])
    return "\n".join(lines) + "\n"


def render_textfiles(report):
    """``{host: textfile}`` for every checked node; skipped nodes keep the textfile of their last check."""
    return {e["host"]: render_textfile(report, e["host"]) for e in report["nodes"] if e["status"] == "checked"}


def render_files(report):
    """``{key: (file name, content)}`` for the files written into the report directory."""
    content = {
        "json": render_json(report),
        "markdown": render_markdown(report),
        "junit": render_junit(report),
        "healthy_hosts": render_healthy_hosts(report),
    }
    return {key: (name, content[key]) for key, name in FILES}
