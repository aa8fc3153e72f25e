"""Simulated RDMA hardware for sandbox nodes: a sysfs tree and the tools that read it.

A node's scenario (JSON, default /etc/raygate-sim/scenario.json) describes its hardware.
``build`` turns the ``fabric`` part into ``<root>/sys/class/infiniband/...`` laid out like the
kernel's sysfs, and the simulated ``fi_info``, ``ibstat`` and ``ibv_devinfo`` render their
output from that tree alone, so the tree is the single source of truth. ``<root>`` is
``$RAYGATE_SIM_ROOT`` or /opt/raygate-sim. The ``gpu`` key belongs to gpu_sim.py (same
directory): ``build`` and ``set-scenario`` validate it too and, after the tree, let gpu_sim
write its files (kernel log, ``<root>/proc/driver/nvidia``, ``<root>/sys/module/nvidia_peermem``).
Other top-level keys are ignored.

    raygate_sim.py build [--scenario F] [--root R] [--init]   (--init: write the default
                                                              scenario first if F is missing)
    raygate_sim.py set-scenario [--scenario F] [--root R] < NEW.json
                                                              (validate, build, then save as F)
    raygate_sim.py tool fi_info|ibstat|ibv_devinfo ARGV0 [ARGS...]   (what bin/* run)

Scenario ``fabric``: ``{"type": "ib"|"roce"|"efa"|"none", "devices": N, "rate": Gb/s,
"down": [device indexes whose port 1 is down], "eth_devices": M, "eth_down": [...]}``.
Defaults per type: ib and roce 8 x 400 Gb/s (an H100 node with ConnectX-7), efa 32 x 100
Gb/s (p5.48xlarge). ``eth_devices`` adds Ethernet-mode ConnectX-6 Dx devices (100 Gb/s,
RoCE-capable) after the main ones, as front-end NICs on a GPU node. ``firmware`` (firmware drift)
is the ConnectX firmware version of every main ib/roce device (default 28.39.1002), or
``{"<device index>": version}`` for some of them; sysfs' ``fw_ver``, ibstat and ibv_devinfo show it.

Port counters: every port gets the kernel's files, ``ports/1/counters/`` (the PMA PortCounters,
InfiniBand and RoCE) and ``ports/1/hw_counters/`` (mlx5's transport counters, RoCE's congestion
ones, or the EFA driver's statistics; EFA's admin-queue counters sit in the device's own
``hw_counters/``). Error counters read 0 and traffic counters plausible numbers, unless
``"counters": {"<device index>": {"<counter>": value}}`` sets them. ``"grow_in_test":
{"<device index>": {"<counter>": amount}}`` makes a simulated all_reduce_perf (or mpirun
launched here) add ``amount`` to this node's counter while it runs, as a failing cable would.

Only stdlib; runs on the node's python3.
"""

import getopt
import json
import os
import re
import shutil
import sys
import tempfile

# gpu_sim.py lives beside this file; tests load this one by path, so the directory may not be on sys.path.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_sim  # noqa: E402

DEFAULT_SCENARIO = "/etc/raygate-sim/scenario.json"
DEFAULT_ROOT = "/opt/raygate-sim"
ROOT_ENV = "RAYGATE_SIM_ROOT"
DEFAULT_FABRIC = {
    "type": "ib",
    "devices": 8,
    "rate": 400,
    "down": [],
    "eth_devices": 0,
    "eth_down": [],
    "counters": {},
    "grow_in_test": {},
    "firmware": None,
}
HCA_FIRMWARE = "28.39.1002"
TYPE_DEFAULTS = {
    "ib": {"devices": 8, "rate": 400},
    "roce": {"devices": 8, "rate": 400},
    "efa": {"devices": 32, "rate": 100},
    "none": {"devices": 0, "rate": 400},
}
MAX_DEVICES = 48
ETH_RATE = 100

# Link rate (Gb/s) -> (lanes, IB speed name); per-lane Gb/s and verbs speed code of each name.
RATE_MODES = {
    2.5: (1, "SDR"),
    10: (4, "SDR"),
    25: (1, "EDR"),
    40: (4, "QDR"),
    56: (4, "FDR"),
    100: (4, "EDR"),
    200: (4, "HDR"),
    400: (4, "NDR"),
    800: (4, "XDR"),
}
LANE_SPEEDS = {"SDR": (2.5, 1), "QDR": (10.0, 8), "FDR": (14.0, 16), "EDR": (25.0, 32), "HDR": (50.0, 64)}
LANE_SPEEDS.update({"NDR": (100.0, 128), "XDR": (200.0, 256)})
WIDTH_CODES = {1: 1, 4: 2, 8: 4, 12: 8, 2: 16}

STATE_NAMES = {1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}
PHYS_NAMES = {1: "Sleep", 2: "Polling", 3: "Disabled", 4: "PortConfigurationTraining", 5: "LinkUp"}
PHYS_NAMES.update({6: "LinkErrorRecovery", 7: "Phy Test"})
NODE_TYPES = {1: "CA", 2: "switch", 3: "router", 4: "RNIC", 7: "unspecified"}

LIBFABRIC_VERSION = "1.22.0amzn4.0"
EFA_PROVIDER_VERSION = "122.0"
IB_CAP_MASK = 0xA751E848
ETH_CAP_MASK = 0x00010000

