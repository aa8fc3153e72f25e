"""Simulated NVIDIA GPUs for sandbox nodes: nvidia-smi, dcgmi, all_reduce_perf and mpirun.

A node's scenario (JSON, ``$RAYGATE_SIM_SCENARIO`` or /etc/raygate-sim/scenario.json) may hold a
``gpu`` key; absent means 8 healthy H100 SXM GPUs behind NVSwitch. The tools render the real
output formats from that scenario, deterministically (every varying number is seeded from the
host name), and return at once:

    nvidia-smi -q -x | -L | --query-gpu=F,.. --format=csv[,noheader][,nounits] | nvlink -s  [-i ID]
    dcgmi diag -r 1|2|3 [-j]
    all_reduce_perf [-b -e -f -i -g -t -n -w -m -c -o -d ...]   (NCCL_DEBUG=INFO adds NCCL INFO lines)
    mpirun [-np N] [-H h1[:slots],h2[:slots]] [-N n] [-x VAR[=v]] [--mca k v] ... all_reduce_perf ...

``build`` (called by raygate_sim.py, or ``gpu_sim.py build``) writes what is not a tool: the
kernel log with the scenario's Xid, Xid-less driver error and NVSwitch SXid lines,
``<root>/proc/driver/nvidia/version``, ``<root>/sys/module/nvidia_peermem`` and an empty
``<root>/usr/lib/x86_64-linux-gnu/libnccl.so.<gpu.nccl>``.
Firmware drift: ``gpu.vbios`` (one version for every GPU, or ``{"<index>": version}``), ``gpu.driver``
and ``gpu.nccl`` change what this node reports; raygate_sim.py's ``fabric.firmware`` does the same
for the HCAs. mpirun reads the other hosts' scenarios from
``$RAYGATE_SIM_SCENARIOS_DIR`` (default /usr/local/lib/raygate-sim/scenarios, published there by
``sandbox.sh scenario``) as ``<address>.json`` or ``<hostname>.json``; a missing one is healthy.

Other environment for tests: ``RAYGATE_SIM_HOSTNAME`` (this host's name), ``RAYGATE_SIM_HOSTS_FILE``
(instead of /etc/hosts), ``RAYGATE_SIM_KERN_LOG`` (kernel log path), ``RAYGATE_SIM_EPOCH`` (the
clock for timestamps), ``RAYGATE_SIM_ROOT`` (the sim root, as for raygate_sim.py),
``RAYGATE_SIM_HANG_SECONDS`` (how long the ``nvsmi_hang`` fault holds, default 3600).

Only stdlib; runs on the node's python3 (3.8+).
"""

from __future__ import annotations

import getopt
import grp
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import time

DEFAULT_SCENARIO = "/etc/raygate-sim/scenario.json"
DEFAULT_SCENARIOS_DIR = "/usr/local/lib/raygate-sim/scenarios"
DEFAULT_ROOT = "/opt/raygate-sim"
DEFAULT_KERN_LOG = "/var/log/kern.log"
SCENARIO_ENV = "RAYGATE_SIM_SCENARIO"
SCENARIOS_DIR_ENV = "RAYGATE_SIM_SCENARIOS_DIR"
ROOT_ENV = "RAYGATE_SIM_ROOT"
KERN_LOG_ENV = "RAYGATE_SIM_KERN_LOG"
HOSTNAME_ENV = "RAYGATE_SIM_HOSTNAME"
HOSTS_ENV = "RAYGATE_SIM_HOSTS_FILE"
EPOCH_ENV = "RAYGATE_SIM_EPOCH"
HANG_ENV = "RAYGATE_SIM_HANG_SECONDS"

NCCL_VERSION = "2.21.5"
NCCL_LIB_DIR = "usr/lib/x86_64-linux-gnu"
DCGM_VERSION = "3.3.7"
NVLINKS = 18
NVLINK_SPEED = "26.562 GB/s"
BUS_IDS = [0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB]
MODULE_IDS = [2, 4, 1, 3, 7, 5, 6, 8]
# The four NVSwitches of an HGX H100/H200 baseboard (nvidia-nvswitch0..3) and their ports.
SWITCH_BUS_IDS = [0xC2, 0xC3, 0xC4, 0xC5]
NVSWITCH_PORTS = 64
GIB = 1 << 30

MODELS = {
    "H100": {
        "name": "NVIDIA H100 80GB HBM3",
        "mem_mib": 81559,
        "reserved_mib": 551,
        "device_id": "0x233010DE",
        "subsystem_id": "0x16C110DE",
        "dcgm_id": "2330",
        "vbios": "96.00.74.00.0D",
        "board_part": "692-2G520-0200-000",
        "gpu_part": "2330-885-A1",
        "inforom": "G520.0200.00.05",
        "mem_clock": 2619,
        "single_busbw": (470.0, 485.0),
    },
    "H200": {
        "name": "NVIDIA H200",
        "mem_mib": 143771,
        "reserved_mib": 614,
        "device_id": "0x233510DE",
        "subsystem_id": "0x18BE10DE",
        "dcgm_id": "2335",
        "vbios": "96.00.A5.00.03",
        "board_part": "695-2G520-0280-001",
        "gpu_part": "2335-895-A1",
        "inforom": "G520.0280.02.02",
        "mem_clock": 3201,
        "single_busbw": (470.0, 485.0),
    },
}
DEFAULT_GPU = {
    "model": "H100",
    "count": 8,
    "driver": "550.90.07",
    "cuda": "12.4",
    "nvswitch": True,
    "faults": [],
    # Firmware drift: a VBIOS version for every GPU ("96.00.99.00.01"), or {"<gpu index>": version}
    # for some of them; the others keep their model's. null: the model's for all.
    "vbios": None,
    # The NCCL version the node's library file and NCCL's INFO banner show.
    "nccl": NCCL_VERSION,
}
_VBIOS_RE = re.compile(r"^[0-9A-Fa-f]{2}(\.[0-9A-Fa-f]{2}){4}$")
MAX_GPUS = len(BUS_IDS)

# Fault type -> {key: default}; "gpu" is a GPU index. Validated by normalize_gpu().
FAULTS = {
    "ecc_uncorrectable": {"gpu": 0, "count": 1},
    "ecc_correctable": {"gpu": 0, "count": 200, "kind": "dram"},
    "ecc_disabled": {"gpu": 0},
    "persistence_off": {},
    "retired_pending": {"gpu": 0},
    "remap_pending": {"gpu": 0},
    "remap_failure": {"gpu": 0},
    "xid": {"xid": 79, "gpu": 0},
    # Kernel log only (the driver's three-line record, no Xid); add missing_gpu to drop it from nvidia-smi.
    "fallen_off_bus": {"gpu": 0},
    # An NVSwitch error on switch `switch`, link `port` (needs nvswitch: true).
    "sxid": {"sxid": 20034, "switch": 0, "port": 28},
    "nvlink_down": {"gpu": 0, "link": 0},
    "pcie_downgraded": {"gpu": 0, "gen": 3, "width": 8},
    "missing_gpu": {"count": 1},
    "thermal_throttle": {"gpu": 0},
    "fabric_manager_down": {},
    "dcgm_fail": {"test": "Memory", "gpu": 0},
    "no_gdr": {},
    "socket_fallback": {},
    # scope "network": only jobs across nodes are slow (a degraded uplink or cable that counts no
    # errors): the single-node test passes, the pair tests find it.
    "low_bandwidth": {"factor": 0.5, "scope": "all"},
    "wrong_values": {"count": 4},
    "nccl_abort": {},
    # nvidia-smi never returns and a kill does not end it, as on a GPU fallen off the bus (see _hang).
    "nvsmi_hang": {},
    # Every GPU tool takes <times> as long as it would (a node whose checks crawl: an overloaded
    # host, a driver slow to answer); the output is the healthy one. See slow_delay.
    "slow": {"times": 10},
    # The driver loaded with NVreg_DeviceFileMode=<mode> and NVreg_DeviceFileGID=<group's gid>: its
    # device files (<root>/dev/nvidia*) and <root>/proc/driver/nvidia/params say so. Default 0666 root.
    "device_files": {"mode": "0660", "group": "video"},
}

FABRIC_DEVICES = {"ib": 8, "roce": 8, "efa": 32, "none": 0}
# Busbw (GB/s) at the largest sizes of a healthy 2-node all_reduce, by network.
PAIR_BUSBW = {"ib": (360.0, 380.0), "roce": (350.0, 370.0), "efa": (470.0, 490.0), "socket": (2.0, 5.0)}

NVSMI_NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n"
)


class GpuScenarioError(ValueError):
    """The scenario's ``gpu`` part cannot be used."""


# --------------------------------------------------------------------------- helpers


def _env(name, default=None):
    value = os.environ.get(name)
    return value if value else default


def _now():
    try:
        return float(os.environ[EPOCH_ENV])
    except (KeyError, ValueError):
        return time.time()


def local_hostname():
    return _env(HOSTNAME_ENV) or socket.gethostname().split(".")[0]


def _rand(*keys):
    """A number in [0, 1) fixed by ``keys`` (host name first): the simulators' only randomness."""
    digest = hashlib.sha256("\0".join(str(k) for k in keys).encode()).digest()
    return int.from_bytes(digest[:8], "big") / float(1 << 64)


def _between(low_high, *keys):
    low, high = low_high
    return low + (high - low) * _rand(*keys)


def _out(text):
    sys.stdout.write(text)


def _err(text):
    sys.stderr.write(text)


# --------------------------------------------------------------------------- scenario


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _fault(raw, index, count):
    where = "gpu.faults[%d]" % index
    if not isinstance(raw, dict) or "type" not in raw:
        raise GpuScenarioError("%s must be an object with a type" % where)
    kind = raw["type"]
    if kind not in FAULTS:
        raise GpuScenarioError("%s.type must be one of %s, not %r" % (where, ", ".join(sorted(FAULTS)), kind))
    spec = FAULTS[kind]
    unknown = set(raw) - set(spec) - {"type"}
    if unknown:
        raise GpuScenarioError("%s (%s): unknown keys %s" % (where, kind, ", ".join(sorted(unknown))))
    fault = {"type": kind}
    fault.update(spec)
    fault.update(raw)
    checks = {
        "gpu": lambda v: _is_int(v) and 0 <= v < count,
        "count": lambda v: _is_int(v) and v >= 1,
        "kind": lambda v: v in ("dram", "sram"),
        "xid": lambda v: _is_int(v) and 1 <= v <= 999,
        "sxid": lambda v: _is_int(v) and 10000 <= v <= 99999,
        "switch": lambda v: _is_int(v) and 0 <= v < len(SWITCH_BUS_IDS),
        "port": lambda v: _is_int(v) and 0 <= v < NVSWITCH_PORTS,
        "link": lambda v: _is_int(v) and 0 <= v < NVLINKS,
        "gen": lambda v: _is_int(v) and 1 <= v <= 5,
        "width": lambda v: v in (1, 2, 4, 8, 16),
        "factor": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= 1,
        "times": lambda v: _is_int(v) and 2 <= v <= 100,
        "test": lambda v: isinstance(v, str) and v.strip() != "",
        "scope": lambda v: v in ("all", "network"),
        "mode": lambda v: isinstance(v, str) and re.match(r"^0[0-7]{3}$", v) is not None,
        "group": lambda v: isinstance(v, str) and re.match(r"^[a-z_][a-z0-9_-]*$", v) is not None,
    }
    for key in spec:
        if not checks[key](fault[key]):
            raise GpuScenarioError("%s (%s): bad %s %r" % (where, kind, key, fault[key]))
    if kind == "missing_gpu" and fault["count"] >= count:
        raise GpuScenarioError("%s: missing_gpu count must leave at least one of the %d GPUs" % (where, count))
    return fault


def _vbios_map(value, count):
    """``gpu.vbios`` as {GPU index: version} (empty: every GPU keeps its model's)."""
    if value is None:
        return {}
    if isinstance(value, str):
        value = dict((str(i), value) for i in range(count))
    if not isinstance(value, dict):
        raise GpuScenarioError("gpu.vbios must be a version string or an object of GPU index to version")
    out = {}
    for key, version in value.items():
        index = int(key) if isinstance(key, str) and key.isdigit() else key
        if not (_is_int(index) and 0 <= index < count):
            raise GpuScenarioError("gpu.vbios: no GPU %r (there are %d)" % (key, count))
        if not isinstance(version, str) or not _VBIOS_RE.match(version):
            raise GpuScenarioError("gpu.vbios: %r does not look like 96.00.74.00.0D" % (version,))
        out[index] = version
    return out


def normalize_gpu(gpu):
    """The scenario's ``gpu`` with defaults filled in; GpuScenarioError (a ValueError) when invalid."""
    if gpu is None:
        gpu = {}
    if not isinstance(gpu, dict):
        raise GpuScenarioError("gpu must be a JSON object")
    unknown = set(gpu) - set(DEFAULT_GPU)
    if unknown:
        raise GpuScenarioError("unknown gpu keys: %s" % ", ".join(sorted(unknown)))
    out = dict(DEFAULT_GPU)
    out.update(gpu)
    if out["model"] not in ("H100", "H200", "none"):
        raise GpuScenarioError("gpu.model must be H100, H200 or none, not %r" % (out["model"],))
    if not _is_int(out["count"]) or not 1 <= out["count"] <= MAX_GPUS:
        raise GpuScenarioError("gpu.count must be an integer 1..%d" % MAX_GPUS)
    if not isinstance(out["driver"], str) or not re.match(r"^\d+\.\d+(\.\d+)?$", out["driver"]):
        raise GpuScenarioError("gpu.driver must look like 550.90.07")
    if not isinstance(out["cuda"], str) or not re.match(r"^\d+\.\d+$", out["cuda"]):
        raise GpuScenarioError("gpu.cuda must look like 12.4")
    if not isinstance(out["nvswitch"], bool):
        raise GpuScenarioError("gpu.nvswitch must be true or false")
    out["vbios"] = _vbios_map(out["vbios"], out["count"])
    if not isinstance(out["nccl"], str) or not re.match(r"^\d+\.\d+\.\d+$", out["nccl"]):
        raise GpuScenarioError("gpu.nccl must look like 2.21.5")
    if not isinstance(out["faults"], list):
        raise GpuScenarioError("gpu.faults must be a list")
    if out["model"] == "none" and out["faults"]:
        raise GpuScenarioError("gpu.faults need GPUs (model is none)")
    out["faults"] = [_fault(raw, i, out["count"]) for i, raw in enumerate(out["faults"])]
    missing = sum(f["count"] for f in out["faults"] if f["type"] == "missing_gpu")
    if missing >= out["count"]:
        raise GpuScenarioError("missing_gpu faults leave no GPU")
    for kind in ("fabric_manager_down", "sxid"):
        if not out["nvswitch"] and any(f["type"] == kind for f in out["faults"]):
            raise GpuScenarioError("%s needs nvswitch: true" % kind)
    return out


