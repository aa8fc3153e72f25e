# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Scale benchmark: what site.yml and health.yml cost the controller as the cluster grows.

  site.yml   at N Ray nodes (default 1, 3, 6, each 3 times: the median run counts): bringup.py's
             floor (plain ssh) and peer (`ray up`), then site.yml (c), site.yml again (d) and
             teardown.yml (e), measured; at N = 3 and 6 also site.yml with the health gate off (c0),
             from the state c started from
  health.yml at N light nodes (default 100, 300, 1000; `sandbox.sh up N --light`): healthy, then
             (with `--bad 0,1,3`) with one node and with three neighbouring nodes whose uplink is
             degraded, then the fleet fault mix (bench/fault_mix.py) on 5% of the nodes (at least one
             of each kind), judged by fault_mix.judge, with the time the run took to find each
             faulted node

The defaults are the run that met issue 27's targets (docs/SCALE.md, run 5: 54 minutes on the
2-core machine): one repeat per site.yml size judged slopes within this machine's noise (+-30%).

For each playbook run: wall time, the controller's CPU seconds and peak memory (the whole
ansible-playbook process tree, the ssh ControlPersist masters included: it runs in a cgroup of its
own, cgroup v1 cpuacct and memory), CPU seconds per node, and the host's CPU seconds (nodes
included: they share this machine). health.yml runs also say how many rounds the pair nccl-tests
took (from the recording callback; the health report keeps them too, under `pairs`).

Then a model fitted to the measurements (cost = fixed + per node x N) projects site.yml and health.yml
to 100, 500 and 1,000 nodes for the given forks, and checks itself: the largest measured size of
each playbook is predicted from the smaller ones and compared. The targets of issue 27 are judged
from the same run.

Writes docs/SCALE.md (between its scale markers), docs/scale.png, docs/scale-model.png and a
JSON file with every run (artifacts/scale/results.json). Root only; `make bench-scale`.
`--from-json FILE` renders the doc again from a JSON file without running anything.
"""

from __future__ import annotations

import argparse
import configparser
import datetime
import json
import math
import os
import re
import resource
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bringup  # noqa: E402
import fault_mix  # noqa: E402

ROOT = bringup.ROOT
SANDBOX = bringup.SANDBOX
STATE = bringup.STATE
CGROUP_ROOT = "/sys/fs/cgroup"
CONTROLLERS = ("cpuacct", "memory")
MARK_BEGIN = "<!-- scale:begin (written by bench/scale.py; edit outside the markers) -->"
MARK_END = "<!-- scale:end -->"
MIB = 1048576.0
PROJECT = (100, 500, 1000)
HEALTHY = {"gpu": {"model": "H100"}}
# Its jobs across nodes reach half the bus bandwidth (a degraded uplink that counts no errors): its
# own checks and single-node nccl-test pass, so only the pair tests find it, which is what the
# rounds measure.
BAD = {"gpu": {"model": "H100", "count": 8, "faults": [{"type": "low_bandwidth", "factor": 0.5, "scope": "network"}]}}
PLAYS = {"site": "site.yml (c)", "rerun": "site.yml again (d)", "health": "health.yml (healthy)"}
# c0: site.yml with the health gate off, at these sizes (like for like against `ray up`, issue 27).
C0_SIZES = (3, 6)
GATE_OFF = ("-e", "raygate_health_gate=false")
# Issue 27's bounds on the fitted controller CPU per node (the slope b), in seconds.
SLOPES = (("site", 1.0), ("rerun", 0.5), ("health", 0.4))
MEMORY_N, MEMORY_FORKS, MEMORY_GIB = 1000, 50, 4
# The fault mix: its share of the nodes, the gate's query_timeout for that case, and the line of
# health.yml's output at which the dark nodes go dark (as in tests/integration/faults/test_fleet_mix.py).
MIX_SHARE = 0.05
MIX_QUERY_TIMEOUT = 10
NODE_PLAY = re.compile(r"^PLAY \[Check the health of every node\]")
# The callback's marks (bench/callback_plugins/raygate_bench.py) that say a run found a node; a
# failure under ignore_errors does not.
DETECTED_BY = ("unreachable", "failed", "unhealthy", "pair", "out")


# ---- pure helpers (tested in tests/unit/bench) --------------------------------------------------
def parse_proc_cgroup(text):
    """{controller: path} from the text of /proc/<pid>/cgroup (v1 lines `id:ctrl,ctrl:/path`)."""
    out = {}
    for line in text.splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) != 3 or not parts[1]:
            continue
        for ctrl in parts[1].split(","):
            out[ctrl] = parts[2]
    return out


def cgroup_dirs(proc_cgroup_text, root=CGROUP_ROOT, controllers=CONTROLLERS):
    """The directory of our own cgroup in each of `controllers`' v1 hierarchies under `root`.
    Raises OSError when a controller has no v1 hierarchy mounted there."""
    paths = parse_proc_cgroup(proc_cgroup_text)
    dirs = {}
    for ctrl in controllers:
        base = os.path.join(root, ctrl)
        if ctrl not in paths or not os.path.isdir(base):
            raise OSError("no cgroup v1 %s hierarchy at %s" % (ctrl, base))
        dirs[ctrl] = os.path.join(base, paths[ctrl].lstrip("/"))
    return dirs


def read_usage(dirs):
    """{'cpu_s', 'peak_bytes'} of a cgroup: cpuacct.usage (ns) and memory.max_usage_in_bytes."""
    with open(os.path.join(dirs["cpuacct"], "cpuacct.usage"), encoding="utf-8") as f:
        cpu_ns = int(f.read().strip())
    with open(os.path.join(dirs["memory"], "memory.max_usage_in_bytes"), encoding="utf-8") as f:
        peak = int(f.read().strip())
    return {"cpu_s": cpu_ns / 1e9, "peak_bytes": peak}


def move_to(pid, dirs):
    """Move process `pid` into the cgroups `dirs` (one per controller); False when it is gone."""
    for path in dirs.values():
        try:
            with open(os.path.join(path, "cgroup.procs"), "w", encoding="ascii") as f:
                f.write(str(pid))
        except OSError:  # it ended meanwhile (a ControlPersist master that expired)
            return False
    return True


def mem_used(meminfo_text):
    """Bytes in use on the machine: MemTotal - MemAvailable from /proc/meminfo."""
    kb = {}
    for line in meminfo_text.splitlines():
        name, unused_sep, rest = line.partition(":")
        if rest.split():
            kb[name] = int(rest.split()[0])
    return (kb["MemTotal"] - kb["MemAvailable"]) * 1024


def pair_rounds(tasks_doc):
    """What the pair nccl-tests of one run did, from the callback's `pairs`: planned rounds, rounds
    run (retest phases included), tests, and the nodes that failed; None when no pair test ran."""
    pairs = (tasks_doc or {}).get("pairs") or []
    if not pairs:
        return None
    rec = pairs[-1]
    tests = rec.get("tests") or []
    ran = max([t.get("round") or 0 for t in tests] or [0])
    return {
        "planned": rec.get("planned_rounds", 0),
        "rounds": ran,
        "retest_phases": max(0, ran - rec.get("planned_rounds", 0)),
        "tests": len(tests),
        "failed": sorted(h for h, v in (rec.get("nodes") or {}).items() if v == "fail"),
    }


# site.yml's final wait: when it starts, every node's `ray start` has returned, and Ray's `ray start`
# returns only once the GCS lists that node (ray/_private/node.py polls get_node) - the moment the
# peer's (b) and the floor's (a) "all joined (GCS)" measure.
JOINED_TASK = "Wait until every node and GPU has joined"


def joined_at(tasks_doc, launched):
    """Seconds from `launched` (epoch) to the start of site.yml's final wait (JOINED_TASK) in the
    callback's document: every node joined in the GCS. None when the run never got there."""
    for task in (tasks_doc or {}).get("tasks") or []:
        if task.get("name", "").endswith(JOINED_TASK) and task.get("at") is not None:
            return task["at"] - launched
    return None


