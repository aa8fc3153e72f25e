# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gate_node_checks: a node's own health-gate checks in one module call.

gpu_health first; then, only on a node it found healthy, the single-node nccl-tests, on the fabric
gpu_health detected. Each runs through step_runner.run_step exactly as its own module would, and
answers under ``step_results`` (so the step_result filter reads either shape).
"""

from __future__ import annotations

from ansible_collections.raygate.cluster.plugins.module_utils.checks import verdict as verdict_of
from ansible_collections.raygate.cluster.plugins.module_utils.gate import gpu_health_step, nccl_runner
from ansible_collections.raygate.cluster.plugins.module_utils.step_runner import StepFailed, run_step

ARGUMENT_SPEC = dict(
    gpu_health=dict(type="dict", required=True),
    nccl_test=dict(type="dict"),
)


def skipped(reason):
    """The answer of a step that did not run, shaped as Ansible's own skip (``is skipped`` holds)."""
    return {"changed": False, "skipped": True, "skip_reason": reason}


def nccl_args(args, health):
    """nccl_test's options with the fabric gpu_health detected, where it detected one: the test's
    defaults (busbw threshold, required transport) follow the fabric the node really has."""
    detected = (health.get("fabric") or {}).get("fabric")
    return dict(args, fabric=detected) if detected else dict(args)


def input_problems(params):
    mode = (params["nccl_test"] or {}).get("mode", "single")
    if mode != "single":
        return ["nccl_test runs this node's own test: its mode must be single, not %r" % (mode,)]
    return []


def run(module):
    params = module.params
    problems = input_problems(params)
    if problems:
        module.fail_json(msg="; ".join(problems))
    ran, results = [], {}
    try:
        ran.append("gpu_health")
        health = results["gpu_health"] = run_step(
            module, "gpu_health", gpu_health_step, params["gpu_health"], module.check_mode
        )
        if params["nccl_test"] is None:
            results["nccl_test"] = skipped("nccl_test not given")
        elif not health.get("healthy"):
            results["nccl_test"] = skipped("gpu_health found this node unhealthy (verdict %s)" % health.get("verdict"))
        else:
            ran.append("nccl_test")
            results["nccl_test"] = run_step(
                module, "nccl_test", nccl_runner, nccl_args(params["nccl_test"], health), module.check_mode
            )
    except StepFailed as exc:
        results[exc.step] = exc.result
        module.fail_json(msg=str(exc), failed_step=exc.step, steps=ran, step_results=results, changed=False)
    module.exit_json(changed=False, steps=ran, step_results=results, **overall(results))


def overall(results):
    """The node's verdict over both steps: the worst of those that ran (fail, warn, pass), as
    checks.verdict judges a node's checks."""
    verdict = verdict_of([{"status": r.get("verdict")} for r in results.values() if not r.get("skipped")])
    return {"verdict": verdict, "healthy": verdict != "fail"}
