# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A node's software and firmware fingerprint: what a fleet must agree on to behave alike.

Every field is read from what ``gpu_health`` already gathers where it can (``nvidia-smi -q -x``,
sysfs, ``ibstat``), plus two cheap reads of its own: the RDMA stack's version (``ofed_info -s``,
else the rdma-core package) and the file name of the system's NCCL library. A field that cannot be
read honestly is None, never a guess: the fleet view shows it as not read and judges no drift on it.

Fields (FIELDS order): ``gpu_model`` (the GPUs' product names), ``gpu_count`` (``<gpu>`` elements),
``driver``, ``cuda``, ``vbios`` (the distinct VBIOS versions), ``pcie_link`` (the distinct
``x<current>/x<max>`` link widths), ``hca_firmware`` (the distinct RDMA adapter firmware
versions), ``rdma_stack`` (``MLNX_OFED_LINUX-...`` or ``rdma-core <version>``), ``nccl`` (the
distinct versions of ``libnccl.so.X.Y.Z`` in the usual library directories) and ``kernel``.
The set-valued ones (SET_FIELDS) are sorted lists. Pure functions, except ``read_live``, which
reads files under ``root`` and runs the two version tools through a CommandRunner.
"""

from __future__ import annotations

import hashlib
import json
import os
import re

from ansible_collections.raygate.cluster.plugins.module_utils._runner import CommandError

FIELDS = (
    "gpu_model",
    "gpu_count",
    "driver",
    "cuda",
    "vbios",
    "pcie_link",
    "hca_firmware",
    "rdma_stack",
    "nccl",
    "kernel",
)
SET_FIELDS = ("gpu_model", "vbios", "pcie_link", "hca_firmware", "nccl")
# Where distribution packages, NVIDIA's repositories and the usual images put libnccl.so.X.Y.Z.
NCCL_LIB_DIRS = (
    "usr/lib/x86_64-linux-gnu",
    "usr/lib/aarch64-linux-gnu",
    "usr/lib64",
    "usr/lib",
    "usr/local/lib",
    "usr/local/cuda/lib64",
    "usr/local/nccl/lib",
    "opt/nccl/lib",
    "opt/nccl/build/lib",
)
_NCCL_LIB = re.compile(r"^libnccl\.so\.(\d+\.\d+\.\d+)$")
_IBSTAT_FW = re.compile(r"^\s*Firmware version:\s*(\S+)\s*$")
_KERNEL_BANNER = re.compile(r"\bLinux version (\S+)")


def empty():
    """A fingerprint with every field unread."""
    return dict((field, None) for field in FIELDS)


def _distinct(values):
    """Sorted distinct non-empty values, or None when there are none."""
    found = sorted(set(str(v) for v in values if v not in (None, "")))
    return found or None


def from_nvsmi(nvsmi):
    """The GPU fields from ``gpu_parsers.parse_nvsmi_xml`` output (all None without it)."""
    out = dict((k, None) for k in ("gpu_model", "gpu_count", "driver", "cuda", "vbios", "pcie_link"))
    if not nvsmi:
        return out
    gpus = nvsmi.get("gpus") or []
    links = []
    for gpu in gpus:
        pcie = gpu.get("pcie") or {}
        if pcie.get("width_current") is not None and pcie.get("width_max") is not None:
            links.append("x%d/x%d" % (pcie["width_current"], pcie["width_max"]))
    out.update(
        gpu_model=_distinct(g.get("name") for g in gpus),
        gpu_count=len(gpus),
        driver=nvsmi.get("driver_version"),
        cuda=nvsmi.get("cuda_version"),
        vbios=_distinct(g.get("vbios_version") for g in gpus),
        pcie_link=_distinct(links),
    )
    return out


def hca_firmware_from_ibstat(text):
    """The distinct ``Firmware version`` values of ``ibstat`` output, or None."""
    found = []
    for line in (text or "").splitlines():
        match = _IBSTAT_FW.match(line)
        if match:
            found.append(match.group(1))
    return _distinct(found)


def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read().strip()
    except (OSError, ValueError):
        return None


def rdma_devices(root="/"):
    """Names of the RDMA devices in ``<root>/sys/class/infiniband`` (sorted; [] when none)."""
    try:
        return sorted(os.listdir(os.path.join(root, "sys", "class", "infiniband")))
    except OSError:
        return []


def hca_firmware_from_sysfs(root="/", devices=None):
    """The distinct ``fw_ver`` of the RDMA devices under ``root`` (what ibstat prints), or None."""
    class_dir = os.path.join(root, "sys", "class", "infiniband")
    names = rdma_devices(root) if devices is None else devices
    return _distinct(_read(os.path.join(class_dir, name, "fw_ver")) for name in names)


def parse_ofed_info(text):
    """``ofed_info -s`` (``MLNX_OFED_LINUX-23.10-0.5.5.0:``) -> the version without its colon, or None."""
    for line in (text or "").splitlines():
        line = line.strip().rstrip(":").strip()
        if line:
            return line
    return None


def nccl_from_libs(root="/", dirs=NCCL_LIB_DIRS):
    """The distinct NCCL versions named by ``libnccl.so.X.Y.Z`` files in ``dirs`` under ``root``, or None.

    The file name is the library's own version (the package installs it under that name and
    points ``libnccl.so.2`` at it); nothing is loaded.
    """
    found = []
    for directory in dirs:
        try:
            names = os.listdir(os.path.join(root, directory))
        except OSError:
            continue
        for name in names:
            match = _NCCL_LIB.match(name)
            if match:
                found.append(match.group(1))
    return _distinct(found)


def kernel_from_log(text):
    """The release in a kernel log's boot banner (``Linux version 6.1.0-18-amd64 ...``), or None."""
    for line in (text or "").splitlines():
        match = _KERNEL_BANNER.search(line)
        if match:
            return match.group(1)
    return None


