# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""raygate-node-check: this node's GPU and fabric checks, here, with no Ansible controller.

Runs raygate's own gpu_health module (the code the health gate runs over SSH) over this node's
tools, with the arguments the role wrote to the config file, and exits
  0  healthy (warnings are printed, they do not fail it)
  1  unhealthy: one line per failing check on stdout
  2  the checks could not run (missing bundle or config, module crashed, timeout)

For Slurm: as a Prolog (or anything that only needs an exit status) run it bare: Slurm drains the
node of a failing prolog itself, and a prolog should not call scontrol. As HealthCheckProgram add
`--slurm drain`: Slurm does nothing with that program's exit status, so the script drains this node
itself with reason "raygate: <check>: <detail>" and resumes it only when its reason starts with
"raygate:" (the same rules as the slurm_gate module), then exits 0 (2 if it could not check or act);
`--slurm report` prints the scontrol command and exits as the bare command does.

The role installs the bundle (the module, raygate's module_utils and Ansible's module_utils, which
are all a module needs on a node) under --lib and the config under --config.
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time

LIB = "/opt/raygate/node-check"
CONFIG = "/etc/raygate/node-check.json"
MODULE = "ansible_collections/raygate/cluster/plugins/modules/gpu_health.py"


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--config", default=CONFIG, help="gpu_health arguments (JSON), as the role wrote them")
    parser.add_argument("--lib", default=LIB, help="the bundle the role installed")
    parser.add_argument("--timeout", type=int, default=300, help="seconds the checks may take")
    parser.add_argument("--json", action="store_true", help="print the module's whole result as JSON")
    parser.add_argument("--slurm", choices=["off", "report", "drain"], default="off",
                        help="drain/resume this node in Slurm by the result (HealthCheckProgram)")  # fmt: skip
    parser.add_argument("--node", default=os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0],
                        help="this node's Slurm name (default $SLURMD_NODENAME, else the short host name)")  # fmt: skip
    parser.add_argument("--scontrol", default="scontrol")
    return parser.parse_args(argv)


def run_module(args):
    """gpu_health's result dict; raises RuntimeError when it cannot be had."""
    with open(args.config, encoding="utf-8") as fh:
        params = json.load(fh)
    return run_params(args.lib, params, args.timeout)


def run_params(lib, params, timeout):
    """gpu_health's result for ``params`` (raygate-node-watch gives its own windows)."""
    module = os.path.join(lib, MODULE)
    if not os.path.isfile(module):
        raise RuntimeError("no module at %s: install the bundle (raygate_node_check)" % module)
    env = dict(os.environ, PYTHONPATH=lib, LC_ALL="C", LANG="C")
    proc = subprocess.run([sys.executable, module, json.dumps({"ANSIBLE_MODULE_ARGS": params})],
                          capture_output=True, text=True, env=env, timeout=timeout, check=False)  # fmt: skip
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError("gpu_health gave no result (rc %d): %s" % (proc.returncode, proc.stderr.strip()[-500:]))
    result = json.loads(lines[-1])
    if result.get("failed"):
        raise RuntimeError("gpu_health failed: %s" % result.get("msg"))
    return result


def slurm_step(args, result):
    """Apply the slurm_gate rules to this one node; returns the lines to print."""
    sys.path.insert(0, args.lib)
    # slurmd runs HealthCheckProgram with a bare environment: look where Slurm's tools live too.
    scontrol = shutil.which(args.scontrol, path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/bin:/usr/sbin"]))
    if not scontrol:
        raise RuntimeError("%s not found" % args.scontrol)
    from ansible_collections.raygate.cluster.plugins.module_utils.gate import slurm  # pylint: disable=import-outside-toplevel

    proc = subprocess.run([scontrol, "-o", "show", "node", args.node], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError("scontrol show node %s: %s" % (args.node, (proc.stderr or proc.stdout).strip()))
    nodes = slurm.parse_show_node(proc.stdout)
    healthy = [args.node] if result.get("healthy") else []
    unhealthy = {} if result.get("healthy") else {args.node: result.get("reasons") or []}
    entry = slurm.decide(healthy, unhealthy, nodes)[0]
    if entry["args"] and args.slurm == "drain":
        done = subprocess.run([scontrol] + entry["args"], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError("scontrol %s: %s" % (" ".join(entry["args"]), (done.stderr or done.stdout).strip()))
    return slurm.summary_lines([entry], args.slurm if args.slurm == "drain" else "report")


def main(argv=None):
    args = parse_args(argv)
    start = time.monotonic()
    try:
        result = run_module(args)
        lines = slurm_step(args, result) if args.slurm != "off" else []
    except (OSError, ValueError, RuntimeError, subprocess.TimeoutExpired) as exc:
        print("raygate-node-check: cannot check this node: %s" % exc)
        return 2
    took = time.monotonic() - start
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    verdict = "healthy" if result.get("healthy") else "UNHEALTHY"
    print("raygate-node-check: %s: %s in %.1f s" % (args.node, verdict, took))
    for reason in result.get("reasons") or []:
        print("  fail: %s" % reason)
    for warning in result.get("warn_reasons") or []:
        print("  warn: %s" % warning)
    for line in lines:
        print("  %s" % line)
    # With --slurm drain the verdict lives in the node's Slurm state: exit 0 once it is set, since
    # Slurm only logs a HealthCheckProgram's failure (and at slurmd's start may wait for a success).
    return 0 if result.get("healthy") or args.slurm == "drain" else 1


if __name__ == "__main__":
    sys.exit(main())
