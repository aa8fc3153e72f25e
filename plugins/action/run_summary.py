# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The last task of every raygate play: say which nodes are in and which are out, and why.

Reads what each node's play left in its host variables (by the names in ``answers``: run_ok, out),
asks the SSH port of a node that left without a reason (in parallel, bounded), writes
``<dest>/<playbook>.json`` and fails the task when the result is no cluster, a failed gate or
an unfinished teardown, so the exit status and the file tell the three outcomes apart.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.raygate.cluster.plugins.plugin_utils import answers as an
from ansible_collections.raygate.cluster.plugins.plugin_utils import gate_decision as gate
from ansible_collections.raygate.cluster.plugins.plugin_utils import run_summary as rs

display = Display()
ARGUMENT_SPEC = {
    "playbook": {"type": "str", "required": True, "choices": sorted(rs.PLAYBOOKS)},
    "hosts": {"type": "list", "elements": "str", "required": True},
    "head": {"type": "str", "required": True},
    "answers": {"type": "dict", "required": True},
    "gate_message": {"type": "str"},
    "dest": {"type": "path", "default": "artifacts/runs"},
    "probe_timeout": {"type": "float", "default": 5.0},
    "write": {"type": "bool", "default": True},
}


class ActionModule(ActionBase):
    _supports_check_mode = True
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        try:
            answers = an.check(args["answers"], an.RUN)
        except ValueError as exc:
            raise AnsibleActionFail("run_summary: %s" % exc) from exc
        # Each host's variables read once; the health report (one for all hosts) once in all.
        hostvars = an.ReadOnce((task_vars or {}).get("hostvars", {}), shared=[answers["health"]])
        hvs = {h: hostvars.get(h, {}) for h in args["hosts"]}
        nodes = [self._node(h, hvs[h], args["head"], answers) for h in args["hosts"]]
        silent = [n for n in nodes if not n["ok"] and not n["out"]]
        gate = args["gate_message"] or rs.gate_message(hvs, answers)
        summary = rs.summarize(args["playbook"], nodes, args["head"], self._probe(silent, args["probe_timeout"]), gate)
        watched = rs.watched_out(hvs, answers)
        if watched:
            summary["watched_out"] = watched
            summary["message"] += "; " + rs.watched_text(watched, summary["in"])
        if args["playbook"] == "upgrade" and summary["result"] == "degraded":
            versions, target = rs.left_on(hvs, answers, summary["out"])
            if versions:
                summary["left_on"] = versions
                summary["message"] += "; " + rs.left_on_text(versions, target)
        if args["write"] and not self._task.check_mode:
            path = os.path.join(args["dest"], "%s.json" % args["playbook"])
            os.makedirs(args["dest"], exist_ok=True)
            with open(path, "w") as fh:
                fh.write(rs.render(summary))
            summary["path"] = path
        result.update(summary, changed=False)
        result["msg"] = summary["message"]
        return result

    @staticmethod
    def _node(host, hv, head, answers):
        ok = bool(hv.get(answers["run_ok"]))
        out = hv.get(answers["out"]) or (None if ok else rs.failure_of(hv, answers))
        return {
            "host": host,
            "role": "head" if host == head else "worker",
            "address": gate.host_address(hv, host),
            "port": int(hv.get("ansible_port") or 22),
            "ok": ok,
            "out": dict(out) if isinstance(out, dict) else None,
        }

    @staticmethod
    def _probe(nodes, timeout):
        if not nodes:
            return {}
        with ThreadPoolExecutor(max_workers=min(32, len(nodes))) as pool:
            errors = pool.map(lambda n: rs.probe(n["address"], n["port"], timeout), nodes)
            return {n["host"]: error for n, error in zip(nodes, errors)}
