# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Inventory validation run on the controller before any host is touched.

Input is plain data (host -> its raygate variables), so every rule is unit-testable.
Every message names the host, the value and the fix.
"""

from __future__ import annotations

import ipaddress

from ansible_collections.raygate.cluster.plugins.module_utils.net import port_plan as pp
from ansible_collections.raygate.cluster.plugins.module_utils.node.service_user import NAME_RE as USER_RE
from ansible_collections.raygate.cluster.plugins.module_utils.node.versions import MATCH_LEVELS, RAY_VERSION_RE
from ansible_collections.raygate.cluster.plugins.plugin_utils.image_ref import ImageRefError, check_image_ref

AUTH_MIN_VERSION = (2, 52)
# What the inventory is validated for: a cluster that starts Ray (site.yml, scale, upgrade,
# remove_node), or the health gate alone (health.yml), which never starts Ray and so needs no
# Ray resource amounts. Each purpose's resources: {key: (minimum, required)}; one not required is
# still checked when it is set.
PURPOSES = ("cluster", "gate")
RESOURCES = {
    "cluster": {"num_cpus": (1, True), "num_gpus": (0, True), "memory": (1, True)},
    "gate": {"num_cpus": (1, False), "num_gpus": (0, True), "memory": (1, False)},
}


def _version_tuple(version):
    parts = []
    for piece in str(version).split(".")[:3]:
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def check_groups(head_group, heads, workers):
    errors = []
    if len(heads) != 1:
        found = ", ".join(heads) if heads else "none"
        errors.append(
            "the inventory group '%s' must hold exactly one host (the Ray head); found %s. "
            "Put one host in it." % (head_group, found)
        )
    for host in sorted(set(heads) & set(workers)):
        errors.append("host %s is in both the head group and the worker group; keep it in one" % host)
    return errors


def check_resources(host, v, purpose="cluster"):
    """The Ray resource amounts ``purpose`` needs: whole numbers from their minimum up."""
    errors = []
    for key, (minimum, required) in RESOURCES[purpose].items():
        value = v.get(key)
        if value is None and not required:
            continue
        if isinstance(value, bool) or not str(value).isdigit() or int(value) < minimum:
            errors.append(
                "host %s: raygate_%s=%r must be an integer >= %d; set it in the inventory (Ray otherwise "
                "reports the whole machine)" % (host, key, value, minimum)
            )
    return errors


def check_host(host, v, purpose="cluster"):
    """Per-host rules. ``v`` holds the raygate_* variables without their prefix; ``purpose`` (one of
    PURPOSES) says which resource amounts must be set."""
    errors = []
    version = str(v.get("ray_version") or "")
    if not RAY_VERSION_RE.match(version):
        errors.append(
            "host %s: raygate_ray_version=%r is not an exact Ray release; set it to one such as 2.60.0"
            % (host, v.get("ray_version"))
        )
    elif v.get("auth") and _version_tuple(version) < AUTH_MIN_VERSION:
        errors.append(
            "host %s: raygate_ray_version=%s has no token authentication (needs 2.52 or newer); "
            "pin a newer Ray or set raygate_auth: false explicitly" % (host, version)
        )
    if "default" not in (v.get("ray_extras") or []):
        errors.append(
            "host %s: raygate_ray_extras=%r lacks 'default' (the dashboard and state API that raygate "
            "waits on); add it" % (host, v.get("ray_extras"))
        )
    try:
        ipaddress.ip_address(str(v.get("node_ip")))
    except ValueError:
        errors.append(
            "host %s: node address %r is not an IP address; set raygate_node_ip (or ansible_host) to the "
            "address Ray should advertise" % (host, v.get("node_ip"))
        )
    errors += check_resources(host, v, purpose)
    if v.get("python_version_match_level") not in MATCH_LEVELS:
        errors.append(
            "host %s: raygate_python_version_match_level=%r must be one of %s"
            % (host, v.get("python_version_match_level"), ", ".join(MATCH_LEVELS))
        )
    user = v.get("user")
    if user is not None and not USER_RE.match(str(user)):
        errors.append(
            "host %s: raygate_user=%r is not a user name (lower-case letters, digits, _ and -, starting with a "
            "letter or _); name the account Ray runs as, such as ray" % (host, user)
        )
    return errors + check_runtime(host, v)


RUNTIMES = ("venv", "container")
ENGINES = ("podman", "docker")


def check_runtime(host, v):
    """The container runtime's settings (raygate_runtime: container): a known engine, an image pinned
    by digest (or a tag explicitly allowed), and never root inside the container."""
    runtime = v.get("runtime") or "venv"
    if runtime not in RUNTIMES:
        return ["host %s: raygate_runtime=%r must be one of %s" % (host, runtime, ", ".join(RUNTIMES))]
    if runtime != "container":
        return []
    errors = []
    engine = v.get("container_engine") or "podman"
    if engine not in ENGINES:
        errors.append("host %s: raygate_container_engine=%r must be one of %s" % (host, engine, ", ".join(ENGINES)))
    image = v.get("image") or ""
    if not image:
        errors.append(
            "host %s: raygate_runtime is container but raygate_image is not set; give the image pinned by "
            "digest (registry/name@sha256:...)" % host
        )
    else:
        try:
            check_image_ref(str(image), allow_tag=bool(v.get("image_allow_tag")))
        except ImageRefError as exc:
            errors.append("host %s: %s" % (host, exc))
    if v.get("user") == "root":
        errors.append(
            "host %s: raygate_runtime is container and raygate_user is root: Ray would run as uid 0 in the "
            "container. Unset raygate_user (default ray) to run it as the service account" % host
        )
    return errors


def root_warning(hosts):
    """The warning of a run that starts Ray as root on ``hosts`` (empty: none)."""
    if not hosts:
        return None
    shown = ", ".join(hosts[:10]) + (" and %d more" % (len(hosts) - 10) if len(hosts) > 10 else "")
    return (
        "Ray runs as root on %s (raygate_user: root): every job submitted with the token is root on those "
        "nodes and can read the token, rewrite the firewall and the NCCL environment. Unset raygate_user "
        "(default ray) to run Ray as an unprivileged account (docs/SECURITY.md)" % shown
    )


def check_plan(host, v):
    try:
        offset = int(v.get("port_offset") or 0)
        plan = pp.build_plan(v.get("ports") or {}, offset=offset)
    except (pp.PortPlanError, ValueError, TypeError) as exc:
        return None, ["host %s: %s" % (host, exc)]
    problems = pp.validate_plan(plan, min_worker_ports=int(v.get("min_worker_ports") or 64), offset=offset)
    return plan, ["host %s: %s" % (host, p) for p in problems]


def _agree(name, per_host, errors):
    values = {}
    for host, value in per_host.items():
        values.setdefault(repr(value), []).append(host)
    if len(values) > 1:
        listing = "; ".join("%s on %s" % (value, ", ".join(sorted(hosts))) for value, hosts in sorted(values.items()))
        errors.append("%s differs between hosts (%s); every node of a cluster needs the same value" % (name, listing))


def check_pair_partner(partner, members):
    """The health gate's pair partner (raygate_health_pair_partner) must be a member of the cluster."""
    if not partner or partner in members:
        return []
    return [
        "raygate_health_pair_partner is %s, which is not a host of the cluster (%s); name a member whose GPUs "
        "may run a short nccl-test, or leave it empty" % (partner, ", ".join(members) or "no hosts")
    ]


