# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The gate's circuit breaker: when too many nodes fail at once, suspect a common cause, evict nobody.

After NVSentinel's fault-quarantine breaker, which stops cordoning once more than a set share of
the cluster's nodes were cordoned within a time window (50 % in 5 minutes): a health check that
fails on most of a fleet in one run more likely found a bad roll-out (driver, firmware), a
fabric-wide outage or a check that is wrong for this fleet than that many broken nodes. Taking
them all out would turn that into an outage of its own.

One gate run is the window. The share is of the nodes this run checked: a node that did not
answer or whose steps failed counts as checked and failed; a running member that was not
re-checked (status skipped) does not count. A node counts as failed when the gate would leave
it out (a failing check, or a warning with fail_on_warn). Small fleets: with fewer than
``min_nodes`` checked nodes the breaker does not judge, since one or two failures say nothing
about a common cause (one bad node of two is 50 %). Pure functions (stdlib only).
"""

from __future__ import annotations

from ansible_collections.raygate.cluster.plugins.module_utils.checks import reason
from ansible_collections.raygate.cluster.plugins.module_utils.gate.fingerprint import FIELDS, text

# The source of the breaker's defaults: the health_report action's argument spec takes them from here;
# the module's DOCUMENTATION and the role's defaults state them for their readers, and
# tests/unit/test_one_source.py fails when those drift from these.
DEFAULT_THRESHOLD = 50
DEFAULT_MIN_NODES = 3
OFF = 0
GENERAL_CAUSES = (
    "a bad driver or firmware roll-out, a fabric-wide outage (switch, subnet manager, RDMA stack), "
    "or a check whose threshold or tool is wrong for this fleet"
)
# Check names grouped by what their failing everywhere at once suggests.
_LEFT = ("reachable", "run")
_FABRIC = ("fabric_ports", "gpudirect_rdma", "nccl_transport")
_DRIVER = ("driver_version", "cuda_version", "fabric_manager", "gpu_count", "persistence_mode")


def check_settings(threshold, min_nodes):
    """Raise ValueError unless ``threshold`` is 0..100 and ``min_nodes`` at least 1."""
    for name, value, low, high in (("breaker_threshold", threshold, 0, 100), ("breaker_min_nodes", min_nodes, 1, None)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
            bounds = "%d..%d" % (low, high) if high is not None else "at least %d" % low
            raise ValueError("%s must be an integer %s, not %r" % (name, bounds, value))


def _hint(name):
    if name in _LEFT:
        return "they left the run (no answer, or a step failed): a network, DNS or SSH outage, or a broken step"
    if name in _FABRIC or name.startswith("nccl_pair"):
        return "a fabric-wide outage (switch, subnet manager, RDMA stack) or a changed NCCL environment"
    if name in _DRIVER:
        return "a bad driver roll-out (driver, fabric manager, or driver and firmware out of step)"
    if name == "fleet_drift":
        return "a roll-out that reached part of the fleet: the majority may be the wrong version"
    return "its threshold or tool may be wrong for this fleet, or something they share broke it"


def _shared_checks(failed):
    """Check names that failed (or left the node out) on every failed node, in first-node order."""

    def failing(entry):
        # A warning leaves a node out only with fail_on_warn, and then it is among its reasons.
        return [c["name"] for c in entry["checks"] if c["status"] == "fail" or reason(c) in entry["reasons"]]

    names = failing(failed[0])
    for entry in failed[1:]:
        names = [n for n in names if n in failing(entry)]
    return names


def _version_causes(failed, passed, fingerprints):
    """Fields on which every failed node shares values that no passing node has."""
    causes = []
    for field in FIELDS:
        bad = [text((fingerprints.get(e["host"]) or {}).get(field)) for e in failed]
        good = set(text((fingerprints.get(e["host"]) or {}).get(field)) for e in passed)
        good.discard(None)
        if not good or None in bad or set(bad) & good:
            continue
        causes.append(
            "every failing node runs %s %s, which no passing node does: a roll-out of it gone wrong?"
            % (field, " / ".join(sorted(set(bad))))
        )
    return causes


def likely_causes(failed, passed, fingerprints=None):
    """Plain-language guesses at what the failed nodes share, most specific first, the general ones last."""
    causes = []
    for name in _shared_checks(failed):
        causes.append("all %d failing nodes fail %s: %s" % (len(failed), name, _hint(name)))
    causes += _version_causes(failed, passed, fingerprints or {})
    causes.append(GENERAL_CAUSES)
    return causes


def judge(entries, threshold=DEFAULT_THRESHOLD, min_nodes=DEFAULT_MIN_NODES, fingerprints=None):
    """The breaker's state for judged report entries (each with host, status, healthy, checks).

    Returns ``{tripped, threshold, min_nodes, checked, failed, share, failed_hosts, causes, detail}``:
    ``share`` is the percentage of checked nodes that failed; ``tripped`` when the breaker is on
    (``threshold`` above 0), at least ``min_nodes`` were checked and ``share`` is more than
    ``threshold``. ``fingerprints`` ({host: fingerprint}) lets the causes name a version.
    """
    check_settings(threshold, min_nodes)
    counted = [e for e in entries if e["status"] != "skipped"]
    failed = [e for e in counted if not e["healthy"]]
    passed = [e for e in counted if e["healthy"]]
    share = 100.0 * len(failed) / len(counted) if counted else 0.0
    counts = "%d of %d checked nodes failed (%s%%)" % (len(failed), len(counted), _percent(share))
    if threshold == OFF:
        tripped, detail = False, "%s; the breaker is off (raygate_health_breaker_threshold 0)" % counts
    elif len(counted) < min_nodes:
        tripped = False
        detail = "%s; not judged: fewer than raygate_health_breaker_min_nodes (%d) were checked" % (counts, min_nodes)
    else:
        tripped = share > threshold
        more = "more" if tripped else "not more"
        detail = "%s, %s than raygate_health_breaker_threshold %d%%" % (counts, more, threshold)
    return {
        "tripped": tripped,
        "threshold": threshold,
        "min_nodes": min_nodes,
        "checked": len(counted),
        "failed": len(failed),
        "share": round(share, 1),
        "failed_hosts": [e["host"] for e in failed],
        "causes": likely_causes(failed, passed, fingerprints) if tripped else [],
        "detail": detail,
    }


def _percent(share):
    return ("%.1f" % share).rstrip("0").rstrip(".")


def message(state):
    """The gate's one-line verdict when the breaker tripped."""
    return (
        "health gate stopped: circuit breaker tripped: %s; nobody was left out or evicted. Likely: %s. Fix the"
        " cause and run again, or raise raygate_health_breaker_threshold (0 turns the breaker off) to leave them out"
        % (state["detail"], "; ".join(state["causes"]))
    )
