#!/usr/bin/python
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: node_watch
short_description: Install, remove or read raygate's node watcher
version_added: 0.5.0
description:
  - The node watcher (C(raygate_node_watch.py), in the node-check bundle) runs the health gate's
    node checks between playbook runs and takes a worker found do-not-allocate out of Ray (a drain
    with a deadline, then its raylet stops), unless the fleet's circuit breaker, asked through the
    head's GCS, holds. Degraded findings only report.
  - With O(supervisor=systemd) it is a oneshot service and a timer every C(interval) seconds; with
    O(supervisor=process) a daemon in a session of its own, which outlives a Ray restart, restarted
    when its settings or script change.
  - O(state=absent) stops it and removes its settings, units, state directory and textfile.
    O(state=query) changes nothing and returns what the watcher last found in RV(watch).
requirements:
  - python3 on the node, and the node-check bundle (the role's node_check.yml) holding the watcher script
  - systemd for O(supervisor=systemd); a Ray virtualenv and a running Ray node for the watcher to take it out
author:
  - raygate maintainers (@raygate)
extends_documentation_fragment:
  - raygate.cluster.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: partial
    details: The settings file and the systemd units show as diffs; the daemon's start does not.
options:
  state:
    description: Whether the watcher runs (V(present)), is gone (V(absent)), or is only read (V(query)).
    type: str
    choices: [present, absent, query]
    default: present
  supervisor:
    description: Who runs it, as the Ray node is run (the role's C(raygate_supervisor)).
    type: str
    choices: [process, systemd]
    default: process
  settings:
    description:
      - The watcher's settings, written as JSON to O(config_path) (mode 0644; it holds no secret,
        only paths). The role builds them; C(interval), C(role) and C(node_ip) are required.
      - Required with O(state=present).
    type: dict
  config_path:
    description: Where the settings go.
    type: path
    default: /etc/raygate/watch.json
  script:
    description: The watcher script on the node.
    type: path
    default: /opt/raygate/node-check/raygate_node_watch.py
  python:
    description: The Python that runs the watcher (the system's; Ray's virtualenv is used only to reach the GCS).
    type: path
    default: /usr/bin/python3
  state_dir:
    description: The watcher's state, log and fabric counter history; removed with O(state=absent).
    type: path
    default: /var/lib/raygate/watch
  run_dir:
    description: Where the daemon's pid file lives (process supervisor).
    type: path
    default: /run/raygate
  unit_dir:
    description: Directory of the systemd units.
    type: path
    default: /etc/systemd/system
  unit_name:
    description: Name of the service and of the timer (without suffix).
    type: str
    default: raygate-watch
  textfile:
    description: The watcher's node_exporter textfile, removed with O(state=absent) (the watcher writes it).
    type: path
    default: ""
  remove_also:
    description:
      - More files and directories O(state=absent) removes, that were installed for the watcher
        (the role passes the node-check bundle, unless C(raygate_node_check) keeps it for Slurm).
    type: list
    elements: path
    default: []
seealso:
  - module: raygate.cluster.gpu_health
  - module: raygate.cluster.node_steps
"""

EXAMPLES = r"""
- name: Watch this node every 5 minutes under systemd
  raygate.cluster.node_watch:
    supervisor: systemd
    settings:
      interval: 300
      role: worker
      node_ip: 10.0.0.12
      head_ip: 10.0.0.11
      gcs_port: 6379
    textfile: /var/lib/node_exporter/textfile_collector/raygate_watch.prom

- name: What did the watcher find?
  raygate.cluster.node_watch:
    state: query
  register: watched

- name: Remove it
  raygate.cluster.node_watch:
    state: absent
"""

RETURN = r"""
watch:
  description:
    - The watcher's state before this task ran ({} when it never ran). C(taken_out) is set
      (C(at), C(check), C(reason)) while it has the node out of Ray; C(refused) says why it
      did not take out a bad node (C(breaker), C(head), C(lock), C(ray)); C(deferred) that a run
      held Ray's lock then (C(why) C(busy), C(holder)); C(pending) lists the findings of a take-out
      not done, which the next watch run judges again over the gate's kernel log window;
      C(pending_fabric) holds those of the fabric counters' growth (C(finding), C(at), C(boot_id)),
      acted on again for the gate's fabric window on the same boot.
  returned: always
  type: dict
  sample:
    verdict: do-not-allocate
    last_run: 1795000000.0
    take_out: ["xid: Xid 79 on GPU 3"]
    taken_out: {at: 1795000000.0, check: xid, reason: "raygate-watch: xid: Xid 79 on GPU 3"}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.raygate.cluster.plugins.module_utils.node import watch_step


def main():
    module = AnsibleModule(
        argument_spec=watch_step.ARGUMENT_SPEC,
        required_if=watch_step.REQUIRED_IF,
        supports_check_mode=True,
    )
    watch_step.run(module)


if __name__ == "__main__":
    main()
