# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The recommended action for a failing or warning check that did not bring its own.

A check that knows more (an Xid from the catalogue, a fabric counter) sets ``action`` itself and
keeps it; the report fills the rest from DEFAULT_ACTIONS, keyed by check name, so every failing
or warning check in every report says what to do. A name may map to one text, or to one per
status (``fail``/``warn``) where a warning asks for less than a failure. Unknown names get
FALLBACK. Pure data and lookups (stdlib only).
"""

from __future__ import annotations

from ansible_collections.raygate.cluster.plugins.module_utils.checks import SEVERITIES

_RESET = "drain the node and reset the GPU (nvidia-smi -r -i <gpu>) or reboot it"
_RMA = "if it comes back after a reset, take the GPU out of service (RMA)"
_NCCL_NET = (
    "check the node's RDMA ports and cables (ibstat), nvidia_peermem and the NCCL environment "
    "(/etc/raygate/nccl.env); test it against a known-good partner (raygate_health_pair_partner)"
)

DEFAULT_ACTIONS = {
    # gpu_health
    "gpu_count": (
        "find the missing GPU (nvidia-smi -L, lspci | grep -i nvidia, the kernel log): reseat or replace it,"
        " or set raygate_num_gpus to what the node really has"
    ),
    "driver_version": "install the expected NVIDIA driver (or correct raygate_health_driver_version) and reboot",
    "cuda_version": (
        "the CUDA version comes with the driver: install the driver that provides it"
        " (or correct raygate_health_cuda_version)"
    ),
    "persistence_mode": "enable persistence: systemctl enable --now nvidia-persistenced (or nvidia-smi -pm 1)",
    "ecc_mode": "enable ECC (nvidia-smi -e 1), then reset the GPU or reboot",
    "ecc_uncorrectable_volatile": "%s; %s" % (_RESET, _RMA),
    "ecc_uncorrectable_aggregate": (
        "look at the remapped-rows and retired-pages checks; plan an RMA if the lifetime count keeps growing"
    ),
    "ecc_correctable_sram": {
        "warn": "watch the count over the next runs; SRAM errors that keep rising mean the GPU needs service",
        "fail": "%s; %s" % (_RESET, _RMA),
    },
    "ecc_correctable_dram": {
        "warn": "watch the count and the row remapping state; a steadily rising count means a failing memory stack",
        "fail": "%s; %s" % (_RESET, _RMA),
    },
    "retired_pages_pending": "%s to retire the pending pages" % _RESET,
    "remapped_rows_pending": "%s to apply the pending row remap" % _RESET,
    "remapped_rows_failure": "the GPU has no spare rows left: take it out of service (RMA)",
    "xid": (
        "look the Xid up in NVIDIA's catalogue (docs.nvidia.com/deploy/xid-errors); for a fatal one %s;"
        " repeated ones mean service" % _RESET
    ),
    "sxid": (
        "look the SXid up in the Fabric Manager guide's tables; for a fatal one reboot the node (it resets every"
        " GPU and NVSwitch); repeated ones mean the NVSwitch baseboard needs service"
    ),
    "kernel_errors": (
        "the driver lost or could not start a GPU: reboot the node; if it happens again, drain it and send the GPU"
        " for repair"
    ),
    "nvlink": "reset the GPUs or reboot; a link that stays down needs the NVLink/NVSwitch baseboard serviced",
    "pcie_link": {
        "warn": "a lower PCIe generation is normal for an idle GPU; if it persists under load, reseat the GPU or riser",
        "fail": "reseat the GPU or its riser and check the slot's BIOS settings; a link that stays narrow needs repair",
    },
    "thermal_throttle": "check the node's cooling (fans, airflow, inlet temperature) and power supply",
    "fabric_manager": (
        "start nvidia-fabricmanager (its version must match the driver's) and read its log; reboot if the"
        " fabric does not train"
    ),
    "dcgm_diag": (
        "read the failing DCGM test's message, run dcgmi diag -r 3 on the drained node and service the GPU it names"
    ),
    "fabric_ports": (
        "check the down or slow ports with ibstat: cable, transceiver, switch port, subnet manager; reseat or"
        " replace the link"
    ),
    "fabric_errors": (
        "the port's error counters grew: reseat or replace its cable or transceiver and check the switch port"
    ),
    "link_flaps": "the link keeps going down: replace the cable or transceiver, then check the switch port's log",
    "gpudirect_rdma": "load nvidia_peermem (modprobe nvidia_peermem), or use the open kernel module (dma-buf, 5.12+)",
    "device_access": (
        "let raygate_user open /dev/nvidia*: add it to their group (raygate_user_groups) or load the driver with"
        " NVreg_DeviceFileMode=0666"
    ),
    # nccl_test, single node
    "nccl_busbw": (
        "compare with a known-good node of the same model: check the GPUs' clocks and throttling, NVLink and"
        " the NCCL environment"
    ),
    "nccl_wrong": "wrong results mean a faulty GPU or link: drain the node and run dcgmi diag -r 3",
    "nccl_completed": "read the run's log_tail: fix the launch (binary, GPUs) or the GPU fault that aborted it",
    "nccl_fabric_errors": (
        "a port's error counters grew while nccl-tests ran: reseat or replace that port's cable or transceiver"
    ),
    "nccl_transport": "make NCCL use the RDMA transport: %s" % _NCCL_NET,
    # nccl_test, pairs
    "nccl_pair_busbw": "the network between the pair is slow: %s" % _NCCL_NET,
    "nccl_pair_wrong": "wrong results across the pair mean a faulty GPU or link: run dcgmi diag -r 3 on both nodes",
    "nccl_pair_completed": "read the pair's log_tail: fix mpirun's launch (SSH between the nodes, the binary, ports)",
    "nccl_pair_transport": "make NCCL use the RDMA transport between nodes: %s" % _NCCL_NET,
    "nccl_pair_isolation": "this node is the culprit of failing pairs: %s" % _NCCL_NET,
    # made by the report itself
    "reachable": "check the node's power, network and SSH (ansible -m ping); it counts as failed until it answers",
    "run": "read the failed step's error in the report, fix it on the node, then run health.yml again",
    "checks": "the checks did not run on this node: read the gate steps' output for it",
    "fleet_drift": (
        "bring the node to the fleet's versions (or pin the intended ones with raygate_health_fleet_expect)"
    ),
}
FALLBACK = "read the check's detail, fix the node, then run health.yml again"


def default_action(name, status="fail"):
    """The recommended action for a check ``name`` in ``status`` (fail or warn); FALLBACK if unknown."""
    action = DEFAULT_ACTIONS.get(name, FALLBACK)
    if isinstance(action, dict):
        action = action.get(status) or action.get("fail") or FALLBACK
    return action


def severity_rank(severity):
    """Higher is worse: do-not-allocate 3, degraded 2, info 1, none 0."""
    if severity not in SEVERITIES:
        return 0
    return len(SEVERITIES) - SEVERITIES.index(severity)


def worst_severity(checks):
    """The worst severity among ``checks`` that failed or warned, or None."""
    ranked = [c.get("severity") for c in checks if c.get("status") in ("fail", "warn") and c.get("severity")]
    if not ranked:
        return None
    return max(ranked, key=severity_rank)
