# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Bring-up benchmark: raygate against plain ssh and Ray's cluster launcher on the same sandbox nodes.

For each node count N (default 1, 3, 6) it builds N sandbox nodes, installs the pinned Ray once
with site.yml and takes it down again (teardown.yml keeps the virtualenv), so every measurement
starts from "Ray installed, not running". Then, k times (default 3), on the same nodes:

  (a) floor: plain ssh, `ray start --head` with the port plan, the workers in parallel, poll until
      every node and GPU has joined (GCS); also when the dashboard lists them all; then `ray stop`
  (b) peer: `ray up` of Ray's cluster launcher (local provider, same pinned ports, no setup
      commands), time to its return and to all joined; `ray down`, and what it leaves running
  (c) site.yml from the same state (health gate on simulated GPUs included)
  (d) site.yml again on the running cluster (raylet PIDs compared: nothing may restart)
  (e) teardown.yml, then a check that nothing is left

It prints one table with medians (min-max) and the ratios, and writes docs/BENCHMARKS.md (between
its bench markers, so the analysis around them is kept), docs/benchmarks.png and a JSON file with
every sample. Run it as root through `make bench`; never in CI (it takes about 40 minutes).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import threading
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SANDBOX = os.path.join(ROOT, "tests", "sandbox", "sandbox.sh")
SANDBOX_VARS = os.path.join(ROOT, "inventories", "sandbox", "group_vars", "ray_cluster", "main.yml")
STATE = os.environ.get("RAYGATE_SANDBOX_DIR", "/srv/raygate/sandbox")
VENV_RAY = "/opt/raygate/current/bin/ray"
VENV_PY = "/opt/raygate/current/bin/python"
MARK_BEGIN = "<!-- bench:begin (written by bench/bringup.py; edit outside the markers) -->"
MARK_END = "<!-- bench:end -->"
STEPS = ("a", "a_dash", "a_stop", "b_return", "b", "b_down", "c", "d", "e")
LABELS = {
    "a": "(a) floor: plain ssh, all joined (GCS)",
    "a_dash": "(a) floor: dashboard lists all",
    "a_stop": "(a) floor: `ray stop` everywhere",
    "b_return": "(b) `ray up` returns",
    "b": "(b) `ray up`: all joined (GCS)",
    "b_down": "(b) `ray down`",
    "c": "(c) raygate site.yml (gate included)",
    "d": "(d) site.yml again (no change)",
    "e": "(e) teardown.yml",
}
SSH_VALUE_OPTS = set("BbcDEeFIiJLlmOopQRSWwP")

# Runs on the head with the node's Ray: waits for N nodes and G GPUs in the GCS, prints "gcs", then
# for the dashboard's state API to list N alive nodes, prints "dashboard".
POLLER = r"""
import json, sys, time, urllib.request
want, gpus, gcs, dash = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4]
import ray
ray.init(address=gcs, logging_level="ERROR", log_to_driver=False, include_dashboard=False)
while True:
    alive = [n for n in ray.nodes() if n.get("Alive")]
    if len(alive) >= want and sum(n.get("Resources", {}).get("GPU", 0) for n in alive) >= gpus:
        break
    time.sleep(0.1)
print("gcs", flush=True)
while True:
    try:
        with urllib.request.urlopen(dash + "/api/v0/nodes?limit=10000", timeout=5) as resp:
            rows = json.load(resp)["data"]["result"]["result"]
        if sum(1 for r in rows if r.get("state") == "ALIVE") >= want:
            break
    except Exception:
        pass
    time.sleep(0.1)
print("dashboard", flush=True)
ray.shutdown()
"""

# Runs on a node with the system Python: what of Ray or raygate is left there. Deliberately not
# raygate's own ray_procs/port_plan detection: a broader, independent look (anything of the venv,
# any listener but sshd) is what catches a process those miss.
LEFTOVERS = r"""
import json, os
procs, ports = [], []
for pid in os.listdir("/proc"):
    if not pid.isdigit() or int(pid) == os.getpid():
        continue
    try:
        with open("/proc/%s/cmdline" % pid, "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        continue
    if "/opt/raygate/" in cmd or cmd.startswith("ray::") or "ray_bootstrap" in cmd:
        procs.append(pid + " " + cmd[:80])
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    try:
        lines = open(table).read().splitlines()[1:]
    except OSError:
        continue
    for line in lines:
        fields = line.split()
        port = int(fields[1].rsplit(":", 1)[1], 16)
        if fields[3] == "0A" and port != 22:
            ports.append(port)
files = [p for p in ("/etc/raygate", "/etc/raygate/nccl.env", "/etc/raygate/firewall.nft") if os.path.exists(p)]
print(json.dumps({"processes": procs, "ports": sorted(set(ports)), "files": files}))
"""