def _package_version(runner, path, args):
    try:
        rc, out, _err = runner.run([path] + list(args))
    except CommandError:
        return None
    out = (out or "").strip()
    return "rdma-core %s" % out if rc == 0 and out else None


def rdma_stack(runner):
    """``ofed_info -s`` when NVIDIA's OFED is installed, else the rdma-core package's version
    (``dpkg-query``, or ``rpm`` where there is no dpkg), else None. Only the tools that exist run."""
    path = runner.which("ofed_info")
    if path:
        try:
            rc, out, _err = runner.run([path, "-s"])
        except CommandError:
            rc, out = None, ""
        version = parse_ofed_info(out) if rc == 0 else None
        if version:
            return version
    path = runner.which("dpkg-query")
    if path:
        return _package_version(runner, path, ["-W", "-f=${Version}", "rdma-core"])
    path = runner.which("rpm")
    if path:
        return _package_version(runner, path, ["-q", "--qf", "%{VERSION}-%{RELEASE}", "rdma-core"])
    return None


def read_live(runner, root="/", rdma=True):
    """The fields only a live node can give beyond nvidia-smi: ``hca_firmware``, ``rdma_stack``, ``nccl``.

    The RDMA fields are read only when ``rdma`` and the node has RDMA devices (no tool runs on a
    node without them).
    """
    devices = rdma_devices(root) if rdma else []
    return {
        "hca_firmware": hca_firmware_from_sysfs(root, devices) if devices else None,
        "rdma_stack": rdma_stack(runner) if devices else None,
        "nccl": nccl_from_libs(root),
    }


def build(nvsmi=None, **fields):
    """A whole fingerprint: the GPU fields from ``nvsmi``, then ``fields`` (any of FIELDS) over them."""
    unknown = sorted(set(fields) - set(FIELDS))
    if unknown:
        raise ValueError("unknown fingerprint fields: %s" % ", ".join(unknown))
    out = empty()
    out.update(from_nvsmi(nvsmi))
    out.update(fields)
    return out


def digest(fingerprint, length=12):
    """A short, stable hash of ``fingerprint``: the first ``length`` hex digits of the SHA-256 of its
    canonical JSON (sorted keys, no spaces, ASCII). Nodes with equal fingerprints share it, so a
    Ray node label can carry it (a label value holds at most 63 characters)."""
    canonical = json.dumps(fingerprint, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()[:length]


def text(value):
    """One field's value as one comparable string (a set as its sorted values joined), or None."""
    if value is None or value == [] or value == "":
        return None
    if isinstance(value, (list, tuple)):
        return ", ".join(sorted(str(v) for v in value))
    return str(value)
