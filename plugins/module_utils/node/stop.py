# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Ending a Ray node's processes: its supervisor (and the head's proxy) first, then by signals, the
rounds of SIGTERM ``ray stop`` sends, then SIGKILL for whatever is left."""

from __future__ import annotations

import os
import signal

from ansible_collections.raygate.cluster.plugins.module_utils.waiter import wait_for


def send_signal(pids, sig):
    """Send ``sig`` to each of ``pids``; one that is already gone is not an error."""
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


class Stopper:
    """Ends the node's Ray processes (``node.ray_processes()``), waiting up to its ``stop_grace``."""

    def __init__(self, node):
        self.node = node
        self.p = node.p

    def stop(self, procs=None):
        """Graceful, then forced, then kill what is left; ``procs``: what runs now, if already read."""
        procs = self.node.ray_processes() if procs is None else procs
        self.node.proxy.stop()
        self.node.unit.stop()
        if self.node.container.on():
            # Before any signal: the engine restarts a container whose Ray it did not stop itself.
            self.node.container.stop()
            procs = self.node.ray_processes()
        if procs:
            self.terminate()
        self.kill_leftovers()

    def terminate(self):
        """What `ray stop --grace-period` does, without its seconds of Python start-up.

        Three rounds, in Ray's own order: the raylet (its workers and agents follow it), then
        every other Ray process, then the GCS last (it lingers while clients are connected).
        Each round sends SIGTERM, waits up to a third of stop_grace, and kills what is left.
        """
        rounds = (
            lambda p: p["comm"] == "raylet",
            lambda p: p["comm"] not in ("raylet", "gcs_server"),
            lambda p: p["comm"] == "gcs_server",
        )
        for in_round in rounds:
            targets = [p["pid"] for p in self.node.ray_processes() if in_round(p)]
            if targets:
                self.signal_and_wait(targets, self.p["stop_grace"] / 3.0)

    def signal_and_wait(self, pids, grace):
        send_signal(pids, signal.SIGTERM)

        def exited():
            alive = {p["pid"] for p in self.node.ray_processes()}
            left = [pid for pid in pids if pid in alive]
            return not left, left

        left = wait_for(exited, timeout=grace, interval=0.1)[1]
        send_signal(left, signal.SIGKILL)

    def kill_leftovers(self):
        def gone():
            left = self.node.ray_processes()
            send_signal([proc["pid"] for proc in left], signal.SIGKILL)
            return not left, left

        wait_for(gone, timeout=30, interval=0.2)
