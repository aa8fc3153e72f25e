# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A Ray node's configuration: its environment, the hash that says when it changed, the files a
start writes (ray.env, the labels file, the systemd unit), the record of what was started (the
state file in /run, or after a reboot the hash the unit keeps) and which files a stop removes."""

from __future__ import annotations

import hashlib
import json
import os
import time

from ansible_collections.raygate.cluster.plugins.module_utils.files import parse_env, read_text, render_env, write_file
from ansible_collections.raygate.cluster.plugins.module_utils.net import port_plan as pp
from ansible_collections.raygate.cluster.plugins.module_utils.node.container import unit_text as container_unit_text
from ansible_collections.raygate.cluster.plugins.module_utils.node.unit import kept_hash


class NodeConfig:
    """The node's options as Ray runs them; writes at the node's paths, fails through the node."""

    def __init__(self, node):
        self.node = node
        self.p = node.p

    def env(self, plan):
        """Environment of the Ray node: auth, env-only ports, env files, user extras."""
        env = {"RAY_USAGE_STATS_ENABLED": "0"}
        env.update(self.node.auth.env())
        if self.p["python_version_match_level"] == "minor":
            env["RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL"] = "minor"
        env.update(pp.env_vars(plan, self.p["role"]))
        env.update(self.node.gcs.env())
        env.update(self.node.tls.env())
        env.update({k: str(v) for k, v in self.p["env"].items()})
        return env

    def file_env(self):
        """What the env_files set, read as the unit and a process start read them."""
        env = {}
        for path in self.p["env_files"]:
            text = read_text(path)
            if text is None:
                continue
            try:
                env.update(parse_env(text))
            except ValueError as exc:
                self.node.fail("environment file %s: %s" % (path, exc))
        return env

    def hash(self, plan, env):
        """The configuration hash: a running node whose record holds another one is restarted (or left, warned)."""
        p = self.p
        token_digest = self.node.auth.digest()
        desired = {
            "role": p["role"],
            "venv": os.path.realpath(p["venv"]),
            "node_ip": p["node_ip"],
            "head_ip": p["head_ip"] if p["role"] == "worker" else None,
            "ports": pp.role_ports(plan, p["role"]),
            "amounts": [p["num_cpus"], p["num_gpus"], p["memory"], p["object_store_memory"]],
            "resources": p["resources"],
            "labels": p["labels"],
            "temp_dir": p["temp_dir"] if p["role"] == "head" else None,
            "dashboard_host": p["dashboard_host"],
            "env": env,
            "token": token_digest,
            "supervisor": p["supervisor"],
        }
        if p.get("runtime") == "container":
            # Only for a container: a venv node keeps the hash it had before.
            desired["container"] = dict(
                (key, p[key])
                for key in ("engine", "image", "container_name", "gpu_devices", "container_ulimits")
                + ("container_run_args", "container_ipc", "container_mounts")
            )
        if p["user"] != "root":
            # Only when set: a node that runs as root keeps the hash it had before.
            desired["user"] = p["user"]
            groups = self.node.run_as.groups()
            if groups:
                # Only when it has some: an account without supplementary groups keeps its hash.
                desired["user_groups"] = groups
        if self.node.proxy.on():
            # Only when on: a head without the HTTPS proxy keeps the hash it had before.
            desired["dashboard_proxy"] = True
        if p["gcs_ft"] != "none":
            # Only when on: a cluster without fault tolerance keeps the hash it had before.
            desired["gcs"] = self.node.gcs.desired()
        blob = json.dumps(desired, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def write(self, env, args, digest=None, labels=None, status_keys=(), env_all=None):
        """Written only when Ray (re)starts: the labels file is then what the running node carries.
        ``env_all``: the whole environment (env files and ``env``), which a container gets in one file."""
        node = self.node
        changed, diff = write_file(node.env_path, render_env(env, header="Managed by raygate: Ray node environment."))
        node.diff = diff
        node.labels.write(labels, status_keys)
        if node.container.on():
            node.container.write_env(env if env_all is None else env_all)
            if self.p["supervisor"] == "systemd":
                write_file(node.unit_path, container_unit_text(node.container, args, digest))
        elif self.p["supervisor"] == "systemd":
            env_files = [node.env_path] + list(self.p["env_files"]) + node.gcs.unit_env_files()
            node.unit.write(args, env_files, digest)

    def recorded(self):
        """What raygate recorded when it started this node: the state file, or after a reboot
        (the state dir is in /run) the configuration hash kept in the systemd unit."""
        text = read_text(self.node.state_path)
        try:
            record = json.loads(text) if text else {}
        except ValueError:
            record = {}
        if not record and self.p["supervisor"] == "systemd":
            digest = kept_hash(read_text(self.node.unit_path))
            if digest is not None:
                record = {"config_hash": digest, "role": self.p["role"]}
        return record

    def write_record(self, digest, pid):
        os.makedirs(self.p["state_dir"], mode=0o755, exist_ok=True)
        record = {"config_hash": digest, "role": self.p["role"], "pid": pid, "started_at": time.time()}
        if self.node.container.on():
            record["image"] = self.p["image"]
        write_file(self.node.state_path, json.dumps(record, sort_keys=True) + "\n", mode=0o644)

    def removable(self, purge_files):
        """The files a stop removes that are there: the state file, and with purge_files the rest."""
        node = self.node
        removable = [node.state_path]
        if purge_files:
            removable += [node.env_path, node.labels_path, os.path.join(self.p["state_dir"], "ray-start.log")]
            removable += list(self.p["extra_files"])
            removable.append(self.p["auth_token_file"])
            removable.append(node.secret_path)
            removable += node.tls.removable()
            removable += node.proxy.removable()
            if self.p["supervisor"] == "systemd":
                removable.append(node.unit_path)
            if node.container.on():
                removable += node.container.removable()
        return [path for path in removable if os.path.lexists(path)]

    def remove_empty_dirs(self):
        self.node.tls.remove_empty_dir()
        for directory in (self.p["config_dir"], self.p["state_dir"]):
            try:
                os.rmdir(directory)
            except OSError:
                pass  # absent, or holds files raygate did not write: leave it
