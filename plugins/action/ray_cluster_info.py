# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Wait for a Ray cluster from the controller, printing progress instead of retries.

The module asks the state API once per call; this plugin validates the options on the
controller (the module's own spec, module_utils/node/cluster.py), then repeats the call on the
controller's monotonic clock and prints a line whenever the number of nodes or GPUs
changes (and every ``PROGRESS_EVERY`` seconds), so a slow join shows what it is waiting
for and a timeout names the hosts that never joined.
"""

from __future__ import annotations

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.raygate.cluster.plugins.module_utils.node.cluster import (
    ARGUMENT_SPEC,
    waiting_message,
    wants_wait,
)
from ansible_collections.raygate.cluster.plugins.module_utils.waiter import wait_for

display = Display()
MODULE = "raygate.cluster.ray_cluster_info"
PROGRESS_EVERY = 15.0


class ActionModule(ActionBase):
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        # Types, defaults and choices as the module has them ("no" is false); a bad value fails here,
        # in the validator's words, before the module is called.
        args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)[1]
        # The module gets the task's arguments as written and validates them with the same spec on
        # its host (a path option expands there, not on the controller); it answers once per call.
        once = dict(self._task.args)
        if not wants_wait(args) or self._task.check_mode:
            result.update(self._execute_module(MODULE, module_args=once, task_vars=task_vars))
            return result
        timeout = args["wait_timeout"]
        interval = args["wait_sleep"]
        host = task_vars.get("inventory_hostname", "?") if task_vars else "?"
        shown = {"key": None, "at": 0.0}

        def poll():
            answer = self._execute_module(MODULE, module_args=once, task_vars=task_vars)
            if answer.get("failed") and "reachable" not in answer:
                return True, answer  # a real error (bad token file, bad args): stop at once
            return bool(answer.get("complete")), answer

        def progress(answer, elapsed):
            key = (answer.get("alive_nodes"), answer.get("total_gpus"), answer.get("reachable"))
            if key != shown["key"] or elapsed - shown["at"] >= PROGRESS_EVERY:
                shown.update(key=key, at=elapsed)
                display.display("[%s] waiting for the cluster (%ds): %s" % (host, elapsed, waiting_message(answer)))

        ok, answer, elapsed = wait_for(poll, timeout=timeout, interval=interval, on_progress=progress)
        answer = dict(answer, elapsed=round(elapsed, 2), changed=False)
        if not ok:
            answer.update(failed=True, msg="timed out after %ds: %s" % (timeout, waiting_message(answer)))
        elif not answer.get("failed"):
            answer.pop("msg", None)
        result.update(answer)
        return result
