# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""One fleet report from the reports of several health.yml runs over slices of the fleet.

Past one controller's reach a fleet is gated in slices (``--limit``, or AWX job slicing), each
with a known-good pair partner. Each slice's report judges drift and the breaker over that slice
only: a slice of two nodes that disagree has no majority, a slice with one bad rack may trip its
breaker alone. The merge takes every slice's node results as they were measured (the checks of
gpu_health, nccl_test and nccl_pairs), drops what each report judged itself (its fleet_drift,
reachable, run and checks checks, which build_report makes again), and hands them to
``decision.build_report`` as one fleet, so drift and the breaker are judged over the whole fleet.

A node in several slices (the shared pair partner) is kept once: its worst result (fail, then
warn, then pass, then skipped); between equals, the later slice's.
"""

from __future__ import annotations

import json
import os

from ansible_collections.raygate.cluster.plugins.plugin_utils.report.decision import LEFT_CHECKS, SOURCES

# Worst first: the result a node keeps when slices disagree about it.
RANK = {"fail": 3, "warn": 2, "pass": 1, "skipped": 0}


def slice_path(path):
    """The report.json of a slice: ``path`` itself, or the file of that name in the directory."""
    return os.path.join(path, "report.json") if os.path.isdir(path) else path


def read_slice(path):
    """A slice's report (report.json's content); ValueError naming the file when it is not one."""
    where = slice_path(path)
    try:
        with open(where, encoding="utf-8") as fh:
            doc = json.load(fh)
    except OSError as exc:
        raise ValueError("cannot read the slice report %s: %s" % (where, exc.strerror or exc)) from None
    except ValueError as exc:
        raise ValueError("the slice report %s is not JSON: %s" % (where, exc)) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list) or not doc.get("run_id"):
        raise ValueError("%s is not a health report (no run_id and nodes)" % where)
    doc["_path"] = where
    return doc


def node_input(node):
    """A report node as build_report's input again: what was measured, not what was judged."""
    status = node.get("status") or "checked"
    checks = [c for c in node.get("checks") or [] if c.get("source") in SOURCES]
    entry = {
        "host": node["host"],
        "role": node.get("role") or "worker",
        "address": node.get("address"),
        "status": status,
        "checks": checks,
    }
    if node.get("skip_reason"):
        entry["skip_reason"] = node["skip_reason"]
    if node.get("fingerprint"):
        entry["fingerprint"] = node["fingerprint"]
    if status in LEFT_CHECKS:
        made = [c for c in node.get("checks") or [] if c.get("name") == LEFT_CHECKS[status]]
        entry["error"] = made[0].get("detail") if made else None
    return entry


def _pairs(docs):
    """The slices' pair tests in one list, each marked with its slice's run id; None when none ran."""
    ran = [d for d in docs if isinstance(d.get("pairs"), dict)]
    if not ran:
        return None
    tests = [dict(t, slice=d["run_id"]) for d in ran for t in d["pairs"].get("tests") or []]
    total = {
        key: sum(int(d["pairs"].get(key) or 0) for d in ran) for key in ("planned_rounds", "rounds", "retest_phases")
    }
    return dict(total, tests=tests)


def merge(paths):
    """``(nodes, head, pairs, slices)`` for build_report from the slice reports at ``paths``."""
    if not paths:
        raise ValueError("merge needs at least one slice report")
    docs = [read_slice(p) for p in paths]
    heads = sorted({d.get("head") for d in docs if d.get("head")})
    if len(heads) > 1:
        raise ValueError("the slices name different heads (%s): merge the slices of one fleet" % ", ".join(heads))
    kept, order = {}, []
    for doc in docs:
        for node in doc["nodes"]:
            host = node.get("host")
            if not host:
                raise ValueError("%s has a node without a host" % doc["_path"])
            rank = RANK.get(node.get("verdict"), RANK["fail"])
            if host not in kept:
                order.append(host)
            elif kept[host][0] > rank:
                continue
            kept[host] = (rank, node_input(node))
    slices = [
        {"run_id": d["run_id"], "report": d["_path"], "checked_at": d.get("checked_at"), "nodes": len(d["nodes"])}
        for d in docs
    ]
    return [kept[h][1] for h in order], (heads[0] if heads else None), _pairs(docs), slices
