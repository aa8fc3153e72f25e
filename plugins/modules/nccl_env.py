#!/usr/bin/python
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: nccl_env
short_description: Detect the node's fabric and write a validated NCCL/libfabric environment
version_added: 0.2.0
description:
  - Detects the RDMA fabric of the node (AWS EFA, InfiniBand, RoCE or none) from
    C(sys/class/infiniband) under O(sysfs_root), C(fi_info -p efa) and C(ibstat) when they
    are installed, with the active devices and ports.
  - Builds the environment from the fabric's profile (EFA C(FI_PROVIDER), C(FI_EFA_FORK_SAFE),
    C(FI_EFA_USE_DEVICE_RDMA) when O(require_gdr) is on, buffer and chunk sizes; InfiniBand
    and RoCE C(NCCL_IB_HCA) from the active ports, C(NCCL_NET_GDR_LEVEL), C(NCCL_IB_GID_INDEX)
    for RoCE; C(NCCL_SOCKET_IFNAME) everywhere), then applies O(env) on top.
  - Validates the result before writing anything. Unknown C(NCCL_*), C(FI_*) and C(OFI_NCCL_*)
    names are errors with a suggestion, values are type-checked, and contradictions are
    errors. Examples of contradictions are C(NCCL_IB_DISABLE=1) on an InfiniBand fabric, an
    interface or HCA filter that matches nothing on this host, and C(NCCL_NET=Socket) while
    O(require_gdr) is on.
  - Writes O(path), the environment file the Ray node reads (M(raygate.cluster.ray_node)
    O(raygate.cluster.ray_node#module:env_files)), so the raylet and every Ray worker process
    inherit it. Optionally also writes NCCL's own O(nccl_conf_path).
  - The list of known variable names, with the versions it was taken from, lives in one data
    file, C(plugins/module_utils/nccl_known.py).
author: raygate maintainers (@raygate)
extends_documentation_fragment:
  - raygate.cluster.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
options:
  state:
    description:
      - V(present) writes the environment; V(absent) removes O(path) and O(nccl_conf_path)
        when raygate wrote it.
    type: str
    choices: [present, absent]
    default: present
  path:
    description: The environment file (C(KEY=VALUE) lines, readable by systemd and a shell).
    type: path
    default: /etc/raygate/nccl.env
  fabric:
    description:
      - The fabric to configure. V(auto) uses what is detected.
      - V(efa), V(ib) or V(roce) must match what is detected, or the module fails.
      - V(none) turns RDMA off even where a fabric exists (C(NCCL_IB_DISABLE=1)); it needs
        O(require_gdr=false).
    type: str
    choices: [auto, efa, ib, roce, none]
    default: auto
  sysfs_root:
    description:
      - Root under which C(sys/class/infiniband) and C(sys/class/net) are read. The sandbox
        points it at a simulated tree.
    type: path
    default: /
  node_ip:
    description:
      - The node's cluster address. Without O(socket_ifname), the interface that holds it
        becomes C(NCCL_SOCKET_IFNAME).
    type: str
  socket_ifname:
    description:
      - C(NCCL_SOCKET_IFNAME) (comma list of prefixes, C(^) excludes, C(=) means exact).
        Must match an interface of this host.
    type: str
  require_gdr:
    description:
      - Refuse settings that keep NCCL off GPUDirect RDMA (C(NCCL_NET=Socket),
        C(NCCL_NET_GDR_LEVEL=LOC), C(FI_EFA_USE_DEVICE_RDMA=0), no RDMA fabric).
    type: bool
    default: true
  force_net:
    description: Set C(NCCL_NET) for the fabric, so NCCL fails instead of falling back to sockets.
    type: bool
    default: false
  env:
    description:
      - Variables applied over the profile. A null value removes a profile variable.
        Booleans become C(1) and C(0).
    type: dict
    default: {}
  allow_names:
    description:
      - C(NCCL_*), C(FI_*) or C(OFI_NCCL_*) names to accept without checking, for a plugin
        variable newer than the list raygate knows.
    type: list
    elements: str
    default: []
  nccl_conf:
    description: Also write the C(NCCL_*) variables to O(nccl_conf_path).
    type: bool
    default: false
  nccl_conf_path:
    description:
      - NCCL's configuration file. raygate removes it (with O(nccl_conf=false) or
        O(state=absent)) only when it wrote it.
    type: path
    default: /etc/nccl.conf
notes:
  - A running Ray node keeps the environment it started with. M(raygate.cluster.ray_node) sees
    the new file and restarts the node only with its C(restart_on_change) option.
seealso:
  - module: raygate.cluster.ray_node
"""

EXAMPLES = r"""
- name: Detect the fabric and write /etc/raygate/nccl.env
  raygate.cluster.nccl_env:
    node_ip: "{{ ansible_host }}"

- name: EFA on p5, no fallback to TCP, with a site override
  raygate.cluster.nccl_env:
    fabric: efa
    node_ip: "{{ ansible_host }}"
    force_net: true
    env:
      NCCL_DEBUG: WARN

- name: A development node without RDMA
  raygate.cluster.nccl_env:
    fabric: none
    require_gdr: false
    socket_ifname: "=eth0"

- name: Remove the environment raygate wrote
  raygate.cluster.nccl_env:
    state: absent
"""

RETURN = r"""
would_change:
  description: C(changed) under its own name, kept when C(changed_when) hides a check-mode prediction.
  returned: always
  type: bool
  sample: false
fabric:
  description: What was detected on the node.
  returned: when O(state=present)
  type: dict
  sample:
    fabric: ib
    active_ports: ["mlx5_0:1", "mlx5_1:1"]
    down_ports: ["mlx5_2:1"]
    gid_index: null
    libfabric_efa: null
    interfaces: [eth0, lo]
    tools: {fi_info: null, ibstat: /usr/sbin/ibstat}
env:
  description: The environment written to O(path).
  returned: when O(state=present)
  type: dict
  sample:
    NCCL_IB_HCA: "=mlx5_0:1,mlx5_1:1"
    NCCL_NET_GDR_LEVEL: PHB
    NCCL_SOCKET_IFNAME: "=eth0"
path:
  description: The environment file.
  returned: always
  type: str
  sample: /etc/raygate/nccl.env
errors:
  description: Every validation problem found (the module fails when there is one).
  returned: on failure
  type: list
  elements: str
  sample: ["NCCL_IB_HCAS is not a known NCCL variable; did you mean NCCL_IB_HCA?"]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.raygate.cluster.plugins.module_utils import fabric as fab
from ansible_collections.raygate.cluster.plugins.module_utils import nccl_env as ne
from ansible_collections.raygate.cluster.plugins.module_utils._runner import CommandError, CommandRunner
from ansible_collections.raygate.cluster.plugins.module_utils.files import (
    read_text,
    remove_empty_parent,
    remove_path,
    render_env,
    write_file,
)

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
        result["would_change"] = bool(result.get("changed"))
        self.module.exit_json(**result)


def main():
    module = AnsibleModule(
        argument_spec=dict(
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
        ),
        supports_check_mode=True,
    )
    NcclEnv(module).run()


if __name__ == "__main__":
    main()
