#!/usr/bin/python
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_health
short_description: Judge a GPU node's health (GPUs, NVLink, Xid errors, DCGM, RDMA fabric) as check results
version_added: 0.1.0
description:
  - Reads C(nvidia-smi -q -x) once and C(nvidia-smi nvlink -s) once, the kernel log, optionally
    C(dcgmi diag), and the RDMA fabric (sysfs, C(ibstat), C(fi_info)), and judges them in one call.
  - Returns one result per check, each C({name, status, detail, value, threshold}) with status
    V(pass), V(warn), V(fail) or V(skip), in this fixed order and always all of them -
    C(gpu_count), C(driver_version), C(cuda_version), C(persistence_mode), C(ecc_mode),
    C(ecc_uncorrectable_volatile), C(ecc_uncorrectable_aggregate), C(ecc_correctable_sram),
    C(ecc_correctable_dram), C(retired_pages_pending), C(remapped_rows_pending),
    C(remapped_rows_failure), C(xid), C(nvlink), C(pcie_link), C(thermal_throttle),
    C(fabric_manager), C(dcgm_diag), C(fabric_ports), C(gpudirect_rdma).
  - The node is unhealthy (RV(healthy=false)) when any check fails. A missing or failing
    C(nvidia-smi) (no driver) fails every GPU check with the tool's message; the module itself
    fails only on bad arguments.
  - Read-only; never reports a change. Check mode runs exactly the same reads.
  - With O(capture_dir) it runs nothing and judges files captured earlier on a node -
    C(nvidia-smi.xml) (C(nvidia-smi -q -x)), C(nvlink.txt) (C(nvidia-smi nvlink -s)),
    C(kern.log) or C(dmesg.txt) (the kernel log), C(dcgmi-diag.json) (C(dcgmi diag -r N -j)),
    C(ibstat.txt) (C(ibstat)) and C(fi_info.txt) (C(fi_info -p efa -t FI_EP_RDM)). A missing file
    makes its checks skip with "not captured"; C(gpudirect_rdma) is not captured.
  - Returns the node's RV(fingerprint) (driver, CUDA, VBIOS, GPU model and count, PCIe link widths,
    HCA firmware, RDMA stack, NCCL and kernel versions) for M(raygate.cluster.health_report)'s fleet
    view. Live, the HCA firmware is sysfs' C(fw_ver) of each RDMA device; the RDMA stack is
    C(ofed_info -s) when NVIDIA's OFED is installed, else the C(rdma-core) package's version
    (C(dpkg-query) or C(rpm)), both only on a node with RDMA devices; NCCL is the version in the name
    of a C(libnccl.so.X.Y.Z) file in the usual library directories under O(sysfs_root) (nothing is
    loaded); the kernel is the running one. With O(capture_dir) the fields come from the files - the
    GPU ones from C(nvidia-smi.xml), the HCA firmware from C(ibstat.txt)'s C(Firmware version), the
    RDMA stack from an optional C(ofed_info.txt) (C(ofed_info -s)) and the kernel from the kernel
    log's C(Linux version) boot line; NCCL is not captured. A field that cannot be read is null.
requirements:
  - C(nvidia-smi) (the NVIDIA driver) on the node; without it every GPU check fails with the tool's message
  - C(dcgmi) (NVIDIA DCGM, its host engine running) for the DCGM diagnostic, only when O(dcgm_diag_level) is
    above V(0)
  - for the fabric checks, sysfs (C(sys/class/infiniband) under O(sysfs_root)), with C(ibstat)
    (infiniband-diags) and C(fi_info) (libfabric, where the EFA installer puts it) when installed
  - C(journalctl) or C(dmesg) for the Xid check (see O(kernel_log))
  - none of these with O(capture_dir), which only reads files
author:
  - raygate maintainers (@raygate)
extends_documentation_fragment:
  - raygate.cluster.attributes
  - raygate.cluster.attributes.INFO_MODULE
