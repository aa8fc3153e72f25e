# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The versions Ray compares when a node joins a cluster.

Ray (``ray._private.utils.check_version_info``) refuses a node whose Ray version differs
from the cluster's, and whose Python differs down to the patch level unless
``RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL=minor`` (ray#44063: 3.10.12 vs 3.10.13 fails).
We make the same comparison before any start so the play stops with a table instead.
"""

from __future__ import annotations

import re

MATCH_LEVELS = ("patch", "minor")
RAY_VERSION_RE = re.compile(r"^\d+\.\d+\.\d+(?:(?:a|b|rc)\d+)?(?:\.post\d+)?(?:\.dev\d+)?$")


def python_key(python_version, level):
    """The part of a Python version Ray compares at ``level``."""
    parts = str(python_version).split(".")
    return ".".join(parts[:3] if level == "patch" else parts[:2])


def mismatches(infos, level="patch", reference=None):
    """Hosts whose (ray, python) differ from the reference host's.

    ``infos``: host -> {'ray': '2.60.0', 'python': '3.11.2'}. The reference is the given
    host (the head) or the first host in sorted order. Returns a list of rows
    ``{'host', 'ray', 'python', 'differs'}`` for every host, empty when all agree.
    When any info has an ``image`` (the container runtime's digest), every row has one and it is
    compared too: Ray would join nodes running different images, the cluster would not be uniform.
    """
    if level not in MATCH_LEVELS:
        raise ValueError("python_version_match_level must be one of %s, got %r" % (", ".join(MATCH_LEVELS), level))
    if not infos:
        return []
    ref_host = reference if reference in infos else sorted(infos)[0]
    ref = infos[ref_host]
    images = any("image" in info for info in infos.values())
    rows, bad = [], False
    for host in sorted(infos, key=lambda h: (h != ref_host, h)):
        info = infos[host]
        differs = []
        if info.get("ray") != ref.get("ray"):
            differs.append("ray")
        if python_key(info.get("python"), level) != python_key(ref.get("python"), level):
            differs.append("python")
        if images and info.get("image") != ref.get("image"):
            differs.append("image")
        bad = bad or bool(differs)
        row = {"host": host, "ray": info.get("ray"), "python": info.get("python"), "differs": differs}
        if images:
            row["image"] = info.get("image")
        rows.append(row)
    return rows if bad else []


def format_table(rows, level="patch"):
    """A fixed-width table of ``mismatches`` rows for the play output (an ``image`` column when they have one)."""
    columns = ["host", "ray", "python"] + (["image"] if any("image" in r for r in rows) else [])
    header = tuple(columns) + ("differs from %s" % rows[0]["host"] if rows else "",)
    body = [tuple(str(r.get(c)) for c in columns) + (", ".join(r["differs"]) or "-",) for r in rows]
    widths = [max(len(str(line[i])) for line in [header] + body) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(line, widths)).rstrip() for line in [header] + body]
    note = "Ray compares the Ray version exactly and Python down to the %s level." % level
    return "\n".join(lines + [note])
