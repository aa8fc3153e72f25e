#!/usr/bin/python
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: cluster_lock
short_description: One run at a time per Ray cluster, by a lock on the head
version_added: 0.5.0
description:
  - Takes (O(state=held)) or gives back (O(state=released)) the cluster lock, a file on the head
    (O(path)) naming the run that holds it - the user, the controller, the ansible-playbook process,
    the playbook and since when - so that two runs of C(site.yml), C(scale.yml), C(upgrade.yml),
    C(remove_node.yml) or C(teardown.yml) never change one cluster at the same time.
  - The waiting is done by this collection's action plugin of the same name, which Ansible always
    runs for this module. It names the run, then calls the module on the head every O(interval)
    seconds on the controller's monotonic clock until the lock is free, printing who holds it every
    30 seconds. After O(wait) seconds it fails naming the holder, having changed nothing.
  - A lock left behind is taken over, with a warning. Whether its run is gone is seen only by the
    controller that ran it (its ansible-playbook process no longer runs), which takes it over at
    once. The lock of a run from another controller is taken over on its age alone, once it is
    O(stale) seconds old, so set O(stale) above the longest run you make.
  - The lock's own file is bookkeeping, not a change of the cluster. The module never reports
    C(changed), so a re-run that changes nothing still says C(changed=0).
requirements:
  - the head reachable over the task's connection (delegate the task to it)
author:
  - raygate maintainers (@raygate)
extends_documentation_fragment:
  - raygate.cluster.attributes
attributes:
  check_mode:
    support: full
    details:
      - Takes nothing and waits for nothing; warns when another run holds the lock.
  diff_mode:
    support: none
options:
  state:
    description:
      - V(held) takes the lock for this run, waiting for another run to give it back.
      - V(released) gives back this run's lock; another run's lock is left as it is.
    type: str
    choices: [held, released]
    default: held
  path:
    description: The lock file on the head (mode 0600).
    type: path
    default: /var/lib/raygate/cluster.lock
  playbook:
    description: The playbook of this run, as the lock names it to a waiting run (for example V(site)).
    type: str
    required: true
  wait:
    description: Seconds to wait for another run's lock (the role's C(raygate_cluster_lock_wait)).
    type: int
    default: 600
  stale:
    description:
      - Age in seconds after which the lock of a run from another controller is taken over (the role's
        C(raygate_cluster_lock_stale)). A run of this controller is judged by its process instead. Seen
        running, it keeps its lock however old; gone, its lock is taken over at once.
    type: int
    default: 900
  interval:
    description: Seconds between two looks at the lock while waiting.
    type: float
    default: 5.0
  holder:
    description:
      - This run, as the action plugin names it. Set by the action plugin; a value given in the task
        is replaced.
    type: dict
  take_over:
    description: The id of a stale holder whose lock to take. Set by the action plugin only.
    type: str
notes:
  - A run gives the lock back in its summary play. One that ends before it (ansible-playbook
    killed, or interrupted with Ctrl-C) leaves the lock behind, for the next run to take over.
"""

EXAMPLES = r"""
- name: One run at a time on this cluster
  raygate.cluster.cluster_lock:
    playbook: site
    wait: 1200
  delegate_to: "{{ groups['ray_head'][0] }}"
  run_once: true

- name: Give the lock back at the end of the run
  raygate.cluster.cluster_lock:
    state: released
    playbook: site
  delegate_to: "{{ groups['ray_head'][0] }}"
  run_once: true
"""

RETURN = r"""
action:
  description:
    - What this call did - V(take) (the lock is now this run's), V(keep) (it already was), V(busy)
      (another run holds it), V(release) (given back) or V(none) (nothing of this run's to give back).
  returned: always
  type: str
  sample: take
holder:
  description:
    - The run that holds the lock after this call, with its C(since) (epoch seconds, the head's clock)
      and C(age).
  returned: when the lock is held
  type: dict
  sample: {id: "ctl1:4242:183764", user: root, controller: ctl1, pid: 4242, playbook: site, since: 1795926000, age: 3}
taken_over:
  description: The stale holder this call took the lock from, or null.
  returned: always
  type: dict
  sample: null
waited:
  description: Seconds spent waiting for the lock (V(state=held) outside check mode).
  returned: when O(state=held) and not in check mode
  type: float
  sample: 0.4
path:
  description: The lock file.
  returned: always
  type: str
  sample: /var/lib/raygate/cluster.lock
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.raygate.cluster.plugins.module_utils.node import cluster_lock
from ansible_collections.raygate.cluster.plugins.module_utils.node.cluster_lock import ARGUMENT_SPEC


def main():
    # The same spec as the action plugin's, which does all waiting: the module answers once.
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    cluster_lock.run(module)


if __name__ == "__main__":
    main()
