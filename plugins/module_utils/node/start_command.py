# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A Ray node's `ray start` command: its arguments, and the flags the installed `ray start` knows
(asked once per virtualenv and cached beside it)."""

from __future__ import annotations

import json
import os

from ansible_collections.raygate.cluster.plugins.module_utils.files import read_text, write_file
from ansible_collections.raygate.cluster.plugins.module_utils.net import port_plan as pp


class StartCommand:
    """The `ray start` of ``node.ray``; the flags cache at ``node.flags_path``. Runs and fails through the node."""

    def __init__(self, node):
        self.node = node
        self.p = node.p

    def args(self, plan, supported, labels=None):
        """The `ray start` command; ``labels`` are all the node's labels (default: the option)."""
        p = self.p
        args = [self.node.ray, "start"]
        if p["role"] == "head":
            args.append("--head")
        else:
            args.append("--address=%s:%s" % (p["head_ip"], plan["gcs"]))
        port_args, dropped = pp.ray_start_args(plan, p["role"], supported)
        args += ["--node-ip-address=%s" % p["node_ip"]] + port_args
        for key in ("num_cpus", "num_gpus", "memory", "object_store_memory"):
            if p[key] is not None:
                args.append("--%s=%s" % (key.replace("_", "-"), p[key]))
        if p["resources"]:
            args.append("--resources=%s" % json.dumps(p["resources"], sort_keys=True, separators=(",", ":")))
        if p["labels"] if labels is None else labels:
            args.append("--labels-file=%s" % self.node.labels_path)
        if p["role"] == "head":
            args.append("--dashboard-host=%s" % self.node.proxy.bind_address())
            if p["temp_dir"]:
                args.append("--temp-dir=%s" % p["temp_dir"])
        if supported is None or "--disable-usage-stats" in supported:
            args.append("--disable-usage-stats")
        args += self.node.gcs.redis_args()
        return args, dropped

    def supported_flags(self):
        """The flags of the installed `ray start`, cached per virtualenv: asking Ray costs seconds."""
        ray, flags_path = self.node.ray, self.node.flags_path
        key = self.flags_key()
        cached = read_text(flags_path)
        try:
            doc = json.loads(cached) if cached else {}
        except ValueError:
            doc = {}
        if key and doc.get("key") == key and isinstance(doc.get("flags"), list):
            return set(doc["flags"])
        container = self.node.container
        rc, out, err = self.node.run(
            container.help_command() if container.on() else [ray, "start", "--help"], timeout=120
        )
        if rc != 0:
            self.node.fail("%s start --help failed: %s" % (ray, (err or out).strip()[-1000:]))
        flags = pp.parse_ray_start_help(out)
        if key:  # the venv holds `ray`, so its directory exists
            try:
                write_file(flags_path, json.dumps({"key": key, "flags": sorted(flags)}) + "\n")
            except OSError:
                pass  # a read-only venv: ask Ray every time
        return flags

    def flags_key(self):
        """Identifies the installed Ray: the virtualenv's real path and its `ray` script's stat, or the
        image (pinned by digest) of a container node."""
        if self.node.container.on():
            return "image:%s" % self.p["image"]
        try:
            st = os.stat(self.node.ray)
        except OSError:
            return None
        return "%s:%d:%d" % (os.path.dirname(self.node.flags_path), st.st_mtime_ns, st.st_size)
