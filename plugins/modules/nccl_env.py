#!/usr/bin/python
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: nccl_env
short_description: Detect the node's fabric and write a validated NCCL/libfabric environment
version_added: 0.2.0
description:
  - Detects the RDMA fabric of the node (AWS EFA, InfiniBand, RoCE or none) from
    C(sys/class/infiniband) under O(sysfs_root), C(fi_info -p efa) and C(ibstat) when they
    are installed, with the active devices and ports.
  - Builds the environment from the fabric's profile (EFA C(FI_PROVIDER), C(FI_EFA_FORK_SAFE),
    C(FI_EFA_USE_DEVICE_RDMA) when O(require_gdr) is on, buffer and chunk sizes; InfiniBand
    and RoCE C(NCCL_IB_HCA) from the active ports, C(NCCL_NET_GDR_LEVEL), C(NCCL_IB_GID_INDEX)
    for RoCE; C(NCCL_SOCKET_IFNAME) everywhere), then applies O(env) on top.
  - Validates the result before writing anything. Unknown C(NCCL_*), C(FI_*) and C(OFI_NCCL_*)
    names are errors with a suggestion, values are type-checked, and contradictions are
    errors. Examples of contradictions are C(NCCL_IB_DISABLE=1) on an InfiniBand fabric, an
    interface or HCA filter that matches nothing on this host, and C(NCCL_NET=Socket) while
    O(require_gdr) is on.
  - Writes O(path), the environment file the Ray node reads (M(raygate.cluster.ray_node)
    O(raygate.cluster.ray_node#module:env_files)), so the raylet and every Ray worker process
    inherit it. Optionally also writes NCCL's own O(nccl_conf_path).
  - The list of known variable names, with the versions it was taken from, lives in one data
    file, C(plugins/module_utils/net/nccl_known.py).
requirements:
  - Linux sysfs of the RDMA devices and network interfaces (C(sys/class/infiniband), C(sys/class/net) under
    O(sysfs_root))
  - C(fi_info) and C(ibstat) only when installed, to confirm the fabric
author: raygate maintainers (@raygate)
extends_documentation_fragment:
  - raygate.cluster.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
options:
  state:
    description:
      - V(present) writes the environment; V(absent) removes O(path) and O(nccl_conf_path)
        when raygate wrote it.
    type: str
    choices: [present, absent]
    default: present
  path:
    description: The environment file (C(KEY=VALUE) lines, readable by systemd and a shell).
    type: path
    default: /etc/raygate/nccl.env
  fabric:
    description:
      - The fabric to configure. V(auto) uses what is detected.
      - V(efa), V(ib) or V(roce) must match what is detected, or the module fails.
      - V(none) turns RDMA off even where a fabric exists (C(NCCL_IB_DISABLE=1)); it needs
        O(require_gdr=false).
    type: str
    choices: [auto, efa, ib, roce, none]
    default: auto
  sysfs_root:
    description:
      - Root under which C(sys/class/infiniband) and C(sys/class/net) are read. The sandbox
        points it at a simulated tree.
    type: path
    default: /
  node_ip:
    description:
      - The node's cluster address. Without O(socket_ifname), the interface that holds it
        becomes C(NCCL_SOCKET_IFNAME).
    type: str
  socket_ifname:
    description:
      - C(NCCL_SOCKET_IFNAME) (comma list of prefixes, C(^) excludes, C(=) means exact).
        Must match an interface of this host.
    type: str
  require_gdr:
    description:
      - Refuse settings that keep NCCL off GPUDirect RDMA (C(NCCL_NET=Socket),
        C(NCCL_NET_GDR_LEVEL=LOC), C(FI_EFA_USE_DEVICE_RDMA=0), no RDMA fabric).
    type: bool
    default: true
  force_net:
    description: Set C(NCCL_NET) for the fabric, so NCCL fails instead of falling back to sockets.
    type: bool
    default: false
  env:
    description:
      - Variables applied over the profile. A null value removes a profile variable.
        Booleans become C(1) and C(0).
    type: dict
    default: {}
  allow_names:
    description:
      - C(NCCL_*), C(FI_*) or C(OFI_NCCL_*) names to accept without checking, for a plugin
        variable newer than the list raygate knows.
    type: list
    elements: str
    default: []
  nccl_conf:
    description: Also write the C(NCCL_*) variables to O(nccl_conf_path).
    type: bool
    default: false
  nccl_conf_path:
    description:
      - NCCL's configuration file. raygate removes it (with O(nccl_conf=false) or
        O(state=absent)) only when it wrote it.
    type: path
    default: /etc/nccl.conf
notes:
  - A running Ray node keeps the environment it started with. M(raygate.cluster.ray_node) sees
    the new file and restarts the node only with its C(restart_on_change) option.
seealso:
  - module: raygate.cluster.ray_node
"""

EXAMPLES = r"""
- name: Detect the fabric and write /etc/raygate/nccl.env
  raygate.cluster.nccl_env:
    node_ip: "{{ ansible_host }}"

- name: EFA on p5, no fallback to TCP, with a site override
  raygate.cluster.nccl_env:
    fabric: efa
    node_ip: "{{ ansible_host }}"
    force_net: true
    env:
      NCCL_DEBUG: WARN

- name: A development node without RDMA
  raygate.cluster.nccl_env:
    fabric: none
    require_gdr: false
    socket_ifname: "=eth0"

- name: Remove the environment raygate wrote
  raygate.cluster.nccl_env:
    state: absent
"""

RETURN = r"""
fabric:
  description: What was detected on the node.
  returned: when O(state=present)
  type: dict
  sample:
    fabric: ib
    active_ports: ["mlx5_0:1", "mlx5_1:1"]
    down_ports: ["mlx5_2:1"]
    gid_index: null
    libfabric_efa: null
    interfaces: [eth0, lo]
    tools: {fi_info: null, ibstat: /usr/sbin/ibstat}
env:
  description: The environment written to O(path).
  returned: when O(state=present)
  type: dict
  sample:
    NCCL_IB_HCA: "=mlx5_0:1,mlx5_1:1"
    NCCL_NET_GDR_LEVEL: PHB
    NCCL_SOCKET_IFNAME: "=eth0"
path:
  description: The environment file.
  returned: always
  type: str
  sample: /etc/raygate/nccl.env
errors:
  description: Every validation problem found (the module fails when there is one).
  returned: on failure
  type: list
  elements: str
  sample: ["NCCL_IB_HCAS is not a known NCCL variable; did you mean NCCL_IB_HCA?"]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.raygate.cluster.plugins.module_utils.net import env_step


def main():
    module = AnsibleModule(
        argument_spec=env_step.ARGUMENT_SPEC,
        supports_check_mode=True,
    )
    env_step.run(module)


if __name__ == "__main__":
    main()
