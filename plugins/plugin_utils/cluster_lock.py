# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""cluster_lock's controller half: who this run is, whether a holder of the lock is gone, and what
a waiting run says.

A run is its ansible-playbook process: the controller's name, the process id and the process's
start time (so that a process id used again by another process is not taken for the holder). Only
the controller that ran the holder can see whether its process is gone (then its lock is taken over
at once); a holder from another controller is judged by the lock's age alone.
"""

from __future__ import annotations

import getpass
import os
import socket


def process_start(pid, proc="/proc"):
    """The start time of process PID (clock ticks since boot, /proc/PID/stat field 22), or None."""
    try:
        with open(os.path.join(proc, str(pid), "stat"), encoding="utf-8") as fh:
            stat = fh.read()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: count from its end.
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None


def this_run(playbook, pid=None, controller=None, user=None, proc="/proc"):
    """The holder record of this run. An action plugin runs in a worker forked from ansible-playbook,
    so the run's process is the worker's parent."""
    pid = os.getppid() if pid is None else pid
    controller = controller or socket.gethostname()
    started = process_start(pid, proc) or "0"
    return {
        "id": "%s:%d:%s" % (controller, pid, started),
        "user": user or getpass.getuser(),
        "controller": controller,
        "pid": pid,
        "playbook": playbook,
    }


def holder_alive(holder, controller, proc="/proc"):
    """True or False for a holder that ran on CONTROLLER (its process still runs, or not); None for a
    holder of another controller, whose process cannot be seen from here."""
    if holder.get("controller") != controller:
        return None
    pid = holder.get("pid")
    started = process_start(pid, proc) if isinstance(pid, int) else None
    return started is not None and holder.get("id") == "%s:%d:%s" % (controller, pid, started)


def may_take_over(holder, alive, stale):
    """Whether the lock of HOLDER (with its ``age``) may be taken, ALIVE being what
    ``holder_alive`` says of it: at once when its run is seen gone on this controller
    (ansible-playbook killed or interrupted before its summary); a run of another controller, which
    cannot be seen, once the lock is STALE seconds old. A run seen running keeps it, however old."""
    if alive is None:
        return holder.get("age", 0) >= stale
    return not alive


def describe(holder):
    """``site.yml run by root on ctl1 (pid 4242), held for 312 s``."""
    return "%s.yml run by %s on %s (pid %s), held for %s s" % (
        holder.get("playbook"),
        holder.get("user"),
        holder.get("controller"),
        holder.get("pid"),
        holder.get("age", "?"),
    )


WHY = {
    True: "that run is still going",
    False: "that run is gone, but another run took the lock first",
    None: "that run's controller is not this one, so only the lock's age can tell that it is gone "
    "(raygate_cluster_lock_stale, %d s)",
}


def busy_message(head, holder, waited, wait, stale, alive):
    """Why a run stops without changing anything, and what to do."""
    why = WHY[alive] % stale if alive is None else WHY[alive]
    return (
        "%s: the cluster lock is held by %s; waited %d s (raygate_cluster_lock_wait, %d s) and changed "
        "nothing; %s. Run again once it has ended, or raise raygate_cluster_lock_wait"
        % (head, describe(holder), waited, wait, why)
    )


def take_over_warning(head, holder, stale, alive):
    """The warning of a take-over: the run was seen gone here, or it ran elsewhere and its lock is stale."""
    why = (
        "its run is of another controller and the lock is older than raygate_cluster_lock_stale (%d s)" % stale
        if alive is None
        else "that run is gone (its process no longer runs here)"
    )
    return "%s: took over the cluster lock of %s: %s" % (head, describe(holder), why)