options:
  expected_gpus:
    description:
      - How many GPUs C(nvidia-smi) must show. Fewer fails, more warns. Not set, C(gpu_count) is V(skip).
    type: int
  driver_version:
    description:
      - Expected driver version, exact (V(550.90.07)) or a prefix ending at a dot (V(550) matches
        V(550.90.07), not V(5500.1)). Quote it in YAML.
    type: str
  cuda_version:
    description:
      - Expected CUDA version as C(nvidia-smi) reports it, with the same rule as O(driver_version).
        Quote it in YAML (V("12.10") is not V(12.1)).
    type: str
  require_persistence:
    description: Fail when a GPU does not have persistence mode enabled.
    type: bool
    default: true
  require_ecc:
    description: Fail when a GPU does not have ECC enabled.
    type: bool
    default: true
  ecc_correctable_max:
    description:
      - Most volatile (since the driver loaded) correctable ECC errors allowed per GPU before
        C(ecc_correctable_sram) or C(ecc_correctable_dram) warn (fail with O(fail_on_ecc_correctable)).
      - SRAM (L1/L2 cache, register file) errors are rare on a healthy GPU and NVIDIA tracks their rate
        (Xid 92, the driver's SRAM threshold flag, which also trips the SRAM check), so the default is low.
        HBM corrects single-bit errors routinely and row remapping retires bad rows, so the DRAM default
        only catches a stack that is clearly failing.
    type: dict
    suboptions:
      sram:
        description: Maximum volatile SRAM correctable errors per GPU.
        type: int
        default: 10
      dram:
        description: Maximum volatile DRAM correctable errors per GPU.
        type: int
        default: 1000
  fail_on_ecc_correctable:
    description: Make correctable ECC errors above O(ecc_correctable_max) fail instead of warn.
    type: bool
    default: false
  xid_window:
    description:
      - Only Xid errors of the last this many seconds count. V(0) counts the whole log (journal and
        dmesg - since boot). Against the clock of the node, or with O(capture_dir) against the newest
        timestamp in the captured kernel log. Lines without a timestamp always count.
    type: int
    default: 0
  xid_fatal:
    description:
      - Xid numbers that fail the node. The default follows NVIDIA's Xid catalog (a reset, reboot or
        service is required).
    type: list
    elements: int
    default: [48, 61, 62, 63, 64, 69, 74, 79, 92, 95, 119, 120, 140]
  xid_warn:
    description:
      - Xid numbers known to be application faults (the catalog says restart the application); they
        warn. An Xid in neither list also warns, labelled unlisted.
    type: list
    elements: int
    default: [13, 31, 43, 45, 94]
  kernel_log:
    description:
      - Where Xid errors are read. V(auto) reads C(journalctl -k -b --no-pager -o short-monotonic)
        when the journal has kernel entries, else C(dmesg). V(journal) and V(dmesg) force one, an
        absolute path reads that file (for example V(/var/log/kern.log)). Ignored with O(capture_dir).
    type: str
    default: auto
  check_nvlink:
    description: Read C(nvidia-smi nvlink -s); a down or inactive link fails. Skips when the GPUs have no NVLink.
    type: bool
    default: true
  check_pcie:
    description:
      - Compare each GPU's PCIe link with its maximum. A narrower link fails; a lower generation only
        warns, since GPUs lower it themselves when idle.
      - Some virtualised PCIe instances report a narrower link than the GPU's maximum by design
        (for example x8 of x16); set V(false) there.
    type: bool
    default: true
  check_throttle:
    description:
      - Fail when a hardware slowdown, hardware thermal slowdown or software thermal slowdown is active.
        A software power cap is normal and passes.
    type: bool
    default: true
  check_fabric_manager:
    description:
      - Whether the NVSwitch fabric of every GPU must be C(Completed)/C(Success) (the Fabric Manager
        trained it). V(auto) checks only where C(nvidia-smi) reports a fabric state (NVSwitch
        systems), V(yes) always (no fabric state fails), V(no) never.
    type: str
    default: auto
  dcgm_diag_level:
    description:
      - Run C(dcgmi diag -r LEVEL -j) (1 quick, 2 medium, 3 long; give level 3 a large O(timeout)).
        V(0) does not run it. When C(dcgmi) is missing the check fails.
    type: int
    choices: [0, 1, 2, 3]
    default: 0
  fabric:
    description:
      - The RDMA fabric this node must have. V(auto) takes what sysfs shows, V(none) skips the fabric
        and GPUDirect RDMA checks.
    type: str
    choices: [auto, efa, ib, roce, none]
    default: auto
  expected_ports:
    description:
      - Fail when fewer RDMA ports are active. Not set, the check fails only when an RDMA fabric has
        no active port, and warns when some are down.
    type: int
  expected_port_rate_gbps:
    description: Fail when an active RDMA port runs slower than this many Gb/s.
    type: int
  require_gdr:
    description:
      - On an RDMA fabric, fail without GPUDirect RDMA - either the C(nvidia_peermem) module
        (C(<sysfs_root>/sys/module/nvidia_peermem)) or dma-buf (the open NVIDIA kernel module per
        C(<sysfs_root>/proc/driver/nvidia/version), on Linux 5.12 or newer).
    type: bool
    default: true
  sysfs_root:
    description:
      - Root under which C(sys/), C(proc/driver/nvidia) and the library directories searched for
        C(libnccl.so.X.Y.Z) are read (a simulated tree in the sandbox).
    type: path
    default: /
  capture_dir:
    description:
      - Judge files captured earlier in this directory instead of running anything (see the description
        for the file names). Nothing else is required, so
        C(ansible localhost -m raygate.cluster.gpu_health -a capture_dir=/tmp/node7) works.
    type: path
  textfile_dir:
    description:
      - A directory whose existence is reported as RV(textfile_dir_exists). The raygate role passes
        node_exporter's textfile collector directory, and writes the node's health metrics there only
        if it exists. This saves a separate C(stat) round trip per node.
    type: path
  nvidia_smi:
    description: The C(nvidia-smi) binary (name on PATH or absolute path).
    type: str
    default: nvidia-smi
  dcgmi:
    description: The C(dcgmi) binary (name on PATH or absolute path).
    type: str
    default: dcgmi
  timeout:
    description: Seconds each command may run.
    type: int
    default: 120