# ---- pure helpers (tested in tests/unit/bench) --------------------------------------------------
def host_cpu_ticks(stat_text):
    """Busy clock ticks of the whole machine from /proc/stat (all but idle and iowait)."""
    for line in stat_text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            values = [int(v) for v in fields[1:]]
            busy = sum(values[:8]) - values[3] - (values[4] if len(values) > 4 else 0)
            return busy
    raise ValueError("no cpu line in /proc/stat")


def host_cpu_s():
    """The machine's busy CPU seconds so far (nodes, controller and bench together)."""
    with open("/proc/stat", encoding="utf-8") as f:
        return host_cpu_ticks(f.read()) / float(os.sysconf("SC_CLK_TCK"))


def summary(values):
    """{'median', 'min', 'max', 'n'} of the numbers in `values` (None when there are none)."""
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def fmt(stat):
    if not stat:
        return "n/a"
    if stat["n"] == 1 or stat["min"] == stat["max"]:
        return "%.1f" % stat["median"]
    return "%.1f (%.1f-%.1f)" % (stat["median"], stat["min"], stat["max"])


def ratio(num, den):
    if not num or not den or not den["median"]:
        return None
    return num["median"] / den["median"]


def ssh_host(tool, argv):
    """The host an ssh/sftp/scp command line talks to ('' when none is found)."""
    args = list(argv)
    positional = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("-") and len(arg) > 1 and not positional:
            i += 2 if (len(arg) == 2 and arg[1] in SSH_VALUE_OPTS) else 1
            continue
        positional.append(arg)
        i += 1
    if tool == "scp":  # the remote side is [host]:path or host:path
        for arg in positional:
            if arg.startswith("["):
                return arg[1 : arg.index("]")].split("@", 1)[-1] if "]" in arg else ""
            if ":" in arg:
                return arg.split(":", 1)[0].split("@", 1)[-1]
        return ""
    if not positional:
        return ""
    return positional[0].split("@", 1)[-1].strip("[]")


def count_ssh_log(text):
    """{host: {'ssh': n, 'sftp': n, 'scp': n}} from the lines bench/ssh-count writes."""
    counts = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split("\t")
        tool, argv = fields[0], fields[1:]
        host = ssh_host(tool, argv)
        if not host:
            continue
        per = counts.setdefault(host, {"ssh": 0, "sftp": 0, "scp": 0})
        per[tool] = per.get(tool, 0) + 1
    return counts


def count_accepted(text):
    """Number of SSH connections sshd accepted, from its log."""
    return len(re.findall(r"^Accepted \S+ for \S+ from ", text, flags=re.M))


def per_host_counts(tasks_doc, ssh_counts, accepted, hosts):
    """Per inventory host: tasks run, ssh commands (ssh+sftp+scp) and TCP connections accepted."""
    rows = {}
    for name, ip in hosts.items():
        task = tasks_doc.get("hosts", {}).get(name, {})
        ssh = ssh_counts.get(ip, {})
        rows[name] = {
            "tasks": task.get("tasks", 0),
            "changed": task.get("changed", 0),
            "ssh_commands": sum(ssh.values()),
            "tcp_connections": accepted.get(name, 0),
        }
    return rows


def top_tasks(tasks_doc, limit=12):
    """The slowest tasks of a recorded playbook run: [(seconds, name)]."""
    tasks = sorted(tasks_doc.get("tasks", []), key=lambda t: -t.get("seconds", 0))
    return [(t["seconds"], t["name"]) for t in tasks[:limit]]


