# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Controller-side validation of the whole cluster inventory (no host is contacted)."""

from __future__ import annotations

from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase

from ansible_collections.raygate.cluster.plugins.plugin_utils import role_spec
from ansible_collections.raygate.cluster.plugins.plugin_utils.inventory import PURPOSES, root_warning, validate

# Variables read per host, without their raygate_ prefix.
KEYS = (
    "ray_version",
    "ray_extras",
    "auth",
    "ports",
    "port_offset",
    "min_worker_ports",
    "num_cpus",
    "num_gpus",
    "memory",
    "python_version_match_level",
    "user",
    "runtime",
    "container_engine",
    "image",
    "image_allow_tag",
)

# Mirrors the options in plugins/modules/validate_inventory.py's DOCUMENTATION (that module file holds
# only the documentation: this plugin is all of validate_inventory).
ARGUMENT_SPEC = {
    "head_group": {"type": "str", "default": "ray_head"},
    "worker_group": {"type": "str", "default": "ray_workers"},
    "defaults": {"type": "dict", "default": {}},
    "pair_partner": {"type": "str", "default": ""},
    "purpose": {"type": "str", "default": "cluster", "choices": list(PURPOSES)},
}


class ActionModule(ActionBase):
    _supports_check_mode = True
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        # Types and defaults as documented; a bad value fails here in the validator's words.
        args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)[1]
        head_group = args["head_group"]
        worker_group = args["worker_group"]
        defaults = args["defaults"]
        unknown = sorted(set(defaults) - set(KEYS))
        if unknown:
            raise AnsibleError("validate_inventory: unknown defaults %s; known: %s" % (unknown, ", ".join(KEYS)))
        groups = task_vars.get("groups", {})
        heads = list(groups.get(head_group, []))
        workers = list(groups.get(worker_group, []))
        # The role's argument spec, once for every node (site.yml's import no longer checks it per node).
        errors = role_spec.check_hosts(role_spec.load_options(), task_vars["hostvars"], heads + workers)
        hostvars = {h: self._host_values(task_vars["hostvars"][h], h, defaults) for h in set(heads + workers)}
        more, summary = validate(head_group, heads, workers, hostvars, args["pair_partner"], args["purpose"])
        errors += more
        result.update(changed=False, errors=errors, cluster=summary)
        warning = root_warning(summary["runs_as_root"]) if args["purpose"] == "cluster" else None
        if warning:
            result["warnings"] = [warning]
        if errors:
            result.update(failed=True, msg="the inventory is not a valid raygate cluster:\n- " + "\n- ".join(errors))
        return result

    @staticmethod
    def _host_values(hv, host, defaults):
        values = {}
        for key in KEYS:
            name = "raygate_" + key
            values[key] = hv[name] if name in hv else defaults.get(key)
        for name in ("raygate_node_ip", "ansible_host"):
            if name in hv and hv[name]:
                values["node_ip"] = hv[name]
                break
        else:
            values["node_ip"] = host
        return values
