#!/usr/bin/python
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: node_steps
short_description: Run several raygate steps on one node in one call
version_added: 0.3.0
description:
  - Runs the work of M(raygate.cluster.ray_install), M(raygate.cluster.ray_node),
    M(raygate.cluster.nccl_env) and M(raygate.cluster.ray_firewall) in one module call, so a
    node pays for one round trip and one Python start instead of one per module.
  - Each step gets the options of its module in a dict and behaves exactly as that module
    does with the same options; its result is returned under the step's name in RV(step_results).
  - Steps that are not given do not run; the given ones run in the order of O(order).
  - All input problems (a step missing from O(order), a token inside O(ray_node)) fail the
    task before any step runs. A step's own options are validated when its turn comes.
  - The role uses it where one node needs several steps at once - the read-only preflight
    (all four, in check mode, every problem reported), site.yml's install, NCCL environment and
    firewall (those the preflight found to do) and taking a node out (Ray, firewall, NCCL
    environment) - where it saves a round trip and a Python start per step, about 1.5 s a node on
    a re-run. Every single-step task calls its own module.
requirements:
  - those of the modules whose steps are given, M(raygate.cluster.ray_install), M(raygate.cluster.ray_node),
    M(raygate.cluster.nccl_env) and M(raygate.cluster.ray_firewall)
author:
  - raygate maintainers (@raygate)
extends_documentation_fragment:
  - raygate.cluster.attributes
attributes:
  check_mode:
    support: full
    details: In check mode every step runs in check mode, exactly as its module does.
  diff_mode:
    support: partial
    details:
      - RV(diff) is the list of the steps' diffs, each as its module gives it
        (M(raygate.cluster.ray_install) has none, M(raygate.cluster.ray_node) a partial one).
options:
  ray_install:
    description:
      - The options of M(raygate.cluster.ray_install), validated exactly as that module validates
        them (defaults applied, types coerced; unknown and missing options fail naming the step).
      - Omitted or null, the step does not run.
      - Must not contain C(registry_password); give it as this module's own option O(registry_password).
    type: dict
  ray_node:
    description:
      - The options of M(raygate.cluster.ray_node), validated exactly as that module validates
        them (defaults applied, types coerced; unknown and missing options fail naming the step).
      - Omitted or null, the step does not run.
      - Must not contain C(auth_token), C(redis_password) or C(tls_key); give each as this module's own
        option of that name instead (O(auth_token), O(redis_password), O(tls_key)), which is masked in logs.
    type: dict
  nccl_env:
    description:
      - The options of M(raygate.cluster.nccl_env), validated exactly as that module validates
        them (defaults applied, types coerced; unknown and missing options fail naming the step).
      - Omitted or null, the step does not run.
    type: dict
  ray_firewall:
    description:
      - The options of M(raygate.cluster.ray_firewall), validated exactly as that module
        validates them (defaults applied, types coerced; unknown and missing options fail naming
        the step).
      - Omitted or null, the step does not run.
    type: dict
  node_watch:
    description:
      - The options of M(raygate.cluster.node_watch), validated exactly as that module
        validates them. Runs only where O(order) names it (the default order does not).
      - Omitted or null, the step does not run.
    type: dict
    version_added: 0.5.0
  order:
    description:
      - The order in which the given steps run. Every given step must be listed; listed steps
        that are not given are skipped. A name may appear once.
    type: list
    elements: str
    choices: [ray_install, ray_node, nccl_env, ray_firewall, node_watch]
    default: [ray_install, ray_node, nccl_env, ray_firewall]
  auth_token:
    description:
      - The cluster's auth token, passed to the O(ray_node) step as its C(auth_token) option.
        Ignored when O(ray_node) is not given.
      - It is a separate option because a value nested in the free-form O(ray_node) dict would
        not be masked in the node's log; this one is never shown in output, logs or diffs.
    type: str
  redis_password:
    description:
      - The GCS Redis password, passed to the O(ray_node) step as its C(redis_password) option.
        Ignored when O(ray_node) is not given.
      - A separate option for the reason O(auth_token) is one; never shown in output, logs or diffs.
    type: str
    version_added: 0.5.0
  tls_key:
    description:
      - The node's TLS private key, passed to the O(ray_node) step as its C(tls_key) option.
        Ignored when O(ray_node) is not given.
      - A separate option for the reason O(auth_token) is one; never shown in output, logs or diffs.
    type: str
    version_added: 0.5.0
  registry_password:
    description:
      - The container registry's password, passed to the O(ray_install) step as its C(registry_password)
        option. Ignored when O(ray_install) is not given.
      - A separate option for the reason O(auth_token) is one; never shown in output, logs or diffs.
    type: str
    version_added: 0.5.0
  continue_on_failure:
    description:
      - V(false) stops at the first step that fails.
      - V(true) runs every step, then fails when any of them failed, naming all of them. Meant
        for a read-only preflight (check mode) that should report every problem at once.
    type: bool
    default: false
seealso:
  - module: raygate.cluster.ray_install
  - module: raygate.cluster.ray_node
  - module: raygate.cluster.nccl_env
  - module: raygate.cluster.ray_firewall
  - module: raygate.cluster.node_watch
"""

EXAMPLES = r"""
- name: Preflight - report what would change and every invalid input, in one call per node
  raygate.cluster.node_steps:
    continue_on_failure: true
    auth_token: "{{ raygate_auth_token }}"
    ray_install:
      version: 2.60.0
      wheelhouse: /srv/raygate/wheelhouse
    ray_node:
      role: worker
      node_ip: 10.0.0.2
      head_ip: 10.0.0.1
      num_cpus: 96
      num_gpus: 8
      memory: 800000000000
    nccl_env:
      node_ip: 10.0.0.2
    ray_firewall:
      role: worker
      sources: [10.0.0.0/24]
  check_mode: true
  register: preflight

- name: Tear down a worker - stop Ray, close its ports, remove the NCCL environment
  raygate.cluster.node_steps:
    order: [ray_node, ray_firewall, nccl_env]
    ray_node:
      role: worker
      state: absent
    ray_firewall:
      state: absent
    nccl_env:
      state: absent
"""

RETURN = r"""
steps:
  description: The steps that ran, in the order they ran (a failed one included).
  returned: always
  type: list
  elements: str
  sample: [ray_install, ray_node, nccl_env, ray_firewall]
step_results:
  description:
    - Step name to that step's result, exactly what its module returns (C(changed) included).
    - Not named C(results), which Ansible reserves for loops (it renames a C(results) that is not a list).
    - A failed step's entry has C(failed=true), its C(msg) and the other keys its module returns on failure.
  returned: always
  type: dict
  sample:
    ray_install: {changed: false, installed: false, venv: /opt/raygate/ray-2.60.0-py3.11}
    ray_node: {changed: false, pid: 4242, restarted: false}
failed_step:
  description:
    - The step that failed, or with O(continue_on_failure=true) the list of every failed step.
  returned: on failure
  type: raw
  sample: ray_node
diff:
  description: The steps' diffs, in step order; a diff without a header gets the step's name as header.
  returned: in diff mode
  type: list
  elements: dict
  sample: [{before: "", after: "NCCL_SOCKET_IFNAME==eth0", before_header: /etc/raygate/nccl.env}]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.raygate.cluster.plugins.module_utils.node import steps


def main():
    module = AnsibleModule(
        argument_spec=steps.ARGUMENT_SPEC,
        supports_check_mode=True,
    )
    steps.run(module)


if __name__ == "__main__":
    main()
