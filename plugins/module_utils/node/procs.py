# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Find Ray's processes on a node by reading /proc.

Names alone are not enough: after ``ray down`` the cluster launcher leaves
``log_monitor.py`` and agents behind whose names look like any Python process. Every Ray
daemon carries its session directory on its command line, so we match on that as well as
on the binaries and scripts Ray starts.
"""

from __future__ import annotations

import os

from ansible_collections.raygate.cluster.plugins.module_utils._runner import QUERY_TIMEOUT, CommandError

# Binaries (comm) and script paths (in cmdline) that only Ray starts.
RAY_COMMS = ("raylet", "gcs_server")
RAY_SCRIPTS = (
    "ray/dashboard/dashboard.py",
    "ray/dashboard/agent.py",
    "ray/_private/log_monitor.py",
    "ray/_private/runtime_env/agent/main.py",
    "ray/autoscaler/_private/monitor.py",
    "ray/_private/workers/default_worker.py",
    "ray/util/client/server",
    "ray.util.client.server",  # the head's client server runs as `python -m ray.util.client.server`
    "ray/_private/ray_process_reaper.py",
)


def _read(path, binary=False):
    try:
        with open(path, "rb" if binary else "r") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError):
        return None


def process_table(proc_root="/proc"):
    """Every process as {'pid', 'ppid', 'comm', 'argv'}; vanished ones are skipped."""
    table = []
    for entry in os.listdir(proc_root):
        if not entry.isdigit():
            continue
        base = os.path.join(proc_root, entry)
        comm = _read(os.path.join(base, "comm"))
        raw = _read(os.path.join(base, "cmdline"), binary=True)
        stat = _read(os.path.join(base, "stat"))
        if comm is None or raw is None:
            continue
        argv = [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]
        ppid = 0
        if stat and ")" in stat:
            fields = stat.rsplit(")", 1)[1].split()
            ppid = int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else 0
        table.append({"pid": int(entry), "ppid": ppid, "comm": comm.strip(), "argv": argv})
    return table


def is_ray_process(proc, session_roots=("/tmp/ray",)):
    """True when a process is one of Ray's, by binary, script, worker title or session dir."""
    comm = proc["comm"]
    cmdline = " ".join(proc["argv"])
    if comm in RAY_COMMS or comm.startswith("ray::") or cmdline.startswith("ray::"):
        return True
    if any(script in cmdline for script in RAY_SCRIPTS):
        return True
    return any(root.rstrip("/") + "/session_" in cmdline for root in session_roots if root)


def ray_processes(proc_root="/proc", session_roots=("/tmp/ray",), exclude=()):
    """Ray's processes on this node, never including the pids in ``exclude`` (ourselves)."""
    skip = set(exclude) | {os.getpid()}
    return [p for p in process_table(proc_root) if p["pid"] not in skip and is_ray_process(p, session_roots)]


def parse_flags(argv):
    """``--some_flag=value`` / ``--some-flag=value`` arguments as {'some_flag': 'value'}."""
    flags = {}
    for arg in argv:
        if arg.startswith("--") and "=" in arg:
            key, value = arg[2:].split("=", 1)
            flags[key.replace("-", "_")] = value
    return flags


def find_daemon(procs, comm):
    """The first process whose comm is ``comm`` (raylet, gcs_server), with its flags."""
    for proc in procs:
        if proc["comm"] == comm:
            return dict(proc, flags=parse_flags(proc["argv"][1:]))
    return None


def started_at(pid, proc_root="/proc"):
    """Unix time process ``pid`` started (the boot time plus its start in clock ticks), or None."""
    stat, boot = _read(os.path.join(proc_root, str(pid), "stat")), _read(os.path.join(proc_root, "stat"))
    try:
        since_boot = int(stat.rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
        btime = [float(line.split()[1]) for line in boot.splitlines() if line.startswith("btime ")][0]
    except (AttributeError, IndexError, ValueError):
        return None
    return btime + since_boot


def summarize(procs):
    """Short, printable description of processes for messages and reports."""
    return ["%s (pid %s)" % (" ".join(p["argv"])[:160] or p["comm"], p["pid"]) for p in procs]


def gpu_processes(runner, warn, timeout=QUERY_TIMEOUT):
    """The compute processes nvidia-smi lists ("pid, name" lines); none without nvidia-smi. A quick
    query with its own bound: on a GPU fallen off the bus nvidia-smi never returns, and then WARN
    says the GPU processes were not checked (Ray's own processes are checked from /proc either way)."""
    smi = runner.which("nvidia-smi")
    if not smi:
        return []
    try:
        rc, out, _err = runner.run([smi, "--query-compute-apps=pid,process_name", "--format=csv,noheader"],
                                   timeout=timeout)  # fmt: skip
    except CommandError as exc:
        warn("GPU processes not checked: nvidia-smi did not answer (%s)" % exc)
        return []
    return [line.strip() for line in out.splitlines() if line.strip()] if rc == 0 else []
