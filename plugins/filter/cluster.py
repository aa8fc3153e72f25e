# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.raygate.cluster.plugins.module_utils.node import cluster


def ray_member(summary, address, gpus=0):
    """Whether the node at ``address`` is alive in ray_cluster_info's answer with its ``gpus``."""
    try:
        return cluster.is_member(summary, address, gpus)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("ray_member: the GPU count must be a number: %s" % exc) from exc


class FilterModule:
    def filters(self):
        return {"ray_member": ray_member}
