# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpu_health's evidence: what the checks of gate/gpu_checks.py judge, gathered by one of two collectors.

``Live`` reads the node now, through the command runner (nvidia-smi, the kernel log, dcgmi, the
fabric's sysfs and its port counters); ``Capture`` reads files captured earlier into one directory
and runs nothing. Both return ``(evidence, kernel_log_label)`` from ``gather()``.
"""

from __future__ import annotations

import os
import time

from ansible_collections.raygate.cluster.plugins.module_utils._runner import CommandError, CommandTimeout
from ansible_collections.raygate.cluster.plugins.module_utils.files import write_file
from ansible_collections.raygate.cluster.plugins.module_utils.gate import device_access as da
from ansible_collections.raygate.cluster.plugins.module_utils.gate import fabric_counters as fc
from ansible_collections.raygate.cluster.plugins.module_utils.gate import fingerprint as fp
from ansible_collections.raygate.cluster.plugins.module_utils.gate import gpu_checks as gc
from ansible_collections.raygate.cluster.plugins.module_utils.gate import gpu_parsers as gp
from ansible_collections.raygate.cluster.plugins.module_utils.net import fabric as fab

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


def boot_id():
    """This boot's id (the kernel's random boot_id), or None when it cannot be read."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            return fh.read().strip() or None
    except OSError:
        return None


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


# A line of a GPU driver or NVSwitch message contains one of these; other lines matter only to kernel_deny.
KERNEL_WORDS = ("NVRM", "Xid", "nvswitch")


def _kernel_lines(path, deny=()):
    """(text, error): only the lines of a possibly huge log file the kernel log checks can use."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            keep = [
                line for line in fh if any(word in line for word in KERNEL_WORDS) or any(p.search(line) for p in deny)
            ]
            return "".join(keep), None
    except OSError as exc:
        return None, "cannot read %s: %s" % (path, exc.strerror or exc)


def judge_kernel_log(ev, text, params, now, newest):
    """Parse ``text`` into ``ev`` (xids, sxids, nvrm, denied), each limited to the xid_window before
    ``newest`` (``{"wall": ..., "boot": ...}``, the references of the two clocks)."""
    parsed = gp.parse_kernel_log(text, now, params["kernel_allow"], params["kernel_deny"])
    window = params["xid_window"]
    for key in ("xids", "sxids", "nvrm", "denied"):
        ev[key] = gc.events_in_window(parsed[key], window, newest["wall"], newest["boot"])


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

    def __init__(self, params, runner, check_mode=False):
        self.p = params
        self.runner = runner
        self.check_mode = check_mode

    def run(self, args):
        """(rc, out, err), or (None, '', message) when it cannot run."""
        try:
            return self.runner.run(args)
        except CommandError as exc:
            return None, "", str(exc)

    def query(self, args):
        """A quick nvidia-smi query, bounded by query_timeout (timeout is sized for DCGM's diag):
        (rc, out, err), or (None, '', message) naming the tool when it did not answer."""
        shown = " ".join([os.path.basename(args[0])] + list(args[1:]))
        try:
            return self.runner.run(args, timeout=self.p["query_timeout"])
        except CommandTimeout as exc:
            message = "%s did not answer within %ss (query_timeout)" % (shown, exc.limit)
            if exc.stuck:
                message += " and did not end when killed (pid %s left behind): stuck in the driver, " % exc.pid
                message += "as on a GPU fallen off the bus"
            return None, "", message
        except CommandError as exc:
            return None, "", "%s failed (not run): %s" % (shown, exc)

    def nvsmi(self, ev):
        name = self.p["nvidia_smi"]
        path = self.runner.which(name)
        if path is None:
            ev["nvsmi_error"] = "%s not found: no NVIDIA driver tools on this node" % name
            return None
        rc, out, err = self.query([path, "-q", "-x"])
        if rc is None:
            ev["nvsmi_error"] = err
            return None
        try:
            parsed = gp.parse_nvsmi_xml(out)
        except ValueError:
            parsed = None
        if parsed is None or (rc != 0 and not parsed["gpus"]):
            ev["nvsmi_error"] = "nvidia-smi -q -x failed (rc %s): %s" % (rc, _first_line(out, err) or "no output")
            return None
        ev["nvsmi"] = parsed
        return path

    def nvlink(self, ev, path):
        rc, out, err = self.query([path, "nvlink", "-s"])
        if rc is None:
            ev["nvlink_error"] = err
            return
        if rc != 0:
            ev["nvlink_error"] = "nvidia-smi nvlink -s failed (rc %s): %s" % (rc, _first_line(err, out) or "no output")
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
            text, error = _kernel_lines(mode, gp.compile_patterns(self.p["kernel_deny"]))
        if text is None:
            ev["xid_error"] = error
            return None
        now = _now()
        judge_kernel_log(ev, text, self.p, now, {"wall": now, "boot": _uptime()})
        ev["xid_scope"] = _window_scope(label, window)
        return label

    def dcgm(self, ev):
        level = self.p["dcgm_diag_level"]
        ev["dcgm_level"] = level
        if level == 0:
            return
        if ev.get("nvsmi_error"):
            # Not run: gpu_checks.evaluate names dcgm_diag among the checks the root cause prevented.
            ev["dcgm_needs_nvsmi"] = True
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
        ev["fabric_counters"] = self.counters(ev["fabric"])
        root = self.p["sysfs_root"]
        driver, _error = _read(os.path.join(root, "proc", "driver", "nvidia", "version"))
        ev["gdr"] = {
            "peermem": os.path.exists(os.path.join(root, "sys", "module", "nvidia_peermem")),
            "driver": driver,
            "kernel": _kernel_release(),
        }

    def counters(self, info):
        """The fabric's port counters, their growth in the window, and this run's snapshot saved."""
        found = info.get("fabric") or "none"
        if found == "none":
            return {"fabric": found, "growth": {}}
        current = fc.snapshot(self.p["sysfs_root"], info.get("devices"), kinds=(found,))
        if not current:
            return {"fabric": found, "growth": {}}
        now, uptime, boot = _now(), _uptime(), boot_id()
        boot_time = now - uptime if uptime is not None else None
        window = self.p["fabric_window"]
        path = self.p["fabric_state_file"]
        history, problem = [], None
        if path and os.path.exists(path):
            text, error = _read(path)
            try:
                history = fc.load_state(text) if error is None else []
            except ValueError as exc:
                error = str(exc)
            if error:
                problem = "state file %s unusable (%s): started again" % (path, error)
        counted = fc.window_growth(history, current, now, window, boot_time, boot)
        counted["fabric"] = found
        if path and not self.check_mode:
            try:
                write_file(path, fc.dump_state(history, current, now, window, boot_time, boot))
            except OSError as exc:
                problem = "state file %s not written: %s" % (path, exc.strerror or exc)
        if problem:
            counted["state_error"] = problem
        return counted

    def gather(self):
        ev = {}
        path = self.nvsmi(ev)
        if path and self.p["check_nvlink"]:
            self.nvlink(ev, path)
        label = self.kernel(ev)
        self.dcgm(ev)
        self.fabric(ev)
        ev["device_access"] = da.gather(self.p["service_user"], self.p["sysfs_root"], self.runner)
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
        if self.p["service_user"]:
            ev["device_access"] = {"user": self.p["service_user"], "skip": "not captured"}
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
            judge_kernel_log(ev, text, self.p, now, gp.newest_timestamps(text, now))
            scope = name if not window else "%s, last %d s before its newest line" % (name, window)
            ev["xid_scope"] = scope
            return name
        return None
