#!/usr/bin/python
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: nccl_test
short_description: Run nccl-tests on one node or on pairs of nodes and judge the result
version_added: 0.3.0
description:
  - With O(mode=single), runs C(all_reduce_perf) (or another nccl-tests binary) across the GPUs
    of this node, or judges an existing log given in O(log_path), and returns the checks
    C(nccl_busbw), C(nccl_wrong), C(nccl_completed), C(nccl_transport) and C(nccl_fabric_errors).
  - C(nccl_fabric_errors) reads this node's RDMA port error counters (under O(sysfs_root)) before and
    after the test. A counter that grew while the test ran blames its port - the device and port are
    named with the growth. Any growth of a counter counted in errors fails or warns as its class
    says (see O(fabric_error_thresholds)); counters judged as a rate per hour are judged by their
    rate over the test, counted as at least an hour, so a few symbol errors do not fail a short test.
    A single-node test moves no data over the RDMA ports, so there it catches errors that arise on
    an idle link (a bad cable or transceiver still counts symbol errors and link-downs).
  - With O(mode=pairs), run once on a launcher, tests the nodes of O(hosts) two at a time with
    C(mpirun), one rank per GPU. Round 1 pairs neighbours, round 2 shifts the ring by one, so
    every node is tested within two rounds and meets a second partner (with an odd count, all
    but the first and the last); the pairs of a round run at the same time. A node that passed with
    anyone is good; a node that failed with a good node is the culprit. A node whose failures
    are all with nodes not proven good is retested against a good node (one from
    O(known_good) when given). When no pair passed at all, pairs of nodes never tested
    together are tried first, to find a good node. O(max_retest_phases) bounds these extra
    phases; a node still unexplained fails with C(could not isolate).
  - Every test runs with C(NCCL_DEBUG=INFO) (and C(NCCL_DEBUG_SUBSYS=INIT,NET) unless set), so
    the transport NCCL chose is checked, for example that every network channel uses
    GPUDirect RDMA (C(via NET/IB/0/GDRDMA)) and that NCCL did not fall back to TCP sockets.
  - A failing test makes the node unhealthy in the result; it does not fail the task. A
    missing binary or C(mpirun) is reported the same way. Only bad arguments fail the task.
requirements:
  - the nccl-tests program O(binary) (V(all_reduce_perf) by default), built against NCCL, on E(PATH) or in
    C(/opt/nccl-tests/build) of every node tested; not needed to judge a log given in O(log_path)
  - with O(mode=pairs), an Open MPI style launcher (O(mpirun)) on the node the module runs on, able to start
    ranks on every node of O(hosts), and nccl-tests built with MPI support
author: raygate maintainers (@raygate)
extends_documentation_fragment:
  - raygate.cluster.attributes
attributes:
  check_mode:
    support: full
    details:
      - Runs the test in check mode too; it changes nothing.
  diff_mode:
    support: none
    details:
      - Changes nothing, so there is nothing to show.