def normalize_fabric(fabric):
    """The part of a scenario's ``fabric`` NCCL cares about (raygate_sim.py validates the rest)."""
    fabric = fabric if isinstance(fabric, dict) else {}
    kind = fabric.get("type", "ib")
    kind = kind if kind in FABRIC_DEVICES else "none"
    devices = fabric.get("devices", FABRIC_DEVICES[kind]) if kind != "none" else 0
    devices = devices if _is_int(devices) and devices >= 0 else FABRIC_DEVICES[kind]
    down = fabric.get("down", [])
    down = set(i for i in down if _is_int(i)) if isinstance(down, list) else set()
    return {"type": kind, "devices": devices, "active": [i for i in range(devices) if i not in down]}


def parse_scenario_text(text, where="scenario"):
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise GpuScenarioError("%s is not JSON: %s" % (where, exc)) from exc
    if not isinstance(data, dict):
        raise GpuScenarioError("%s must be a JSON object" % where)
    normalize_gpu(data.get("gpu"))
    return data


def read_scenario(path):
    """The scenario at ``path`` ({} when it does not exist)."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise GpuScenarioError("cannot read scenario %s: %s" % (path, exc.strerror)) from exc
    return parse_scenario_text(text, path)


def local_scenario():
    return read_scenario(_env(SCENARIO_ENV, DEFAULT_SCENARIO))


# ------------------------------------------------------------------------- the model


def faults_of(gpu, kind, index=None):
    return [f for f in gpu["faults"] if f["type"] == kind and (index is None or f.get("gpu") == index)]


def _uuid(host, i):
    h = hashlib.sha256(("uuid\0%s\0%d" % (host, i)).encode()).hexdigest()
    return "GPU-%s-%s-%s-%s-%s" % (h[0:8], h[8:12], h[12:16], h[16:20], h[20:32])


def model_gpus(host, gpu):
    """One dict per GPU nvidia-smi would list on ``host`` for a normalized ``gpu`` (empty for none)."""
    if gpu["model"] == "none":
        return []
    spec = MODELS[gpu["model"]]
    visible = gpu["count"] - sum(f["count"] for f in faults_of(gpu, "missing_gpu"))
    persistence = not faults_of(gpu, "persistence_off")
    gpus = []
    for i in range(visible):
        bus = BUS_IDS[i]
        ecc_on = not faults_of(gpu, "ecc_disabled", i)
        counts = {"volatile": {}, "aggregate": {}}
        for block in counts:
            for key in ("sram_correctable", "sram_uncorrectable", "dram_correctable", "dram_uncorrectable"):
                counts[block][key] = 0
        for f in faults_of(gpu, "ecc_uncorrectable", i):
            for block in counts:
                counts[block]["dram_uncorrectable"] += f["count"]
        for f in faults_of(gpu, "ecc_correctable", i):
            for block in counts:
                counts[block]["%s_correctable" % f["kind"]] += f["count"]
        pcie = {"gen_max": 5, "gen": 5, "width_max": 16, "width": 16}
        for f in faults_of(gpu, "pcie_downgraded", i):
            pcie.update(gen=f["gen"], width=f["width"])
        thermal = bool(faults_of(gpu, "thermal_throttle", i))
        fabric = None
        if gpu["nvswitch"]:
            fabric = ("In Progress", "N/A") if faults_of(gpu, "fabric_manager_down") else ("Completed", "Success")
        down_links = set(f["link"] for f in faults_of(gpu, "nvlink_down", i))
        gpus.append(
            {
                "index": i,
                "bus": bus,
                "bus_id": "00000000:%02X:00.0" % bus,
                "name": spec["name"],
                "spec": spec,
                "vbios": gpu["vbios"].get(i, spec["vbios"]),
                "uuid": _uuid(host, i),
                "serial": "1650124%06d" % int(_rand(host, "serial", i) * 1000000),
                "module_id": MODULE_IDS[i],
                "persistence": persistence,
                "ecc_on": ecc_on,
                "ecc": counts if ecc_on else None,
                "retired_pending": bool(faults_of(gpu, "retired_pending", i)),
                "remap_pending": bool(faults_of(gpu, "remap_pending", i)),
                "remap_failure": bool(faults_of(gpu, "remap_failure", i)),
                "pcie": pcie,
                "thermal": thermal,
                "temp": 88 if thermal else 30 + int(_rand(host, "temp", i) * 7),
                "mem_temp": 40 + int(_rand(host, "memtemp", i) * 6),
                "power": 68.0 + round(_rand(host, "power", i) * 8, 2),
                "fabric": fabric,
                "links": [link not in down_links for link in range(NVLINKS)],
                "replays": int(_rand(host, "replay", i) * 80),
            }
        )
    return gpus


# ------------------------------------------------------------------------ nvidia-smi -q -x


def _x(tag, value=None, attrs=None):
    return (tag, value, attrs)


def _esc(text):
    # xml.sax.saxutils would do, but importing it (urllib, http, email) cost more than the render.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _attr(text):
    return '"%s"' % _esc(text).replace('"', "&quot;")


def _render_xml(node, depth, lines):
    tag, value, attrs = node
    pad = "    " * depth
    attr = "".join(" %s=%s" % (k, _attr(str(v))) for k, v in (attrs or {}).items())
    if value is None:
        lines.append("%s<%s%s />" % (pad, tag, attr))
    elif isinstance(value, list):
        lines.append("%s<%s%s>" % (pad, tag, attr))
        for child in value:
            _render_xml(child, depth + 1, lines)
        lines.append("%s</%s>" % (pad, tag))
    else:
        lines.append("%s<%s%s>%s</%s>" % (pad, tag, attr, _esc(str(value)), tag))


def _active(flag):
    return "Active" if flag else "Not Active"


def _yes(flag):
    return "Yes" if flag else "No"


def _ecc_xml(g):
    blocks = []
    for block in ("volatile", "aggregate"):
        children = []
        for key in ("sram_correctable", "sram_uncorrectable", "dram_correctable", "dram_uncorrectable"):
            children.append(_x(key, g["ecc"][block][key] if g["ecc"] else "N/A"))
        blocks.append(_x(block, children))
    return _x("ecc_errors", blocks)


def _remap_xml(g):
    unc = 1 if g["remap_pending"] else 0
    banks = 2560 - unc
    histogram = [
        _x("row_remapper_histogram_max", "%d bank(s)" % banks),
        _x("row_remapper_histogram_high", "%d bank(s)" % unc),
        _x("row_remapper_histogram_partial", "0 bank(s)"),
        _x("row_remapper_histogram_low", "0 bank(s)"),
        _x("row_remapper_histogram_none", "%d bank(s)" % (1 if g["remap_failure"] else 0)),
    ]
    return _x(
        "remapped_rows",
        [
            _x("remapped_row_corr", 0),
            _x("remapped_row_unc", unc),
            _x("remapped_row_pending", _yes(g["remap_pending"])),
            _x("remapped_row_failure", _yes(g["remap_failure"])),
            _x("row_remapper_histogram", histogram),
        ],
    )


def _retired_xml(g):
    if g["retired_pending"]:
        count, pending = "1", "Yes"
        pages = [_x("retired_page", [_x("retired_page_address", "0x00000000012bac1c"), _x("retired_page_timestamp")])]
    else:
        count, pending, pages = "N/A", "N/A", "N/A"
    return _x(
        "retired_pages",
        [
            _x("multiple_single_bit_retirement", [_x("retired_count", "N/A"), _x("retired_pagelist", "N/A")]),
            _x("double_bit_retirement", [_x("retired_count", count), _x("retired_pagelist", pages)]),
            _x("pending_blacklist", pending),
            _x("pending_retirement", pending),
        ],
    )


def _gpu_xml(g, gpu):
    spec = g["spec"]
    pcie = g["pcie"]
    reasons = [
        ("gpu_idle", False),
        ("applications_clocks_setting", False),
        ("sw_power_cap", False),
        ("hw_slowdown", g["thermal"]),
        ("hw_thermal_slowdown", g["thermal"]),
        ("hw_power_brake_slowdown", False),
        ("sync_boost", False),
        ("sw_thermal_slowdown", False),
        ("display_clocks_setting", False),
    ]
    used = 0
    mem = spec["mem_mib"]
    ecc_mode = "Enabled" if g["ecc_on"] else "Disabled"
    fabric = g["fabric"] or ("N/A", "N/A")
    clock = 1980 if not g["thermal"] else 1245
    return _x(
        "gpu",
        [
            _x("product_name", g["name"]),
            _x("product_brand", "NVIDIA"),
            _x("product_architecture", "Hopper"),
            _x("display_mode", "Enabled"),
            _x("display_active", "Disabled"),
            _x("persistence_mode", "Enabled" if g["persistence"] else "Disabled"),
            _x("addressing_mode", "None"),
            _x("mig_mode", [_x("current_mig", "Disabled"), _x("pending_mig", "Disabled")]),
            _x("mig_devices", "None"),
            _x("accounting_mode", "Disabled"),
            _x("accounting_mode_buffer_size", 4000),
            _x("driver_model", [_x("current_dm", "N/A"), _x("pending_dm", "N/A")]),
            _x("serial", g["serial"]),
            _x("uuid", g["uuid"]),
            _x("minor_number", g["index"]),
            _x("vbios_version", g["vbios"]),
            _x("multigpu_board", "No"),
            _x("board_id", "0x%x" % (g["bus"] << 8)),
            _x("board_part_number", spec["board_part"]),
            _x("gpu_part_number", spec["gpu_part"]),
            _x("gpu_fru_part_number", "N/A"),
            _x("gpu_module_id", g["module_id"]),
            _x(
                "inforom_version",
                [
                    _x("img_version", spec["inforom"]),
                    _x("oem_object", "2.1"),
                    _x("ecc_object", "7.16"),
                    _x("pwr_object", "N/A"),
                ],
            ),
            _x("gpu_operation_mode", [_x("current_gom", "N/A"), _x("pending_gom", "N/A")]),
            _x("gsp_firmware_version", gpu["driver"]),
            _x("gpu_virtualization_mode", [_x("virtualization_mode", "None"), _x("host_vgpu_mode", "N/A")]),
            _x("gpu_reset_status", [_x("reset_required", "No"), _x("drain_and_reset_recommended", "No")]),
            _x("ibmnpu", [_x("relaxed_ordering_mode", "N/A")]),
            _x(
                "pci",
                [
                    _x("pci_bus", "%02X" % g["bus"]),
                    _x("pci_device", "00"),
                    _x("pci_domain", "0000"),
                    _x("pci_device_id", spec["device_id"][2:]),
                    _x("pci_bus_id", g["bus_id"]),
                    _x("pci_sub_system_id", spec["subsystem_id"][2:]),
                    _x(
                        "pci_gpu_link_info",
                        [
                            _x(
                                "pcie_gen",
                                [
                                    _x("max_link_gen", pcie["gen_max"]),
                                    _x("current_link_gen", pcie["gen"]),
                                    _x("device_current_link_gen", pcie["gen"]),
                                    _x("max_device_link_gen", pcie["gen_max"]),
                                    _x("max_host_link_gen", pcie["gen_max"]),
                                ],
                            ),
                            _x(
                                "link_widths",
                                [
                                    _x("max_link_width", "%dx" % pcie["width_max"]),
                                    _x("current_link_width", "%dx" % pcie["width"]),
                                ],
                            ),
                        ],
                    ),
                    _x("pci_bridge_chip", [_x("bridge_chip_type", "N/A"), _x("bridge_chip_fw", "N/A")]),
                    _x("replay_counter", g["replays"]),
                    _x("replay_rollover_counter", 0),
                    _x("tx_util", "%d KB/s" % (3000 + g["replays"] * 10)),
                    _x("rx_util", "%d KB/s" % (500 + g["replays"])),
                    _x("atomic_caps_inbound", "N/A"),
                    _x("atomic_caps_outbound", "FETCHADD_32 FETCHADD_64 SWAP_32 SWAP_64 CAS_32 CAS_64"),
                ],
            ),
            _x("fan_speed", "N/A"),
            _x("performance_state", "P0"),
            _x("clocks_event_reasons", [_x("clocks_event_reason_" + k, _active(v)) for k, v in reasons]),
            _x(
                "fb_memory_usage",
                [
                    _x("total", "%d MiB" % mem),
                    _x("reserved", "%d MiB" % spec["reserved_mib"]),
                    _x("used", "%d MiB" % used),
                    _x("free", "%d MiB" % (mem - spec["reserved_mib"] - used)),
                ],
            ),
            _x("bar1_memory_usage", [_x("total", "131072 MiB"), _x("used", "1 MiB"), _x("free", "131071 MiB")]),
            _x("cc_protected_memory_usage", [_x("total", "0 MiB"), _x("used", "0 MiB"), _x("free", "0 MiB")]),
            _x("compute_mode", "Default"),
            _x(
                "utilization",
                [
                    _x("gpu_util", "0 %"),
                    _x("memory_util", "0 %"),
                    _x("encoder_util", "0 %"),
                    _x("decoder_util", "0 %"),
                    _x("jpeg_util", "0 %"),
                    _x("ofa_util", "0 %"),
                ],
            ),
            _x("encoder_stats", [_x("session_count", 0), _x("average_fps", 0), _x("average_latency", 0)]),
            _x("fbc_stats", [_x("session_count", 0), _x("average_fps", 0), _x("average_latency", 0)]),
            _x("ecc_mode", [_x("current_ecc", ecc_mode), _x("pending_ecc", ecc_mode)]),
            _ecc_xml(g),
            _retired_xml(g),
            _remap_xml(g),
            _x(
                "temperature",
                [
                    _x("gpu_temp", "%d C" % g["temp"]),
                    _x("gpu_temp_tlimit", "%d C" % (87 - g["temp"])),
                    _x("gpu_temp_max_tlimit_threshold", "-8 C"),
                    _x("gpu_temp_slow_tlimit_threshold", "-2 C"),
                    _x("gpu_temp_max_gpu_tlimit_threshold", "0 C"),
                    _x("gpu_target_temperature", "N/A"),
                    _x("memory_temp", "%d C" % g["mem_temp"]),
                    _x("gpu_temp_max_mem_tlimit_threshold", "0 C"),
                ],
            ),
            _x("supported_gpu_target_temp", [_x("gpu_target_temp_min", "N/A"), _x("gpu_target_temp_max", "N/A")]),
            _x(
                "gpu_power_readings",
                [
                    _x("power_state", "P0"),
                    _x("power_draw", "%.2f W" % g["power"]),
                    _x("current_power_limit", "700.00 W"),
                    _x("requested_power_limit", "700.00 W"),
                    _x("default_power_limit", "700.00 W"),
                    _x("min_power_limit", "200.00 W"),
                    _x("max_power_limit", "700.00 W"),
                ],
            ),
            _x(
                "module_power_readings",
                [_x("power_state", "P0")]
                + [
                    _x(k, "N/A")
                    for k in (
                        "power_draw",
                        "current_power_limit",
                        "requested_power_limit",
                        "default_power_limit",
                        "min_power_limit",
                        "max_power_limit",
                    )
                ],
            ),
            _x(
                "clocks",
                [
                    _x("graphics_clock", "%d MHz" % clock),
                    _x("sm_clock", "%d MHz" % clock),
                    _x("mem_clock", "%d MHz" % spec["mem_clock"]),
                    _x("video_clock", "1545 MHz"),
                ],
            ),
            _x(
                "applications_clocks", [_x("graphics_clock", "1980 MHz"), _x("mem_clock", "%d MHz" % spec["mem_clock"])]
            ),
            _x(
                "default_applications_clocks",
                [_x("graphics_clock", "1980 MHz"), _x("mem_clock", "%d MHz" % spec["mem_clock"])],
            ),
            _x("deferred_clocks", [_x("mem_clock", "N/A")]),
            _x(
                "max_clocks",
                [
                    _x("graphics_clock", "1980 MHz"),
                    _x("sm_clock", "1980 MHz"),
                    _x("mem_clock", "%d MHz" % spec["mem_clock"]),
                    _x("video_clock", "1545 MHz"),
                ],
            ),
            _x("max_customer_boost_clocks", [_x("graphics_clock", "1980 MHz")]),
            _x("clock_policy", [_x("auto_boost", "N/A"), _x("auto_boost_default", "N/A")]),
            _x("voltage", [_x("graphics_volt", "670.000 mV")]),
            _x("fabric", [_x("state", fabric[0]), _x("status", fabric[1])]),
            _x("processes"),
            _x("accounted_processes"),
        ],
        {"id": g["bus_id"]},
    )


def nvsmi_xml(gpu, gpus, selected, now):
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">',
        "<nvidia_smi_log>",
    ]
    for node in (
        _x("timestamp", time.asctime(time.localtime(now))),
        _x("driver_version", gpu["driver"]),
        _x("cuda_version", gpu["cuda"]),
        _x("attached_gpus", len(gpus)),
    ):
        _render_xml(node, 1, lines)
    for g in selected:
        _render_xml(_gpu_xml(g, gpu), 1, lines)
    lines.append("</nvidia_smi_log>")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ nvidia-smi --query-gpu


def _na(value, gate=True):
    return value if gate else "[N/A]"


def _ecc_total(g, block, word):
    if not g["ecc"]:
        return "[N/A]"
    return g["ecc"][block]["sram_" + word] + g["ecc"][block]["dram_" + word]


def _query_fields():
    fields = {
        "timestamp": (None, lambda g, c: time.strftime("%Y/%m/%d %H:%M:%S.000", time.localtime(c["now"]))),
        "driver_version": (None, lambda g, c: c["gpu"]["driver"]),
        "count": (None, lambda g, c: len(c["gpus"])),
        "name": (None, lambda g, c: g["name"]),
        "serial": (None, lambda g, c: g["serial"]),
        "uuid": (None, lambda g, c: g["uuid"]),
        "pci.bus_id": (None, lambda g, c: g["bus_id"]),
        "pci.domain": (None, lambda g, c: "0x0000"),
        "pci.bus": (None, lambda g, c: "0x%02X" % g["bus"]),
        "pci.device": (None, lambda g, c: "0x00"),
        "pci.device_id": (None, lambda g, c: g["spec"]["device_id"]),
        "pci.sub_device_id": (None, lambda g, c: g["spec"]["subsystem_id"]),
        "pcie.link.gen.current": (None, lambda g, c: g["pcie"]["gen"]),
        "pcie.link.gen.gpucurrent": (None, lambda g, c: g["pcie"]["gen"]),
        "pcie.link.gen.max": (None, lambda g, c: g["pcie"]["gen_max"]),
        "pcie.link.gen.gpumax": (None, lambda g, c: g["pcie"]["gen_max"]),
        "pcie.link.gen.hostmax": (None, lambda g, c: g["pcie"]["gen_max"]),
        "pcie.link.width.current": (None, lambda g, c: g["pcie"]["width"]),
        "pcie.link.width.max": (None, lambda g, c: g["pcie"]["width_max"]),
        "index": (None, lambda g, c: g["index"]),
        "persistence_mode": (None, lambda g, c: "Enabled" if g["persistence"] else "Disabled"),
        "vbios_version": (None, lambda g, c: g["vbios"]),
        "pstate": (None, lambda g, c: "P0"),
        "memory.total": ("MiB", lambda g, c: g["spec"]["mem_mib"]),
        "memory.reserved": ("MiB", lambda g, c: g["spec"]["reserved_mib"]),
        "memory.used": ("MiB", lambda g, c: 0),
        "memory.free": ("MiB", lambda g, c: g["spec"]["mem_mib"] - g["spec"]["reserved_mib"]),
        "compute_mode": (None, lambda g, c: "Default"),
        "compute_cap": (None, lambda g, c: "9.0"),
        "utilization.gpu": ("%", lambda g, c: 0),
        "utilization.memory": ("%", lambda g, c: 0),
        "ecc.mode.current": (None, lambda g, c: "Enabled" if g["ecc_on"] else "Disabled"),
        "ecc.mode.pending": (None, lambda g, c: "Enabled" if g["ecc_on"] else "Disabled"),
        "retired_pages.pending": (None, lambda g, c: "Yes" if g["retired_pending"] else "[N/A]"),
        "retired_pages.single_bit_ecc.count": (None, lambda g, c: "[N/A]"),
        "retired_pages.double_bit.count": (None, lambda g, c: 1 if g["retired_pending"] else "[N/A]"),
        "remapped_rows.correctable": (None, lambda g, c: 0),
        "remapped_rows.uncorrectable": (None, lambda g, c: 1 if g["remap_pending"] else 0),
        "remapped_rows.pending": (None, lambda g, c: _yes(g["remap_pending"])),
        "remapped_rows.failure": (None, lambda g, c: _yes(g["remap_failure"])),
        "temperature.gpu": (None, lambda g, c: g["temp"]),
        "temperature.memory": (None, lambda g, c: g["mem_temp"]),
        "power.draw": ("W", lambda g, c: "%.2f" % g["power"]),
        "power.limit": ("W", lambda g, c: "700.00"),
        "enforced.power.limit": ("W", lambda g, c: "700.00"),
        "power.default_limit": ("W", lambda g, c: "700.00"),
        "power.min_limit": ("W", lambda g, c: "200.00"),
        "power.max_limit": ("W", lambda g, c: "700.00"),
        "clocks.current.sm": ("MHz", lambda g, c: 1245 if g["thermal"] else 1980),
        "clocks.current.graphics": ("MHz", lambda g, c: 1245 if g["thermal"] else 1980),
        "clocks.current.memory": ("MHz", lambda g, c: g["spec"]["mem_clock"]),
        "clocks.max.sm": ("MHz", lambda g, c: 1980),
        "clocks.max.graphics": ("MHz", lambda g, c: 1980),
        "clocks.max.memory": ("MHz", lambda g, c: g["spec"]["mem_clock"]),
        "mig.mode.current": (None, lambda g, c: "Disabled"),
        "mig.mode.pending": (None, lambda g, c: "Disabled"),
        "fabric.state": (None, lambda g, c: (g["fabric"] or ("N/A", "N/A"))[0]),
        "fabric.status": (None, lambda g, c: (g["fabric"] or ("N/A", "N/A"))[1]),
        "platform.module_id": (None, lambda g, c: g["module_id"]),
    }
    for word, kind in (("corrected", "correctable"), ("uncorrected", "uncorrectable")):
        for block in ("volatile", "aggregate"):
            base = "ecc.errors.%s.%s." % (word, block)
            fields[base + "total"] = (None, lambda g, c, b=block, k=kind: _ecc_total(g, b, k))
            for mem in ("dram", "sram"):
                key = "%s_%s" % (mem, kind)
                fields[base + mem] = (None, lambda g, c, b=block, k=key: g["ecc"][b][k] if g["ecc"] else "[N/A]")
            fields[base + "device_memory"] = fields[base + "dram"]
    reasons = {
        "gpu_idle": False,
        "applications_clocks_setting": False,
        "sw_power_cap": False,
        "hw_slowdown": True,
        "hw_thermal_slowdown": True,
        "hw_power_brake_slowdown": False,
        "sw_thermal_slowdown": False,
        "sync_boost": False,
    }
    for reason, thermal in reasons.items():
        getter = (None, lambda g, c, t=thermal: _active(g["thermal"] and t))
        fields["clocks_event_reasons." + reason] = getter
        fields["clocks_throttle_reasons." + reason] = getter
    aliases = {"gpu_name": "name", "gpu_serial": "serial", "gpu_uuid": "uuid", "gpu_bus_id": "pci.bus_id"}
    for alias, target in aliases.items():
        fields[alias] = fields[target]
    return fields


QUERY_FIELDS = _query_fields()


def query_gpu(fields, fmt, gpus, context):
    out = []
    if "noheader" not in fmt:
        header = []
        for name in fields:
            unit = QUERY_FIELDS[name][0]
            header.append(name if unit is None or "nounits" in fmt else "%s [%s]" % (name, unit))
        out.append(", ".join(header))
    for g in gpus:
        values = []
        for name in fields:
            unit, getter = QUERY_FIELDS[name]
            value = str(getter(g, context))
            if unit and "nounits" not in fmt and not value.startswith("["):
                value = "%s %s" % (value, unit)
            values.append(value)
        out.append(", ".join(values))
    return "".join(line + "\n" for line in out)


# ----------------------------------------------------------------------- nvidia-smi CLI

NVSMI_USAGE = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"
NVSMI_HELP = """NVIDIA System Management Interface -- v{driver}

