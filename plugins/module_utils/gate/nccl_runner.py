# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The nccl_test module's options and its run: one node's nccl-tests run (or a log judged), or the
pair tests of the hosts option over mpirun with the isolation of gate/nccl_pairs.py."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.raygate.cluster.plugins.module_utils._runner import CommandError
from ansible_collections.raygate.cluster.plugins.module_utils.checks import result as check_result
from ansible_collections.raygate.cluster.plugins.module_utils.checks import verdict as verdict_of
from ansible_collections.raygate.cluster.plugins.module_utils.files import read_text
from ansible_collections.raygate.cluster.plugins.module_utils.gate import fabric_counters as fc
from ansible_collections.raygate.cluster.plugins.module_utils.gate import nccl_pairs
from ansible_collections.raygate.cluster.plugins.module_utils.gate import nccl_parsers as npp
from ansible_collections.raygate.cluster.plugins.module_utils.gate.nccl_judge import (
    CHECK_NAMES,
    NCCL_TESTS_DIR,
    NcclJudge,
    missing_checks,
    quote_command,
    tail,
    transport_forms,
)
from ansible_collections.raygate.cluster.plugins.module_utils.net import fabric as fab

# Mirrors the options in plugins/modules/nccl_test.py's DOCUMENTATION.
ARGUMENT_SPEC = dict(
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
    sysfs_root=dict(type="path", default="/"),
    fabric_error_thresholds=dict(type="dict", default={}),
    timeout=dict(type="int", default=600),
)


class NcclTest(NcclJudge):
    """Runs nccl-tests on this node (or judges its log), or in pairs of the hosts option with mpirun."""

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


def run(module):
    NcclTest(module).run()