# Counter files by where the kernel puts them (Documentation/ABI/stable/sysfs-class-infiniband,
# drivers/infiniband/hw/mlx5/counters.c, drivers/infiniband/hw/efa/efa_verbs.c).
PMA_ERRORS = (
    "symbol_error",
    "link_error_recovery",
    "link_downed",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors",
    "port_xmit_discards",
    "port_xmit_constraint_errors",
    "port_rcv_constraint_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "VL15_dropped",
)
PMA_TRAFFIC = (
    "port_xmit_data",
    "port_rcv_data",
    "port_xmit_packets",
    "port_rcv_packets",
    "unicast_xmit_packets",
    "unicast_rcv_packets",
    "multicast_xmit_packets",
    "multicast_rcv_packets",
    "port_xmit_wait",
)
MLX5_HW = (
    "rx_write_requests",
    "rx_read_requests",
    "rx_atomic_requests",
    "out_of_buffer",
    "out_of_sequence",
    "duplicate_request",
    "rnr_nak_retry_err",
    "packet_seq_err",
    "implied_nak_seq_err",
    "local_ack_timeout_err",
    "resp_local_length_error",
    "resp_cqe_error",
    "req_cqe_error",
    "req_remote_invalid_request",
    "req_remote_access_errors",
    "resp_remote_access_errors",
    "resp_cqe_flush_error",
    "req_cqe_flush_error",
    "req_transport_retries_exceeded",
    "req_rnr_retries_exceeded",
)
ROCE_HW = (
    "roce_adp_retrans",
    "roce_adp_retrans_to",
    "roce_slow_restart",
    "roce_slow_restart_cnps",
    "roce_slow_restart_trans",
    "rp_cnp_ignored",
    "rp_cnp_handled",
    "np_ecn_marked_roce_packets",
    "np_cnp_sent",
    "rx_icrc_encapsulated",
)
EFA_PORT_HW = (
    "tx_bytes",
    "tx_pkts",
    "rx_bytes",
    "rx_pkts",
    "rx_drops",
    "send_bytes",
    "send_wrs",
    "recv_bytes",
    "recv_wrs",
    "rdma_read_wrs",
    "rdma_read_bytes",
    "rdma_read_wr_err",
    "rdma_read_resp_bytes",
    "rdma_write_wrs",
    "rdma_write_bytes",
    "rdma_write_wr_err",
    "rdma_write_recv_bytes",
    "retrans_bytes",
    "retrans_pkts",
    "retrans_timeout_events",
    "unresponsive_remote_events",
    "impaired_remote_conn_events",
)
EFA_DEVICE_HW = (
    "submitted_cmds",
    "completed_cmds",
    "cmds_err",
    "no_completion_cmds",
    "keep_alive_rcvd",
    "alloc_pd_err",
    "create_qp_err",
    "create_cq_err",
    "reg_mr_err",
    "alloc_ucontext_err",
    "create_ah_err",
    "mmap_err",
)
# Traffic-like counters that are not zero on a node that has run anything (the rest are errors: 0).
BUSY_COUNTERS = set(PMA_TRAFFIC) | {"rx_write_requests", "rx_read_requests", "rp_cnp_handled", "np_cnp_sent"}
BUSY_COUNTERS |= {"roce_adp_retrans", "np_ecn_marked_roce_packets", "retrans_pkts", "retrans_bytes"}
BUSY_COUNTERS |= {"submitted_cmds", "completed_cmds", "keep_alive_rcvd"}
BUSY_COUNTERS |= set(n for n in EFA_PORT_HW if not n.endswith(("_err", "_events", "_drops")))


class ScenarioError(ValueError):
    """The scenario file cannot be used."""


def sim_root(root=None):
    return root or os.environ.get(ROOT_ENV) or DEFAULT_ROOT


# --------------------------------------------------------------------------- scenario


def load_scenario(path=DEFAULT_SCENARIO):
    try:
        with open(path, encoding="utf-8") as fh:
            return parse_scenario(fh.read(), path)
    except OSError as exc:
        raise ScenarioError("cannot read scenario %s: %s" % (path, exc.strerror)) from exc


def parse_scenario(text, where="scenario"):
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ScenarioError("%s is not JSON: %s" % (where, exc)) from exc
    if not isinstance(data, dict):
        raise ScenarioError("%s must be a JSON object" % where)
    normalize_fabric(data.get("fabric"))
    try:
        gpu_sim.normalize_gpu(data.get("gpu"))
    except ValueError as exc:
        raise ScenarioError(str(exc)) from exc
    return data


def _int_list(value, name, limit):
    if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in value):
        raise ScenarioError("fabric.%s must be a list of device indexes" % name)
    bad = [i for i in value if not 0 <= i < limit]
    if bad:
        raise ScenarioError("fabric.%s: no device %s (there are %d)" % (name, bad, limit))
    return sorted(set(value))


def _count(fabric, name, default):
    value = fabric.get(name, default)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_DEVICES:
        raise ScenarioError("fabric.%s must be an integer 0..%d" % (name, MAX_DEVICES))
    return value


def normalize_fabric(fabric):
    """The scenario's ``fabric`` with defaults filled in; ScenarioError when it is invalid."""
    if fabric is None:
        fabric = {}
    if not isinstance(fabric, dict):
        raise ScenarioError("fabric must be a JSON object")
    kind = fabric.get("type", DEFAULT_FABRIC["type"])
    if kind not in TYPE_DEFAULTS:
        raise ScenarioError("fabric.type must be one of %s, not %r" % (", ".join(sorted(TYPE_DEFAULTS)), kind))
    defaults = TYPE_DEFAULTS[kind]
    devices = 0 if kind == "none" else _count(fabric, "devices", defaults["devices"])
    eth = _count(fabric, "eth_devices", 0)
    if devices + eth > MAX_DEVICES:
        raise ScenarioError("at most %d devices in all" % MAX_DEVICES)
    rate = fabric.get("rate", defaults["rate"])
    if rate not in RATE_MODES:
        raise ScenarioError("fabric.rate must be one of %s Gb/s" % ", ".join("%g" % r for r in sorted(RATE_MODES)))
    unknown = set(fabric) - set(DEFAULT_FABRIC)
    if unknown:
        raise ScenarioError("unknown fabric keys: %s" % ", ".join(sorted(unknown)))
    return {
        "type": kind,
        "devices": devices,
        "rate": rate,
        "down": _int_list(fabric.get("down", []), "down", devices),
        "eth_devices": eth,
        "eth_down": _int_list(fabric.get("eth_down", []), "eth_down", eth),
        "counters": _counter_map(fabric.get("counters", {}), "counters", kind, devices, eth),
        "grow_in_test": _counter_map(fabric.get("grow_in_test", {}), "grow_in_test", kind, devices, eth),
        "firmware": _firmware_map(fabric.get("firmware"), devices, kind),
    }


