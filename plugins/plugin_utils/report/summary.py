# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The play summary: the health report (decision.py) as fixed-width lines for the play output."""

from __future__ import annotations

from ansible_collections.raygate.cluster.plugins.plugin_utils.report.text import node_reasons, one_line


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
        lines.append(one_line("fleet %s: %s" % (field, "; ".join(parts))))
    return lines


def render_summary(report):
    """Fixed-width table lines for the play output, the fleet's disagreements, then the message."""
    rows = [("HOST", "ROLE", "VERDICT", "SEVERITY", "HEALTHY", "REASONS")]
    for entry in report["nodes"]:
        cells = (entry["host"], entry["role"], entry["verdict"], entry["severity"] or "-")
        cells += ("yes" if entry["healthy"] else "no",)
        rows.append(tuple(one_line(c) for c in cells) + (one_line("; ".join(node_reasons(entry))),))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = []
    for row in rows:
        lines.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:5])) + "  " + row[5])
    lines = [line.rstrip() for line in lines]
    return lines + _fleet_lines(report) + [one_line(report["message"])]
