# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The cluster's auth token on a Ray node: the token file (0600), its place in the node's
environment and configuration hash, and a rotation of the token (rotate_token)."""

from __future__ import annotations

import hashlib
import socket

from ansible_collections.raygate.cluster.plugins.module_utils.files import read_text, write_file


class AuthToken:
    """The token of the node's ``auth`` options; fails through the node."""

    def __init__(self, node):
        self.node = node
        self.p = node.p

    def env(self):
        """What tells Ray to use the token (nothing when auth is off)."""
        if not self.p["auth"]:
            return {}
        return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": self.p["auth_token_file"]}

    def check_given(self):
        """Fails on a given token that is empty."""
        p = self.p
        if p["auth"] and p["auth_token"] is not None and not p["auth_token"].strip():
            self.node.fail("auth_token is empty; give the cluster's token or leave it unset")

    def check_present(self, check_mode):
        """Fails when auth is on and there is no token (none given, no token file), unless in check mode."""
        if self.p["auth"] and self.token() is None and not check_mode:
            self.node.fail("auth is on but the token file %s is missing on this node" % self.p["auth_token_file"])

    def token(self):
        """The token the node is to use: the given one, else the token file's content (None if neither)."""
        if self.p["auth_token"] is not None:
            return self.p["auth_token"].strip() + "\n"
        return read_text(self.p["auth_token_file"])

    def digest(self):
        """The token's hash for the configuration hash: a new token is a new configuration."""
        token = self.token() if self.p["auth"] else None
        return hashlib.sha256(token.encode()).hexdigest() if token else None

    def write(self, check_mode):
        """Write the given token to the token file; True when it changed. Never diffed. 0600 for
        root; 0640 in the service user's group when Ray runs unprivileged: Ray reads it, the
        account cannot change it."""
        if not self.p["auth"] or self.p["auth_token"] is None:
            return False
        gid = self.node.run_as.secret_gid()
        mode = 0o600 if gid is None else 0o640
        return write_file(self.p["auth_token_file"], self.token(), mode=mode, check_mode=check_mode, gid=gid)[0]

    def drift(self, procs):
        """True when the running node uses another token than the given one and rotate_token
        allows a restart; fails before anything changes when it does not."""
        p = self.p
        if not (p["auth"] and p["auth_token"] is not None and procs):
            return False
        current = read_text(p["auth_token_file"])
        if current is None or current.strip() == p["auth_token"].strip():
            return False
        if p["rotate_token"]:
            return True
        self.node.fail(
            "the Ray node running on %s uses another auth token than the one given (the file %s differs): the "
            "cluster's token was rotated, or this controller holds another copy of it. Nothing was changed. Restore "
            "the cluster's token on the controller (raygate_auth_token or raygate_auth_token_file), or rotate it "
            "across the whole cluster with rotate_token: true (-e raygate_rotate_token=true), which restarts every "
            "node, head first" % (p["node_ip"] or socket.gethostname(), p["auth_token_file"]),
            token_drift=True,
        )
