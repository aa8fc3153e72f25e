# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""NCCL/libfabric environment: per-fabric profiles, interface filters and validation.

Pure functions, stdlib only. The failures this guards against are quiet ones: NCCL and
libfabric ignore a variable they do not know and a value they cannot parse, an interface
filter that matches nothing leaves NCCL without a bootstrap interface, and a disabled or
missing RDMA path makes NCCL fall back to TCP sockets at a fraction of the bandwidth.

``detected`` is the result of the fabric detection (module_utils/net/fabric.py)::

    {"fabric": "efa"|"ib"|"roce"|"none", "active_ports": ["mlx5_0:1", ...], "down_ports": [...],
     "netdevs": [...], "gid_index": 3|None, "libfabric_efa": True|False|None, "warnings": [...]}

``interfaces`` is the list of network interface names on the host.
"""

from __future__ import annotations

import difflib
import ipaddress
import re

from ansible_collections.raygate.cluster.plugins.module_utils.net.nccl_known import (
    CHECKED_PREFIXES,
    GDR_LEVELS,
    P2P_LEVELS,
    PASSTHROUGH_PREFIXES,
    VARIABLES,
)

FABRICS = ("efa", "ib", "roce", "none")

# Profile-level knobs build_env() accepts in ``profile_overrides``; None drops the variable.
PROFILE_KNOBS = {
    # The name aws-ofi-nccl registers with NCCL. Plugin releases up to 1.11 register
    # "AWS Libfabric"; later ones register "Libfabric" but rename themselves to "AWS Libfabric"
    # when NCCL_NET asks for it, so this one value forces the plugin with every release.
    # NCCL logs it as "NET/AWS Libfabric" or "NET/Libfabric" accordingly.
    "efa_net_name": "AWS Libfabric",
    # Values from AWS's EFA NCCL test samples for p5/p5e (nccl_known.SOURCES["aws-samples"]).
    # aws-ofi-nccl's own cheatsheet advises NCCL's defaults instead: set these to None for that.
    "efa_buffsize": "8388608",
    "efa_p2p_net_chunksize": "524288",
    # PHB lets NCCL use GPUDirect RDMA when GPU and NIC share a NUMA node, even through the
    # CPU's root complex. NCCL's own default stops at PXB (a common PCIe switch); inside VMs the
    # hypervisor often hides those switches, GPU and NIC then look PHB apart and NCCL quietly
    # stages through host memory. SYS would also cross the inter-socket link, where GPUDirect is
    # often slower than staging, so PHB is the widest level that is still safe.
    "ib_gdr_level": "PHB",
    # Used when the caller cannot name the interface that carries the cluster address.
    "default_socket_ifname": "^lo,docker",
}

# NCCL copies at most 1023 characters of a value from nccl.conf.
NCCL_CONF_VALUE_MAX = 1023
DEFAULT_CONF_HEADER = "Managed by raygate (nccl_env): NCCL reads KEY VALUE pairs from this file.\nDo not edit."

_FI_TRUE = ("1", "true", "yes", "on")
_FI_FALSE = ("0", "false", "no", "off")
_LIBRARY = {"NCCL_": "NCCL", "FI_": "libfabric", "OFI_NCCL_": "the aws-ofi-nccl plugin"}


def _as_str(value):
    """Environment values as the process will see them; None means unset."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _strtoll(text):
    """Parse like C strtoll(text, &end, 0) requiring the whole string; None if it would fail."""
    match = re.match(r"([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)\Z", text)
    if not match:
        return None
    sign, digits = match.groups()
    if digits[:2].lower() == "0x":
        number = int(digits, 16)
    elif digits.startswith("0"):
        number = int(digits, 8)
    else:
        number = int(digits)
    return -number if sign == "-" else number


def suggest(name):
    """The known variable closest to ``name`` (did you mean?), or None.

    A name that differs from a known one only in case yields that name.
    """
    upper = name.upper()
    if upper != name and upper in VARIABLES:
        return upper
    candidates = [known for known, spec in VARIABLES.items() if "removed" not in spec and known != name]
    found = difflib.get_close_matches(upper, candidates, n=1, cutoff=0.8)
    return found[0] if found else None


