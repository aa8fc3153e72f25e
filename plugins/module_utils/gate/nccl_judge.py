# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""nccl_test's shared half: its options checked, the test's environment and command line, and the
judging of one nccl-tests output into the busbw, wrong, completed and transport checks."""

from __future__ import annotations

import re
import shlex

from ansible_collections.raygate.cluster.plugins.module_utils._runner import CommandRunner
from ansible_collections.raygate.cluster.plugins.module_utils.checks import result as check_result
from ansible_collections.raygate.cluster.plugins.module_utils.checks import verdict as verdict_of
from ansible_collections.raygate.cluster.plugins.module_utils.files import parse_env, read_text
from ansible_collections.raygate.cluster.plugins.module_utils.gate import fabric_counters as fc
from ansible_collections.raygate.cluster.plugins.module_utils.gate import nccl_parsers as npp

NCCL_TESTS_DIR = "/opt/nccl-tests/build"
TAIL_LINES = 40
SIZE_RE = re.compile(r"^[0-9]+[KMGkmg]?$")
CHECK_NAMES = ("busbw", "wrong", "completed", "transport")


def quote_command(args):
    return " ".join(shlex.quote(str(a)) for a in args)


def tail(text, count=TAIL_LINES):
    return [line.rstrip("\r") for line in (text or "").splitlines() if line.strip()][-count:]


def transport_forms(transports):
    """Distinct channel transports in first-seen order, without network device numbers."""
    forms = []
    for ch in (transports or {}).get("channels") or []:
        if ch["transport"] == "NET":
            form = "NET/%s%s" % (ch["net"], "/" + npp.GDR_SUFFIX if ch["gdr"] else "")
        else:
            form = ch["via"]
        if form not in forms:
            forms.append(form)
    return forms


def missing_checks(prefix, detail):
    """The checks of a test that could not run: completed fails, the rest have nothing to read."""
    return [
        check_result(prefix + "busbw", "skip", "not measured: the test did not run"),
        check_result(prefix + "wrong", "skip", "not measured: the test did not run"),
        check_result(prefix + "completed", "fail", detail),
        check_result(prefix + "transport", "skip", "not measured: the test did not run"),
    ]


class NcclJudge:
    """What a single-node test and a pair test share: the options checked, the test's environment
    and command line, and the judging of one test output. ``NcclTest`` (gate/nccl_runner.py) runs."""

    def __init__(self, module):
        self.module = module
        self.p = module.params
        self.runner = CommandRunner(timeout=self.p["timeout"])
        self.single = self.p["mode"] == "single"

    # ------------------------------------------------------------------ arguments

    def fail(self, msg):
        self.module.fail_json(msg=msg)

    def validate(self):
        p = self.p
        if p["log_path"] and not self.single:
            self.fail("log_path judges one log: it needs mode=single")
        if self.single and p["hosts"]:
            self.fail("hosts is for mode=pairs; mode=single tests this node")
        if not p["log_path"]:
            if p["gpus"] is None:
                self.fail("gpus (GPUs per node) is required to run a test; give log_path to judge an existing log")
            if p["gpus"] < 1:
                self.fail("gpus must be at least 1, got %d" % p["gpus"])
        for name in ("min_bytes", "max_bytes"):
            if not SIZE_RE.match(p[name]):
                self.fail("%s must be a size like 8, 512K, 64M or 16G, got %r" % (name, p[name]))
        minimums = {"step_factor": 2, "iters": 1, "warmup_iters": 0, "check": 0, "timeout": 1, "max_retest_phases": 0}
        for name, least in minimums.items():
            if p[name] < least:
                self.fail("%s must be at least %d, got %d" % (name, least, p[name]))
        if p["min_busbw"] is not None and p["min_busbw"] < 0:
            self.fail("min_busbw must not be negative, got %s" % p["min_busbw"])
        problems = fc.validate_thresholds(p["fabric_error_thresholds"])
        if problems:
            self.fail("fabric_error_thresholds: %s" % "; ".join(problems))
        if not self.single:
            hosts = p["hosts"]
            if len(hosts) < 2:
                self.fail("mode=pairs needs at least two hosts, got %d" % len(hosts))
            doubles = sorted({h for h in hosts if hosts.count(h) > 1})
            if doubles:
                self.fail("hosts must be distinct; listed more than once: %s" % ", ".join(doubles))
            if any(not h or "," in h or h.count(":") == 1 for h in hosts):
                self.fail("hosts must be plain addresses (no ',' and no ':slots'), got %s" % ", ".join(hosts))

    def environment(self):
        p = self.p
        env = {}
        if p["env_file"]:
            text = read_text(p["env_file"])
            if text is None and not p["env_file_optional"]:
                self.fail("env_file %s does not exist" % p["env_file"])
            if text is None:
                self.module.warn("env_file %s does not exist; the test runs without it" % p["env_file"])
                text = ""
            try:
                env.update(parse_env(text))
            except ValueError as exc:
                self.fail("env_file %s: %s" % (p["env_file"], exc))
        for key, value in p["env"].items():
            if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
                self.fail("env: %r is not a valid variable name" % key)
            env[key] = "1" if value is True else "0" if value is False else str(value)
        if env.get("NCCL_DEBUG", "INFO") != "INFO":
            self.module.warn(
                "NCCL_DEBUG=%s replaced by INFO: the transport check reads NCCL's INFO lines" % env["NCCL_DEBUG"]
            )
        env["NCCL_DEBUG"] = "INFO"
        env.setdefault("NCCL_DEBUG_SUBSYS", "INIT,NET")
        return env

    def require(self):
        if self.p["require_transport"]:
            return self.p["require_transport"]
        return "any" if self.p["fabric"] == "none" else npp.GDR_SUFFIX

    def test_args(self, binary, gpus_per_process):
        p = self.p
        args = [binary, "-b", p["min_bytes"], "-e", p["max_bytes"], "-f", p["step_factor"]]
        args += ["-g", gpus_per_process, "-n", p["iters"], "-w", p["warmup_iters"], "-c", p["check"]]
        return [str(a) for a in args + list(p["extra_args"])]

    def resolve(self, name, extra_dir=None):
        """A name on PATH (then in extra_dir); a path as is. None when not found."""
        if "/" in name:
            return name
        return self.runner.which(name, (extra_dir,) if extra_dir else ())

    # ------------------------------------------------------------------ judging one output

    def judge(self, text, rc, prefix, scope, error=None, single=False):
        """Checks and facts of one test output (or of a test that raised ``error``)."""
        p = self.p
        parsed = npp.parse_nccl_tests(text)
        has_info = "NCCL INFO" in (text or "")
        transports = npp.parse_transports(text) if has_info else None
        fabric = p["fabric"] if p["fabric"] != "auto" else (npp.fabric_of(text, transports) if has_info else None)
        model = p["gpu_model"] or npp.gpu_model_of(parsed)
        max_size = max((row["size"] for row in parsed["rows"]), default=None)
        require = self.require()
        threshold, why = p["min_busbw"], None
        if threshold is None:
            threshold, why = npp.default_threshold(model, fabric, scope, parsed.get("nranks"), max_size)
        busbw, wrong, completed, transport = npp.judge(
            parsed, transports, threshold, None if require == "any" else require
        )
        if threshold is None and busbw["status"] == "skip" and busbw["value"] is not None:
            busbw["detail"] = "busbw %.2f GB/s at %d bytes; %s" % (busbw["value"], max_size, why)
        completed = self.completed(completed, parsed, rc, error)
        transport = self.transport(transport, transports, require, single)
        checks = []
        for name, check in zip(CHECK_NAMES, (busbw, wrong, completed, transport)):
            check["name"] = prefix + name
            checks.append(check)
        return {
            "checks": checks,
            "verdict": verdict_of(checks),
            "parsed": parsed,
            "transports": transports,
            "fabric": fabric,
            "gpu_model": model,
            "max_size": max_size,
        }

    @staticmethod
    def completed(check, parsed, rc, error):
        if error is not None:
            return check_result(check["name"], "fail", str(error), None, 0)
        if rc:
            lines = parsed.get("errors") or []
            detail = "exited with rc %d" % rc
            if lines:
                detail += ": " + "; ".join(lines[:3])
            return check_result(check["name"], "fail", detail, rc, 0)
        return check

    @staticmethod
    def transport(check, transports, require, single):
        if transports is None:
            return check
        if require == "any" and transports.get("fallback"):
            detail = "NCCL used TCP sockets (network %s); accepted with require_transport=any" % transports.get(
                "network"
            )
            return check_result(check["name"], "pass", detail, check["value"], require)
        has_net = any(ch["transport"] == "NET" for ch in transports.get("channels") or [])
        if single and not has_net and not transports.get("fallback"):
            return check_result(check["name"], "pass", "no NET channels (single node)", None, None)
        if check["threshold"] is None and require == "any":
            check["threshold"] = require
        return check
