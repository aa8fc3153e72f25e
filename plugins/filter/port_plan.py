# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.raygate.cluster.plugins.module_utils.net import port_plan as pp


def port_plan(overrides=None, offset=0):
    """The full port plan: defaults, the overrides, then the offset, exactly as ray_node builds it.

    The offset goes to ``build_plan`` as given (an int or a numeric string; None or "" mean 0), so
    a value ray_node would refuse (1.5, true) fails here too instead of being truncated.
    """
    if offset is None or offset == "":
        offset = 0
    try:
        return pp.build_plan(overrides or {}, offset=offset)
    except (pp.PortPlanError, ValueError) as exc:
        raise AnsibleFilterError(str(exc)) from exc


def plan_ports(plan, role="head"):
    """Every port of the plan for a role, the worker range expanded, sorted."""
    try:
        return sorted(pp.all_ports(plan, role))
    except pp.PortPlanError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule:
    def filters(self):
        return {"port_plan": port_plan, "plan_ports": plan_ports}
