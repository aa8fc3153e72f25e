# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""ray_firewall's ufw backend: allow rules carrying the comment raygate; ufw's own state and
defaults are only read, never changed."""

from __future__ import annotations

from ansible_collections.raygate.cluster.plugins.module_utils.net import firewall as fw
from ansible_collections.raygate.cluster.plugins.module_utils.net.firewall_backends.base import (
    FirewallBackend,
    lines_text,
)


class Ufw(FirewallBackend):
    TOOL = "ufw"

    def __init__(self, step, binary):
        super().__init__(step, binary)
        self._state = None

    def state(self):
        # Read once: auto's choice and the warnings below both need it.
        if self._state is None:
            self._state = fw.parse_ufw_status(self.must([self.binary, "status", "verbose"]))
        return self._state

    def in_use(self):
        return self.state()["active"]

    def warn_about_state(self):
        state = self.state()
        if not state["active"]:
            self.step.warnings.append(
                "ufw is inactive: raygate's rules are stored but not enforced until ufw is enabled "
                "(raygate never runs ufw enable; allow SSH before enabling it)"
            )
        elif state["default_incoming"] == "allow":
            self.step.warnings.append(
                "ufw's default incoming policy is allow: raygate's allow rules restrict nothing and the Ray ports "
                "stay open to everybody; set 'ufw default deny incoming' (SSH allowed first) to close them"
            )

    def sync(self, wanted):
        ufw = self.binary
        current = fw.parse_ufw_added(self.must([ufw, "show", "added"]))
        add, delete = fw.ufw_changes(wanted, current)
        if not self.check:
            # Add before deleting, so an active ufw never has a moment without the cluster's rules.
            for rule in add:
                self.must([ufw] + fw.ufw_args(rule))
            for rule in delete:
                self.must([ufw] + fw.ufw_args(rule, delete=True))
        diff = {
            "before": lines_text(sorted("ufw " + r for r in current)),
            "after": lines_text(sorted("ufw " + r for r in wanted)),
        }
        return bool(add or delete), diff

    def present(self, desired):
        self.warn_about_state()
        return self.sync(fw.ufw_rules(desired))

    def absent(self):
        return self.sync([])
