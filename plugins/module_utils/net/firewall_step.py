# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The work of raygate.cluster.ray_firewall, runnable by its module or as a node_steps step."""

from __future__ import annotations

import os

from ansible_collections.raygate.cluster.plugins.module_utils import files
from ansible_collections.raygate.cluster.plugins.module_utils._runner import CommandError, CommandRunner
from ansible_collections.raygate.cluster.plugins.module_utils.files import (
    remove_empty_parent,
    remove_path,
    write_file,
)
from ansible_collections.raygate.cluster.plugins.module_utils.net import firewall as fw
from ansible_collections.raygate.cluster.plugins.module_utils.net import port_plan as pp

TOOLS = {"nftables": "nft", "firewalld": "firewall-cmd", "ufw": "ufw"}
BACKEND_VAR = "raygate_firewall_backend"


def _lines_text(lines):
    return "".join(line + "\n" for line in lines)


def render_boot_unit(nft, rules_file, table):
    """A oneshot that loads the saved ruleset at boot, ordered as Debian's nftables.service is
    (early, before the network), after it so that its `flush ruleset` cannot wipe our table."""
    return _lines_text(
        [
            "# Managed by raygate.cluster.ray_firewall: local changes are overwritten.",
            "[Unit]",
            "Description=raygate firewall (nftables table inet %s)" % table,
            "DefaultDependencies=no",
            "Wants=network-pre.target",
            "After=local-fs.target nftables.service",
            "Before=network-pre.target shutdown.target",
            "Conflicts=shutdown.target",
            "",
            "[Service]",
            "Type=oneshot",
            "RemainAfterExit=yes",
            "ExecStart=%s -f %s" % (nft, rules_file),
            "",
            "[Install]",
            "WantedBy=sysinit.target",
        ]
    )


