# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: slurm
short_description: Ray cluster groups from a Slurm allocation, a hostlist or a partition
version_added: 0.5.0
description:
  - Builds C(ray_cluster) with C(ray_head) (the first node, in Slurm's order) and C(ray_workers)
    (the others) from one source, the first one set of
  - O(job_id), a job's nodes (C(scontrol -o show job)); the job must be running.
  - O(partition), the partition's nodes in one of O(states) (C(sinfo -N -p ... -t ...)).
  - O(nodelist), a Slurm hostlist such as C(gpu[01-04]); inside a job it defaults to
    E(SLURM_JOB_NODELIST), so an sbatch script can bring Ray up over its own allocation.
  - Each host's C(ansible_host) is its C(NodeAddr) from C(scontrol -o show node) (with
    O(lookup_addresses)), and C(raygate_slurm_node_name) its Slurm name, so the health gate's
    Slurm step (C(raygate_slurm)) drains the right node.
  - The inventory file's name must end in C(slurm.yml) or C(slurm.yaml).
requirements:
  - C(scontrol) and C(sinfo) (Debian package C(slurm-client)) on the controller, with the cluster's
    C(slurm.conf) and munge key
author: raygate maintainers (@raygate)
extends_documentation_fragment:
  - constructed
options:
  plugin:
    description: The name of this plugin; it must be V(raygate.cluster.slurm).
    type: str
    required: true
    choices: [raygate.cluster.slurm]
  job_id:
    description: A running job whose nodes become the cluster.
    type: str
  partition:
    description: A partition whose nodes in one of O(states) become the cluster (when O(job_id) is not set).
    type: str
  states:
    description: Node states for O(partition), as C(sinfo -t) takes them.
    type: list
    elements: str
    default: [idle]
  nodelist:
    description: A Slurm hostlist (when neither O(job_id) nor O(partition) is set).
    type: str
    env:
      - name: SLURM_JOB_NODELIST
  lookup_addresses:
    description: Set C(ansible_host) from each node's C(NodeAddr).
    type: bool
    default: true
  slurm_conf:
    description: The slurm.conf the Slurm commands read; default Slurm's own.
    type: path
    env:
      - name: SLURM_CONF
  scontrol:
    description: The scontrol binary.
    type: str
    default: scontrol
  sinfo:
    description: The sinfo binary.
    type: str
    default: sinfo
  timeout:
    description: Seconds each Slurm command may take.
    type: int
    default: 30
  cluster_group:
    description: The group holding head and workers.
    type: str
    default: ray_cluster
  head_group:
    description: The head's group.
    type: str
    default: ray_head
  worker_group:
    description: The workers' group.
    type: str
    default: ray_workers
"""

EXAMPLES = r"""
# inventories/allocation/slurm.yml: the nodes of job 4242, the first one heads
plugin: raygate.cluster.slurm
job_id: "4242"

# inside an sbatch script, SLURM_JOB_NODELIST is the source:
#   printf 'plugin: raygate.cluster.slurm\n' > slurm.yml && ansible-playbook -i slurm.yml raygate.cluster.site
# plugin: raygate.cluster.slurm

# every idle node of partition gpu, with a group per GRES
# plugin: raygate.cluster.slurm
# partition: gpu
# states: [idle]
# keyed_groups:
#   - key: slurm_gres
#     prefix: gres
"""

from ansible.errors import AnsibleError, AnsibleParserError
from ansible.plugins.inventory import BaseInventoryPlugin, Constructable

from ansible_collections.raygate.cluster.plugins.module_utils._runner import CommandError, CommandRunner
from ansible_collections.raygate.cluster.plugins.module_utils.gate import slurm


class InventoryModule(BaseInventoryPlugin, Constructable):
    NAME = "raygate.cluster.slurm"

    def verify_file(self, path):
        return super().verify_file(path) and path.endswith(("slurm.yml", "slurm.yaml"))

    def _run(self, runner, binary, args):
        path = runner.which(binary)
        if not path:
            raise AnsibleError("slurm inventory: %s not found (install slurm-client)" % binary)
        try:
            rc, out, err = runner.run([path] + args)
        except CommandError as exc:
            raise AnsibleError("slurm inventory: %s" % exc) from exc
        if rc != 0:
            message = (err or out).strip()
            raise AnsibleError("slurm inventory: %s %s failed (rc %d): %s" % (binary, " ".join(args), rc, message))
        return out

    def node_names(self, runner):
        """The cluster's Slurm node names, in Slurm's order, from the first source set."""
        job_id, partition = self.get_option("job_id"), self.get_option("partition")
        scontrol = self.get_option("scontrol")
        if job_id:
            job = slurm.parse_show_job(self._run(runner, scontrol, ["-o", "show", "job", str(job_id)]))
            if job.get("JobState") != "RUNNING" or not job["nodes"]:
                state = job.get("JobState")
                raise AnsibleError("slurm inventory: job %s is %s, not running on nodes" % (job_id, state))
            return job["nodes"]
        if partition:
            states = ",".join(self.get_option("states"))
            out = self._run(runner, self.get_option("sinfo"), ["-h", "-N", "-p", partition, "-t", states, "-o", "%N"])
            names = []
            for line in out.split():
                names += [n for n in slurm.expand_hostlist(line) if n not in names]
            return names
        nodelist = self.get_option("nodelist")
        if not nodelist:
            raise AnsibleParserError("slurm inventory: set job_id, partition or nodelist (or run inside a job)")
        try:
            return slurm.expand_hostlist(nodelist)
        except ValueError as exc:
            raise AnsibleParserError("slurm inventory: %s" % exc) from exc

    def parse(self, inventory, loader, path, cache=True):
        super().parse(inventory, loader, path, cache)
        self._read_config_data(path)
        runner = CommandRunner(timeout=self.get_option("timeout"))
        if self.get_option("slurm_conf"):
            runner.base_env["SLURM_CONF"] = self.get_option("slurm_conf")
        names = self.node_names(runner)
        if not names:
            raise AnsibleError("slurm inventory: the source names no node")
        nodes = {}
        if self.get_option("lookup_addresses"):
            listed = slurm.compress_hostlist(names)
            out = self._run(runner, self.get_option("scontrol"), ["-o", "show", "node", listed])
            nodes = slurm.parse_show_node(out)
        cluster, head, workers = (self.get_option(k) for k in ("cluster_group", "head_group", "worker_group"))
        for group in (cluster, head, workers):
            self.inventory.add_group(group)
        self.inventory.add_child(cluster, head)
        self.inventory.add_child(cluster, workers)
        strict = self.get_option("strict")
        for index, name in enumerate(names):
            self.inventory.add_host(name, group=head if index == 0 else workers)
            node = nodes.get(name, {})
            hostvars = {
                "raygate_slurm_node_name": name,
                "slurm_state": node.get("state"),
                "slurm_partitions": node.get("partitions", []),
                "slurm_gres": node.get("gres"),
            }
            if node.get("address"):
                hostvars["ansible_host"] = node["address"]
            for key, value in hostvars.items():
                self.inventory.set_variable(name, key, value)
            self._set_composite_vars(self.get_option("compose"), hostvars, name, strict=strict)
            self._add_host_to_composed_groups(self.get_option("groups"), hostvars, name, strict=strict)
            self._add_host_to_keyed_groups(self.get_option("keyed_groups"), hostvars, name, strict=strict)
