#!/usr/bin/python
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: slurm_gate
short_description: Drain the Slurm nodes that failed the health gate, resume the ones raygate drained
version_added: 0.5.0
description:
  - Runs on a host where C(scontrol) reaches the Slurm controller (the controller itself, or any
    host with the cluster's C(slurm.conf) and munge key). Reads every node with
    C(scontrol -o show node), decides, and in O(mode=drain) runs one C(scontrol update) per node.
  - >-
    A node that failed the gate (a key of O(unhealthy)), including one that did not answer, is
    drained with reason C(raygate: <check>: <detail>) (C(raygate: unreachable: ...) for a node that
    did not answer), cut to O(reason_max) characters. Only C(State=DRAIN) is ever set, never
    C(DOWN): a node running jobs goes DRAINING and its jobs finish.
  - >-
    A node that passed (in O(healthy)) is resumed only when it is drained or down with a reason that
    starts with C(raygate:). A node drained, down or failed for any other reason (an admin's
    maintenance, Slurm's own C(Not responding)) is left as it is, passing or failing, and the
    result says so.
  - >-
    A node already drained by raygate with the same reason is left as it is; with a different
    raygate reason it is drained again with the new one.
  - With O(breaker_tripped) (the health report's circuit breaker) nothing is drained or resumed,
    because a tripped report lists every node as healthy, so a node that failed would look like one to resume.
  - O(mode=report) and check mode read the node states and return the commands that would run,
    changing nothing.
requirements:
  - C(scontrol) (Debian package C(slurm-client)) on the host the module runs on, able to reach
    C(slurmctld); the cluster's munge key there
  - C(State=DRAIN) and C(State=RESUME) need Slurm's root, SlurmUser or an operator account
author: raygate maintainers (@raygate)
extends_documentation_fragment:
  - raygate.cluster.attributes
attributes:
  check_mode:
    support: full
    details:
      - Reads the node states and returns the commands O(mode=drain) would run; runs none.
  diff_mode:
    support: none
options:
  mode:
    description:
      - V(report) returns the C(scontrol) commands that V(drain) would run and changes nothing.
      - V(drain) runs them.
    type: str
    choices: [report, drain]
    default: report
  healthy:
    description: Hosts that passed the gate in this run (the health report's C(healthy)).
    type: list
    elements: str
    default: []
  unhealthy:
    description:
      - >-
        Hosts that failed or did not answer, each with its reasons as C(check: detail) (the health
        report's C(unhealthy)).
    type: dict
    default: {}
  skipped:
    description: Hosts that were not re-checked in this run; their Slurm nodes are left as they are.
    type: list
    elements: str
    default: []
  names:
    description: Slurm node name of each host whose name differs from its inventory name.
    type: dict
    default: {}
  breaker_tripped:
    description: The health report's circuit breaker tripped; drain and resume nothing.
    type: bool
    default: false
  reason_max:
    description:
      - Longest drain reason, in characters. Slurm 22.05 stores far longer ones, but C(sinfo -R)
        shows the first 20 by default and C(scontrol show node) prints the whole reason on the node's line.
    type: int
    default: 80
  scontrol:
    description: The scontrol binary (a name on PATH or an absolute path).
    type: str
    default: scontrol
  slurm_conf:
    description: The C(slurm.conf) scontrol reads (E(SLURM_CONF)); default Slurm's own (C(/etc/slurm/slurm.conf)).
    type: path
  timeout:
    description: Seconds each scontrol call may take.
    type: int
    default: 60
notes:
  - Between reading a node's state and updating it an admin may drain it; the update then replaces
    the admin's reason (Slurm has no compare-and-set). Run it where that window is short.
seealso:
  - module: raygate.cluster.health_report
  - plugin: raygate.cluster.slurm
    plugin_type: inventory
"""

EXAMPLES = r"""
- name: Show what would be drained and resumed (nothing changes)
  raygate.cluster.slurm_gate:
    mode: report
    healthy: "{{ raygate_health.healthy }}"
    unhealthy: "{{ raygate_health.unhealthy }}"
  delegate_to: slurm-controller
  run_once: true

- name: Drain the failing nodes, resume the ones raygate drained before
  raygate.cluster.slurm_gate:
    mode: drain
    healthy: [gpu01, gpu02]
    unhealthy: {gpu03: ["xid: Xid 79 on GPU 3 (PCI:0000:5d:00)"]}
    names: {gpu01: gpu-a01}
    slurm_conf: /etc/slurm/slurm.conf
  delegate_to: slurm-controller
  run_once: true
"""

RETURN = r"""
mode:
  description: The mode it ran in (V(report) in check mode too).
  returned: always
  type: str
  sample: drain
commands:
  description: The scontrol commands run (V(drain)) or that would run (V(report), check mode), shell-quoted.
  returned: always
  type: list
  elements: str
  sample: ["scontrol update NodeName=node2 State=DRAIN 'Reason=raygate: xid: Xid 79 on GPU 3'"]
nodes:
  description:
    - One entry per host, in the order unhealthy, then healthy (C(skipped) first).
    - C(action) is V(drain), V(resume) or V(none); C(note) says why; C(state) and C(reason) are the
      node's before; C(new_reason) the drain reason; C(state_after) the node's state after V(drain).
  returned: always
  type: list
  elements: dict
  sample:
    - {host: node2, node: node2, action: drain, note: "draining: its running jobs finish first",
       state: MIXED, reason: "", new_reason: "raygate: xid: Xid 79 on GPU 3", state_after: MIXED+DRAIN}
drained:
  description: Slurm nodes drained (or that would be).
  returned: always
  type: list
  elements: str
  sample: [node2]
resumed:
  description: Slurm nodes resumed (or that would be).
  returned: always
  type: list
  elements: str
  sample: [node3]
left_alone:
  description: Slurm nodes drained or down for a reason that is not raygate's, with that reason.
  returned: always
  type: dict
  sample: {node1: "admin: maintenance window"}
summary:
  description: One line per node for the play output.
  returned: always
  type: list
  elements: str
  sample: ["slurm node2: drained (raygate: xid: Xid 79 on GPU 3)", "slurm node1: in service"]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.raygate.cluster.plugins.module_utils.gate import slurm_step


def main():
    module = AnsibleModule(
        argument_spec=slurm_step.ARGUMENT_SPEC,
        supports_check_mode=True,
    )
    slurm_step.run(module)


if __name__ == "__main__":
    main()