# ---------------------------------------------------------------------------------------------
# NCCL_SOCKET_IFNAME / NCCL_IB_HCA filters


def _parse_filter(value):
    """Split a filter into (exclude, exact, tokens): [^][=]token[,token...]."""
    exclude = value.startswith("^")
    rest = value[1:] if exclude else value
    exact = rest.startswith("=")
    rest = rest[1:] if exact else rest
    return exclude, exact, [token for token in rest.split(",") if token]


def match_if_filter(value, interfaces):
    """Interfaces (in the given order) that an NCCL_SOCKET_IFNAME value selects."""
    exclude, exact, tokens = _parse_filter(value)

    def hit(name):
        return any(name == token if exact else name.startswith(token) for token in tokens)

    return [name for name in interfaces if hit(name) != exclude]


def _split_port(entry):
    device, sep, port = entry.partition(":")
    return device, (port if sep else None)


def match_hca_filter(value, ports):
    """Entries of ``ports`` ("device:port") that an NCCL_IB_HCA value selects.

    A token without a port selects every port of the device; without ``=`` a token is a
    prefix, so ``mlx5_1`` also selects ``mlx5_10``.
    """
    exclude, exact, tokens = _parse_filter(value)
    wanted = [_split_port(token) for token in tokens]

    def hit(entry):
        device, port = _split_port(entry)
        for want_device, want_port in wanted:
            name_ok = device == want_device if exact else device.startswith(want_device)
            if name_ok and (want_port is None or want_port == port):
                return True
        return False

    return [entry for entry in ports if hit(entry) != exclude]


# ---------------------------------------------------------------------------------------------
# Profiles


def _knobs(profile_overrides):
    knobs = dict(PROFILE_KNOBS)
    for key, value in (profile_overrides or {}).items():
        if key not in PROFILE_KNOBS:
            raise ValueError("unknown profile knob %r; known knobs: %s" % (key, ", ".join(sorted(PROFILE_KNOBS))))
        knobs[key] = value
    return knobs


def _put(env, name, value):
    if value is not None:
        env[name] = _as_str(value)


def _efa_profile(knobs, force_net, require_gdr):
    env = {"FI_PROVIDER": "efa", "FI_EFA_FORK_SAFE": "1"}  # Ray forks its worker processes
    if require_gdr:
        # Makes libfabric abort instead of emulating RDMA when the device lacks it; left to
        # libfabric's own detection when GPUDirect is not required.
        env["FI_EFA_USE_DEVICE_RDMA"] = "1"
    _put(env, "NCCL_BUFFSIZE", knobs["efa_buffsize"])
    _put(env, "NCCL_P2P_NET_CHUNKSIZE", knobs["efa_p2p_net_chunksize"])
    if force_net:
        _put(env, "NCCL_NET", knobs["efa_net_name"])
    return env


def _ib_profile(detected, knobs, force_net):
    env = {}
    ports = list(detected.get("active_ports") or [])
    if ports:
        # '=' makes every entry exact: without it mlx5_1 would also select mlx5_10..mlx5_19.
        env["NCCL_IB_HCA"] = "=" + ",".join(ports)
    _put(env, "NCCL_NET_GDR_LEVEL", knobs["ib_gdr_level"])
    if detected.get("fabric") == "roce" and detected.get("gid_index") is not None:
        env["NCCL_IB_GID_INDEX"] = _as_str(detected["gid_index"])
    if force_net:
        env["NCCL_NET"] = "IB"
    return env


