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
  - The kernel log gives three checks - C(xid) (GPU Xid errors), C(sxid) (NVSwitch SXid errors)
    and C(kernel_errors) (GPU driver errors without an Xid number, such as a GPU that fell off the
    bus, C(RmInitAdapter failed) or a GSP timeout, and lines matching O(kernel_deny)). Each code is
    judged by a catalogue built from NVIDIA's Xid catalog and Fabric Manager guide, which gives it a
    severity and a recommended action; repeats count as one finding per code and device (see
    RV(kernel_findings)).
  - Returns one result per check, each C({name, status, detail, value, threshold}) with status
    V(pass), V(warn), V(fail) or V(skip), in this fixed order and always all of them -
    C(gpu_count), C(driver_version), C(cuda_version), C(persistence_mode), C(ecc_mode),
    C(ecc_uncorrectable_volatile), C(ecc_uncorrectable_aggregate), C(ecc_correctable_sram),
    C(ecc_correctable_dram), C(retired_pages_pending), C(remapped_rows_pending),
    C(remapped_rows_failure), C(xid), C(sxid), C(kernel_errors), C(nvlink), C(pcie_link), C(thermal_throttle),
    C(fabric_manager), C(dcgm_diag), C(fabric_ports), C(fabric_errors), C(link_flaps), C(gpudirect_rdma),
    C(device_access).
  - The node is unhealthy (RV(healthy=false)) when any check fails. A missing or failing
    C(nvidia-smi) (no driver) fails every GPU check with the tool's message; the module itself
    fails only on bad arguments.
  - C(fabric_errors) and C(link_flaps) judge how much the RDMA port error counters
    (C(<sysfs_root>/sys/class/infiniband/*/ports/*/counters) and C(hw_counters)) grew in the last
    O(fabric_window) seconds. Counters only grow, so each run saves a snapshot of them with its time
    in O(fabric_state_file) and compares with the snapshot taken nearest before the window's start.
    Without one (the first run, or no O(fabric_state_file)) the growth is counted from zero at boot,
    which is exact when the node booted within the window; otherwise the errors may be older than the
    window, and a breach only warns. C(link_flaps) counts the times a port's C(link_downed) counter grew (the
    port training failed and the link went down).
  - Reads only; never reports a change. The one thing it writes is its counter snapshot in
    O(fabric_state_file), bookkeeping that is not reported as a change and is skipped in check
    mode. Check mode runs exactly the same reads.
  - C(device_access), with O(service_user), says whether that account (the one Ray runs as) can read
    and write the NVIDIA device files (C(nvidiactl), C(nvidia-uvm), C(nvidiaN) in C(<sysfs_root>/dev)),
    as CUDA must. A short child process started as the account (its uid, gid and groups) asks the
    kernel (C(access(2))), so ACLs count and the driver is never entered; this needs the module to run
    as root or as the account. The fix names the device files' group or the driver's
    C(NVreg_DeviceFileMode), whose value C(<sysfs_root>/proc/driver/nvidia/params) gives. Only files
    present are judged (the set-uid C(nvidia-modprobe) makes missing ones when CUDA starts).
  - With O(capture_dir) it runs nothing and judges files captured earlier on a node -
    C(nvidia-smi.xml) (C(nvidia-smi -q -x)), C(nvlink.txt) (C(nvidia-smi nvlink -s)),
    C(kern.log) or C(dmesg.txt) (the kernel log), C(dcgmi-diag.json) (C(dcgmi diag -r N -j)),
    C(ibstat.txt) (C(ibstat)) and C(fi_info.txt) (C(fi_info -p efa -t FI_EP_RDM)). A missing file
    makes its checks skip with "not captured"; C(gpudirect_rdma), C(fabric_errors) and C(link_flaps)
    are not captured.
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
  - C(journalctl) or C(dmesg) for the kernel log checks (see O(kernel_log))
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
      - Only kernel log lines (Xid, SXid, driver errors, O(kernel_deny) matches) of the last this many
        seconds count. V(0) counts the whole log (journal and dmesg - since boot). Against the clock of
        the node, or with O(capture_dir) against the newest timestamp in the captured kernel log. Lines
        without a timestamp always count.
    type: int
    default: 0
  xid_fatal:
    description:
      - Xid numbers that fail the node, on top of the catalogue (which already fails those NVIDIA
        says need a GPU reset, a reboot or service, for example 48, 63, 74, 79, 95, 119).
      - An Xid the driver says was caused by an earlier one (C(caused by previous Xid N)) is judged
        as N, so list N here.
    type: list
    elements: int
    default: []
  xid_warn:
    description:
      - Xid numbers that at most warn, even where the catalogue fails them (a number also in
        O(xid_fatal) fails). Application faults (13, 31, 43, 45, ...) already only warn; an Xid the
        catalogue does not list warns too, labelled unlisted.
    type: list
    elements: int
    default: []
  kernel_allow:
    version_added: 0.5.0
    description:
      - Regular expressions (Python C(re), searched anywhere in the line); a kernel log line that
        matches one is never a finding, not even an Xid. For known noise, for example
        V(nvidia-peermem nv_get_p2p_free_callback).
      - A bad expression fails the module before anything runs.
    type: list
    elements: str
    default: []
  kernel_deny:
    version_added: 0.5.0
    description:
      - Regular expressions; a kernel log line that matches one (and no O(kernel_allow) entry) fails
        C(kernel_errors), even without an Xid. For faults the catalogue does not know, for example
        V(mlx5_core .*fatal error) (an HCA firmware failure).
      - A bad expression fails the module before anything runs.
    type: list
    elements: str
    default: []
  kernel_log:
    description:
      - Where the kernel log is read. V(auto) reads C(journalctl -k -b --no-pager -o short-monotonic)
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
  fabric_error_thresholds:
    version_added: 0.5.0
    description:
      - Per RDMA port counter, the most growth allowed in O(fabric_window) before C(fabric_errors)
        (or, for C(link_downed), C(link_flaps)) warns or fails; V(null) reads the counter without
        judging it. Given keys override the defaults; unknown keys are refused.
      - A count in the window, except C(symbol_error), C(link_error_recovery), C(port_rcv_errors),
        C(port_xmit_discards), C(local_ack_timeout_err) and C(roce_slow_restart), which are a rate
        per hour over the measured interval (counted as at least an hour).
      - "Defaults, from NVIDIA NVSentinel's NIC health monitor and Azure's AzNHC - fail:
        C(symbol_error) 120/h (the IBTA bit error rate), C(link_downed) 4 (AzNHC fails at 5 flaps in
        24 h; 1 to 4 warn), C(local_link_integrity_errors) 0, C(excessive_buffer_overrun_errors) 0,
        EFA C(no_completion_cmds) 0. Warn: C(link_error_recovery) 300/h, C(port_rcv_errors) 36000/h,
        C(port_xmit_discards) 360000/h, C(local_ack_timeout_err) 3600/h, C(roce_slow_restart) 36000/h,
        C(rnr_nak_retry_err) 0, EFA C(rdma_read_wr_err), C(rdma_write_wr_err),
        C(retrans_timeout_events), C(unresponsive_remote_events), C(impaired_remote_conn_events) 0.
        Read, not judged - C(port_rcv_remote_physical_errors), C(port_rcv_switch_relay_errors),
        C(port_xmit_constraint_errors), C(port_rcv_constraint_errors), C(VL15_dropped),
        C(req_transport_retries_exceeded), C(packet_seq_err), C(out_of_sequence),
        C(implied_nak_seq_err), EFA C(rx_drops) and C(cmds_err)."
    type: dict
    default: {}
  fabric_window:
    version_added: 0.5.0
    description:
      - Seconds of counter history C(fabric_errors) and C(link_flaps) judge. V(0) judges the growth
        since boot. The default is AzNHC's link-flap window, a day.
    type: int
    default: 86400
  fabric_state_file:
    version_added: 0.5.0
    description:
      - A JSON file on the node holding earlier counter snapshots (time, boot id, counters of this
        boot, pruned to the window). Created with its directory when missing; a file that cannot be
        read is started again. Not set, nothing is written and every run counts from boot.
    type: path
  sysfs_root:
    description:
      - Root under which C(sys/), C(proc/driver/nvidia) and the library directories searched for
        C(libnccl.so.X.Y.Z) are read (a simulated tree in the sandbox).
    type: path
    default: /
  service_user:
    description:
      - The account Ray runs as (the role's C(raygate_user)); C(device_access) checks that it can open
        the NVIDIA device files. Not set or V(root), C(device_access) skips; an account that does not
        exist yet skips too.
    type: str
    version_added: 0.5.0
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
    description:
      - Seconds each command may run, except the quick C(nvidia-smi) queries (O(query_timeout)).
      - Size it for C(dcgmi diag) at O(dcgm_diag_level).
    type: int
    default: 120
  query_timeout:
    description:
      - Seconds C(nvidia-smi -q -x) and C(nvidia-smi nvlink -s) may run. On a GPU fallen off the bus
        C(nvidia-smi) never returns; past this bound it is killed, or left behind when even SIGKILL
        cannot end it, and C(gpu_count) fails with that as the root cause, naming the checks it
        prevented (C(dcgmi) is not run).
    type: int
    default: 30
    version_added: 0.5.0
notes:
  - The RDMA port counters are the kernel's (Linux C(Documentation/ABI/stable/sysfs-class-infiniband));
    a device without a port management agent reads C(N/A), which is not judged. A counter reset
    (C(perfquery -R), a driver reload) is seen as a smaller value, and growth counts again from zero.
  - Capture a node for later judging with
    C(nvidia-smi -q -x > nvidia-smi.xml), C(nvidia-smi nvlink -s > nvlink.txt),
    C(journalctl -k -b -o short-monotonic > kern.log) (or C(dmesg > dmesg.txt)),
    C(dcgmi diag -r 1 -j > dcgmi-diag.json), C(ibstat > ibstat.txt) and
    C(fi_info -p efa -t FI_EP_RDM > fi_info.txt).
seealso:
  - name: NVIDIA Xid catalog
    description: The Xid catalog the C(xid) check's catalogue follows.
    link: https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html
  - name: NVIDIA Fabric Manager user guide
    description: Its appendix D lists the NVSwitch SXid errors, fatal and non-fatal, the C(sxid) check judges by.
    link: https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/
  - name: NVSentinel NIC health monitor
    description: The counter thresholds most O(fabric_error_thresholds) defaults follow.
    link: https://docs.nvidia.com/nvsentinel/configuration/nic-health-monitor
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
    fabric_state_file: /var/lib/raygate/fabric-counters.json
  register: gpu


- name: Leave the node out when it is unhealthy
  ansible.builtin.debug:
    msg: "{{ gpu.reasons }}"
  when: not gpu.healthy

- name: Fail on fewer link flaps than AzNHC, and do not judge CRC errors
  raygate.cluster.gpu_health:
    fabric: ib
    fabric_state_file: /var/lib/raygate/fabric-counters.json
    fabric_error_thresholds:
      link_downed: 1
      port_rcv_errors: null

- name: Add a short DCGM diagnostic and read Xids from a syslog file
  raygate.cluster.gpu_health:
    expected_gpus: 8
    dcgm_diag_level: 1
    kernel_log: /var/log/kern.log
    timeout: 600

- name: Ignore a known noisy line, and fail on an HCA firmware error the catalogue does not know
  raygate.cluster.gpu_health:
    expected_gpus: 8
    xid_window: 86400
    kernel_allow:
      - "nvidia-peermem nv_get_p2p_free_callback:\\d+ ERROR detected invalid context"
    kernel_deny:
      - "mlx5_core .*fatal error"

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
  description: One result per check, always all twenty-two, in the order listed in the description.
  returned: always
  type: list
  elements: dict
  sample:
    - {name: remapped_rows_pending, status: fail, value: 1, threshold: 0,
       detail: "row remapping pending (reset the GPU to apply it): GPU 3"}
    - {name: nvlink, status: pass, value: 0, threshold: 0, detail: "18 NVLink links up on each of 8 GPUs"}
    - {name: link_flaps, status: fail, value: 6, threshold: 4, severity: do-not-allocate,
       detail: "mlx5_3:1 down 6 times in the last 24 h (more than 4 fails)",
       action: "reseat or replace the cable/transceiver of mlx5_3 port 1, then clear its counters (perfquery -R)"}
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
  description: Where the kernel log was read (null when not read).
  returned: always
  type: str
  sample: journal since boot
kernel_findings:
  description:
    - What the C(xid), C(sxid) and C(kernel_errors) checks found, one entry per code and device
      (repeats counted), each judged by the catalogue. Empty when the kernel log was not read.
    - C(check) (V(xid), V(sxid) or V(kernel_errors)), C(code) (the Xid or SXid number, or the kind of
      driver error - V(fallen_off_bus), V(gsp_timeout), V(gsp_init), V(init_failed), V(probe_failed),
      V(denied)), C(pci), C(gpu) (its nvidia-smi index, or null), C(count), C(first_seen) and
      C(last_seen) (timestamps in C(clock) - V(wall) epoch seconds or V(boot) seconds since boot -
      or null when undated), C(status) (V(fail) or V(warn)), C(severity), C(action) (the
      recommended remedy, or null), C(meaning), C(label), C(message) (the first line's text); for Xids
      C(cause) (the earlier Xid the driver blames, or null), for SXids C(switch) and C(links), for
      denied lines C(pattern).
  returned: always
  type: list
  elements: dict
  sample:
    - {check: xid, code: 45, cause: 149, pci: "0000:dc:00", gpu: 6, count: 2, first_seen: 1763718001.2,
       last_seen: 1763718002.9, clock: wall, status: fail, severity: do-not-allocate, action: reset the GPU,
       meaning: NVLink NETIR error, label: fatal, message: "Ch 00000001 caused by previous Xid 149"}
    - {check: kernel_errors, code: fallen_off_bus, pci: "0000:5d:00", gpu: 3, count: 1, first_seen: 14387.2,
       last_seen: 14387.2, clock: boot, status: fail, severity: do-not-allocate, action: reboot the node,
       meaning: "GPU has fallen off the bus (no Xid: the driver lost it, often at probe time)", label: fatal,
       message: "fallen off the bus and is not responding to commands."}
fingerprint:
  description:
    - The node's versions, as the fleet view of M(raygate.cluster.health_report) compares them.
      A field that could not be read is null; the set-valued ones are sorted lists of the distinct values.
  returned: always
  type: dict
  version_added: 0.5.0
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
fingerprint_hash:
  description:
    - A short, stable hash of RV(fingerprint) (12 hex digits of the SHA-256 of its canonical JSON, with
      sorted keys). Nodes with the same versions share it; any changed field changes it.
    - The raygate role starts a node that passed the health gate with it as the Ray node label
      C(raygate.io/fingerprint).
  returned: always
  type: str
  version_added: 0.5.0
  sample: 3f1c0d9e2a1b
fabric:
  description: >-
    The RDMA fabric found (C(fabric), C(active_ports), C(down_ports), C(rate_gbps), C(warnings)),
    or null when not checked or not captured.
  returned: always
  type: dict
  sample: {fabric: ib, active_ports: ["mlx5_0:1"], down_ports: [], rate_gbps: {"mlx5_0:1": 400.0}, warnings: []}
fabric_counters:
  description:
    - The RDMA port error counters that grew in the judged interval (C(grown), by C(device:port), or
      by device for device-wide ones), and the interval (C(since) in epoch seconds, C(span) in
      seconds; null when the boot time is unknown). Null when no counter was read.
  returned: always
  type: dict
  sample: {since: 1763632800.0, span: 86400.0, grown: {"mlx5_3:1": {symbol_error: 5400, link_downed: 6}}}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.raygate.cluster.plugins.module_utils.gate import gpu_health_step


def main():
    module = AnsibleModule(
        argument_spec=gpu_health_step.ARGUMENT_SPEC,
        supports_check_mode=True,
    )
    gpu_health_step.run(module)


if __name__ == "__main__":
    main()