Usage: nvidia-smi [OPTION1 [ARG1]] [OPTION2 [ARG2]] ...

    -h,   --help                Print usage information and exit.
    -L,   --list-gpus           Display a list of GPUs connected to the system.
    -q,   --query               Display GPU or Unit info.
    -x,   --xml-format          Produce XML output.
    -i,   --id=                 Target a specific GPU.
    -f,   --filename=           Log to a specified file, rather than to stdout.
    --query-gpu=                Information about GPU (see --help-query-gpu).
    --format=                   Comma separated list of format options: csv, noheader, nounits.
    nvlink                      Display NvLink information. Use "nvidia-smi nvlink -h" for more information.
"""


def _select(gpus, ids):
    """GPUs named by -i (index, PCI bus id or UUID, comma separated); None when one is unknown."""
    if ids is None:
        return gpus
    chosen = []
    for token in ids.split(","):
        token = token.strip()
        found = [
            g
            for g in gpus
            if token == str(g["index"]) or token.lower() == g["uuid"].lower() or token.upper() in (g["bus_id"],)
        ]
        if not found and re.match(r"^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9]$", token):
            found = [g for g in gpus if g["bus_id"].endswith(token.upper()[-12:])]
        if not found:
            return None
        chosen.extend(g for g in found if g not in chosen)
    return chosen


def _split_opt(args, i):
    """(name, value, next index) for args[i], with ``--x=v`` and ``-x v`` forms."""
    arg = args[i]
    if arg.startswith("--") and "=" in arg:
        name, value = arg.split("=", 1)
        return name, value, i + 1
    return arg, None, i + 1


def _hang():
    """nvidia-smi on a GPU fallen off the bus: it sits in the driver, uninterruptible, and even
    SIGKILL waits. A user process cannot make itself unkillable, so the caller sees the same thing
    another way: a helper in a session of its own, which a kill of this process and its group does
    not reach, holds the output open (as the stuck process would) while this one ignores SIGTERM
    and waits. Both end after RAYGATE_SIM_HANG_SECONDS."""
    seconds = float(_env(HANG_ENV, "3600"))
    sys.stdout.flush()
    if os.fork() == 0:
        os.setsid()
        time.sleep(seconds)
        os._exit(0)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(seconds)
    return 124


def nvidia_smi_main(argv):
    scenario = local_scenario()
    gpu = normalize_gpu(scenario.get("gpu"))
    host = local_hostname()
    if faults_of(gpu, "nvsmi_hang"):
        return _hang()
    if gpu["model"] == "none":
        _out(NVSMI_NO_DRIVER)
        return 9
    gpus = model_gpus(host, gpu)
    args = argv[1:]
    if args and args[0] == "nvlink":
        return _nvlink_main(args[1:], gpus)
    want = {"q": False, "x": False, "L": False, "id": None, "query": None, "format": None, "file": None}
    i = 0
    valued = {
        "-i": "id",
        "--id": "id",
        "--query-gpu": "query",
        "--format": "format",
        "-f": "file",
        "--filename": "file",
    }
    while i < len(args):
        name, value, i = _split_opt(args, i)
        if name in ("-h", "--help"):
            _out(NVSMI_HELP.format(driver=gpu["driver"]))
            return 0
        if name in valued:
            if value is None:
                if i >= len(args):
                    _out(NVSMI_USAGE)
                    return 2
                value, i = args[i], i + 1
            want[valued[name]] = value
        elif name in ("-q", "--query"):
            want["q"] = True
        elif name in ("-x", "--xml-format"):
            want["x"] = True
        elif name in ("-L", "--list-gpus"):
            want["L"] = True
        elif re.match(r"^-[qxL]{2,3}$", name):
            for letter in name[1:]:
                want[letter] = True
        elif re.match(r"^-i\d", name):
            want["id"] = name[2:]
        else:
            _out(NVSMI_USAGE)
            return 2
    selected = _select(gpus, want["id"])
    if selected is None:
        _out("No devices were found\n")
        return 6
    if want["query"] is not None:
        text, rc = _query_main(want, gpu, gpus, selected)
    elif want["L"]:
        text, rc = "".join("GPU %d: %s (UUID: %s)\n" % (g["index"], g["name"], g["uuid"]) for g in selected), 0
    elif want["q"] and want["x"]:
        text, rc = nvsmi_xml(gpu, gpus, selected, _now()), 0
    elif want["q"] or not args:
        _err("raygate-sim: this nvidia-smi simulates -q -x, -L, --query-gpu and nvlink -s only\n")
        return 2
    else:
        _out(NVSMI_USAGE)
        return 2
    if want["file"] and rc == 0:
        with open(want["file"], "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        _out(text)
    return rc


def _query_main(want, gpu, gpus, selected):
    if want["format"] is None:
        return '"--format" must be specified with "--query-gpu"\n', 2
    fmt = [f.strip() for f in want["format"].split(",") if f.strip()]
    if "csv" not in fmt or set(fmt) - {"csv", "noheader", "nounits"}:
        return NVSMI_USAGE, 2
    fields = [f.strip() for f in want["query"].split(",") if f.strip()]
    for name in fields:
        if name not in QUERY_FIELDS:
            return 'Field "%s" is not a valid field to query.\n\n' % name, 2
    if not fields:
        return NVSMI_USAGE, 2
    return query_gpu(fields, fmt, selected, {"gpu": gpu, "gpus": gpus, "now": _now()}), 0


def nvlink_status(gpus):
    lines = []
    for g in gpus:
        lines.append("GPU %d: %s (UUID: %s)" % (g["index"], g["name"], g["uuid"]))
        if not any(g["links"]):
            lines.append("NVML: Unable to retrieve NVLink information as all links are inactive")
            continue
        for link, up in enumerate(g["links"]):
            lines.append("\t Link %d: %s" % (link, NVLINK_SPEED if up else "<inactive>"))
    return "".join(line + "\n" for line in lines)


def _nvlink_main(args, gpus):
    status, ids, i = False, None, 0
    while i < len(args):
        name, value, i = _split_opt(args, i)
        if name in ("-s", "--status"):
            status = True
        elif name in ("-i", "--id"):
            if value is None:
                if i >= len(args):
                    _out(NVSMI_USAGE)
                    return 2
                value, i = args[i], i + 1
            ids = value
        elif name in ("-h", "--help"):
            _out("    nvlink -- Display NvLink information.\n\n    -s, --status  Display link state.\n")
            return 0
        else:
            _out(NVSMI_USAGE)
            return 2
    if not status:
        _err("raygate-sim: this nvidia-smi simulates nvlink -s only\n")
        return 2
    selected = _select(gpus, ids)
    if selected is None:
        _out("No devices were found\n")
        return 6
    _out(nvlink_status(selected))
    return 0


# ------------------------------------------------------------------------------ dcgmi

DCGM_LEVELS = {
    1: [
        (
            "Deployment",
            [
                "Denylist",
                "NVML Library",
                "CUDA Main Library",
                "Permissions and OS Blocks",
                "Persistence Mode",
                "Environment Variables",
                "Page Retirement/Row Remap",
                "Graphics Processes",
                "Inforom",
            ],
        )
    ],
}
# DCGM 3.3 prints the (empty) Stress section at level 2 too.
DCGM_LEVELS[2] = DCGM_LEVELS[1] + [("Integration", ["PCIe"]), ("Hardware", ["GPU Memory"]), ("Stress", [])]
DCGM_LEVELS[3] = DCGM_LEVELS[1] + [
    ("Integration", ["PCIe"]),
    ("Hardware", ["GPU Memory", "Diagnostic"]),
    ("Stress", ["Targeted Stress", "Targeted Power", "Memory Bandwidth"]),
]
DCGM_LEVELS[4] = DCGM_LEVELS[3]
DCGM_PER_GPU = ("Integration", "Hardware", "Stress")
DCGM_MESSAGES = {
    "GPU Memory": "GPU %d Error using CUDA API cuMemAlloc Check DCGM and system logs for errors. "
    "Reset GPU. Restart DCGM. Rerun diagnostics.",
    "Page Retirement/Row Remap": "GPU %d has uncorrectable memory errors and row remappings are pending",
    "PCIe": "GPU %d Found 3 PCIe replay errors above threshold; check the PCIe link of this GPU.",
}
DCGM_DEFAULT_MESSAGE = "GPU %d failed the %s test. Check DCGM and system logs for errors."
DCGM_USAGE = """
PARSE ERROR: {error}