def build_env(detected, interfaces, socket_ifname=None, force_net=False, require_gdr=True, profile_overrides=None):
    """The NCCL/libfabric environment for this host's fabric, as a dict of strings.

    ``socket_ifname`` is the interface carrying the node's cluster address, matched exactly
    (a value starting with ``=`` or ``^`` is taken as a ready NCCL_SOCKET_IFNAME filter).
    Without it the ``default_socket_ifname`` knob (an exclusion filter) is used.
    ``force_net`` sets NCCL_NET so NCCL cannot fall back to another network (IB/RoCE: IB;
    EFA: the ``efa_net_name`` knob; no fabric: nothing to force). ``profile_overrides`` sets
    PROFILE_KNOBS (ValueError on an unknown one). ``interfaces`` is accepted for symmetry with
    validate(); the profile does not depend on it. User overrides are the caller's business.
    """
    fabric = detected.get("fabric") or "none"
    if fabric not in FABRICS:
        raise ValueError("unknown fabric %r; expected one of %s" % (fabric, ", ".join(FABRICS)))
    knobs = _knobs(profile_overrides)
    env = {}
    if not socket_ifname:
        ifname = knobs["default_socket_ifname"]
    elif socket_ifname.startswith(("=", "^")):
        ifname = socket_ifname  # already a filter
    else:
        ifname = "=" + socket_ifname
    _put(env, "NCCL_SOCKET_IFNAME", ifname)
    if fabric == "efa":
        env.update(_efa_profile(knobs, force_net, require_gdr))
    elif fabric in ("ib", "roce"):
        env.update(_ib_profile(detected, knobs, force_net))
    return env


# ---------------------------------------------------------------------------------------------
# Value checks: each returns the tail of a sentence ("is not ...; fix") or None.


def _check_range(number, spec):
    low, high = spec.get("min"), spec.get("max")
    if low is not None and high is not None and not low <= number <= high:
        return "is out of range; use a value from %d to %d" % (low, high)
    if low is not None and number < low:
        return "is out of range; use a value of at least %d" % low
    if high is not None and number > high:
        return "is out of range; use a value of at most %d" % high
    return None


def _check_int(value, spec):
    number = _strtoll(value)
    if number is None:
        return "is not an integer, so it is ignored and the default is used; write a plain integer"
    return _check_range(number, spec)


def _check_size(value, spec):
    number = _strtoll(value)
    if number is None:
        return (
            "is not a whole number of bytes (unit suffixes are not understood, so the default is used"
            " silently); write the byte count, e.g. 8388608 for 8 MiB"
        )
    return _check_range(number, spec)


def _check_bool01(value, spec):
    if value in ("0", "1"):
        return None
    return "must be 0 or 1 (anything else is misread or ignored); write 0 or 1"


def _check_fi_bool(value, spec):
    if value.lower() in _FI_TRUE + _FI_FALSE:
        return None
    return "is not a libfabric boolean; write 1 or 0 (true/false, yes/no and on/off also work)"


def _check_enum(value, spec):
    choices = spec["choices"]
    if value in choices:
        return None
    folded = [choice for choice in choices if choice.lower() == value.lower()]
    if folded and not spec.get("case_sensitive"):
        return None
    if folded:
        return "is compared case-sensitively, so it is ignored; write %r" % folded[0]
    return "is not one of %s; use one of those" % ", ".join(choices)


def _check_level(value, levels):
    if value in levels:
        return None
    if value.upper() in levels:
        return "is compared case-sensitively by NCCL, so it is ignored; write %r" % value.upper()
    if value[:1].isdigit() and _strtoll(value) is not None:
        return None  # legacy integer form; anything above 4 means SYS
    return "is not a level NCCL knows (%s, or a legacy integer), so NCCL ignores it; use one of those, e.g. PHB" % (
        ", ".join(levels)
    )


def _check_gdr_level(value, spec):
    return _check_level(value, GDR_LEVELS)


def _check_p2p_level(value, spec):
    return _check_level(value, P2P_LEVELS)


def _check_filter_syntax(value, what):
    if not value:
        return "is empty; unset it or name the %s to use" % what
    if any(char.isspace() for char in value):
        return "contains whitespace, which NCCL does not trim, so that entry matches nothing; remove it"
    if not _parse_filter(value)[2]:
        return "names no %s; list at least one after the ^ or = prefix" % what
    return None


def _check_if_filter(value, spec):
    return _check_filter_syntax(value, "interface")