notes:
  - Capture a node for later judging with
    C(nvidia-smi -q -x > nvidia-smi.xml), C(nvidia-smi nvlink -s > nvlink.txt),
    C(journalctl -k -b -o short-monotonic > kern.log) (or C(dmesg > dmesg.txt)),
    C(dcgmi diag -r 1 -j > dcgmi-diag.json), C(ibstat > ibstat.txt) and
    C(fi_info -p efa -t FI_EP_RDM > fi_info.txt).
seealso:
  - name: NVIDIA Xid errors
    description: The Xid catalog the default fatal and warn lists follow.
    link: https://docs.nvidia.com/deploy/xid-errors/
"""

EXAMPLES = r"""
- name: Check an 8-GPU InfiniBand node
  raygate.cluster.gpu_health:
    expected_gpus: 8
    driver_version: "550"
    fabric: ib
    expected_ports: 8
    expected_port_rate_gbps: 400
    xid_window: 86400
  register: gpu

- name: Leave the node out when it is unhealthy
  ansible.builtin.debug:
    msg: "{{ gpu.reasons }}"
  when: not gpu.healthy

- name: Add a short DCGM diagnostic and read Xids from a syslog file
  raygate.cluster.gpu_health:
    expected_gpus: 8
    dcgm_diag_level: 1
    kernel_log: /var/log/kern.log
    timeout: 600

