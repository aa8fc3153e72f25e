# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""One run at a time per cluster: take the lock on the head, waiting for another run to end.

The module answers once per call on the head (plugins/module_utils/node/cluster_lock.py). This
plugin names the run (plugins/plugin_utils/cluster_lock.py), calls the module on the controller's
monotonic clock until the lock is this run's, takes over the lock of a run that is gone once it
is stale (with a warning), and otherwise stops after ``wait`` seconds naming the holder. Check mode
takes nothing and waits for nothing: it says who holds the lock, if anyone does.
"""

from __future__ import annotations

import socket

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.raygate.cluster.plugins.module_utils.node.cluster_lock import ARGUMENT_SPEC
from ansible_collections.raygate.cluster.plugins.module_utils.waiter import wait_for
from ansible_collections.raygate.cluster.plugins.plugin_utils import cluster_lock as lock

display = Display()
MODULE = "raygate.cluster.cluster_lock"
PROGRESS_EVERY = 30.0


class ActionModule(ActionBase):
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)[1]
        head = self._task.delegate_to or (task_vars or {}).get("inventory_hostname", "?")
        controller = socket.gethostname()
        me = lock.this_run(args["playbook"], controller=controller)
        once = dict(self._task.args, holder=me)
        once.pop("take_over", None)

        def call(**extra):
            return self._execute_module(MODULE, module_args=dict(once, **extra), task_vars=task_vars)

        if self._task.check_mode:
            answer = call()
            if answer.get("action") == "busy":
                held = lock.describe(answer["holder"])
                display.warning("%s: check mode: the cluster lock is held by %s" % (head, held))
            result.update(answer)
            return result
        seen = {"at": -PROGRESS_EVERY}

        def poll():
            current = call()
            if current.get("failed") or current.get("unreachable") or current.get("action") != "busy":
                return True, current
            holder = current["holder"]
            alive = lock.holder_alive(holder, controller)
            if lock.may_take_over(holder, alive, args["stale"]):
                taken = call(take_over=holder["id"])
                if taken.get("action") == "take":
                    display.warning(lock.take_over_warning(head, holder, args["stale"], alive))
                return taken.get("action") != "busy", taken
            return False, current

        def progress(current, elapsed):
            if elapsed - seen["at"] >= PROGRESS_EVERY and current.get("holder"):
                seen["at"] = elapsed
                display.display("[%s] waiting for the cluster lock (%ds): held by %s"
                                % (head, elapsed, lock.describe(current["holder"])))  # fmt: skip

        ok, answer, elapsed = wait_for(poll, timeout=args["wait"], interval=args["interval"], on_progress=progress)
        answer = dict(answer, waited=round(elapsed, 1))
        if not ok:
            alive = lock.holder_alive(answer["holder"], controller)
            msg = lock.busy_message(head, answer["holder"], elapsed, args["wait"], args["stale"], alive)
            answer.update(failed=True, msg=msg)
        result.update(answer)
        return result