def _check_hca_filter(value, spec):
    problem = _check_filter_syntax(value, "device")
    if problem:
        return problem
    for token in _parse_filter(value)[2]:
        device, port = _split_port(token)
        if not device or (port is not None and not port.isdigit()):
            return "has entry %r that is not device or device:port; write e.g. =mlx5_0:1" % token
    return None


def _check_string(value, spec):
    if not value:
        return None if spec.get("allow_empty") else "is empty; set a value or remove it"
    pattern = spec.get("pattern")
    flags = 0 if spec.get("case_sensitive") else re.IGNORECASE
    if pattern and not re.fullmatch(pattern, value, flags):
        return "does not have the accepted form (%s); fix the value" % spec.get("form", pattern)
    return None


def _check_path(value, spec):
    if not value:
        return "is empty; set a file path or remove it"
    if value.startswith("~"):
        return "starts with ~, which is not expanded; write an absolute path"
    return None


def _list_items(value, spec):
    items = value.split(spec.get("sep", ","))
    if spec.get("negate"):
        items = [item[1:] if item.startswith("^") else item for item in items]
    return items


def _check_list(value, spec):
    if not value:
        return None if spec.get("allow_empty") else "is empty; set a value or remove it"
    items = _list_items(value, spec)
    if any(not item.strip() for item in items):
        return "has an empty item; separate items with %r and no doubled separators" % spec.get("sep", ",")
    return _check_items(items, spec)


def _check_items(items, spec):
    choices = spec.get("choices")
    if not choices:
        return None
    if spec.get("case_sensitive"):
        unknown = [item for item in items if item not in choices]
    else:
        folded = [choice.lower() for choice in choices]
        unknown = [item for item in items if item.lower() not in folded]
    if unknown:
        return "names %s, which it does not know and silently skips; use only %s" % (
            ", ".join(repr(item) for item in unknown),
            ", ".join(choices),
        )
    return None


def _check_coll_list(value, spec):
    if not value:
        return "is empty; set a value or remove it"
    for part in value.split(";"):
        func, sep, items = part.rpartition(":")
        if sep and not re.match(r"[A-Za-z]+\Z", func):
            return "has a malformed entry %r; write [function:]item,item" % part
        items = items[1:] if items.startswith("^") else items
        names = items.split(",")
        if any(not name for name in names):
            return "has an empty item in %r; fix the list" % part
        problem = _check_items(names, spec)
        if problem:
            return problem
    return None


def _check_cidr(value, spec):
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        return "is not a network in CIDR notation; write e.g. 10.0.0.0/16"
    return None


_CHECKS = {
    "int": _check_int,
    "size": _check_size,
    "bool01": _check_bool01,
    "fi_bool": _check_fi_bool,
    "enum": _check_enum,
    "gdr_level": _check_gdr_level,
    "p2p_level": _check_p2p_level,
    "if_filter": _check_if_filter,
    "hca_filter": _check_hca_filter,
    "string": _check_string,
    "path": _check_path,
    "list": _check_list,
    "coll_list": _check_coll_list,
    "cidr": _check_cidr,
}


def check_value(name, value):
    """The problem with one known variable's value as a sentence tail, or None."""
    spec = VARIABLES[name]
    return _CHECKS[spec["type"]](_as_str(value), spec)


# ---------------------------------------------------------------------------------------------
# Validation


def _library(name):
    for prefix in ("OFI_NCCL_", "NCCL_", "FI_"):
        if name.upper().startswith(prefix):
            return _LIBRARY[prefix]
    return "its library"


def _check_name(name, value, errors, warnings):
    """Check one variable's name and value; True when the value may be used by later checks."""
    spec = VARIABLES.get(name)
    if spec is None:
        if name.startswith(tuple(PASSTHROUGH_PREFIXES)) or not name.upper().startswith(CHECKED_PREFIXES):
            return False
        hint = suggest(name)
        fix = "did you mean %s?" % hint if hint else "fix the name or remove it."
        errors.append(
            "%s is not a variable %s reads, so it would be silently ignored; %s" % (name, _library(name), fix)
        )
        return False
    if "removed" in spec:
        errors.append("%s=%r is no longer read (%s), so it has no effect; remove it." % (name, value, spec["removed"]))
        return False
    if "deprecated" in spec:
        warnings.append("%s=%r: %s" % (name, value, spec["deprecated"]))
    problem = check_value(name, value)
    if problem:
        errors.append("%s=%r %s." % (name, value, problem))
        return False
    return True


