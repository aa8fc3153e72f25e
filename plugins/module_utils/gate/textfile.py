# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Prometheus's text exposition format, as node_exporter's textfile collector reads it: one sample,
and a whole file of gauges. The health report's textfiles (written on the controller) and the node
watcher's (gate/watch.py, on the node) are both written with it."""

from __future__ import annotations

import math


def prom_label(value):
    """A Prometheus label value, escaped for the text exposition format."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def prom_number(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def sample(name, labels, value):
    inner = ",".join('%s="%s"' % (k, prom_label(v)) for k, v in sorted(labels.items()))
    return "%s{%s} %s" % (name, inner, prom_number(value))


def render(metrics, samples, sort=True):
    """The file: for each ``(name, help)`` of ``metrics`` that has samples, its HELP and TYPE (gauge)
    lines, then its samples (sorted, unless ``sort`` is false)."""
    lines = []
    for name, help_text in metrics:
        if samples.get(name):
            lines += ["# HELP %s %s" % (name, help_text), "# TYPE %s gauge" % name]
            lines += sorted(samples[name]) if sort else samples[name]
    return "\n".join(lines) + "\n"
