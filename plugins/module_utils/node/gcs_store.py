# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""GCS fault tolerance on a Ray node: the store the head's GCS keeps its tables in (Redis, with its
password, cluster namespace and username; or RocksDB on the head's disk), one per Ray version, and
the environment, `ray start` arguments and 0600 secret file that point Ray at it."""

from __future__ import annotations

import hashlib
import os

from ansible_collections.raygate.cluster.plugins.module_utils.files import render_env, write_file

GCS_SECRET_FILE = "gcs-secret.env"
# `ray start` reads the Redis password only from --redis-password (no environment variable in
# Ray 2.60). The argument names this variable instead of the password: systemd expands it from
# the 0600 secret file, and a process start substitutes it just before running `ray start`, so
# neither the unit nor the returned command ever holds the password.
REDIS_PASSWORD_VAR = "RAYGATE_REDIS_PASSWORD"
REDIS_PASSWORD_ARG = "--redis-password=${%s}" % REDIS_PASSWORD_VAR
# Ray refuses a storage namespace holding its cluster separator (RAY_CHECK in gcs_server).
_NAMESPACE_BAD = "@"


class GcsStore:
    """The node's ``gcs_*``, ``redis_*`` and ``storage_namespace`` options; the secret at ``node.secret_path``."""

    def __init__(self, node):
        self.node = node
        self.p = node.p

    def version_tag(self):
        """The installed Ray's directory name (ray-2.60.0-py3.11): one storage per Ray version,
        so upgrade.yml's new version starts on fresh tables and a rollback finds the old ones."""
        return os.path.basename(os.path.realpath(self.p["venv"]).rstrip("/")) or "ray"

    def storage_namespace(self):
        """RAY_external_storage_namespace: the cluster's prefix, then the Ray version."""
        return "%s-%s" % (self.p["storage_namespace"], self.version_tag())

    def storage_path(self):
        return os.path.join(self.p["gcs_storage_path"], self.version_tag())

    def on_head(self):
        """Whether this node keeps a GCS store: the head, with fault tolerance on."""
        return self.p["gcs_ft"] != "none" and self.p["role"] == "head"

    def problems(self):
        """What is wrong with the GCS fault tolerance options, before anything changes."""
        p = self.p
        problems = []
        if p["gcs_reconnect_timeout"] is not None and p["gcs_reconnect_timeout"] < 1:
            problems.append("gcs_reconnect_timeout must be at least 1 second")
        if p["gcs_ft"] != "redis" or p["role"] != "head":
            return problems
        if not p["redis_address"]:
            problems.append("gcs_ft is redis but redis_address is empty")
        if p["redis_password"] is None or not p["redis_password"].strip():
            problems.append("gcs_ft is redis but redis_password is empty: raygate never backs the GCS by an open Redis")
        if p["redis_tls"] and not p["tls"]:
            problems.append("redis_tls needs tls: the head presents its own TLS certificate to Redis")
        namespace = p["storage_namespace"] or ""
        if not namespace.strip():
            problems.append("gcs_ft is redis but storage_namespace is empty: clusters sharing a Redis would mix tables")
        elif _NAMESPACE_BAD in namespace or any(c.isspace() for c in namespace):
            problems.append("storage_namespace %r must not contain '@' or spaces (Ray refuses '@')" % namespace)
        return problems

    def env(self):
        """The environment GCS fault tolerance needs: the store on the head, the reconnect
        timeout on every node (each raylet decides for itself how long to wait for the GCS)."""
        p = self.p
        env = {}
        if p["gcs_ft"] == "none":
            return env
        if p["gcs_reconnect_timeout"] is not None:
            env["RAY_gcs_rpc_server_reconnect_timeout_s"] = str(p["gcs_reconnect_timeout"])
        if p["role"] != "head":
            return env
        if p["gcs_ft"] == "redis":
            env["RAY_REDIS_ADDRESS"] = self.redis_url()
            env["RAY_external_storage_namespace"] = self.storage_namespace()
            if p["redis_tls"]:
                # Ray's GCS reads these (its RayConfig REDIS_CA_CERT, ...): the cluster CA, and this
                # node's certificate as the Redis client's.
                tls = self.node.tls
                env.update(RAY_REDIS_CA_CERT=tls.ca_path, RAY_REDIS_CLIENT_CERT=tls.cert_path)
                env["RAY_REDIS_CLIENT_KEY"] = tls.key_path
        else:
            env["RAY_gcs_storage"] = "rocksdb"
            env["RAY_gcs_storage_path"] = self.storage_path()
        return env

    def redis_url(self):
        """The Redis address as Ray takes it: ``rediss://host:port`` over TLS (Ray's own scheme)."""
        address = self.p["redis_address"] or ""
        return "rediss://" + address if self.p["redis_tls"] and address and "://" not in address else address

    def described(self):
        """The store, as the result says it (None on a node that keeps none)."""
        if not self.on_head():
            return None
        if self.p["gcs_ft"] == "redis":
            return {"backend": "redis", "address": self.redis_url(), "namespace": self.storage_namespace()}
        return {"backend": "rocksdb", "path": self.storage_path()}

    def desired(self):
        """The store's part of the configuration hash (the password hashed, as the token is)."""
        p = self.p
        password = p["redis_password"] if self.uses_redis_password() else None
        desired = {
            "ft": p["gcs_ft"],
            "username": p["redis_username"] if password else None,
            "password": hashlib.sha256(password.encode()).hexdigest() if password else None,
        }
        if p["redis_tls"] and self.on_head():
            desired["tls"] = True  # only when on: a head without it keeps its hash
        return desired

    def make_storage_dir(self):
        """The GCS's own disk store: readable by its owner only, like Redis's data directory (the
        service user's, node.own_runtime_dirs)."""
        if self.p["gcs_ft"] == "rocksdb" and self.p["role"] == "head":
            os.makedirs(self.storage_path(), mode=0o700, exist_ok=True)

    # -- the Redis password ---------------------------------------------------------------
    def uses_redis_password(self):
        return self.p["role"] == "head" and self.p["gcs_ft"] == "redis" and bool(self.p["redis_password"])

    def redis_args(self):
        """The `ray start` arguments for the password (as its variable) and the username."""
        if not self.uses_redis_password():
            return []
        # Hidden options in Ray 2.60 (absent from `ray start --help`, present in its code):
        # never filtered by the supported flags.
        args = []
        if self.p["redis_username"]:
            args.append("--redis-username=%s" % self.p["redis_username"])
        args.append(REDIS_PASSWORD_ARG)
        return args

    def secret_text(self):
        return render_env(
            {REDIS_PASSWORD_VAR: self.p["redis_password"]},
            header="Managed by raygate: the GCS Redis password (mode 0600; read by the Ray head's unit).",
        )

    def write_secret(self, check_mode):
        """The password file (0600) for the head's unit; True when it changed. Never diffed."""
        if not self.uses_redis_password():
            return False
        return write_file(self.node.secret_path, self.secret_text(), mode=0o600, check_mode=check_mode)[0]

    def unit_env_files(self):
        """The secret file, for the unit's EnvironmentFile= lines, when there is a password."""
        return [self.node.secret_path] if self.uses_redis_password() else []

    def with_password(self, args):
        """``args`` with the password in place of its variable: only for the process launch."""
        if not self.uses_redis_password():
            return args
        value = "--redis-password=%s" % self.p["redis_password"]
        return [value if a == REDIS_PASSWORD_ARG else a for a in args]
