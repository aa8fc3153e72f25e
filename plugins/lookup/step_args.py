# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: step_args
author: raygate maintainers (@raygate)
version_added: 0.5.0
short_description: The arguments of one raygate role step, from the task's variables
description:
  - Builds the argument dict of one step of the C(raygate) role (or one derived value) from the
    variables of the task that uses it; the role's C(vars/main.yml) names each result, for example
    C(raygate_node_args).
  - The logic is in C(plugins/plugin_utils/step_args.py), with unit tests; this lookup only reads the
    variables each step lists, each templated once, and the controller files a start needs.
  - Optional options that are empty are left out of the dict.
  - Meant for the role's own variables; its steps and their results may change with the role.
options:
  _terms:
    description:
      - The step's name, one of V(plan), V(gcs), V(dashboard), V(removal), V(ray_install), V(ray_node),
        V(nccl_env), V(ray_firewall), V(watch_query), V(watch_present), V(watch_absent), V(gpu_health),
        V(nccl_single), V(nccl_pair), V(health_report), V(configure).
    type: list
    elements: str
    required: true
notes:
  - V(ray_node) reads the node's TLS certificate and the CA certificate from the controller (as the
    C(ansible.builtin.file) lookup does) only when the node starts with TLS.
"""

EXAMPLES = r"""
# roles/_common/vars/main.yml
raygate_node_args: "{{ lookup('raygate.cluster.step_args', 'ray_node') }}"
_raygate_configure: "{{ lookup('raygate.cluster.step_args', 'configure') }}"
"""

RETURN = r"""
_raw:
  description:
    - The step's arguments (a dict), the port plan (a dict), or a configure step's selection (a bool).
  type: raw
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.loader import lookup_loader
from ansible.plugins.lookup import LookupBase

from ansible_collections.raygate.cluster.plugins.module_utils.net.port_plan import PortPlanError
from ansible_collections.raygate.cluster.plugins.plugin_utils import step_args as sa


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        variables = variables or {}

        def fetch(name):
            value = variables[name]
            # Ansible's own variables as they are; the role's templated here (2.16 hands them over untemplated).
            return value if name in sa.RAW else self._templar.template(value)

        def read(path):
            reader = lookup_loader.get("file", loader=self._loader, templar=self._templar)
            return reader.run([path], variables=variables)[0]

        try:
            return [sa.build(str(term), fetch, variables.__contains__, read) for term in terms]
        except (sa.StepArgsError, PortPlanError, ValueError) as exc:
            raise AnsibleLookupError(str(exc)) from exc