def _fi_false(value):
    return value is not None and value.lower() in _FI_FALSE


def _fi_true(value):
    return value is not None and value.lower() in _FI_TRUE


def _selects_provider(value, provider):
    negate = value.startswith("^")
    items = [item.split(";")[0].strip().lower() for item in value.lstrip("^").split(",")]
    return (provider in items) != negate


def _gdr_off(value):
    return value == "LOC" or (value[:1].isdigit() and _strtoll(value) == 0)


def _check_gdr(values, detected, errors):
    fabric = detected.get("fabric") or "none"
    net = (values.get("NCCL_NET") or "").lower()
    if fabric == "none":
        errors.append(
            "require_gdr is true but no RDMA fabric (EFA, InfiniBand or RoCE) was detected on this host, so"
            " NCCL can only use TCP sockets; fix the fabric (driver, links) or set require_gdr false."
        )
    if net == "socket":
        errors.append(
            "NCCL_NET=%r forces NCCL onto TCP sockets while require_gdr is true; remove NCCL_NET or set it to"
            " IB (InfiniBand/RoCE) or 'AWS Libfabric' (EFA)." % values["NCCL_NET"]
        )
    level = values.get("NCCL_NET_GDR_LEVEL")
    if level is not None and _gdr_off(level):
        errors.append(
            "NCCL_NET_GDR_LEVEL=%r (LOC) turns GPUDirect RDMA off while require_gdr is true; remove it or"
            " set PHB." % level
        )


def _check_ib(values, detected, require_gdr, errors, warnings):
    fabric = detected["fabric"]
    if values.get("NCCL_IB_DISABLE") == "1":
        errors.append(
            "NCCL_IB_DISABLE='1' turns off NCCL's InfiniBand/RoCE transport on a host whose fabric is %s, so"
            " NCCL falls back to TCP sockets; remove NCCL_IB_DISABLE or set it to 0." % fabric
        )
    if not detected.get("active_ports"):
        down = ", ".join(detected.get("down_ports") or []) or "none listed"
        message = (
            "The %s fabric was detected but none of its ports is ACTIVE (down: %s), so NCCL would fall back to"
            " TCP sockets; bring the links up (check cabling and the subnet manager, e.g. with ibstat) or set"
            " require_gdr false." % (fabric, down)
        )
        (errors if require_gdr else warnings).append(message)
        if (values.get("NCCL_NET") or "").lower() == "ib":
            errors.append("NCCL_NET='IB' but no InfiniBand/RoCE port is active, so NCCL fails to start; remove it.")
    if fabric == "roce":
        _check_roce_gid(values, detected, warnings)


def _check_roce_gid(values, detected, warnings):
    gid = detected.get("gid_index")
    configured = values.get("NCCL_IB_GID_INDEX")
    if configured is None and gid is None:
        warnings.append(
            "NCCL_IB_GID_INDEX is unset and no RoCE v2 GID index was detected: NCCL 2.21+ picks a RoCE v2 GID"
            " itself, but older NCCL uses GID 0 (usually RoCE v1 or link-local), which fails across subnets;"
            " check show_gids and set NCCL_IB_GID_INDEX."
        )
    elif configured is not None and gid is not None and _strtoll(configured) not in (gid, -1):
        warnings.append(
            "NCCL_IB_GID_INDEX=%r differs from the detected RoCE v2 GID index %s; check show_gids and set"
            " NCCL_IB_GID_INDEX=%s unless the other GID is intended." % (configured, gid, gid)
        )


