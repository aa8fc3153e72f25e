# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The cluster's TLS material, made and kept on the controller (no host is contacted)."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.raygate.cluster.plugins.plugin_utils import tls

# Mirrors the options in plugins/modules/cluster_tls.py's DOCUMENTATION (that module file holds only
# the documentation: this plugin is all of cluster_tls).
ARGUMENT_SPEC = {
    "dir": {"type": "path", "required": True},
    "nodes": {"type": "list", "elements": "dict", "required": True},
    "ca_cert": {"type": "path"},
    "ca_key": {"type": "path", "no_log": False},
    "ca_days": {"type": "int", "default": 3650},
    "cert_days": {"type": "int", "default": 365},
    "renew_days": {"type": "int", "default": 30},
}


class ActionModule(ActionBase):
    _supports_check_mode = True
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)[1]
        problems = self._problems(args)
        if problems:
            return dict(result, failed=True, changed=False, msg="cluster_tls: " + "; ".join(problems))
        try:
            if args["ca_cert"]:
                ca = tls.user_ca(args["ca_cert"], args["ca_key"])
            else:
                ca = tls.ensure_ca(args["dir"], args["ca_days"])
            nodes = {}
            for node in args["nodes"]:
                nodes[node["name"]] = tls.ensure_node(
                    args["dir"], ca, node["name"], [str(node["ip"])], args["cert_days"], args["renew_days"]
                )
        except (tls.TlsError, OSError) as exc:
            return dict(result, failed=True, changed=False, msg="cluster_tls: %s" % exc)
        issued = sorted(name for name, node in nodes.items() if node["issued"])
        result.update(changed=ca.made or bool(issued), ca=ca.describe(), nodes=nodes, issued=issued)
        return result

    @staticmethod
    def _problems(args):
        problems = []
        if bool(args["ca_cert"]) != bool(args["ca_key"]):
            problems.append("give both ca_cert and ca_key (your own CA), or neither (raygate makes one)")
        for key in ("ca_days", "cert_days"):
            if args[key] < 1:
                problems.append("%s must be at least 1" % key)
        if args["renew_days"] < 0 or args["renew_days"] >= args["cert_days"]:
            problems.append(
                "renew_days (%d) must be 0 or more and less than cert_days (%d), or every run would renew"
                % (args["renew_days"], args["cert_days"])
            )
        for node in args["nodes"]:
            if not isinstance(node, dict) or not node.get("name") or not node.get("ip"):
                problems.append("each of nodes needs a name and an ip, not %r" % (node,))
        return problems
