# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""report.md: the health report (decision.py) as Markdown."""

from __future__ import annotations

import re

from ansible_collections.raygate.cluster.plugins.plugin_utils import fleet
from ansible_collections.raygate.cluster.plugins.plugin_utils.report.text import (
    NEWLINES,
    node_reasons,
    value_text,
    visible,
)

_MD_SPECIAL = re.compile(r"([\\`*\[\]<>|&#])")
_MD_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def md_escape(text):
    """``text`` as one Markdown table cell: table and inline syntax escaped, newlines as <br>."""
    text = _MD_SPECIAL.sub(r"\\\1", visible(text))
    text = _MD_UNDERSCORE.sub(r"\\_", text)
    return NEWLINES.sub("<br>", text)


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
        cells = [value_text(test["round"]), test["phase"], " + ".join(test["hosts"]), value_text(test["verdict"])]
        lines.append(_md_row(cells + [value_text(test["busbw"]), value_text(test["transport"])]))
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
        % (md_escape(report["head"] or "none"), report["min_healthy"], str(report["fail_on_warn"]).lower()),
    ]
    if report.get("slices"):
        merged = ", ".join("%s (%d nodes)" % (md_escape(x["run_id"]), x["nodes"]) for x in report["slices"])
        lines.append("- merged from %d slices: %s" % (len(report["slices"]), merged))
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
        lines.append(_md_row(cells + ["; ".join(node_reasons(entry))]))
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
            cells += [
                value_text(check["value"]),
                value_text(check["threshold"]),
                check["detail"],
                check.get("action", ""),
            ]
            lines.append(_md_row(cells))
    return "\n".join(lines) + "\n"