def _check_efa(values, detected, require_gdr, errors, warnings):
    provider = values.get("FI_PROVIDER")
    if provider is not None and not _selects_provider(provider, "efa"):
        errors.append(
            "FI_PROVIDER=%r keeps libfabric from using the efa provider on an EFA host, so NCCL runs over another"
            " provider or TCP sockets; set FI_PROVIDER=efa or remove it." % provider
        )
    if (values.get("NCCL_NET") or "").lower() == "ib":
        errors.append(
            "NCCL_NET='IB' selects NCCL's InfiniBand verbs transport, which does not run over EFA; remove it or"
            " set NCCL_NET='AWS Libfabric'."
        )
    if not require_gdr:
        return
    if _fi_false(values.get("FI_EFA_USE_DEVICE_RDMA")):
        errors.append(
            "FI_EFA_USE_DEVICE_RDMA=%r makes libfabric emulate RDMA instead of using the EFA device, so"
            " GPUDirect RDMA is off while require_gdr is true; set it to 1 or remove it."
            % values["FI_EFA_USE_DEVICE_RDMA"]
        )
    if _fi_true(values.get("FI_HMEM_DISABLE_P2P")):
        errors.append(
            "FI_HMEM_DISABLE_P2P=%r forbids peer-to-peer transfers between GPU memory and the EFA device while"
            " require_gdr is true; set it to 0 or remove it." % values["FI_HMEM_DISABLE_P2P"]
        )
    hmem = values.get("FI_HMEM")
    if hmem and "cuda" not in [item.strip().lower() for item in hmem.split(";")]:
        errors.append(
            "FI_HMEM=%r does not include cuda, so libfabric cannot register GPU memory while require_gdr is"
            " true; add cuda (entries are separated by ';') or remove FI_HMEM." % hmem
        )
    if detected.get("libfabric_efa") is False:
        errors.append(
            "fi_info lists no efa provider, so libfabric cannot use the EFA device and NCCL would fall back to"
            " TCP sockets; install or repair the EFA software (aws-efa-installer) or set require_gdr false."
        )
    elif detected.get("libfabric_efa") is None:
        warnings.append(
            "fi_info is not installed, so it could not be confirmed that libfabric has the efa provider;"
            " install the EFA software's fi_info to check it."
        )


def _check_socket_ifname(value, interfaces, errors, warnings):
    selected = match_if_filter(value, interfaces)
    if not selected:
        usable = [name for name in interfaces if name != "lo"]
        example = " (e.g. '=%s')" % usable[0] if usable else ""
        errors.append(
            "NCCL_SOCKET_IFNAME=%r matches no network interface on this host (interfaces: %s), so NCCL cannot"
            " open its bootstrap sockets; set it to the interface carrying the cluster address%s."
            % (value, ", ".join(interfaces) or "none", example)
        )
    elif all(name == "lo" for name in selected):
        warnings.append(
            "NCCL_SOCKET_IFNAME=%r selects only the loopback interface, which other nodes cannot reach; select"
            " the interface carrying the cluster address." % value
        )


def _check_ib_hca(value, detected, errors, warnings):
    fabric = detected.get("fabric") or "none"
    if fabric not in ("ib", "roce"):
        warnings.append("NCCL_IB_HCA=%r has no effect on a host whose fabric is %s; remove it." % (value, fabric))
        return
    active = list(detected.get("active_ports") or [])
    if not active:
        return  # reported as a fabric problem
    if not match_hca_filter(value, active):
        errors.append(
            "NCCL_IB_HCA=%r matches none of the active RDMA ports (active: %s), so NCCL finds no device and"
            " falls back to TCP sockets; set it to '=%s' or a subset." % (value, ", ".join(active), ",".join(active))
        )
    exclude, exact, tokens = _parse_filter(value)
    if exact:
        return
    devices = sorted({_split_port(port)[0] for port in active + list(detected.get("down_ports") or [])})
    for token in tokens:
        device = _split_port(token)[0]
        extra = [name for name in devices if name != device and name.startswith(device)]
        if device in devices and extra:
            warnings.append(
                "NCCL_IB_HCA=%r: %r is a prefix and also matches %s; start the value with '=' for exact names."
                % (value, device, ", ".join(extra))
            )


