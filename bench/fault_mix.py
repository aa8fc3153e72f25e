# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fault mix of a fleet-scale health.yml run (issue 27, item 4), on light sandbox nodes.

Seven kinds of fault, spread over the workers (never node1, the head):

- ``dead``: its sshd is gone (connection refused);
- ``dark``: its link goes down once the run has started, over Ansible's persisted connection;
- ``flaky``: its link drops ``FLAKY_PERCENT`` of the packets it receives, at random (nftables
  ``numgen random``: this machine's kernel has no ``tc netem``);
- ``slow``: every GPU tool takes ten times as long (the simulator's ``slow`` fault);
- ``hung``: ``nvidia-smi`` never returns and outlives its kill (``nvsmi_hang``);
- ``xid``: a fatal Xid (79) in the kernel log;
- ``uplink``: a degraded uplink that counts no errors (``low_bandwidth``, network only): only the
  pair nccl-tests can find it.

The flaky and the slow node stay usable: their checks pass, later. The other five must be left
out, each with its own reason. ``judge`` says what a run got wrong against that, so that the fault
suite (30 nodes, one of each: tests/integration/faults/test_fleet_mix.py) asserts it and
bench/scale.py (5% of 1,000) records it. The tests import it too, with bench/ on their path.
"""

from __future__ import annotations

import json
import os
import socket
import time

import bringup

KINDS = ("dead", "dark", "flaky", "slow", "hung", "xid", "uplink")
USABLE = ("flaky", "slow")
FLAKY_PERCENT = 5
SLOW_TIMES = 10
_H100 = {"model": "H100"}
SCENARIOS = {
    "slow": {"gpu": dict(_H100, faults=[{"type": "slow", "times": SLOW_TIMES}])},
    "hung": {"gpu": dict(_H100, faults=[{"type": "nvsmi_hang"}])},
    "xid": {"gpu": dict(_H100, faults=[{"type": "xid", "xid": 79, "gpu": 3}])},
    "uplink": {"gpu": dict(_H100, faults=[{"type": "low_bandwidth", "factor": 0.5, "scope": "network"}])},
}
HEALTHY = {"gpu": _H100}
FLAKY_RULES = (
    "nft add table inet sandbox_flaky && nft add chain inet sandbox_flaky input"
    " '{ type filter hook input priority -10; }' && nft add rule inet sandbox_flaky input"
    " numgen random mod 100 '<' %d drop" % FLAKY_PERCENT
)
# The nodes that went dark come back, and a flaky node's rule goes, before the sandbox comes down.
FLAKY_UNDO = "nft delete table inet sandbox_flaky"


# sandbox.sh's address plan, as the bench already follows it.
ip = bringup.node_ip


def assign(n, count):
    """{node index: kind} for ``count`` faulted nodes of ``n``: the kinds in turn, spread evenly over
    node2..node<n>, so that no two faulted nodes are neighbours while there is room (the pair rounds
    pair neighbours). ValueError when they do not fit."""
    if count < 0 or count > n - 1:
        raise ValueError("%d faulted nodes do not fit %d nodes (node1, the head, is never faulted)" % (count, n))
    if count == 0:
        return {}
    step = (n - 1) / count
    return {2 + int(k * step): KINDS[k % len(KINDS)] for k in range(count)}


def unusable(assignment):
    return {i for i, kind in assignment.items() if kind not in USABLE}


def names(indices):
    return {"node%d" % i for i in indices}


def _failing(entry):
    return {c["name"]: c for c in entry.get("checks", []) if c.get("status") in ("fail", "warn")}


def _reason_problem(kind, entry, query_timeout):
    """What is wrong with the report entry of a node with fault ``kind`` (None when it is right)."""
    if kind in ("dead", "dark"):
        checks = entry.get("checks") or [{}]
        if entry.get("status") != "unreachable" or checks[0].get("name") != "reachable":
            return "not reported unreachable: %s" % json.dumps(entry)[:400]
        return None
    failing = _failing(entry)
    if kind == "hung":
        detail = failing.get("gpu_count", {}).get("detail") or ""
        want = "nvidia-smi -q -x did not answer within %ds (query_timeout)" % query_timeout
        return None if detail.startswith(want) else "gpu_count does not say %r: %r" % (want, detail[:300])
    if kind == "xid":
        detail = failing.get("xid", {}).get("detail") or ""
        return None if "79" in detail else "no failing xid check naming 79: %s" % sorted(failing)
    if kind == "uplink":
        pair = [name for name in failing if name.startswith("nccl_pair")]
        return None if pair else "no failing nccl_pair check: %s" % sorted(failing)
    return None


def judge(assignment, n, report, healthy_hosts, summary, query_timeout):
    """The requirements of the run, as a list of what it got wrong (empty when all hold):
    the breaker holds; each unusable faulted node is unhealthy in the report with its own reason and
    out in the run summary; the usable ones and every healthy node are in healthy_hosts.txt.
    ``report`` is report.json, ``healthy_hosts`` the lines of healthy_hosts.txt, ``summary`` the
    run summary (runs/health.json)."""
    problems = []
    if report.get("breaker_tripped") is not False:
        problems.append("the breaker tripped")
    entries = {e["host"]: e for e in report.get("nodes", [])}
    out = summary.get("out", {})
    for index, kind in sorted(assignment.items()):
        host = "node%d" % index
        if kind in USABLE:
            continue
        entry = entries.get(host)
        if entry is None:
            problems.append("%s (%s): not in the report" % (host, kind))
            continue
        wrong = _reason_problem(kind, entry, query_timeout)
        if wrong:
            problems.append("%s (%s): %s" % (host, kind, wrong))
        if host not in out:
            problems.append("%s (%s): not out in the run summary" % (host, kind))
    bad = names(unusable(assignment))
    if set(report.get("unhealthy", {})) != bad:
        problems.append("unhealthy %s, expected %s" % (sorted(report.get("unhealthy", {})), sorted(bad)))
    expected = names(range(1, n + 1)) - bad
    healthy = set(healthy_hosts)
    if healthy != expected:
        problems.append(
            "healthy_hosts.txt lacks %s and has %s too" % (sorted(expected - healthy), sorted(healthy - expected))
        )
    if set(out) != bad:
        problems.append("the run summary has out %s, expected %s" % (sorted(out), sorted(bad)))
    return problems


def refuses_ssh(index):
    """True when the node's port 22 refuses a connection (its sshd is gone, its link is up)."""
    try:
        with socket.create_connection((ip(index), 22), timeout=2):
            return False
    except ConnectionRefusedError:
        return True
    except OSError:
        return False


def link_command(index, up):
    """The host's command that takes node ``index``'s only link down or brings it up."""
    return ["ip", "netns", "exec", "rg-node%d" % index, "ip", "link", "set", "eth0", "up" if up else "down"]


def write_scenarios(workdir):
    """{kind: path} of the scenario files for ``sandbox.sh scenario``, written into ``workdir``."""
    paths = {}
    for kind, spec in list(SCENARIOS.items()) + [("healthy", HEALTHY)]:
        path = os.path.join(str(workdir), "fault-mix-%s.json" % kind)
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(spec, fh)
        paths[kind] = path
    return paths


def _sandbox(*args):
    proc = bringup.run([bringup.SANDBOX, *args], check=False, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError("sandbox.sh %s failed (rc=%d): %s" % (" ".join(args), proc.returncode, proc.stderr[-2000:]))
    return proc


def apply(mix, workdir, ansible, inventory, env, wait=60):
    """Put every fault of ``mix`` (index -> kind) on the sandbox's nodes but the dark ones' (they
    go dark once a run has started, with ``link_command``): the scenarios, the flaky nodes' nft
    rule, then an ``ansible -m ping`` over ``inventory`` that leaves Ansible's persisted connections
    (as a run a minute before would), then the dead nodes' sshd killed, waited on until each
    refuses SSH. What the fault suite's 30 nodes and bench/scale.py's 1,000 both do. Returns the
    ping's process (exit status 0 when every node answered it); raises RuntimeError naming what
    failed."""
    paths = write_scenarios(workdir)

    def of(*kinds):
        return [i for i, kind in sorted(mix.items()) if kind in kinds]

    for i in of(*SCENARIOS):
        _sandbox("scenario", str(i), paths[mix[i]])
    for i in of("flaky"):
        _sandbox("exec", str(i), "bash", "-c", FLAKY_RULES)
    ping = bringup.run([ansible, "-i", inventory, "ray_cluster", "-m", "ansible.builtin.ping"], check=False, env=env)
    for i in of("dead"):
        bringup.run([bringup.SANDBOX, "exec", str(i), "pkill", "-x", "sshd"], check=False)
    deadline = time.monotonic() + wait
    while not all(refuses_ssh(i) for i in of("dead")):
        if time.monotonic() > deadline:
            raise RuntimeError("the dead nodes %s still accept SSH after %ss" % (of("dead"), wait))
        time.sleep(1)
    return ping
