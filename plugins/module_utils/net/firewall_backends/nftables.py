# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""ray_firewall's nftables backend: one table of raygate's own, replaced atomically, saved to
rules_file and, with boot, loaded at boot by a systemd unit."""

from __future__ import annotations

import os

from ansible_collections.raygate.cluster.plugins.module_utils import files
from ansible_collections.raygate.cluster.plugins.module_utils.files import (
    remove_empty_parent,
    remove_path,
    write_file,
)
from ansible_collections.raygate.cluster.plugins.module_utils.net import firewall as fw
from ansible_collections.raygate.cluster.plugins.module_utils.net.firewall_backends.base import (
    FirewallBackend,
    lines_text,
)


def render_boot_unit(nft, rules_file, table):
    """A oneshot that loads the saved ruleset at boot, ordered as Debian's nftables.service is
    (early, before the network), after it so that its `flush ruleset` cannot wipe our table."""
    return lines_text(
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


class Nftables(FirewallBackend):
    TOOL = "nft"

    def listing(self):
        table = self.p["table"]
        rc, out, err = self.run([self.binary, "list", "table", "inet", table])
        if rc == 0:
            return out
        if fw.nft_missing_table(err):
            return None
        self.fail("nft list table inet %s failed (rc=%s): %s" % (table, rc, (err or out).strip()))

    def present(self, desired):
        nft = self.binary
        if self.p["boot"] and not (self.which("systemctl") and files.systemd_booted()):
            self.fail(
                "boot is true but systemd is not the init system here (no systemctl, or no %s), so nothing would load "
                "the rules at boot; set boot (the role variable raygate_firewall_boot) to false and load %s yourself"
                % (files.SYSTEMD_RUNTIME_DIR, self.p["rules_file"])
            )
        text, digest = fw.nft_ruleset(desired, self.p["table"], self.p["deny_action"])
        listing = self.listing()
        loaded = listing is not None and fw.nft_table_matches(listing, digest)
        if not loaded:
            # Check mode still proves the ruleset loads: nft -c runs the transaction without committing it.
            args = [nft, "-c", "-f", "-"] if self.check else [nft, "-f", "-"]
            self.must(args, data=text, what="loading the raygate ruleset (%s)" % " ".join(args))
        file_changed, _diff = write_file(self.p["rules_file"], text, mode=0o644, check_mode=self.check)
        boot_changed = self.boot_present() if self.p["boot"] else self.boot_absent()
        return not loaded or file_changed or boot_changed, {"before": listing or "", "after": text}

    def absent(self):
        listing = self.listing()
        if listing is not None and not self.check:
            self.must([self.binary, "delete", "table", "inet", self.p["table"]])
        boot_removed = self.boot_absent()
        removed = remove_path(self.p["rules_file"], check_mode=self.check)
        remove_empty_parent(self.p["rules_file"], check_mode=self.check)
        return listing is not None or removed or boot_removed, {"before": listing or "", "after": ""}

    # -- loading the rules at boot (systemd) ------------------------------------------
    @property
    def boot_unit_name(self):
        return "%s-firewall.service" % self.p["table"]

    @property
    def boot_unit_path(self):
        return os.path.join(self.p["unit_dir"], self.boot_unit_name)

    def boot_present(self):
        """Install and enable the unit that loads rules_file at boot; True when it changed."""
        systemctl = self.which("systemctl")
        text = render_boot_unit(self.binary, self.p["rules_file"], self.p["table"])
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
            systemctl = self.which("systemctl")
            if systemctl:
                # --now: after a boot the oneshot is active (RemainAfterExit); leave nothing loaded.
                self.run([systemctl, "disable", "--now", self.boot_unit_name])
            remove_path(self.boot_unit_path)
            if systemctl:
                self.must([systemctl, "daemon-reload"])
        return True
