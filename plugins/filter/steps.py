# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.raygate.cluster.plugins.module_utils import step_runner
from ansible_collections.raygate.cluster.plugins.module_utils.node import steps

# The gate's node checks (gate_node_checks) answer under step_results too.
KNOWN = list(steps.STEPS) + ["gpu_health", "nccl_test"]


def step_result(answer, name):
    """The answer of step ``name`` in a registered result of node_steps or of that step's module."""
    if name not in KNOWN:
        raise AnsibleFilterError("step_result: unknown step %r; known: %s" % (name, ", ".join(KNOWN)))
    return step_runner.step_result(answer, name)


class FilterModule:
    def filters(self):
        return {"step_result": step_result}
