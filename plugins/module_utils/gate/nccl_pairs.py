# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Which pairs of nodes to test with NCCL, and which node is to blame when a pair fails.

Pure functions (stdlib only, Python 3.8+):

``rounds(hosts)``  at most two rounds of disjoint pairs covering every node; with three or
                   more nodes every node gets two different partners where the count allows.
``isolate(tests, known_good=(), hosts=None)``  a verdict per node from pair results, and the
                   retests that would settle the nodes the results do not.

The model: a pair test fails when at least one of its two nodes is bad. So a node that
passed with anyone is good, and a node that failed with a good node is bad. A node whose
failures are all with nodes not proven good is unresolved: it is retested against a good
node. "Failed with two partners" is no proof on its own (a good node between two bad ones
fails twice), so it only orders the search when no pair passed at all.
"""

GOOD = "good"
BAD = "bad"
UNRESOLVED = "unresolved"
UNTESTED = "untested"


def rounds(hosts):
    """Disjoint pairs, in at most two rounds: ``[[(a, b), ...], [(c, d), ...]]``.

    Round 1 pairs neighbours (h0,h1), (h2,h3)...; round 2 shifts the ring by one,
    (h1,h2), (h3,h4)... and (h_last,h0) when the count is even, so each node meets a second,
    different partner. With an odd count the node left out of round 1 is paired in round 2
    (and h0, which then has no ring partner left, rests). Two nodes make one round.
    """
    hosts = list(hosts)
    if len(set(hosts)) != len(hosts):
        raise ValueError("hosts must be distinct")
    if len(hosts) < 2:
        raise ValueError("pairs need at least two hosts, got %d" % len(hosts))
    n = len(hosts)
    first = [(hosts[i], hosts[i + 1]) for i in range(0, n - 1, 2)]
    if n == 2:
        return [first]
    second = [(hosts[i], hosts[(i + 1) % n]) for i in range(1, n - 1 if n % 2 else n, 2)]
    return [first, second]


def _passed(test):
    return bool(test.get("passed"))


def _pair(test):
    a, b = test["hosts"]
    return a, b


def _index(tests):
    """host -> list of (test index, partner, passed)."""
    seen = {}
    for i, test in enumerate(tests):
        a, b = _pair(test)
        seen.setdefault(a, []).append((i, b, _passed(test)))
        seen.setdefault(b, []).append((i, a, _passed(test)))
    return seen


def _names(hosts):
    return ", ".join(hosts)


def _unique(items):
    seen = []
    for item in items:
        if item not in seen:
            seen.append(item)
    return seen


def _judge_node(host, history, good, known_good):
    """One node's verdict from its ``(test index, partner, passed)`` history."""
    passed = [entry for entry in history if entry[2]]
    failed = [entry for entry in history if not entry[2]]
    node = {"verdict": UNTESTED, "reason": "not tested", "partners": _unique(e[1] for e in history), "evidence": None}
    if passed:
        with_whom = _unique(e[1] for e in passed)
        reason = "passed with %s" % _names(with_whom)
        also = _unique(e[1] for e in failed if e[1] not in with_whom)
        if also:
            reason += "; failed with %s" % _names(also)
        node.update(verdict=GOOD, reason=reason, evidence=passed[0][0])
        return node
    if host in known_good:
        node.update(verdict=GOOD, reason="listed as known good", evidence=failed[0][0] if failed else None)
        return node
    # A partner the caller vouches for is the strongest evidence, so it comes first.
    convicting = [e for e in failed if e[1] in known_good] + [
        e for e in failed if e[1] in good and e[1] not in known_good
    ]
    if convicting:
        partner = convicting[0][1]
        why = "known good" if partner in known_good else "proven good"
        node.update(verdict=BAD, reason="failed with %s, which is %s" % (partner, why), evidence=convicting[0][0])
        return node
    if failed:
        node.update(
            verdict=UNRESOLVED,
            reason="failed with %s, none of them proven good" % _names(_unique(e[1] for e in failed)),
            evidence=failed[0][0],
        )
    return node


def _retest_pairs(unresolved, good_order):
    """Each unresolved node against a good node, spreading them over the good nodes."""
    return [(host, good_order[k % len(good_order)]) for k, host in enumerate(unresolved)]


def _discovery_pairs(candidates, history):
    """Disjoint pairs never tested together, the least-failed nodes first, to find one good node."""
    tested = {host: {entry[1] for entry in history.get(host, [])} for host in candidates}
    order = sorted(candidates, key=lambda h: (len(history.get(h, [])), candidates.index(h)))
    used = set()
    pairs = []
    for host in order:
        if host in used:
            continue
        for other in order:
            if other == host or other in used or other in tested[host]:
                continue
            pairs.append((host, other))
            used.update((host, other))
            break
    return pairs


def isolate(tests, known_good=(), hosts=None):
    """Verdicts from pair results, and the retests that would settle the rest.

    ``tests``: ``[{"hosts": [a, b], "passed": bool}, ...]`` in the order they ran (retests
    included). ``known_good``: nodes proven good elsewhere; they may be outside ``hosts`` and
    serve as retest partners. ``hosts``: the nodes to judge (default: every node in tests,
    less the known-good ones that are not in any test).

    Returns ``{"nodes": {host: {verdict, reason, partners, evidence}}, "retests": [(a, b)],
    "retest_kind": "retest"|"discovery"|None, "good": [...], "bad": [...], "unresolved": [...]}``.
    ``verdict`` is good, bad, unresolved or untested; ``evidence`` the index in ``tests`` of
    the test that decided (a passing one for good nodes, the one with a good partner for bad
    ones, the first failure otherwise). ``retests``: with a good node known, each unresolved
    node paired with one (``retest_kind`` "retest"); with none, disjoint pairs of nodes never
    tested together ("discovery"), to find a good node; empty when nothing more can be learnt.
    """
    known_good = list(known_good or [])
    history = _index(tests)
    if hosts is None:
        hosts = []
        for test in tests:
            for host in _pair(test):
                if host not in hosts:
                    hosts.append(host)
    hosts = list(hosts)
    good = set(known_good)
    for test in tests:
        if _passed(test):
            good.update(_pair(test))
    nodes = {host: _judge_node(host, history.get(host, []), good, set(known_good)) for host in hosts}
    by_verdict = {v: [h for h in hosts if nodes[h]["verdict"] == v] for v in (GOOD, BAD, UNRESOLVED)}
    unresolved = by_verdict[UNRESOLVED]
    retests = []
    kind = None
    if unresolved:
        good_order = [h for h in known_good if h in good] + [h for h in hosts if h in good and h not in known_good]
        if good_order:
            retests, kind = _retest_pairs(unresolved, good_order), "retest"
        else:
            retests = _discovery_pairs(unresolved, history)
            kind = "discovery" if retests else None
    return {
        "nodes": nodes,
        "retests": retests,
        "retest_kind": kind,
        "good": by_verdict[GOOD],
        "bad": by_verdict[BAD],
        "unresolved": unresolved,
    }


def batches(pairs):
    """Split ``pairs`` into batches of disjoint pairs, in order: the pairs of one batch share no
    node, so they can run at the same time (a retest phase reuses one good node for several)."""
    out = []
    for pair in pairs:
        for batch in out:
            if not any(set(pair) & set(other) for other in batch):
                batch.append(tuple(pair))
                break
        else:
            out.append([tuple(pair)])
    return out