Brief USAGE:
   dcgmi  diag  [--host <IP/FQDN>] [-g <groupId>] [-r <diag>] [-p <test.variable=value>] [-i <gpuList>] [-j]

For complete USAGE and HELP type:
   dcgmi diag --help

"""


def _dcgm_failures(gpu, tests):
    """{test name: [gpu indexes]} for the scenario's dcgm_fail faults that name a test run at this level."""
    failures = {}
    for fault in faults_of(gpu, "dcgm_fail"):
        want = fault["test"].strip().lower()
        exact = [t for t in tests if t.lower() == want]
        partial = [t for t in tests if want in t.lower()]
        chosen = (exact or partial or [None])[0]
        if chosen is not None:
            failures.setdefault(chosen, []).append(fault["gpu"])
    return failures


def _message(test, index):
    return DCGM_MESSAGES.get(test, DCGM_DEFAULT_MESSAGE) % ((index,) if test in DCGM_MESSAGES else (index, test))


def _wrap_cell(text, width=46):
    return [text[i : i + width] for i in range(0, len(text), width)] or [""]


def dcgm_table(gpu, gpus, level):
    ids = [g["index"] for g in gpus]
    sections = DCGM_LEVELS[level]
    failures = _dcgm_failures(gpu, [t for unused_title, tests in sections for t in tests])
    line = "+---------------------------+------------------------------------------------+"
    out = ["Successfully ran diagnostic for group.", line, "| %-25s | %-46s |" % ("Diagnostic", "Result")]
    out.append("+===========================+================================================+")

    def row(name, values):
        for n, value in enumerate(values):
            for k, part in enumerate(_wrap_cell(value)):
                out.append("| %-25s | %-46s |" % (name if n == 0 and k == 0 else "", part))

    def section(name, first):
        edge = "|" if first else "+"
        out.append("%s%s+%s%s" % (edge, ("-----  %s  " % name).ljust(27, "-"), "-" * 48, edge))

    section("Metadata", True)
    row("DCGM Version", [DCGM_VERSION])
    row("Driver Version Detected", [gpu["driver"]])
    row("GPU Device IDs Detected", [",".join(MODELS[gpu["model"]]["dcgm_id"] for unused_id in ids)])
    for name, tests in sections:
        section(name, name == "Deployment")
        for test in tests:
            bad = sorted(set(i for i in failures.get(test, []) if i in ids))
            if name not in DCGM_PER_GPU:
                row(test, ["Fail" if bad else "Pass"])
                if bad:
                    row("Error", [" ".join(_message(test, i) for i in bad)])
                continue
            good = [i for i in ids if i not in bad]
            if not bad:
                row(test, ["Pass - All"])
                continue
            values = []
            if good:
                values.append("Pass - GPU%s: %s" % ("s" if len(good) > 1 else "", ", ".join(str(i) for i in good)))
            values.append("Fail - GPU%s: %s" % ("s" if len(bad) > 1 else "", ", ".join(str(i) for i in bad)))
            row(test, values)
            row("Warning", [" ".join(_message(test, i) for i in bad)])
    out.append(line)
    return "".join(x + "\n" for x in out)


def dcgm_json(gpu, gpus, level):
    ids = [g["index"] for g in gpus]
    sections = DCGM_LEVELS[level]
    failures = _dcgm_failures(gpu, [t for unused_title, tests in sections for t in tests])
    categories = []
    for name, tests in sections:
        entries = []
        for test in tests:
            bad = set(i for i in failures.get(test, []) if i in ids)
            if name not in DCGM_PER_GPU:
                # System-wide tests: one result for the GPUs that pass, one for those that fail.
                good = [i for i in ids if i not in bad]
                results = [{"gpu_ids": ",".join(str(i) for i in good), "status": "PASS"}] if good else []
                if bad:
                    warnings = [{"warning": _message(test, i), "error_id": 28} for i in sorted(bad)]
                    fail_ids = ",".join(str(i) for i in sorted(bad))
                    results.append({"gpu_ids": fail_ids, "status": "FAIL", "warnings": warnings})
                entries.append({"name": test, "results": results})
                continue
            results = []
            for i in ids:
                result = {"gpu_ids": i, "status": "FAIL" if i in bad else "PASS"}
                if i in bad:
                    result["warnings"] = [{"warning": _message(test, i), "error_id": 82}]
                results.append(result)
            entries.append({"name": test, "results": results})
        if entries:
            categories.append({"category": name, "tests": entries})
    data = {"DCGM GPU Diagnostic": {"test_categories": categories, "version": DCGM_VERSION}}
    return json.dumps(data, indent="\t", separators=(",", " : ")) + "\n"


def dcgmi_main(argv):
    args = argv[1:]
    if not args or args[0] != "diag":
        _out(
            "Usage: dcgmi <subsystem>\n   Subsystems: diag\n"
            "raygate-sim: this dcgmi simulates `dcgmi diag -r 1|2|3 [-j]` only\n"
        )
        return 1 if args else 0
    level, as_json, gpu_list = None, False, None
    names = {"short": 1, "medium": 2, "long": 3, "xlong": 4}
    try:
        opts, rest = getopt.gnu_getopt(args[1:], "r:jg:p:i:hv", ["run=", "json", "group=", "parameters=", "help"])
    except getopt.GetoptError as exc:
        _out(DCGM_USAGE.format(error=exc))
        return 1
    if rest:
        _out(DCGM_USAGE.format(error="Couldn't find match for argument %s" % rest[0]))
        return 1
    for opt, value in opts:
        if opt in ("-r", "--run"):
            value = value.strip().lower()
            level = names.get(value) or (int(value) if value in ("1", "2", "3", "4") else None)
            if level is None:
                _out("Error: Invalid diagnostic run level '%s'. Valid levels are 1, 2, 3 and 4.\n" % value)
                return 1
        elif opt in ("-j", "--json"):
            as_json = True
        elif opt == "-i":
            gpu_list = value
        elif opt in ("-h", "--help"):
            _out(DCGM_USAGE.format(error="help requested"))
            return 0
    if level is None:
        _out(DCGM_USAGE.format(error="Required argument missing: run"))
        return 1
    gpu = normalize_gpu(local_scenario().get("gpu"))
    if gpu["model"] == "none":
        _out("Error: unable to establish a connection to the specified host: localhost\n")
        _out("Error: Unable to connect to host engine. Host engine connection invalid/disconnected.\n")
        return 255
    gpus = model_gpus(local_hostname(), gpu)
    if gpu_list is not None:
        gpus = _select(gpus, gpu_list)
        if gpus is None:
            _out("Error: Invalid GPU list %s\n" % gpu_list)
            return 1
    _out(dcgm_json(gpu, gpus, level) if as_json else dcgm_table(gpu, gpus, level))
    return 0


# ----------------------------------------------------------------- hosts and scenarios


def read_hosts(path=None):
    """(name -> address, address -> [names]) from an /etc/hosts style file."""
    path = path or _env(HOSTS_ENV, "/etc/hosts")
    by_name, by_addr = {}, {}
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError:
        lines = []
    for line in lines:
        parts = line.split("#", 1)[0].split()
        if len(parts) < 2 or ":" in parts[0]:
            continue
        for name in parts[1:]:
            by_name.setdefault(name, parts[0])
            by_addr.setdefault(parts[0], []).append(name)
    return by_name, by_addr


_IPV4 = re.compile(r"^\d{1,3}(\.\d{1,3}){3}$")