def every_node_in(log_text):
    """True when site.yml's run summary says every node is in ("site: every node is in (N of N)");
    a degraded run (a node left out) or one that never summarized is not."""
    return re.search(r"site: every node is in \((\d+) of \1\)", log_text or "") is not None


# What the controller's CPU went to before the first task (Ansible's start-up: imports, the
# inventory, parsing the playbook) and after the last one, in a run's task profile.
OUTSIDE_TASKS = "(outside any task: Ansible's start-up and end)"


def task_label(task):
    """A task as the profile names it: its name and, where the callback recorded it, its file and line."""
    where = os.path.basename((task.get("path") or "").strip())
    return "%s (%s)" % (task.get("name") or "?", where) if where else task.get("name") or "?"


def task_cpu(tasks_doc, run_cpu_s=None):
    """The controller's CPU of one run task by task, from the recording callback's document (its
    tasks' `cpu_s`): [[label, cpu_s, host results]], tasks of the same name and place summed, in the
    order they first ran, then OUTSIDE_TASKS (what `run_cpu_s`, the meter's total, holds beyond the
    tasks), when given. None when the callback recorded no CPU."""
    tasks = [t for t in (tasks_doc or {}).get("tasks") or [] if t.get("cpu_s") is not None]
    if not tasks:
        return None
    rows = {}
    for task in tasks:
        row = rows.setdefault(task_label(task), [task_label(task), 0.0, 0])
        row[1] += task["cpu_s"]
        row[2] += task.get("hosts") or 0
    out = [[label, round(cpu, 4), hosts] for label, cpu, hosts in rows.values()]
    if run_cpu_s is not None:
        out.append([OUTSIDE_TASKS, round(run_cpu_s - sum(row[1] for row in out), 4), 0])
    return out


def profile_points(results, play):
    """{N: {label: cpu_s}} of one playbook's runs that carry a task profile (`site`: c, `rerun`: d,
    `health`: the healthy case)."""
    return {
        int(n): {label: cpu for label, cpu, unused_hosts in run["task_cpu"]}
        for n, run in play_runs(results, play).items()
        if run and run.get("task_cpu")
    }


def profile_fits(results, play):
    """Each task's controller CPU fitted over the sizes (a task a size did not run counts 0 there, so
    the tasks' slopes add up to the run's): [(label, fit)], the largest cost per node first. None
    with fewer than two sizes."""
    points = profile_points(results, play)
    if len(points) < 2:
        return None
    labels = list(dict.fromkeys(label for per in points.values() for label in per))
    fits = [(label, fit_linear([(n, per.get(label, 0.0)) for n, per in points.items()])) for label in labels]
    return sorted(fits, key=lambda item: -item[1]["b"])


def render_profile(results, top=10):
    """Per playbook, the tasks that cost the controller most per node (the fitted slope of each
    task's CPU over the sizes), their fixed cost, and the rest together."""
    parts = []
    for play in ("site", "rerun", "health"):
        fits = profile_fits(results, play)
        if not fits:
            continue
        sizes_ = sorted(profile_points(results, play))
        total = sum(fit["b"] for unused_label, fit in fits)
        parts += [
            "%s, fitted over N = %s: %.2f s per node in all, from %d tasks."
            % (PLAYS[play], ", ".join(str(n) for n in sizes_), total, len(fits)),
            "",
            "| task (file:line) | per node, s | share | fixed, s |",
            "|---|---|---|---|",
        ]
        for label, fit in fits[:top]:
            share = fit["b"] / total if total > 0 else 0.0
            parts.append("| %s | %.3f | %.0f%% | %.2f |" % (md_cell(label), fit["b"], 100 * share, fit["a"]))
        rest = fits[top:]
        if rest:
            b = sum(fit["b"] for unused_label, fit in rest)
            a = sum(fit["a"] for unused_label, fit in rest)
            share = b / total if total > 0 else 0.0
            parts.append("| the other %d tasks | %.3f | %.0f%% | %.2f |" % (len(rest), b, 100 * share, a))
        parts.append("")
    if not parts:
        return "No run recorded the controller's CPU task by task (the callback needs the bench's cgroup).\n"
    return "\n".join(parts)


def bad_nodes(n, count):
    """Which nodes get the fault: `count` neighbours around the middle, never node1 (the head);
    three neighbours make the middle one meet only bad partners in the two rounds (a retest)."""
    if count == 0:
        return []
    first = n // 2 + 1 - count // 2
    nodes = list(range(first, first + count))
    if nodes[0] < 2 or nodes[-1] > n:
        return None
    return nodes


def mix_count(n):
    """How many of `n` nodes the fault mix faults: 5%, at least one of each kind."""
    return max(len(fault_mix.KINDS), round(MIX_SHARE * n))


def hang_limit(healthy_wall_s, n):
    """How long the mix case may run before it counts as hung: three times the healthy case's wall
    at the same size, or 6 s a node when that was not measured; never under ten minutes."""
    return max(600.0, 3.0 * healthy_wall_s if healthy_wall_s else 6.0 * n)


def detect_times(tasks_doc, launched, assignment, address=bringup.node_ip):
    """Per faulted node of `assignment` ({index: kind}), how long after `launched` (epoch) the run
    first marked it (the callback's `marks`, under its name or under its address, which is how the
    pair nccl-test names it): {host: {after_s, how, task}}, None for a node never marked."""
    marks = (tasks_doc or {}).get("marks") or {}
    out = {}
    for index in sorted(assignment):
        host = "node%d" % index
        seen = [
            (mark["at"], how, mark.get("task"))
            for key in (host, address(index))
            for how, mark in (marks.get(key) or {}).items()
            if how in DETECTED_BY and mark.get("at") is not None
        ]
        if not seen:
            out[host] = None
            continue
        first = min(seen, key=lambda m: m[0])
        out[host] = {"after_s": first[0] - launched, "how": first[1], "task": first[2]}
    return out


def report_as(report, healthy_hosts, host):
    """How the run's health report names `host`: its reasons when unhealthy, healthy when it is in
    healthy_hosts.txt, else the status of its entry (or that it has none)."""
    report = report or {}
    reasons = (report.get("unhealthy") or {}).get(host)
    if reasons is not None:
        return "unhealthy: " + ("; ".join(reasons) if isinstance(reasons, list) else str(reasons))
    if host in (healthy_hosts or ()):
        return "healthy (in healthy_hosts.txt)"
    for entry in report.get("nodes") or []:
        if entry.get("host") == host:
            return "%s, not in healthy_hosts.txt" % entry.get("status", "no status")
    return "not in the report"


def load_mix_outputs(case_dir):
    """(report.json, the lines of healthy_hosts.txt, runs/health.json) of a health.yml run whose
    report and run-summary directories were `case_dir`/health and `case_dir`/runs (the report in
    its newest subdirectory). OSError or ValueError when one is missing or unreadable."""
    top = os.path.join(case_dir, "health")
    runs = sorted(os.listdir(top))
    if not runs:
        raise OSError("no report under %s" % top)
    report_dir = os.path.join(top, runs[-1])
    report = json.loads(read(os.path.join(report_dir, "report.json")))
    healthy = read(os.path.join(report_dir, "healthy_hosts.txt")).split()
    summary = json.loads(read(os.path.join(case_dir, "runs", "health.json")))
    return report, healthy, summary


def judge_mix(assignment, n, case_dir, rc, query_timeout=MIX_QUERY_TIMEOUT):
    """What the mix run got wrong: fault_mix.judge's list, and, as the fault suite also asserts, an
    exit status other than 0 or a run summary that is not `degraded`. (problems, report, healthy)."""
    try:
        report, healthy, summary = load_mix_outputs(case_dir)
    except (OSError, ValueError) as exc:
        return ["no report to judge: %s" % exc], None, []
    problems = fault_mix.judge(assignment, n, report, healthy, summary, query_timeout)
    if rc != 0:
        problems.append("health.yml exited with %s, expected 0" % rc)
    if summary.get("result") != "degraded":
        problems.append("the run summary says %r, expected 'degraded'" % summary.get("result"))
    return problems, report, healthy


