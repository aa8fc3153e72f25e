# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""cluster_lock's node half: one look at (and at most one change of) the cluster lock on the head.

The lock is a JSON file naming the run that holds it: ``id`` (the controller, the ansible-playbook
process and its start), ``user``, ``controller``, ``pid``, ``playbook`` and ``since`` (the head's
clock, so that the age of a lock never depends on two clocks agreeing). A run holds it from its
first step to its summary, across many SSH connections, so no process on the head can hold a
flock for it: the file is the lock, and each change of it is made under a short flock of its own
(``<path>.flock``, gone again once the change is made).

The module answers once per call; waiting, and judging whether a holder is gone, is the action
plugin's (plugins/action/cluster_lock.py), on the controller that can see the holder's process.
"""

from __future__ import annotations

import json
import os
import time

from ansible_collections.raygate.cluster.plugins.module_utils.files import (
    LockBusy,
    exclusive_lock,
    read_text,
    remove_path,
    write_file,
)

# Mirrors the module's DOCUMENTATION (plugins/modules/cluster_lock.py).
# One spec for both halves, as ray_cluster_info has: the action plugin validates the task with it,
# fills in ``holder`` (and ``take_over``) and waits (``wait``, ``stale``, ``interval``); the module
# validates the same arguments on the head and answers once per call.
ARGUMENT_SPEC = dict(
    state=dict(type="str", choices=["held", "released"], default="held"),
    path=dict(type="path", default="/var/lib/raygate/cluster.lock"),
    playbook=dict(type="str", required=True),
    wait=dict(type="int", default=600),
    stale=dict(type="int", default=900),
    interval=dict(type="float", default=5.0),
    holder=dict(type="dict"),
    take_over=dict(type="str"),
)
HOLDER_KEYS = ("id", "user", "controller", "pid", "playbook")
# How long a change of the file may wait for another change of it (each takes milliseconds).
CHANGE_WAIT = 30


def read_lock(path):
    """The holder recorded in PATH, or None when there is none (no file, or one that says nothing)."""
    text = read_text(path)
    if not text:
        return None
    try:
        holder = json.loads(text)
    except ValueError:
        return None
    return holder if isinstance(holder, dict) and holder.get("id") else None


def with_age(holder, now):
    """HOLDER with ``age``, its seconds since ``since`` on the head's clock."""
    return dict(holder, age=max(0, int(now - holder.get("since", now))))


def decide(current, state, holder, take_over):
    """What to do with the lock: ``take``, ``keep`` (already ours), ``busy``, ``release`` or ``none``."""
    ours = current is not None and current.get("id") == holder["id"]
    if state == "released":
        return "release" if ours else "none"
    if current is None:
        return "take"
    if ours:
        return "keep"
    return "take" if take_over and current.get("id") == take_over else "busy"


def change(params, check_mode=False, now=None):
    """Apply one call of the module; returns its answer (never ``changed``: see the module's notes)."""
    now = time.time() if now is None else now
    path = params["path"]
    holder = {k: params["holder"].get(k) for k in HOLDER_KEYS}
    if check_mode:  # a look only: no flock file, no directory made on a node raygate never touched
        return _apply(path, params, holder, now, check_mode)
    os.makedirs(os.path.dirname(path) or ".", mode=0o755, exist_ok=True)
    with exclusive_lock(path + ".flock", timeout=CHANGE_WAIT):
        return _apply(path, params, holder, now, check_mode)


def _apply(path, params, holder, now, check_mode):
    current = read_lock(path)
    action = decide(current, params["state"], holder, params["take_over"])
    answer = {"changed": False, "action": action, "path": path, "holder": None, "taken_over": None}
    if action in ("busy", "keep"):
        answer["holder"] = with_age(current, now)
    elif action == "take":
        mine = dict(holder, since=int(now))
        write_file(path, json.dumps(mine, sort_keys=True) + "\n", mode=0o600, check_mode=check_mode)
        answer["holder"] = with_age(mine, now)
        answer["taken_over"] = with_age(current, now) if current else None
    elif action == "release":
        remove_path(path, check_mode=check_mode)
    return answer


def run(module):
    if not module.params["holder"] or not module.params["holder"].get("id"):
        module.fail_json(msg="holder is set by the cluster_lock action plugin; run the module as a task, not by hand")
    try:
        answer = change(module.params, check_mode=module.check_mode)
    except LockBusy as exc:
        module.fail_json(msg="the cluster lock %s is being changed by another process: %s" % (exc.path, exc))
    except OSError as exc:
        module.fail_json(msg="cannot change the cluster lock %s: %s" % (module.params["path"], exc))
    module.exit_json(**answer)
