# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    # The port plan's options, shared by ray_node and ray_firewall.
    # Mirrors plan_argspec() in module_utils/net/port_plan.py.
    DOCUMENTATION = r"""
options:
  ports:
    description:
      - Port plan overrides, by name (V(gcs), V(dashboard), V(client_server), V(node_manager),
        V(object_manager), V(dashboard_agent_listen), V(dashboard_agent_grpc),
        V(runtime_env_agent), V(metrics_export), V(autoscaler_metric), V(dashboard_metric),
        V(min_worker), V(max_worker)). Unset ones keep the defaults.
    type: dict
    default: {}
  port_offset:
    description: Added to every port, for a second cluster on the same hosts.
    type: int
    default: 0
  plan:
    description:
      - The whole port plan, computed once on the controller (M(raygate.cluster.validate_inventory)
        returns it as RV(raygate.cluster.validate_inventory#module:cluster.plan); the role passes it), one
        port per key of O(ports), the worker range included.
      - When given, the module takes it as data instead of building it again from O(ports) and
        O(port_offset), which must then stay unset. The node still checks what only it can see (the
        kernel's ephemeral range and ports already taken).
    type: dict
    version_added: 0.5.0
  min_worker_ports:
    description: The smallest acceptable size of the worker port range.
    type: int
    default: 64
"""