def evaluate_targets(results):
    """Each target of issue 5 with its numbers: [(target, measured text, met: bool or None)]."""
    out = []
    n3 = results.get("3")
    n6 = results.get("6")
    if n3:
        c, b, a, d, e = (n3["stats"].get(k) for k in ("c", "b", "a", "d", "e"))
        if c and b:
            out.append(
                (
                    "c <= b (all joined), N=3",
                    "c %.1f s, b %.1f s" % (c["median"], b["median"]),
                    c["median"] <= b["median"],
                )
            )
        if c and a:
            out.append(
                (
                    "c - a <= 10 s at N=3",
                    "c - a = %.1f s" % (c["median"] - a["median"]),
                    c["median"] - a["median"] <= 10,
                )
            )
        if n6 and c and a and n6["stats"].get("c") and n6["stats"].get("a"):
            g3 = c["median"] - a["median"]
            g6 = n6["stats"]["c"]["median"] - n6["stats"]["a"]["median"]
            out.append(
                (
                    "(c - a) at N=6 <= 1.3 x (c - a) at N=3",
                    "%.1f s vs 1.3 x %.1f = %.1f s" % (g6, g3, 1.3 * g3),
                    g6 <= 1.3 * g3,
                )
            )
        if d and c:
            restarted = sum(n3.get("d_restarted", []))
            out.append(
                (
                    "d <= 0.25 x c, no Ray process restarted",
                    "d/c = %.2f, restarted raylets: %d" % (d["median"] / c["median"], restarted),
                    d["median"] <= 0.25 * c["median"] and restarted == 0,
                )
            )
        if e:
            left = sum(n3.get("e_left", []))
            out.append(
                (
                    "e <= 5 s at N=3, nothing left",
                    "e %.1f s, leftovers: %d" % (e["median"], left),
                    e["median"] <= 5 and left == 0,
                )
            )
    return out


def render_table(results):
    """Markdown: one row per measurement, one column per node count; then ratios and leftovers."""
    ns = sorted(results, key=int)
    head = "| seconds, median (min-max) | " + " | ".join("N=%s" % n for n in ns) + " |"
    lines = [head, "|---|" + "---|" * len(ns)]
    for step in STEPS:
        lines.append("| %s | %s |" % (LABELS[step], " | ".join(fmt(results[n]["stats"].get(step)) for n in ns)))
    for label, num, den in (("c/a", "c", "a"), ("c/b", "c", "b"), ("d/c", "d", "c")):
        cells = []
        for n in ns:
            r = ratio(results[n]["stats"].get(num), results[n]["stats"].get(den))
            cells.append("n/a" if r is None else "%.2f" % r)
        lines.append("| ratio %s | %s |" % (label, " | ".join(cells)))
    rows = (
        ("Ray processes left right after `ray down` (all nodes)", "b_left"),
        ("Ray processes, ports, files left after teardown.yml", "e_left"),
        ("raylets restarted by the second site.yml", "d_restarted"),
    )
    for label, key in rows:
        cells = [("max %d" % max(results[n].get(key) or [0])) if results[n].get(key) else "n/a" for n in ns]
        lines.append("| %s | %s |" % (label, " | ".join(cells)))
    return "\n".join(lines)


def render_counts(results):
    """Markdown: tasks, ssh commands and TCP connections per host for (c) and (d), last repeat."""
    lines = ["| N | run | host | tasks | changed | ssh commands | TCP connections |", "|---|---|---|---|---|---|---|"]
    for n in sorted(results, key=int):
        for run in ("c", "d"):
            counts = results[n].get(run + "_counts") or {}
            for host in sorted(counts, key=lambda h: (len(h), h)):
                row = counts[host]
                lines.append(
                    "| %s | %s | %s | %d | %d | %d | %d |"
                    % (n, run, host, row["tasks"], row["changed"], row["ssh_commands"], row["tcp_connections"])
                )
    return "\n".join(lines)


def render_doc(results, machine, versions, plot_name, started, duration):
    parts = [MARK_BEGIN, "", "## Results", ""]
    parts.append(
        "Measured %s in %.0f min by `make bench` (`bench/bringup.py`, k=%s repeats per N)."
        % (started, duration / 60.0, max(len(r["samples"]["c"]) for r in results.values()))
    )
    parts += ["", render_table(results), ""]
    parts += ["![time against N](%s)" % plot_name, ""]
    parts += ["### Targets", "", "| target | measured | met |", "|---|---|---|"]
    for target, measured, met in evaluate_targets(results):
        parts.append("| %s | %s | %s |" % (target, measured, "yes" if met else "**no**"))
    parts += ["", "### Tasks and SSH per host (last repeat)", "", render_counts(results), ""]
    for run in ("c", "d", "e"):
        tops = results.get("3", {}).get(run + "_top") or []
        if tops:
            parts += ["", "Slowest tasks of (%s) at N=3, seconds:" % run, ""]
            parts += ["- %.2f %s" % (s, name) for s, name in tops]
    parts += ["", "### Machine and versions", ""]
    parts += ["- %s: %s" % (k, v) for k, v in list(machine.items()) + list(versions.items())]
    parts += ["", MARK_END]
    return "\n".join(parts)


