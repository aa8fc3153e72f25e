#!/usr/bin/python
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: gate_node_checks
short_description: Run a node's own health-gate checks, GPUs then nccl-tests, in one call
version_added: 0.5.0
description:
  - Runs the work of M(raygate.cluster.gpu_health) and then, on a node it found healthy, the single-node
    test of M(raygate.cluster.nccl_test), in one module call, so the node pays for one round trip and one
    Python start instead of two. The raygate role's health gate (site.yml, health.yml, scale.yml) uses it.
  - Each step gets the options of its module in a dict and behaves exactly as that module does with the
    same options; its result is returned under the step's name in RV(step_results), which the
    P(raygate.cluster.step_result#filter) filter reads.
  - The nccl-tests step runs with the fabric that the GPU checks detected (C(fabric.fabric) of their
    result), where they detected one, in place of the O(nccl_test) dict's C(fabric); so its default
    bandwidth threshold and required transport follow the node's real fabric.
  - On a node the GPU checks found unhealthy, or without O(nccl_test), the nccl-tests step does not run;
    its entry in RV(step_results) is then a skipped result (C(skipped=true) and C(skip_reason)).
  - As with the two modules, an unhealthy node does not fail the task; only invalid options (or a step
    that cannot run at all) do, naming the step.
requirements:
  - those of M(raygate.cluster.gpu_health) and, with O(nccl_test), of M(raygate.cluster.nccl_test) in
    its single-node mode
author:
  - raygate maintainers (@raygate)
extends_documentation_fragment:
  - raygate.cluster.attributes
attributes:
  check_mode:
    support: full
    details: Both steps run their checks in check mode too, as their modules do; nothing changes.
  diff_mode:
    support: none
    details: Changes nothing, so there is nothing to show.
options:
  gpu_health:
    description:
      - The options of M(raygate.cluster.gpu_health), validated exactly as that module validates them
        (defaults applied, types coerced; unknown options fail naming the step).
    type: dict
    required: true
  nccl_test:
    description:
      - The options of M(raygate.cluster.nccl_test), validated exactly as that module validates them.
        Its C(mode) must be V(single) (the default), since the pair tests run from one launcher for many nodes.
      - Omitted or null, the nccl-tests step does not run.
    type: dict
seealso:
  - module: raygate.cluster.gpu_health
  - module: raygate.cluster.nccl_test
"""

EXAMPLES = r"""
- name: GPU checks, then nccl-tests over the node's 8 GPUs, in one call
  raygate.cluster.gate_node_checks:
    gpu_health:
      expected_gpus: 8
      driver_version: "550.90.07"
    nccl_test:
      gpus: 8
      env_file: /etc/raygate/nccl.env
      env_file_optional: true
  register: node_checks

- name: The GPU checks' verdict and the nccl-tests' bus bandwidth
  ansible.builtin.debug:
    msg:
      - "{{ (node_checks | raygate.cluster.step_result('gpu_health')).verdict }}"
      - "{{ (node_checks | raygate.cluster.step_result('nccl_test')).busbw | default('not run') }}"
"""

RETURN = r"""
steps:
  description: The steps that ran, in the order they ran (a failed one included).
  returned: always
  type: list
  elements: str
  sample: [gpu_health, nccl_test]
step_results:
  description:
    - C(gpu_health) and C(nccl_test), each exactly what its module returns (see their RETURN values).
    - C(nccl_test) is a skipped result (C(skipped=true), C(skip_reason)) when the step did not run.
    - A failed step's entry has C(failed=true), its C(msg) and the other keys its module returns on failure.
  returned: always
  type: dict
  sample:
    gpu_health: {changed: false, healthy: true, verdict: pass, fabric: {fabric: ib}}
    nccl_test: {changed: false, healthy: true, verdict: pass, busbw: 481.2, fabric: ib}
verdict:
  description: The worst verdict of the steps that ran, V(fail), V(warn) or V(pass).
  returned: success
  type: str
  sample: pass
healthy:
  description: RV(verdict) is not V(fail).
  returned: success
  type: bool
  sample: true
failed_step:
  description: The step that failed.
  returned: on failure
  type: str
  sample: gpu_health
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.raygate.cluster.plugins.module_utils.gate import node_checks


def main():
    module = AnsibleModule(
        argument_spec=node_checks.ARGUMENT_SPEC,
        supports_check_mode=True,
    )
    node_checks.run(module)


if __name__ == "__main__":
    main()
