#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: validate_inventory
short_description: Validate a raygate cluster inventory on the controller
version_added: 0.1.0
description:
  - Checks the whole cluster before any host is contacted, and fails with every problem
    at once, each naming the host, the value and the fix.
  - Exactly one head; no host both head and worker; every node an IP address of its own;
    an exact Ray version, the same on every host; token authentication only with Ray 2.52
    or newer; the V(default) extra; explicit CPU, GPU and memory amounts (with O(purpose=gate),
    the GPU count only); one port plan for the whole cluster, valid on its own (range, overlaps,
    worker range size, a second cluster's offset disjoint from the first).
  - Every C(raygate_*) variable that a node's inventory or the extra variables set is checked
    against the raygate role's argument spec (its type and choices), once for all nodes; one
    message per mistake names the nodes that share it. The role's own per-host argument
    validation is not run by the playbooks, which cost a task per node.
  - Host-side checks (ephemeral port range, ports already bound) are made by
    M(raygate.cluster.ray_node) in check mode, still before any change.
  - This is an action plugin; it runs on the controller only.
requirements:
  - runs on the controller; no requirement on the nodes
author:
  - raygate maintainers (@raygate)
extends_documentation_fragment:
  - raygate.cluster.attributes
  - raygate.cluster.attributes.INFO_MODULE
options:
  head_group:
    description: Inventory group of the head.
    type: str
    default: ray_head
  worker_group:
    description: Inventory group of the workers.
    type: str
    default: ray_workers
  defaults:
    description:
      - Values for hosts that do not set the variable, keyed without the C(raygate_) prefix
        (V(ray_version), V(ray_extras), V(auth), V(ports), V(port_offset), V(min_worker_ports),
        V(num_cpus), V(num_gpus), V(memory), V(python_version_match_level), V(user), V(runtime),
        V(container_engine), V(image), V(image_allow_tag)).
      - With V(runtime) V(container), V(image) must be pinned by digest (unless V(image_allow_tag)), and
        V(user) must not be V(root); every node must have the same V(runtime).
      - V(user) (C(raygate_user)) must be a user name; a cluster that runs Ray as V(root) on some host
        gets one warning naming those hosts (not for O(purpose=gate)).
    type: dict
    default: {}
  pair_partner:
    description:
      - The health gate's pair partner (C(raygate_health_pair_partner)); when set it must be a host of
        O(head_group) or O(worker_group).
    type: str
    default: ""
    version_added: 0.5.0
  purpose:
    description:
      - What the inventory is validated for.
      - V(cluster) is a cluster that starts Ray (C(site.yml), C(scale.yml), C(upgrade.yml),
        C(remove_node.yml)); every host must set C(raygate_num_cpus), C(raygate_num_gpus) and
        C(raygate_memory).
      - V(gate) is the health gate alone (C(health.yml)), which never starts Ray; only
        C(raygate_num_gpus) must be set, and C(raygate_num_cpus) and C(raygate_memory) are
        checked only where a host sets them. Every other rule is the same.
    type: str
    choices: [cluster, gate]
    default: cluster
    version_added: 0.5.0
"""

EXAMPLES = r"""
- name: Validate the cluster inventory
  raygate.cluster.validate_inventory:
    defaults:
      ray_version: "{{ raygate_ray_version }}"
      ray_extras: "{{ raygate_ray_extras }}"
      auth: "{{ raygate_auth }}"
  register: raygate_cluster

- name: Validate for the health gate alone (no Ray resource amounts needed)
  raygate.cluster.validate_inventory:
    purpose: gate
    defaults:
      ray_version: "{{ raygate_ray_version }}"
      ray_extras: "{{ raygate_ray_extras }}"
"""

RETURN = r"""
errors:
  description: Every problem found (empty when the inventory is valid).
  returned: always
  type: list
  elements: str
  sample: ["the inventory group 'ray_head' must hold exactly one host (the Ray head); found none. Put one host in it."]
cluster:
  description:
    - The head, the workers, the port plan and the expected nodes.
    - C(runs_as_root) lists the hosts whose C(raygate_user) is V(root).
  returned: always
  type: dict
  sample:
    head: node1
    workers: [node2, node3]
    plan: {gcs: 6379}
    nodes: [{name: node1, ip: 198.18.0.11}]
    gpus: 24
    runs_as_root: []
"""
