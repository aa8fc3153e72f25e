# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The systemd unit of a Ray node (supervisor: systemd): its text, and systemctl to start, stop and remove it."""

from __future__ import annotations

import os

from ansible_collections.raygate.cluster.plugins.module_utils._runner import DEFAULT_PATH
from ansible_collections.raygate.cluster.plugins.module_utils.files import write_file

UNIT_HASH_PREFIX = "# raygate-config-hash: "

# The sandboxing a node's unit gets when Ray runs as an unprivileged account: what Ray and its
# jobs tolerate (checked on the sandbox's systemd nodes; the score is in docs/SECURITY.md). Left
# out on purpose: PrivateTmp (the `ray` CLI finds the node through /tmp/ray), PrivateDevices and
# DevicePolicy (the GPUs and /dev/infiniband), MemoryDenyWriteExecute (JIT compilers: Triton,
# numba, PyTorch), ProtectSystem=strict and ProtectHome=yes (jobs write checkpoints where the
# site keeps them, and read datasets under /home), @debug (py-spy, the dashboard's stack traces),
# RestrictNamespaces (runtime environments that start containers). A site adds what its jobs
# allow with a drop-in (systemctl edit raygate-ray).
HARDENING = (
    "NoNewPrivileges=yes",
    "CapabilityBoundingSet=",
    "AmbientCapabilities=",
    "ProtectSystem=full",
    "ProtectHome=read-only",
    "ProtectKernelTunables=yes",
    "ProtectKernelModules=yes",
    "ProtectKernelLogs=yes",
    "ProtectControlGroups=yes",
    "ProtectClock=yes",
    "ProtectHostname=yes",
    "RestrictSUIDSGID=yes",
    "RestrictRealtime=yes",
    "LockPersonality=yes",
    "RemoveIPC=yes",
    "SystemCallArchitectures=native",
    "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK",
    "SystemCallFilter=~@clock @cpu-emulation @module @mount @obsolete @raw-io @reboot @swap",
    "SystemCallErrorNumber=EPERM",
)


def render_unit(role, command, env_files, description=None, config_hash=None, venv_bin=None, user=None):
    """The systemd unit for a node: ``ray start --block`` as the main process.

    No ExecStop: on SIGTERM ``ray start --block`` stops the node's processes itself;
    KillMode=mixed then SIGKILLs whatever is left after the timeout. ``ray start --block``
    exits 1 when it is told to stop, hence SuccessExitStatus=1. That same exit 1 is what it
    does when its raylet dies, so Restart=on-failure would leave a dead node down: Restart=always
    (a stop through systemctl is never restarted).

    config_hash is kept in a comment: the unit outlives a reboot, the state file in /run does not.
    venv_bin goes first on PATH, as under the process supervisor: a job's entrypoint
    (``ray job submit -- python script.py``) and runtime environments run Ray's Python, not the
    system's (which may have no ``python`` at all).

    user: the unprivileged account every process of the unit runs as (User=, with HARDENING);
    None or root: the unit runs as root, unsandboxed, as before.
    """
    lines = ["# Managed by raygate.cluster.ray_node: local changes are overwritten."]
    if config_hash:
        lines.append(UNIT_HASH_PREFIX + config_hash)
    lines += [
        "[Unit]",
        "Description=%s" % (description or "Ray %s node (raygate)" % role),
        "Wants=network-online.target",
        "After=network-online.target",
        "",
        "[Service]",
        "Type=simple",
    ]
    if user and user != "root":
        lines.append("User=%s" % user)
        lines += list(HARDENING)
    if venv_bin:
        lines.append("Environment=PATH=%s:%s" % (venv_bin, DEFAULT_PATH))
    lines += ["EnvironmentFile=-%s" % path for path in env_files]
    lines += [
        "ExecStart=%s" % " ".join(systemd_quote(a) for a in command + ["--block"]),
        "KillMode=mixed",
        "SuccessExitStatus=1",
        "Restart=always",
        "RestartSec=5",
        "TimeoutStopSec=60",
        "LimitNOFILE=1048576",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
        "",
    ]
    return "\n".join(lines)


def systemd_quote(arg):
    if arg and all(c.isalnum() or c in "-_=./:,@%+" for c in arg):
        return arg
    return '"%s"' % arg.replace("\\", "\\\\").replace('"', '\\"')


def kept_hash(text):
    """The configuration hash a unit's text keeps (the last such comment), or None."""
    digest = None
    for line in (text or "").splitlines():
        if line.startswith(UNIT_HASH_PREFIX):
            digest = line[len(UNIT_HASH_PREFIX) :].strip()
    return digest


class Unit:
    """The node's systemd unit at ``node.unit_path``; systemctl runs through the node (its runner, its failure)."""

    def __init__(self, node):
        self.node = node
        self.p = node.p

    def installed(self):
        """Whether the node runs under systemd and its unit file is there."""
        return self.p["supervisor"] == "systemd" and os.path.exists(self.node.unit_path)

    def supervised_ok(self):
        """False when the node's supervisor does not hold it: it runs under systemd and its unit is not
        active, or it runs in a container under the process supervisor and the container does not run."""
        if self.node.container.on() and self.p["supervisor"] == "process":
            return self.node.container.running()
        if self.p["supervisor"] != "systemd":
            return True
        rc, out, err = self.node.run(["systemctl", "is-active", self.p["unit_name"]])
        return out.strip() == "active"

    def write(self, args, env_files, digest):
        """The unit that runs ``args`` (a `ray start` command) with ``env_files``, keeping ``digest``."""
        p = self.p
        unit = render_unit(p["role"], args, env_files, config_hash=digest, venv_bin=self.node.venv_bin, user=p["user"])
        write_file(self.node.unit_path, unit)

    def start(self):
        """Reload the units, enable this one and (re)start it; fails on the first systemctl that does."""
        for cmd in (["daemon-reload"], ["enable", self.p["unit_name"]], ["restart", self.p["unit_name"]]):
            rc, out, err = self.node.run(["systemctl"] + cmd)
            if rc != 0:
                self.node.fail("systemctl %s failed: %s" % (" ".join(cmd), (err or out).strip()))

    def stop(self):
        """Stop the unit, when the node runs under systemd and has one."""
        if self.installed():
            self.node.run(["systemctl", "stop", self.p["unit_name"]], timeout=120)

    def disable(self):
        self.node.run(["systemctl", "disable", self.p["unit_name"]])

    def daemon_reload(self):
        self.node.run(["systemctl", "daemon-reload"])
