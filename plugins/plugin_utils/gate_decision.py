# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The health gate's per-node input to the report, assembled from what the role's gate steps
left in each host's variables (registered results and set_facts), read by the names the caller
gives in ``answers`` (plugin_utils/answers.py).

The role (tasks/gate.yml) runs the steps in order; ``gate_nodes()`` turns what they registered
into the ``nodes`` of ``report/decision.py``'s ``build_report()``. Pure: ``hostvars`` is any mapping of
host name to a mapping of variables (Ansible's hostvars, or plain dicts in tests).
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.raygate.cluster.plugins.plugin_utils import answers as an

# The answers whose ``checks`` go into the report, with the source each is tagged with.
RESULTS = (("gpu_health", "gpu_health"), ("nccl_single", "nccl_test"))
# What the gate's first steps set on every node it runs on.
REQUIRED = ("gate_status", "gate_address")
# Said in the report, so that a lone node's untested network is not mistaken for a tested one.
NO_PAIR_DETAIL = (
    "no other node to run the network test with; set raygate_health_pair_partner to a member whose GPUs"
    " may run a short nccl-test"
)
OUTSIDE_RUN = "outside this run (--limit); not re-checked"


def tagged(checks, source):
    """Copies of ``checks`` with ``source`` set (replacing any source they carried)."""
    return [dict(check, source=source) for check in checks or []]


def no_pair_check():
    """The skip check of a pair candidate that got no pair test (no other node to pair with)."""
    return {"name": "nccl_pairs", "status": "skip", "source": "nccl_pairs", "detail": NO_PAIR_DETAIL}


def node_checks(hv, address, answers, pairs=True):
    """One node's checks: gpu_health's, then nccl_test's (single), then its pair result's.

    A skipped task registered no checks. The pair test runs once for all nodes (its result is
    the same on every host) and reports per node under ``nodes[<address>]``; when the gate runs
    pair tests (``pairs``), a pair candidate (pair_candidate) missing there gets ``no_pair_check()``.
    """
    checks = []
    for key, source in RESULTS:
        checks += tagged(an.result(hv, answers[key]).get("checks"), source)
    tested = an.result(hv, answers["nccl_pairs"]).get("nodes")
    tested = tested if isinstance(tested, Mapping) else {}
    if address in tested:
        checks += tagged((tested[address] or {}).get("checks"), "nccl_pairs")
    elif pairs and pair_candidate(hv, answers):
        checks.append(no_pair_check())
    return checks


def gate_entry(host, hv, head, answers, pairs=True):
    """The report entry of one host that ran the gate, from its variables ``hv``.

    Its role is head when it is ``head``; skip_reason only when its status is skipped; its
    fingerprint is the one gpu_health registered (None when gpu_health did not run).
    Raises ValueError when the gate's first step did not run on it.
    """
    missing = [answers[key] for key in REQUIRED if answers[key] not in hv]
    if missing:
        raise ValueError("host %s has no %s: the gate did not run on it" % (host, ", ".join(missing)))
    status = str(hv[answers["gate_status"]])
    address = hv[answers["gate_address"]]
    return {
        "host": host,
        "role": "head" if host == head else "worker",
        "address": str(address),
        "status": status,
        "skip_reason": str(hv.get(answers["gate_skip_reason"]) or "") if status == "skipped" else "",
        "fingerprint": an.result(hv, answers["gpu_health"]).get("fingerprint") or None,
        "checks": node_checks(hv, address, answers, pairs),
    }


def host_address(hv, host):
    """A host's cluster address from its variables: raygate_node_ip, else ansible_host, else its name."""
    return str(hv.get("raygate_node_ip") or hv.get("ansible_host") or host)


def head_placeholder(head, address):
    """The entry of a head outside this run (--limit): reported as not re-checked, not as missing."""
    return {
        "host": head,
        "role": "head",
        "address": address,
        "status": "skipped",
        "skip_reason": OUTSIDE_RUN,
        "checks": [],
    }


def gate_nodes(hosts, hostvars, head, answers, head_address=None, left_hosts=(), pairs=True):
    """The report's ``nodes`` for the play's ``hosts`` (in that order), from ``hostvars``.

    Then, when ``head`` is neither among ``hosts`` nor ``left_hosts`` (it is outside this run),
    its placeholder, at ``head_address`` (default: from its host variables). Hosts that left
    the run are not made here (the action's ``left_entries``). Raises ValueError naming a host
    the gate did not run on.
    """
    an.check(answers, an.GATE)
    nodes = []
    for host in hosts:
        if host not in hostvars:
            raise ValueError("host %s is not in the inventory" % host)
        nodes.append(gate_entry(host, hostvars[host], head, answers, pairs))
    if head and head not in hosts and head not in left_hosts:
        if not head_address:
            head_address = host_address(hostvars[head] if head in hostvars else {}, head)
        nodes.append(head_placeholder(head, str(head_address)))
    return nodes


def _pair_test(test, names, planned):
    """One pair test for the report: a round after the ``planned`` ones is a retest phase."""
    hosts = [str(a) for a in test.get("hosts") or []]
    number = test.get("round")
    return {
        "round": number,
        "phase": "retest" if isinstance(number, int) and number > planned else "round",
        "hosts": [names.get(a, a) for a in hosts],
        "addresses": hosts,
        "verdict": test.get("verdict"),
        "busbw": test.get("busbw"),
        "transport": test.get("transport"),
    }


def pair_run(hosts, hostvars, answers):
    """What the pair nccl-tests of this run did, for the report: ``{planned_rounds, rounds,
    retest_phases, tests}``, or None when none ran (no result, or the task was skipped).

    Read from the first of ``hosts`` that carries the run-once pair result (``answers["nccl_pairs"]``)
    (every host of the play does). ``rounds`` counts the rounds and retest phases that ran (a
    retest phase is numbered after the planned rounds); each test says its round, its phase
    (round or retest), its hosts (inventory names where the address is a host's
    gate address, else the address), addresses, verdict, bus bandwidth and transport.
    """
    an.check(answers, an.GATE)
    result = {}
    for host in hosts:
        result = an.result(hostvars.get(host) or {}, answers["nccl_pairs"])
        if result:
            break
    tests = result.get("tests")
    if result.get("skipped") or not isinstance(tests, list):
        return None
    names = {}
    for host in hosts:
        address = (hostvars.get(host) or {}).get(answers["gate_address"])
        if address:
            names.setdefault(str(address), host)
    planned = len(result.get("rounds") or [])
    ran = [_pair_test(t, names, planned) for t in list(tests) + list(result.get("retests") or [])]
    last = max([t["round"] for t in ran if isinstance(t["round"], int)] or [0])
    return {
        "planned_rounds": planned,
        "rounds": last,
        "retest_phases": max(0, last - planned),
        "tests": ran,
    }


def pair_transport(fabric, require_gdr=True, wanted=""):
    """The transport the pair tests must see: ``wanted`` when given; else any transport without RDMA
    (``fabric`` none), GDRDMA when GPUDirect RDMA is required, else any RDMA one (no Socket)."""
    if wanted:
        return wanted
    if fabric == "none":
        return "any"
    return "GDRDMA" if require_gdr else "no_socket"


def pair_candidate(hv, answers):
    """Whether a host goes on to the pair tests: the gate checked it, its GPUs are healthy and its
    single-node nccl-test, when that ran (not skipped: raygate_health_nccl off), passed."""
    if hv.get(answers["gate_status"]) != "checked":
        return False
    if not an.result(hv, answers["gpu_health"]).get("healthy"):
        return False
    single = an.result(hv, answers["nccl_single"])
    if not single or single.get("skipped"):
        return True
    return bool(single.get("healthy"))


def pair_plan(play_hosts, hostvars, answers, partner="", require_gdr=True, require_transport="", default_fabric="auto"):
    """Who runs the pair tests, from where and judged how.

    ``play_hosts``: the hosts still in the play, in order; a host takes part when pair_candidate
    says so. ``partner``: a cluster host known to work (``raygate_health_pair_partner``), added as
    ``known_good`` unless it is under test itself or nobody is. The launcher is the first candidate,
    and its fabric (as gpu_health found it) is the pairs' fabric. Returns ``{launcher, hosts,
    known_good, fabric, require_transport}`` (``args``: the last four, as nccl_test's options):
    ``hosts`` are addresses (partner last); fewer than two means there is nothing to pair.
    """
    an.check(answers, an.GATE)
    candidates = [h for h in play_hosts if pair_candidate(hostvars[h], answers)]
    known_good = []
    if partner and candidates and partner not in candidates:
        known_good = [host_address(hostvars[partner], partner) if partner in hostvars else partner]
    launcher = candidates[0] if candidates else (play_hosts[0] if play_hosts else None)
    found = (an.result(hostvars[launcher], answers["gpu_health"]) if launcher else {}).get("fabric") or {}
    fabric = found.get("fabric") or default_fabric
    args = {
        "hosts": [host_address(hostvars[h], h) for h in candidates] + known_good,
        "known_good": known_good,
        "fabric": fabric,
        "require_transport": pair_transport(fabric, boolean(require_gdr, strict=False), require_transport),
    }
    return dict(args, launcher=launcher, args=dict(args))


def gate_decision(num_gpus, running_pid=None, check_all=False, recheck_running=False):
    """Whether the gate checks a node: ``{status: checked|skipped, skip_reason}``.

    A node without GPUs is skipped; so is a running member (its raylet ``running_pid``) unless
    every node is checked (health.yml, ``check_all``) or ``recheck_running`` asks for it.
    """
    gpus = int(num_gpus or 0)
    if gpus == 0:
        return {"status": "skipped", "skip_reason": "no GPUs on this node (raygate_num_gpus: 0)"}
    rechecked = boolean(check_all, strict=False) or boolean(recheck_running, strict=False)
    if running_pid not in (None, "") and not rechecked:
        reason = "already a running member (pid %s); health.yml re-checks it" % running_pid
        return {"status": "skipped", "skip_reason": reason}
    return {"status": "checked", "skip_reason": ""}
