# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The end of every raygate play: which nodes are in, which are out and why, and the result.

Pure functions over what each node's play left behind (its run_ok and out answers, by the names
the caller gives: plugin_utils/answers.py);
the action plugin ``raygate.cluster.run_summary`` adds a connection probe for nodes that left
without saying why, writes the JSON and turns the result into the play's exit status.
"""

from __future__ import annotations

import json
import socket
import time

from ansible_collections.raygate.cluster.plugins.plugin_utils import answers as an

# What each playbook promises: the head is needed for a cluster (site, scale, upgrade), or
# every node must be done (teardown, remove_node: a later run finishes the job).
PLAYBOOKS = {
    "site": "cluster",
    "scale": "cluster",
    # A failed upgrade rolls back: the cluster may well run, on the old version.
    "upgrade": "upgrade",
    "health": "gate",
    "teardown": "cleanup",
    "remove_node": "cleanup",
}
# busy: another run held the cluster lock, so this run stopped before changing anything (lock.yml).
OUT_STATUSES = ("unreachable", "failed", "unhealthy", "stopped", "busy")
# Exit status: rc 0 unless the result is one of these, which fail the play (rc 2).
FAILING = ("no_cluster", "gate_failed", "incomplete", "failed", "busy")


def failure_of(hostvars, answers):
    """``{status, task, error}`` from the first registered step answer (``answers["steps"]``: the
    role's [variable, step] pairs, in run order) that failed or was unreachable, or None. Only for a
    node that did not get through the run: one that did may carry an answer a step ignored on
    purpose (ignore_errors)."""
    for name, step in an.check(answers, ("steps",))["steps"]:
        answer = hostvars.get(name)
        if not isinstance(answer, dict) or answer.get("skipped"):
            continue
        if answer.get("unreachable") or answer.get("failed"):
            status = "unreachable" if answer.get("unreachable") else "failed"
            return {"status": status, "task": step, "error": str(answer.get("msg") or "no message")[:2000]}
    return None


def gate_message(hostvars_by_host, answers):
    """The health gate's verdict message (``answers["health"]``) when it failed on this run, else None."""
    name = an.check(answers, ("health",))["health"]
    for hv in hostvars_by_host.values():
        health = hv.get(name)
        if isinstance(health, dict) and health.get("ok") is False and health.get("message"):
            return str(health["message"])
    return None


def watched_out(hostvars_by_host, answers):
    """``{host: {at, check, reason}}``: the nodes whose watcher had taken them out of Ray when this
    run began (``answers["watch"]``, node_watch's query; absent when raygate_watch is off)."""
    name = answers.get("watch")
    found = {}
    for host, hv in hostvars_by_host.items():
        answer = hv.get(name) if name else None
        taken = ((answer or {}).get("watch") or {}).get("taken_out") if isinstance(answer, dict) else None
        if isinstance(taken, dict) and taken.get("reason"):
            found[host] = {"at": taken.get("at"), "check": taken.get("check"), "reason": taken["reason"]}
    return found


def watched_text(watched, done):
    """One sentence naming the nodes the watcher took out, and whether this run brought them back."""
    parts = []
    for host in sorted(watched):
        entry = watched[host]
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(float(entry["at"] or 0)))
        state = "back in" if host in done else "still out"
        parts.append("%s at %s, %s (%s)" % (host, when, entry["reason"], state))
    return "the watcher had taken out: %s" % "; ".join(parts)


def left_on(hostvars_by_host, answers, out_hosts):
    """upgrade.yml: ``({host: version | None}, target | None)``. For each node out of the run, the
    version it ran when this run read it (``answers["upgrade_from"]``; None for a node that never
    answered), and the version the nodes in the run went to (``answers["upgrade_to"]``). Both
    names are optional: ``({}, None)`` without them."""
    source, dest = answers.get("upgrade_from"), answers.get("upgrade_to")
    if not source or not dest:
        return {}, None
    versions = {host: _version(hostvars_by_host.get(host, {}).get(source)) for host in out_hosts}
    targets = [_version(hv.get(dest)) for host, hv in hostvars_by_host.items() if host not in out_hosts]
    return versions, next((t for t in targets if t), None)


def _version(venv):
    """``ray-2.60.0-py3.11`` from the versioned virtualenv's path, or None when there is none."""
    if not isinstance(venv, str) or not venv.strip("/"):
        return None
    return venv.rstrip("/").rsplit("/", 1)[-1]


def left_on_text(versions, target):
    """One sentence naming the nodes an upgrade left behind, on which version, and what brings them."""
    parts = [
        "%s on %s" % (host, versions[host]) if versions[host] else "%s (its version not read: it never answered)" % host
        for host in sorted(versions)
    ]
    to = target or "the new version"
    return (
        "not upgraded: %s; once they answer, site.yml with the same raygate_ray_version brings them to %s "
        "without stopping the others (upgrade.yml would restart every node)" % (", ".join(parts), to)
    )


