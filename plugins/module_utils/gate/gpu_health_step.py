# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The gpu_health module's options and its run: validate the options, gather the evidence with a
collector of gate/collectors.py (live or captured), judge it with gate/gpu_checks.py, answer."""

from __future__ import annotations

import os

from ansible_collections.raygate.cluster.plugins.module_utils._runner import QUERY_TIMEOUT, CommandRunner
from ansible_collections.raygate.cluster.plugins.module_utils.gate import collectors
from ansible_collections.raygate.cluster.plugins.module_utils.gate import fabric_counters as fc
from ansible_collections.raygate.cluster.plugins.module_utils.gate import fingerprint as fp
from ansible_collections.raygate.cluster.plugins.module_utils.gate import gpu_checks as gc
from ansible_collections.raygate.cluster.plugins.module_utils.gate import gpu_parsers as gp

YES = ("yes", "true", "on", "1")
NO = ("no", "false", "off", "0")

# Mirrors the options in plugins/modules/gpu_health.py's DOCUMENTATION.
ARGUMENT_SPEC = dict(
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
    xid_fatal=dict(type="list", elements="int", default=[]),
    xid_warn=dict(type="list", elements="int", default=[]),
    kernel_allow=dict(type="list", elements="str", default=[]),
    kernel_deny=dict(type="list", elements="str", default=[]),
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
    fabric_error_thresholds=dict(type="dict", default={}),
    fabric_window=dict(type="int", default=gc.FABRIC_WINDOW_DEFAULT),
    fabric_state_file=dict(type="path"),
    sysfs_root=dict(type="path", default="/"),
    service_user=dict(type="str"),
    capture_dir=dict(type="path"),
    textfile_dir=dict(type="path"),
    nvidia_smi=dict(type="str", default="nvidia-smi"),
    dcgmi=dict(type="str", default="dcgmi"),
    timeout=dict(type="int", default=120),
    query_timeout=dict(type="int", default=QUERY_TIMEOUT),
)


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
    if log not in collectors.KERNEL_LOG_MODES and not os.path.isabs(log):
        module.fail_json(msg="kernel_log must be auto, journal, dmesg or an absolute path, not %r" % log)
    p["check_fabric_manager"] = normalize_fabric_manager(p["check_fabric_manager"])
    if p["check_fabric_manager"] not in ("auto", "yes", "no"):
        module.fail_json(msg="check_fabric_manager must be auto, yes or no, not %r" % p["check_fabric_manager"])
    for name in ("expected_gpus", "expected_ports", "xid_window"):
        if p[name] is not None and p[name] < 0:
            module.fail_json(msg="%s must be 0 or more, not %d" % (name, p[name]))
    for name in ("expected_port_rate_gbps", "timeout", "query_timeout"):
        if p[name] is not None and p[name] <= 0:
            module.fail_json(msg="%s must be more than 0, not %d" % (name, p[name]))
    for kind, value in (p["ecc_correctable_max"] or {}).items():
        if value is not None and value < 0:
            module.fail_json(msg="ecc_correctable_max.%s must be 0 or more, not %d" % (kind, value))
    for name in ("kernel_allow", "kernel_deny"):
        try:
            gp.compile_patterns(p[name], name)
        except ValueError as exc:
            module.fail_json(msg=str(exc))
    if p["fabric_window"] < 0:
        module.fail_json(msg="fabric_window must be 0 or more, not %d" % p["fabric_window"])
    problems = fc.validate_thresholds(p["fabric_error_thresholds"])
    if problems:
        module.fail_json(msg="fabric_error_thresholds: %s" % "; ".join(problems))


def run(module):
    validate(module)
    p = module.params
    if p["capture_dir"] is not None:
        source = "capture"
        evidence, label = collectors.Capture(p).gather()
    else:
        source = "live"
        evidence, label = collectors.Live(p, CommandRunner(timeout=p["timeout"]), module.check_mode).gather()
    results = gc.evaluate(evidence, p)
    state_error = (evidence.get("fabric_counters") or {}).get("state_error")
    if state_error:
        module.warn(state_error)
    nvsmi = evidence.get("nvsmi")
    findings = gc.kernel_findings(evidence, p, (nvsmi or {}).get("gpus"))
    fingerprint = evidence.get("fingerprint") or fp.empty()
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
        checked_at=collectors._now(),
        kernel_log=label,
        kernel_findings=findings,
        fabric=fabric_summary(evidence.get("fabric")),
        fabric_counters=fc.summary(evidence.get("fabric_counters")),
        fingerprint=fingerprint,
        fingerprint_hash=fp.digest(fingerprint),
        **gc.summarize(results),
        **extra,
    )