def merge_doc(existing, block, begin=MARK_BEGIN, end=MARK_END, title="# Benchmarks"):
    """Replace the block of `existing` between the markers `begin` and `end` (or append it) and
    return the new text; a new document starts with `title`."""
    if existing and begin in existing and end in existing:
        before = existing.split(begin, 1)[0]
        after = existing.split(end, 1)[1]
        return before + block + after
    prefix = existing.rstrip() + "\n\n" if existing else title + "\n\n"
    return prefix + block + "\n"


# ---- talking to the nodes ------------------------------------------------------------------------
def key_path():
    return os.path.join(STATE, "id_ed25519")


def ssh_cmd(ip, command):
    return [
        "ssh",
        "-i",
        key_path(),
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "UserKnownHostsFile=/dev/null",
        "-o",
        "LogLevel=ERROR",
        "-o",
        "BatchMode=yes",
        "-o",
        "IdentitiesOnly=yes",
        "root@" + ip,
        command,
    ]


def run(cmd, check=True, **kw):
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)
    if check and proc.returncode != 0:
        raise SystemExit(
            "bench: %s failed (rc=%d):\n%s%s"
            % (" ".join(cmd)[:300], proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:])
        )
    return proc


def node_ip(i):
    """tests/sandbox/sandbox.sh's address plan: the (10+i)th address of 198.18.0.0 (past .255 on
    into 198.18.1.0, for the light nodes of a sandbox of more than 240)."""
    k = 10 + i
    return "198.18.%d.%d" % (k // 256, k % 256)


def batches(items, size):
    """``items`` in consecutive lists of at most ``size`` (all in one list when ``size`` is 0)."""
    items = list(items)
    size = size if size > 0 else max(len(items), 1)
    return [items[i : i + size] for i in range(0, len(items), size)]


class Bench:
    def __init__(self, args):
        self.args = args
        self.work = os.path.join(ROOT, ".build", "bench")
        self.ray = args.ray
        sys.path.insert(0, os.path.join(ROOT, ".build", "collections"))
        from ansible_collections.raygate.cluster.plugins.module_utils.net import port_plan as pp  # noqa: PLC0415

        self.pp = pp
        # The sandbox inventory's own values, so (a) and (b) start the very nodes site.yml does.
        with open(SANDBOX_VARS, encoding="utf-8") as f:
            group_vars = yaml.safe_load(f)
        self.plan = pp.build_plan(group_vars.get("raygate_ports") or {}, group_vars.get("raygate_port_offset", 0))
        self.gpus_per_node = int(group_vars["raygate_num_gpus"])
        self.amounts = [
            "--%s=%d" % (flag, int(group_vars["raygate_" + key]))
            for flag, key in (
                ("num-cpus", "num_cpus"),
                ("num-gpus", "num_gpus"),
                ("memory", "memory"),
                ("object-store-memory", "object_store_memory"),
            )
        ]
        # site.yml starts at most this many workers at once (raygate_start_throttle): the floor starts
        # its own the same way, or on 2 cores 19 workers at once all time out.
        self.throttle = int(group_vars.get("raygate_start_throttle") or 0)

    # -- setup -----------------------------------------------------------------------------
    def hosts(self, n):
        return {"node%d" % i: node_ip(i) for i in range(1, n + 1)}

    def inventory(self, n):
        inv = os.path.join(self.work, "inventory-%d" % n)
        os.makedirs(inv, exist_ok=True)
        text = run([SANDBOX, "inventory"]).stdout
        if n == 1:
            text += "    ray_workers:\n      hosts: {}\n"
        with open(os.path.join(inv, "hosts.yml"), "w", encoding="utf-8") as f:
            f.write(text)
        link = os.path.join(inv, "group_vars")
        if not os.path.islink(link):
            os.symlink(os.path.join(ROOT, "inventories", "sandbox", "group_vars"), link)
        return inv

    def playbook(
        self, inv, name, record=None, extra_args=(), popen_kw=None, check=True, count_ssh=True, extra_env=None
    ):
        """Run playbook `name` on inventory `inv` and return its wall time in seconds. `record`:
        a path prefix for the callback's task JSON and (with `count_ssh`, which puts bench/ssh-count
        in front of ssh) the ssh log; `extra_args` go on the command line; `popen_kw` to
        subprocess.run (bench/scale.py: a preexec_fn that joins a cgroup); `check`: a failed run
        ends the bench; `extra_env`: more environment for ansible-playbook."""
        env = dict(
            os.environ,
            ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
            ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".build", "collections"),
            **(extra_env or {}),
        )
        if record:
            env.update(
                ANSIBLE_CALLBACK_PLUGINS=os.path.join(HERE, "callback_plugins"),
                ANSIBLE_CALLBACKS_ENABLED="raygate_bench",
                RAYGATE_BENCH_TASKS_OUT=record + ".tasks.json",
            )
        if record and count_ssh:
            wrappers = os.path.join(self.work, "ssh-wrappers")
            os.makedirs(wrappers, exist_ok=True)
            for tool in ("ssh", "sftp", "scp"):
                link = os.path.join(wrappers, tool)
                if not os.path.lexists(link):
                    os.symlink(os.path.join(HERE, "ssh-count"), link)
            env.update(
                RAYGATE_BENCH_SSH_LOG=record + ".ssh.log",
                ANSIBLE_SSH_EXECUTABLE=os.path.join(wrappers, "ssh"),
                ANSIBLE_SFTP_EXECUTABLE=os.path.join(wrappers, "sftp"),
                ANSIBLE_SCP_EXECUTABLE=os.path.join(wrappers, "scp"),
            )
        if record:
            for suffix in (".tasks.json", ".ssh.log"):
                if os.path.exists(record + suffix):
                    os.unlink(record + suffix)
        log = (record or os.path.join(self.work, "playbook")) + ".log"
        t0 = time.monotonic()
        with open(log, "w", encoding="utf-8") as out:
            proc = subprocess.run(
                [self.args.ansible_playbook, "-i", inv, os.path.join(ROOT, name), *extra_args],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                check=False,
                cwd=ROOT,
                **(popen_kw or {}),
            )
        elapsed = time.monotonic() - t0
        self.last_rc = proc.returncode
        if check and proc.returncode != 0:
            with open(log, encoding="utf-8") as f:
                tail = f.read()[-4000:]
            raise SystemExit("bench: %s failed (rc=%d), log %s:\n%s" % (name, proc.returncode, log, tail))
        return elapsed

    def accepted(self, n):
        counts = {}
        for i in range(1, n + 1):
            path = os.path.join(STATE, "node%d" % i, "init.log")
            with open(path, encoding="utf-8", errors="replace") as f:
                counts["node%d" % i] = count_accepted(f.read())
        return counts

    def leftovers(self, n):
        out = {}
        for name, ip in self.hosts(n).items():
            proc = run(ssh_cmd(ip, "/usr/bin/python3 -"), input=LEFTOVERS)
            out[name] = json.loads(proc.stdout)
        return out

    def force_clean(self, n):
        """Bench housekeeping between measurements: no Ray process and no listener left on any node."""
        for i in range(1, n + 1):
            run([SANDBOX, "exec", str(i), "pkill", "-9", "-f", "/opt/raygate/|^ray::"], check=False)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            left = self.leftovers(n)
            if not any(v["processes"] or v["ports"] for v in left.values()):
                for i in range(1, n + 1):
                    run(
                        [SANDBOX, "exec", str(i), "sh", "-c", "rm -rf /tmp/ray /tmp/ray_bootstrap* ~/ray_bootstrap*"],
                        check=False,
                    )
                return
            time.sleep(0.5)
        raise SystemExit("bench: Ray would not go away: %s" % json.dumps(left))

    def raylet_pids(self, n):
        pids = {}
        for name, ip in self.hosts(n).items():
            pids[name] = run(ssh_cmd(ip, "pgrep -x raylet || true")).stdout.split()
        return pids

    # -- the measurements ----------------------------------------------------------------------
    def start_args(self, role, head_ip, ip):
        args = self.pp.ray_start_args(self.plan, role)[0]
        base = ["--head"] if role == "head" else ["--address=%s:%d" % (head_ip, self.plan["gcs"])]
        extra = ["--dashboard-host=%s" % ip] if role == "head" else []
        return base + ["--node-ip-address=%s" % ip] + args + self.amounts + extra + ["--disable-usage-stats"]

    def env_prefix(self, role):
        env = {"RAY_USAGE_STATS_ENABLED": "0"}
        env.update(self.pp.env_vars(self.plan, role))
        return " ".join("%s=%s" % kv for kv in sorted(env.items()))

    def poller(self, n, head_ip, t0, marks):
        """Start the poller on the head; fills marks['gcs'] and marks['dashboard'] (seconds since t0)."""
        gcs = "%s:%d" % (head_ip, self.plan["gcs"])
        dash = "http://%s:%d" % (head_ip, self.plan["dashboard"])
        cmd = ssh_cmd(head_ip, "%s - %d %d %s %s" % (VENV_PY, n, n * self.gpus_per_node, gcs, dash))
        proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        proc.stdin.write(POLLER)
        proc.stdin.close()

        def read():
            for line in proc.stdout:
                marks[line.strip()] = time.monotonic() - t0
                marks[line.strip() + "@cpu"] = host_cpu_s()

        thread = threading.Thread(target=read, daemon=True)
        thread.start()
        return proc, thread

    def wait_poller(self, proc, thread, timeout=300):
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise SystemExit("bench: the cluster did not complete within %ds" % timeout) from None
        thread.join(timeout=10)

    def floor(self, n):
        hosts = list(self.hosts(n).values())
        head = hosts[0]
        marks = {}
        t0, cpu0 = time.monotonic(), host_cpu_s()
        cmd = "%s %s start %s" % (self.env_prefix("head"), VENV_RAY, " ".join(self.start_args("head", head, head)))
        run(ssh_cmd(head, cmd))
        proc, thread = self.poller(n, head, t0, marks)
        for batch in batches(hosts[1:], self.throttle):
            workers = [
                subprocess.Popen(
                    ssh_cmd(
                        ip,
                        "%s %s start %s"
                        % (self.env_prefix("worker"), VENV_RAY, " ".join(self.start_args("worker", head, ip))),
                    ),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                for ip in batch
            ]
            for w in workers:
                err = w.communicate()[1]
                if w.returncode != 0:
                    raise SystemExit("bench: worker ray start failed: %s" % err[-2000:])
        self.wait_poller(proc, thread)
        t1 = time.monotonic()
        stops = [
            subprocess.Popen(ssh_cmd(ip, "%s stop" % VENV_RAY), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for ip in hosts
        ]
        for s in stops:
            s.wait()
        stop = time.monotonic() - t1
        return {
            "a": marks.get("gcs"),
            "a_dash": marks.get("dashboard"),
            "a_stop": stop,
            # The machine's CPU seconds until all joined: Ray's own start and the poller's.
            "a_cpu": marks["gcs@cpu"] - cpu0 if "gcs@cpu" in marks else None,
        }

    def ray_up_config(self, n):
        hosts = list(self.hosts(n).values())
        head = hosts[0]
        # Ray 2.60's autoscaler v2 counts the local provider's head as one of min_workers and then
        # loses it ("no longer found"), so one worker is never started: use the v1 autoscaler.
        # No throttle: the v1 autoscaler launches every min_workers node at once whatever its
        # upscaling_speed or AUTOSCALER_MAX_CONCURRENT_LAUNCHES (resource_demand_scheduler.py).
        head_cmd = "RAY_enable_autoscaler_v2=0 %s %s start %s --autoscaling-config=~/ray_bootstrap_config.yaml" % (
            self.env_prefix("head"),
            VENV_RAY,
            " ".join(self.start_args("head", head, head)),
        )
        worker_args = self.start_args("worker", "$RAY_HEAD_IP", "$NODE_IP")
        worker_args = [a for a in worker_args if not a.startswith("--node-ip")]
        worker_cmd = "%s %s start %s" % (self.env_prefix("worker"), VENV_RAY, " ".join(worker_args))
        config = {
            "cluster_name": "raygate-bench-%d" % n,
            "provider": {"type": "local", "head_ip": head, "worker_ips": hosts[1:]},
            "auth": {"ssh_user": "root", "ssh_private_key": key_path()},
            "min_workers": n - 1,
            "max_workers": n - 1,
            "upscaling_speed": 1.0,
            "idle_timeout_minutes": 5,
            "file_mounts": {},
            "initialization_commands": [],
            "setup_commands": [],
            "head_setup_commands": [],
            "worker_setup_commands": [],
            "head_start_ray_commands": ["%s stop" % VENV_RAY, head_cmd],
            "worker_start_ray_commands": ["%s stop" % VENV_RAY, worker_cmd],
        }
        path = os.path.join(self.work, "ray-up-%d.yaml" % n)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(config, f, indent=1)  # JSON is YAML
        return path

    def peer(self, n):
        path = self.ray_up_config(n)
        for stale in ("/tmp/cluster-raygate-bench-%d.state" % n, "/tmp/cluster-raygate-bench-%d.lock" % n):
            if os.path.exists(stale):
                os.unlink(stale)
        env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
        head = node_ip(1)
        marks = {}
        t0, cpu0 = time.monotonic(), host_cpu_s()
        up = run([self.ray, "up", "-y", "--no-config-cache", path], env=env, cwd=self.work)
        returned = time.monotonic() - t0
        with open(os.path.join(self.work, "ray-up-%d.log" % n), "w", encoding="utf-8") as f:
            f.write(up.stdout + up.stderr)
        proc, thread = self.poller(n, head, t0, marks)
        self.wait_poller(proc, thread)
        t1 = time.monotonic()
        down = run([self.ray, "down", "-y", path], env=env, cwd=self.work)
        down_s = time.monotonic() - t1
        with open(os.path.join(self.work, "ray-down-%d.log" % n), "w", encoding="utf-8") as f:
            f.write(down.stdout + down.stderr)
        left = self.leftovers(n)
        return {
            "b_return": returned,
            "b": marks.get("gcs"),
            "b_down": down_s,
            "b_left": sum(len(v["processes"]) for v in left.values()),
            "b_cpu": marks["gcs@cpu"] - cpu0 if "gcs@cpu" in marks else None,
        }

    def raygate(self, n, inv, rep):
        out = {}
        rec_c = os.path.join(self.work, "n%d-r%d-c" % (n, rep))
        before = self.accepted(n)
        out["c"] = self.playbook(inv, "site.yml", record=rec_c)
        pids = self.raylet_pids(n)
        mid = self.accepted(n)
        rec_d = os.path.join(self.work, "n%d-r%d-d" % (n, rep))
        out["d"] = self.playbook(inv, "site.yml", record=rec_d)
        after = self.accepted(n)
        pids_after = self.raylet_pids(n)
        out["d_restarted"] = sum(1 for h in pids if pids[h] != pids_after.get(h))
        rec_e = os.path.join(self.work, "n%d-r%d-e" % (n, rep))
        out["e"] = self.playbook(inv, "teardown.yml", record=rec_e)
        with open(rec_e + ".tasks.json", encoding="utf-8") as f:
            out["e_top"] = top_tasks(json.load(f))
        left = self.leftovers(n)
        out["e_left"] = sum(len(v["processes"]) + len(v["ports"]) + len(v["files"]) for v in left.values())
        hosts = self.hosts(n)
        for run_name, rec, b4, aft in (("c", rec_c, before, mid), ("d", rec_d, mid, after)):
            with open(rec + ".tasks.json", encoding="utf-8") as f:
                tasks = json.load(f)
            with open(rec + ".ssh.log", encoding="utf-8") as f:
                ssh = count_ssh_log(f.read())
            accepted = {h: aft[h] - b4[h] for h in aft}
            out[run_name + "_counts"] = per_host_counts(tasks, ssh, accepted, hosts)
            out[run_name + "_top"] = top_tasks(tasks)
            out[run_name + "_changed"] = sum(v.get("changed", 0) for h, v in tasks["hosts"].items() if h != "localhost")
        return out

    def one_size(self, n):
        print("bench: N=%d: sandbox up, install Ray once (site.yml + teardown.yml)" % n, flush=True)
        run([SANDBOX, "up", str(n)])
        inv = self.inventory(n)
        self.playbook(inv, "site.yml")
        self.playbook(inv, "teardown.yml")
        samples = {k: [] for k in STEPS}
        extra = {"b_left": [], "e_left": [], "d_restarted": [], "d_changed": []}
        last = {}
        for rep in range(1, self.args.repeats + 1):
            self.force_clean(n)
            got = self.floor(n)
            self.force_clean(n)
            if not self.args.skip_peer:
                got.update(self.peer(n))
                self.force_clean(n)
            last = self.raygate(n, inv, rep)
            got.update({k: last[k] for k in ("c", "d", "e", "d_restarted", "e_left", "d_changed")})
            for k in STEPS:
                samples[k].append(got.get(k))
            for k in extra:
                if k in got:
                    extra[k].append(got[k])
            print(
                "bench: N=%d repeat %d: %s"
                % (n, rep, ", ".join("%s=%.1f" % (k, got[k]) for k in STEPS if got.get(k) is not None)),
                flush=True,
            )
        result = {"samples": samples, "stats": {k: summary(v) for k, v in samples.items()}}
        result.update(extra)
        for k in ("c_counts", "d_counts", "c_top", "d_top", "e_top"):
            result[k] = last.get(k)
        return result


def machine_info():
    cpu = ""
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo", encoding="utf-8") as f:
        mem_kb = int(f.readline().split()[1])
    os_name = ""
    if os.path.exists("/etc/os-release"):
        with open("/etc/os-release", encoding="utf-8") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    os_name = line.split("=", 1)[1].strip().strip('"')
    return {
        "CPU": "%d cores, %s" % (os.cpu_count() or 0, cpu),
        "Memory": "%.0f GiB" % (mem_kb / 1048576.0),
        "OS": "%s, kernel %s" % (os_name, platform.release()),
        "Nodes": "sandbox namespace nodes on this one machine (tests/sandbox), simulated GPUs",
    }


def versions_info(args):
    ansible = run([args.ansible_playbook, "--version"]).stdout.splitlines()[0]
    ray = run([args.ray, "--version"]).stdout.strip()
    git = run(["git", "-C", ROOT, "describe", "--always", "--dirty"], check=False).stdout.strip()
    return {"Ansible": ansible, "Ray": ray, "Python (controller)": platform.python_version(), "raygate": git}


def plot(results, path):
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    ns = sorted(results, key=int)
    xs = [int(n) for n in ns]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for step, style in (("a", "o-"), ("b", "s-"), ("c", "^-"), ("d", "v-")):
        stats = [results[n]["stats"].get(step) for n in ns]
        pts = [(x, s) for x, s in zip(xs, stats) if s]
        if not pts:
            continue
        ys = [s["median"] for x, s in pts]
        err = [[s["median"] - s["min"] for x, s in pts], [s["max"] - s["median"] for x, s in pts]]
        ax.errorbar([x for x, s in pts], ys, yerr=err, fmt=style, capsize=3, label=LABELS[step])
    ax.set_xlabel("nodes (N)")
    ax.set_ylabel("seconds (median, min-max)")
    ax.set_xticks(xs)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("Bring-up time against cluster size (2-core sandbox)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--nodes", default="1,3,6", help="node counts, comma-separated (default 1,3,6)")
    parser.add_argument("--repeats", "-k", type=int, default=3, help="repeats per node count (default 3)")
    parser.add_argument("--skip-peer", action="store_true", help="do not run `ray up`/`ray down`")
    parser.add_argument("--doc", default=os.path.join(ROOT, "docs", "BENCHMARKS.md"))
    parser.add_argument("--plot", default=os.path.join(ROOT, "docs", "benchmarks.png"))
    parser.add_argument("--json", default=os.path.join(ROOT, ".build", "bench", "results.json"))
    parser.add_argument(
        "--ray",
        default=os.path.join(ROOT, ".build", "bench-venv", "bin", "ray"),
        help="the controller's ray CLI for `ray up`",
    )
    parser.add_argument("--ansible-playbook", default=os.path.join(ROOT, ".venv", "bin", "ansible-playbook"))
    parser.add_argument("--keep", action="store_true", help="leave the last sandbox running")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        parser.error("must run as root (it builds sandbox nodes)")
    for tool in (args.ansible_playbook, args.ray):
        if not os.access(tool, os.X_OK):
            parser.error("%s not found: run `make bench`, which builds it" % tool)
    sizes = [int(x) for x in args.nodes.split(",") if x.strip()]
    bench = Bench(args)
    os.makedirs(bench.work, exist_ok=True)
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    versions = versions_info(args)  # the commit measured, before anything is edited meanwhile
    t0 = time.monotonic()
    results = {}
    try:
        for n in sizes:
            results[str(n)] = bench.one_size(n)
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump(results, f, indent=1)
    finally:
        if not args.keep:
            run([SANDBOX, "down"], check=False)
    duration = time.monotonic() - t0
    print()
    print(render_table(results))
    print()
    for target, measured, met in evaluate_targets(results):
        print("%-45s %-40s %s" % (target, measured, "met" if met else "MISSED"))
    plot(results, args.plot)
    existing = ""
    if os.path.exists(args.doc):
        with open(args.doc, encoding="utf-8") as f:
            existing = f.read()
    block = render_doc(results, machine_info(), versions, os.path.basename(args.plot), started, duration)
    with open(args.doc, "w", encoding="utf-8") as f:
        f.write(merge_doc(existing, block))
    print("\nbench: wrote %s, %s and %s" % (args.doc, args.plot, args.json))
    return 0


if __name__ == "__main__":
    sys.exit(main())