# On the node, first:
#   mkdir /tmp/node7 && cd /tmp/node7 && nvidia-smi -q -x > nvidia-smi.xml &&
#   nvidia-smi nvlink -s > nvlink.txt && journalctl -k -b -o short-monotonic > kern.log &&
#   dcgmi diag -r 1 -j > dcgmi-diag.json; ibstat > ibstat.txt; fi_info -p efa -t FI_EP_RDM > fi_info.txt
# then anywhere:  ansible localhost -m raygate.cluster.gpu_health -a capture_dir=/tmp/node7
- name: Judge files captured on a node (nvidia-smi.xml, nvlink.txt, kern.log, dcgmi-diag.json, ibstat.txt, fi_info.txt)
  raygate.cluster.gpu_health:
    capture_dir: /tmp/node7
    expected_gpus: 8
"""

RETURN = r"""
checks:
  description: One result per check, always all twenty, in the order listed in the description.
  returned: always
  type: list
  elements: dict
  sample:
    - {name: remapped_rows_pending, status: fail, value: 1, threshold: 0,
       detail: "row remapping pending (reset the GPU to apply it): GPU 3"}
    - {name: nvlink, status: pass, value: 0, threshold: 0, detail: "18 NVLink links up on each of 8 GPUs"}
verdict:
  description: V(fail) if any check failed, else V(warn) if any warned, else V(pass).
  returned: always
  type: str
  sample: fail
healthy:
  description: Whether the node may take work (RV(verdict) is not V(fail)).
  returned: always
  type: bool
  sample: false
reasons:
  description: "Each failed check as C(name: detail)."
  returned: always
  type: list
  elements: str
  sample: ["remapped_rows_pending: row remapping pending (reset the GPU to apply it): GPU 3"]
warn_reasons:
  description: "Each check that warned as C(name: detail)."
  returned: always
  type: list
  elements: str
  sample: ["xid: Xid 13 [application] on GPU 0 (0000:18:00): Graphics SM Warp Exception"]
gpus:
  description: The GPUs C(nvidia-smi) showed (empty when it failed or was not captured).
  returned: always
  type: list
  elements: dict
  sample: [{index: 0, name: NVIDIA H100 80GB HBM3, uuid: GPU-5e3a..., pci_bus_id: "00000000:18:00.0"}]
driver_version:
  description: The driver version C(nvidia-smi) reported, or null.
  returned: always
  type: str
  sample: 550.90.07
cuda_version:
  description: The CUDA version C(nvidia-smi) reported, or null.
  returned: always
  type: str
  sample: "12.4"
textfile_dir_exists:
  description: Whether O(textfile_dir) is a directory on the node.
  returned: when O(textfile_dir) is given
  type: bool
  sample: false
source:
  description: V(live) (read on this node now) or V(capture) (files in O(capture_dir)).
  returned: always
  type: str
  sample: live
checked_at:
  description: When the node was checked (epoch seconds).
  returned: always
  type: float
  sample: 1763719201.5
kernel_log:
  description: Where the Xid errors were read (null when not read).
  returned: always
  type: str
  sample: journal since boot
fingerprint:
  description:
    - The node's versions, as the fleet view of M(raygate.cluster.health_report) compares them.
      A field that could not be read is null; the set-valued ones are sorted lists of the distinct values.
  returned: always
  type: dict
  version_added: 0.4.0
  contains:
    gpu_model:
      description: The distinct GPU product names.
      type: list
      elements: str
      returned: always
      sample: [NVIDIA H100 80GB HBM3]
    gpu_count:
      description: How many GPUs C(nvidia-smi) listed.
      type: int
      returned: always
      sample: 8
    driver:
      description: The driver version.
      type: str
      returned: always
      sample: 550.90.07
    cuda:
      description: The CUDA version the driver reports.
      type: str
      returned: always
      sample: "12.4"
    vbios:
      description: The distinct VBIOS versions of the GPUs.
      type: list
      elements: str
      returned: always
      sample: [96.00.74.00.0D]
    pcie_link:
      description: The distinct PCIe link widths of the GPUs, as C(x<current>/x<max>).
      type: list
      elements: str
      returned: always
      sample: [x16/x16]
    hca_firmware:
      description: The distinct firmware versions of the RDMA adapters.
      type: list
      elements: str
      returned: always
      sample: [28.39.1002]
    rdma_stack:
      description: C(ofed_info -s) without its colon, or C(rdma-core <package version>).
      type: str
      returned: always
      sample: MLNX_OFED_LINUX-23.10-0.5.5.0
    nccl:
      description: The distinct versions of the C(libnccl.so.X.Y.Z) files found.
      type: list
      elements: str
      returned: always
      sample: [2.21.5]
    kernel:
      description: The kernel release.
      type: str
      returned: always
      sample: 6.1.0-18-amd64
