# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The health gate's decision and reports, made on the controller from the nodes' check results.

It never fails the task for an unhealthy cluster: the role shows the summary first and then
fails. It fails on malformed arguments.
"""

from __future__ import annotations

import os
import time

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.raygate.cluster.plugins.module_utils.files import write_file
from ansible_collections.raygate.cluster.plugins.plugin_utils import answers as an
from ansible_collections.raygate.cluster.plugins.plugin_utils import breaker, fleet
from ansible_collections.raygate.cluster.plugins.plugin_utils import gate_decision as gate
from ansible_collections.raygate.cluster.plugins.plugin_utils.report import decision, prometheus, summary
from ansible_collections.raygate.cluster.plugins.plugin_utils.report import files as report_files
from ansible_collections.raygate.cluster.plugins.plugin_utils.report import merge as slices
from ansible_collections.raygate.cluster.plugins.plugin_utils.run_summary import failure_of

NODE_SPEC = {
    "host": {"type": "str", "required": True},
    "role": {"type": "str", "required": True, "choices": list(decision.ROLES)},
    "address": {"type": "str"},
    "status": {"type": "str", "default": "checked", "choices": list(decision.NODE_STATUSES)},
    "skip_reason": {"type": "str"},
    "error": {"type": "str"},
    "checks": {"type": "list", "elements": "dict", "default": []},
    "fingerprint": {"type": "dict"},
}
ARGUMENT_SPEC = {
    "nodes": {"type": "list", "elements": "dict", "options": NODE_SPEC},
    "hosts": {"type": "list", "elements": "str"},
    "merge": {"type": "list", "elements": "path"},
    "answers": {"type": "dict"},
    "head": {"type": "str"},
    "head_address": {"type": "str"},
    "min_healthy": {"type": "int", "default": 1},
    "dest": {"type": "path", "default": "artifacts/health"},
    "valid_for": {"type": "int", "default": 86400},
    "fail_on_warn": {"type": "bool", "default": False},
    "run_id": {"type": "str"},
    "write": {"type": "bool", "default": True},
    "left_hosts": {"type": "list", "elements": "str", "default": []},
    "pair_tests": {"type": "bool", "default": True},
    "fleet_drift": {"type": "str", "default": "warn", "choices": list(fleet.MODES)},
    "fleet_expect": {"type": "dict", "default": {}},
    "breaker_threshold": {"type": "int", "default": breaker.DEFAULT_THRESHOLD},
    "breaker_min_nodes": {"type": "int", "default": breaker.DEFAULT_MIN_NODES},
}
# nodes: the entries made by the caller; hosts: made here from what the gate left in hostvars;
# merge: read from the reports of earlier runs over slices of one fleet.
MUTUALLY_EXCLUSIVE = [["nodes", "hosts", "merge"]]
REQUIRED_ONE_OF = [["nodes", "hosts", "merge"]]
# hosts without head: a fleet without one (the health gate role alone over nodes that run no Ray).
REQUIRED_BY = {"hosts": ["answers"]}


def left_entries(hosts, hostvars, head, answers):
    """Report entries for nodes that left the run before the gate, from what they left in their
    host variables (by the names in ``answers``): its out answer ({status, task, error}) when the
    node did not answer at its first contact, else the registered answer of the step that failed on
    it (failure_of); neither when it stopped answering in a step that registers nothing."""
    entries = []
    if hosts:
        answers = an.check(answers, ("out", "steps"))
    for host in hosts:
        hv = hostvars.get(host, {})
        out = hv.get(answers["out"]) or failure_of(hv, answers)
        out = out or {"status": "unreachable", "error": "stopped answering during the run"}
        error = str(out.get("error") or "no error recorded")
        entries.append(
            {
                "host": host,
                "role": "head" if host == head else "worker",
                "address": gate.host_address(hv, host),
                "status": "unreachable" if out.get("status") == "unreachable" else "failed",
                "error": "%s: %s" % (out["task"], error) if out.get("task") else error,
                "checks": [],
            }
        )
    return entries


def report_nodes(args, hostvars):
    """The report's nodes for validated ``args``: ``nodes`` as given, or the gate's entries of the
    play's ``hosts`` made from ``hostvars`` (with a placeholder for a head outside the run); then
    an entry for each of ``left_hosts`` not already among them."""
    if args.get("hosts") is not None:
        nodes = gate.gate_nodes(
            args["hosts"],
            hostvars,
            args.get("head"),
            args.get("answers"),
            args.get("head_address"),
            left_hosts=args["left_hosts"],
            pairs=args["pair_tests"],
        )
    else:
        nodes = list(args["nodes"])
    known = {node["host"] for node in nodes}
    left = [h for h in args["left_hosts"] if h not in known]
    return nodes + left_entries(left, hostvars, args.get("head"), args.get("answers"))


def make_report(args, now, check_mode=False, hostvars=None):
    """Everything the action returns, for validated ``args`` at Unix time ``now``.

    The nodes are ``report_nodes(args, hostvars)`` (``hostvars``: the task's). Writes the files
    unless ``check_mode`` or ``args['write']`` is false. Raises ValueError on bad input (the action
    turns it into a task failure).
    """
    hostvars = {} if hostvars is None else hostvars
    merged = None
    if args.get("merge"):
        nodes, head, pairs, merged = slices.merge(args["merge"])
        head = args.get("head") or head
    else:
        nodes, head = report_nodes(args, hostvars), args.get("head")
        pairs = gate.pair_run(args["hosts"], hostvars, args["answers"]) if args.get("hosts") is not None else None
    report = decision.build_report(
        nodes,
        head=head,
        min_healthy=args["min_healthy"],
        fail_on_warn=args["fail_on_warn"],
        valid_for=args["valid_for"],
        checked_at=int(now),
        run_id=args.get("run_id"),
        fleet_drift=args["fleet_drift"],
        fleet_expect=args["fleet_expect"],
        breaker_threshold=args["breaker_threshold"],
        breaker_min_nodes=args["breaker_min_nodes"],
        pairs=pairs,
    )
    if merged is not None:
        report["slices"] = merged
    report_dir = os.path.join(os.path.abspath(args["dest"]), report["run_id"])
    rendered = report_files.render_files(report)
    files = {key: os.path.join(report_dir, name) for key, (name, content) in rendered.items()}
    written = bool(args["write"]) and not check_mode
    if written:
        os.makedirs(report_dir, exist_ok=True)
        for key, path in files.items():
            write_file(path, rendered[key][1])
    keys = ("healthy", "unhealthy", "warned", "severities", "head_healthy", "enough", "ok", "message", "run_id")
    keys += ("breaker_tripped", "breaker", "fleet")
    out = {key: report[key] for key in keys}
    if merged is not None:
        out["slices"] = merged
    out.update(
        changed=bool(args["write"]),
        written=written,
        report_dir=report_dir,
        files=files,
        summary=summary.render_summary(report),
        textfiles=prometheus.render_textfiles(report),
        checked_at=report["checked_at_epoch"],
        valid_until=report["valid_until_epoch"],
    )
    return out


class ActionModule(ActionBase):
    _supports_check_mode = True
    _supports_async = False
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self.validate_argument_spec(
            argument_spec=ARGUMENT_SPEC,
            mutually_exclusive=MUTUALLY_EXCLUSIVE,
            required_one_of=REQUIRED_ONE_OF,
            required_by=REQUIRED_BY,
        )[1]
        # Each host's variables read once; the pair tests' result (one for all hosts) once in all.
        names = args.get("answers") if isinstance(args.get("answers"), dict) else {}
        hostvars = an.ReadOnce((task_vars or {}).get("hostvars", {}), shared=[names.get("nccl_pairs")])
        try:
            check_mode = bool(self._task.check_mode)
            result.update(make_report(args, time.time(), check_mode=check_mode, hostvars=hostvars))
        except ValueError as exc:
            raise AnsibleActionFail("health_report: %s" % exc) from exc
        except OSError as exc:
            raise AnsibleActionFail("health_report: cannot write the report: %s" % exc) from exc
        return result
