#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: run_summary
short_description: Say which nodes a raygate run left out and why, and set the exit status
version_added: 0.4.0
description:
  - The last task of every raygate playbook. It reads what each node's play left in its host
    variables (C(raygate_run_ok) when the node got through, C(raygate_out) with C(status),
    C(task) and C(error) when it left), asks the SSH port of a node that left without a reason
    (it stopped answering during a step), and writes C(<dest>/<playbook>.json).
  - The result is V(complete) (every node in), V(degraded) (a cluster, or a passed gate, with
    named nodes out), V(no_cluster) (site, scale or upgrade without a working head, or the
    gate's verdict failed), V(gate_failed) (health.yml's verdict failed), V(incomplete)
    (teardown or remove_node could not finish every node; run it again), V(failed)
    (upgrade.yml did not take; the message says whether every node runs the old version again) or
    V(busy) (another run held the cluster lock, so this run changed nothing; the message names that run).
  - The task fails for V(no_cluster), V(gate_failed), V(incomplete), V(failed) and V(busy), so C(ansible-playbook)
    exits 2 for those and 0 for V(complete) and V(degraded); the file tells those two apart.
  - This is an action plugin; it runs on the controller only.
requirements:
  - runs on the controller; no requirement on the nodes (a node that left without a reason only has its SSH
    port probed)
author:
  - raygate maintainers (@raygate)
extends_documentation_fragment:
  - raygate.cluster.attributes
  - raygate.cluster.attributes.INFO_MODULE
options:
  playbook:
    description: The raygate playbook that ran; it decides what a missing head or node means.
    type: str
    required: true
    choices: [health, remove_node, scale, site, teardown, upgrade]
  hosts:
    description: Every node of the run (inventory names).
    type: list
    elements: str
    required: true
  head:
    description: Inventory name of the Ray head.
    type: str
    required: true
  answers:
    description:
      - The names of the variables a node's run leaves, by what they hold; the raygate role passes its
        C(raygate_answers) (C(roles/_common/vars/main.yml)).
      - C(run_ok) (true once the node got through the run), C(out) (C({status, task, error}) of a node that
        left the run), C(health) (the health gate's verdict, M(raygate.cluster.health_report)'s result) and
        C(steps), the registered answers of the remote steps as C([variable, step]) pairs in the order they run;
        a node that left without an C(out) is reported by the first of them that failed or was unreachable.
    type: dict
    required: true
    version_added: 0.5.0
  gate_message:
    description: The health gate's verdict when it failed (the head unhealthy, too few nodes).
    type: str
  dest:
    description: Directory of the summary file, created when missing.
    type: path
    default: artifacts/runs
  probe_timeout:
    description: Seconds to wait for the SSH port of a node that left without a reason.
    type: float
    default: 5.0
  write:
    description: Write the file (not in check mode).
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Write the run summary and set the exit status
  raygate.cluster.run_summary:
    playbook: site
    hosts: "{{ ansible_play_hosts_all }}"
    head: node1
    answers: "{{ raygate_answers }}"
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
result:
  description: V(complete), V(degraded), V(no_cluster), V(gate_failed), V(incomplete), V(failed) or V(busy).
  returned: always
  type: str
  sample: degraded
in:
  description: The nodes that got through the run.
  returned: always
  type: list
  elements: str
  sample: [node1, node2]
out:
  description:
    - The nodes left out, each with C(status) (V(unreachable), V(failed), V(unhealthy), V(stopped) or V(busy)),
      C(task) and C(error).
  returned: always
  type: dict
  sample:
    node3:
      status: unreachable
      task: preflight
      error: "ssh: connect to host 198.18.0.13 port 22: No route to host"
message:
  description: One line for people.
  returned: always
  type: str
  sample: "site: 2 of 3 nodes in; out: node3 unreachable: ..."
path:
  description: The summary file written.
  returned: when written
  type: str
  sample: artifacts/runs/site.json
head:
  description: The head of the run.
  returned: always
  type: str
  sample: node1
playbook:
  description: The playbook the summary is for.
  returned: always
  type: str
  sample: site
finished_at:
  description: When the summary was made (UTC, ISO 8601).
  returned: always
  type: str
  sample: "2026-11-23T22:15:00Z"
"""