fabric:
  description: >-
    The RDMA fabric found (C(fabric), C(active_ports), C(down_ports), C(rate_gbps), C(warnings)),
    or null when not checked or not captured.
  returned: always
  type: dict
  sample: {fabric: ib, active_ports: ["mlx5_0:1"], down_ports: [], rate_gbps: {"mlx5_0:1": 400.0}, warnings: []}
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.raygate.cluster.plugins.module_utils import fabric as fab
from ansible_collections.raygate.cluster.plugins.module_utils import fingerprint as fp
from ansible_collections.raygate.cluster.plugins.module_utils import gpu_checks as gc
from ansible_collections.raygate.cluster.plugins.module_utils import gpu_parsers as gp
from ansible_collections.raygate.cluster.plugins.module_utils._runner import CommandError, CommandRunner

CAPTURE_FILES = {
    "nvsmi": "nvidia-smi.xml",
    "nvlink": "nvlink.txt",
    "kernel": ("kern.log", "dmesg.txt"),
    "dcgm": "dcgmi-diag.json",
    "ibstat": "ibstat.txt",
    "fi_info": "fi_info.txt",
    "ofed_info": "ofed_info.txt",
}
KERNEL_LOG_MODES = ("auto", "journal", "dmesg")
JOURNAL_ARGS = ["-k", "-b", "--no-pager", "-o", "short-monotonic"]
YES = ("yes", "true", "on", "1")
NO = ("no", "false", "off", "0")


# Seams for the tests: the clocks and the running kernel.
def _now():
    return time.time()


