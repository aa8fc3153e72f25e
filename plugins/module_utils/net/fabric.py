# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Which RDMA fabric a node has (AWS EFA, InfiniBand, RoCE or none), and its usable ports.

sysfs is the source of truth: ``<root>/sys/class/infiniband`` lists every RDMA device with
its driver and ports whatever the distribution installed, so ``read_sysfs`` decides. The
tools only add what sysfs cannot say (``fi_info``: is libfabric's efa provider usable) or
cross-check it (``ibstat``). ``root`` is configurable so the sandbox can point at a
simulated tree.

Spellings. sysfs values keep the kernel's: ``state`` ``ACTIVE``/``DOWN``/``INIT``/``ARMED``,
``phys_state`` ``LinkUp``/``Disabled``/``Polling``. The tool parsers (``parse_ibstat``,
``parse_ibv_devinfo``) both use ibstat's: ``state`` ``Active``/``Down``/``Initializing``/
``Armed``, ``phys_state`` ``LinkUp``/``Disabled``/``Polling``/``Sleep``/...; ibv_devinfo's
``PORT_ACTIVE (4)`` and ``LINK_UP (5)`` are mapped through their numeric codes.

Everything here is a pure function of text or of files under ``root``, except ``gather``,
which runs the tools through a CommandRunner.
"""

from __future__ import annotations

import os
import re

from ansible_collections.raygate.cluster.plugins.module_utils._runner import CommandError

# The EFA installer puts fi_info here, not on PATH.
EFA_BIN_DIR = "/opt/amazon/efa/bin"
FI_INFO_ARGS = ("-p", "efa", "-t", "FI_EP_RDM")

# ibstat's words for port states and physical states, by the numeric code every tool shares.
PORT_STATES = {0: "???", 1: "Down", 2: "Initializing", 3: "Armed", 4: "Active", 5: "ActiveDefer"}
PHYS_STATES = {
    0: "No state change",
    1: "Sleep",
    2: "Polling",
    3: "Disabled",
    4: "PortConfigurationTraining",
    5: "LinkUp",
    6: "LinkErrorRecovery",
    7: "PhyTest",
}
# sysfs state word -> ibstat word, to compare the two.
SYSFS_TO_TOOL_STATE = {
    "NOP": "???",
    "DOWN": "Down",
    "INIT": "Initializing",
    "ARMED": "Armed",
    "ACTIVE": "Active",
    "ACTIVE_DEFER": "ActiveDefer",
}
KIND_BY_LINK_LAYER = {"InfiniBand": "ib", "Ethernet": "roce"}

_RATE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)")
_CODE_RE = re.compile(r"\((\d+)\)\s*$")
_MPI_TAG_RE = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:")
_CA_RE = re.compile(r"^(?:CA|Switch|Router|iWARP RNIC|\?\?\?):?\s+'(.+)'$")
_IPV4_MAPPED_PREFIX = "0000:0000:0000:0000:0000:ffff:"


# ------------------------------------------------------------------------------ sysfs


def _read(path):
    """Stripped content of a sysfs file, or None when it is missing or unreadable.

    sysfs answers some reads with an error (EINVAL for an unused GID's type): also None.
    """
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read().strip()
    except (OSError, ValueError):
        return None


def _listdir(path):
    try:
        return os.listdir(path)
    except OSError:
        return []


def _natural_key(name):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _after_colon(value):
    """'4: ACTIVE' -> 'ACTIVE'; a value without the code is kept as it is."""
    if value is None:
        return None
    return value.split(":", 1)[1].strip() if ":" in value else value


def parse_rate(value):
    """'400 Gb/sec (4X NDR)' -> 400.0, '2.5' -> 2.5, '56 (FDR10)' -> 56.0; None if no number."""
    if value is None:
        return None
    match = _RATE_RE.match(value)
    return float(match.group(1)) if match else None


def _driver(dev_dir):
    try:
        return os.path.basename(os.readlink(os.path.join(dev_dir, "device", "driver")))
    except OSError:
        return None


def _rocev2_gid_index(port_dir):
    """Lowest GID index of type 'RoCE v2' whose GID is IPv4-mapped (what NCCL_IB_GID_INDEX wants)."""
    types_dir = os.path.join(port_dir, "gid_attrs", "types")
    for name in sorted((n for n in _listdir(types_dir) if n.isdigit()), key=int):
        if _read(os.path.join(types_dir, name)) != "RoCE v2":
            continue
        gid = _read(os.path.join(port_dir, "gids", name)) or ""
        if gid.lower().startswith(_IPV4_MAPPED_PREFIX):
            return int(name)
    return None


def _port_netdev(dev_dir, port_dir, port):
    """The netdev behind a port: from its GID table first, else from the PCI device's net/."""
    ndevs_dir = os.path.join(port_dir, "gid_attrs", "ndevs")
    for name in sorted((n for n in _listdir(ndevs_dir) if n.isdigit()), key=int):
        ndev = _read(os.path.join(ndevs_dir, name))
        if ndev:
            return ndev
    net_dir = os.path.join(dev_dir, "device", "net")
    names = sorted(_listdir(net_dir))
    if len(names) == 1:
        return names[0]
    # A multi-port device has one netdev per port; dev_port counts from 0.
    for name in names:
        if _read(os.path.join(net_dir, name, "dev_port")) == str(port - 1):
            return name
    return None


def _read_port(dev_dir, port):
    port_dir = os.path.join(dev_dir, "ports", str(port))
    return {
        "port": port,
        "state": _after_colon(_read(os.path.join(port_dir, "state"))),
        "phys_state": _after_colon(_read(os.path.join(port_dir, "phys_state"))),
        "rate_gbps": parse_rate(_read(os.path.join(port_dir, "rate"))),
        "link_layer": _read(os.path.join(port_dir, "link_layer")),
        "netdev": _port_netdev(dev_dir, port_dir, port),
        "rocev2_gid_index": _rocev2_gid_index(port_dir),
    }


def device_kind(driver, ports):
    """efa if the driver is efa; else ib/roce by the first port with a known link layer; else other."""
    if driver == "efa":
        return "efa"
    for port in ports:
        kind = KIND_BY_LINK_LAYER.get(port.get("link_layer"))
        if kind:
            return kind
    return "other"


def port_kind(device, port):
    """A port's own kind: on a VPI device one port may run InfiniBand and the other Ethernet."""
    if device.get("kind") == "efa":
        return "efa"
    return KIND_BY_LINK_LAYER.get(port.get("link_layer"), "other")


def read_sysfs(root="/"):
    """Every RDMA device under ``<root>/sys/class/infiniband``, in natural name order.

    Each: ``{name, driver, kind, ports: [{port, state, phys_state, rate_gbps, link_layer,
    netdev, rocev2_gid_index}]}``. Missing files give None; an absent class dir gives [].
    """
    class_dir = os.path.join(root, "sys", "class", "infiniband")
    devices = []
    for name in sorted(_listdir(class_dir), key=_natural_key):
        dev_dir = os.path.join(class_dir, name)
        if not os.path.isdir(dev_dir):
            continue
        numbers = sorted(int(n) for n in _listdir(os.path.join(dev_dir, "ports")) if n.isdigit())
        ports = [_read_port(dev_dir, n) for n in numbers]
        driver = _driver(dev_dir)
        devices.append({"name": name, "driver": driver, "kind": device_kind(driver, ports), "ports": ports})
    return devices


def read_netdevs(root="/"):
    """Sorted interface names in ``<root>/sys/class/net`` ([] when unreadable)."""
    return sorted(_listdir(os.path.join(root, "sys", "class", "net")))


# ---------------------------------------------------------------------------- parsers


def _strip_mpi_tag(line):
    return _MPI_TAG_RE.sub("", line, count=1)


def parse_fi_info(text):
    """``fi_info`` short output -> [{provider, fabric, domain, version, type, protocol}].

    Accepts mpirun's ``[1,0]<stdout>:`` prefixes and ignores anything that is not a
    ``key: value`` line of an entry (ssh warnings, ``fi_getinfo: -61 (No data available)``).
    """
    entries = []
    current = None
    for raw in (text or "").splitlines():
        line = _strip_mpi_tag(raw).strip()
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "provider":
            current = dict.fromkeys(("fabric", "domain", "version", "type", "protocol"))
            current["provider"] = value
            entries.append(current)
        elif current is not None and key in current:
            current[key] = value
    return entries


def _new_port(number):
    return {"port": number, "state": None, "phys_state": None, "rate_gbps": None, "link_layer": None}


def parse_ibstat(text):
    """``ibstat`` output -> [{name, ca_type, ports: [{port, state, phys_state, rate_gbps, link_layer}]}].

    Tabs or spaces alike; ``ibpanic:``/``ibwarn:`` lines are skipped, so the CAs printed
    before an ibstat failure are kept. Also reads ``ibstat CA PORT`` (``CA: 'x'``) output.
    """
    cas = []
    ca = port = None
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line or line.startswith(("ibpanic:", "ibwarn:", "ibstat:")):
            continue
        header = _CA_RE.match(line)
        if header:
            ca = {"name": header.group(1), "ca_type": None, "ports": []}
            cas.append(ca)
            port = None
            continue
        if ca is None:
            continue
        match = re.match(r"^Port (\d+):$", line)
        if match:
            port = _new_port(int(match.group(1)))
            ca["ports"].append(port)
            continue
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if port is None:
            if key.endswith(" type"):
                ca["ca_type"] = value
        elif key == "State":
            port["state"] = value
        elif key == "Physical state":
            port["phys_state"] = value
        elif key == "Rate":
            port["rate_gbps"] = parse_rate(value)
        elif key == "Link layer":
            port["link_layer"] = value
    return cas


def _code(value, names):
    """'PORT_ACTIVE (4)' -> names[4]; the text itself when there is no code."""
    match = _CODE_RE.search(value)
    if not match:
        return value
    return names.get(int(match.group(1)), value.split("(")[0].strip())


def _width(value):
    match = re.match(r"^(\d+)X", value)
    return int(match.group(1)) if match else None


def parse_ibv_devinfo(text):
    """``ibv_devinfo [-v]`` output -> the same shape as ``parse_ibstat`` (same state words).

    ``ca_type`` is ``MT<vendor_part_id>`` for Mellanox/NVIDIA devices (what ibstat shows),
    None otherwise. ``phys_state`` and ``rate_gbps`` (active_width x active_speed) are only
    printed with ``-v``: None without it.
    """
    devices = []
    dev = port = None
    vendor = lanes = None
    for raw in (text or "").splitlines():
        line = raw.strip()
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "hca_id":
            dev = {"name": value, "ca_type": None, "ports": []}
            devices.append(dev)
            port, vendor = None, None
        elif dev is None:
            continue
        elif key == "vendor_id":
            vendor = value.lower()
        elif key == "vendor_part_id" and vendor in ("0x02c9", "0x15b3") and value.isdigit():
            dev["ca_type"] = "MT" + value
        elif key == "port" and value.isdigit():
            port, lanes = _new_port(int(value)), None
            dev["ports"].append(port)
        elif port is None:
            continue
        elif key == "state":
            port["state"] = _code(value, PORT_STATES)
        elif key == "phys_state":
            port["phys_state"] = _code(value, PHYS_STATES)
        elif key == "link_layer":
            port["link_layer"] = value
        elif key == "active_width":
            lanes = _width(value)
        elif key == "active_speed":
            speed = parse_rate(value)
            if speed is not None and lanes:
                port["rate_gbps"] = speed * lanes
    return devices


# ----------------------------------------------------------------------------- detect


def choose_fabric(devices):
    """efa if any EFA device; else ib if any InfiniBand port; else roce if any Ethernet port; else none."""
    kinds = set()
    for dev in devices:
        kinds.update(port_kind(dev, port) for port in dev.get("ports", []))
        kinds.add(dev.get("kind"))
    for kind in ("efa", "ib", "roce"):
        if kind in kinds:
            return kind
    return "none"


def _fabric_ports(devices, fabric):
    for dev in devices:
        for port in dev.get("ports", []):
            if port_kind(dev, port) == fabric:
                yield dev, port


def _gid_index(active, warnings):
    """The RoCE v2 GID index shared by every active RoCE port, or None with a warning."""
    indexes = {"%s:%d" % (d["name"], p["port"]): p.get("rocev2_gid_index") for d, p in active}
    if not indexes:
        return None
    values = set(indexes.values())
    if len(values) == 1 and None not in values:
        return values.pop()
    missing = sorted((k for k, v in indexes.items() if v is None), key=_natural_key)
    if missing:
        warnings.append("no IPv4 RoCE v2 GID on %s: NCCL_IB_GID_INDEX cannot be set" % ", ".join(missing))
    else:
        listed = ", ".join("%s=%s" % (k, indexes[k]) for k in sorted(indexes, key=_natural_key))
        warnings.append("RoCE v2 GID index differs between ports (%s): NCCL_IB_GID_INDEX left unset" % listed)
    return None


def _compare_ibstat(devices, ibstat, warnings):
    """Warn where ibstat and sysfs disagree: a port's state, or a CA only one of them sees."""
    tool = {(ca["name"], p["port"]): p.get("state") for ca in ibstat for p in ca.get("ports", [])}
    tool_cas = {ca["name"] for ca in ibstat}
    sysfs_cas = set()
    for dev in devices:
        # ibstat lists only IB-type CAs (node type CA/switch/router): EFA never appears there.
        if dev.get("kind") == "efa":
            continue
        sysfs_cas.add(dev["name"])
        if dev["name"] not in tool_cas:
            warnings.append("ibstat does not report %s, which sysfs shows" % dev["name"])
            continue
        for port in dev.get("ports", []):
            key = (dev["name"], port["port"])
            want = SYSFS_TO_TOOL_STATE.get(port.get("state"), port.get("state"))
            if key in tool and tool[key] != want:
                warnings.append("%s:%d: ibstat says %s, sysfs says %s" % (key[0], key[1], tool[key], port.get("state")))
    for name in sorted(tool_cas - sysfs_cas, key=_natural_key):
        warnings.append("ibstat reports %s, which sysfs does not show" % name)


def detect(devices, fi_info=None, ibstat=None):
    """Decide the fabric from ``read_sysfs`` devices; ``fi_info``/``ibstat`` are parsed or None.

    Returns ``{fabric, devices, active_ports, down_ports, rate_gbps, netdevs, gid_index,
    libfabric_efa, warnings}``. Ports are ``"<device>:<port>"``, only those of the chosen
    fabric's kind; ``rate_gbps`` and ``netdevs`` cover the active ones. The fabric is decided
    by presence: with every port down it is still that fabric, with ``active_ports`` empty.
    """
    fabric = choose_fabric(devices)
    warnings = []
    active, down = [], []
    for dev, port in _fabric_ports(devices, fabric):
        (active if port.get("state") == "ACTIVE" else down).append((dev, port))
    names = ["%s:%d" % (d["name"], p["port"]) for d, p in active]
    rates = {"%s:%d" % (d["name"], p["port"]): p.get("rate_gbps") for d, p in active}
    netdevs = []
    for _dev, port in active:
        if fabric in ("ib", "roce") and port.get("netdev") and port["netdev"] not in netdevs:
            netdevs.append(port["netdev"])
    if down:
        warnings.append(
            "%d of %d %s ports not active: %s"
            % (
                len(down),
                len(down) + len(active),
                fabric,
                ", ".join("%s:%d (%s)" % (d["name"], p["port"], p.get("state")) for d, p in down),
            )
        )
    known = {r for r in rates.values() if r is not None}
    if len(known) > 1:
        listed = ", ".join("%s=%g" % (k, v) for k, v in rates.items() if v is not None)
        warnings.append("active %s ports run at different rates (Gb/s): %s" % (fabric, listed))
    gid_index = _gid_index(active, warnings) if fabric == "roce" else None
    libfabric_efa = None
    if fi_info is not None:
        libfabric_efa = any(entry.get("provider") == "efa" for entry in fi_info)
        if fabric == "efa" and not libfabric_efa:
            warnings.append("EFA devices present but fi_info lists no efa provider: libfabric cannot use them")
        elif fabric != "efa" and libfabric_efa:
            warnings.append("fi_info lists the efa provider but sysfs shows no EFA device (wrong sysfs root?)")
    if ibstat is not None:
        _compare_ibstat(devices, ibstat, warnings)
    return {
        "fabric": fabric,
        "devices": devices,
        "active_ports": names,
        "down_ports": ["%s:%d" % (d["name"], p["port"]) for d, p in down],
        "rate_gbps": rates,
        "netdevs": netdevs,
        "gid_index": gid_index,
        "libfabric_efa": libfabric_efa,
        "warnings": warnings,
    }


# ----------------------------------------------------------------------------- gather


def _run_tool(runner, args, ok_codes, warnings):
    """stdout of a tool, tolerating non-zero exits; None (with a warning) if it cannot run."""
    try:
        rc, out, err = runner.run(list(args))
    except CommandError as exc:
        warnings.append(str(exc))
        return None
    if rc not in ok_codes:
        first = (err or out or "").strip().splitlines()
        warnings.append("%s exited %d%s" % (os.path.basename(args[0]), rc, ": " + first[0] if first else ""))
    return out


def gather(runner, root="/"):
    """read_sysfs + the tools that exist, through ``runner``; returns ``detect(...)`` plus
    ``tools`` ({fi_info, ibstat}: path or None) and ``interfaces`` (read_netdevs).

    ``fi_info -p efa`` exits non-zero when there is no provider (61, ENODATA): that is an
    answer (no efa), not a failure. ibstat exits 255 after printing part of its output: the
    part is used.
    """
    warnings = []
    tools = {"fi_info": runner.which("fi_info", (EFA_BIN_DIR,)), "ibstat": runner.which("ibstat")}
    fi_info = ibstat = None
    if tools["fi_info"]:
        out = _run_tool(runner, [tools["fi_info"]] + list(FI_INFO_ARGS), (0, 61), warnings)
        fi_info = None if out is None else parse_fi_info(out)
    if tools["ibstat"]:
        out = _run_tool(runner, [tools["ibstat"]], (0,), warnings)
        ibstat = None if out is None else parse_ibstat(out)
    result = detect(read_sysfs(root), fi_info=fi_info, ibstat=ibstat)
    result["warnings"] = warnings + result["warnings"]
    result["tools"] = tools
    result["interfaces"] = read_netdevs(root)
    return result