def fit_linear(points):
    """Least squares `y = a + b*n` over [(n, y)]; one point (or one n) gives a = 0, b = y/n."""
    pts = [(float(n), float(y)) for n, y in points if y is not None]
    if not pts:
        return None
    ns = {n for n, unused_y in pts}
    if len(ns) < 2:
        n = sum(n for n, unused_y in pts) / len(pts)
        y = sum(y for unused_n, y in pts) / len(pts)
        return {"a": 0.0, "b": y / n if n else 0.0, "points": len(pts)}
    mean_n = sum(n for n, unused_y in pts) / len(pts)
    mean_y = sum(y for unused_n, y in pts) / len(pts)
    sxx = sum((n - mean_n) ** 2 for n, unused_y in pts)
    sxy = sum((n - mean_n) * (y - mean_y) for n, y in pts)
    b = sxy / sxx
    return {"a": mean_y - b * mean_n, "b": b, "points": len(pts)}


def at(fit, n):
    return fit["a"] + fit["b"] * n


def play_runs(results, play):
    """{N (as saved): the run or None} of a playbook: `site` site.yml's c, `rerun` its d, `health`
    health.yml's healthy case."""
    if play == "health":
        return {n: r["cases"].get("0") for n, r in results.get("health", {}).items()}
    run = "c" if play == "site" else "d"
    return {n: r["runs"].get(run) for n, r in results.get("site", {}).items()}


def play_points(results, play, key):
    """[(N, value)] of one measured quantity of a playbook (`site`, `rerun`, `health`), N ascending."""
    runs = play_runs(results, play)
    return sorted((int(n), run[key]) for n, run in runs.items() if run and run.get(key) is not None)


def fit_play(results, play, below=None):
    """The fits of one playbook over its sizes (only those < `below` when given): controller CPU
    seconds, controller peak MiB, host CPU seconds and wall seconds; plus the smallest size's wall."""

    def keep(pts):
        return [(n, y) for n, y in pts if below is None or n < below]

    wall = keep(play_points(results, play, "wall_s"))
    if not wall:
        return None
    return {
        "cpu": fit_linear(keep(play_points(results, play, "cpu_s"))),
        "mem": fit_linear(keep(play_points(results, play, "peak_mib"))),
        "host_cpu": fit_linear(keep(play_points(results, play, "host_cpu_s"))),
        "wall": fit_linear(wall),
        "wave_s": wall[0][1],
        "wave_n": wall[0][0],
        "sizes": [n for n, unused_y in wall],
    }


def project(fit, n, forks, cores):
    """What one run at `n` nodes costs a controller with `cores` cores and `forks` forks.

    Controller CPU and memory: the fitted lines. Wall time: each task goes over the hosts in
    ceil(n / forks) waves; one wave takes what the whole run took at the smallest measured size
    (latency bound). A controller with `cores` cores cannot finish before CPU / cores (CPU bound).
    The prediction is the larger of the two; `cores_needed` keeps the CPU bound under the other."""
    cpu = at(fit["cpu"], n)
    waves = math.ceil(n / float(forks))
    # The smallest size measured may itself have taken more than one wave.
    wave = fit["wave_s"] / math.ceil(fit["wave_n"] / float(forks))
    latency = waves * wave
    cpu_bound = cpu / float(cores)
    return {
        "n": n,
        "cpu_s": cpu,
        "mem_mib": at(fit["mem"], n) if fit["mem"] else None,
        "waves": waves,
        "wave_s": wave,
        "latency_s": latency,
        "cpu_bound_s": cpu_bound,
        "wall_s": max(latency, cpu_bound),
        "cores_needed": max(1, math.ceil(cpu / latency)) if latency else None,
    }


def sandbox_wall(fit, n, host_cores):
    """The wall time the model gives on this machine, where the nodes share the host's cores with
    the controller: the larger of one wave and the host's CPU seconds over its cores."""
    host = at(fit["host_cpu"], n) if fit["host_cpu"] else 0.0
    return max(fit["wave_s"], host / float(host_cores))


def check_model(results, host_cores):
    """The largest measured size of each playbook predicted from the smaller ones, and measured.
    [{play, n, fitted_on, quantity, predicted, measured, error_pct}]"""
    rows = []
    for play in ("site", "health"):
        sizes = [n for n, unused_y in play_points(results, play, "wall_s")]
        if len(sizes) < 3:
            continue
        target = sizes[-1]
        fit = fit_play(results, play, below=target)
        measured = {k: dict(play_points(results, play, k)).get(target) for k in ("cpu_s", "peak_mib", "wall_s")}
        predicted = {
            "cpu_s": at(fit["cpu"], target),
            "peak_mib": at(fit["mem"], target) if fit["mem"] else None,
            "wall_s": sandbox_wall(fit, target, host_cores),
        }
        for key in ("cpu_s", "peak_mib", "wall_s"):
            p, m = predicted[key], measured[key]
            err = 100.0 * (p - m) / m if p is not None and m else None
            rows.append(
                {
                    "play": play,
                    "n": target,
                    "fitted_on": fit["sizes"],
                    "quantity": key,
                    "predicted": p,
                    "measured": m,
                    "error_pct": err,
                }
            )
    return rows


def split_at(fit, forks, cores, mem_mib, target_s):
    """The largest size one controller runs within `target_s` seconds and `mem_mib` of memory
    (searching 1..100,000 nodes), or None when even one node does not fit."""
    best = None
    lo, hi = 1, 100000
    while lo <= hi:
        mid = (lo + hi) // 2
        p = project(fit, mid, forks, cores)
        if p["wall_s"] <= target_s and (p["mem_mib"] is None or p["mem_mib"] <= mem_mib):
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best


# ---- rendering --------------------------------------------------------------------------------
def f1(value, unit=""):
    return "n/a" if value is None else "%.1f%s" % (value, unit)


def f2(value):
    return "n/a" if value is None else "%.2f" % value


def render_site(results):
    sizes = sorted(results.get("site", {}), key=int)
    if not sizes:
        return "No site.yml size was measured in this run."
    head = "| N (Ray nodes) | " + " | ".join(sizes) + " |"
    lines = [head, "|---|" + "---|" * len(sizes)]

    def row(label, fn):
        lines.append("| %s | %s |" % (label, " | ".join(fn(results["site"][n], int(n)) for n in sizes)))

    def run(key, field):
        return lambda r, n: f1((r["runs"].get(key) or {}).get(field))

    def per_node(key):
        def cell(r, n):
            v = (r["runs"].get(key) or {}).get("cpu_s")
            return f1(None if v is None else v / n)

        return cell

    row("(a) floor, all joined (GCS), s", lambda r, n: f1(r.get("floor", {}).get("a")))
    row("(a) host CPU until all joined, s", lambda r, n: f1(r.get("floor", {}).get("a_cpu")))
    row("(b) `ray up`, all joined (GCS), s", lambda r, n: f1(r.get("peer", {}).get("b")))
    row("(b) host CPU until all joined, s", lambda r, n: f1(r.get("peer", {}).get("b_cpu")))
    row(
        "(c) every node in (run summary)",
        lambda r, n: {True: "yes", False: "**no**"}.get((r["runs"].get("c") or {}).get("complete"), "-"),
    )
    row("(c) site.yml: all joined (GCS), s", run("c", "joined_s"))
    row("(c) site.yml wall (dashboard lists all), s", run("c", "wall_s"))
    row("(c) controller CPU, s", run("c", "cpu_s"))
    row("(c) controller CPU per node, s", per_node("c"))
    row("(c) controller peak memory, MiB", run("c", "peak_mib"))
    row("(c) host CPU (nodes too), s", run("c", "host_cpu_s"))
    row("(c0) site.yml, gate off: all joined (GCS), s", run("c0", "joined_s"))
    row("(c0) controller CPU, s", run("c0", "cpu_s"))
    row("(d) site.yml again: wall, s", run("d", "wall_s"))
    row("(d) controller CPU, s", run("d", "cpu_s"))
    row("(e) teardown.yml: wall, s", run("e", "wall_s"))
    row("(e) controller CPU, s", run("e", "cpu_s"))
    row("host memory per Ray node, MiB", lambda r, n: f1(r.get("ray_node_mib")))
    return "\n".join(lines)