def resolve_host(entry, me, hosts):
    """{name, address, local} for an mpirun host entry; None when it does not resolve."""
    by_name, by_addr = hosts
    mine = set([me, "localhost", "127.0.0.1"])
    my_addrs = set(a for a, names in by_addr.items() if me in names) | {"127.0.0.1"}
    if _IPV4.match(entry):
        names = [n for n in by_addr.get(entry, []) if n != "localhost"]
        local = entry in my_addrs or entry.startswith("127.")
        name = me if local else (names[0].split(".")[0] if names else entry)
        return {"entry": entry, "name": name, "address": entry, "local": local}
    if entry in mine or entry.split(".")[0] == me:
        return {"entry": entry, "name": me, "address": by_name.get(me, "127.0.0.1"), "local": True}
    if entry in by_name:
        address = by_name[entry]
        return {"entry": entry, "name": entry.split(".")[0], "address": address, "local": address in my_addrs}
    return None


def host_scenario(host):
    """The scenario of a resolved host: the node's own file when local, else the published one."""
    if host["local"]:
        return local_scenario()
    folder = _env(SCENARIOS_DIR_ENV, DEFAULT_SCENARIOS_DIR)
    for candidate in (host["entry"], host["address"], host["name"]):
        path = os.path.join(folder, "%s.json" % candidate)
        if os.path.exists(path):
            return read_scenario(path)
    return {}


# ---------------------------------------------------------------- all_reduce_perf model

TYPE_SIZES = {
    "int8": 1,
    "uint8": 1,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "uint64": 8,
    "half": 2,
    "float": 4,
    "double": 8,
    "bfloat16": 2,
    "f8e4m3": 1,
    "f8e5m2": 1,
}
OPS = ["sum", "prod", "max", "min", "avg"]
PERF_OPTIONS = [
    "-t,--nthreads <num threads>",
    "-g,--ngpus <gpus per thread>",
    "-b,--minbytes <min size in bytes>",
    "-e,--maxbytes <max size in bytes>",
    "-i,--stepbytes <increment size>",
    "-f,--stepfactor <increment factor>",
    "-n,--iters <iteration count>",
    "-m,--agg_iters <aggregated iteration count>",
    "-w,--warmup_iters <warmup iteration count>",
    "-N,--run_cycles <cycle count> run & print each cycle (default: 1; 0=infinite)",
    "-p,--parallel_init <0/1>",
    "-c,--check <check iteration count>",
    "-o,--op <sum/prod/min/max/avg/mulsum/all>",
    "-d,--datatype <nccltype/all>",
    "-r,--root <root>",
    "-z,--blocking <0/1>",
    "-y,--stream_null <0/1>",
    "-T,--timeout <time in seconds>",
    "-G,--cudagraph <num graph launches>",
    "-C,--report_cputime <0/1>",
    "-a,--average <0/1/2/3> report average iteration time <0=RANK0/1=AVG/2=MIN/3=MAX>",
]
# nccl-tests prints each option on its own line, with a trailing space.
PERF_USAGE = "USAGE: all_reduce_perf \n\t" + "".join("[%s] \n\t" % o for o in PERF_OPTIONS) + "[-h,--help]\n"
PERF_SHORT = "t:g:b:e:i:f:n:m:w:N:p:c:o:d:r:z:y:T:G:C:a:h"
PERF_LONG = [
    "nthreads=",
    "ngpus=",
    "minbytes=",
    "maxbytes=",
    "stepbytes=",
    "stepfactor=",
    "iters=",
    "agg_iters=",
    "warmup_iters=",
    "run_cycles=",
    "parallel_init=",
    "check=",
    "op=",
    "datatype=",
    "root=",
    "blocking=",
    "stream_null=",
    "timeout=",
    "cudagraph=",
    "report_cputime=",
    "average=",
    "help",
]


def parse_size(text):
    m = re.match(r"^\s*(\d+)\s*([kKmMgG]?)\s*$", text)
    if not m:
        raise ValueError("invalid size %r" % text)
    return int(m.group(1)) * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2).lower()]


def _c_int(text):
    try:
        return int(text, 0)
    except ValueError:
        m = re.match(r"^\s*-?\d+", text)
        return int(m.group(0)) if m else 0


def parse_perf_args(args):
    """all_reduce_perf's options -> dict; raises getopt.GetoptError / ValueError on bad ones."""
    opts, _rest = getopt.gnu_getopt(args, PERF_SHORT, PERF_LONG)
    conf = {
        "threads": 1,
        "gpus": 1,
        "min": 32 << 20,
        "max": 32 << 20,
        "step_bytes": 1 << 20,
        "step_factor": 1,
        "iters": 20,
        "agg": 1,
        "warmup": 5,
        "check": 1,
        "ops": ["sum"],
        "types": ["float"],
        "root": 0,
        "graph": 0,
        "help": False,
        "notes": [],
    }
    short = dict((long.rstrip("="), "-" + letter) for long, letter in zip(PERF_LONG, re.findall(r"\w", PERF_SHORT)))
    for opt, value in opts:
        key = short.get(opt[2:], opt) if opt.startswith("--") else opt
        if key == "-h":
            conf["help"] = True
        elif key in ("-b", "-e"):
            conf["min" if key == "-b" else "max"] = parse_size(value)
        elif key == "-i":
            conf["step_bytes"] = _c_int(value)
        elif key == "-f":
            conf["step_factor"] = _c_int(value)
        elif key in ("-t", "-g", "-n", "-m", "-w", "-c", "-G", "-r"):
            name = {"-t": "threads", "-g": "gpus", "-n": "iters", "-m": "agg", "-w": "warmup", "-c": "check"}
            name.update({"-G": "graph", "-r": "root"})
            conf[name[key]] = _c_int(value)
        elif key == "-o":
            if value == "all":
                conf["ops"] = list(OPS)
            elif value in OPS:
                conf["ops"] = [value]
            else:
                conf["notes"].append("invalid op %s, defaulting to sum .. " % value)
        elif key == "-d":
            if value == "all":
                conf["types"] = list(TYPE_SIZES)
            elif value in TYPE_SIZES:
                conf["types"] = [value]
            else:
                conf["notes"].append("invalid type %s, defaulting to float .. " % value)
    if conf["threads"] < 1 or conf["gpus"] < 1:
        raise ValueError("nThreads and nGpus must be at least 1")
    return conf


def sizes_of(conf):
    sizes, size = [], conf["min"]
    while size <= conf["max"] and len(sizes) < 4096:
        sizes.append(size)
        if conf["step_factor"] > 1:
            size *= conf["step_factor"]
        elif conf["step_bytes"] > 0:
            size += conf["step_bytes"]
        else:
            break
    return sizes


def _time_str(usec):
    if usec >= 10000.0:
        return "%7.0f" % usec
    if usec >= 100.0:
        return "%7.1f" % usec
    return "%7.2f" % usec


# ------------------------------------------------------------------------------ jobs


def make_host(resolved, scenario, procs, env):
    gpu = normalize_gpu(scenario.get("gpu"))
    host = dict(resolved)
    host.update(
        {
            "gpu": gpu,
            "fabric": normalize_fabric(scenario.get("fabric")),
            "gpus": model_gpus(resolved["name"], gpu),
            "procs": procs,
            "env": env,
            "pid": 2000 + int(_rand(resolved["name"], "pid") * 60000),
        }
    )
    return host


def _debug_level(env):
    return (env.get("NCCL_DEBUG") or "").strip().upper()


def _usable_nics(host):
    """Indexes of the fabric devices NCCL would use on ``host`` (NCCL_IB_HCA honoured)."""
    active = list(host["fabric"]["active"])
    spec = (host["env"].get("NCCL_IB_HCA") or "").strip()
    if spec and host["fabric"]["type"] in ("ib", "roce"):
        exclude = spec.startswith("^")
        names = [n.split(":")[0] for n in spec.lstrip("^=").split(",") if n]
        exact = "=" in spec[:2]

        def listed(i):
            name = "mlx5_%d" % i
            return any(name == n or (not exact and name.startswith(n)) for n in names)

        active = [i for i in active if listed(i) != exclude]
    return active


NET_NAMES = {"IB": ("ib",), "AWS Libfabric": ("aws libfabric", "libfabric", "ofi"), "Socket": ("socket",)}


def choose_network(job):
    """(network: IB|AWS Libfabric|Socket, why it is Socket or None, an unknown NCCL_NET value or None)."""
    hosts = job["hosts"]
    kinds = set(h["fabric"]["type"] for h in hosts)
    forced = (hosts[0]["env"].get("NCCL_NET") or "").strip()
    ib_off = any((h["env"].get("NCCL_IB_DISABLE") or "0").strip() not in ("", "0") for h in hosts)
    why = None
    if any(faults_of(h["gpu"], "socket_fallback") for h in hosts):
        why = "socket_fallback"
    elif len(kinds) > 1:
        why = "mixed fabrics %s" % ", ".join(sorted(kinds))
    elif "none" in kinds:
        why = "no RDMA device"
    elif ib_off and kinds & {"ib", "roce"}:
        why = "NCCL_IB_DISABLE"
    elif any(not _usable_nics(h) for h in hosts):
        why = "no active RDMA port"
    network = "Socket" if why else ("AWS Libfabric" if kinds == {"efa"} else "IB")
    if not forced or forced.lower() in NET_NAMES[network]:
        return network, why, None
    if forced.lower() in NET_NAMES["Socket"]:
        return "Socket", "NCCL_NET=Socket", None
    return network, why, forced


def job_bandwidth(job, network, gdr):
    """Busbw (GB/s) the job reaches at the largest sizes, and its latency model (lat_us, knee_bytes)."""
    hosts = job["hosts"]
    local_n = job["ranks_per_host"]
    scopes = ("all",) if len(hosts) == 1 else ("all", "network")
    slow = [f["factor"] for h in hosts for f in faults_of(h["gpu"], "low_bandwidth") if f["scope"] in scopes]
    factor = min(slow or [1.0])
    if len(hosts) == 1:
        host = hosts[0]
        busbw = _between(MODELS[host["gpu"]["model"]]["single_busbw"], host["name"], "busbw")
        if not host["gpu"]["nvswitch"]:
            busbw *= 0.78
        links = min([sum(g["links"]) for g in host["gpus"][:local_n]] or [NVLINKS])
        busbw *= links / float(NVLINKS)
        if any(g["thermal"] for g in host["gpus"][:local_n]):
            busbw *= 0.9
        return busbw * factor, 12.0, 4 << 20
    names = sorted(h["name"] for h in hosts)
    if network == "Socket":
        return _between(PAIR_BUSBW["socket"], "pair", *names) * factor, 95.0, 256 << 10
    kind = hosts[0]["fabric"]["type"]
    busbw = _between(PAIR_BUSBW[kind], "pair", *names)
    total = max(1, hosts[0]["fabric"]["devices"])
    busbw *= min(len(_usable_nics(h)) for h in hosts) / float(total)
    busbw *= min(1.0, local_n / 8.0)
    if not gdr:
        busbw *= 0.62
    return busbw * factor, 30.0, 16 << 20


def perf_rows(job, conf, busbw, lat, knee):
    """(size, count, type, op, [(time_us, algbw, busbw) oop, ip]) for every row of the sweep."""
    nranks = job["nranks"]
    key = job["hosts"][0]["name"]
    ratio = 2.0 * (nranks - 1) / nranks if nranks > 1 else 0.0
    peak = busbw / ratio if ratio else 1200.0
    rows = []
    for dtype in conf["types"]:
        width = TYPE_SIZES[dtype]
        for op in conf["ops"]:
            for size in sizes_of(conf):
                count = size // width
                nbytes = count * width
                halves = []
                for half in (0, 1):
                    usec = lat + nbytes / (peak * 1e3) + knee / (peak * 1e3) * nbytes / float(nbytes + knee)
                    usec *= 1.0 + 0.012 * (_rand(key, "t", nbytes, dtype, op, half) - 0.5)
                    algbw = nbytes / usec / 1e3
                    halves.append((usec, algbw, algbw * ratio))
                rows.append((nbytes, count, dtype, op, halves))
    return rows


# --------------------------------------------------------------------- NCCL INFO lines


class Log:
    """Output lines tagged with the MPI process that printed them (for --tag-output)."""

    def __init__(self):
        self.lines = []

    def add(self, proc, text, stream="out"):
        self.lines.append((proc, text, stream))

    def render(self, tag):
        out, err = [], []
        for proc, text, stream in self.lines:
            prefix = "[1,%d]<std%s>:" % (proc, stream) if tag else ""
            (out if stream == "out" else err).append(prefix + text + "\n")
        return "".join(out), "".join(err)


def _ranks(job):
    """One dict per rank: rank, host, proc (global process index), local index, cuda device, GPU."""
    ranks, proc, rank = [], 0, 0
    per_proc = job["threads"] * job["gpus_per_thread"]
    for host in job["hosts"]:
        for local_proc in range(host["procs"]):
            for i in range(per_proc):
                dev = local_proc * per_proc + i
                ranks.append(
                    {
                        "rank": rank,
                        "host": host,
                        "proc": proc,
                        "local": dev,
                        "dev": dev,
                        "pid": host["pid"] + local_proc,
                        "gpu": host["gpus"][dev] if dev < len(host["gpus"]) else None,
                    }
                )
                rank += 1
            proc += 1
    return ranks


def _prefix(r, tid_offset=0, level="INFO"):
    return "%s:%d:%d [%d] NCCL %s " % (r["host"]["name"], r["pid"], r["pid"] + tid_offset, r["dev"], level)


def _nic_name(host, index):
    if host["fabric"]["type"] == "efa":
        return "rdmap%ds0" % (0x10 + 5 * index)
    return "mlx5_%d" % index


