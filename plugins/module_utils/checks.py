# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The check-result model every health check returns, and the node verdict built from it.

A check result is a plain dict ``{name, status, detail, value, threshold}`` so that one list of
them serves the play output, the JSON and Markdown reports, JUnit and Prometheus alike.
"""

from __future__ import annotations

STATUSES = ("pass", "warn", "fail", "skip")
OPS = (">=", "<=", "==")


def result(name, status, detail, value=None, threshold=None):
    """One check result. ``status`` must be one of STATUSES (ValueError otherwise)."""
    if status not in STATUSES:
        raise ValueError("check %r: status %r is not one of %s" % (name, status, ", ".join(STATUSES)))
    return {"name": name, "status": status, "detail": detail, "value": value, "threshold": threshold}


def reason(check):
    """``name: detail`` of one result, as reports list why a node failed or warned."""
    return "%s: %s" % (check["name"], check["detail"]) if check["detail"] else check["name"]


def verdict(results):
    """``fail`` if any result failed, else ``warn`` if any warned, else ``pass`` (skips do not count)."""
    statuses = set(r["status"] for r in results)
    if "fail" in statuses:
        return "fail"
    if "warn" in statuses:
        return "warn"
    return "pass"


def _holds(value, threshold, op):
    if op == ">=":
        return value >= threshold
    if op == "<=":
        return value <= threshold
    return value == threshold


def compare(name, value, threshold, op, unit="", detail_ok=None, detail_bad=None, severity="fail"):
    """Compare a number with a threshold; ``severity`` (``fail`` or ``warn``) is the status when it does not hold.

    A ``None`` value (the tool said N/A) gives ``skip``: a missing reading is not a fault.
    """
    if op not in OPS:
        raise ValueError("check %r: op %r is not one of %s" % (name, op, ", ".join(OPS)))
    if severity not in ("fail", "warn"):
        raise ValueError("check %r: severity must be fail or warn, not %r" % (name, severity))
    suffix = (" " + unit) if unit else ""
    if value is None:
        return result(name, "skip", "%s: not reported" % name, None, threshold)
    if _holds(value, threshold, op):
        detail = detail_ok or "%s %s%s (%s %s%s)" % (name, value, suffix, op, threshold, suffix)
        return result(name, "pass", detail, value, threshold)
    detail = detail_bad or "%s %s%s, expected %s %s%s" % (name, value, suffix, op, threshold, suffix)
    return result(name, severity, detail, value, threshold)