def case_order(case):
    """health.yml's cases in the order they run: the bad-node counts ascending, then the rest (mix)."""
    return (0, int(case), "") if case.isdigit() else (1, 0, case)


def md_cell(text):
    """`text` fit for one cell of a Markdown table."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_mix(results):
    """One table per health.yml size that ran the fault mix: each faulted node, its kind, how long
    the run took to find it, and how the health report names it; after a line with the verdict."""
    parts = []
    for n in sorted(results.get("health", {}), key=int):
        case = results["health"][n]["cases"].get("mix")
        if not case:
            continue
        problems = case.get("problems") or []
        if case.get("error"):
            ended = "did not run (the mix could not be applied)"
        elif case.get("ended"):
            ended = "ended (rc %s) after %s s" % (case.get("rc"), f1(case.get("wall_s")))
        else:
            ended = "**hung**: killed after %s s" % f1(case.get("limit_s"))
        verdict = "nothing wrong" if not problems else "**%d wrong**: %s" % (len(problems), "; ".join(problems))
        parts += [
            "#### Fault mix at N = %s" % n,
            "",
            "%d faulted nodes, query_timeout %d s. The run %s; fault_mix.judge: %s."
            % (len(case["mix"]), case.get("query_timeout", MIX_QUERY_TIMEOUT), ended, md_cell(verdict)),
            "",
            "| node | kind | detected after, s | in the report as |",
            "|---|---|---|---|",
        ]
        detect = case.get("detect") or {}
        for index, kind in sorted(case["mix"].items(), key=lambda kv: int(kv[0])):
            host = "node%s" % index
            found = detect.get(host)
            when = "%s (%s: %s)" % (f1(found["after_s"]), found["how"], found["task"]) if found else "not marked"
            if not found and kind in fault_mix.USABLE:
                when += " (usable: it stays in)"
            named = (case.get("report_as") or {}).get(host, "-")
            parts.append("| %s | %s | %s | %s |" % (host, kind, md_cell(when), md_cell(named)))
        parts.append("")
    return "\n".join(parts).rstrip() or "The fault mix did not run."


def render_health(results):
    sizes = sorted(results.get("health", {}), key=int)
    if not sizes:
        return "No health.yml size was measured in this run."
    lines = [
        "| N (light nodes) | bad nodes | wall, s | controller CPU, s | per node, s | peak MiB | host CPU, s "
        "| pair rounds (planned + retest phases) | pair tests | nodes failed |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n in sizes:
        for case in sorted(results["health"][n]["cases"], key=case_order):
            r = results["health"][n]["cases"][case]
            pr = r.get("pairs")
            rounds = "n/a" if not pr else "%d (%d + %d)" % (pr["rounds"], pr["planned"], pr["retest_phases"])
            bad = ", ".join("node%d" % i for i in r.get("bad", [])) or "none"
            lines.append(
                "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |"
                % (
                    n,
                    "the fault mix, %d nodes (below)" % len(r["mix"]) if "mix" in r else bad,
                    f1(r.get("wall_s")),
                    f1(r.get("cpu_s")),
                    f1(r["cpu_s"] / int(n) if r.get("cpu_s") is not None else None),
                    f1(r.get("peak_mib")),
                    f1(r.get("host_cpu_s")),
                    rounds,
                    "n/a" if not pr else pr["tests"],
                    "n/a" if not pr else (", ".join(pr["failed"]) or "none"),
                )
            )
    return "\n".join(lines)


def render_sandbox(results):
    rows = [
        "| nodes | mode | `up`, s | `status`, s | `down`, s | host memory per node, MiB |",
        "|---|---|---|---|---|---|",
    ]
    for kind in ("site", "health"):
        for n in sorted(results.get(kind, {}), key=int):
            sb = results[kind][n].get("sandbox", {})
            rows.append(
                "| %s | %s | %s | %s | %s | %s |"
                % (
                    n,
                    "tini" if kind == "site" else "light",
                    f1(sb.get("up_s")),
                    f1(sb.get("status_s")),
                    f1(sb.get("down_s")),
                    f1(sb.get("node_mib")),
                )
            )
    return "\n".join(rows)


def render_fit(name, fit):
    def line(label, f, unit):
        if not f:
            return "- %s: not measured" % label
        return "- %s = %.3g + %.4g x N %s (least squares over N = %s)" % (
            label,
            f["a"],
            f["b"],
            unit,
            ", ".join(str(n) for n in fit["sizes"]),
        )

    return "\n".join(
        [
            "**%s**" % name,
            "",
            line("controller CPU", fit["cpu"], "s"),
            line("controller peak memory", fit["mem"], "MiB"),
            line("host CPU (this machine, nodes included)", fit["host_cpu"], "s"),
            "- one wave: the whole run at N = %d, %.1f s, over its ceil(N / forks) waves"
            % (fit["wave_n"], fit["wave_s"]),
        ]
    )


def render_model(results, forks, cores, mem_mib, target_s):
    parts = []
    fits = {play: fit_play(results, play) for play in PLAYS}
    fits = {k: v for k, v in fits.items() if v}
    if not fits:
        return "Nothing measured to fit."
    parts.append(
        "Fitted from this run's measurements (recomputed by every run). Projection for `forks = %d` and a "
        "controller with %d cores and %.0f GiB; `waves = ceil(N / forks)`, latency bound = waves x one wave, "
        "CPU bound = controller CPU / cores, wall = the larger; cores needed = ceil(CPU / latency bound)."
        % (forks, cores, mem_mib / 1024.0)
    )
    for play, fit in fits.items():
        parts += ["", render_fit(PLAYS[play], fit)]
    parts += [
        "",
        "| playbook | N | controller CPU, s (arithmetic) | peak memory, MiB | waves | latency bound, s "
        "| CPU bound, s | wall, min | cores needed |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for play, fit in fits.items():
        for n in PROJECT:
            p = project(fit, n, forks, cores)
            parts.append(
                "| %s | %d | %.0f = %.3g + %.4g x %d | %s | %d | %.0f = %d x %.1f | %.0f = %.0f / %d | %.1f | %s |"
                % (
                    PLAYS[play],
                    n,
                    p["cpu_s"],
                    fit["cpu"]["a"],
                    fit["cpu"]["b"],
                    n,
                    f1(p["mem_mib"]),
                    p["waves"],
                    p["latency_s"],
                    p["waves"],
                    p["wave_s"],
                    p["cpu_bound_s"],
                    p["cpu_s"],
                    cores,
                    p["wall_s"] / 60.0,
                    p["cores_needed"],
                )
            )
    parts += [
        "",
        "Largest size one controller (%d cores, %.0f GiB, forks %d) runs within %.0f minutes:"
        % (cores, mem_mib / 1024.0, forks, target_s / 60.0),
        "",
    ]
    for play, fit in fits.items():
        best = split_at(fit, forks, cores, mem_mib, target_s)
        parts.append("- %s: %s" % (PLAYS[play], "%d nodes" % best if best else "none"))
    return "\n".join(parts)


def render_check(results, host_cores):
    rows = check_model(results, host_cores)
    if not rows:
        return "Too few sizes measured to check the model (three per playbook are needed)."
    lines = [
        "| playbook | N | fitted on N = | quantity | predicted | measured | error |",
        "|---|---|---|---|---|---|---|",
    ]
    names = {
        "cpu_s": "controller CPU, s",
        "peak_mib": "controller peak memory, MiB",
        "wall_s": "wall on this machine, s",
    }
    for r in rows:
        lines.append(
            "| %s | %d | %s | %s | %s | %s | %s |"
            % (
                PLAYS[r["play"]],
                r["n"],
                ", ".join(str(n) for n in r["fitted_on"]),
                names[r["quantity"]],
                f1(r["predicted"]),
                f1(r["measured"]),
                "n/a" if r["error_pct"] is None else "%+.0f%%" % r["error_pct"],
            )
        )
    return "\n".join(lines)


def _run(results, n, key):
    return ((results.get("site", {}).get(str(n)) or {}).get("runs") or {}).get(key) or {}


def _slope_row(results, play, limit):
    """A bound on the controller CPU per node of `play`: the slope b of fit_play's line."""
    label = "%s: controller CPU per node, the fitted slope b <= %.1f s" % (PLAYS[play], limit)
    fit = fit_play(results, play)
    cpu = fit["cpu"] if fit else None
    if not cpu or cpu["points"] < 2:
        return (label, "fewer than two sizes measured", None)
    sizes = ", ".join(str(n) for n, unused_y in play_points(results, play, "cpu_s"))
    return (label, "b = %.2f s (a = %.1f s; over N = %s)" % (cpu["b"], cpu["a"], sizes), cpu["b"] <= limit)


