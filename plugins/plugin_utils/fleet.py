# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The fleet view: which versions the nodes run, and which nodes drift from the rest.

Input: each checked node's ``fingerprint`` (see ``fingerprint.FIELDS``) as gpu_health returned it.
``fleet_table`` counts, per field, each distinct value and the hosts that have it. A node drifts
on a field when it differs from a pinned expectation (``expect``), or, where nothing is pinned,
from the fleet's majority: a value held by more than half of the nodes that reported the field.
A tie or a mere plurality is no majority, so a 2-node fleet that disagrees, or a fleet split
evenly, blames nobody: the table shows the split and says to pin the intended value. A field a
node could not read (null) is shown, never judged. Pure functions (stdlib only).
"""

from __future__ import annotations

from ansible_collections.raygate.cluster.plugins.module_utils.checks import result
from ansible_collections.raygate.cluster.plugins.module_utils.gate.fingerprint import FIELDS, text

MODES = ("warn", "fail", "off")
CHECK = "fleet_drift"
# What to do about a node that differs on a field; %s is the expected value.
REMEDIES = {
    "gpu_model": "the node has other GPUs than %s: give it its own inventory group, or fix the inventory",
    "gpu_count": "the fleet's nodes have %s GPUs: find the missing GPU, or give the node its own group",
    "driver": "install NVIDIA driver %s (the fleet's) and reboot",
    "cuda": "install the driver that brings CUDA %s",
    "vbios": "flash VBIOS %s on the GPUs that differ (the vendor's firmware bundle)",
    "pcie_link": "reseat the GPUs or risers whose link differs from %s",
    "hca_firmware": "update the HCA firmware to %s (mlxfwmanager, or the vendor's bundle)",
    "rdma_stack": "install %s, the fleet's RDMA stack",
    "nccl": "install NCCL %s, the fleet's",
    "kernel": "boot kernel %s, the fleet's",
}


def _matches(actual, wanted):
    """``wanted`` is the exact value or a prefix ending at a dot ("550" matches "550.90.07")."""
    actual, wanted = str(actual).strip(), str(wanted).strip().rstrip(".")
    return actual == wanted or actual.startswith(wanted + ".")


def _items(value):
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value)]


def check_expect(expect):
    """``expect`` ({field: value or list of values}) as plain strings; ValueError on an unknown field."""
    out = {}
    for field, wanted in (expect or {}).items():
        if field not in FIELDS:
            raise ValueError("fleet_expect: %r is not a fingerprint field (%s)" % (field, ", ".join(FIELDS)))
        values = [v for v in _items(wanted) if v.strip()] if wanted is not None else []
        if not values:
            raise ValueError("fleet_expect.%s: give the expected value" % field)
        out[field] = values
    return out


def pinned_match(value, wanted):
    """Whether every value of a node's field (a set field has several) is one of ``wanted``."""
    return all(any(_matches(v, w) for w in wanted) for v in _items(value))


def fleet_table(fingerprints, expect=None):
    """The fleet's versions: ``{nodes, fields: {field: {values, majority, expected, split}}}``.

    ``fingerprints``: ``[(host, fingerprint)]`` of the nodes that reported one, in report order.
    ``values``: ``[{value, count, hosts}]``, most common first, null (not read) last; ``majority``:
    the value more than half of the reporting nodes share, else null; ``expected``: the pinned
    values (``expect``), else null; ``split``: several values and neither a pin nor a majority.
    """
    expect = check_expect(expect)
    fields = {}
    for field in FIELDS:
        groups = {}
        for host, node_fp in fingerprints:
            groups.setdefault(text(node_fp.get(field)), []).append(host)
        known = dict((v, h) for v, h in groups.items() if v is not None)
        reporting = sum(len(h) for h in known.values())
        values = [{"value": v, "count": len(h), "hosts": h} for v, h in known.items()]
        values.sort(key=lambda e: (-e["count"], e["value"]))
        if None in groups:
            values.append({"value": None, "count": len(groups[None]), "hosts": groups[None]})
        majority = [v["value"] for v in values if v["value"] is not None and 2 * v["count"] > reporting]
        fields[field] = {
            "values": values,
            "majority": majority[0] if majority else None,
            "expected": expect.get(field),
            "split": len(known) > 1 and not majority and field not in expect,
        }
    return {"nodes": len(fingerprints), "fields": fields}


def node_drift(node_fp, table):
    """How one node's fingerprint differs: ``[{field, value, expected, reference, count, reporting}]``.

    ``reference`` is ``pinned`` or ``majority``; ``count`` of ``reporting`` nodes hold the majority.
    """
    out = []
    for field in FIELDS:
        info = table["fields"][field]
        value = node_fp.get(field)
        if text(value) is None:
            continue
        reporting = sum(v["count"] for v in info["values"] if v["value"] is not None)
        if info["expected"] is not None:
            if not pinned_match(value, info["expected"]):
                expected = ", ".join(info["expected"])
                out.append({"field": field, "value": text(value), "expected": expected, "reference": "pinned"})
        elif info["majority"] is not None and text(value) != info["majority"]:
            count = [v["count"] for v in info["values"] if v["value"] == info["majority"]][0]
            out.append(
                {
                    "field": field,
                    "value": text(value),
                    "expected": info["majority"],
                    "reference": "majority",
                    "count": count,
                    "reporting": reporting,
                }
            )
    return out


def _describe(item):
    if item["reference"] == "pinned":
        return "%s %s, expected %s (pinned)" % (item["field"], item["value"], item["expected"])
    return "%s %s, the fleet runs %s (%d of %d nodes)" % (
        item["field"],
        item["value"],
        item["expected"],
        item["count"],
        item["reporting"],
    )


def drift_check(node_fp, table, mode="warn"):
    """The ``fleet_drift`` check of one node, or None when ``mode`` is off.

    Fails or warns (``mode``) when the node drifts on any field; passes otherwise, naming the
    fields left unjudged because the fleet is split on them.
    """
    if mode not in MODES:
        raise ValueError("fleet_drift must be one of %s, not %r" % (", ".join(MODES), mode))
    if mode == "off":
        return None
    drift = node_drift(node_fp, table)
    if drift:
        value = dict((d["field"], d["value"]) for d in drift)
        expected = dict((d["field"], d["expected"]) for d in drift)
        action = "; ".join(REMEDIES[d["field"]] % d["expected"] for d in drift)
        action += " (or pin the intended versions with raygate_health_fleet_expect)"
        return result(CHECK, mode, "; ".join(_describe(d) for d in drift), value, expected, action=action)
    judged = [f for f in FIELDS if text(node_fp.get(f)) is not None]
    split = [f for f in judged if table["fields"][f]["split"]]
    detail = "same versions as the fleet (%d fields compared)" % (len(judged) - len(split))
    if split:
        detail += "; no majority to compare with for %s: pin it with raygate_health_fleet_expect" % ", ".join(split)
    return result(CHECK, "pass", detail, None, None)