def _firmware_map(value, devices, kind):
    """``fabric.firmware`` as {device index: version} (empty: every device has HCA_FIRMWARE).

    Takes its own output too (int keys), as normalize_fabric does.
    """
    if value is None or value == {}:
        return {}
    if kind not in ("ib", "roce"):
        raise ScenarioError("fabric.firmware is the ConnectX firmware of ib and roce devices, not of %s" % kind)
    if isinstance(value, str):
        value = dict((str(i), value) for i in range(devices))
    if not isinstance(value, dict):
        raise ScenarioError("fabric.firmware must be a version string or an object of device index to version")
    out = {}
    for key, version in value.items():
        index = int(key) if isinstance(key, str) and key.isdigit() else key
        if not (isinstance(index, int) and not isinstance(index, bool) and 0 <= index < devices):
            raise ScenarioError("fabric.firmware: no device %r (there are %d)" % (key, devices))
        if not isinstance(version, str) or not re.match(r"^\d+\.\d+\.\d+$", version):
            raise ScenarioError("fabric.firmware: %r does not look like 28.39.1002" % (version,))
        out[index] = version
    return out


def counter_names(kind):
    """{counter name: where} of a device of ``kind``: port (``counters``/``hw_counters``) or ``device``."""
    if kind == "efa":
        names = dict((n, "hw_counters") for n in EFA_PORT_HW)
        names.update((n, "device") for n in EFA_DEVICE_HW)
        return names
    names = dict((n, "counters") for n in PMA_ERRORS + PMA_TRAFFIC)
    names.update((n, "hw_counters") for n in MLX5_HW + (ROCE_HW if kind == "roce" else ()))
    return names


def _counter_map(value, name, kind, devices, eth):
    """``{"<device index>": {counter: int >= 0}}``, checked against the counters that device has."""
    if not isinstance(value, dict):
        raise ScenarioError("fabric.%s must map device indexes to {counter: value}" % name)
    out = {}
    for key, counters in value.items():
        index = int(key) if str(key).isdigit() else -1
        if not 0 <= index < devices + eth:
            raise ScenarioError("fabric.%s: no device %s (there are %d)" % (name, key, devices + eth))
        if not isinstance(counters, dict):
            raise ScenarioError("fabric.%s.%s must be {counter: value}" % (name, key))
        known = counter_names(kind if index < devices else "roce")
        for counter, amount in counters.items():
            if counter not in known:
                raise ScenarioError("fabric.%s.%s: %s has no counter %r" % (name, key, _kind_word(kind), counter))
            if not isinstance(amount, int) or isinstance(amount, bool) or amount < 0:
                raise ScenarioError("fabric.%s.%s.%s must be an integer of 0 or more" % (name, key, counter))
        out[index] = dict(counters)
    return out


def _kind_word(kind):
    return {"efa": "an EFA device", "ib": "an InfiniBand port", "roce": "a RoCE port"}.get(kind, "the device")


# ------------------------------------------------------------------------- the model


def rate_text(gbps):
    lanes, name = RATE_MODES[gbps]
    return "%g Gb/sec (%dX %s)" % (gbps, lanes, name)


def _guid(prefix, index):
    return "%s:%04x" % (prefix, 0x6300 + index)


def _ipv4_mapped(a, b, c, d):
    return "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x" % (a, b, c, d)


def _mac_gid(guid):
    return "fe80:0000:0000:0000:" + guid


def _device(bus, name, driver, **extra):
    dev = {
        "name": name,
        "driver": driver,
        "bdf": "0000:%02x:00.0" % bus,
        "node_type": 1,
        "hw_rev": "0",
        "ports": [],
    }
    dev.update(extra)
    return dev


def _port(active, rate, link_layer, **extra):
    port = {
        "state": 4 if active else 1,
        "phys_state": 5 if active else (2 if link_layer == "InfiniBand" else 3),
        "rate": rate_text(rate if active else (10 if link_layer == "InfiniBand" else 40)),
        "link_layer": link_layer,
        "lid": 0,
        "sm_lid": 0,
        "lmc": 0,
        "cap_mask": ETH_CAP_MASK,
        "gids": [],
    }
    port.update(extra)
    return port


def _ib_device(i, bus, rate, active, firmware=HCA_FIRMWARE):
    guid = _guid("a088:c203:00da", i)
    port = _port(active, rate, "InfiniBand", lid=100 + i if active else 65535, sm_lid=1 if active else 0)
    port.update(cap_mask=IB_CAP_MASK, gids=[(_mac_gid(guid), "IB/RoCE v1", None)])
    dev = _device(bus, "mlx5_%d" % i, "mlx5_core", hca_type="MT4129", device_id=0x1021)
    dev.update(fw_ver=firmware, board_id="MT_0000000838", node_guid=guid, netdevs=["ibp%ds0" % bus])
    dev["ports"].append(port)
    return dev