def _memory_row(results, forks):
    label = "health.yml controller peak memory at N = %d (forks %d) <= %d GiB" % (MEMORY_N, MEMORY_FORKS, MEMORY_GIB)
    case = ((results.get("health", {}).get(str(MEMORY_N)) or {}).get("cases") or {}).get("0") or {}
    if case.get("peak_mib") is None:
        return (label, "not measured at N = %d" % MEMORY_N, None)
    text = "%.2f GiB, forks %s" % (case["peak_mib"] / 1024.0, "not recorded" if forks is None else forks)
    if forks is not None and forks != MEMORY_FORKS:
        return (label, text + " (not the target's)", None)
    return (label, text, case["peak_mib"] <= MEMORY_GIB * 1024.0)


def _mix_row(results):
    health = results.get("health", {})
    n = max(health, key=int) if health else "?"
    label = "the fault mix at N = %s (the largest health.yml size): it ends, judge finds nothing wrong" % n
    if not health:
        return (label, "not measured", None)
    case = (health[n].get("cases") or {}).get("mix")
    if not case:
        return (label, "the mix did not run at N = %s" % n, None)
    problems = case.get("problems") or []
    if case.get("error"):
        return (label, md_cell("the mix could not be applied: %s" % case["error"]), None)
    text = "%d faulted; %s; %s" % (
        len(case.get("mix") or {}),
        "ended, rc %s" % case.get("rc") if case.get("ended") else "hung (killed after %s s)" % f1(case.get("limit_s")),
        "nothing wrong" if not problems else "%d wrong, the first: %s" % (len(problems), problems[0][:200]),
    )
    return (label, md_cell(text), bool(case.get("ended")) and not problems)


def evaluate_targets(results, forks=None):
    """Issue 27's targets from one run's results: [(target, measured, met)]; met is None where the
    run did not measure what the target needs. `forks`: the run's (the memory target wants 50)."""
    rows = [_slope_row(results, play, limit) for play, limit in SLOPES]
    rows.append(_memory_row(results, forks))
    for n in C0_SIZES:
        b = ((results.get("site", {}).get(str(n)) or {}).get("peer") or {}).get("b")
        # Like for like: site.yml without its gate and `ray up`, both until the GCS lists every node.
        c0, c = _run(results, n, "c0").get("joined_s"), _run(results, n, "c").get("joined_s")
        rows.append(
            (
                "c0 <= b, N=%d: site.yml with the gate off against `ray up`, both to all joined in the GCS" % n,
                "c0 %s s, b %s s; the gate's own cost c - c0 = %s s"
                % (f1(c0), f1(b), f1(None if c is None or c0 is None else c - c0)),
                None if c0 is None or b is None else c0 <= b,
            )
        )
    for n in (3, 6):
        c, d = _run(results, n, "c").get("wall_s"), _run(results, n, "d")
        ok = None if c is None or d.get("wall_s") is None else d["wall_s"] <= 0.25 * c and not d.get("restarted")
        rows.append(
            (
                "d <= 0.25 c, no raylet restarted, N=%d" % n,
                "d/c %s, restarted %s" % ("-" if ok is None else "%.2f" % (d["wall_s"] / c), d.get("restarted", "-")),
                ok,
            )
        )
    e = _run(results, 3, "e")
    rows.append(
        (
            "e <= 5 s at N=3, nothing left",
            "e %s s, left %s" % (f1(e.get("wall_s")), e.get("left", "-")),
            None if e.get("wall_s") is None else e["wall_s"] <= 5 and not e.get("left"),
        )
    )
    rows.append(_mix_row(results))
    return rows


def render_targets(results, forks=None):
    lines = ["| target | measured | met |", "|---|---|---|"]
    for target, measured, met in evaluate_targets(results, forks):
        lines.append(
            "| %s | %s | %s |" % (target, measured, "not measured" if met is None else "yes" if met else "**no**")
        )
    return "\n".join(lines)


def merge_results(docs):
    """One results document from several runs ({meta, results}): per playbook, a later run's sizes
    replace an earlier one's; the meta is the last run's, with every run's start and arguments."""
    merged = {"site": {}, "health": {}}
    for doc in docs:
        for play in merged:
            merged[play].update(doc["results"].get(play) or {})
    meta = dict(docs[-1]["meta"])
    if len(docs) > 1:
        meta["runs"] = [{"started": d["meta"].get("started"), "argv": d["meta"].get("argv")} for d in docs]
    return {"meta": meta, "results": merged}


def yardstick(rounds=3, n=2_000_000):
    """Seconds one core takes for a fixed pure-Python loop (the best of `rounds`): runs on machines
    of different speed are compared by it, since every figure here is CPU-bound on 2 cores."""
    times = []
    while len(times) < rounds:
        t0 = time.perf_counter()
        total = 0
        for i in range(n):
            total += i
        times.append(time.perf_counter() - t0)
    return min(times)


def render_doc(results, meta, plots):
    m = meta
    parts = [MARK_BEGIN, "", "## Results", ""]
    runs = m.get("runs") or [{"started": m["started"], "argv": m["argv"]}]
    took = "" if m.get("duration_s") is None else " in %.0f min" % (m["duration_s"] / 60.0)
    parts.append(
        "Measured %s%s by `make bench-scale` (%s), %d repeat(s) per size, forks %d; the controller's cost by %s."
        % (
            " and ".join(r["started"] for r in runs),
            took if len(runs) == 1 else "",
            "; ".join("`bench/scale.py %s`" % (r["argv"] or "(default sizes)") for r in runs),
            m["repeats"],
            m["forks"],
            m.get("method", "a method not recorded (the run stopped early)"),
        )
    )
    if m.get("start_throttle"):
        parts.append(
            "Workers start at most %d at a time in site.yml (`raygate_start_throttle`) and in the floor; `ray up` "
            "starts every worker at once (its v1 autoscaler launches all of min_workers together)."
            % m["start_throttle"]
        )
    parts += ["", "### Targets (issue 27), from this run", "", render_targets(results, m.get("forks")), ""]
    parts += ["### site.yml on Ray nodes", "", render_site(results), ""]
    parts += ["### health.yml on light nodes", "", render_health(results), ""]
    parts += ["### Where the controller's CPU goes, task by task", "", render_profile(results), ""]
    parts += ["### The fault mix", "", render_mix(results), ""]
    parts += ["### The sandbox itself", "", render_sandbox(results), ""]
    for name, title in (("scale", "time and controller CPU against N"), ("model", "projection to 1,000 nodes")):
        if plots.get(name):
            parts += ["![%s](%s)" % (title, plots[name]), ""]
    parts += ["### The model", ""]
    parts += [render_model(results, m["forks"], m["controller_cores"], m["controller_mem_mib"], m["target_s"]), ""]
    parts += ["### The model against the largest sizes measured", "", render_check(results, m["host_cores"]), ""]
    parts += ["### Machine and versions", ""]
    parts += ["- %s: %s" % (k, v) for k, v in list(m["machine"].items()) + list(m["versions"].items())]
    parts += ["", MARK_END]
    return "\n".join(parts)


# ---- measuring --------------------------------------------------------------------------------
def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


