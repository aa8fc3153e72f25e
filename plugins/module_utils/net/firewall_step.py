# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The work of raygate.cluster.ray_firewall, runnable by its module or as a node_steps step."""

from __future__ import annotations

from ansible_collections.raygate.cluster.plugins.module_utils._runner import CommandError, CommandRunner
from ansible_collections.raygate.cluster.plugins.module_utils.net import firewall as fw
from ansible_collections.raygate.cluster.plugins.module_utils.net import port_plan as pp
from ansible_collections.raygate.cluster.plugins.module_utils.net.firewall_backends import registry


class RayFirewall:
    def __init__(self, module, runner):
        self.module = module
        self.p = module.params
        self.runner = runner
        self.check = module.check_mode
        self.warnings = []

    # -- helpers ----------------------------------------------------------------------
    def fail(self, msg, **kwargs):
        self.module.fail_json(msg=msg, **kwargs)

    def run(self, args, data=None):
        try:
            return self.runner.run(args, data=data)
        except CommandError as exc:
            self.fail(str(exc))

    def must(self, args, data=None, what=None):
        rc, out, err = self.run(args, data=data)
        if rc != 0:
            detail = (err or out).strip()[-2000:]
            self.fail("%s failed (rc=%s): %s" % (what or " ".join(args), rc, detail), rc=rc, command=args)
        return out

    # -- the desired state ------------------------------------------------------------
    def plan(self):
        """Built and validated exactly as ray_node does, so both modules agree on the ports."""
        return pp.node_plan_or_fail(self.p, self.fail)

    def desired(self):
        plan = self.plan()
        ports = pp.firewall_ports(plan, self.p["role"])
        known = [entry["name"] for entry in pp.firewall_ports(plan, "head")]
        try:
            desired = fw.build_desired(
                ports,
                self.p["sources"],
                admin_sources=self.p["admin_sources"],
                admin_ports=self.p["admin_ports"],
                known_names=known,
                allow_any=self.p["allow_any_source"],
                store_ports=pp.store_firewall_ports(plan) if self.p["gcs_store"] else [],
                store_sources=self.p["gcs_store_sources"],
                prometheus_sources=self.p["prometheus_sources"],
                node_exporter_port=self.p["node_exporter_port"],
            )
        except fw.FirewallError as exc:
            self.fail(str(exc))
        self.warnings += desired["warnings"]
        return desired

    # -- the run ----------------------------------------------------------------------
    def apply(self):
        present = self.p["state"] == "present"
        try:
            fw.check_table_name(self.p["table"])
        except fw.FirewallError as exc:
            self.fail(str(exc))
        desired = self.desired() if present else None
        name, backend = registry.choose(self)
        if present:
            changed, diff = backend.present(desired)
            result = {
                "ports": desired["ports"],
                "sources": fw.net_text(desired["cluster"]),
                "admin_sources": fw.net_text(desired["admin"]),
                "prometheus_sources": fw.net_text(desired["prometheus"]),
                "prometheus_ports": desired["prometheus_ports"],
                "rules": fw.neutral_rules(desired),
            }
        else:
            changed, diff = backend.absent()
            result = {
                "ports": [],
                "sources": [],
                "admin_sources": [],
                "prometheus_sources": [],
                "prometheus_ports": [],
                "rules": [],
            }
        result.update(changed=changed, backend=name)
        result.update(backend.result())
        if self.module._diff:
            result["diff"] = diff
        return result


ARGUMENT_SPEC = dict(
    state=dict(type="str", choices=["present", "absent"], default="present"),
    backend=dict(type="str", choices=["auto"] + list(registry.BACKENDS), default="auto"),
    role=dict(type="str", choices=["head", "worker"], default="worker"),
    sources=dict(type="list", elements="str", default=[]),
    admin_sources=dict(type="list", elements="str", default=[]),
    admin_ports=dict(type="list", elements="str", default=["dashboard"]),
    allow_any_source=dict(type="bool", default=False),
    deny_action=dict(type="str", choices=["drop", "reject"], default="drop"),
    table=dict(type="str", default="raygate"),
    zone=dict(type="str"),
    rules_file=dict(type="path", default="/etc/raygate/firewall.nft"),
    boot=dict(type="bool", default=False),
    unit_dir=dict(type="path", default="/etc/systemd/system"),
    gcs_store=dict(type="bool", default=False),
    gcs_store_sources=dict(type="list", elements="str", default=[]),
    prometheus_sources=dict(type="list", elements="str", default=[]),
    node_exporter_port=dict(type="int", default=9100),
    **pp.plan_argspec(),
)


def run(module):
    """Apply or remove the rules as ``module.params`` say; ends with ``module.exit_json`` or ``fail_json``."""
    firewall = RayFirewall(module, CommandRunner(timeout=120))
    result = firewall.apply()
    for warning in firewall.warnings:
        module.warn(warning)
    module.exit_json(**result)