def _check_pairs(values, usable, errors):
    threads, socks = values.get("NCCL_SOCKET_NTHREADS"), values.get("NCCL_NSOCKS_PERTHREAD")
    if "NCCL_SOCKET_NTHREADS" in usable and "NCCL_NSOCKS_PERTHREAD" in usable:
        if _strtoll(threads) * _strtoll(socks) > 64:
            errors.append(
                "NCCL_SOCKET_NTHREADS=%r times NCCL_NSOCKS_PERTHREAD=%r exceeds 64, which NCCL does not allow;"
                " lower one of them." % (threads, socks)
            )


def validate(env, detected, interfaces, require_gdr=True, extra_known=()):
    """Check an NCCL/libfabric environment against this host; returns ``(errors, warnings)``.

    Both are lists of sentences naming the variable, its value and the fix. Errors: NCCL_*,
    FI_* and OFI_NCCL_* names that are unknown (with a did-you-mean) or no longer read, values
    of the wrong type, and settings that contradict the detected fabric or ``require_gdr``.
    Warnings: doubtful but possibly intended settings. Other names (CUDA_VISIBLE_DEVICES,
    UCX_*, ...) and the names in ``extra_known`` pass unchecked; None values count as unset.
    """
    errors, warnings = [], []
    values = {name: _as_str(value) for name, value in env.items() if value is not None}
    usable = set()
    for name in sorted(values):
        if name in extra_known:
            continue
        if name in VARIABLES or name.upper().startswith(CHECKED_PREFIXES):
            if _check_name(name, values[name], errors, warnings):
                usable.add(name)
    checked = {name: value for name, value in values.items() if name in usable}
    fabric = detected.get("fabric") or "none"
    if require_gdr:
        _check_gdr(checked, detected, errors)
    if fabric in ("ib", "roce"):
        _check_ib(checked, detected, require_gdr, errors, warnings)
    elif fabric == "efa":
        _check_efa(checked, detected, require_gdr, errors, warnings)
    elif (checked.get("NCCL_NET") or "").lower() == "ib":
        errors.append("NCCL_NET='IB' but no InfiniBand/RoCE fabric was detected, so NCCL fails to start; remove it.")
    if "NCCL_SOCKET_IFNAME" in checked:
        _check_socket_ifname(checked["NCCL_SOCKET_IFNAME"], list(interfaces or []), errors, warnings)
    if "NCCL_IB_HCA" in checked:
        _check_ib_hca(checked["NCCL_IB_HCA"], detected, errors, warnings)
    _check_pairs(checked, usable, errors)
    return errors, warnings


# ---------------------------------------------------------------------------------------------
# /etc/nccl.conf


def render_nccl_conf(env, header=DEFAULT_CONF_HEADER):
    """/etc/nccl.conf content: one KEY=VALUE line per NCCL_* variable, sorted.

    NCCL splits each line at the first '=' and takes the rest verbatim (no quotes, no
    trimming, at most 1023 characters), so values are written raw and anything NCCL would
    misread raises ValueError. NCCL_CONF_FILE is left out (it names this file). Older NCCL
    reads '#' lines like any other, so the header must not contain '='.
    """
    lines = []
    for line in (header or "").splitlines():
        if "=" in line:
            raise ValueError("nccl.conf header lines must not contain '=': %r" % line)
        lines.append("# %s" % line)
    for key in sorted(env):
        value = _as_str(env[key])
        if not key.startswith("NCCL_") or key == "NCCL_CONF_FILE" or value is None:
            continue
        if not re.match(r"NCCL_[A-Z0-9_]+\Z", key):
            raise ValueError("not an NCCL variable name: %r" % key)
        if "\n" in value or "\r" in value:
            raise ValueError("%s: a value in nccl.conf cannot contain a line break" % key)
        if len(value) > NCCL_CONF_VALUE_MAX:
            raise ValueError("%s: NCCL reads at most %d characters of a value" % (key, NCCL_CONF_VALUE_MAX))
        lines.append("%s=%s" % (key, value))
    return "\n".join(lines) + "\n"