def _roce_device(i, bus, rate, active, hca_type="MT4129", device_id=0x1021, firmware=HCA_FIRMWARE):
    guid = _guid("a288:c2ff:fead", i)
    netdev = "enp%ds0np0" % bus
    ipv4 = _ipv4_mapped(10, 100 + i // 250, i % 250, 1)
    gids = [
        (_mac_gid(guid), "IB/RoCE v1", netdev),
        (_mac_gid(guid), "RoCE v2", netdev),
        (ipv4, "IB/RoCE v1", netdev),
        (ipv4, "RoCE v2", netdev),
    ]
    dev = _device(bus, "mlx5_%d" % i, "mlx5_core", hca_type=hca_type, device_id=device_id)
    dev.update(fw_ver=firmware, board_id="MT_0000000838", node_guid=guid, netdevs=[netdev])
    dev["ports"].append(_port(active, rate, "Ethernet", gids=gids))
    return dev


def _efa_device(i, bus, rate, active):
    guid = _guid("0000:0000:0000", i)
    port = _port(active, rate, "Unspecified", lid=1, lmc=1, cap_mask=0)
    port["gids"] = [("fe80:0000:0000:0000:04c9:3cff:fe6e:%04x" % i, None, None)]
    dev = _device(bus, "rdmap%ds0" % bus, "efa", node_type=7, device_id=0xEFA1, vendor=0x1D0F)
    dev.update(node_guid=guid, netdevs=[])
    dev["ports"].append(port)
    return dev


def model(fabric):
    """The devices a normalized ``fabric`` describes, as plain data for ``build_tree``."""
    fabric = normalize_fabric(fabric)
    makers = {"ib": _ib_device, "roce": _roce_device}
    devices = []
    for i in range(fabric["devices"]):
        active = i not in fabric["down"]
        args = (i, 0x10 + 5 * i, fabric["rate"], active)
        if fabric["type"] == "efa":
            dev = _efa_device(*args)
        else:
            dev = makers[fabric["type"]](*args, firmware=fabric["firmware"].get(i, HCA_FIRMWARE))
        dev["counters"] = _counters(fabric["type"], i, active, fabric["counters"].get(i, {}))
        devices.append(dev)
    for j in range(fabric["eth_devices"]):
        i = fabric["devices"] + j
        active = j not in fabric["eth_down"]
        dev = _roce_device(i, 0x10 + 5 * i, ETH_RATE, active, hca_type="MT4125", device_id=0x101D)
        dev["counters"] = _counters("roce", i, active, fabric["counters"].get(i, {}))
        devices.append(dev)
    return devices


def _counters(kind, index, active, overrides):
    """{where: {counter: value}}: errors 0, traffic a plausible figure (less on a down port), then overrides."""
    out = {}
    for name, where in counter_names(kind).items():
        value = 0
        if name in BUSY_COUNTERS:
            # Seeded by device and name, so every build of a scenario writes the same tree.
            value = (7 + index) * (1 + sum(ord(c) for c in name) % 97) * (10**9 if active else 10**3)
            if name.endswith(("packets", "pkts", "wrs", "cmds", "rcvd", "requests", "cnp_sent", "handled")):
                value //= 1000
        out.setdefault(where, {})[name] = overrides.get(name, value)
    return out


def counter_path(root, fabric, index, name):
    """Where device ``index``'s counter ``name`` lives under ``root`` (None if it has no such counter)."""
    fabric = normalize_fabric(fabric)
    devices = model(fabric)
    if not 0 <= index < len(devices):
        return None
    kind = fabric["type"] if index < fabric["devices"] else "roce"
    where = counter_names(kind).get(name)
    if where is None:
        return None
    base = os.path.join(root, "sys", "class", "infiniband", devices[index]["name"])
    if where == "device":
        return os.path.join(base, "hw_counters", name)
    return os.path.join(base, "ports", "1", where, name)


def grow_counters(root, fabric):
    """Add the scenario's ``grow_in_test`` amounts to this node's counter files; returns the files changed.

    A counter file that is missing (the tree was not built) is left alone.
    """
    changed = []
    for index, amounts in sorted(normalize_fabric(fabric)["grow_in_test"].items()):
        for name, amount in sorted(amounts.items()):
            path = counter_path(root, fabric, index, name)
            try:
                with open(path, encoding="utf-8") as fh:
                    value = int(fh.read().strip() or 0)
            except (OSError, TypeError, ValueError):
                continue
            _write(path, str(value + amount))
            changed.append(path)
    return changed


# ---------------------------------------------------------------------------- the tree


def _write(path, content):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(content + "\n")


def _write_device(sys_dir, dev):
    pci = os.path.join(sys_dir, "devices", "pci0000:00", dev["bdf"])
    driver_dir = os.path.join(sys_dir, "bus", "pci", "drivers", dev["driver"])
    os.makedirs(driver_dir, exist_ok=True)
    os.makedirs(pci, exist_ok=True)
    os.symlink(os.path.join("..", "..", "..", "bus", "pci", "drivers", dev["driver"]), os.path.join(pci, "driver"))
    _write(os.path.join(pci, "vendor"), "0x%04x" % dev.get("vendor", 0x15B3))
    _write(os.path.join(pci, "device"), "0x%04x" % dev["device_id"])
    for number, netdev in enumerate(dev["netdevs"]):
        _write(os.path.join(pci, "net", netdev, "dev_port"), str(number))
    base = os.path.join(sys_dir, "class", "infiniband", dev["name"])
    os.makedirs(base)
    os.symlink(os.path.join("..", "..", "..", "devices", "pci0000:00", dev["bdf"]), os.path.join(base, "device"))
    _write(os.path.join(base, "node_type"), "%d: %s" % (dev["node_type"], NODE_TYPES[dev["node_type"]]))
    _write(os.path.join(base, "node_guid"), dev["node_guid"])
    _write(os.path.join(base, "sys_image_guid"), dev["node_guid"])
    for key in ("fw_ver", "hca_type", "board_id", "hw_rev"):
        if key in dev:
            _write(os.path.join(base, key), dev[key])
    for number, port in enumerate(dev["ports"], start=1):
        _write_port(os.path.join(base, "ports", str(number)), port)
    counters = dev.get("counters", {})
    for where, values in counters.items():
        folder = os.path.join(base, "hw_counters") if where == "device" else os.path.join(base, "ports", "1", where)
        for name, value in values.items():
            _write(os.path.join(folder, name), str(value))
        if where != "counters":
            # Every hw_counters directory has lifespan (ms between refreshes), which is not a counter.
            _write(os.path.join(folder, "lifespan"), "10")


def _write_port(pdir, port):
    _write(os.path.join(pdir, "state"), "%d: %s" % (port["state"], STATE_NAMES[port["state"]]))
    _write(os.path.join(pdir, "phys_state"), "%d: %s" % (port["phys_state"], PHYS_NAMES[port["phys_state"]]))
    _write(os.path.join(pdir, "rate"), port["rate"])
    _write(os.path.join(pdir, "link_layer"), port["link_layer"])
    _write(os.path.join(pdir, "lid"), "0x%x" % port["lid"])
    _write(os.path.join(pdir, "sm_lid"), "0x%x" % port["sm_lid"])
    _write(os.path.join(pdir, "sm_sl"), "0")
    _write(os.path.join(pdir, "lid_mask_count"), str(port["lmc"]))
    _write(os.path.join(pdir, "cap_mask"), "0x%08x" % port["cap_mask"])
    _write(os.path.join(pdir, "pkeys", "0"), "0xffff")
    # A GID table has more slots than entries: unused ones read as zeros and have no attrs.
    gids = port["gids"] + [("0000:" * 7 + "0000", None, None)] * 4
    for index, (gid, kind, ndev) in enumerate(gids):
        _write(os.path.join(pdir, "gids", str(index)), gid)
        if kind:
            _write(os.path.join(pdir, "gid_attrs", "types", str(index)), kind)
        if ndev:
            _write(os.path.join(pdir, "gid_attrs", "ndevs", str(index)), ndev)


def build_tree(root, fabric, net_target="/sys/class/net"):
    """Write ``<root>/sys`` for ``fabric`` (a scenario's ``fabric`` dict), replacing any earlier one.

    ``<root>/sys/class/net`` is a symlink to ``net_target`` (the node's real interfaces). The
    new tree is built beside the old one and swapped in, so a reader sees one or the other.
    Returns the device names.
    """
    devices = model(fabric)
    os.makedirs(root, exist_ok=True)
    new = tempfile.mkdtemp(prefix=".sys-new-", dir=root)
    try:
        os.makedirs(os.path.join(new, "class"))
        os.symlink(net_target, os.path.join(new, "class", "net"))
        for dev in devices:
            _write_device(new, dev)
        os.chmod(new, 0o755)
        final = os.path.join(root, "sys")
        old = None
        if os.path.lexists(final):
            old = tempfile.mkdtemp(prefix=".sys-old-", dir=root)
            os.rename(final, os.path.join(old, "sys"))
        os.rename(new, final)
    except BaseException:
        shutil.rmtree(new, ignore_errors=True)
        raise
    if old:
        shutil.rmtree(old, ignore_errors=True)
    return [dev["name"] for dev in devices]


# ---------------------------------------------------------------- reading the tree back


def _read(path, default=None):
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read().strip()
    except OSError:
        return default


def _code_of(value, default=0):
    """'4: ACTIVE' -> 4 (what the C tools get with strtoul)."""
    try:
        return int((value or "").split(":")[0].strip())
    except ValueError:
        return default


def _hex(value, default=0):
    try:
        return int((value or "").replace(":", ""), 16)
    except ValueError:
        return default


def read_tree(root=None):
    """Every device of the tree as the tools see it (sorted by name as ibstat lists them)."""
    class_dir = os.path.join(sim_root(root), "sys", "class", "infiniband")
    try:
        names = sorted(os.listdir(class_dir))
    except OSError:
        return []
    return [_read_device(os.path.join(class_dir, name), name) for name in names]


def _read_device(base, name):
    pci = os.path.join(base, "device")
    try:
        driver = os.path.basename(os.readlink(os.path.join(pci, "driver")))
    except OSError:
        driver = None
    dev = {
        "name": name,
        "driver": driver,
        "node_type": _code_of(_read(os.path.join(base, "node_type"))),
        "node_guid": _hex(_read(os.path.join(base, "node_guid"))),
        "sys_guid": _hex(_read(os.path.join(base, "sys_image_guid"))),
        "fw_ver": _read(os.path.join(base, "fw_ver"), ""),
        "hca_type": _read(os.path.join(base, "hca_type"), ""),
        "hw_rev": _read(os.path.join(base, "hw_rev"), "0"),
        "board_id": _read(os.path.join(base, "board_id")),
        "vendor": _hex(_read(os.path.join(pci, "vendor"))),
        "device_id": _hex(_read(os.path.join(pci, "device"))),
        "ports": [],
    }
    ports_dir = os.path.join(base, "ports")
    try:
        numbers = sorted(int(n) for n in os.listdir(ports_dir) if n.isdigit())
    except OSError:
        numbers = []
    for number in numbers:
        dev["ports"].append(_read_port(os.path.join(ports_dir, str(number)), number))
    return dev


def _read_port(pdir, number):
    rate_text_ = _read(os.path.join(pdir, "rate"), "")
    try:
        rate = float(rate_text_.split()[0])
    except (IndexError, ValueError):
        rate = 0.0
    gids = []
    gid_dir = os.path.join(pdir, "gids")
    try:
        indexes = sorted(int(n) for n in os.listdir(gid_dir) if n.isdigit())
    except OSError:
        indexes = []
    for index in indexes:
        gids.append((index, _read(os.path.join(gid_dir, str(index)), "")))
    return {
        "port": number,
        "state": _code_of(_read(os.path.join(pdir, "state"))),
        "phys_state": _code_of(_read(os.path.join(pdir, "phys_state"))),
        "rate": rate,
        "rate_text": rate_text_,
        "link_layer": _read(os.path.join(pdir, "link_layer"), "IB"),
        "lid": _hex(_read(os.path.join(pdir, "lid"))),
        "sm_lid": _hex(_read(os.path.join(pdir, "sm_lid"))),
        "lmc": _code_of(_read(os.path.join(pdir, "lid_mask_count"))),
        "cap_mask": _hex(_read(os.path.join(pdir, "cap_mask"))),
        "gids": gids,
    }


def _port_guid(port):
    for index, gid in port["gids"]:
        if index == 0:
            return _hex(gid[-19:])
    return 0


# ------------------------------------------------------------------------------ ibstat

IBSTAT_STATES = {0: "???", 1: "Down", 2: "Initializing", 3: "Armed", 4: "Active"}
IBSTAT_PHYS = {0: "No state change", 1: "Sleep", 2: "Polling", 3: "Disabled", 4: "PortConfigurationTraining"}
IBSTAT_PHYS.update({5: "LinkUp", 6: "LinkErrorRecovery", 7: "PhyTest"})
IBSTAT_NODE = {1: "CA", 2: "Switch", 3: "Router"}


def _ibstat_rate(port):
    if port["rate"] == 2.5:
        return "2.5"
    return "%d" % int(port["rate"])


def _ibstat_port(port, alone):
    pre, hdr = ("", "") if alone else ("\t\t", "\t")
    lines = ["%sPort %d:" % (hdr, port["port"])]
    lines.append("%sState: %s" % (pre, IBSTAT_STATES.get(port["state"], "???")))
    lines.append("%sPhysical state: %s" % (pre, IBSTAT_PHYS.get(port["phys_state"], "???")))
    lines.append("%sRate: %s" % (pre, _ibstat_rate(port)))
    lines.append("%sBase lid: %d" % (pre, port["lid"]))
    lines.append("%sLMC: %d" % (pre, port["lmc"]))
    lines.append("%sSM lid: %d" % (pre, port["sm_lid"]))
    lines.append("%sCapability mask: 0x%08x" % (pre, port["cap_mask"]))
    lines.append("%sPort GUID: 0x%016x" % (pre, _port_guid(port)))
    lines.append("%sLink layer: %s" % (pre, port["link_layer"]))
    return lines


def _ibstat_ca(dev, short):
    kind = IBSTAT_NODE.get(dev["node_type"], "???")
    lines = ["%s '%s'" % (kind, dev["name"]), "\t%s type: %s" % (kind, dev["hca_type"])]
    lines.append("\tNumber of ports: %d" % len(dev["ports"]))
    lines.append("\tFirmware version: %s" % dev["fw_ver"])
    lines.append("\tHardware version: %s" % dev["hw_rev"])
    lines.append("\tNode GUID: 0x%016x" % dev["node_guid"])
    lines.append("\tSystem image GUID: 0x%016x" % dev["sys_guid"])
    if not short:
        for port in dev["ports"]:
            lines.extend(_ibstat_port(port, alone=False))
    return lines


def _ibpanic(message):
    # ibstat's IBPANIC: stderr, the function name, strerror(errno), exit(-1).
    sys.stderr.write("ibpanic: [%d] main: %s\n" % (os.getpid(), message))
    return 255


def ibstat_main(argv):
    """ibstat [-l] [-s] [-p] [CA [PORT]]: only IB-type devices (node type 1..3), like umad."""
    try:
        opts, args = getopt.gnu_getopt(argv[1:], "lsphV", ["list_of_cas", "short", "port_list", "help", "version"])
    except getopt.GetoptError as exc:
        sys.stderr.write("%s: %s\nUsage: %s [options] <ca_name> [portnum]\n" % (argv[0], exc, argv[0]))
        return 2
    flags = {opt.lstrip("-")[0] for opt, _value in opts}
    if "h" in flags:
        sys.stderr.write("Usage: %s [options] <ca_name> [portnum]\n" % argv[0])
        return 2
    if "V" in flags:
        sys.stderr.write("%s BUILD VERSION: 50.0\n" % argv[0])
        return 0
    cas = [dev for dev in read_tree() if 1 <= dev["node_type"] <= 3]
    if args:
        # Real ibstat matches a prefix (mlx5_1 would answer for mlx5_10); we match exactly.
        cas = [dev for dev in cas if dev["name"] == args[0]]
        if not cas:
            return _ibpanic("'%s' IB device can't be found: Success" % args[0])
    out = []
    if "p" in flags:
        out = ["0x%016x" % _port_guid(p) for dev in cas for p in dev["ports"] if _port_guid(p)]
    elif "l" in flags:
        out = [dev["name"] for dev in cas]
    elif len(args) > 1 and "s" not in flags:
        dev, number = cas[0], int(args[1], 0)
        port = [p for p in dev["ports"] if p["port"] == number]
        if not port:
            print(
                "ibwarn: [%d] ca_stat: CA: '%s' has no port number %d - max (%d)"
                % (os.getpid(), dev["name"], number, len(dev["ports"]))
            )
            return _ibpanic("stat of IB device '%s' failed: Success" % dev["name"])
        out = ["CA: '%s'" % dev["name"]] + _ibstat_port(port[0], alone=True)
    else:
        for dev in cas:
            out.extend(_ibstat_ca(dev, short="s" in flags))
    sys.stdout.write("".join(line + "\n" for line in out))
    return 0


# ------------------------------------------------------------------------- ibv_devinfo

DEVINFO_STATES = {1: "PORT_DOWN", 2: "PORT_INIT", 3: "PORT_ARMED", 4: "PORT_ACTIVE"}
DEVINFO_PHYS = {1: "SLEEP", 2: "POLLING", 3: "DISABLED", 4: "PORT_CONFIGURATION TRAINNING", 5: "LINK_UP"}
DEVINFO_PHYS.update({6: "LINK_ERROR_RECOVERY", 7: "PHY TEST"})
# Verbs transport by sysfs node type: CA -> InfiniBand (RoCE too), RNIC -> iWARP, else unspecified.
DEVINFO_TRANSPORT = {1: ("InfiniBand", 0), 4: ("iWARP", 1)}


def _guid_groups(value):
    return ":".join("%04x" % ((value >> shift) & 0xFFFF) for shift in (48, 32, 16, 0))


def _speed_width(rate):
    mode = RATE_MODES.get(rate)
    if mode is None:
        return None
    lanes, name = mode
    return lanes, LANE_SPEEDS[name]


def _devinfo_port(dev, port, verbose):
    state = port["state"]
    lines = ["\t\tport:\t%d" % port["port"]]
    lines.append("\t\t\tstate:\t\t\t%s (%d)" % (DEVINFO_STATES.get(state, "invalid state"), state))
    lines.append("\t\t\tmax_mtu:\t\t4096 (5)")
    lines.append("\t\t\tactive_mtu:\t\t4096 (5)")
    lines.append("\t\t\tsm_lid:\t\t\t%d" % port["sm_lid"])
    lines.append("\t\t\tport_lid:\t\t%d" % port["lid"])
    lines.append("\t\t\tport_lmc:\t\t0x%02x" % port["lmc"])
    lines.append("\t\t\tlink_layer:\t\t%s" % port["link_layer"])
    if verbose:
        mode = _speed_width(port["rate"])
        if mode:
            lanes, (lane_gbps, code) = mode
            lines.append("\t\t\tactive_width:\t\t%dX (%d)" % (lanes, WIDTH_CODES[lanes]))
            lines.append("\t\t\tactive_speed:\t\t%.1f Gbps (%d)" % (lane_gbps, code))
        if dev["node_type"] == 1:
            phys = port["phys_state"]
            lines.append("\t\t\tphys_state:\t\t%s (%d)" % (DEVINFO_PHYS.get(phys, "invalid physical state"), phys))
        for index, gid in port["gids"]:
            if gid.replace(":", "").strip("0"):
                lines.append("\t\t\tGID[%3d]:\t\t%s" % (index, gid))
    lines.append("")
    return lines


def _devinfo_device(dev, ib_port, verbose):
    if ib_port and ib_port > len(dev["ports"]):
        sys.stderr.write("Invalid port requested for device\n")
        return [], 4
    transport, code = DEVINFO_TRANSPORT.get(dev["node_type"], ("unspecified", 4))
    # Verbs report Mellanox's IEEE OUI as vendor_id, not its PCI vendor id.
    vendor = 0x02C9 if dev["vendor"] == 0x15B3 else dev["vendor"]
    lines = ["hca_id:\t%s" % dev["name"], "\ttransport:\t\t\t%s (%d)" % (transport, code)]
    if dev["fw_ver"]:
        lines.append("\tfw_ver:\t\t\t\t%s" % dev["fw_ver"])
    lines.append("\tnode_guid:\t\t\t%s" % _guid_groups(dev["node_guid"]))
    lines.append("\tsys_image_guid:\t\t\t%s" % _guid_groups(dev["sys_guid"]))
    lines.append("\tvendor_id:\t\t\t0x%04x" % vendor)
    lines.append("\tvendor_part_id:\t\t\t%d" % dev["device_id"])
    lines.append("\thw_ver:\t\t\t\t0x%X" % int(dev["hw_rev"] or "0", 0))
    if dev["board_id"]:
        lines.append("\tboard_id:\t\t\t%s" % dev["board_id"])
    lines.append("\tphys_port_cnt:\t\t\t%d" % len(dev["ports"]))
    lines.append("\tDevice ports:")
    for port in dev["ports"]:
        if not ib_port or port["port"] == ib_port:
            lines.extend(_devinfo_port(dev, port, verbose))
    return lines, 0


def ibv_devinfo_main(argv):
    """ibv_devinfo [-d DEV] [-i PORT] [-l] [-v]: every verbs device, EFA included."""
    usage = "Usage: %s             print the ca attributes\n" % argv[0]
    try:
        opts, _args = getopt.gnu_getopt(argv[1:], "d:i:lv", ["ib-dev=", "ib-port=", "list", "verbose"])
    except getopt.GetoptError:
        sys.stdout.write(usage)
        return 255
    devname, ib_port, verbose = None, 0, False
    devices = read_tree()
    for opt, value in opts:
        if opt in ("-d", "--ib-dev"):
            devname = value
        elif opt in ("-i", "--ib-port"):
            try:
                ib_port = int(value, 0)
            except ValueError:
                ib_port = 0
            if ib_port <= 0:
                sys.stdout.write(usage)
                return 1
        elif opt in ("-v", "--verbose"):
            verbose = True
        else:
            names = "".join("\t%s\n" % dev["name"] for dev in devices)
            count = len(devices)
            sys.stdout.write("%d HCA%s found:\n%s\n" % (count, "" if count == 1 else "s", names))
            return 0
    if devname is not None:
        devices = [dev for dev in devices if dev["name"] == devname]
        if not devices:
            sys.stderr.write("IB device '%s' wasn't found\n" % devname)
            return 255
    elif not devices:
        sys.stderr.write("No IB devices found\n")
        return 255
    rc = 0
    for dev in devices:
        lines, code = _devinfo_device(dev, ib_port, verbose)
        rc |= code
        sys.stdout.write("".join(line + "\n" for line in lines))
    return rc


# ----------------------------------------------------------------------------- fi_info

EP_TYPES = ("FI_EP_UNSPEC", "FI_EP_MSG", "FI_EP_DGRAM", "FI_EP_RDM", "FI_EP_SOCK_STREAM", "FI_EP_SOCK_DGRAM")


def _efa_entries():
    entries = []
    for dev in read_tree():
        if dev["driver"] != "efa":
            continue
        for suffix, ep_type in (("rdm", "FI_EP_RDM"), ("dgrm", "FI_EP_DGRAM")):
            entries.append(
                {
                    "provider": "efa",
                    "fabric": "efa",
                    "domain": "%s-%s" % (dev["name"], suffix),
                    "version": EFA_PROVIDER_VERSION,
                    "type": ep_type,
                    "protocol": "FI_PROTO_EFA",
                }
            )
    return entries


def fi_info_main(argv):
    """fi_info [-p PROV] [-t EPTYPE] [-d DOMAIN] [-f FABRIC] [-l] [--version]: the efa provider only."""
    try:
        opts, _args = getopt.gnu_getopt(
            argv[1:],
            "s:n:P:c:m:t:a:p:d:f:eg:i:lhv",
            ["src_addr=", "node=", "port=", "caps=", "mode=", "ep_type=", "domain=", "fabric=", "addr_format="]
            + ["provider=", "env", "getenv=", "info=", "list", "verbose", "help", "version"],
        )
    except getopt.GetoptError:
        sys.stdout.write("Usage: %s\n" % argv[0])
        return 1
    want = {}
    list_only = False
    for opt, value in opts:
        if opt == "--version":
            sys.stdout.write(
                "%s: %s\nlibfabric: %s\nlibfabric api: 1.22\n" % (argv[0], LIBFABRIC_VERSION, LIBFABRIC_VERSION)
            )
            return 0
        if opt in ("-h", "--help"):
            sys.stdout.write("Usage: %s\n" % argv[0])
            return 1
        if opt in ("-t", "--ep_type"):
            if value.upper() not in EP_TYPES:
                sys.stderr.write("error: Unrecognized endpoint type: %s\n" % value)
                return 22
            want["type"] = value.upper()
        elif opt in ("-p", "--provider"):
            want["provider"] = value.lower()
        elif opt in ("-d", "--domain"):
            want["domain"] = value
        elif opt in ("-f", "--fabric"):
            want["fabric"] = value
        elif opt in ("-l", "--list"):
            list_only = True
    entries = [e for e in _efa_entries() if all(e[k] == v for k, v in want.items() if v != "FI_EP_UNSPEC")]
    if not entries:
        sys.stderr.write("fi_getinfo: -61 (No data available)\n")
        return 61
    out = []
    if list_only:
        out = ["efa:", "    version: %s" % EFA_PROVIDER_VERSION]
    for entry in [] if list_only else entries:
        out.append("provider: %s" % entry["provider"])
        for key in ("fabric", "domain", "version", "type", "protocol"):
            out.append("    %s: %s" % (key, entry[key]))
    sys.stdout.write("".join(line + "\n" for line in out))
    return 0


# --------------------------------------------------------------------------------- CLI

TOOLS = {"ibstat": ibstat_main, "ibv_devinfo": ibv_devinfo_main, "fi_info": fi_info_main}


def run_tool(name, argv):
    """Run simulated tool ``name`` with ``argv`` (argv[0] as the tool was invoked)."""
    try:
        return TOOLS[name](argv)
    except BrokenPipeError:
        # `ibstat | head`: the reader left; not worth a traceback.
        return 141


def _save(path, text):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".scenario-", dir=os.path.dirname(path) or ".")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    usage = "usage: raygate_sim.py build|set-scenario [--scenario F] [--root R] [--init]\n"
    if len(argv) >= 3 and argv[0] == "tool" and argv[1] in TOOLS:
        return run_tool(argv[1], argv[2:])
    if not argv or argv[0] not in ("build", "set-scenario"):
        sys.stderr.write(usage)
        return 2
    try:
        opts, rest = getopt.gnu_getopt(argv[1:], "", ["scenario=", "root=", "init"])
    except getopt.GetoptError as exc:
        sys.stderr.write("raygate-sim: %s\n%s" % (exc, usage))
        return 2
    if rest:
        sys.stderr.write(usage)
        return 2
    options = dict(opts)
    path = options.get("--scenario", DEFAULT_SCENARIO)
    root = sim_root(options.get("--root"))
    try:
        if argv[0] == "set-scenario":
            text = sys.stdin.read()
            scenario = parse_scenario(text, "stdin")
        else:
            if "--init" in options and not os.path.exists(path):
                _save(path, json.dumps({"fabric": DEFAULT_FABRIC}, indent=2) + "\n")
            scenario = load_scenario(path)
        names = build_tree(root, scenario.get("fabric"))
        # After the tree: build_tree replaces <root>/sys, where gpu_sim puts sys/module/nvidia_peermem.
        gpu_sim.build(root, scenario)
        if argv[0] == "set-scenario":
            _save(path, text)
    except ScenarioError as exc:
        sys.stderr.write("raygate-sim: %s\n" % exc)
        return 2
    fabric = normalize_fabric(scenario.get("fabric"))
    gpu = gpu_sim.normalize_gpu(scenario.get("gpu"))
    gpus = "no GPU" if gpu["model"] == "none" else "%d x %s" % (gpu["count"], gpu["model"])
    faults = ", ".join(f["type"] for f in gpu["faults"]) or "healthy"
    print(
        "raygate-sim: %s fabric, %d device(s) under %s/sys; %s (%s)" % (fabric["type"], len(names), root, gpus, faults)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