def validate(head_group, heads, workers, hostvars, pair_partner="", purpose="cluster"):
    """Validate the cluster for ``purpose`` (one of PURPOSES: ``gate`` asks for no Ray resource amount
    but the GPU count); returns (errors, summary)."""
    if purpose not in PURPOSES:
        raise ValueError("purpose must be one of %s, not %r" % (", ".join(PURPOSES), purpose))
    errors = check_groups(head_group, heads, workers)
    plans, ips = {}, {}
    for host in list(heads) + [w for w in workers if w not in heads]:
        v = hostvars[host]
        errors += check_host(host, v, purpose)
        plan, plan_errors = check_plan(host, v)
        errors += plan_errors
        if plan is not None:
            plans[host] = plan
        ips.setdefault(str(v.get("node_ip")), []).append(host)
    for ip, hosts in sorted(ips.items()):
        if len(hosts) > 1:
            errors.append("hosts %s share the node address %s; each node needs its own" % (", ".join(hosts), ip))
    members = list(heads) + list(workers)
    _agree("raygate_ray_version", {h: str(hostvars[h].get("ray_version")) for h in members}, errors)
    _agree("the port plan (raygate_ports, raygate_port_offset)", plans, errors)
    _agree("raygate_auth", {h: bool(hostvars[h].get("auth")) for h in members}, errors)
    _agree("raygate_runtime", {h: str(hostvars[h].get("runtime") or "venv") for h in members}, errors)
    errors += check_pair_partner(pair_partner, list(dict.fromkeys(members)))
    head = heads[0] if len(heads) == 1 else None
    as_root = [h for h in dict.fromkeys(members) if hostvars[h].get("user") == "root"]
    summary = {
        "runs_as_root": as_root,
        "head": head,
        "workers": [w for w in workers if w != head],
        "plan": plans.get(head) if head else None,
        "nodes": [{"name": h, "ip": str(hostvars[h].get("node_ip"))} for h in members],
        "gpus": sum(
            int(hostvars[h].get("num_gpus") or 0) for h in members if str(hostvars[h].get("num_gpus")).isdigit()
        ),
    }
    return errors, summary