class Meter:
    """The controller's cost of one command: its process tree runs in fresh cgroups (v1 cpuacct
    and memory, children of our own), so the ssh ControlPersist masters that daemonize out of the
    tree are counted too. `stop()` reads the usage, ends what is left in them (those masters) and
    removes the cgroups; `stop(keep=True)` instead moves the masters out, to our own cgroups, and
    `start(adopt=...)` of the next command's meter moves them in: that run reuses the connections
    (warm, as a user's next run within ControlPersist does) and their CPU is charged to it.
    Without writable v1 hierarchies: getrusage of the children, which misses the masters (method
    says so)."""

    def __init__(self, name, root=CGROUP_ROOT):
        self.dirs = None
        self.method = "getrusage of the children (misses the ssh ControlPersist masters)"
        made = []
        try:
            self.parents = cgroup_dirs(read("/proc/self/cgroup"), root)
            for parent in self.parents.values():
                made.append(os.path.join(parent, "%s-%d" % (name, os.getpid())))
                os.mkdir(made[-1])
        except OSError as exc:
            print("scale: no cgroup for the controller (%s); falling back to getrusage" % exc, flush=True)
            for path in made[:-1]:
                os.rmdir(path)
            return
        self.dirs = dict(zip(CONTROLLERS, made))
        self.method = "cgroup v1 cpuacct.usage and memory.max_usage_in_bytes"

    def popen_kw(self):
        if not self.dirs:
            return {}
        dirs = self.dirs

        def join():
            if not move_to(os.getpid(), dirs):
                raise OSError("could not join the cgroups %s" % ", ".join(dirs.values()))

        return {"preexec_fn": join}

    def start(self, adopt=()):
        """Begin measuring; `adopt`: pids (a previous stop(keep=True)) to move into these cgroups."""
        for pid in adopt if self.dirs else ():
            move_to(pid, self.dirs)
        self.t0 = time.monotonic()
        self.ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.host0 = bringup.host_cpu_s()

    def procs(self):
        return [int(p) for p in read(os.path.join(self.dirs["cpuacct"], "cgroup.procs")).split()]

    def stop(self, keep=False):
        """The usage: host_cpu_s, cpu_s, peak_mib; with `keep`, also `kept`, the pids left running
        (moved to our own cgroups, for the next meter's start(adopt=...))."""
        out = {"host_cpu_s": bringup.host_cpu_s() - self.host0}
        if self.dirs and keep:
            out["kept"] = self.procs()
            for pid in out["kept"]:
                move_to(pid, self.parents)
        if self.dirs:
            # Nothing is left to end after keep: the cgroups' usage stays when their processes leave.
            for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
                for pid in self.procs():
                    try:
                        os.kill(pid, sig)
                    except ProcessLookupError:
                        pass
                deadline = time.monotonic() + grace
                while self.procs() and time.monotonic() < deadline:
                    time.sleep(0.05)
                if not self.procs():
                    break
            usage = read_usage(self.dirs)
            out.update(cpu_s=usage["cpu_s"], peak_mib=usage["peak_bytes"] / MIB)
            for path in self.dirs.values():
                deadline = time.monotonic() + 10
                while True:
                    try:
                        os.rmdir(path)
                        break
                    except OSError:
                        if time.monotonic() > deadline:
                            print("scale: could not remove cgroup %s" % path, flush=True)
                            break
                        time.sleep(0.1)
        else:
            ru = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (ru.ru_utime - self.ru0.ru_utime) + (ru.ru_stime - self.ru0.ru_stime)
            out.update(cpu_s=cpu, peak_mib=ru.ru_maxrss / 1024.0)
        return out


def ansible_forks():
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(os.path.join(ROOT, "ansible.cfg"))
    return int(os.environ.get("ANSIBLE_FORKS") or cfg.get("defaults", "forks", fallback="5"))


class Scale:
    def __init__(self, args):
        self.args = args
        self.bench = bringup.Bench(args)
        self.work = os.path.join(self.bench.work, "scale")
        os.makedirs(self.work, exist_ok=True)
        self.method = None

    def sandbox(self, *argv, check=True):
        t0 = time.monotonic()
        bringup.run([SANDBOX, *argv], check=check)
        return time.monotonic() - t0

    def measured(self, inv, playbook, tag, extra_args=(), check=True, adopt=(), keep=False, timeout=None):
        """One playbook run in its own cgroups: wall, controller CPU and peak memory, host CPU,
        and the recording callback's document (tasks, pair rounds). `adopt`, `keep`: Meter's, to
        run on the connections a previous run left open (`kept`, the pids, in the answer).
        `timeout`: a run that outlives it is killed (`hung`, rc None); `launched`: its start (epoch)."""
        meter = Meter("raygate-bench-" + tag)
        self.method = meter.method
        record = os.path.join(self.work, tag)
        popen_kw = dict(meter.popen_kw(), **({"timeout": timeout} if timeout else {}))
        # The callback reads the cgroup's CPU at each task's start: the controller's CPU task by task.
        cpu_env = {"RAYGATE_BENCH_CPU_FILE": os.path.join(meter.dirs["cpuacct"], "cpuacct.usage")} if meter.dirs else {}
        meter.start(adopt=adopt)
        launched, t0 = time.time(), time.monotonic()
        try:
            wall = self.bench.playbook(
                inv,
                playbook,
                record=record,
                extra_args=extra_args,
                popen_kw=popen_kw,
                check=check,
                count_ssh=False,
                extra_env=cpu_env,
            )
            rc, hung = self.bench.last_rc, False
        except subprocess.TimeoutExpired:  # ansible-playbook is killed; the meter ends the rest
            wall, rc, hung = time.monotonic() - t0, None, True
        out = meter.stop(keep=keep)
        out.update(wall_s=wall, rc=rc, launched=launched)
        if timeout:
            out["hung"] = hung
        try:
            out["tasks"] = json.loads(read(record + ".tasks.json"))
        except (OSError, ValueError):
            out["tasks"] = None
        profile = task_cpu(out["tasks"], out.get("cpu_s"))
        if profile:
            out["task_cpu"] = profile
        if playbook == "site.yml":
            # The final wait starts whatever became of the nodes: a run that left some out
            # (degraded, rc 0) never had every node joined.
            try:
                out["complete"] = every_node_in(read(record + ".log"))
            except OSError:
                out["complete"] = False
            out["joined_s"] = joined_at(out["tasks"], launched) if out["complete"] else None
        return out

    def up(self, n, *flags):
        used0 = mem_used(read("/proc/meminfo"))
        sb = {"up_s": self.sandbox("up", str(n), *flags)}
        sb["node_mib"] = (mem_used(read("/proc/meminfo")) - used0) / MIB / n
        t0 = time.monotonic()
        bringup.run([SANDBOX, "status"])
        sb["status_s"] = time.monotonic() - t0
        return sb, used0

    def site_size(self, n):
        print("scale: site.yml, N=%d: sandbox up, install Ray once" % n, flush=True)
        sb, used0 = self.up(n)
        inv = self.bench.inventory(n)
        self.bench.playbook(inv, "site.yml")
        self.bench.playbook(inv, "teardown.yml")
        result = {"sandbox": sb, "runs": {}, "repeats": []}
        for rep in range(1, self.args.repeats + 1):
            got = {}
            self.bench.force_clean(n)
            # The floor and the peer are bringup.py's; on 2 cores, 20 plain `ray start`s at once
            # can time out ("The current node timed out during startup"): recorded, not fatal.
            for key, measure, skip in (("floor", self.bench.floor, self.args.skip_floor),
                                       ("peer", self.bench.peer, self.args.skip_peer)):  # fmt: skip
                if skip:
                    continue
                try:
                    result[key] = measure(n)
                except SystemExit as exc:
                    result[key] = {"error": str(exc).splitlines()[0][:300]}
                    print("scale: N=%d: %s failed: %s" % (n, key, result[key]["error"]), flush=True)
                self.bench.force_clean(n)
            # c from cold connections (a first run); d and e reuse those c opened, as bringup.py's
            # and a user's next run within ControlPersist do, their CPU charged to d and e.
            got["c"] = self.measured(inv, "site.yml", "site-n%d-r%d-c" % (n, rep), keep=True)
            result["ray_node_mib"] = (mem_used(read("/proc/meminfo")) - used0) / MIB / n
            pids = self.bench.raylet_pids(n)
            warm = got["c"].pop("kept", ())
            got["d"] = self.measured(inv, "site.yml", "site-n%d-r%d-d" % (n, rep), adopt=warm, keep=True)
            after = self.bench.raylet_pids(n)
            got["d"]["restarted"] = sum(1 for h in pids if pids[h] != after.get(h))
            got["e"] = self.measured(inv, "teardown.yml", "site-n%d-r%d-e" % (n, rep), adopt=got["d"].pop("kept", ()))
            left = self.bench.leftovers(n)
            got["e"]["left"] = sum(len(v["processes"]) + len(v["ports"]) + len(v["files"]) for v in left.values())
            if n in C0_SIZES:
                got["c0"] = self.gate_off(inv, n, rep)
            for run in got.values():
                run.pop("tasks", None)
            result["repeats"].append(got)
            print("scale: site.yml N=%d repeat %d: %s" % (n, rep, brief(got)), flush=True)
        result["runs"] = median_runs(result["repeats"])
        result["sandbox"]["down_s"] = self.sandbox("down")
        return result

    def gate_off(self, inv, n, rep):
        """c0: site.yml with the health gate off, from the state c started from (Ray installed, not
        running, no control connection), measured as c is (to all joined in the GCS too); then down."""
        self.bench.force_clean(n)
        run = self.measured(inv, "site.yml", "site-n%d-r%d-c0" % (n, rep), extra_args=GATE_OFF)
        self.bench.playbook(inv, "teardown.yml")
        return run

    def scenario(self, i, spec):
        path = os.path.join(self.work, "scenario-node%d.json" % i)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(spec, f)
        self.sandbox("scenario", str(i), path)

    def health_size(self, n):
        print("scale: health.yml, N=%d light nodes" % n, flush=True)
        sb, unused_used0 = self.up(n, "--light")
        inv = self.bench.inventory(n)
        result = {"sandbox": sb, "cases": {}}
        for count in self.args.bad:
            nodes = bad_nodes(n, count)
            if nodes is None:
                print("scale: N=%d is too small for %d bad node(s), skipped" % (n, count), flush=True)
                continue
            for i in nodes:
                self.scenario(i, BAD)
            tag = "health-n%d-bad%d" % (n, count)
            extra = [
                "-e",
                "raygate_health_report_dir=%s" % os.path.join(self.work, tag, "health"),
                "-e",
                "raygate_run_summary_dir=%s" % os.path.join(self.work, tag, "runs"),
            ]
            got = self.measured(inv, "health.yml", tag, extra_args=extra, check=False)
            got["pairs"] = pair_rounds(got.pop("tasks"))
            got["bad"] = nodes
            result["cases"][str(count)] = got
            print("scale: health.yml N=%d, %d bad: %s" % (n, count, brief({"h": got})), flush=True)
            for i in nodes:
                self.scenario(i, HEALTHY)
        if not self.args.skip_mix:
            result["cases"]["mix"] = self.mix_case(
                inv, n, hang_limit((result["cases"].get("0") or {}).get("wall_s"), n)
            )
        result["sandbox"]["down_s"] = self.sandbox("down")
        return result

    def mix_case(self, inv, n, limit):
        case = MixCase(self, inv, n)
        try:
            got = case.run(limit)
        except SystemExit as exc:  # the mix could not be applied: recorded, the other sizes go on
            error = str(exc).splitlines()[0][:300]
            print("scale: N=%d: the fault mix could not be applied: %s" % (n, error), flush=True)
            mix = {str(i): kind for i, kind in sorted(case.mix.items())}
            return {"mix": mix, "error": error, "ended": False, "limit_s": limit, "problems": [error]}
        print("scale: health.yml N=%d, the fault mix: %s" % (n, brief({"mix": got})), flush=True)
        print("scale: N=%d, the fault mix: %s" % (n, "; ".join(got["problems"]) or "nothing wrong"), flush=True)
        return got


