# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The node watcher's soak (issue 44, item 4): `make soak`, SOAK_MINUTES (60) of cycling faults.

3 sandbox nodes, site.yml with the watcher every INTERVAL seconds, then, one after another until
the time is up:

- ``xid``: a fatal Xid (79) on a worker (the two take turns); its watcher must take it out of Ray
  within one interval (plus SLACK_S for the run's own checks). Then the fault is healed and
  site.yml brings the node back, as the watch suite does; its watcher must forget the take-out.
- ``raylet``: a worker's raylet killed (-9). Not the watcher's to fix: its next run (within one
  interval) must report it (``raylet_up`` false, ``raygate_watch_raylet_up 0``) and take nothing
  out; site.yml restarts the worker.
- ``gcs``: the head's gcs_server killed (-9), once. The head's watcher must report the GCS down
  (``raygate_watch_gcs_up 0``) within one interval; site.yml restarts the cluster.

All the while it reads every node's watcher state every few seconds: each run's cost (the state's
``run``: CPU seconds with the checks, resident set, open fds), the sizes of what the watcher writes
(state file, log and its turned-over part, the daemon's output, the textfile), the watcher daemon's
fds and resident set seen from outside, and, after each fault, the raygate keys in the head's GCS.
A take-out that no injected Xid explains is a false take-out.

Writes artifacts/soak.json and artifacts/soak.md; exits 1 when a fault was not acted on within one
interval, on a false take-out, on a failed recovery or on growth past BOUNDS; 2 when the cluster
could not be brought up. The sandbox is torn down at the end, also on failure, Ctrl-C or SIGTERM.
The sandbox is shared: run it under `flock /tmp/raygate-sandbox.lock`.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import pathlib
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _integration_helpers():
    """The integration tests' sandbox helpers (run, node: sandbox.sh exec, the scratch inventory),
    loaded from their file: under pytest the name ``conftest`` is already tests/conftest.py."""
    path = os.path.join(ROOT, "tests", "integration", "conftest.py")
    spec = importlib.util.spec_from_file_location("raygate_integration_conftest", path)
    helpers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helpers)
    return helpers


_helpers = _integration_helpers()
SANDBOX, VENV_BIN, node, run, scratch_inventory = (
    _helpers.SANDBOX, _helpers.VENV_BIN, _helpers.node, _helpers.run, _helpers.scratch_inventory)  # fmt: skip

INTERVAL = 15
DEADLINE = 5
# The breaker's window: short, so that the two workers can take turns being taken out, and so that
# the soak sees old records leave the GCS.
BREAKER_WINDOW = 60
# A run's own time after it starts: the checks, the lock, the question to the head.
SLACK_S = 20
POLL_S = 3
HEAD, WORKERS = 1, (2, 3)
STATE_DIR = "/var/lib/raygate/watch"
TEXTFILE_DIR = "/var/lib/node_exporter/textfile_collector"
XID = {"gpu": {"model": "H100", "faults": [{"type": "xid", "xid": 79, "gpu": 3}]}}
HEALTHY = {"gpu": {"model": "H100"}}
SETTINGS = f"""raygate_watch: true
raygate_watch_interval: {INTERVAL}
raygate_watch_drain_deadline: {DEADLINE}
raygate_watch_breaker_window: {BREAKER_WINDOW}
"""
# What the watcher writes may reach, whatever the number of runs (docs/HEALTH.md "Bounded").
BOUNDS = {
    "state": 64 << 10,
    "log_total": 2 << 20,
    "daemon_out": (256 << 10) + (16 << 10),
    "textfile": 16 << 10,
    "fabric": 64 << 10,
    # The watchers' lock and one record per worker.
    "gcs_keys": 1 + len(WORKERS),
    # The watcher daemon, end against start: a leak of one fd a run is hundreds in an hour.
    "fds_growth": 4,
    "rss_growth_kib": 16 << 10,
}
FIGURE_RUNS = 5
PROBE = r"""
import json, os
d = %(state_dir)r
out = {"sizes": {}}
try:
    out["state"] = json.load(open(d + "/state.json"))
except (OSError, ValueError):
    out["state"] = None
files = {"state": "state.json", "log": "watch.log", "log1": "watch.log.1", "daemon_out": "daemon.out",
         "fabric": "fabric-counters.json", "textfile": %(textfile)r}
for name, path in files.items():
    try:
        out["sizes"][name] = os.path.getsize(os.path.join(d, path))
    except OSError:
        out["sizes"][name] = 0
def proc(pid):
    try:
        rss = [int(l.split()[1]) for l in open("/proc/%%d/status" %% pid) if l.startswith("VmRSS:")][0]
        f = open("/proc/%%d/stat" %% pid).read().rsplit(")", 1)[1].split()
        cpu = (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
        return {"pid": pid, "fds": len(os.listdir("/proc/%%d/fd" %% pid)), "rss_kib": rss, "cpu_s": cpu}
    except (OSError, IndexError, ValueError):
        return None
try:
    out["watcher"] = proc(int(json.load(open("/run/raygate/raygate-watch.pid"))["pid"]))
except (OSError, ValueError, KeyError, TypeError):
    out["watcher"] = None
for p in os.listdir("/proc"):
    try:
        comm = open("/proc/%%s/comm" %% p).read().strip() if p.isdigit() else ""
    except OSError:
        continue
    if comm in ("gcs_server", "raylet"):
        out[comm] = proc(int(p))
print("SOAK " + json.dumps(out))
""" % {"state_dir": STATE_DIR, "textfile": os.path.join(TEXTFILE_DIR, "raygate_watch.prom")}
# The raygate keys in the head's GCS, asked as the watcher asks: the Ray node's environment files.
KV_PROBE = r"""
import json, os, sys
cfg = json.load(open("/etc/raygate/watch.json"))
sys.path.insert(0, cfg["lib"])
from ansible_collections.raygate.cluster.plugins.module_utils.files import parse_env
for path in cfg["env_files"]:
    if os.path.exists(path):
        os.environ.update(parse_env(open(path).read()))
from ray._raylet import GcsClient
client = GcsClient(address="%s:%s" % (cfg["head_ip"], cfg["gcs_port"]))
print("SOAK " + json.dumps(sorted(k.decode() for k in client.internal_kv_keys(b"", b"raygate"))))
"""


def parse_probe(out):
    """The JSON a probe printed after ``SOAK ``, or None."""
    for line in reversed(out.splitlines()):
        if line.startswith("SOAK "):
            try:
                return json.loads(line[5:])
            except ValueError:
                return None
    return None


def probe(index):
    return parse_probe(node(index, "python3 - <<'EOF'\n%sEOF" % PROBE)[1])


def gcs_keys():
    rc, out = node(HEAD, "timeout 60 /opt/raygate/current/bin/python - <<'EOF'\n%sEOF" % KV_PROBE)
    keys = parse_probe(out)
    return keys if rc == 0 and isinstance(keys, list) else None


def median(values):
    values = [v for v in values if isinstance(v, (int, float))]
    return round(statistics.median(values), 3) if values else None


def run_figures(runs):
    """The median of each cost figure over the first and the last FIGURE_RUNS runs of a node."""
    out = {}
    for end, part in (("start", runs[:FIGURE_RUNS]), ("end", runs[-FIGURE_RUNS:])):
        figures = [r.get("run") or {} for r in part]
        out[end] = {k: median([f.get(k) for f in figures]) for k in ("cpu_s", "wall_s", "rss_kib", "fds")}
        out[end]["checks_max_rss_kib"] = max([f.get("checks_max_rss_kib") or 0 for f in figures] or [0])
    return out


def log_total(sizes):
    return sizes.get("log", 0) + sizes.get("log1", 0)


def expected(takeout, faults):
    """The xid fault that explains a take-out of ``takeout["node"]`` at ``takeout["at"]``, or None."""
    for fault in faults:
        if fault["kind"] != "xid" or fault["node"] != takeout["node"]:
            continue
        end = fault.get("healed") or fault["injected"] + INTERVAL + SLACK_S + 120
        if fault["injected"] - 1 <= takeout["at"] <= end:
            return fault
    return None


def judge(report, bounds=None):
    """What the soak got wrong, as sentences (empty: it passed)."""
    bounds = bounds or BOUNDS
    problems = []
    for fault in report["faults"]:
        name = "%s on node%d at %s" % (fault["kind"], fault["node"], fault.get("at_text", fault["injected"]))
        if fault.get("latency_s") is None:
            problems.append("%s: not acted on (%s)" % (name, fault.get("detail", "no watcher run saw it")))
        elif fault["latency_s"] > fault["limit_s"]:
            problems.append("%s: acted on after %.1f s, past %d s" % (name, fault["latency_s"], fault["limit_s"]))
        if fault.get("recovered") is False:
            problems.append("%s: site.yml did not bring the cluster back: %s" % (name, fault.get("recovery", "")))
    for takeout in report["takeouts"]:
        if not expected(takeout, report["faults"]):
            problems.append("false take-out: node%d at %s: %s" % (takeout["node"], takeout["at"], takeout["reason"]))
    problems += judge_growth(report["growth"], bounds)
    return problems


def judge_growth(growth, bounds):
    problems = []
    for index, figures in sorted(growth.get("nodes", {}).items()):
        peak = figures["max_sizes"]
        for name, size in (("state", peak.get("state", 0)), ("log_total", peak.get("log_total", 0)),
                           ("daemon_out", peak.get("daemon_out", 0)), ("textfile", peak.get("textfile", 0)),
                           ("fabric", peak.get("fabric", 0))):  # fmt: skip
            if size > bounds[name]:
                problems.append("node%s: %s reached %d bytes, past %d" % (index, name, size, bounds[name]))
        start, end = figures.get("watcher_start"), figures.get("watcher_end")
        if not (start and end):
            problems.append("node%s: the watcher daemon was not seen at the start and the end" % index)
            continue
        if start["pid"] != end["pid"]:
            problems.append(
                "node%s: the watcher daemon restarted (pid %d, then %d)" % (index, start["pid"], end["pid"])
            )
        elif end["fds"] - start["fds"] > bounds["fds_growth"]:
            problems.append("node%s: the watcher's fds grew from %d to %d" % (index, start["fds"], end["fds"]))
        elif end["rss_kib"] - start["rss_kib"] > bounds["rss_growth_kib"]:
            problems.append(
                "node%s: the watcher's RSS grew from %d to %d KiB" % (index, start["rss_kib"], end["rss_kib"])
            )
    most = growth.get("gcs_keys_max")
    if most is None:
        problems.append("the raygate keys in the head's GCS could not be counted")
    elif most > bounds["gcs_keys"]:
        problems.append("the head's GCS held %d raygate keys, past %d" % (most, bounds["gcs_keys"]))
    return problems


def kib(n):
    return "-" if n is None else "%.1f KiB" % (n / 1024.0)


def mib(n_kib):
    return "-" if not n_kib else "%.1f MiB" % (n_kib / 1024.0)


def render_md(report):
    """The soak's tables: faults, then per node what the watcher cost and wrote, start and end."""
    lines = ["Soak of %s: %.1f min in all (bring-up included), watcher every %d s, commit %s." % (
        report["started_text"], report["minutes"], INTERVAL, report["commit"]), "",
        "| fault | node | injected | acted on after | limit | what the watcher did | recovery (site.yml) |",
        "| --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for f in report["faults"]:
        acted = "-" if f.get("latency_s") is None else "%.1f s" % f["latency_s"]
        back = "%.0f s" % f["recovery_s"] if f.get("recovery_s") is not None else "-"
        lines.append("| %s | node%d | %s | %s | %d s | %s | %s |" % (
            f["kind"], f["node"], f["at_text"], acted, f["limit_s"], f.get("detail", ""), back))  # fmt: skip
    lines += ["", "False take-outs: %d. Raygate keys in the head's GCS: at most %s (%s at the end)." % (
        len([t for t in report["takeouts"] if not expected(t, report["faults"])]),
        report["growth"].get("gcs_keys_max"), report["growth"].get("gcs_keys_end")), ""]  # fmt: skip
    lines += ["| node | runs | CPU s / run (start, end) | RSS (start, end) | largest check | daemon fds (start, end) "
              "| state.json | watch.log (+ .1) | daemon.out | textfile |", "| --- " * 10 + "|"]  # fmt: skip
    for index, g in sorted(report["growth"]["nodes"].items()):
        fig, s, e = g["runs"], g.get("watcher_start") or {}, g.get("watcher_end") or {}
        peak = g["max_sizes"]
        lines.append("| node%s | %d | %s, %s | %s, %s | %s | %s, %s | %s | %s | %s | %s |" % (
            index, g["run_count"], fig["start"]["cpu_s"], fig["end"]["cpu_s"],
            mib(s.get("rss_kib")), mib(e.get("rss_kib")),
            mib(fig["end"]["checks_max_rss_kib"]), s.get("fds"), e.get("fds"),
            kib(peak.get("state")), kib(peak.get("log_total")), kib(peak.get("daemon_out")),
            kib(peak.get("textfile"))))  # fmt: skip
    lines += ["", "Sizes are the largest seen. Result: %s" % ("pass" if not report["problems"] else "FAIL")]
    lines += ["- %s" % p for p in report["problems"]]
    return "\n".join(lines) + "\n"


# What the soak keeps of each watcher run (its state file): the judgments read raylet_up (a raylet
# kill) and gcs_up (the GCS kill).
RUN_KEYS = ("last_run", "verdict", "run", "raylet_up", "gcs_up", "refused")


class Soak:
    """One soak: the cluster, what was seen of every watcher run, the faults and their outcomes."""

    def __init__(self, base, minutes):
        self.base, self.minutes = base, minutes
        self.inv = None
        self.runs = {i: [] for i in (HEAD,) + WORKERS}
        self.seen_out = set()
        self.takeouts, self.faults, self.keys = [], [], []
        self.first, self.last, self.peak = {}, {}, {i: {} for i in self.runs}

    # -- observing ------------------------------------------------------------------------------

    def observe(self):
        """Read every node's watcher once: new runs, take-outs, sizes; ``{index: probe}``."""
        seen = {}
        for index in self.runs:
            found = probe(index)
            if not found:
                continue
            seen[index] = found
            state = found.get("state") or {}
            runs = self.runs[index]
            if state.get("last_run") and (not runs or runs[-1]["last_run"] != state["last_run"]):
                runs.append({k: state.get(k) for k in RUN_KEYS})
            out = state.get("taken_out")
            if out and (index, out["at"]) not in self.seen_out:
                self.seen_out.add((index, out["at"]))
                self.takeouts.append({"node": index, "at": out["at"], "reason": out.get("reason", "")})
            sizes = dict(found["sizes"], log_total=log_total(found["sizes"]))
            self.peak[index] = {k: max(v, self.peak[index].get(k, 0)) for k, v in sizes.items()}
            if found.get("watcher"):
                self.first.setdefault(index, found["watcher"])
                self.last[index] = found["watcher"]
        return seen

    def count_keys(self, when):
        keys = gcs_keys()
        self.keys.append({"at": time.time(), "when": when, "keys": keys})
        return keys

    def wait(self, what, predicate, timeout):
        """Observe every POLL_S until ``predicate(seen)`` gives a value; it, or None at the timeout."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            value = predicate(self.observe())
            if value:
                return value
            time.sleep(POLL_S)
        print("soak: %s: not within %d s" % (what, timeout), flush=True)
        return None

    def quiet(self, seconds):
        """Observe for ``seconds`` with no fault: a false take-out shows here."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.observe()
            time.sleep(POLL_S)

    # -- the cluster --------------------------------------------------------------------------------

    def play(self, name):
        began = time.monotonic()
        rc, out = run([os.path.join(VENV_BIN, "ansible-playbook"), "-i", self.inv, os.path.join(ROOT, name)],
                      timeout=900)  # fmt: skip
        return rc, time.monotonic() - began, out

    def scenario(self, index, doc):
        path = os.path.join(self.base, "node%d.json" % index)
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(doc, fh)
        rc, out = run([SANDBOX, "scenario", str(index), path])
        if rc != 0:
            raise RuntimeError("sandbox.sh scenario %d: %s" % (index, out[-2000:]))

    def up(self):
        rc, out = run([SANDBOX, "up", "3"], timeout=300)
        if rc != 0:
            raise RuntimeError("sandbox.sh up 3: %s" % out[-3000:])
        for index in self.runs:
            # The textfile is written only where node_exporter's directory exists.
            node(index, "mkdir -p %s" % TEXTFILE_DIR)
        base = pathlib.Path(self.base)
        self.inv = scratch_inventory(base / "inventory", base, "soak", settings=SETTINGS)
        rc, took, out = self.play("site.yml")
        if rc != 0:
            raise RuntimeError("site.yml: rc %d: %s" % (rc, out[-4000:]))
        print("soak: cluster up in %.0f s" % took, flush=True)
        everyone = self.wait("every watcher's second run", lambda seen: all(len(r) >= 2 for r in self.runs.values()),
                             timeout=INTERVAL * 3 + 120)  # fmt: skip
        if not everyone:
            raise RuntimeError("the watchers did not run: %s" % {i: len(r) for i, r in self.runs.items()})
        self.count_keys("start")

    # -- the faults ---------------------------------------------------------------------------------

    def fault(self, kind, index):
        injected = time.time()
        record = {"kind": kind, "node": index, "injected": injected, "limit_s": INTERVAL + SLACK_S,
                  "at_text": datetime.datetime.fromtimestamp(injected).strftime("%H:%M:%S")}  # fmt: skip
        self.faults.append(record)
        print("soak: %s %s on node%d" % (record["at_text"], kind, index), flush=True)
        getattr(self, "inject_" + kind)(record)
        if record.get("latency_s") is not None:
            print("soak:   acted on after %.1f s: %s" % (record["latency_s"], record["detail"]), flush=True)
        self.recover(record)
        self.count_keys("after %s on node%d" % (kind, index))
        return record

    def first_run_after(self, index, injected, predicate):
        """The first run of node ``index``'s watcher that began after ``injected`` and satisfies
        ``predicate(run)`` (waiting up to two intervals past the limit); None when none did."""

        def found(_seen):
            return next((r for r in self.runs[index] if _began(r) > injected and predicate(r)), None)

        return self.wait("node%d's watcher after the fault" % index, found, timeout=INTERVAL * 3 + SLACK_S + 30)

    def inject_xid(self, record):
        index, injected = record["node"], record["injected"]
        self.scenario(index, XID)

        def out(_seen):
            return next((t for t in self.takeouts if t["node"] == index and t["at"] >= injected), None)

        takeout = self.wait("node%d taken out" % index, out, timeout=INTERVAL * 3 + SLACK_S + DEADLINE + 30)
        if takeout:
            record.update(latency_s=round(takeout["at"] - injected, 1), detail="taken out: %s" % takeout["reason"])
        else:
            last = self.runs[index][-1] if self.runs[index] else {}
            record["detail"] = "not taken out; its last run: %s %s" % (last.get("verdict"), last.get("refused"))
        self.scenario(index, HEALTHY)
        record["healed"] = time.time()

    def inject_raylet(self, record):
        index, injected = record["node"], record["injected"]
        node(index, "pkill -9 -x raylet")
        seen = self.first_run_after(index, injected, lambda r: r.get("raylet_up") is False)
        if seen:
            record.update(
                latency_s=_ended(seen) - injected,
                detail="reported the raylet down (raylet_up 0); %s, nothing taken out" % seen["verdict"],
            )

    def inject_gcs(self, record):
        injected = record["injected"]
        node(HEAD, "pkill -9 -x gcs_server")
        seen = self.first_run_after(HEAD, injected, lambda r: r.get("gcs_up") is False)
        if seen:
            record.update(latency_s=_ended(seen) - injected, detail="reported the GCS down (gcs_up 0)")

    def recover(self, record):
        """site.yml brings the cluster back; then every watcher must have run again, none holding
        a take-out (the watcher forgets one once the raylet it stopped runs again)."""
        rc, took, out = self.play("site.yml")
        record["recovery_s"] = round(took, 1)
        if rc != 0:
            record.update(recovered=False, recovery="rc %d: %s" % (rc, out[-1500:]))
            return
        back = time.time()

        def settled(seen):
            states = {i: (p.get("state") or {}) for i, p in seen.items()}
            return len(states) == len(self.runs) and all(
                s.get("last_run", 0) > back and not s.get("taken_out") and s.get("verdict") == "healthy"
                for s in states.values()
            )

        record["recovered"] = bool(self.wait("every watcher healthy again", settled, timeout=INTERVAL * 3 + 60))
        if not record["recovered"]:
            record["recovery"] = "a watcher still not healthy after site.yml"

    # -- the whole run ------------------------------------------------------------------------------

    def cycle(self):
        """xid, raylet, gcs (once), then xid and raylet in turn; the workers take turns for each, the
        raylet kill on the worker the last Xid spared."""
        end = time.monotonic() + self.minutes * 60
        plan = ["xid", "raylet", "gcs"]
        count = {"xid": 0, "raylet": 0}
        while time.monotonic() < end:
            kind = plan.pop(0) if plan else ("xid", "raylet")[len(self.faults) % 2]
            if kind == "gcs":
                record = self.fault("gcs", HEAD)
            else:
                turn = count[kind] + (1 if kind == "raylet" else 0)
                count[kind] += 1
                record = self.fault(kind, WORKERS[turn % len(WORKERS)])
            if record.get("recovered") is False:
                print("soak: the cluster did not come back; stopping the faults", flush=True)
                break
            self.quiet(INTERVAL)

    def report(self, started, commit):
        nodes = {}
        for index, runs in self.runs.items():
            nodes[index] = {"run_count": len(runs), "runs": run_figures(runs), "max_sizes": self.peak[index],
                            "watcher_start": self.first.get(index), "watcher_end": self.last.get(index)}  # fmt: skip
        counts = [len(k["keys"]) for k in self.keys if k["keys"] is not None]
        growth = {"nodes": nodes, "gcs_keys_max": max(counts) if counts else None,
                  "gcs_keys_end": counts[-1] if counts else None, "gcs_keys": self.keys}  # fmt: skip
        when = datetime.datetime.fromtimestamp(started).isoformat(" ", "seconds")
        report = {"started": started, "started_text": when,
                  "minutes": round((time.time() - started) / 60.0, 1), "commit": commit, "interval": INTERVAL,
                  "slack_s": SLACK_S, "bounds": BOUNDS, "faults": self.faults, "takeouts": self.takeouts,
                  "growth": growth, "runs": self.runs}  # fmt: skip
        report["problems"] = judge(report)
        return report


def _began(run_record):
    """When a watcher run began: its last_run is stamped at its start."""
    return run_record.get("last_run") or 0


def _ended(run_record):
    """When a watcher run wrote its verdict: its start plus its own wall time."""
    return round(_began(run_record) + ((run_record.get("run") or {}).get("wall_s") or 0), 1)


def commit_id():
    proc = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          check=False)  # fmt: skip
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                           text=True, check=False).stdout.strip()  # fmt: skip
    return proc.stdout.strip() + ("+changes" if dirty else "")


def _terminate(signum, _frame):
    raise KeyboardInterrupt("signal %d" % signum)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--minutes", type=float, default=float(os.environ.get("SOAK_MINUTES", "60")))
    parser.add_argument("--out", default=os.path.join(ROOT, "artifacts"))
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("soak: needs root (the sandbox)", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _terminate)
    os.makedirs(args.out, exist_ok=True)
    started, code = time.time(), 0
    soak = Soak(tempfile.mkdtemp(prefix="raygate-soak-"), args.minutes)
    try:
        soak.up()
        soak.cycle()
    except RuntimeError as exc:
        print("soak: %s" % exc, file=sys.stderr)
        code = 2
    finally:
        report = soak.report(started, commit_id())
        with open(os.path.join(args.out, "soak.json"), "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=1, sort_keys=True)
        with open(os.path.join(args.out, "soak.md"), "w", encoding="utf-8") as fh:
            fh.write(render_md(report))
        run([SANDBOX, "down"], timeout=300)
    print(render_md(report))
    return code or (1 if report["problems"] else 0)


if __name__ == "__main__":
    sys.exit(main())
