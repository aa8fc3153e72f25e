# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.raygate.cluster.plugins.plugin_utils import gate_decision as gate


def gate_pairs(play_hosts, hostvars, answers=None, partner="", require_gdr=True, require_transport="", fabric="auto"):
    """The health gate's pair-test plan (plugin_utils/gate_decision.py's pair_plan)."""
    if partner and partner not in hostvars:
        raise AnsibleFilterError("gate_pairs: the pair partner %r is not a host of the inventory" % partner)
    try:
        return gate.pair_plan(
            list(play_hosts or []), hostvars, answers, partner or "", require_gdr, require_transport or "", fabric
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("gate_pairs: %s" % exc) from exc


def gate_decision(num_gpus, running_pid=None, check_all=False, recheck_running=False):
    """Whether the health gate checks this node (plugin_utils/gate_decision.py)."""
    try:
        return gate.gate_decision(num_gpus, running_pid, check_all, recheck_running)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("gate_decision: raygate_num_gpus must be a whole number: %s" % exc) from exc


class FilterModule:
    def filters(self):
        return {"gate_pairs": gate_pairs, "gate_decision": gate_decision}
