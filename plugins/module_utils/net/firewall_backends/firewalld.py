# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""ray_firewall's firewalld backend: ipsets raygate owns and the rich rules that reference them,
in the permanent configuration of one zone, applied by one reload."""

from __future__ import annotations

from ansible_collections.raygate.cluster.plugins.module_utils.net import firewall as fw
from ansible_collections.raygate.cluster.plugins.module_utils.net.firewall_backends.base import (
    BACKEND_VAR,
    FirewallBackend,
    lines_text,
)


class Firewalld(FirewallBackend):
    TOOL = "firewall-cmd"

    def __init__(self, step, binary):
        super().__init__(step, binary)
        self.zone = None

    def running(self):
        rc, out, err = self.run([self.binary, "--state"])
        return rc == 0 and out.strip() == "running", (out or err).strip()

    def unusable(self):
        running, said = self.running()
        if running:
            return None
        return (
            "backend firewalld was requested but firewalld is not running (firewall-cmd --state: %s); "
            "start firewalld or set backend (the role variable %s)" % (said or "no answer", BACKEND_VAR)
        )

    def in_use(self):
        return self.running()[0]

    def current(self):
        """(our ipsets {name: entries}, our rich rules in the zone), from the permanent configuration."""
        cmd = self.binary
        if self.zone is None:
            self.zone = self.p["zone"] or self.must([cmd, "--get-default-zone"]).strip()
        names = fw.owned_ipsets(fw.parse_ipset_names(self.must([cmd, "--permanent", "--get-ipsets"])))
        sets = {}
        for name in names:
            sets[name] = fw.parse_lines(self.must([cmd, "--permanent", "--ipset=%s" % name, "--get-entries"]))
        listed = self.must([cmd, "--permanent", "--zone=%s" % self.zone, "--list-rich-rules"])
        return sets, fw.owned_rich_rules(fw.parse_lines(listed))

    def apply(self, changes):
        cmd = self.binary
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

    def sync(self, wanted_sets, wanted_rules):
        sets, rules = self.current()
        changes = fw.firewalld_changes(wanted_sets, wanted_rules, sets, rules)
        changed = fw.has_changes(changes)
        if changed and not self.check:
            self.apply(changes)
        diff = {
            "before": lines_text(fw.firewalld_lines(sets, rules, self.zone)),
            "after": lines_text(fw.firewalld_lines(wanted_sets, wanted_rules, self.zone)),
        }
        return changed, diff

    def present(self, desired):
        return self.sync(fw.firewalld_ipsets(desired), fw.firewalld_rich_rules(desired))

    def absent(self):
        return self.sync({}, [])

    def result(self):
        return {"zone": self.zone}
