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

from ansible_collections.raygate.cluster.plugins.module_utils.checks import SEVERITIES, STATUSES, reason, verdict

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
    if raw.get("severity"):
        if raw["severity"] not in SEVERITIES:
            raise ValueError(
                "node %s: check %s has severity %r, not one of %s" % (host, raw["name"], raw["severity"], SEVERITIES)
            )
        out["severity"] = raw["severity"]
    if raw.get("action"):
        out["action"] = str(raw["action"])
    return out


def _made_check(name, detail):
    """A failing check the report makes itself (source health_report, not one of SOURCES)."""
    return {"name": name, "status": "fail", "detail": detail, "value": None, "threshold": None,
            "source": "health_report", "severity": "do-not-allocate"}  # fmt: skip


def normalize_nodes(nodes):
    """Validate the gate's input and return plain copies of the nodes, in the order given.

    Each node: ``{host, role: head|worker, address, status, skip_reason, error, checks}``, status
    one of checked, skipped, unreachable (it did not answer), failed (a step failed on it).
    A checked node without any check result gets one failing ``checks`` check (source
    ``health_report``): a node whose checks did not run must not pass the gate. An unreachable
    or failed node gets one failing ``reachable`` or ``run`` check whose detail is its error.
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
                "checks": checks,
            }
        )
    return out


# ---- the decision -----------------------------------------------------------------------


def judge_node(node, fail_on_warn=False):
    """``{verdict, healthy, reasons, warn_reasons}`` for one normalized node.

    verdict: ``pass|warn|fail`` from its checks, or ``skipped`` (a running member that was
    not re-checked: it counts as healthy). reasons: the failing checks as ``name: detail``,
    plus the warning ones when ``fail_on_warn``; warn_reasons: the warning checks.
    """
    warn_reasons = [reason(c) for c in node["checks"] if c["status"] == "warn"]
    if node["status"] == "skipped":
        return {"verdict": "skipped", "healthy": True, "reasons": [], "warn_reasons": []}
    node_verdict = verdict(node["checks"])
    reasons = [reason(c) for c in node["checks"] if c["status"] == "fail"]
    if fail_on_warn:
        reasons += warn_reasons
    healthy = node_verdict == "pass" or (node_verdict == "warn" and not fail_on_warn)
    return {"verdict": node_verdict, "healthy": healthy, "reasons": reasons, "warn_reasons": warn_reasons}


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


def build_report(nodes, head=None, min_healthy=1, fail_on_warn=False, valid_for=86400, checked_at=0, run_id=None):
    """The whole report (the content of report.json) for the gate's input.

    ``head`` defaults to the node with role head; a head missing from ``nodes`` is unhealthy.
    ``checked_at`` is a Unix time in seconds; ``run_id`` defaults to ``default_run_id(checked_at)``.
    Raises ValueError on bad input.
    Returned keys: run_id, checked_at, valid_until (ISO 8601 UTC), checked_at_epoch,
    valid_until_epoch, head, min_healthy, valid_for, fail_on_warn, ok, head_healthy, enough,
    message, healthy (hosts, input order), unhealthy {host: reasons}, warned {host:
    warn_reasons}, thresholds {check: [distinct thresholds]}, nodes (each node with verdict,
    healthy, reasons, warn_reasons and its checks).
    """
    if isinstance(min_healthy, bool) or not isinstance(min_healthy, int) or min_healthy < 1:
        raise ValueError("min_healthy must be an integer >= 1, not %r" % (min_healthy,))
    if isinstance(valid_for, bool) or not isinstance(valid_for, int) or valid_for < 1:
        raise ValueError("valid_for must be a number of seconds >= 1, not %r" % (valid_for,))
    checked_at = int(checked_at)
    run_id = check_run_id(run_id if run_id else default_run_id(checked_at))
    entries = []
    for node in normalize_nodes(nodes):
        entry = dict(node)
        entry.update(judge_node(node, fail_on_warn))
        entries.append(entry)
    head = _head_of(entries, head)
    # A head missing from the nodes left the play before the gate: unhealthy, not a bad argument.
    head_entry = ([e for e in entries if e["host"] == head] or [None])[0]
    head_healthy = bool(head_entry and head_entry["healthy"])
    healthy = [e["host"] for e in entries if e["healthy"]]
    unhealthy = {e["host"]: e["reasons"] for e in entries if not e["healthy"]}
    warned = {e["host"]: e["warn_reasons"] for e in entries if e["warn_reasons"]}
    thresholds = {}
    for entry in entries:
        for check in entry["checks"]:
            seen = thresholds.setdefault(check["name"], [])
            if check["threshold"] is not None and check["threshold"] not in seen:
                seen.append(check["threshold"])
    valid_until = checked_at + valid_for
    enough = len(healthy) >= min_healthy
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
        "ok": head_healthy and enough,
        "head_healthy": head_healthy,
        "enough": enough,
        "message": _message(head, head_entry, healthy, len(entries), min_healthy, list(unhealthy)),
        "healthy": healthy,
        "unhealthy": unhealthy,
        "warned": warned,
        "thresholds": {k: v for k, v in sorted(thresholds.items()) if v},
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


def render_markdown(report):
    """report.md: the decision, a summary table (host, role, verdict, healthy, reasons) and one table per node."""
    lines = [
        "# raygate health report %s" % md_escape(report["run_id"]),
        "",
        "- result: **%s**" % ("passed" if report["ok"] else "FAILED"),
        "- %s" % md_escape(report["message"]),
        "- checked at %s, valid until %s" % (report["checked_at"], report["valid_until"]),
        "- head: %s; min_healthy: %d; fail_on_warn: %s"
        % (md_escape(report["head"]), report["min_healthy"], str(report["fail_on_warn"]).lower()),
        "",
        "## Nodes",
        "",
        "| host | role | verdict | healthy | reasons |",
        "| --- | --- | --- | --- | --- |",
    ]
    for entry in report["nodes"]:
        cells = [entry["host"], entry["role"], entry["verdict"], "yes" if entry["healthy"] else "no"]
        lines.append(_md_row(cells + ["; ".join(_node_reasons(entry))]))
    for entry in report["nodes"]:
        lines += ["", "## %s (%s, %s)" % (md_escape(entry["host"]), entry["role"], entry["verdict"]), ""]
        if entry["address"]:
            lines += ["address: %s" % md_escape(entry["address"]), ""]
        if entry["status"] == "skipped":
            lines += ["Not re-checked: %s" % md_escape(entry["skip_reason"] or "no reason given"), ""]
        if not entry["checks"]:
            continue
        lines += ["| check | status | value | threshold | detail |", "| --- | --- | --- | --- | --- |"]
        for check in entry["checks"]:
            cells = [check["name"], check["status"], _text(check["value"]), _text(check["threshold"])]
            lines.append(_md_row(cells + [check["detail"]]))
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
        for key in ("role", "verdict", "address", "skip_reason"):
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


def render_summary(report):
    """Fixed-width table lines for the play output, then the message."""
    rows = [("HOST", "ROLE", "VERDICT", "HEALTHY", "REASONS")]
    for entry in report["nodes"]:
        cells = (entry["host"], entry["role"], entry["verdict"], "yes" if entry["healthy"] else "no")
        rows.append(tuple(_one_line(c) for c in cells) + (_one_line("; ".join(_node_reasons(entry))),))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = []
    for row in rows:
        lines.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:4])) + "  " + row[4])
    lines = [line.rstrip() for line in lines]
    return lines + [_one_line(report["message"])]


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
        "raygate_health_check_status",
        "Result of one raygate health check: 0 pass, 1 warn, 2 fail, -1 skip (not measured).",
    ),
    (
        "raygate_health_check_value",
        "Numeric value one raygate health check measured (unit as in the check's detail); absent when not numeric.",
    ),
    ("raygate_health_checked_at_seconds", "Unix time of the raygate health gate run that checked this node."),
    ("raygate_health_node_healthy", "1 when the raygate health gate let this node into the cluster, else 0."),
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
    for check in entry["checks"]:
        labels = {"host": host, "check": check["name"], "source": check["source"]}
        samples["raygate_health_check_status"].append(
            _sample("raygate_health_check_status", labels, STATUS_CODES[check["status"]])
        )
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