def _nic_of(host, local, channel, n_local):
    nics = _usable_nics(host)
    if not nics:
        return 0
    per_gpu = max(1, len(nics) // max(1, n_local))
    return (local * per_gpu + (channel // max(1, n_local)) % per_gpu) % len(nics)


def _channels(job, network, gdr):
    """[(rank, text)] of the Channel lines: the ring of each channel, P2P inside hosts, NET between."""
    ranks = job["ranks"]
    by_host = [[r for r in ranks if r["host"] is h] for h in job["hosts"]]
    n = len(by_host[0])
    lines = []
    p2p = "P2P/CUMEM/read"
    for c in range(job["channels"]):
        g = c % n
        for h, members in enumerate(by_host):
            order = [members[(g - k) % n] for k in range(n)]
            for a, b in zip(order, order[1:]):
                lines.append(
                    (a, "Channel %02d/0 : %d[%d] -> %d[%d] via %s" % (c, a["rank"], a["dev"], b["rank"], b["dev"], p2p))
                )
            if len(by_host) == 1:
                if n > 1:
                    a, b = order[-1], order[0]
                    lines.append(
                        (
                            a,
                            "Channel %02d/0 : %d[%d] -> %d[%d] via %s"
                            % (c, a["rank"], a["dev"], b["rank"], b["dev"], p2p),
                        )
                    )
                continue
            src = order[-1]
            dst_members = by_host[(h + 1) % len(by_host)]
            dst = dst_members[g]
            for r, direction in ((src, "send"), (dst, "receive")):
                nic = _nic_of(r["host"], r["local"], c, n)
                via = "NET/%s/%d%s" % (network, nic, "/GDRDMA" if gdr else "")
                text = "Channel %02d/0 : %d[%d] -> %d[%d] [%s] via %s" % (
                    c,
                    src["rank"],
                    src["dev"],
                    dst["rank"],
                    dst["dev"],
                    direction,
                    via,
                )
                lines.append((r, text))
    return lines


def _net_lines(r, network, why):
    host = r["host"]
    ip = host["address"]
    kind = host["fabric"]["type"]
    lines = []
    if kind == "efa" and network != "Socket":
        lines.append("NET/Plugin: Loaded net plugin AWS Libfabric (v8)")
        lines.append("NET/OFI Using aws-ofi-nccl 1.11.0")
        lines.append("NET/OFI Selected Provider is efa (found %d nics)" % len(_usable_nics(host)))
    else:
        lines.append("NET/Plugin: No plugin found (libnccl-net.so)")
        lines.append(
            "NET/Plugin: Plugin load returned 2 : libnccl-net.so: cannot open shared object file: "
            "No such file or directory : when loading libnccl-net.so"
        )
        lines.append("NET/Plugin: Using internal network plugin.")
    if network == "IB":
        layer = "RoCE" if kind == "roce" else "IB"
        used = " ".join("[%d]mlx5_%d:1/%s" % (k, i, layer) for k, i in enumerate(_usable_nics(host)))
        lines.append("NET/IB : Using %s [RO]; OOB eth0:%s<0>" % (used, ip))
    elif network == "Socket":
        if why != "NCCL_IB_DISABLE" and kind != "efa":
            lines.append("NET/IB : No device found.")
        lines.append("NET/Socket : Using [0]eth0:%s<0>" % ip)
    lines.append("Using non-device net plugin version 0")
    return lines


def nccl_info(job, network, why, gdr, log):
    """NCCL_DEBUG=INFO lines of communicator init, in phases across ranks like a real log."""
    ranks = job["ranks"]
    nranks = job["nranks"]
    shown = [r for r in ranks if _debug_level(r["host"]["env"]) in ("INFO", "TRACE")]
    if not shown:
        return
    comm_id = int(_rand(job["hosts"][0]["name"], "commid") * (1 << 63))
    cuda = job["hosts"][0]["gpu"]["cuda"].split(".")
    cuda_code = int(cuda[0]) * 1000 + int(cuda[1]) * 10

    def comm(r):
        return 0x55D0C2A80000 + int(_rand(r["host"]["name"], "comm", r["rank"]) * 0xFFFF) * 0x10

    def say(r, text, tid=0):
        log.add(r["proc"], _prefix(r, tid) + text)

    first_of_proc = set()
    for r in shown:
        # Bootstrap and the network plugin are set up once per process, the communicator per rank.
        if r["proc"] not in first_of_proc:
            first_of_proc.add(r["proc"])
            say(r, "Bootstrap : Using eth0:%s<0>" % r["host"]["address"])
            say(r, "cudaDriverVersion %d" % cuda_code)
            if r["rank"] == 0:
                say(r, "NCCL version %s+cuda%s" % (job["hosts"][0]["gpu"]["nccl"], job["hosts"][0]["gpu"]["cuda"]))
            for text in _net_lines(r, network, why):
                say(r, text)
        say(r, "Using network %s" % network)
        if not faults_of(r["host"]["gpu"], "no_gdr"):
            say(r, "DMA-BUF is available on GPU device %d" % r["dev"])
        say(
            r,
            "ncclCommInitRank comm 0x%x rank %d nranks %d cudaDev %d nvmlDev %d busId %x000 commId 0x%x - Init START"
            % (comm(r), r["rank"], nranks, r["dev"], r["dev"], r["gpu"]["bus"], comm_id),
        )
    nvls = job["hosts"][0]["gpu"]["nvswitch"] and all(h["gpu"]["nvswitch"] for h in job["hosts"])
    for r in shown:
        say(
            r,
            "Setting affinity for GPU %d to %s"
            % (r["dev"], "ffffffff,00000000,ffffffff" if r["dev"] < 4 else "ffffffff,00000000,ffffffff,00000000"),
        )
        if nvls:
            say(r, "NVLS multicast support is available on dev %d" % r["dev"])
        say(
            r,
            "comm 0x%x rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL 0"
            % (comm(r), r["rank"], nranks, len(job["hosts"]), job["ranks_per_host"], r["local"]),
        )
        if r["rank"] == 0:
            ring = [x["rank"] for x in ranks]
            for c in range(job["channels"]):
                say(r, "Channel %02d/%02d : %s" % (c, job["channels"], "".join("%4d" % x for x in ring)))
        say(r, "P2P Chunksize set to 524288")
    channel_lines = _channels(job, network, gdr)
    warned = set()
    for r in shown:
        for owner, text in channel_lines:
            if owner is not r:
                continue
            if "NET/IB" in text and not gdr and faults_of(r["host"]["gpu"], "no_gdr"):
                nic = int(text.split("NET/IB/")[1].split("/")[0])
                if (r["rank"], nic) not in warned:
                    warned.add((r["rank"], nic))
                    say(
                        r,
                        "NET/IB : GPU Direct RDMA Disabled for HCA %d '%s' (no module)"
                        % (nic, _nic_name(r["host"], _usable_nics(r["host"])[nic])),
                        40,
                    )
            say(r, text, 40)
    channels = job["channels"]
    for r in shown:
        say(r, "Connected all rings", 40)
        if len(job["hosts"]) > 1:
            say(r, "Connected all trees", 40)
        if nvls:
            say(
                r,
                "NVLS comm 0x%x headRank %d nHeads %d buffSize 1048576 memSize 2097152 nvlsPerRankSize 201326592 "
                "nvlsTotalSize 1610612736" % (comm(r), r["local"], job["ranks_per_host"]),
                40,
            )
        say(r, "threadThresholds 8/8/64 | %d/8/64 | 512 | 512" % (nranks * 8), 40)
        say(
            r,
            "%d coll channels, %d collnet channels, %d nvls channels, %d p2p channels, %d p2p channels per peer"
            % (channels, 0, 16 if nvls else 0, channels * 2, 2),
            40,
        )
        say(
            r,
            "ncclCommInitRank comm 0x%x rank %d nranks %d cudaDev %d nvmlDev %d busId %x000 commId 0x%x - Init COMPLETE"
            % (comm(r), r["rank"], nranks, r["dev"], r["dev"], r["gpu"]["bus"], comm_id),
            40,
        )
    job["comm"] = comm


def nccl_destroy(job, log):
    for r in job["ranks"]:
        if _debug_level(r["host"]["env"]) in ("INFO", "TRACE"):
            log.add(
                r["proc"],
                _prefix(r)
                + "comm 0x%x rank %d nranks %d cudaDev %d busId %x000 - Destroy COMPLETE"
                % (job["comm"](r), r["rank"], job["nranks"], r["dev"], r["gpu"]["bus"]),
            )


# -------------------------------------------------------------------- running the test


def _perf_header(conf):
    step = conf["step_factor"] if conf["step_factor"] > 1 else conf["step_bytes"]
    return (
        "# nThread %d nGpus %d minBytes %d maxBytes %d step: %d(%s) warmup iters: %d iters: %d agg iters: %d "
        "validation: %d graph: %d"
        % (
            conf["threads"],
            conf["gpus"],
            conf["min"],
            conf["max"],
            step,
            "factor" if conf["step_factor"] > 1 else "bytes",
            conf["warmup"],
            conf["iters"],
            conf["agg"],
            1 if conf["check"] else 0,
            conf["graph"],
        )
    )


# The three header lines, formatted as nccl-tests' print_header() does.
TABLE_HEADER = [
    "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          " % (("",) * 5),
    "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s"
    % (
        "size",
        "count",
        "type",
        "redop",
        "root",
        "time",
        "algbw",
        "busbw",
        "#wrong",
        "time",
        "algbw",
        "busbw",
        "#wrong",
    ),
    "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s"
    % ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", ""),
]


def _cuda_failure(host, pid, message, line, log, proc):
    log.add(proc, "%s: Test CUDA failure common.cu:%d '%s'" % (host["name"], line, message))
    log.add(proc, " .. %s pid %d: Test failure common.cu:%d" % (host["name"], pid, line + 268))
    return 2


def _device_failure(job):
    """(host, message, after_rank_lines) for the first host whose CUDA setup would fail, else None."""
    for host in job["hosts"]:
        if host["gpu"]["model"] == "none":
            return host, "CUDA driver version is insufficient for CUDA runtime version", False
        if job["ranks_per_host"] > len(host["gpus"]):
            return host, "invalid device ordinal", False
    for host in job["hosts"]:
        if faults_of(host["gpu"], "fabric_manager_down"):
            return host, "system not yet initialized", True
    return None


def run_job(job, conf, log):
    """Render one all_reduce_perf run (direct, or the ranks of an mpirun job); returns the exit code."""
    for note in conf["notes"]:
        log.add(0, note)
    log.add(0, _perf_header(conf))
    log.add(0, "#")
    log.add(0, "# Using devices")
    failure = _device_failure(job)
    if failure and not failure[2]:
        host = failure[0]
        first = [p for p in range(len(job["hosts"])) if job["hosts"][p] is host][0]
        proc = sum(h["procs"] for h in job["hosts"][:first])
        return _cuda_failure(host, host["pid"], failure[1], 894, log, proc)
    for r in job["ranks"]:
        log.add(
            0,
            "#  Rank %2d Group  0 Pid %6d on %10s device %2d [%04x:%02x:%02x] %s"
            % (r["rank"], r["pid"], r["host"]["name"], r["dev"], 0, r["gpu"]["bus"], 0, r["gpu"]["name"]),
        )
    mem = min(h["gpus"][0]["spec"]["mem_mib"] for h in job["hosts"]) << 20
    mem_max = (mem - GIB) // (3 if conf["check"] else 2)
    if conf["max"] > mem_max:
        conf["max"] = mem_max
        log.add(0, "#")
        log.add(0, "# Reducing maxBytes to %d due to memory limitation" % mem_max)
    if failure:
        host = failure[0]
        first = [p for p in range(len(job["hosts"])) if job["hosts"][p] is host][0]
        return _cuda_failure(host, host["pid"], failure[1], 974, log, sum(h["procs"] for h in job["hosts"][:first]))
    network, why, forced = choose_network(job)
    if forced:
        r = job["ranks"][0]
        if _debug_level(r["host"]["env"]) in ("WARN", "INFO", "TRACE"):
            log.add(0, _prefix(r, 0, "WARN").rstrip() + " Error: network %s not found." % forced)
        log.add(
            0,
            "%s: Test NCCL failure common.cu:1005 'invalid usage (run with NCCL_DEBUG=WARN for details) / "
            "Error: network %s not found.'" % (r["host"]["name"], forced),
        )
        log.add(0, " .. %s pid %d: Test failure common.cu:1193" % (r["host"]["name"], r["pid"]))
        return 3
    gdr = network != "Socket" and not any(faults_of(h["gpu"], "no_gdr") for h in job["hosts"])
    if any((h["env"].get("NCCL_NET_GDR_LEVEL") or "").strip().upper() in ("LOC", "0") for h in job["hosts"]):
        gdr = False
    nccl_info(job, network, why, gdr, log)
    log.add(0, "#")
    for line in TABLE_HEADER:
        log.add(0, line)
    busbw, lat, knee = job_bandwidth(job, network, gdr)
    rows = perf_rows(job, conf, busbw, lat, knee)
    return _table(job, conf, rows, log)


def _table(job, conf, rows, log):
    abort_at = None
    if any(faults_of(h["gpu"], "nccl_abort") for h in job["hosts"]):
        abort_at = len(rows) // 2
    wrong = sum(f["count"] for h in job["hosts"] for f in faults_of(h["gpu"], "wrong_values"))
    largest = max([row[0] for row in rows] or [0])
    errors, total_bw, count_bw = 0, 0.0, 0
    for index, (nbytes, count, dtype, op, halves) in enumerate(rows):
        lead = "%12d  %12d  %8s  %6s  %6d" % (nbytes, count, dtype, op, -1)
        if index == abort_at:
            return _abort(job, lead, log)
        cells = []
        for usec, algbw, busbw in halves:
            bad = wrong if (wrong and conf["check"] and nbytes == largest) else 0
            errors += bad
            wrong_text = str(bad) if conf["check"] else "N/A"
            cells.append("  %s  %6.2f  %6.2f  %5s" % (_time_str(usec), algbw, busbw, wrong_text))
            total_bw += busbw
            count_bw += 1
        log.add(0, lead + "".join(cells))
    nccl_destroy(job, log)
    avg = total_bw / count_bw if count_bw else 0.0
    min_bw = os.environ.get("NCCL_TESTS_MIN_BW")
    verdict = ""
    if min_bw:
        try:
            verdict = "FAILED" if avg < float(min_bw) * 0.9 else "OK"
        except ValueError:
            verdict = "OK"
    log.add(0, "# Out of bounds values : %d %s" % (errors, "FAILED" if errors else "OK"))
    log.add(0, "# Avg bus bandwidth    : %s %s" % (("%g" % avg), verdict))
    log.add(0, "#")
    return 1 if errors or verdict == "FAILED" else 0


def _abort(job, lead, log):
    """Rank 0 dies mid-table: a network error from the peer host (2 nodes) or a CUDA fault (1 node)."""
    victim = job["ranks"][0]
    host = victim["host"]
    if len(job["hosts"]) > 1:
        peer = job["hosts"][1]
        nic = _nic_name(host, _usable_nics(host)[_nic_of(host, victim["local"], 0, job["ranks_per_host"])])
        warn = (
            "NET/IB : Got completion from peer %s<41872> with status=12 opcode=0 len=0 vendor err 129 (Recv) "
            "localGid ::ffff:%s remoteGids::ffff:%s hca %s" % (peer["address"], host["address"], peer["address"], nic)
        )
        what = "remote process exited or there was a network error"
        where = "transport/net_ib.cc:1696"
    else:
        warn = "Cuda failure 700 'an illegal memory access was encountered'"
        what = "unhandled cuda error (run with NCCL_DEBUG=INFO for details)"
        where = "enqueue.cc:1451"
    if _debug_level(host["env"]) in ("WARN", "INFO", "TRACE"):
        log.add(0, _prefix(victim, 40, "WARN").replace("NCCL WARN ", "%s NCCL WARN " % where) + warn)
    log.add(0, lead + "%s: Test NCCL failure common.cu:409 '%s / %s'" % (host["name"], what, warn))
    for where in ("common.cu:600", "all_reduce.cu:90", "common.cu:623"):
        log.add(0, " .. %s pid %d: Test failure %s" % (host["name"], victim["pid"], where))
    return 3


def build_job(hosts, procs_per_host, conf):
    job = {"hosts": hosts, "threads": conf["threads"], "gpus_per_thread": conf["gpus"]}
    job["ranks_per_host"] = procs_per_host * conf["threads"] * conf["gpus"]
    job["nranks"] = job["ranks_per_host"] * len(hosts)
    job["channels"] = 16 if len(hosts) > 1 else 24
    job["ranks"] = _ranks(job)
    return job


def all_reduce_perf_main(argv):
    try:
        conf = parse_perf_args(argv[1:])
    except (getopt.GetoptError, ValueError) as exc:
        _err("%s: %s\n" % (os.path.basename(argv[0]), exc))
        _out("invalid option \n" + PERF_USAGE)
        return 1
    if conf["help"]:
        _out(PERF_USAGE)
        return 0
    me = local_hostname()
    hosts_db = read_hosts()
    resolved = resolve_host(me, me, hosts_db)
    scenario = local_scenario()
    host = make_host(resolved, scenario, 1, dict(os.environ))
    job = build_job([host], 1, conf)
    log = Log()
    rc = run_job(job, conf, log)
    grow_local_counters(scenario)
    out, err = log.render(False)
    _out(out)
    _err(err)
    return rc


def grow_local_counters(scenario):
    """The scenario's ``fabric.grow_in_test``: this node's port counters grow while a test runs.

    Only this node's tree can be reached (each node has its own sim root), so an mpirun job grows
    the launcher's counters only.
    """
    if not (scenario.get("fabric") or {}).get("grow_in_test"):
        return []
    # raygate_sim imports this module: import it here, when both are loaded.
    import raygate_sim  # pylint: disable=import-outside-toplevel

    return raygate_sim.grow_counters(_env(ROOT_ENV, DEFAULT_ROOT), scenario.get("fabric"))


# ------------------------------------------------------------------------------ mpirun

MPI_BAR = "-" * 74
MPI_ROOT = """mpirun has detected an attempt to run as root.

Running as root is *strongly* discouraged as any mistake (e.g., in
defining TMPDIR) or bug can result in catastrophic damage to the OS
file system, leaving your system in an unusable state.

We strongly suggest that you run mpirun as a non-root user.

You can override this protection by adding the --allow-run-as-root option
to the cmd line or by setting two environment variables in the following way:
the variable OMPI_ALLOW_RUN_AS_ROOT=1 to indicate the desire to override this
protection, and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 to confirm the choice and
add one more layer of certainty that you want to do so.
We reiterate our advice against doing so - please proceed at your own risk."""
MPI_SLOTS = """There are not enough slots available in the system to satisfy the {np}
slots that were requested by the application:

  {program}

Either request fewer slots for your application, or make more slots
available for use.

A "slot" is the Open MPI term for an allocatable unit where we can
launch a process.  The number of slots available are defined by the
environment in which Open MPI processes are run:

  1. Hostfile, via "slots=N" clauses (N defaults to number of
     processor cores if not provided)
  2. The --host command line parameter, via a ":N" suffix on the
     hostname (N defaults to 1 if not provided)
  3. Resource manager (e.g., SLURM, PBS/Torque, LSF, etc.)
  4. If none of a hostfile, the --host command line parameter, or an
     RM is present, Open MPI defaults to the number of processor cores

In all the above cases, if you want Open MPI to default to the number
of hardware threads instead of the number of processor cores, use the
--use-hwthread-cpus option.

Alternatively, you can use the --oversubscribe option to ignore the
number of available slots when deciding the number of processes to
launch."""
MPI_FAILED = """Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted."""
MPI_DETECTED = """mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[{jobid},1],{proc}]
  Exit code:    {code}"""

MPI_FLAGS = set(
    "--allow-run-as-root --oversubscribe --tag-output -tag-output --timestamp-output -q --quiet -v --verbose "
    "--display-map -display-map --report-bindings -report-bindings --use-hwthread-cpus --bind-to-core "
    "--noprefix --output-filename".split()
)
MPI_VALUED = {
    "-np": "np",
    "-n": "np",
    "--np": "np",
    "-c": "np",
    "-H": "host",
    "-host": "host",
    "--host": "host",
    "-N": "npernode",
    "-npernode": "npernode",
    "--npernode": "npernode",
    "--map-by": None,
    "-map-by": None,
    "--bind-to": None,
    "-bind-to": None,
    "--rank-by": None,
    "-rank-by": None,
    "--hostfile": "hostfile",
    "-hostfile": "hostfile",
    "--machinefile": "hostfile",
    "-machinefile": "hostfile",
    "--prefix": None,
    "-wdir": None,
    "--wdir": None,
    "-x": "x",
    "--launch-agent": None,
    "--output-filename": None,
}
MPI_TWO = ("--mca", "-mca", "-gmca", "--gmca")


def _mpi_error(text, rc=1):
    _err("%s\n%s\n%s\n" % (MPI_BAR, text, MPI_BAR))
    return rc


def parse_mpirun(args):
    """mpirun argv (without argv[0]) -> (options dict, program argv); ValueError for an unknown option."""
    opts = {"np": None, "host": [], "npernode": None, "hostfile": None, "x": [], "flags": set()}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            i += 1
            break
        if not arg.startswith("-"):
            break
        name, value = (arg.split("=", 1) + [None])[:2] if arg.startswith("--") and "=" in arg else (arg, None)
        if name in MPI_FLAGS:
            opts["flags"].add(name.lstrip("-"))
            i += 1
        elif name in MPI_TWO:
            if i + 2 >= len(args):
                raise ValueError(arg)
            i += 3
        elif name in MPI_VALUED:
            if value is None:
                if i + 1 >= len(args):
                    raise ValueError(arg)
                value = args[i + 1]
                i += 2
            else:
                i += 1
            key = MPI_VALUED[name]
            if key in ("host", "x"):
                opts[key].append(value)
            elif key:
                opts[key] = value
        else:
            raise ValueError(arg)
    return opts, args[i:]


def _host_slots(opts):
    """[(entry, slots)] in order from -H and --hostfile; repeated entries add slots."""
    entries = []
    for spec in opts["host"]:
        for item in spec.split(","):
            if item.strip():
                name, unused_sep, slots = item.strip().partition(":")
                entries.append((name, int(slots) if slots.isdigit() else 1))
    if opts["hostfile"]:
        with open(opts["hostfile"], encoding="utf-8") as fh:
            for line in fh:
                parts = line.split("#", 1)[0].split()
                if parts:
                    slots = [p.split("=", 1)[1] for p in parts[1:] if p.startswith("slots=")]
                    entries.append((parts[0], int(slots[0]) if slots and slots[0].isdigit() else 1))
    merged = []
    for name, slots in entries:
        for k, (other, have) in enumerate(merged):
            if other == name:
                merged[k] = (other, have + slots)
                break
        else:
            merged.append((name, slots))
    return merged


def _rank_env(opts, local):
    """NCCL-relevant environment a rank sees: local ranks inherit mpirun's, remote ones get only -x."""
    env = dict(os.environ) if local else {}
    for item in opts["x"]:
        name, sep, value = item.partition("=")
        if sep:
            env[name] = value
        elif name in os.environ:
            env[name] = os.environ[name]
    return env


def mpirun_main(argv):
    try:
        opts, program = parse_mpirun(argv[1:])
    except ValueError as exc:
        _err("%s: Error: unknown option \"%s\"\nType 'mpirun --help' for usage.\n" % (os.path.basename(argv[0]), exc))
        return 1
    if not program:
        _err("%s: Error: no executable specified.\nType 'mpirun --help' for usage.\n" % os.path.basename(argv[0]))
        return 1
    allowed = (
        os.environ.get("OMPI_ALLOW_RUN_AS_ROOT") == "1" and os.environ.get("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM") == "1"
    )
    if os.geteuid() == 0 and "allow-run-as-root" not in opts["flags"] and not allowed:
        return _mpi_error(MPI_ROOT)
    me = local_hostname()
    hosts_db = read_hosts()
    try:
        slots = _host_slots(opts)
    except OSError as exc:
        return _mpi_error("Open RTE was unable to open the hostfile:\n    %s" % exc.filename)
    if not slots:
        slots = [(me, os.cpu_count() or 1)]
    resolved = []
    for entry, count in slots:
        host = resolve_host(entry, me, hosts_db)
        if host is None:
            _err("ssh: Could not resolve hostname %s: Name or service not known\n" % entry)
            return _mpi_error(
                "ORTE was unable to reliably start one or more daemons.\n"
                "This usually is caused by:\n\n"
                "* not finding the required libraries and/or binaries on\n"
                "  one or more nodes."
            )
        resolved.append((host, count))
    try:
        per_node = int(opts["npernode"]) if opts["npernode"] else None
        np_ = int(opts["np"]) if opts["np"] else None
    except ValueError:
        return _mpi_error("Invalid value for -np / -N")
    procs = _place(resolved, np_, per_node, "oversubscribe" in opts["flags"])
    if isinstance(procs, int):
        return _mpi_error(MPI_SLOTS.format(np=procs, program=os.path.basename(program[0])))
    used = [(h, n) for (h, unused_slots), n in zip(resolved, procs) if n > 0]
    name = os.path.basename(program[0])
    tag = "tag-output" in opts["flags"]
    if name == "hostname":
        log = Log()
        proc = 0
        for host, n in used:
            for _rank in range(n):
                log.add(proc, host["name"])
                proc += 1
        out, err = log.render(tag)
        _out(out)
        return 0
    if name != "all_reduce_perf":
        return _mpi_error(
            "raygate-sim: mpirun only simulates all_reduce_perf (and hostname), not %s.\n"
            "mpirun was unable to launch the specified application as it could not access\n"
            "or execute an executable:\n\nExecutable: %s" % (name, program[0])
        )
    try:
        conf = parse_perf_args(program[1:])
    except (getopt.GetoptError, ValueError) as exc:
        _err("%s: %s\n" % (name, exc))
        _out("invalid option \n" + PERF_USAGE)
        return 0
    if conf["help"]:
        _out(PERF_USAGE)
        return 0
    counts = set(n for unused_host, n in used)
    hosts = []
    for host, n in used:
        try:
            scenario = host_scenario(host)
        except GpuScenarioError as exc:
            _err("raygate-sim: %s\n" % exc)
            return 2
        hosts.append(make_host(host, scenario, n, _rank_env(opts, host["local"])))
    if len(counts) != 1:
        return _mpi_error(
            "raygate-sim: mpirun simulates the same number of processes on every host, not %s" % sorted(counts)
        )
    job = build_job(hosts, counts.pop(), conf)
    log = Log()
    rc = run_job(job, conf, log)
    if any(host["local"] for host, _n in used):
        grow_local_counters(local_scenario())
    out, err = log.render(tag)
    _out(out)
    _err(err)
    if rc:
        jobid = 10000 + int(_rand(me, "jobid") * 50000)
        failed = 0
        _err("%s\n%s\n%s\n" % (MPI_BAR, MPI_FAILED, MPI_BAR))
        _err("%s\n%s\n%s\n" % (MPI_BAR, MPI_DETECTED.format(jobid=jobid, proc=failed, code=rc), MPI_BAR))
    return rc


def _place(resolved, np_, per_node, oversubscribe):
    """Processes per host (list), or the requested count when the slots do not suffice."""
    if per_node is not None:
        procs = [per_node] * len(resolved)
        if np_ is not None:
            left, procs = np_, []
            for _host in resolved:
                procs.append(min(per_node, left))
                left -= procs[-1]
            if left > 0:
                return np_
        return procs
    slots = [count for unused_host, count in resolved]
    if np_ is None:
        return slots
    if np_ > sum(slots) and not oversubscribe:
        return np_
    procs, left = [], np_
    for count in slots:
        procs.append(min(count, left))
        left -= procs[-1]
    k = 0
    while left > 0:
        procs[k % len(procs)] += 1
        left -= 1
        k += 1
    return procs


# ------------------------------------------------------------------ build: files on disk

XID_MESSAGES = {
    13: "Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0): Out Of Range Address",
    31: "Ch 00000008, intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f2c_4a000000. "
    "Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
    43: "Ch 00000008",
    45: "Ch 00000008",
    48: "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at physAddr "
    "0x12bac1c3e0 partition 2, subpartition 1.",
    63: "Row Remapper: New row (0x00000012bac1c3e0) marked for remapping, reset gpu to activate.",
    64: "Row Remapper: Failed to remap row (0x00000012bac1c3e0), reset gpu to activate.",
    74: "NVLink: fatal error detected on link 0(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
    79: "GPU has fallen off the bus.",
    92: "High single-bit ECC error rate",
    94: "Contained: SM (0x1). RST: No, D-RST: No",
    95: "Uncontained: FBHUB. RST: Yes, D-RST: No",
    119: "Timeout after 6s of waiting for RPC response from GPU0 GSP! Expected function 76 (GSP_RM_CONTROL) "
    "(0x20800a4c 0x4).",
    120: "GSP task 0 ENGINE FAULT",
}
APP_XIDS = (13, 31, 43, 45, 94)
# SXid -> (the word the driver prints, the error's name), as in real nvswitch lines.
SXID_MESSAGES = {
    12028: ("Non-fatal", "egress non-posted PRIV error (First)"),
    19084: ("Non-fatal", "AN1 Heartbeat Timeout Error (First)"),
    20034: ("Fatal", "LTSSM Fault Up"),
    22013: ("Non-fatal", "Minion Link DLREQ interrupt"),
}


def kern_log_path(root):
    """Where ``build`` writes the kernel log: $RAYGATE_SIM_KERN_LOG, /var/log/kern.log for the node's
    own sim root, else <root>/var/log/kern.log (so a build on the host never touches its log)."""
    explicit = _env(KERN_LOG_ENV)
    if explicit:
        return explicit
    if os.path.abspath(root) == DEFAULT_ROOT:
        return DEFAULT_KERN_LOG
    return os.path.join(root, "var", "log", "kern.log")


def _uptime():
    try:
        with open("/proc/uptime", encoding="utf-8") as fh:
            return max(120.0, float(fh.read().split()[0]) - 5.0)
    except (OSError, ValueError, IndexError):
        return 1234.567890


def kern_log(host, gpu, now=None, uptime=None):
    """Debian rsyslog (traditional format) kernel log lines: driver load, then the scenario's Xids,
    Xid-less driver errors and NVSwitch SXids."""
    now = _now() if now is None else now
    uptime = _uptime() if uptime is None else uptime
    lines = []

    def line(offset, text):
        stamp = time.strftime("%b %d %H:%M:%S", time.localtime(now - uptime + offset))
        stamp = stamp[:4] + ("%2d" % int(stamp[4:6])) + stamp[6:]
        lines.append("%s %s kernel: [%12.6f] %s" % (stamp, host, offset, text))

    line(
        3.141593,
        "Linux version %s (debian-kernel@lists.debian.org) #1 SMP PREEMPT_DYNAMIC Debian" % os.uname().release,
    )
    if gpu["model"] != "none":
        gdr = not faults_of(gpu, "no_gdr")
        line(11.204117, "nvidia: loading out-of-tree module taints kernel.")
        line(11.291442, "nvidia-nvlink: Nvlink Core is being initialized, major device number 509")
        # The driver's banner is the first line of /proc/driver/nvidia/version.
        banner = driver_version_text(gpu, gdr).splitlines()[0].replace("NVRM version: ", "NVRM: loading ")
        line(11.402955, banner)
        for n, fault in enumerate(faults_of(gpu, "xid")):
            bus = BUS_IDS[fault["gpu"]]
            xid = fault["xid"]
            who = "pid=%d, name=python3" % (4242 + n) if xid in APP_XIDS else "pid='<unknown>', name=<unknown>"
            message = XID_MESSAGES.get(xid, "Xid %d reported by the GPU" % xid)
            line(uptime - 60.0 + n, "NVRM: Xid (PCI:0000:%02x:00): %d, %s, %s" % (bus, xid, who, message))
        _fallen_off_bus(gpu, line, lines.append, uptime - 50.0)
        _sxids(gpu, line, uptime - 40.0)
    return "".join(x + "\n" for x in lines)


def _fallen_off_bus(gpu, line, raw, start):
    """The driver's Xid-less record for a GPU it cannot reach: one printk over three lines, which
    dmesg and journalctl show with the continuation lines indented and without a time."""
    device = MODELS[gpu["model"]]["device_id"][2:6].lower()
    for n, fault in enumerate(faults_of(gpu, "fallen_off_bus")):
        bus = BUS_IDS[fault["gpu"]]
        t = start + n
        line(t, "NVRM: The NVIDIA GPU 0000:%02x:00.0" % bus)
        raw("               NVRM: (PCI ID: 10de:%s) installed in this system has" % device)
        raw("               NVRM: fallen off the bus and is not responding to commands.")
        line(t + 0.000173, "nvidia: probe of 0000:%02x:00.0 failed with error -1" % bus)
        line(t + 0.064169, "NVRM: The NVIDIA probe routine failed for 1 device(s).")


def _sxids(gpu, line, start):
    """NVSwitch SXid events as the nvswitch driver prints them: Data, the Fatal/Non-fatal line, Severity."""
    for n, fault in enumerate(faults_of(gpu, "sxid")):
        code, switch, port = fault["sxid"], fault["switch"], fault["port"]
        word, name = SXID_MESSAGES.get(code, ("Non-fatal", "SXid %d reported by the NVSwitch" % code))
        head = "nvidia-nvswitch%d: SXid (PCI:0000:%02x:00.0): %d, " % (switch, SWITCH_BUS_IDS[switch], code)
        data = "0x%08x, 0x%08x, 0x00000000, 0x%08x, 0x80005302" % (port, port, port) + ", 0x00000000" * 4
        t = start + n
        line(t, head + "Data {%s}" % data)
        line(t + 0.003159, head + "%s, Link %d %s" % (word, port, name))
        severity = 5 if word == "Fatal" else 0
        line(t + 0.005147, head + "Severity %d Engine instance %02d Sub-engine instance 00" % (severity, port))


def _write_atomic(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".raygate-sim-", dir=os.path.dirname(path))
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def driver_version_text(gpu, gdr):
    if gdr:
        return (
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  %s  Release Build  "
            "(dvs-builder@U16-I3-B03-4-3)  Fri May 31 09:44:39 UTC 2024\n"
            "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14) \n" % gpu["driver"]
        )
    return (
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  %s  Fri May 31 09:35:42 UTC 2024\n"
        "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14) \n" % gpu["driver"]
    )


def _nccl_library(root, version):
    """An empty ``libnccl.so.<version>`` where the distribution package puts it (the name is all a
    reader of the version looks at); older ones go. None: no NCCL library."""
    lib_dir = os.path.join(root, NCCL_LIB_DIR)
    try:
        old = [n for n in os.listdir(lib_dir) if n.startswith("libnccl.so.")]
    except OSError:
        old = []
    for name in old:
        os.unlink(os.path.join(lib_dir, name))
    if version is None:
        return []
    path = os.path.join(lib_dir, "libnccl.so.%s" % version)
    _write_atomic(path, "")
    return [path]


# The driver's character devices: nvidiactl and nvidiaN on major 195, nvidia-uvm on a dynamic
# major (238 on the H100 this was read from, driver 580).
NVIDIA_MAJOR = 195
UVM_MAJOR = 238


def _device_node(path, major, minor, mode, gid):
    """A character device where mknod is allowed (as on a real node), else an empty file: the
    gate only asks the kernel whether the service user may open it, never opens it."""
    if os.path.lexists(path):
        os.unlink(path)
    try:
        os.mknod(path, 0o600 | 0o020000, os.makedev(major, minor))
    except OSError:
        with open(path, "w", encoding="utf-8"):
            pass
    os.chown(path, 0, gid)
    os.chmod(path, mode)


def device_files(root, gpu):
    """``<root>/dev/nvidia*`` and ``<root>/proc/driver/nvidia/params`` as the driver makes them for
    ``gpu`` (a device_files fault narrows them); with model none, neither."""
    dev = os.path.join(root, "dev")
    params = os.path.join(root, "proc", "driver", "nvidia", "params")
    shutil.rmtree(dev, ignore_errors=True)
    if gpu["model"] == "none":
        return []
    narrowed = faults_of(gpu, "device_files")
    mode, gid = 0o666, 0
    if narrowed:
        mode, gid = int(narrowed[0]["mode"], 8), grp.getgrnam(narrowed[0]["group"]).gr_gid
    os.makedirs(dev, exist_ok=True)
    nodes = [("nvidiactl", NVIDIA_MAJOR, 255), ("nvidia-uvm", UVM_MAJOR, 0), ("nvidia-uvm-tools", UVM_MAJOR, 1)]
    nodes += [("nvidia%d" % i, NVIDIA_MAJOR, i) for i in range(gpu["count"])]
    for name, major, minor in nodes:
        _device_node(os.path.join(dev, name), major, minor, mode, gid)
    _write_atomic(
        params,
        "ResmanDebugLevel: 4294967295\nModifyDeviceFiles: 1\nDeviceFileUID: 0\nDeviceFileGID: %d\n"
        "DeviceFileMode: %d\n" % (gid, mode),
    )
    return [dev, params]


def build(root, scenario, host=None, kern_log_file=None):
    """Write the GPU artifacts of ``scenario`` under ``root`` and the kernel log; returns their paths.

    Run after raygate_sim.build_tree (which replaces ``<root>/sys``). With model none there is no
    driver: no proc/driver/nvidia, no nvidia_peermem.
    """
    gpu = normalize_gpu(scenario.get("gpu"))
    host = host or local_hostname()
    gdr = gpu["model"] != "none" and not faults_of(gpu, "no_gdr")
    version = os.path.join(root, "proc", "driver", "nvidia", "version")
    peermem = os.path.join(root, "sys", "module", "nvidia_peermem")
    written = []
    if gpu["model"] == "none":
        shutil.rmtree(os.path.join(root, "proc", "driver", "nvidia"), ignore_errors=True)
    else:
        _write_atomic(version, driver_version_text(gpu, gdr))
        _write_atomic(os.path.join(root, "sys", "module", "nvidia", "version"), gpu["driver"] + "\n")
        written.append(version)
    if gdr:
        _write_atomic(os.path.join(peermem, "initstate"), "live\n")
        _write_atomic(os.path.join(peermem, "refcnt"), "0\n")
        written.append(peermem)
    else:
        shutil.rmtree(peermem, ignore_errors=True)
    if gpu["model"] == "none":
        shutil.rmtree(os.path.join(root, "sys", "module", "nvidia"), ignore_errors=True)
    written += _nccl_library(root, None if gpu["model"] == "none" else gpu["nccl"])
    written += device_files(root, gpu)
    log = kern_log_file or kern_log_path(root)
    _write_atomic(log, kern_log(host, gpu), 0o640)
    written.append(log)
    return written


# --------------------------------------------------------------------------------- CLI

TOOLS = {
    "nvidia-smi": nvidia_smi_main,
    "dcgmi": dcgmi_main,
    "all_reduce_perf": all_reduce_perf_main,
    "mpirun": mpirun_main,
}


def slow_delay(gpu, took):
    """Seconds a tool whose own work took ``took`` seconds waits before it exits, so that it takes
    ``times`` as long in all (the ``slow`` fault of the normalized ``gpu``); 0 without it. The
    caller gives the CPU time of the work, which a busy host does not inflate as it does wall time."""
    slow = faults_of(gpu, "slow")
    return took * (slow[0]["times"] - 1) if slow else 0.0


def run_tool(name, argv):
    start = time.process_time()
    try:
        return TOOLS[name](argv)
    except GpuScenarioError as exc:
        _err("raygate-sim: %s\n" % exc)
        return 2
    except BrokenPipeError:
        return 141
    finally:
        try:
            delay = slow_delay(normalize_gpu(local_scenario().get("gpu")), time.process_time() - start)
        except GpuScenarioError:
            delay = 0.0
        if delay:
            sys.stdout.flush()
            time.sleep(delay)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) >= 3 and argv[0] == "tool" and argv[1] in TOOLS:
        return run_tool(argv[1], argv[2:])
    if argv and argv[0] == "build":
        try:
            opts, rest = getopt.gnu_getopt(argv[1:], "", ["scenario=", "root=", "kern-log=", "hostname="])
        except getopt.GetoptError as exc:
            _err("gpu_sim: %s\n" % exc)
            return 2
        options = dict(opts)
        try:
            scenario = read_scenario(options.get("--scenario", _env(SCENARIO_ENV, DEFAULT_SCENARIO)))
            root = options.get("--root") or _env(ROOT_ENV, DEFAULT_ROOT)
            paths = build(root, scenario, options.get("--hostname"), options.get("--kern-log"))
        except GpuScenarioError as exc:
            _err("gpu_sim: %s\n" % exc)
            return 2
        if rest:
            _err("gpu_sim: unexpected arguments %s\n" % rest)
            return 2
        print("gpu_sim: wrote %s" % ", ".join(paths))
        return 0
    _err("usage: gpu_sim.py tool nvidia-smi|dcgmi|all_reduce_perf|mpirun ARGV0 [ARGS...]\n")
    _err("       gpu_sim.py build [--scenario F] [--root R] [--kern-log K] [--hostname H]\n")
    return 2


if __name__ == "__main__":
    sys.exit(main())
