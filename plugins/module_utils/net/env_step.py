# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The work of raygate.cluster.nccl_env, runnable by its module or as a node_steps step."""

from __future__ import annotations

from ansible_collections.raygate.cluster.plugins.module_utils._runner import CommandError, CommandRunner
from ansible_collections.raygate.cluster.plugins.module_utils.files import (
    read_text,
    remove_empty_parent,
    remove_path,
    render_env,
    write_file,
)
from ansible_collections.raygate.cluster.plugins.module_utils.net import fabric as fab
from ansible_collections.raygate.cluster.plugins.module_utils.net import nccl_env as ne

MARKER = "Managed by raygate.cluster.nccl_env"


def interface_of(runner, address):
    """Name of the interface that holds ``address`` (from ``ip -o addr show``), or None."""
    rc, out, err = runner.run(["ip", "-o", "addr", "show"])
    if rc != 0:
        raise CommandError("ip -o addr show failed: %s" % (err.strip() or rc))
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[2] in ("inet", "inet6") and fields[3].split("/")[0] == address:
            return fields[1].split("@")[0]
    return None


def env_value(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


class NcclEnv:
    def __init__(self, module):
        self.module = module
        self.p = module.params
        self.runner = CommandRunner(timeout=60)
        self.diffs = []
        self.warnings = []

    def fail(self, msg, **kwargs):
        self.module.fail_json(msg=msg, path=self.p["path"], **kwargs)

    def write(self, path, content):
        changed, diff = write_file(path, content, mode=0o644, check_mode=self.module.check_mode)
        if changed:
            self.diffs.append(diff)
        return changed

    def remove_ours(self, path):
        """Remove ``path`` only when raygate wrote it; True when it is (or would be) gone."""
        text = read_text(path)
        if text is None or MARKER not in text:
            return False
        self.diffs.append({"before": text, "after": "", "before_header": path, "after_header": path})
        remove_path(path, check_mode=self.module.check_mode)
        remove_empty_parent(path, check_mode=self.module.check_mode)
        return True

    def detect(self):
        p = self.p
        try:
            found = fab.gather(self.runner, p["sysfs_root"])
        except CommandError as exc:
            self.fail("cannot detect the fabric: %s" % exc)
        self.warnings.extend(found.get("warnings", []))
        wanted = p["fabric"]
        if wanted == "none":
            found = dict(found, fabric="none", active_ports=[], down_ports=[])
        elif wanted != "auto" and wanted != found["fabric"]:
            ports = ", ".join(found.get("active_ports") or []) or "no active RDMA port"
            self.fail(
                "fabric %s was requested, but this host shows %s (%s); fix raygate_nccl_fabric or the host"
                % (wanted, found["fabric"], ports),
                fabric=found,
            )
        return found

    def socket_ifname(self, found):
        p = self.p
        if p["socket_ifname"]:
            return p["socket_ifname"]
        if not p["node_ip"]:
            return None
        try:
            name = interface_of(self.runner, p["node_ip"])
        except CommandError as exc:
            self.fail("cannot find the interface of %s: %s" % (p["node_ip"], exc))
        if name is None:
            self.fail(
                "no interface of this host holds the node address %s (interfaces: %s); set raygate_node_ip to "
                "this host's cluster address, or raygate_nccl_socket_ifname"
                % (p["node_ip"], ", ".join(found.get("interfaces") or []) or "none"),
            )
        return "=" + name

    def build(self, found, ifname):
        p = self.p
        interfaces = found.get("interfaces") or []
        env = ne.build_env(
            found, interfaces, socket_ifname=ifname, force_net=p["force_net"], require_gdr=p["require_gdr"]
        )
        # fabric none on a host with RDMA: NCCL would still pick IB unless told not to.
        if p["fabric"] == "none" and not p["require_gdr"] and fab.choose_fabric(found.get("devices") or []) != "none":
            env["NCCL_IB_DISABLE"] = "1"
        for key, value in p["env"].items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = env_value(value)
        return env

    def validate(self, env, found):
        errors, warnings = ne.validate(
            env,
            found,
            found.get("interfaces") or [],
            require_gdr=self.p["require_gdr"],
            extra_known=self.p["allow_names"],
        )
        self.warnings.extend(warnings)
        if errors:
            self.fail(
                "the NCCL environment of this host is not valid: " + " ".join(errors),
                errors=errors,
                env=env,
                fabric=found,
            )

    def present(self):
        p = self.p
        found = self.detect()
        env = self.build(found, self.socket_ifname(found))
        self.validate(env, found)
        ports = ", ".join(found.get("active_ports") or []) or "none"
        summary = "fabric %s, active ports: %s" % (found["fabric"], ports)
        header = "%s (%s).\nDo not edit: set raygate_nccl_env instead." % (MARKER, summary)
        changed = self.write(p["path"], render_env(env, header=header))
        if p["nccl_conf"]:
            try:
                conf = ne.render_nccl_conf(env, header=header)
            except ValueError as exc:
                self.fail("cannot write %s: %s" % (p["nccl_conf_path"], exc))
            changed = self.write(p["nccl_conf_path"], conf) or changed
        else:
            changed = self.remove_ours(p["nccl_conf_path"]) or changed
        public = {k: v for k, v in found.items() if k != "devices"}
        return dict(changed=changed, env=env, fabric=public)

    def absent(self):
        changed = self.remove_ours(self.p["path"])
        changed = self.remove_ours(self.p["nccl_conf_path"]) or changed
        return dict(changed=changed)

    def run(self):
        result = self.present() if self.p["state"] == "present" else self.absent()
        result["path"] = self.p["path"]
        if self.module._diff and self.diffs:
            result["diff"] = self.diffs
        for warning in self.warnings:
            self.module.warn(warning)
        self.module.exit_json(**result)


ARGUMENT_SPEC = dict(
    state=dict(type="str", choices=["present", "absent"], default="present"),
    path=dict(type="path", default="/etc/raygate/nccl.env"),
    fabric=dict(type="str", choices=["auto", "efa", "ib", "roce", "none"], default="auto"),
    sysfs_root=dict(type="path", default="/"),
    node_ip=dict(type="str"),
    socket_ifname=dict(type="str"),
    require_gdr=dict(type="bool", default=True),
    force_net=dict(type="bool", default=False),
    env=dict(type="dict", default={}),
    allow_names=dict(type="list", elements="str", default=[]),
    nccl_conf=dict(type="bool", default=False),
    nccl_conf_path=dict(type="path", default="/etc/nccl.conf"),
)


def run(module):
    """Write or remove the environment as ``module.params`` say; ends with ``module.exit_json`` or ``fail_json``."""
    NcclEnv(module).run()
