# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The account a Ray node runs as (ray_node's ``user``): resolved once, the group that may read the
node's token, and the directories Ray writes, given to the account before a start."""

from __future__ import annotations

from ansible_collections.raygate.cluster.plugins.module_utils.node import service_user


class RunAs:
    """The node's ``user`` option; fails through the node."""

    def __init__(self, node):
        self.node = node
        self.p = node.p
        self._user = None

    def user(self):
        """The account Ray runs as (a ServiceUser); None only in check mode, for an account the
        install would create. Fails on a bad name, or an account missing outside check mode."""
        if self._user is not None:
            return self._user
        name = self.p["user"]
        problem = service_user.name_problem(name)
        if problem:
            self.node.fail("user: %s" % problem)
        found = service_user.lookup(name)
        if found is None and not self.node.module.check_mode:
            self.node.fail(
                "user %s (the account Ray is to run as) does not exist on this node; create it with "
                "raygate.cluster.ray_install's service_user option (the role does, from raygate_user), or "
                "set user: root to run Ray as root" % name
            )
        self._user = found
        return found

    def unprivileged(self):
        return self.p["user"] != service_user.ROOT

    def groups(self):
        """The names of the account's supplementary groups, sorted ([] for none, or an account the
        install would create in check mode): a change restarts Ray, whose processes carry them."""
        user = self.user() if self.unprivileged() else None
        if user is None:
            return []
        return sorted(service_user.group_names(user.groups))

    def secret_gid(self):
        """The group that may read the token: the service user's (None: root only)."""
        user = self.user() if self.unprivileged() else None
        return user.gid if user is not None else None

    def own_runtime_dirs(self):
        """Give the account the directories Ray writes as it: the session roots (/tmp/ray, the
        head's temp_dir), and the head's RocksDB store when the GCS keeps one."""
        user = self.user()
        if user is None or user.is_root:
            return
        for root in self.node.session_roots:
            service_user.own_tree(root, user)
        if self.node.gcs.on_head() and self.p["gcs_ft"] == "rocksdb":
            service_user.own_tree(self.node.gcs.storage_path(), user)
