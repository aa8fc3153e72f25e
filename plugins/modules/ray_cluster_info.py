#!/usr/bin/python
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: ray_cluster_info
short_description: Report the alive nodes of a Ray cluster, and wait until it is complete
version_added: 0.1.0
description:
  - Asks the head's state API (C(/api/v0/nodes), authenticated with the cluster token) for
    the cluster's nodes with their address, state, resources and labels.
  - Optionally waits until at least O(wait_nodes) nodes and O(wait_gpus) GPUs are alive. On
    timeout it fails naming the hosts of O(expected) that never joined.
  - The waiting (O(wait), O(wait_timeout), O(wait_sleep)) is done by this collection's action
    plugin of the same name, which Ansible always runs for this module. It validates the options
    on the controller, then calls the module once per poll on the controller's monotonic clock
    and shows progress (nodes and GPUs joined so far) instead of retries. The module on the host
    answers once per call.
requirements:
  - the host the module runs on (normally the head) reaches O(dashboard_url) over HTTP or HTTPS
  - with O(auth), the token in O(auth_token_file) on that host
  - nothing else on the nodes; the waiting loop runs on the controller (the action plugin)
author:
  - raygate maintainers (@raygate)
extends_documentation_fragment:
  - raygate.cluster.attributes
  - raygate.cluster.attributes.INFO_MODULE
  - raygate.cluster.wait
options:
  dashboard_url:
    description: URL of the head's dashboard.
    type: str
    required: true
  auth:
    description: Send the cluster token (needed when the cluster runs with token authentication).
    type: bool
    default: true
  auth_token_file:
    description: File holding the token on the host that runs this module.
    type: path
    default: /etc/raygate/auth_token
  expected:
    description:
      - The nodes that should be in the cluster, each with a V(name) (inventory host) and
        V(ip) (the node IP it starts Ray with). Used to name the missing ones.
    type: list
    elements: dict
    default: []
  wait_nodes:
    description:
      - Wait until at least this many nodes are alive. V(0) does not wait for nodes.
      - Also the node target of RV(complete), with or without O(wait).
    type: int
    default: 0
  wait_gpus:
    description:
      - Wait until at least this many GPUs are alive in total. V(0) does not wait for GPUs.
      - Also the GPU target of RV(complete), with or without O(wait).
    type: float
    default: 0
  request_timeout:
    description: Seconds for one request to the state API.
    type: int
    default: 10
  ca_path:
    description:
      - With an C(https://) O(dashboard_url) (raygate's HTTPS proxy), the CA bundle on the host the module
        runs on that the server's certificate must chain to, such as the cluster CA C(/etc/raygate/tls/ca.crt).
        Unset, the system's CAs. The certificate is always checked before the token is sent.
    type: path
    version_added: 0.5.0
notes:
  - In check mode an unreachable head is reported with RV(reachable=false) instead of failing,
    since the cluster may not exist yet; nor does check mode wait, it reports the cluster once.
  - With O(wait) and neither O(wait_nodes) nor O(wait_gpus) above V(0), there is nothing to wait
    for and the cluster is reported once.
"""

EXAMPLES = r"""
- name: Ask the head's HTTPS dashboard for the cluster, trusting the cluster CA
  raygate.cluster.ray_cluster_info:
    dashboard_url: https://10.0.0.1:8265
    ca_path: /etc/raygate/tls/ca.crt

- name: Wait until the three nodes and their 24 GPUs are alive
  raygate.cluster.ray_cluster_info:
    dashboard_url: http://10.0.0.1:8265
    wait_nodes: 3
    wait_gpus: 24
    wait_timeout: 600
    expected:
      - {name: gpu-a, ip: 10.0.0.1}
      - {name: gpu-b, ip: 10.0.0.2}
      - {name: gpu-c, ip: 10.0.0.3}
  register: cluster

- name: Show the alive nodes
  ansible.builtin.debug:
    msg: "{{ cluster.nodes | map(attribute='ip') | list }}"
"""

RETURN = r"""
reachable:
  description: Whether the state API answered.
  returned: always
  type: bool
  sample: true
nodes:
  description: Alive nodes.
  returned: always
  type: list
  elements: dict
  sample: [{node_id: 3f1c, ip: 10.0.0.1, name: 10.0.0.1, is_head: true, state: ALIVE,
            resources: {CPU: 2.0, GPU: 8.0}, labels: {}}]
alive_gpus:
  description: Each alive node's address and the GPUs it offers, for a node to look itself up in once.
  returned: always
  type: dict
  sample: {10.0.0.1: 8.0, 10.0.0.2: 8.0}
  version_added: 0.5.0
alive_nodes:
  description: Number of alive nodes.
  returned: always
  type: int
  sample: 3
total_gpus:
  description: GPUs of all alive nodes.
  returned: always
  type: float
  sample: 24.0
total_cpus:
  description: CPUs of all alive nodes.
  returned: always
  type: float
  sample: 6.0
missing:
  description: Names of O(expected) nodes whose IP is not among the alive nodes.
  returned: always
  type: list
  elements: str
  sample: [gpu-c]
complete:
  description: Whether the O(wait_nodes) and O(wait_gpus) targets are met.
  returned: always
  type: bool
  sample: true
elapsed:
  description: Seconds spent waiting (V(0) when it did not wait).
  returned: always
  type: float
  sample: 4.2
ray_version:
  description:
    - The Ray version the head runs, from its C(/api/version); null when that did not answer
      (for example a Ray without it, or a head that is down).
  returned: always
  type: str
  sample: 2.60.0
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.raygate.cluster.plugins.module_utils.node import cluster
from ansible_collections.raygate.cluster.plugins.module_utils.node.cluster import ARGUMENT_SPEC


def main():
    # The same spec as the action plugin's, which does all waiting: the module answers once.
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    cluster.run(module)


if __name__ == "__main__":
    main()
