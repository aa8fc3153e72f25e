# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The node_steps module's steps and its ``run(module)``: install, Ray node, NCCL environment,
firewall and node watcher, each run by step_runner.run_step exactly as its own module would run.
"""

from __future__ import annotations

from ansible_collections.raygate.cluster.plugins.module_utils.net import env_step, firewall_step
from ansible_collections.raygate.cluster.plugins.module_utils.node import install as install_step
from ansible_collections.raygate.cluster.plugins.module_utils.node import node as node_step
from ansible_collections.raygate.cluster.plugins.module_utils.node import watch_step
from ansible_collections.raygate.cluster.plugins.module_utils.step_runner import StepFailed, run_step, step_diffs

# -- node_steps: the module that runs the four as steps of one call ------------------------------

STEPS = {
    "ray_install": install_step,
    "ray_node": node_step,
    "nccl_env": env_step,
    "ray_firewall": firewall_step,
    "node_watch": watch_step,
}
ORDER = ["ray_install", "ray_node", "nccl_env", "ray_firewall"]
# node_watch runs only where order names it (teardown: before the node stops).
CHOICES = ORDER + ["node_watch"]
# The steps' no_log options, given to node_steps at top level so that they are masked: each with its step.
SECRETS = {
    "auth_token": "ray_node",
    "redis_password": "ray_node",
    "tls_key": "ray_node",
    "registry_password": "ray_install",
}

ARGUMENT_SPEC = dict(
    ray_install=dict(type="dict"),
    ray_node=dict(type="dict"),
    nccl_env=dict(type="dict"),
    ray_firewall=dict(type="dict"),
    node_watch=dict(type="dict"),
    order=dict(type="list", elements="str", choices=CHOICES, default=list(ORDER)),
    auth_token=dict(type="str", no_log=True),
    redis_password=dict(type="str", no_log=True),
    tls_key=dict(type="str", no_log=True),
    registry_password=dict(type="str", no_log=True),
    continue_on_failure=dict(type="bool", default=False),
)


def input_problems(params):
    """What is wrong with the module's own options, before any step runs."""
    order = params["order"]
    problems = ["order lists %s more than once" % name for name in CHOICES if order.count(name) > 1]
    missing = [name for name in CHOICES if params[name] is not None and name not in order]
    if missing:
        problems.append("%s given but not in order (%s)" % (", ".join(missing), ", ".join(order)))
    for secret, step in SECRETS.items():
        if params[step] is not None and secret in params[step]:
            problems.append(
                "%s must not contain %s: a value nested in %s is not masked in the node's log; "
                "give it as the %s option of node_steps" % (step, secret, step, secret)
            )
    return problems


def step_args(params, name):
    args = dict(params[name])
    for secret, step in SECRETS.items():
        if name == step and params[secret] is not None:
            args[secret] = params[secret]
    return args


def run(module):
    params = module.params
    problems = input_problems(params)
    for secret, step in SECRETS.items():
        nested = (params[step] or {}).get(secret)
        if nested:
            module.no_log_values.add(str(nested))  # too late for the node's log, but not shown in the result
    if problems:
        module.fail_json(msg="; ".join(problems))
    ran, results, failures, diffs = [], {}, [], []
    for name in params["order"]:
        if params[name] is None:
            continue
        ran.append(name)
        try:
            results[name] = run_step(module, name, STEPS[name], step_args(params, name), module.check_mode)
        except StepFailed as exc:
            results[name] = exc.result
            failures.append(exc)
            if not params["continue_on_failure"]:
                break
            continue
        diffs += step_diffs(name, results[name])
    summary = dict(
        changed=any(r.get("changed") for r in results.values()),
        steps=ran,
        step_results=results,
    )
    if module._diff:
        summary["diff"] = diffs
    if failures:
        failed = [f.step for f in failures] if params["continue_on_failure"] else failures[0].step
        module.fail_json(msg="; ".join(str(f) for f in failures), failed_step=failed, **summary)
    module.exit_json(**summary)
