# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The slurm_gate module's options and its run: read the nodes with scontrol, decide by the drain
rules of gate/slurm.py, and with mode=drain drain and resume with scontrol."""

from __future__ import annotations

import shlex

from ansible_collections.raygate.cluster.plugins.module_utils._runner import CommandError, CommandRunner
from ansible_collections.raygate.cluster.plugins.module_utils.gate import slurm

# Mirrors the options in plugins/modules/slurm_gate.py's DOCUMENTATION.
ARGUMENT_SPEC = {
    "mode": {"type": "str", "choices": ["report", "drain"], "default": "report"},
    "healthy": {"type": "list", "elements": "str", "default": []},
    "unhealthy": {"type": "dict", "default": {}},
    "skipped": {"type": "list", "elements": "str", "default": []},
    "names": {"type": "dict", "default": {}},
    "breaker_tripped": {"type": "bool", "default": False},
    "reason_max": {"type": "int", "default": slurm.DEFAULT_REASON_MAX},
    "scontrol": {"type": "str", "default": "scontrol"},
    "slurm_conf": {"type": "path"},
    "timeout": {"type": "int", "default": 60},
}


def _scontrol(runner, binary, args):
    """stdout of one scontrol call; raises CommandError with its message when it fails."""
    rc, out, err = runner.run([binary] + list(args))
    if rc != 0:
        raise CommandError("scontrol %s failed (rc %d): %s" % (" ".join(args), rc, (err or out).strip()))
    return out


def _reasons(value):
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [str(value)] if value else []


def gate(module, runner):
    params = module.params
    binary = runner.which(params["scontrol"])
    if not binary:
        module.fail_json(
            msg="%s not found: run this on a host with Slurm's client (slurm-client) and the cluster's slurm.conf"
            % params["scontrol"]
        )
    nodes = slurm.parse_show_node(_scontrol(runner, binary, ["-o", "show", "node"]))
    unhealthy = {str(h): _reasons(r) for h, r in params["unhealthy"].items()}
    entries = slurm.decide(
        params["healthy"],
        unhealthy,
        nodes,
        names=params["names"],
        skipped=params["skipped"],
        breaker_tripped=params["breaker_tripped"],
        reason_max=params["reason_max"],
    )
    acting = [e for e in entries if e["args"]]
    act = params["mode"] == "drain" and not module.check_mode
    errors = []
    if act:
        for entry in acting:
            try:
                _scontrol(runner, binary, entry["args"])
            except CommandError as exc:
                errors.append(str(exc))
                entry["note"] += " (failed: %s)" % exc
        if acting:
            after = slurm.parse_show_node(_scontrol(runner, binary, ["-o", "show", "node"]))
            for entry in entries:
                entry["state_after"] = (after.get(entry["node"]) or {}).get("state")
    result = {
        "changed": bool(acting) and params["mode"] == "drain",
        "mode": params["mode"],
        "commands": [shlex.join([params["scontrol"]] + e["args"]) for e in acting],
        "nodes": entries,
        "drained": [e["node"] for e in acting if e["action"] == "drain"],
        "resumed": [e["node"] for e in acting if e["action"] == "resume"],
        "left_alone": {e["node"]: e["reason"] for e in entries if e["note"].startswith("left alone")},
        "summary": slurm.summary_lines(entries, params["mode"] if act else "report"),
    }
    if errors:
        module.fail_json(msg="; ".join(errors), **result)
    module.exit_json(**result)


def run(module):
    env = {"SLURM_CONF": module.params["slurm_conf"]} if module.params["slurm_conf"] else {}
    runner = CommandRunner(timeout=module.params["timeout"])
    runner.base_env.update(env)
    try:
        gate(module, runner)
    except (CommandError, ValueError) as exc:
        module.fail_json(msg=str(exc))