def probe(address, port=22, timeout=5.0):
    """None when ``address:port`` accepts a TCP connection, else the error (why SSH failed)."""
    try:
        socket.create_connection((address, int(port)), timeout=timeout).close()
        return None
    except OSError as exc:
        return "%s:%s: %s" % (address, port, exc.strerror or str(exc) or exc.__class__.__name__)


def _out_entry(node, probe_error):
    out = node.get("out")
    if out:
        status = out.get("status") if out.get("status") in OUT_STATUSES else "failed"
        return {"status": status, "task": out.get("task") or "", "error": str(out.get("error") or "")}
    if probe_error is None:
        # It answers now: the run stopped before this node was done (the head left, or a step
        # that ran once for all failed).
        return {"status": "stopped", "task": "", "error": "the run ended before this node was done"}
    return {"status": "unreachable", "task": "", "error": "stopped answering during the run; now: %s" % probe_error}


def summarize(playbook, nodes, head, probes=None, gate_message=None, now=None):
    """The run's result from each node's outcome.

    ``nodes``: ``[{host, role, address, ok, out: {status, task, error} | None}]``;
    ``probes``: ``{host: error | None}`` for nodes that are neither ok nor out;
    ``gate_message``: the health gate's verdict when it failed.
    Result: ``complete`` (every node in), ``degraded`` (a cluster, named nodes out),
    ``no_cluster`` (site/scale/upgrade without the head), ``gate_failed`` (health.yml's verdict
    failed), ``incomplete`` (teardown/remove_node could not finish every node), ``failed``
    (upgrade.yml did not take; its message says whether the old version runs again), ``busy``
    (another run held the cluster lock: this run changed nothing; any playbook).
    """
    if playbook not in PLAYBOOKS:
        raise ValueError("playbook %r is not one of %s" % (playbook, ", ".join(sorted(PLAYBOOKS))))
    kind = PLAYBOOKS[playbook]
    probes = probes or {}
    done, out = [], {}
    for node in nodes:
        if node.get("ok"):
            done.append(node["host"])
        else:
            out[node["host"]] = _out_entry(node, probes.get(node["host"]))
    busy = [e for e in out.values() if e["status"] == "busy"]
    if busy:
        result = "busy"
    elif kind == "cleanup":
        result = "incomplete" if out else "complete"
    elif gate_message:
        result = "no_cluster" if kind in ("cluster", "upgrade") else "gate_failed"
    elif kind == "cluster" and head in out:
        result = "no_cluster"
    elif kind == "upgrade" and head in out:
        result = "no_cluster" if out[head]["status"] == "unreachable" else "failed"
    else:
        result = "degraded" if out else "complete"
    return {
        "playbook": playbook,
        "result": result,
        "failed": result in FAILING,
        "head": head,
        "in": done,
        "out": out,
        "message": _message(playbook, result, head, done, out, busy[0]["error"] if busy else gate_message),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
    }


def describe(host, entry):
    where = " at %r" % entry["task"] if entry["task"] else ""
    return "%s %s%s: %s" % (host, entry["status"], where, entry["error"] or "no error recorded")


def _message(playbook, result, head, done, out, gate_message):
    total = len(done) + len(out)
    outs = "; ".join(describe(h, e) for h, e in out.items())
    if result == "complete":
        return "%s: every node is %s (%d of %d)" % (
            playbook,
            "done" if PLAYBOOKS[playbook] == "cleanup" else "in",
            len(done),
            total,
        )
    if result == "incomplete":
        return "%s: %d of %d nodes done; not done: %s. Run it again once they answer." % (
            playbook, len(done), total, outs)  # fmt: skip
    if result == "no_cluster":
        why = gate_message or describe(head, out.get(head, {"status": "out", "task": "", "error": ""}))
        others = "; ".join(describe(h, e) for h, e in out.items() if h != head)
        return "%s: no cluster: %s" % (playbook, why) + (
            "; also out: %s" % others if others and not gate_message else ""
        )
    if result == "gate_failed":
        return "%s: %s" % (playbook, gate_message)
    if result == "busy":
        # gate_message: the lock's refusal, which names the run that holds it.
        return "%s: changed nothing: %s" % (playbook, gate_message)
    if result == "failed":
        return "%s: failed: %s" % (playbook, out[head]["error"])
    return "%s: %d of %d nodes in; out: %s" % (playbook, len(done), total, outs)


def render(summary):
    return json.dumps(summary, indent=2, sort_keys=True) + "\n"
