# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark recorder: tasks per host and wall time per task, written as JSON when the play ends.

Enabled by bench/bringup.py through ANSIBLE_CALLBACK_PLUGINS and ANSIBLE_CALLBACKS_ENABLED;
the file to write comes from RAYGATE_BENCH_TASKS_OUT. It prints nothing.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: raygate_bench
type: aggregate
short_description: Record tasks per host and task wall times for bench/bringup.py
description:
  - Counts the task results of every host (ok, changed, skipped, failed, unreachable) and records
    the wall time of each task from its start to the start of the next one.
  - Records when each task started (C(at), seconds since the epoch), so that bench/scale.py can
    tell when a run reached a given task (every node joined in the GCS, at the start of the final wait).
  - Writes one JSON document to the path in the environment variable C(RAYGATE_BENCH_TASKS_OUT).
  - Keeps the rounds of every pair nccl-test (a result with C(rounds) and C(tests), as
    M(raygate.cluster.nccl_test) returns with O(mode=pairs)) under C(pairs) - each test's hosts,
    round and verdict (bench/scale.py; the health report keeps them too, under C(pairs)).
  - Keeps, under C(marks), when each host was first marked each way - C(unreachable), C(failed)
    (C(ignored) for a failure with ignore_errors), C(unhealthy) (a result with C(healthy) false),
    C(pair) (its verdict in a pair nccl-test, keyed by the address the test names) and C(out) (a
    fact C(raygate_out) set) - with the time (C(at), seconds since the epoch) and the task, so that
    bench/scale.py can say how long a run took to find each faulted node.
requirements:
  - enable it with C(ANSIBLE_CALLBACKS_ENABLED=raygate_bench)
"""

import json
import os
import time

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "raygate_bench"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self.started = time.monotonic()
        self.tasks = []
        self.hosts = {}
        self.current = None
        self.pairs = []
        self.marks = {}
        self.cpu_file = os.environ.get("RAYGATE_BENCH_CPU_FILE")
        self.cpu0 = self._cpu()

    def _cpu(self):
        """The run's controller CPU seconds so far (the cgroup's usage), or None."""
        if not self.cpu_file:
            return None
        try:
            with open(self.cpu_file, encoding="ascii") as handle:
                return int(handle.read().strip()) / 1e9
        except (OSError, ValueError):
            return None

    def _mark(self, key, how, result):
        """The first time `key` (a host name or a pair test's address) was marked `how`."""
        per = self.marks.setdefault(str(key), {})
        if how not in per:
            per[how] = {"at": round(time.time(), 3), "task": result._task.get_name()}

    def _close_task(self, now, cpu):
        if self.current is not None:
            self.current["seconds"] = round(now - self.current.pop("_t0"), 3)
            c0 = self.current.pop("_c0")
            if cpu is not None and c0 is not None:
                self.current["cpu_s"] = round(cpu - c0, 4)
            self.current = None

    def _start(self, task, kind):
        now, cpu = time.monotonic(), self._cpu()
        self._close_task(now, cpu)
        self.current = {
            "name": task.get_name(),
            "path": task.get_path() or "",
            "kind": kind,
            "_t0": now,
            "_c0": cpu,
            "at": round(time.time(), 3),
            "hosts": 0,
        }
        self.tasks.append(self.current)

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._start(task, "task")

    def v2_playbook_on_handler_task_start(self, task):
        self._start(task, "handler")

    def _count(self, result, status):
        host = result._host.get_name()
        counts = self.hosts.setdefault(host, {"tasks": 0, "ok": 0, "changed": 0, "skipped": 0, "failed": 0})
        counts["tasks"] += 1
        if status == "ok" and result._result.get("changed"):
            counts["changed"] += 1
        counts[status] = counts.get(status, 0) + 1
        if self.current is not None:
            self.current["hosts"] += 1

    def v2_runner_on_ok(self, result):
        self._count(result, "ok")
        res = result._result
        host = result._host.get_name()
        if res.get("healthy") is False:
            self._mark(host, "unhealthy", result)
        if (res.get("ansible_facts") or {}).get("raygate_out"):
            self._mark(host, "out", result)
        nodes = res.get("nodes")
        for addr, node in nodes.items() if isinstance(nodes, dict) else ():
            if isinstance(node, dict) and node.get("verdict") == "fail":
                self._mark(addr, "pair", result)
        if isinstance(res.get("rounds"), list) and isinstance(res.get("tests"), list):
            self.pairs.append(
                {
                    "task": result._task.get_name(),
                    "planned_rounds": len(res["rounds"]),
                    "tests": [
                        {"hosts": t.get("hosts"), "round": t.get("round"), "verdict": t.get("verdict")}
                        for t in list(res["tests"]) + list(res.get("retests") or [])
                    ],
                    "nodes": {h: (v or {}).get("verdict") for h, v in (res.get("nodes") or {}).items()},
                }
            )

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._count(result, "failed")
        self._mark(result._host.get_name(), "ignored" if ignore_errors else "failed", result)

    def v2_runner_on_skipped(self, result):
        self._count(result, "skipped")

    def v2_runner_on_unreachable(self, result):
        self._count(result, "unreachable")
        self._mark(result._host.get_name(), "unreachable", result)

    def v2_playbook_on_stats(self, stats):
        now, cpu = time.monotonic(), self._cpu()
        self._close_task(now, cpu)
        out = os.environ.get("RAYGATE_BENCH_TASKS_OUT")
        if not out:
            return
        doc = {
            "seconds": round(now - self.started, 3),
            "hosts": self.hosts,
            "tasks": self.tasks,
            "pairs": self.pairs,
            "marks": self.marks,
        }
        if cpu is not None and self.cpu0 is not None:
            doc["cpu_s"] = round(cpu - self.cpu0, 4)
        with open(out, "w", encoding="utf-8") as handle:
            json.dump(doc, handle, indent=1)
