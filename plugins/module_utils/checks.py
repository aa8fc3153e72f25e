# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The check-result model every health check returns, and the node verdict built from it.

A check result is a plain dict ``{name, status, detail, value, threshold}`` so that one list of
them serves the play output, the JSON and Markdown reports, JUnit and Prometheus alike.
"""

from __future__ import annotations

STATUSES = ("pass", "warn", "fail", "skip")
# What a failing or warning check means for allocation, worst first (after imbue's CRITICAL /
# UNHEALTHY / OK tiers): do-not-allocate: never hand the node to a job; degraded: usable, but
# fix it soon; info: worth knowing, nothing to do.
SEVERITIES = ("do-not-allocate", "degraded", "info")
DEFAULT_SEVERITY = {"fail": "do-not-allocate", "warn": "degraded"}
OPS = (">=", "<=", "==")


def result(name, status, detail, value=None, threshold=None, severity=None, action=None):
    """One check result. ``status`` must be one of STATUSES (ValueError otherwise).

    ``severity`` (one of SEVERITIES) and ``action`` (the recommended remedy, plain text) are kept
    only on a ``fail`` or ``warn``; a failing result without one gets DEFAULT_SEVERITY, and the
    report fills a missing action from its per-check table.
    """
    if status not in STATUSES:
        raise ValueError("check %r: status %r is not one of %s" % (name, status, ", ".join(STATUSES)))
    out = {"name": name, "status": status, "detail": detail, "value": value, "threshold": threshold}
    if status in DEFAULT_SEVERITY:
        severity = severity or DEFAULT_SEVERITY[status]
        if severity not in SEVERITIES:
            raise ValueError("check %r: severity %r is not one of %s" % (name, severity, ", ".join(SEVERITIES)))
        out["severity"] = severity
        if action:
            out["action"] = action
    return out


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
