# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A Ray node run from a container image (runtime: container; docs/CONTAINERS.md).

The container runs `ray start ... --block` with exactly the arguments and environment of the venv
path, so the port plan, the firewall and the clients see the same node. What makes it a container:

- host network and IPC (the node's address and ports, the host's /dev/shm for the object store), or a
  private IPC namespace with --shm-size from the object store's size;
- the node's environment (ray.env, the NCCL file, the secret file) given with --env-file, written
  again in the engines' own format (one KEY=value a line, no quoting: Podman and Docker take quotes
  literally);
- the configuration directory (token, TLS files, labels) mounted read-only; the session roots
  (/tmp/ray, the head's temp_dir) and the head's RocksDB store read-write at the same paths, so the
  host sees the sessions the way it sees a venv node's, and reads its processes in /proc;
- GPUs through CDI (the site's spec, or one `nvidia-ctk cdi generate` writes), the RDMA devices
  (/dev/infiniband) and the limits RDMA needs (memlock);
- the service user's uid, gid and groups: never uid 0 inside;
- supervised by the engine's restart policy (supervisor: process) or by a systemd unit that runs
  the container in the foreground (supervisor: systemd).
"""

from __future__ import annotations

import json
import os
import re
import socket

from ansible_collections.raygate.cluster.plugins.module_utils.files import read_text, write_file
from ansible_collections.raygate.cluster.plugins.module_utils.node.gcs_store import (
    REDIS_PASSWORD_ARG,
    REDIS_PASSWORD_VAR,
)
from ansible_collections.raygate.cluster.plugins.module_utils.node.unit import UNIT_HASH_PREFIX, systemd_quote

CONTAINER_ENV_FILE = "ray-container.env"
# Where CDI specs live (the CDI specification's static and dynamic directories).
CDI_DIRS = ("/etc/cdi", "/var/run/cdi")
# The spec raygate writes with nvidia-ctk when the site has none; removed with the node.
GENERATED_CDI_SPEC = "/var/run/cdi/raygate-nvidia.yaml"
RDMA_DIR = "/dev/infiniband"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CDI_KIND = re.compile(r"^\s*kind:\s*['\"]?([^'\"\s#]+)", re.M)
_CDI_VERSION = re.compile(r"^\s*cdiVersion:\s*['\"]?([0-9.]+)", re.M)
_CDI_DEVICE_NAME = re.compile(r"^\s*-?\s*name:\s*['\"]?([^'\"\s#]+)", re.M)
# Podman before 4.4 (Debian 12's 4.3) reads CDI specs up to version 0.5.0 and ignores newer ones
# without a word: measured on this machine (docs/CONTAINERS.md).
PODMAN_43_CDI_MAX = (0, 5, 0)


def engine_env_text(env):
    """``env`` as an engine's --env-file: KEY=value lines, unquoted. Fails (ValueError) on a value
    the format cannot hold: a newline."""
    lines = ["# Managed by raygate: the Ray node's environment, for the container engine's --env-file."]
    for key in sorted(env):
        value = str(env[key])
        if not _ENV_NAME.match(key):
            raise ValueError("not a valid environment variable name: %r" % key)
        if "\n" in value or "\r" in value:
            raise ValueError("the value of %s holds a line break, which an engine's --env-file cannot carry" % key)
        lines.append("%s=%s" % (key, value))
    return "\n".join(lines) + "\n"


def _version_tuple(text):
    try:
        return tuple(int(x) for x in text.split("."))
    except ValueError:
        return None


def cdi_specs(dirs=None):
    """{device name: [(spec path, cdiVersion)]} of every CDI spec in ``dirs`` (default CDI_DIRS), read
    as text (the node may have no YAML library): ``kind=name`` for each device a spec lists."""
    found = {}
    for directory in CDI_DIRS if dirs is None else dirs:
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in names:
            if not name.endswith((".yaml", ".yml", ".json")):
                continue
            path = os.path.join(directory, name)
            text = read_text(path) or ""
            kind = _CDI_KIND.search(text)
            if not kind:
                continue
            version = _CDI_VERSION.search(text)
            for device in _CDI_DEVICE_NAME.findall(text):
                found.setdefault("%s=%s" % (kind.group(1), device), []).append(
                    (path, version.group(1) if version else None)
                )
    return found


class Container:
    """The node's container: its `run` arguments, its state in the engine, its start and stop.
    Runs and fails through the node (``node.run``, ``node.fail``)."""

    def __init__(self, node):
        self.node = node
        self.p = node.p
        self.env_path = os.path.join(self.p["config_dir"], CONTAINER_ENV_FILE)
        self._engine = None

    def where(self):
        """The node, as messages name it."""
        return self.p["node_ip"] or socket.gethostname()

    def on(self):
        return self.p.get("runtime") == "container"

    @property
    def name(self):
        return self.p["container_name"]

    # -- checks, before anything changes -------------------------------------------------
    def engine(self):
        """The engine's path; fails naming the engine and how to get it."""
        if self._engine is None:
            found = self.node.runner.which(self.p["engine"])
            if not found:
                self.node.fail(
                    "runtime is container but the container engine %s is not installed on %s; the role installs "
                    "it (raygate_container_engine), or install it yourself" % (self.p["engine"], self.where())
                )
            self._engine = found
        return self._engine

    def engine_cmd(self, *args):
        return [self.engine()] + list(args)

    def check(self, check_mode):
        """What a start in a container needs: an image, a non-root account, the engine, the image
        present (after the install; in check mode it may still come), the GPUs' CDI devices."""
        p = self.p
        if not p["image"]:
            self.node.fail("runtime is container but no image is given (raygate_image: registry/name@sha256:...)")
        if p["user"] == "root":
            self.node.fail(
                "runtime is container and user is root: Ray would run as uid 0 in the container. Set raygate_user "
                "to the service account (the default, ray)"
            )
        if check_mode and not self.node.runner.which(p["engine"]):
            check_gpus(self, check_mode, engine=False)  # the role installs the engine after its preflight
            return
        self.engine()
        if not check_mode and not self.image_present():
            self.node.fail(
                "the image %s is not in %s's storage on %s; raygate.cluster.ray_install (runtime: container) "
                "pulls or loads it first" % (p["image"], p["engine"], self.where())
            )
        check_gpus(self, check_mode)

    def image_present(self):
        if self.p["engine"] == "docker":
            rc = self.node.run(self.engine_cmd("image", "inspect", self.p["image"]))[0]
        else:
            rc = self.node.run(self.engine_cmd("image", "exists", self.p["image"]))[0]
        return rc == 0

    def env_files(self):
        """The environment files the container gets: its own (ray.env's and the NCCL file's values)
        and the secret file."""
        return [self.env_path] + self.node.gcs.unit_env_files()

    def write_env(self, env_all):
        """The container's env file; and the mounts' host directories (the engine refuses a missing one)."""
        self.make_dirs()
        try:
            text = engine_env_text(env_all)
        except ValueError as exc:
            self.node.fail("the Ray node's environment cannot go to a container: %s" % exc)
        write_file(self.env_path, text, mode=0o600)

    def mounts(self):
        """(host path, container path, mode) of what the container mounts."""
        p = self.p
        mounts = [(p["config_dir"], p["config_dir"], "ro")]
        for root in self.node.session_roots:
            mounts.append((root, root, "rw"))
        if self.node.gcs.on_head() and p["gcs_ft"] == "rocksdb":
            path = self.node.gcs.storage_path()
            mounts.append((path, path, "rw"))
        mounts += [(path, path, "ro") for path in p["container_mounts"]]
        return mounts

    def run_args(self, ray_args, detach, digest):
        """The engine's `run` for the node: ``ray_args`` is the `ray start` command (its first word
        the image's `ray`); ``detach``: the process supervisor's (the engine restarts the container)
        or in the foreground (systemd's); ``digest``: the configuration hash, kept as a label."""
        p = self.p
        user = self.node.run_as.user()
        args = ["run", "--name", self.name, "--replace", "--network", "host"]
        if p["container_ipc"] == "host":
            args += ["--ipc", "host"]
        else:
            args += ["--shm-size", "%db" % self.shm_bytes()]
        args += ["--pull", "never", "--stop-timeout", str(max(p["stop_grace"], 30))]
        args += ["--label", "io.raygate.role=%s" % p["role"], "--label", "io.raygate.config=%s" % digest]
        if detach:
            args += ["--detach", "--restart", "always"]
        else:
            args += ["--rm"]
        if user is not None:
            args += ["--user", "%d:%d" % (user.uid, user.gid)]
            args += ["--group-add=%d" % gid for gid in user.groups]
        for path in self.env_files():
            args += ["--env-file", path]
        for host, inside, mode in self.mounts():
            args += ["--volume", "%s:%s:%s" % (host, inside, mode)]
        for device in p["gpu_devices"]:
            args += ["--device", device]
        if os.path.isdir(RDMA_DIR):
            args += ["--device", RDMA_DIR]
        for limit in p["container_ulimits"]:
            args += ["--ulimit", limit]
        args += list(p["container_run_args"])
        args.append(p["image"])
        command = ["ray"] + list(ray_args[1:]) + ["--block"]
        if REDIS_PASSWORD_ARG in command:
            # The password comes from the secret env file, expanded by a shell in the container: never
            # on a command line the host's ps or the engine's inspect shows.
            command.remove(REDIS_PASSWORD_ARG)
            script = 'exec "$@" --redis-password="$%s"' % REDIS_PASSWORD_VAR
            command = ["sh", "-c", script, "ray"] + command
        return args + command

    def shm_bytes(self):
        """/dev/shm of a private IPC namespace: the object store's size and a tenth more (Ray falls back
        to /tmp, and warns, when /dev/shm is smaller); 2 GiB when the size is Ray's to choose."""
        store = self.p["object_store_memory"]
        return int(store * 1.1) if store else 2 << 30

    # -- the container in the engine -------------------------------------------------------
    def inspect(self):
        """The container's engine record ({} when there is none, or no engine to hold one)."""
        if self._engine is None and not self.node.runner.which(self.p["engine"]):
            return {}
        rc, out, err = self.node.run(self.engine_cmd("container", "inspect", self.name))
        if rc != 0:
            return {}
        try:
            found = json.loads(out)
        except ValueError:
            return {}
        return found[0] if isinstance(found, list) and found else {}

    def running(self):
        return bool(self.inspect().get("State", {}).get("Running"))

    def exists(self):
        return bool(self.inspect())

    def make_dirs(self):
        """The mounts' host directories (the engine refuses a mount of a missing path)."""
        for directory in [host for host, inside, mode in self.mounts()]:
            os.makedirs(directory, mode=0o755, exist_ok=True)

    def launch(self, ray_args, digest):
        """Start the node's container under the process supervisor: the engine restarts it."""
        rc, out, err = self.node.run(self.engine_cmd(*self.run_args(ray_args, True, digest)), timeout=300)
        if rc != 0:
            self.node.fail(
                "%s could not start the Ray container on %s (rc=%s): %s. If the engine cannot set a limit here, "
                "set raygate_container_ulimits; see docs/CONTAINERS.md"
                % (self.p["engine"], self.where(), rc, (err or out).strip()[-1500:]),
                rc=rc,
            )

    def stop(self):
        """Stop the container (the engine does not restart a container it was told to stop) and
        remove it; nothing when there is none."""
        if not self.exists():
            return False
        grace = str(max(self.p["stop_grace"], 1))
        self.node.run(self.engine_cmd("stop", "--time", grace, self.name), timeout=int(grace) + 60)
        self.node.run(self.engine_cmd("rm", "--force", self.name), timeout=120)
        return True

    def cli(self, args):
        """``args`` (a `ray` command) as run in the node's container, or as given for a venv node."""
        if not self.on():
            return args
        return self.engine_cmd("exec", self.name) + list(args)

    def help_command(self):
        """`ray start --help` from the image, in a throwaway container without network."""
        p = self.p
        args = ["run", "--rm", "--pull", "never", "--network", "none"]
        for limit in p["container_ulimits"]:
            args += ["--ulimit", limit]
        return self.engine_cmd(*(args + list(p["container_run_args"]) + [p["image"], "ray", "start", "--help"]))

    def image_changed(self, record):
        """Why the node restarts when it runs another image than the one given (a new digest rolls
        out by a re-run, whatever restart_on_change says), else None."""
        was = record.get("image")
        if not self.on() or not was or was == self.p["image"]:
            return None
        return "this node runs the image %s; restarting its container on %s" % (was, self.p["image"])

    def hint(self):
        """Where a failed start's output is: the container's log (nothing for a venv node)."""
        return "; its log: %s logs %s" % (self.p["engine"], self.name) if self.on() else ""

    def removable(self):
        """The files of a container node that a purge removes: its env file, the CDI spec raygate wrote."""
        paths = [self.env_path]
        if os.path.exists(GENERATED_CDI_SPEC):
            paths.append(GENERATED_CDI_SPEC)
        return paths


def check_gpus(box, check_mode, engine=True):
    """Each of ``gpu_devices`` must resolve to one CDI spec the engine reads; where none has it,
    raygate writes one with `nvidia-ctk cdi generate` (outside check mode); with neither, a refusal
    naming what is missing."""
    wanted = box.p["gpu_devices"]
    if not wanted:
        return
    specs = cdi_specs()
    missing = [d for d in wanted if d not in specs]
    if missing:
        ctk = box.node.runner.which("nvidia-ctk")
        if not ctk:
            box.node.fail(
                "no GPU device mapping is possible on %s: no CDI spec in %s names %s, and nvidia-ctk (from "
                "NVIDIA's nvidia-container-toolkit package) is not installed to generate one. Install "
                "nvidia-container-toolkit, or put the site's CDI spec in /etc/cdi, or set "
                "raygate_container_gpus: [] for a node without GPUs"
                % (box.where(), " or ".join(CDI_DIRS), ", ".join(missing))
            )
        if check_mode:
            return
        rc, out, err = box.node.run([ctk, "cdi", "generate", "--output=%s" % GENERATED_CDI_SPEC], timeout=120)
        if rc != 0:
            box.node.fail("nvidia-ctk cdi generate failed on %s: %s" % (box.where(), (err or out).strip()))
        specs = cdi_specs()
        missing = [d for d in wanted if d not in specs]
        if missing:
            box.node.fail(
                "nvidia-ctk wrote %s but it names no %s: list the node's devices with nvidia-ctk cdi list"
                % (GENERATED_CDI_SPEC, ", ".join(missing))
            )
    for device in wanted:
        where = specs[device]
        if len(where) > 1:
            box.node.fail(
                "the CDI device %s is defined by %d specs (%s): the engine then resolves none of them. Keep one"
                % (device, len(where), ", ".join(path for path, version in where))
            )
        path, version = where[0]
        parsed = _version_tuple(version or "")
        # The engine's version is asked only of a spec newer than any Podman reads: a re-run with the
        # usual spec costs no engine call here.
        if parsed is None or parsed > PODMAN_43_CDI_MAX:
            if engine and box.p["engine"] == "podman" and podman_before_44(box):
                box.node.fail(
                    "the CDI spec %s has cdiVersion %s, which this Podman (before 4.4) ignores: write it with "
                    "cdiVersion 0.5.0 (nvidia-ctk cdi generate --format yaml, then edit), or upgrade Podman"
                    % (path, version)
                )


def podman_before_44(box):
    rc, out, err = box.node.run(box.engine_cmd("version", "--format", "{{.Client.Version}}"))
    parsed = _version_tuple(out.strip().split("-")[0]) if rc == 0 else None
    return parsed is not None and parsed < (4, 4)


# -- the container's `run` -------------------------------------------------------------


def unit_text(box, ray_args, digest):
    """The systemd unit that runs the container in the foreground (supervisor: systemd).

    The engine's client is the unit's main process and the container goes with it: `run --rm
    --replace` starts it afresh (a container left by a crash is replaced), ExecStop stops it
    through the engine (systemd's signal to the client alone would leave it running). `ray start
    --block` exits 1 when told to stop, and so does the client: SuccessExitStatus=1. Restart=always,
    as for the venv's unit. A unit `podman generate systemd --new` would write has the same shape;
    Podman 4.4+ can run it as a Quadlet instead (docs/CONTAINERS.md)."""
    engine = box.engine()
    command = [engine] + box.run_args(ray_args, False, digest)
    grace = max(box.p["stop_grace"], 30)
    lines = [
        "# Managed by raygate.cluster.ray_node: local changes are overwritten.",
        UNIT_HASH_PREFIX + digest,
        "[Unit]",
        "Description=Ray %s node in a container (raygate)" % box.p["role"],
        "Wants=network-online.target",
        "After=network-online.target",
        "",
        "[Service]",
        "Type=simple",
        "ExecStartPre=-%s rm --force %s" % (engine, box.name),
        "ExecStart=%s" % " ".join(systemd_quote(a) for a in command),
        "ExecStop=%s stop --time %d %s" % (engine, grace, box.name),
        "SuccessExitStatus=1",
        "Restart=always",
        "RestartSec=5",
        "TimeoutStopSec=%d" % (grace + 30),
        "",
        "[Install]",
        "WantedBy=multi-user.target",
        "",
    ]
    return "\n".join(lines)
