# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The health gate's decision, built from check results alone.

``build_report()`` turns the per-node check lists into one report dict (the content of
report.json). The renderings of that dict sit beside this file, one file each (markdown.py,
junit.py, prometheus.py, summary.py, json_file.py, healthy_hosts.py; files.py gathers the report
directory's files): each is a pure function of the dict, so they always agree.
"""

from __future__ import annotations

import datetime
import re

from ansible_collections.raygate.cluster.plugins.module_utils.checks import (
    DEFAULT_SEVERITY,
    SEVERITIES,
    STATUSES,
    reason,
    verdict,
)
from ansible_collections.raygate.cluster.plugins.module_utils.gate.fingerprint import FIELDS as FINGERPRINT_FIELDS
from ansible_collections.raygate.cluster.plugins.plugin_utils import breaker, fleet
from ansible_collections.raygate.cluster.plugins.plugin_utils.remedies import default_action, worst_severity

SOURCES = ("gpu_health", "nccl_test", "nccl_pairs")
ROLES = ("head", "worker")
NODE_STATUSES = ("checked", "skipped", "unreachable", "failed")
# A node that left the run before or during the gate: one failing check says why.
LEFT_CHECKS = {"unreachable": "reachable", "failed": "run"}
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


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
    """The head's host; None for a fleet without one (the health gate role alone over nodes that
    run no Ray): no head given and no node with role head."""
    heads = [n["host"] for n in nodes if n["role"] == "head"]
    if len(heads) > 1:
        raise ValueError("more than one node has role head: %s" % ", ".join(heads))
    if not head:
        return heads[0] if heads else None
    head = str(head)
    if heads and heads[0] != head:
        raise ValueError("head is %s but node %s has role head" % (head, heads[0]))
    return head


def _message(head, head_entry, healthy, total, min_healthy, unhealthy):
    counts = "%d healthy of %d, need %d" % (len(healthy), total, min_healthy)
    problems = []
    if head is None:
        pass
    elif head_entry is None:
        problems.append("head %s is not among the nodes (it failed or was unreachable before the gate)" % head)
    elif not head_entry["healthy"]:
        problems.append("head %s is unhealthy (%s)" % (head, "; ".join(head_entry["reasons"]) or "no reason given"))
    if len(healthy) < min_healthy:
        problems.append(counts)
    if problems:
        return "health gate failed: " + "; ".join(problems)
    message = "health gate passed: %s" % counts
    if head is not None:
        message += "; head %s is healthy" % head
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


def _check_settings(min_healthy, valid_for, fleet_drift, breaker_threshold, breaker_min_nodes, pairs):
    """Raise ValueError on a bad setting of ``build_report()`` (``normalize_nodes()`` checks the nodes)."""
    if pairs is not None and not isinstance(pairs, dict):
        raise ValueError("pairs must be a mapping or None, not %r" % (pairs,))
    if isinstance(min_healthy, bool) or not isinstance(min_healthy, int) or min_healthy < 1:
        raise ValueError("min_healthy must be an integer >= 1, not %r" % (min_healthy,))
    if isinstance(valid_for, bool) or not isinstance(valid_for, int) or valid_for < 1:
        raise ValueError("valid_for must be a number of seconds >= 1, not %r" % (valid_for,))
    if fleet_drift not in fleet.MODES:
        raise ValueError("fleet_drift must be one of %s, not %r" % (", ".join(fleet.MODES), fleet_drift))
    breaker.check_settings(breaker_threshold, breaker_min_nodes)


def _judged(nodes, fail_on_warn, fleet_drift, fleet_expect):
    """(entries, fleet view, {host: fingerprint}): the normalized nodes, drift checks added, each
    with its ``judge_node()`` verdict."""
    normalized = normalize_nodes(nodes)
    fleet_view, fingerprints = _fleet_view(normalized, fleet_expect, fleet_drift)
    _add_drift_checks(normalized, fleet_view, fleet_drift)
    entries = []
    for node in normalized:
        entry = dict(node)
        entry.update(judge_node(node, fail_on_warn))
        entries.append(entry)
    return entries, fleet_view, fingerprints


def _left_out(entries, head, head_entry, min_healthy, state):
    """(healthy hosts, {unhealthy host: reasons}, message) once the breaker's ``state`` is known."""
    if state["tripped"]:
        # Suspect a common cause: leave nobody out, and stop.
        healthy, unhealthy = [e["host"] for e in entries], {}
        message = breaker.message(state)
        if head is not None and not (head_entry and head_entry["healthy"]):
            # The run stops for the breaker; say too that the head itself failed.
            reasons = "; ".join(head_entry["reasons"]) if head_entry else "not in the report"
            message += "; head %s is unhealthy (%s)" % (head, reasons or "no reason given")
        return healthy, unhealthy, message
    healthy = [e["host"] for e in entries if e["healthy"]]
    unhealthy = {e["host"]: e["reasons"] for e in entries if not e["healthy"]}
    return healthy, unhealthy, _message(head, head_entry, healthy, len(entries), min_healthy, list(unhealthy))


def _thresholds(entries):
    """{check: [its distinct thresholds, in the order met]} for the checks that have any, by name."""
    thresholds = {}
    for entry in entries:
        for check in entry["checks"]:
            seen = thresholds.setdefault(check["name"], [])
            if check["threshold"] is not None and check["threshold"] not in seen:
                seen.append(check["threshold"])
    return {k: v for k, v in sorted(thresholds.items()) if v}


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

    ``head`` defaults to the node with role head; a head missing from ``nodes`` is unhealthy. With
    neither (a fleet without a head), ``head`` is None and ``head_healthy`` true.
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
    _check_settings(min_healthy, valid_for, fleet_drift, breaker_threshold, breaker_min_nodes, pairs)
    checked_at = int(checked_at)
    run_id = check_run_id(run_id if run_id else default_run_id(checked_at))
    entries, fleet_view, fingerprints = _judged(nodes, fail_on_warn, fleet_drift, fleet_expect)
    head = _head_of(entries, head)
    # A head missing from the nodes left the play before the gate: unhealthy, not a bad argument.
    head_entry = ([e for e in entries if e["host"] == head] or [None])[0]
    # No head (a fleet without Ray): nothing to judge it by, so it does not fail the gate.
    head_healthy = head is None or bool(head_entry and head_entry["healthy"])
    state = breaker.judge(entries, breaker_threshold, breaker_min_nodes, fingerprints)
    healthy, unhealthy, message = _left_out(entries, head, head_entry, min_healthy, state)
    valid_until = checked_at + valid_for
    enough = len([e for e in entries if e["healthy"]]) >= min_healthy
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
        "warned": {e["host"]: e["warn_reasons"] for e in entries if e["warn_reasons"]},
        "severities": {e["host"]: e["severity"] for e in entries if e["severity"]},
        "thresholds": _thresholds(entries),
        "breaker": state,
        "fleet": fleet_view,
        "pairs": _plain(pairs),
        "nodes": entries,
    }