class LogWatch:
    """Calls `action` once, from a thread, when a line of the file `path` (which another process
    writes meanwhile; it need not exist yet) matches `pattern`. `fired`: when it did (epoch)."""

    def __init__(self, path, pattern, action, poll=0.1):
        self.path, self.pattern, self.action, self.poll = path, pattern, action, poll
        self.fired = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.done.set()
        self.thread.join(timeout=60)

    def loop(self):
        pos, rest = 0, b""
        while not self.done.is_set():
            try:
                with open(self.path, "rb") as f:
                    f.seek(pos)
                    chunk = f.read()
                    pos = f.tell()
            except FileNotFoundError:
                chunk = b""
            *lines, rest = (rest + chunk).split(b"\n")
            if any(self.pattern.match(line.decode("utf-8", "replace")) for line in lines):
                self.fired = time.time()
                self.action()
                return
            self.done.wait(self.poll)


class MixCase:
    """The fleet fault mix on one health.yml size (issue 27, item 4), applied as the fault suite's
    tests/integration/faults/test_fleet_mix.py does: the scenarios, the flaky nodes' nft rule, an
    `ansible -m ping` that leaves Ansible's persisted connections, the dead nodes' sshd killed;
    the dark nodes' links go down when health.yml's node play starts. Afterwards links, rule and
    scenarios are put back (the dead nodes' sshd stays gone: the sandbox comes down next), and
    fault_mix.judge reads the report and the run summary."""

    def __init__(self, scale, inv, n):
        self.scale, self.inv, self.n = scale, inv, n
        self.mix = fault_mix.assign(n, mix_count(n))
        self.tag = "health-n%d-mix" % n
        self.dir = os.path.join(scale.work, self.tag)

    def of(self, *kinds):
        return [i for i, kind in sorted(self.mix.items()) if kind in kinds]

    def on_node(self, i, command):
        return bringup.run([SANDBOX, "exec", str(i), "bash", "-c", command], check=False).returncode

    def prepare(self):
        """Every fault but the dark nodes' (fault_mix.apply); the exit status of its ping."""
        ansible = os.path.join(os.path.dirname(self.scale.args.ansible_playbook), "ansible")
        env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"))
        env["ANSIBLE_COLLECTIONS_PATH"] = os.path.join(ROOT, ".build", "collections")
        try:
            return fault_mix.apply(self.mix, self.dir, ansible, self.inv, env).returncode
        except RuntimeError as exc:
            raise SystemExit("scale: the fault mix at N=%d: %s" % (self.n, exc)) from exc

    def go_dark(self):
        for i in self.of("dark"):
            bringup.run(fault_mix.link_command(i, False), check=False)

    def restore(self):
        for i in self.of("dark"):
            bringup.run(fault_mix.link_command(i, True), check=False)
        for i in self.of("flaky"):
            self.on_node(i, fault_mix.FLAKY_UNDO)
        for i in self.of(*fault_mix.SCENARIOS):
            self.scale.scenario(i, fault_mix.HEALTHY)

    def run(self, limit):
        os.makedirs(self.dir, exist_ok=True)
        print("scale: N=%d, the fault mix on %d nodes: %s" % (self.n, len(self.mix), self.mix), flush=True)
        log = os.path.join(self.scale.work, self.tag + ".log")
        if os.path.exists(log):
            os.unlink(log)  # the watch must see this run's node play, not an earlier run's
        try:
            ping_rc = self.prepare()
            extra = ["-e", "raygate_health_report_dir=%s" % os.path.join(self.dir, "health")]
            extra += ["-e", "raygate_run_summary_dir=%s" % os.path.join(self.dir, "runs")]
            extra += ["-e", "raygate_health_query_timeout=%d" % MIX_QUERY_TIMEOUT]
            watch = LogWatch(log, NODE_PLAY, self.go_dark).start()
            try:
                got = self.scale.measured(
                    self.inv, "health.yml", self.tag, extra_args=extra, check=False, timeout=limit
                )
            finally:
                watch.stop()
        finally:
            self.restore()
        tasks = got.pop("tasks")
        problems, report, healthy = judge_mix(self.mix, self.n, self.dir, got["rc"])
        if watch.fired is None:
            problems.insert(0, "the node play never started: no node went dark")
        got.update(
            mix={str(i): kind for i, kind in sorted(self.mix.items())},
            ping_rc=ping_rc,
            limit_s=limit,
            query_timeout=MIX_QUERY_TIMEOUT,
            ended=not got["hung"],
            problems=problems,
            pairs=pair_rounds(tasks),
            detect=detect_times(tasks, got["launched"], self.mix),
            report_as={"node%d" % i: report_as(report, healthy, "node%d" % i) for i in self.mix},
        )
        return got