class RayFirewall:
    def __init__(self, module, runner):
        self.module = module
        self.p = module.params
        self.runner = runner
        self.check = module.check_mode
        self.warnings = []
        self.ufw_state = None
        self.zone = None

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

    # -- which backend ----------------------------------------------------------------
    def firewalld_running(self, binary):
        rc, out, err = self.run([binary, "--state"])
        return rc == 0 and out.strip() == "running", (out or err).strip()

    def read_ufw_state(self, binary):
        if self.ufw_state is None:
            out = self.must([binary, "status", "verbose"])
            self.ufw_state = fw.parse_ufw_status(out)
        return self.ufw_state

    def detect(self):
        """(backend, binary): the explicit backend after checking its tool, or the auto choice."""
        wanted = self.p["backend"]
        if wanted != "auto":
            binary = self.runner.which(TOOLS[wanted])
            if not binary:
                self.fail(
                    "backend %s was requested but %s is not installed on this host; install it or set backend "
                    "(the role variable %s) to auto or another backend" % (wanted, TOOLS[wanted], BACKEND_VAR)
                )
            if wanted == "firewalld":
                running, said = self.firewalld_running(binary)
                if not running:
                    self.fail(
                        "backend firewalld was requested but firewalld is not running (firewall-cmd --state: %s); "
                        "start firewalld or set backend (the role variable %s)" % (said or "no answer", BACKEND_VAR)
                    )
            return wanted, binary
        binary = self.runner.which("firewall-cmd")
        if binary and self.firewalld_running(binary)[0]:
            return "firewalld", binary
        binary = self.runner.which("ufw")
        if binary and self.read_ufw_state(binary)["active"]:
            return "ufw", binary
        binary = self.runner.which("nft")
        if binary:
            return "nftables", binary
        self.fail(
            "no supported firewall on this host: firewalld is not running, ufw is not active and nft is not "
            "installed; install nftables, or set backend (the role variable %s)" % BACKEND_VAR
        )

    # -- nftables ---------------------------------------------------------------------
    def nft_listing(self, nft):
        table = self.p["table"]
        rc, out, err = self.run([nft, "list", "table", "inet", table])
        if rc == 0:
            return out
        if fw.nft_missing_table(err):
            return None
        self.fail("nft list table inet %s failed (rc=%s): %s" % (table, rc, (err or out).strip()))

    def nft_present(self, nft, desired):
        if self.p["boot"] and not (self.runner.which("systemctl") and files.systemd_booted()):
            self.fail(
                "boot is true but systemd is not the init system here (no systemctl, or no %s), so nothing would load "
                "the rules at boot; set boot (the role variable raygate_firewall_boot) to false and load %s yourself"
                % (files.SYSTEMD_RUNTIME_DIR, self.p["rules_file"])
            )
        text, digest = fw.nft_ruleset(desired, self.p["table"], self.p["deny_action"])
        listing = self.nft_listing(nft)
        loaded = listing is not None and fw.nft_table_matches(listing, digest)
        if not loaded:
            # Check mode still proves the ruleset loads: nft -c runs the transaction without committing it.
            args = [nft, "-c", "-f", "-"] if self.check else [nft, "-f", "-"]
            self.must(args, data=text, what="loading the raygate ruleset (%s)" % " ".join(args))
        file_changed, _diff = write_file(self.p["rules_file"], text, mode=0o644, check_mode=self.check)
        boot_changed = self.boot_present(nft) if self.p["boot"] else self.boot_absent()
        return not loaded or file_changed or boot_changed, {"before": listing or "", "after": text}

    def nft_absent(self, nft):
        listing = self.nft_listing(nft)
        if listing is not None and not self.check:
            self.must([nft, "delete", "table", "inet", self.p["table"]])
        boot_removed = self.boot_absent()
        removed = remove_path(self.p["rules_file"], check_mode=self.check)
        remove_empty_parent(self.p["rules_file"], check_mode=self.check)
        return listing is not None or removed or boot_removed, {"before": listing or "", "after": ""}

    # -- loading the nftables rules at boot (systemd) ---------------------------------
    @property
    def boot_unit_name(self):
        return "%s-firewall.service" % self.p["table"]

    @property
    def boot_unit_path(self):
        return os.path.join(self.p["unit_dir"], self.boot_unit_name)

    def boot_present(self, nft):
        """Install and enable the unit that loads rules_file at boot; True when it changed."""
        systemctl = self.runner.which("systemctl")
        text = render_boot_unit(nft, self.p["rules_file"], self.p["table"])
        changed = write_file(self.boot_unit_path, text, mode=0o644, check_mode=self.check)[0]
        rc, out, err = self.run([systemctl, "is-enabled", self.boot_unit_name])
        enabled = rc == 0 and out.strip() == "enabled"
        if not self.check:
            if changed:
                self.must([systemctl, "daemon-reload"])
            if not enabled:
                self.must([systemctl, "enable", self.boot_unit_name])
        return changed or not enabled

    def boot_absent(self):
        """Disable and remove the boot unit if raygate installed one; True when it did."""
        if not os.path.lexists(self.boot_unit_path):
            return False
        if not self.check:
            systemctl = self.runner.which("systemctl")
            if systemctl:
                # --now: after a boot the oneshot is active (RemainAfterExit); leave nothing loaded.
                self.run([systemctl, "disable", "--now", self.boot_unit_name])
            remove_path(self.boot_unit_path)
            if systemctl:
                self.must([systemctl, "daemon-reload"])
        return True

    # -- firewalld --------------------------------------------------------------------
    def firewalld_current(self, cmd):
        """(our ipsets {name: entries}, our rich rules in the zone), from the permanent configuration."""
        if self.zone is None:
            self.zone = self.p["zone"] or self.must([cmd, "--get-default-zone"]).strip()
        names = fw.owned_ipsets(fw.parse_ipset_names(self.must([cmd, "--permanent", "--get-ipsets"])))
        sets = {}
        for name in names:
            sets[name] = fw.parse_lines(self.must([cmd, "--permanent", "--ipset=%s" % name, "--get-entries"]))
        listed = self.must([cmd, "--permanent", "--zone=%s" % self.zone, "--list-rich-rules"])
        return sets, fw.owned_rich_rules(fw.parse_lines(listed))

    def firewalld_apply(self, cmd, changes):
        zone = "--zone=%s" % self.zone
        # Permanent configuration only, applied by the one reload at the end, so the order below
        # only has to satisfy firewalld's checks: stale entries leave before new ones arrive
        # (hash:net refuses overlapping entries), ipsets exist before rules reference them, and
        # rules that reference an ipset leave before it is deleted.
        if changes["remove_rules"]:
            self.must([cmd, "--permanent", zone] + ["--remove-rich-rule=%s" % r for r in changes["remove_rules"]])
        for name in changes["new_ipsets"]:
            family = fw.IPSET_FAMILY[fw.ipset_version(name)]
            self.must([cmd, "--permanent", "--new-ipset=%s" % name, "--type=hash:net", "--option=family=%s" % family])
        for name, entries in changes["remove_entries"].items():
            self.must([cmd, "--permanent", "--ipset=%s" % name] + ["--remove-entry=%s" % e for e in entries])
        for name, entries in changes["add_entries"].items():
            self.must([cmd, "--permanent", "--ipset=%s" % name] + ["--add-entry=%s" % e for e in entries])
        for name in changes["delete_ipsets"]:
            self.must([cmd, "--permanent", "--delete-ipset=%s" % name])
        if changes["add_rules"]:
            self.must([cmd, "--permanent", zone] + ["--add-rich-rule=%s" % r for r in changes["add_rules"]])
        self.must([cmd, "--reload"])

    def firewalld_sync(self, cmd, wanted_sets, wanted_rules):
        sets, rules = self.firewalld_current(cmd)
        changes = fw.firewalld_changes(wanted_sets, wanted_rules, sets, rules)
        changed = fw.has_changes(changes)
        if changed and not self.check:
            self.firewalld_apply(cmd, changes)
        diff = {
            "before": _lines_text(fw.firewalld_lines(sets, rules, self.zone)),
            "after": _lines_text(fw.firewalld_lines(wanted_sets, wanted_rules, self.zone)),
        }
        return changed, diff

    def firewalld_present(self, cmd, desired):
        return self.firewalld_sync(cmd, fw.firewalld_ipsets(desired), fw.firewalld_rich_rules(desired))

    def firewalld_absent(self, cmd):
        return self.firewalld_sync(cmd, {}, [])

    # -- ufw --------------------------------------------------------------------------
    def ufw_warnings(self, ufw):
        state = self.read_ufw_state(ufw)
        if not state["active"]:
            self.warnings.append(
                "ufw is inactive: raygate's rules are stored but not enforced until ufw is enabled "
                "(raygate never runs ufw enable; allow SSH before enabling it)"
            )
        elif state["default_incoming"] == "allow":
            self.warnings.append(
                "ufw's default incoming policy is allow: raygate's allow rules restrict nothing and the Ray ports "
                "stay open to everybody; set 'ufw default deny incoming' (SSH allowed first) to close them"
            )

    def ufw_sync(self, ufw, wanted):
        current = fw.parse_ufw_added(self.must([ufw, "show", "added"]))
        add, delete = fw.ufw_changes(wanted, current)
        if not self.check:
            # Add before deleting, so an active ufw never has a moment without the cluster's rules.
            for rule in add:
                self.must([ufw] + fw.ufw_args(rule))
            for rule in delete:
                self.must([ufw] + fw.ufw_args(rule, delete=True))
        diff = {
            "before": _lines_text(sorted("ufw " + r for r in current)),
            "after": _lines_text(sorted("ufw " + r for r in wanted)),
        }
        return bool(add or delete), diff

    def ufw_present(self, ufw, desired):
        self.ufw_warnings(ufw)
        return self.ufw_sync(ufw, fw.ufw_rules(desired))

    def ufw_absent(self, ufw):
        return self.ufw_sync(ufw, [])

    # -- the run ----------------------------------------------------------------------
    def apply(self):
        present = self.p["state"] == "present"
        try:
            fw.check_table_name(self.p["table"])
        except fw.FirewallError as exc:
            self.fail(str(exc))
        desired = self.desired() if present else None
        backend, binary = self.detect()
        if present:
            handler = {"nftables": self.nft_present, "firewalld": self.firewalld_present, "ufw": self.ufw_present}
            changed, diff = handler[backend](binary, desired)
            result = {
                "ports": desired["ports"],
                "sources": fw.net_text(desired["cluster"]),
                "admin_sources": fw.net_text(desired["admin"]),
                "prometheus_sources": fw.net_text(desired["prometheus"]),
                "prometheus_ports": desired["prometheus_ports"],
                "rules": fw.neutral_rules(desired),
            }
        else:
            handler = {"nftables": self.nft_absent, "firewalld": self.firewalld_absent, "ufw": self.ufw_absent}
            changed, diff = handler[backend](binary)
            result = {
                "ports": [],
                "sources": [],
                "admin_sources": [],
                "prometheus_sources": [],
                "prometheus_ports": [],
                "rules": [],
            }
        result.update(changed=changed, backend=backend)
        if backend == "firewalld":
            result["zone"] = self.zone
        if self.module._diff:
            result["diff"] = diff
        return result


ARGUMENT_SPEC = dict(
    state=dict(type="str", choices=["present", "absent"], default="present"),
    backend=dict(type="str", choices=["auto", "nftables", "firewalld", "ufw"], default="auto"),
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
