# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Prometheus textfiles (node_exporter's textfile collector): the health report (decision.py), one per node."""

from __future__ import annotations

from ansible_collections.raygate.cluster.plugins.module_utils.gate.fingerprint import FIELDS as FINGERPRINT_FIELDS
from ansible_collections.raygate.cluster.plugins.module_utils.gate.fingerprint import text as fingerprint_text
from ansible_collections.raygate.cluster.plugins.module_utils.gate.textfile import render
from ansible_collections.raygate.cluster.plugins.module_utils.gate.textfile import sample as _sample
from ansible_collections.raygate.cluster.plugins.plugin_utils.remedies import severity_rank

# Prometheus encoding of a check status (documented in the metric's HELP).
STATUS_CODES = {"pass": 0, "warn": 1, "fail": 2, "skip": -1}


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
    return render(METRICS, samples)


def render_textfiles(report):
    """``{host: textfile}`` for every checked node; skipped nodes keep the textfile of their last check."""
    return {e["host"]: render_textfile(report, e["host"]) for e in report["nodes"] if e["status"] == "checked"}
