# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Waiting by polling, never by sleeping a guessed time.

A predicate returns ``(done, result)``; ``wait_for`` calls it on a monotonic clock until it
is done or the timeout passes, and returns ``(ok, result, elapsed)``. Check mode uses
``noop_wait``, which asks once and never sleeps.
"""

from __future__ import annotations

import socket
import time

WAIT_ARGSPEC = dict(
    wait=dict(type="bool", default=True),
    wait_timeout=dict(type="int", default=300),
    wait_sleep=dict(type="float", default=1.0),
)


def wait_for(predicate, timeout, interval=1.0, clock=time.monotonic, sleep=time.sleep, on_progress=None):
    """Poll ``predicate`` until done or ``timeout`` seconds have passed on ``clock``."""
    start = clock()
    while True:
        done, result = predicate()
        elapsed = clock() - start
        if done:
            return True, result, elapsed
        if on_progress is not None:
            on_progress(result, elapsed)
        if elapsed >= timeout:
            return False, result, elapsed
        sleep(min(interval, max(timeout - elapsed, 0)))


def wait_port(address, timeout, interval=0.2):
    """Until a TCP connection to ``address`` (host, port) is accepted; ``(ok, last error, elapsed)``."""

    def listening():
        try:
            socket.create_connection(address, timeout=2).close()
            return True, None
        except OSError as exc:
            return False, str(exc)

    return wait_for(listening, timeout=timeout, interval=interval)


def noop_wait(predicate, timeout=0, interval=0, clock=time.monotonic, sleep=None, on_progress=None):
    """Check mode: report what the predicate sees now, without waiting."""
    done, result = predicate()
    return done, result, 0.0
