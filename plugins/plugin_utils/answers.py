# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Where a node's run leaves its answers: the names of the role's variables, given by the caller.

The controller's plugins (the health_report and run_summary actions, the gate_pairs filter) read
each node's registered results and facts through these names only. The role states them once
(``raygate_answers`` in roles/_common/vars/main.yml) and passes them as the ``answers`` argument,
so no Python file knows what the role calls its variables.
"""

from __future__ import annotations

from collections.abc import Mapping

# What run_summary needs, and what the gate needs (health_report and gate_pairs).
RUN = ("run_ok", "out", "health", "steps")
GATE = ("gate_status", "gate_address", "gate_skip_reason", "gpu_health", "nccl_single", "nccl_pairs")
WHERE = "the raygate role passes raygate_answers (roles/_common/vars/main.yml)"


def check(answers, keys):
    """``answers`` when it names a variable for every one of ``keys``; else ValueError saying which."""
    if not isinstance(answers, Mapping):
        raise ValueError(
            "answers must be a dict of the variable names a node's run leaves, not %r; %s" % (answers, WHERE)
        )
    missing = [key for key in keys if not answers.get(key)]
    if missing:
        raise ValueError("answers names no variable for %s; %s" % (", ".join(missing), WHERE))
    if "steps" in keys:
        steps = answers["steps"]
        if not isinstance(steps, list) or not all(isinstance(s, (list, tuple)) and len(s) == 2 for s in steps):
            raise ValueError("answers.steps must be a list of [variable, step] pairs, not %r; %s" % (steps, WHERE))
    return answers


def result(hv, name):
    """The registered result ``hv[name]``, or {} when it is absent or not a result."""
    value = hv.get(name)
    return value if isinstance(value, Mapping) else {}


class ReadOnce(Mapping):
    """A view of ``hostvars`` ({host: its variables}) that reads each variable of each host once.

    ansible-core templates a host variable anew on every read of ``hostvars[host][name]``: a
    registered result is copied whole each time. A result registered once for all hosts (the pair
    nccl-tests, the health report) holds an entry per node, so reading it from every host cost the
    controller time quadratic in the nodes (over ten minutes for one report at 1,000 nodes).
    ``shared``: the names registered once for all hosts; their value is read from the first host
    that has it and given to every host that has it too.
    """

    def __init__(self, hostvars, shared=()):
        self._hostvars = hostvars
        self._shared_names = frozenset(name for name in shared if name)
        self._shared = {}
        self._hosts = {}

    def __getitem__(self, host):
        if host not in self._hosts:
            self._hosts[host] = _VarsOnce(self._hostvars[host], self._shared_names, self._shared)
        return self._hosts[host]

    def __contains__(self, host):
        return host in self._hostvars

    def __iter__(self):
        return iter(self._hostvars)

    def __len__(self):
        return len(self._hostvars)


class _VarsOnce(Mapping):
    """One host's variables, each read at most once (ReadOnce)."""

    def __init__(self, variables, shared_names, shared):
        self._vars = variables
        self._shared_names = shared_names
        self._shared = shared
        self._seen = {}

    def __getitem__(self, name):
        if name not in self._seen:
            if name in self._shared_names and name in self._shared and name in self._vars:
                self._seen[name] = self._shared[name]
            else:
                self._seen[name] = self._vars[name]
                if name in self._shared_names:
                    self._shared.setdefault(name, self._seen[name])
        return self._seen[name]

    def __contains__(self, name):
        return name in self._seen or name in self._vars

    def __iter__(self):
        return iter(self._vars)

    def __len__(self):
        return len(self._vars)