def _uptime():
    try:
        with open("/proc/uptime") as fh:
            return float(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _kernel_release():
    return os.uname().release


def _first_line(*texts):
    for text in texts:
        for line in (text or "").splitlines():
            if line.strip():
                return line.strip()[:300]
    return ""


def _read(path):
    """(text, error): the whole file, or None and why not."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(), None
    except OSError as exc:
        return None, "cannot read %s: %s" % (path, exc.strerror or exc)


def _xid_lines(path):
    """(text, error): only the lines of a possibly huge log file that can hold an Xid."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return "".join(line for line in fh if "Xid" in line), None
    except OSError as exc:
        return None, "cannot read %s: %s" % (path, exc.strerror or exc)


def _kernel_banner(path):
    """The kernel release of a captured kernel log's boot line, reading no further than it."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if "Linux version" in line:
                    return fp.kernel_from_log(line)
    except OSError:
        pass
    return None


def _window_scope(label, window):
    return "%s, last %d s" % (label, window) if window else label


class Live:
    """Reads the node now, through the command runner."""

    def __init__(self, params, runner):
        self.p = params
        self.runner = runner

    def run(self, args):
        """(rc, out, err), or (None, '', message) when it cannot run."""
        try:
            return self.runner.run(args)
        except CommandError as exc:
            return None, "", str(exc)

    def nvsmi(self, ev):
        name = self.p["nvidia_smi"]
        path = self.runner.which(name)
        if path is None:
            ev["nvsmi_error"] = "%s not found: no NVIDIA driver tools on this node" % name
            return None
        rc, out, err = self.run([path, "-q", "-x"])
        parsed = None
        if rc is not None:
            try:
                parsed = gp.parse_nvsmi_xml(out)
            except ValueError:
                parsed = None
        if parsed is None or (rc != 0 and not parsed["gpus"]):
            shown = "rc %s" % rc if rc is not None else "not run"
            ev["nvsmi_error"] = "nvidia-smi -q -x failed (%s): %s" % (shown, _first_line(out, err) or "no output")
            return None
        ev["nvsmi"] = parsed
        return path

    def nvlink(self, ev, path):
        rc, out, err = self.run([path, "nvlink", "-s"])
        if rc != 0:
            shown = "rc %s" % rc if rc is not None else "not run"
            ev["nvlink_error"] = "nvidia-smi nvlink -s failed (%s): %s" % (shown, _first_line(err, out) or "no output")
            return
        ev["nvlink"] = gp.parse_nvlink_status(out)

    def journal(self):
        path = self.runner.which("journalctl")
        if path is None:
            return None, "journalctl not found"
        rc, out, err = self.run([path] + JOURNAL_ARGS)
        if rc != 0:
            return None, "journalctl -k -b failed (%s): %s" % (rc, _first_line(err, out) or "no output")
        if not any(line.strip() and not line.startswith("-- ") for line in out.splitlines()):
            return None, "the journal has no kernel entries for this boot"
        return out, None

    def dmesg(self):
        path = self.runner.which("dmesg")
        if path is None:
            return None, "dmesg not found"
        rc, out, err = self.run([path])
        if rc != 0:
            return None, "dmesg failed (%s): %s" % (rc, _first_line(err, out) or "no output")
        return out, None

    def kernel(self, ev):
        mode, window = self.p["kernel_log"], self.p["xid_window"]
        text = error = None
        label = mode
        if mode in ("auto", "journal"):
            text, error = self.journal()
            label = "journal since boot"
        if text is None and mode in ("auto", "dmesg"):
            journal_error = error
            text, error = self.dmesg()
            label = "dmesg since boot"
            if error and journal_error:
                error = "%s; %s" % (journal_error, error)
        if mode not in KERNEL_LOG_MODES:
            text, error = _xid_lines(mode)
        if text is None:
            ev["xid_error"] = error
            return None
        now = _now()
        ev["xids"] = gc.xids_in_window(gp.kernel_log_xids(text, now), window, now, _uptime())
        ev["xid_scope"] = _window_scope(label, window)
        return label

    def dcgm(self, ev):
        level = self.p["dcgm_diag_level"]
        ev["dcgm_level"] = level
        if level == 0:
            return
        if ev.get("nvsmi_error"):
            ev["dcgm_error"] = "not run: " + ev["nvsmi_error"]
            return
        name = self.p["dcgmi"]
        path = self.runner.which(name)
        if path is None:
            ev["dcgm_error"] = (
                "%s not found: dcgm_diag_level=%d needs NVIDIA DCGM (dcgmi and a running nv-hostengine), "
                "or set dcgm_diag_level=0" % (name, level)
            )
            return
        rc, out, err = self.run([path, "diag", "-r", str(level), "-j"])
        try:
            parsed = gp.parse_dcgmi_diag(out) if rc is not None else None
        except ValueError:
            parsed = None
        if parsed is None:
            shown = "rc %s" % rc if rc is not None else "not run"
            ev["dcgm_error"] = "dcgmi diag -r %d failed (%s): %s" % (level, shown, _first_line(err, out) or "no output")
            return
        ev["dcgm"] = parsed

    def fabric(self, ev):
        if self.p["fabric"] == "none":
            return
        ev["fabric"] = fab.gather(self.runner, self.p["sysfs_root"])
        root = self.p["sysfs_root"]
        driver, _error = _read(os.path.join(root, "proc", "driver", "nvidia", "version"))
        ev["gdr"] = {
            "peermem": os.path.exists(os.path.join(root, "sys", "module", "nvidia_peermem")),
            "driver": driver,
            "kernel": _kernel_release(),
        }

    def gather(self):
        ev = {}
        path = self.nvsmi(ev)
        if path and self.p["check_nvlink"]:
            self.nvlink(ev, path)
        label = self.kernel(ev)
        self.dcgm(ev)
        self.fabric(ev)
        found = fp.read_live(self.runner, self.p["sysfs_root"], rdma=self.p["fabric"] != "none")
        ev["fingerprint"] = fp.build(ev.get("nvsmi"), kernel=_kernel_release(), **found)
        return ev, label


class Capture:
    """Judges files captured earlier in one directory; runs nothing."""

    def __init__(self, params):
        self.p = params
        self.dir = params["capture_dir"]

    def file(self, name):
        path = os.path.join(self.dir, name)
        if not os.path.isfile(path):
            return None, None
        return _read(path)

    def gather(self):
        ev = {"dcgm_level": None}
        text, error = self.file(CAPTURE_FILES["nvsmi"])
        if text is not None:
            try:
                ev["nvsmi"] = gp.parse_nvsmi_xml(text)
            except ValueError:
                error = "nvidia-smi.xml is not nvidia-smi XML: %s" % (_first_line(text) or "empty")
        ev["nvsmi_error"] = error
        text, ev["nvlink_error"] = self.file(CAPTURE_FILES["nvlink"])
        if text is not None:
            ev["nvlink"] = gp.parse_nvlink_status(text)
        label = self.kernel(ev)
        text, error = self.file(CAPTURE_FILES["dcgm"])
        if text is not None:
            try:
                ev["dcgm"] = gp.parse_dcgmi_diag(text)
            except ValueError:
                error = "dcgmi-diag.json holds no dcgmi diag result: %s" % (_first_line(text) or "empty")
        ev["dcgm_error"] = error
        ibstat, _e1 = self.file(CAPTURE_FILES["ibstat"])
        fi_info, _e2 = self.file(CAPTURE_FILES["fi_info"])
        if ibstat is not None or fi_info is not None:
            devices = gc.devices_from_tools(
                fab.parse_ibstat(ibstat) if ibstat is not None else None,
                fab.parse_fi_info(fi_info) if fi_info is not None else None,
            )
            found = fab.detect(devices)
            # A capture has no GID tables: detect's RoCE GID warning would be noise here.
            found["warnings"] = [w for w in found["warnings"] if "NCCL_IB_GID_INDEX" not in w]
            ev["fabric"] = found
        ofed, _e3 = self.file(CAPTURE_FILES["ofed_info"])
        ev["fingerprint"] = fp.build(
            ev.get("nvsmi"),
            hca_firmware=fp.hca_firmware_from_ibstat(ibstat),
            rdma_stack=fp.parse_ofed_info(ofed),
            kernel=self.kernel_release(),
        )
        return ev, label

    def kernel_release(self):
        for name in CAPTURE_FILES["kernel"]:
            path = os.path.join(self.dir, name)
            if os.path.isfile(path):
                return _kernel_banner(path)
        return None

    def kernel(self, ev):
        for name in CAPTURE_FILES["kernel"]:
            text, error = self.file(name)
            if text is None and error is None:
                continue
            if text is None:
                ev["xid_error"] = error
                return None
            window = self.p["xid_window"]
            now = _now()
            newest = gp.newest_timestamps(text, now)
            xids = gp.kernel_log_xids(text, now)
            ev["xids"] = gc.xids_in_window(xids, window, newest["wall"], newest["boot"])
            scope = name if not window else "%s, last %d s before its newest line" % (name, window)
            ev["xid_scope"] = scope
            return name
        return None


def gpu_summary(nvsmi):
    if not nvsmi:
        return []
    keys = ("index", "name", "uuid", "pci_bus_id")
    return [dict((k, g.get(k)) for k in keys) for g in nvsmi["gpus"]]


def fabric_summary(info):
    if info is None:
        return None
    keys = ("fabric", "active_ports", "down_ports", "rate_gbps", "warnings")
    return dict((k, info.get(k)) for k in keys)


def normalize_fabric_manager(value):
    low = str(value).strip().lower()
    if low in YES:
        return "yes"
    if low in NO:
        return "no"
    return low


def validate(module):
    p = module.params
    if p["capture_dir"] is not None and not os.path.isdir(p["capture_dir"]):
        module.fail_json(msg="capture_dir %s is not a directory" % p["capture_dir"])
    log = p["kernel_log"]
    if log not in KERNEL_LOG_MODES and not os.path.isabs(log):
        module.fail_json(msg="kernel_log must be auto, journal, dmesg or an absolute path, not %r" % log)
    p["check_fabric_manager"] = normalize_fabric_manager(p["check_fabric_manager"])
    if p["check_fabric_manager"] not in ("auto", "yes", "no"):
        module.fail_json(msg="check_fabric_manager must be auto, yes or no, not %r" % p["check_fabric_manager"])
    for name in ("expected_gpus", "expected_ports", "xid_window"):
        if p[name] is not None and p[name] < 0:
            module.fail_json(msg="%s must be 0 or more, not %d" % (name, p[name]))
    for name in ("expected_port_rate_gbps", "timeout"):
        if p[name] is not None and p[name] <= 0:
            module.fail_json(msg="%s must be more than 0, not %d" % (name, p[name]))
    for kind, value in (p["ecc_correctable_max"] or {}).items():
        if value is not None and value < 0:
            module.fail_json(msg="ecc_correctable_max.%s must be 0 or more, not %d" % (kind, value))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            expected_gpus=dict(type="int"),
            driver_version=dict(type="str"),
            cuda_version=dict(type="str"),
            require_persistence=dict(type="bool", default=True),
            require_ecc=dict(type="bool", default=True),
            ecc_correctable_max=dict(
                type="dict",
                apply_defaults=True,
                options=dict(
                    sram=dict(type="int", default=gc.ECC_CORRECTABLE_MAX_DEFAULT["sram"]),
                    dram=dict(type="int", default=gc.ECC_CORRECTABLE_MAX_DEFAULT["dram"]),
                ),
            ),
            fail_on_ecc_correctable=dict(type="bool", default=False),
            xid_window=dict(type="int", default=0),
            xid_fatal=dict(type="list", elements="int", default=list(gp.XID_FATAL_DEFAULT)),
            xid_warn=dict(type="list", elements="int", default=list(gp.XID_WARN_DEFAULT)),
            kernel_log=dict(type="str", default="auto"),
            check_nvlink=dict(type="bool", default=True),
            check_pcie=dict(type="bool", default=True),
            check_throttle=dict(type="bool", default=True),
            check_fabric_manager=dict(type="str", default="auto"),
            dcgm_diag_level=dict(type="int", choices=[0, 1, 2, 3], default=0),
            fabric=dict(type="str", choices=list(gc.FABRIC_CHOICES), default="auto"),
            expected_ports=dict(type="int"),
            expected_port_rate_gbps=dict(type="int"),
            require_gdr=dict(type="bool", default=True),
            sysfs_root=dict(type="path", default="/"),
            capture_dir=dict(type="path"),
            textfile_dir=dict(type="path"),
            nvidia_smi=dict(type="str", default="nvidia-smi"),
            dcgmi=dict(type="str", default="dcgmi"),
            timeout=dict(type="int", default=120),
        ),
        supports_check_mode=True,
    )
    validate(module)
    p = module.params
    if p["capture_dir"] is not None:
        source = "capture"
        evidence, label = Capture(p).gather()
    else:
        source = "live"
        evidence, label = Live(p, CommandRunner(timeout=p["timeout"])).gather()
    results = gc.evaluate(evidence, p)
    nvsmi = evidence.get("nvsmi")
    extra = {}
    if p["textfile_dir"]:
        extra["textfile_dir_exists"] = os.path.isdir(p["textfile_dir"])
    module.exit_json(
        changed=False,
        checks=results,
        gpus=gpu_summary(nvsmi),
        driver_version=(nvsmi or {}).get("driver_version"),
        cuda_version=(nvsmi or {}).get("cuda_version"),
        source=source,
        checked_at=_now(),
        kernel_log=label,
        fabric=fabric_summary(evidence.get("fabric")),
        fingerprint=evidence.get("fingerprint") or fp.empty(),
        **gc.summarize(results),
        **extra,
    )


if __name__ == "__main__":
    main()
