# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.raygate.cluster.plugins.plugin_utils import file_sd


def prometheus_file_sd(nodes, head, plan, cluster, node_exporter_port=9100):
    """Prometheus file_sd target groups for the cluster (plugin_utils/file_sd.py)."""
    try:
        return file_sd.file_sd_targets(list(nodes or []), head, plan, cluster, int(node_exporter_port))
    except (file_sd.FileSdError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("prometheus_file_sd: %s" % exc) from exc


class FilterModule:
    def filters(self):
        return {"prometheus_file_sd": prometheus_file_sd}