def brief(runs):
    return ", ".join(
        "%s: %.1f s wall, %.1f s CPU, %.0f MiB" % (k, r["wall_s"], r.get("cpu_s") or 0, r.get("peak_mib") or 0)
        for k, r in runs.items()
    )


def median_runs(repeats):
    """Per run name, the repeat whose wall time is the median (its CPU and memory with it)."""
    out = {}
    for name in repeats[0]:
        runs = sorted((r[name] for r in repeats if name in r), key=lambda r: r["wall_s"])
        out[name] = runs[(len(runs) - 1) // 2]
    return out


def plot(results, meta, scale_path, model_path):
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for play, style in (("site", "o-"), ("rerun", "v-"), ("health", "s-")):
        wall = play_points(results, play, "wall_s")
        cpu = play_points(results, play, "cpu_s")
        if wall:
            ax1.plot([n for n, unused_y in wall], [y for unused_n, y in wall], style, label=PLAYS[play])
        if cpu:
            ax2.plot([n for n, unused_y in cpu], [y for unused_n, y in cpu], style, label=PLAYS[play])
    for ax, label in ((ax1, "wall time, s"), (ax2, "controller CPU, s")):
        ax.set_xlabel("nodes (N)")
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("site.yml and health.yml against N (2-core sandbox, controller and nodes share it)")
    fig.tight_layout()
    fig.savefig(scale_path, dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000]
    for play, style in (("site", "-"), ("rerun", "-."), ("health", "--")):
        fit = fit_play(results, play)
        if not fit:
            continue
        ys = [project(fit, n, meta["forks"], meta["controller_cores"])["wall_s"] / 60.0 for n in xs]
        ax.plot(xs, ys, style, label="%s, model" % PLAYS[play])
        pts = play_points(results, play, "wall_s")
        ax.plot([n for n, unused_y in pts], [y / 60.0 for unused_n, y in pts], "o", color=ax.lines[-1].get_color())
    ax.set_xscale("log")
    ax.set_xlabel("nodes (N)")
    ax.set_ylabel("wall time, min")
    ax.set_title(
        "Model: forks %d, %d controller cores (dots: measured here)" % (meta["forks"], meta["controller_cores"])
    )
    ax.grid(True, alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(model_path, dpi=110)
    plt.close(fig)


def sizes(text):
    return [int(x) for x in text.split(",") if x.strip()]


def write_outputs(args, results, meta):
    plots = {}
    try:
        plot(results, meta, args.plot, args.model_plot)
        plots = {"scale": os.path.basename(args.plot), "model": os.path.basename(args.model_plot)}
    except ImportError:
        print("scale: no matplotlib, no plots (run through `make bench-scale`)", flush=True)
    existing = read(args.doc) if os.path.exists(args.doc) else ""
    block = render_doc(results, meta, plots)
    with open(args.doc, "w", encoding="utf-8") as f:
        f.write(bringup.merge_doc(existing, block, MARK_BEGIN, MARK_END, "# Scale"))
    print(render_model(results, meta["forks"], meta["controller_cores"], meta["controller_mem_mib"], meta["target_s"]))
    print()
    print(render_check(results, meta["host_cores"]))
    print("\nscale: wrote %s%s" % (args.doc, "".join(", " + p for p in plots.values())))


def build_parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--site", default="1,3,6", help="Ray node counts for site.yml ('' for none; default 1,3,6)")
    parser.add_argument("--health", default="100,300,1000", help="light node counts for health.yml ('' for none)")
    parser.add_argument(
        "--bad", default="0", help="bad-node counts per health.yml size (default 0; 0,1,3 adds the pair rounds' cases)"
    )
    parser.add_argument("--skip-mix", action="store_true", help="no fault-mix case per health.yml size")
    parser.add_argument("--repeats", "-k", type=int, default=3, help="repeats per site.yml size (default 3)")
    parser.add_argument("--skip-peer", action="store_true", help="do not run `ray up`/`ray down`")
    parser.add_argument("--skip-floor", action="store_true", help="do not run the plain-ssh floor")
    parser.add_argument("--controller-cores", type=int, default=8, help="the model's controller cores (default 8)")
    parser.add_argument("--controller-mem-gib", type=float, default=16, help="the model's controller memory")
    parser.add_argument("--target-minutes", type=float, default=30, help="the longest run one controller may take")
    parser.add_argument("--doc", default=os.path.join(ROOT, "docs", "SCALE.md"))
    parser.add_argument("--plot", default=os.path.join(ROOT, "docs", "scale.png"))
    parser.add_argument("--model-plot", default=os.path.join(ROOT, "docs", "scale-model.png"))
    parser.add_argument("--json", default=os.path.join(ROOT, "artifacts", "scale", "results.json"))
    parser.add_argument(
        "--from-json",
        action="append",
        help="render the doc and plots from this results file; run nothing (repeat it to merge runs: a later "
        "file's sizes replace an earlier one's)",
    )
    parser.add_argument("--ray", default=os.path.join(ROOT, ".build", "bench-venv", "bin", "ray"))
    parser.add_argument("--ansible-playbook", default=os.path.join(ROOT, ".venv", "bin", "ansible-playbook"))
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    args.bad = sizes(args.bad)
    if args.from_json:
        doc = merge_results([json.loads(read(path)) for path in args.from_json])
        meta = doc["meta"]
        meta.update(
            controller_cores=args.controller_cores,
            controller_mem_mib=args.controller_mem_gib * 1024,
            target_s=args.target_minutes * 60,
        )
        write_outputs(args, doc["results"], meta)
        return 0
    if os.geteuid() != 0:
        parser.error("must run as root (it builds sandbox nodes)")
    tools = [args.ansible_playbook] + ([] if args.skip_peer else [args.ray])
    for tool in tools:
        if not os.access(tool, os.X_OK):
            parser.error("%s not found: run `make bench-scale`, which builds it" % tool)
    scale = Scale(args)
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    meta = {
        "started": started,
        "argv": " ".join(argv if argv is not None else sys.argv[1:]),
        "repeats": args.repeats,
        "forks": ansible_forks(),
        "host_cores": os.cpu_count() or 1,
        "controller_cores": args.controller_cores,
        "controller_mem_mib": args.controller_mem_gib * 1024,
        "target_s": args.target_minutes * 60,
        "machine": dict(bringup.machine_info(), **{"single-core yardstick": "%.2f s" % yardstick()}),
        "versions": bringup.versions_info(args),
        "start_throttle": scale.bench.throttle,
    }
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    t0 = time.monotonic()
    results = {"site": {}, "health": {}}
    try:
        # Saved after each size (with the method known so far): a run that dies keeps what it measured.
        for n in sizes(args.site):
            results["site"][str(n)] = scale.site_size(n)
            meta["method"] = scale.method or "n/a"
            save(args.json, results, meta)
        for n in sizes(args.health):
            results["health"][str(n)] = scale.health_size(n)
            meta["method"] = scale.method or "n/a"
            save(args.json, results, meta)
    finally:
        bringup.run([SANDBOX, "down"], check=False)
    meta.update(duration_s=time.monotonic() - t0, method=scale.method or "n/a")
    save(args.json, results, meta)
    write_outputs(args, results, meta)
    return 0


def save(path, results, meta):
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