options:
  mode:
    description:
      - V(single) tests the GPUs of this node; V(pairs) tests O(hosts) two at a time from this
        node with C(mpirun).
    type: str
    choices: [single, pairs]
    default: single
  log_path:
    description:
      - Judge this existing nccl-tests output (with or without NCCL INFO lines) instead of
        running a test. Only with O(mode=single).
    type: path
  binary:
    description:
      - The nccl-tests program. A name is looked up on E(PATH), then in
        C(/opt/nccl-tests/build); a path is used as is (with O(mode=pairs) it must exist on
        every node).
    type: str
    default: all_reduce_perf
  gpus:
    description:
      - GPUs per node. Required to run a test (not with O(log_path)).
      - O(mode=single) runs one process with C(-g) O(gpus); O(mode=pairs) runs 2 x O(gpus)
        ranks with C(-g 1).
    type: int
  min_bytes:
    description: Smallest message size (C(-b)); nccl-tests accepts K, M and G suffixes.
    type: str
    default: "8"
  max_bytes:
    description: Largest message size (C(-e)). The busbw check reads the largest size.
    type: str
    default: 16G
  step_factor:
    description: Multiplication factor between sizes (C(-f)).
    type: int
    default: 2
  iters:
    description: Timed iterations per size (C(-n)).
    type: int
    default: 20
  warmup_iters:
    description: Warm-up iterations per size (C(-w)).
    type: int
    default: 5
  check:
    description: Validate the results (C(-c)); V(0) turns the C(#wrong) column off.
    type: int
    default: 1
  extra_args:
    description: More arguments for the nccl-tests program, appended last.
    type: list
    elements: str
    default: []
  env:
    description:
      - Environment of the test (passed on with C(mpirun -x) in O(mode=pairs)). Applied over
        O(env_file). C(NCCL_DEBUG) is always C(INFO).
    type: dict
    default: {}
  env_file:
    description:
      - C(KEY=VALUE) file read first, for example the C(/etc/raygate/nccl.env) that
        M(raygate.cluster.nccl_env) writes. The task fails when it does not exist, unless
        O(env_file_optional) is set.
    type: path
  env_file_optional:
    description:
      - Run without O(env_file) when it does not exist (with a warning), for example on nodes
        the health gate checks before raygate ever configured them.
    type: bool
    default: false
  min_busbw:
    description:
      - Lowest acceptable bus bandwidth in GB/s at the largest size.
      - Default, from public figures, by GPU model, fabric and scope (C(single_node) for
        O(mode=single), C(2_node) for O(mode=pairs)), applied only when the run matches the
        figure's GPU count and reaches its size (16G). Without one the check is skipped and its
        detail says so.
    type: float
  gpu_model:
    description:
      - GPU model for the default O(min_busbw), for example V(H100) or V(H200). Default, the
        model named in the test's device list.
    type: str
  fabric:
    description:
      - The fabric between nodes, for the default O(min_busbw) and O(require_transport).
      - V(auto) reads the network NCCL used from the log. V(none) means no RDMA is expected, and
        O(require_transport) then defaults to V(any).
    type: str
    choices: [auto, efa, ib, roce, none]
    default: auto
  require_transport:
    description:
      - V(GDRDMA) fails unless every network channel uses GPUDirect RDMA; V(no_socket) fails
        only on a fallback to TCP sockets; V(any) accepts any transport.
      - Default, V(GDRDMA), or V(any) with O(fabric=none).
      - A single node has no network channels, and passes unless NCCL logged a socket one.
    type: str
    choices: [GDRDMA, no_socket, any]
  hosts:
    description: With O(mode=pairs), the addresses of the nodes to test (at least two, distinct).
    type: list
    elements: str
    default: []
  mpirun:
    description: The MPI launcher (Open MPI flags), a name looked up on E(PATH) or a path.
    type: str
    default: mpirun
  mpirun_args:
    description: More C(mpirun) arguments, placed before the C(-x) exports.
    type: list
    elements: str
    default: []
  known_good:
    description:
      - Nodes already proven good (for example healthy members of the running cluster); they
        are the partners of retests and need not be in O(hosts).
    type: list
    elements: str
    default: []
  parallel:
    description:
      - Run the pairs of one round at the same time (they share no node), as the rounds are meant;
        retests that share a good node run one after another. V(false) runs every test in turn.
    type: bool
    default: true
  max_retest_phases:
    description:
      - With O(mode=pairs), how many phases of retests may follow the two rounds. One phase
        settles every node once a good node is known; finding one when no pair passed may
        take more.
    type: int
    default: 2
  sysfs_root:
    version_added: 0.5.0
    description:
      - Root under which C(sys/class/infiniband) is read for C(nccl_fabric_errors) (a simulated tree in
        the sandbox). Only with O(mode=single), when a test runs.
    type: path
    default: /
  fabric_error_thresholds:
    version_added: 0.5.0
    description:
      - The same per-counter limits as M(raygate.cluster.gpu_health)'s option of that name. Here a
        counter counted in errors breaches on any growth during the test; one judged as a rate per
        hour breaches above its rate; V(null) reads a counter without judging it.
    type: dict
    default: {}
  timeout:
    description: Seconds one test may run.
    type: int
    default: 600
notes:
  - O(mode=pairs) runs the tests one after the other. A node is judged from its best
    evidence, a passing test or the one with a good partner; RV(tests) and RV(retests) hold
    every test.
  - The result never holds the whole log; RV(log_tail) has its last 40 lines when the test
    failed.
  - O(mode=pairs) does not read port counters; the gate's single-node test and
    M(raygate.cluster.gpu_health)'s C(fabric_errors) and C(link_flaps) judge each node's own ports.
seealso:
  - module: raygate.cluster.nccl_env
"""

EXAMPLES = r"""
- name: All-reduce across the 8 GPUs of each node
  raygate.cluster.nccl_test:
    gpus: 8
    env_file: /etc/raygate/nccl.env
  register: nccl

- name: Judge a log written elsewhere
  raygate.cluster.nccl_test:
    log_path: /var/log/nccl/all_reduce.log
    min_busbw: 400

- name: Test the nodes two by two from the first one and name the bad ones
  raygate.cluster.nccl_test:
    mode: pairs
    hosts: "{{ groups['ray_cluster'] | map('extract', hostvars, 'ansible_host') | list }}"
    gpus: 8
    fabric: ib
    env_file: /etc/raygate/nccl.env
    mpirun_args: [--mca, btl_tcp_if_include, eth0]
  run_once: true
  register: pairs
"""

RETURN = r"""
checks:
  description: The checks of the node (O(mode=single)).
  returned: mode single
  type: list
  elements: dict
  sample:
    - {name: nccl_busbw, status: pass, detail: "busbw 481.20 GB/s at 17179869184 bytes >= 460.00 GB/s",
       value: 481.2, threshold: 460.0}
    - {name: nccl_wrong, status: pass, detail: no wrong values, value: 0, threshold: 0}
    - {name: nccl_completed, status: pass, detail: 32 sizes measured, value: 0, threshold: 0}
    - {name: nccl_transport, status: pass, detail: no NET channels (single node), value: null, threshold: null}
    - {name: nccl_fabric_errors, status: fail, value: 1, threshold: 0, severity: do-not-allocate,
       detail: "mlx5_3:1 link_downed +1 (max 4) during the 1 min test",
       action: "reseat or replace the cable/transceiver of mlx5_3 port 1, then clear its counters (perfquery -R)"}
verdict:
  description: V(fail) if a check failed, else V(warn) if one warned, else V(pass).
  returned: mode single
  type: str
  sample: pass
healthy:
  description: RV(verdict) is not V(fail).
  returned: mode single
  type: bool
  sample: true
busbw:
  description: Best bus bandwidth (GB/s) at the largest size.
  returned: mode single
  type: float
  sample: 481.2
avg_busbw:
  description: The C(Avg bus bandwidth) nccl-tests printed, over all sizes.
  returned: mode single
  type: float
  sample: 171.4
max_size:
  description: The largest size measured, in bytes.
  returned: mode single
  type: int
  sample: 17179869184
transports:
  description: The distinct transports of the NCCL channels (network device numbers left out).
  returned: mode single
  type: list
  elements: str
  sample: [P2P/CUMEM/read]
network:
  description: The network NCCL chose (C(Using network X)), null when it logged none.
  returned: mode single
  type: str
  sample: IB
fabric:
  description:
    - The fabric used to choose defaults, O(fabric) or what the log shows (V(efa), V(ib), V(roce),
      V(socket) for TCP; null when it shows no network).
    - With O(mode=pairs) and O(fabric=auto), every distinct one of the tests, comma-separated.
  returned: always
  type: str
  sample: ib
gpu_model:
  description: The GPU model used to choose the default threshold.
  returned: mode single
  type: str
  sample: H100
command:
  description: The command run (null when judging O(log_path)).
  returned: mode single
  type: str
  sample: /opt/nccl-tests/build/all_reduce_perf -b 8 -e 16G -f 2 -g 8 -n 20 -w 5 -c 1
source:
  description: V(run) or V(log).
  returned: mode single
  type: str
  sample: run
log_tail:
  description: The last 40 lines of the output, when the verdict is V(fail).
  returned: mode single, when failing
  type: list
  elements: str
  sample: ["node1: Test NCCL failure common.cu:1005 'remote process exited or there was a network error'"]
checked_at:
  description: When the checks were made (seconds since the epoch).
  returned: always
  type: float
  sample: 1763719201.52
nodes:
  description:
    - Per node of O(hosts) (O(mode=pairs)), its pair checks C(nccl_pair_busbw),
      C(nccl_pair_wrong), C(nccl_pair_completed), C(nccl_pair_transport) from its best test,
      and C(nccl_pair_isolation) with the reasoning.
  returned: mode pairs
  type: dict
  sample:
    10.0.0.3:
      healthy: false
      verdict: fail
      partners: [10.0.0.4, 10.0.0.2]
      checks:
        - {name: nccl_pair_busbw, status: fail, value: 2.1, threshold: 300.0,
           detail: "with 10.0.0.2: busbw 2.10 GB/s at 17179869184 bytes is below 300.00 GB/s"}
        - {name: nccl_pair_isolation, status: fail, value: bad, threshold: null,
           detail: "failed with 10.0.0.2, which is proven good"}
rounds:
  description: The pairs of each round.
  returned: mode pairs
  type: list
  elements: list
  sample: [[[10.0.0.1, 10.0.0.2], [10.0.0.3, 10.0.0.4]], [[10.0.0.2, 10.0.0.3], [10.0.0.4, 10.0.0.1]]]
tests:
  description: Each test of the rounds, with its checks (named C(nccl_pair_*)) and the command.
  returned: mode pairs
  type: list
  elements: dict
  sample:
    - hosts: [10.0.0.1, 10.0.0.2]
      round: 1
      verdict: pass
      busbw: 371.5
      transport: NET/IB/GDRDMA
      checks: []
      command: mpirun --allow-run-as-root -np 16 -H 10.0.0.1:8,10.0.0.2:8 -x NCCL_DEBUG ...
retests:
  description: The tests run after the rounds, in the same form as RV(tests) (C(round) is the phase, from 3).
  returned: mode pairs
  type: list
  elements: dict
  sample: []
"""

import re
import shlex
import time
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.raygate.cluster.plugins.module_utils._runner import CommandError, CommandRunner
from ansible_collections.raygate.cluster.plugins.module_utils.checks import result as check_result
from ansible_collections.raygate.cluster.plugins.module_utils.checks import verdict as verdict_of
from ansible_collections.raygate.cluster.plugins.module_utils.files import parse_env, read_text
from ansible_collections.raygate.cluster.plugins.module_utils.gate import fabric_counters as fc
from ansible_collections.raygate.cluster.plugins.module_utils.gate import nccl_pairs
from ansible_collections.raygate.cluster.plugins.module_utils.gate import nccl_parsers as npp
from ansible_collections.raygate.cluster.plugins.module_utils.net import fabric as fab

NCCL_TESTS_DIR = "/opt/nccl-tests/build"
TAIL_LINES = 40
SIZE_RE = re.compile(r"^[0-9]+[KMGkmg]?$")
CHECK_NAMES = ("busbw", "wrong", "completed", "transport")
# A seam for the tests: where sysfs_root points unless a task says.
DEFAULT_SYSFS_ROOT = "/"


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


class NcclTest:
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

    # ------------------------------------------------------------------ single node

    def port_counters(self):
        """This node's RDMA port error counters (of the fabric sysfs shows), {} without RDMA."""
        root = self.p["sysfs_root"]
        devices = fab.read_sysfs(root)
        found = fab.choose_fabric(devices)
        return {} if found == "none" else fc.snapshot(root, devices, kinds=(found,))

    def single_node(self):
        p = self.p
        command = None
        error = None
        rc = 0
        if p["log_path"]:
            counters = check_result("nccl_fabric_errors", "skip", "judging a log: port counters not read")
            try:
                text = read_text(p["log_path"])
            except (OSError, UnicodeDecodeError) as exc:
                self.fail("cannot read log_path %s: %s" % (p["log_path"], exc))
            if text is None:
                self.fail("log_path %s does not exist" % p["log_path"])
            source = "log"
        else:
            env = self.environment()
            source = "run"
            binary = self.resolve(p["binary"], NCCL_TESTS_DIR)
            text = ""
            if binary is None:
                error = "%s not found on PATH or in %s" % (p["binary"], NCCL_TESTS_DIR)
                counters = check_result("nccl_fabric_errors", "skip", "not measured: the test did not run")
            else:
                args = self.test_args(binary, p["gpus"])
                command = quote_command(args)
                before = self.port_counters()
                started = time.monotonic()
                try:
                    rc, out, err = self.runner.run(args, env=env, timeout=p["timeout"])
                    text = out + ("\n" + err if err else "")
                except CommandError as exc:
                    error = str(exc)
                seconds = time.monotonic() - started
                maxima = fc.limits(p["fabric_error_thresholds"])
                counters = fc.check_test_deltas(before, self.port_counters(), maxima, seconds)
        if error is not None and not text:
            checks = missing_checks("nccl_", error)
            judged = {"checks": checks, "verdict": "fail", "parsed": npp.parse_nccl_tests(""), "transports": None}
            judged.update(
                fabric=None if p["fabric"] == "auto" else p["fabric"], gpu_model=p["gpu_model"], max_size=None
            )
        else:
            judged = self.judge(text, rc, "nccl_", "single_node", error=error, single=True)
        judged["checks"].append(counters)
        judged["verdict"] = verdict_of(judged["checks"])
        result = {
            "changed": False,
            "checks": judged["checks"],
            "verdict": judged["verdict"],
            "healthy": judged["verdict"] != "fail",
            "busbw": judged["parsed"]["max_size_busbw"],
            "avg_busbw": judged["parsed"]["avg_busbw"],
            "max_size": judged["max_size"],
            "transports": transport_forms(judged["transports"]),
            "network": (judged["transports"] or {}).get("network"),
            "fabric": judged["fabric"],
            "gpu_model": judged["gpu_model"],
            "command": command,
            "source": source,
            "checked_at": time.time(),
        }
        if judged["verdict"] == "fail":
            result["log_tail"] = tail(text) if text else [error]
        return result

    # ------------------------------------------------------------------ pairs

    def pair_command(self, mpirun, binary, pair, env):
        n = self.p["gpus"]
        args = [mpirun, "--allow-run-as-root", "-np", str(2 * n), "-H", "%s:%d,%s:%d" % (pair[0], n, pair[1], n)]
        args += list(self.p["mpirun_args"])
        for name in sorted(env):
            args += ["-x", name]
        return args + self.test_args(binary, 1)

    def run_pair(self, pair, number, tools, env):
        mpirun, binary, problem = tools
        entry = {"hosts": list(pair), "round": number, "command": None}
        if problem:
            entry.update(verdict="fail", busbw=None, transport=None, ran=False, fabric=None)
            entry["checks"] = missing_checks("nccl_pair_", problem)
            return entry
        args = self.pair_command(mpirun, binary, pair, env)
        entry["command"] = quote_command(args)
        rc, text, error = 0, "", None
        try:
            rc, out, err = self.runner.run(args, env=env, timeout=self.p["timeout"])
            text = out + ("\n" + err if err else "")
        except CommandError as exc:
            error = str(exc)
        judged = self.judge(text, rc, "nccl_pair_", "2_node", error=error)
        forms = [f for f in transport_forms(judged["transports"]) if f.startswith("NET/")]
        entry.update(
            verdict=judged["verdict"],
            busbw=judged["parsed"]["max_size_busbw"],
            transport=", ".join(forms) or (judged["transports"] or {}).get("network"),
            checks=judged["checks"],
            ran=True,
            fabric=judged["fabric"],
        )
        if judged["verdict"] == "fail":
            entry["log_tail"] = tail(text) if text else [error]
        return entry

    def run_batch(self, pairs, number, tools, env):
        """Run disjoint ``pairs`` (at the same time with O(parallel)); results in the given order."""
        if not self.p["parallel"] or len(pairs) < 2:
            return [self.run_pair(pair, number, tools, env) for pair in pairs]
        with ThreadPoolExecutor(max_workers=len(pairs)) as pool:
            return list(pool.map(lambda pair: self.run_pair(pair, number, tools, env), pairs))

    def tools(self):
        p = self.p
        mpirun = self.resolve(p["mpirun"])
        binary = self.resolve(p["binary"], NCCL_TESTS_DIR)
        problems = []
        if mpirun is None:
            problems.append("%s not found on PATH of the launcher" % p["mpirun"])
        if binary is None:
            problems.append("%s not found on PATH or in %s of the launcher" % (p["binary"], NCCL_TESTS_DIR))
        return mpirun, binary, "; ".join(problems) or None

    @staticmethod
    def evidence(tests):
        return [{"hosts": t["hosts"], "passed": t["verdict"] != "fail"} for t in tests if t["ran"]]

    def pairs(self):
        p = self.p
        env = self.environment()
        tools = self.tools()
        plan = nccl_pairs.rounds(p["hosts"])
        tests = []
        for k, pairs in enumerate(plan):
            tests.extend(self.run_batch(pairs, k + 1, tools, env))
        retests = []
        iso = nccl_pairs.isolate(self.evidence(tests), p["known_good"], p["hosts"])
        phase = 0
        while iso["retests"] and phase < p["max_retest_phases"]:
            phase += 1
            for batch in nccl_pairs.batches(iso["retests"]):
                retests.extend(self.run_batch(batch, len(plan) + phase, tools, env))
            iso = nccl_pairs.isolate(self.evidence(tests + retests), p["known_good"], p["hosts"])
        ran = [t for t in tests + retests if t["ran"]]
        nodes = {host: self.node(host, iso["nodes"][host], ran, tools[2]) for host in p["hosts"]}
        fabrics = sorted({t["fabric"] for t in ran} - {None})
        for entry in tests + retests:
            del entry["ran"], entry["fabric"]
        return {
            "changed": False,
            "nodes": nodes,
            "rounds": [[list(pair) for pair in pairs] for pairs in plan],
            "tests": tests,
            "retests": retests,
            "fabric": p["fabric"] if p["fabric"] != "auto" else ", ".join(fabrics) or None,
            "checked_at": time.time(),
        }

    def node(self, host, judged, ran, problem):
        verdict = judged["verdict"]
        isolation = judged["reason"]
        if verdict == nccl_pairs.UNTESTED:
            isolation = "not tested: %s" % (problem or "no test ran")
        elif verdict == nccl_pairs.UNRESOLVED:
            if self.p["known_good"] or any(t["verdict"] != "fail" for t in ran):
                isolation = "could not isolate: %s, and max_retest_phases=%d are used up" % (
                    judged["reason"],
                    self.p["max_retest_phases"],
                )
            else:
                isolation = "could not isolate: no pair passed (%s)" % judged["reason"]
        status = "pass" if verdict == nccl_pairs.GOOD else "fail"
        evidence = ran[judged["evidence"]] if judged["evidence"] is not None else None
        if evidence is None:
            checks = missing_checks("nccl_pair_", isolation)
        elif verdict == nccl_pairs.GOOD and evidence["verdict"] == "fail":
            checks = [
                check_result("nccl_pair_" + name, "skip", "no passing test; trusted as known good")
                for name in CHECK_NAMES
            ]
        else:
            partner = [h for h in evidence["hosts"] if h != host][0]
            checks = [dict(c, detail="with %s: %s" % (partner, c["detail"])) for c in evidence["checks"]]
        checks.append(check_result("nccl_pair_isolation", status, isolation, verdict))
        node_verdict = verdict_of(checks)
        return {
            "healthy": node_verdict != "fail",
            "verdict": node_verdict,
            "checks": checks,
            "partners": judged["partners"],
        }

    def run(self):
        self.validate()
        result = self.single_node() if self.single else self.pairs()
        self.module.exit_json(**result)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            mode=dict(type="str", choices=["single", "pairs"], default="single"),
            log_path=dict(type="path"),
            binary=dict(type="str", default="all_reduce_perf"),
            gpus=dict(type="int"),
            min_bytes=dict(type="str", default="8"),
            max_bytes=dict(type="str", default="16G"),
            step_factor=dict(type="int", default=2),
            iters=dict(type="int", default=20),
            warmup_iters=dict(type="int", default=5),
            check=dict(type="int", default=1),
            extra_args=dict(type="list", elements="str", default=[]),
            env=dict(type="dict", default={}),
            env_file=dict(type="path"),
            env_file_optional=dict(type="bool", default=False),
            min_busbw=dict(type="float"),
            gpu_model=dict(type="str"),
            fabric=dict(type="str", choices=["auto", "efa", "ib", "roce", "none"], default="auto"),
            require_transport=dict(type="str", choices=["GDRDMA", "no_socket", "any"]),
            hosts=dict(type="list", elements="str", default=[]),
            mpirun=dict(type="str", default="mpirun"),
            mpirun_args=dict(type="list", elements="str", default=[]),
            known_good=dict(type="list", elements="str", default=[]),
            parallel=dict(type="bool", default=True),
            max_retest_phases=dict(type="int", default=2),
            sysfs_root=dict(type="path", default=DEFAULT_SYSFS_ROOT),
            fabric_error_thresholds=dict(type="dict", default={}),
            timeout=dict(type="int", default=600),
        ),
        supports_check_mode=True,
    )
    NcclTest(module).run()


if __name__ == "__main__":
    main()
