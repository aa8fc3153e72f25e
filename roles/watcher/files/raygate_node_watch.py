# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""raygate-node-watch: the gate's node checks between runs; a worker found do-not-allocate leaves Ray.

  once          one watch run (what the systemd timer starts)
  loop          a run every interval, for ever (the process supervisor's daemon)
  ray-take-out  internal: the part that talks to the head's GCS, run by the watcher itself with
                the Ray virtualenv's Python, as the service user, in the node's Ray environment

A run checks this node with raygate-node-check's module and arguments, reading the kernel log since
the last run and the fabric counters' growth since the last run. A do-not-allocate finding on a
worker asks the head's GCS whether the fleet's breaker allows one more node out; if so, Ray drains
the node (preemption, with raygate_watch_drain_deadline for its tasks), its raylet stops, and with
raygate_slurm: drain Slurm drains it too ("raygate: ..."). Degraded findings only report; the head
is never taken out (it holds the GCS), only reported. Each run writes the state file, a line in the
log and the node_exporter textfile. Nothing grows without bound: the log turns over to watch.log.1
past LOG_MAX_BYTES (so the two hold at most twice that), the loop's own output file starts again
past OUTPUT_MAX_BYTES, and the state file and the textfile hold one run. A node taken out comes back
through site.yml, whose gate judges it again; the watcher then sees its raylet running again and
forgets that it took it out.

Taking the node out holds ray_node's lock (/run/raygate.lock), so it never runs while a raygate run
starts or stops Ray on this node; when a run holds it, the watcher leaves the node for its next run.
A take-out that did not happen (a run held the lock, the breaker or an unreachable head refused it,
or the next run's checks could not run) stays pending: the next run reads the kernel log over the
gate's own window (raygate_health_xid_window), so an Xid is judged again until it is acted on or a
gate run would no longer see it either. The fabric counters' growth cannot be read again that way
(the watcher's counter history spans two intervals): its findings are kept in the state as they
were, for the gate's fabric window (raygate_health_fabric_window) on the same boot.
"""

import argparse
import json
import os
import pwd
import resource
import socket
import stat
import subprocess
import sys
import time

CONFIG = "/etc/raygate/watch.json"
# ray_node's lock at its default state_dir (plugins/module_utils/node/node.py, lock_path).
RAY_LOCK = "/run/raygate.lock"
HERE = os.path.dirname(os.path.abspath(__file__))
# watch.log turns over to watch.log.1 (the one before it dropped) past this size: a line per run is
# 1 to 3 KiB, so about 500 runs (42 h at 300 s) in each. Settings may say another ("log_max_bytes").
LOG_MAX_BYTES = 1 << 20
# The loop's stdout and stderr (node_watch's daemon.out): a line or two per run, started again past this.
OUTPUT_MAX_BYTES = 256 << 10


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--config", default=CONFIG, help="the watcher's settings (JSON), as the role wrote them")
    parser.add_argument("--daemon", action="store_true", help="loop: detach (two forks, a session of its own)")
    parser.add_argument("--pid-file", help="loop: write {pid, stamp} here once running")
    parser.add_argument("--stamp", default="", help="loop: what node_watch started (the hash of settings and script)")
    parser.add_argument("command", choices=["once", "loop", "ray-take-out"])
    return parser.parse_args(argv)


def detach(args):
    """--daemon: the parent returns at once (node_watch's call ends), the grandchild goes on in a
    session of its own; then the pid file, which node_watch waits for."""
    if args.daemon:
        if os.fork() > 0:
            return False
        os.setsid()
        if os.fork() > 0:
            os._exit(0)  # pylint: disable=protected-access
    if args.pid_file:
        write_atomic(args.pid_file, json.dumps({"pid": os.getpid(), "stamp": args.stamp}) + "\n")
    return True


def load_json(path, default=None):
    try:
        with open(path, encoding="utf-8") as fh:
            value = json.load(fh)
    except (OSError, ValueError):
        return default
    return value


def write_atomic(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def append_log(path, line, max_bytes=LOG_MAX_BYTES):
    """Append ``line`` to the log at ``path``; past ``max_bytes`` the log becomes ``path``.1 (the
    previous .1 dropped) first, so the two hold at most twice ``max_bytes``."""
    try:
        size = os.path.getsize(path)
    except OSError:
        size = 0
    if size and size + len(line.encode()) > max_bytes:
        os.replace(path, path + ".1")
    with open(path, "a", encoding="utf-8") as log:
        log.write(line)


def trim_output(stream, max_bytes=OUTPUT_MAX_BYTES):
    """Start ``stream`` (the loop's stdout, a file node_watch opened) again once it is past
    ``max_bytes``. stderr shares its open file, so its offset, and is trimmed with it."""
    stream.flush()
    try:
        fd = stream.fileno()
        info = os.fstat(fd)
    except (OSError, ValueError, AttributeError):
        return False
    if not stat.S_ISREG(info.st_mode) or info.st_size <= max_bytes:
        return False
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    return True


def usage():
    """CPU seconds so far of this process and the checks it ran, and its resident set (KiB)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
    rss = 0
    try:
        with open("/proc/self/status", encoding="utf-8") as fh:
            rss = next((int(line.split()[1]) for line in fh if line.startswith("VmRSS:")), 0)
    except (OSError, ValueError):
        pass
    return cpu, rss, kids.ru_maxrss


def run_figures(began, cpu_before):
    """What this run cost: wall and CPU seconds (the checks included), the watcher's resident set
    and the largest check's peak (KiB), and its open file descriptors (a leak shows here first)."""
    cpu, rss, checks_rss = usage()
    try:
        fds = len(os.listdir("/proc/self/fd"))
    except OSError:
        fds = None
    return {"wall_s": round(time.monotonic() - began, 3), "cpu_s": round(cpu - cpu_before, 3),
            "rss_kib": rss, "checks_max_rss_kib": checks_rss, "fds": fds}  # fmt: skip


def lib_import(cfg):
    """raygate's module_utils from the node-check bundle, and raygate-node-check beside this file."""
    for path in (cfg["lib"], HERE):
        if path not in sys.path:
            sys.path.insert(0, path)
    import raygate_node_check  # pylint: disable=import-outside-toplevel,import-error

    from ansible_collections.raygate.cluster.plugins.module_utils.gate import watch  # pylint: disable=import-outside-toplevel

    return raygate_node_check, watch


def raylet_started_at(proc_root="/proc"):
    """Unix time the running raylet started, or None when none runs (lib_import first). ``proc_root``:
    the settings' ``proc_root`` in once(), where a test shows the watcher a process table of its own."""
    from ansible_collections.raygate.cluster.plugins.module_utils.node import procs  # pylint: disable=import-outside-toplevel

    raylet = procs.find_daemon(procs.process_table(proc_root), "raylet")
    return procs.started_at(raylet["pid"]) if raylet else None


def port_up(host, port, timeout=3):
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except OSError:
        return False


def boot_id():
    """This boot's id, as the gate's fabric counters read it (lib_import first)."""
    from ansible_collections.raygate.cluster.plugins.module_utils.gate import collectors  # pylint: disable=import-outside-toplevel

    return collectors.boot_id()


def check(cfg, state, now, node_check, watch):
    """gpu_health's result over this node, with the windows since the last run; and the gate's own
    fabric window, for how long a pending take-out's counter growth is held (watch.held_fabric)."""
    params = load_json(cfg["check_config"])
    if not isinstance(params, dict):
        raise RuntimeError("no checks' arguments at %s: run site.yml with raygate_watch" % cfg["check_config"])
    params["xid_window"] = watch.log_window(state, now, params.get("xid_window", cfg["interval"]))
    gate_fabric_window = watch.gate_fabric_window(params)
    params["fabric_state_file"] = os.path.join(cfg["state_dir"], "fabric-counters.json")
    params["fabric_window"] = max(int(cfg["interval"]) * 2, 60)
    # DCGM's long levels (2: minutes, 3: a quarter of an hour) are for the gate, not every interval.
    params["dcgm_diag_level"] = min(int(params.get("dcgm_diag_level") or 0), 1)
    return node_check.run_params(cfg["lib"], params, cfg["check_timeout"]), gate_fabric_window


def ray_env(cfg):
    """The Ray node's environment (token path, TLS paths), as its start read it."""
    from ansible_collections.raygate.cluster.plugins.module_utils.files import parse_env  # pylint: disable=import-outside-toplevel

    env = {"PATH": os.path.join(cfg["venv"], "bin") + ":/usr/bin:/bin", "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
    for path in cfg["env_files"]:
        try:
            with open(path, encoding="utf-8") as fh:
                env.update(parse_env(fh.read()))
        except OSError:
            continue
    account = pwd.getpwnam(cfg["user"])
    env["HOME"] = account.pw_dir
    return env, account


def ask_head(cfg, checks):
    """Run ray-take-out in the Ray virtualenv as the service user, or in the node's container (raygate_runtime
    container: its Ray, its user and environment; this script and its configuration are mounted there at
    the same paths); its JSON answer."""
    env, account = ray_env(cfg)
    box = cfg.get("container")
    extra = {}
    if box:
        argv = [box["engine"], "exec", "-i", box["name"], "python", os.path.abspath(__file__), "--config", cfg["path"]]
    else:
        argv = [os.path.join(cfg["venv"], "bin", "python"), os.path.abspath(__file__), "--config", cfg["path"]]
        if os.geteuid() == 0 and account.pw_uid != 0:
            extra = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}
    proc = subprocess.run(argv + ["ray-take-out"], input=json.dumps({"checks": checks}), capture_output=True,
                          text=True, env=env, timeout=120, check=False, cwd="/", **extra)  # fmt: skip
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"action": "refused", "why": "head", "detail": "the head could not be asked: %s" % " | ".join(tail)}
    return json.loads(lines[-1])


def ray_take_out(cfg):
    """ray-take-out: inside the Ray virtualenv, as the service user."""
    _node_check, watch = lib_import(cfg)
    request = json.load(sys.stdin)
    opts = dict(cfg["breaker"], deadline=cfg["deadline"])
    try:
        gcs = watch.RayGcs("%s:%s" % (cfg["head_ip"], cfg["gcs_port"]))
        answer = watch.take_out(gcs, cfg["node_ip"], request["checks"], opts)
    except Exception as exc:  # pylint: disable=broad-except
        answer = {"action": "refused", "why": "head", "detail": "the head could not be asked: %s" % exc}
    print(json.dumps(answer, sort_keys=True))
    return 0


def stop_ray(cfg, deadline):
    """Wait for the drained raylet to end (its tasks done) until the deadline, then stop Ray here."""
    end = time.monotonic() + deadline
    while time.monotonic() < end and raylet_started_at() is not None:
        time.sleep(0.5)
    box = cfg.get("container")
    if cfg["supervisor"] == "systemd":
        cmd = ["systemctl", "stop", cfg["unit"] + ".service"]
    elif box:
        # Through the engine: it restarts a container whose Ray stopped by itself, not one it stopped.
        cmd = [box["engine"], "stop", "--time", "30", box["name"]]
    else:
        cmd = [os.path.join(cfg["venv"], "bin", "ray"), "stop", "--force"]
    env, _account = ray_env(cfg)
    subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False, env=env)


def slurm_drain(cfg, node_check, result):
    args = argparse.Namespace(lib=cfg["lib"], scontrol="scontrol", node=cfg["slurm_node"], slurm=cfg["slurm"])
    return node_check.slurm_step(args, dict(result, healthy=False))


def act(cfg, state, take, node_check, result):
    """Take this worker out, or say why not. Updates ``state``; returns lines for the log."""
    if cfg["role"] == "head":
        state["refused"] = {"why": "head", "detail": "the head is not taken out (it holds the GCS): fix it or evict it"}
        return ["not taken out: it is the head"]
    from ansible_collections.raygate.cluster.plugins.module_utils import files  # pylint: disable=import-outside-toplevel

    path = cfg.get("ray_lock") or RAY_LOCK
    try:
        with files.exclusive_lock(path, timeout=0):  # one try: take_out itself takes no lock
            return take_out(cfg, state, take, node_check, result)
    except files.LockBusy as busy:
        # A run is starting or stopping Ray here: not a refusal (no alert). The take-out stays pending
        # (once), so the next watch run judges the node again and acts then.
        holder = "pid %s" % busy.holder if busy.holder else "another process"
        state["deferred"] = {"why": "busy", "holder": busy.holder, "at": state["last_run"]}
        return ["not taken out now: a raygate run is changing Ray on this node (%s holds %s); the next watch "
                "run tries again" % (holder, path)]  # fmt: skip


def take_out(cfg, state, take, node_check, result):
    """act's part under ray_node's lock: ask the head for the drain, stop Ray, drain Slurm."""
    answer = ask_head(cfg, take)
    if answer["action"] != "drained":
        if answer["action"] == "refused":
            state["refused"] = {"why": answer["why"], "detail": answer["detail"], "at": state["last_run"]}
        return ["not taken out (%s): %s" % (answer.get("why", answer["action"]), answer["detail"])]
    stop_ray(cfg, cfg["deadline"])
    state["taken_out"] = {"at": answer["at"], "check": take[0].split(":", 1)[0], "reason": answer["reason"]}
    lines = ["taken out of Ray: %s" % answer["reason"], answer["detail"]]
    if cfg["slurm"] != "off":
        try:
            lines += slurm_drain(cfg, node_check, result)
        except (OSError, RuntimeError) as exc:
            lines.append("Slurm: %s" % exc)
    return lines


def act_on(cfg, state, take, held, node_check, result):
    """act() on ``take``, of which ``held`` was found by earlier runs (watch.held_fabric): a line each
    says so, and Slurm's drain names them among the result's reasons."""
    lines = ["still pending from an earlier run (a gate run would still count it): %s" % f for f in held]
    if held:
        result = dict(result, reasons=(result.get("reasons") or []) + held)
    return lines + act(cfg, state, take, node_check, result)


def once(cfg):
    began, cpu_before = time.monotonic(), usage()[0]
    node_check, watch = lib_import(cfg)
    state_path = os.path.join(cfg["state_dir"], "state.json")
    before = load_json(state_path, {}) or {}
    now = time.time()
    state = {"version": 1, "last_run": now, "host": cfg["host"], "taken_out": before.get("taken_out")}
    proc_root = cfg.get("proc_root") or "/proc"
    started = raylet_started_at(proc_root)
    if state["taken_out"] and started is not None and started > state["taken_out"]["at"]:
        state["back_at"], state["taken_out"] = started, None  # site.yml brought it back
    # A take-out the last run could not do: this run reads the kernel log over the gate's window
    # (watch.log_window), not only since the last run, so the Xid that called for it is seen again;
    # the counter growth it was for is held as it was (watch.held_fabric).
    pending = [] if state["taken_out"] else before.get("pending") or []
    held = [] if state["taken_out"] else before.get("pending_fabric") or []
    lines = []
    try:
        result, gate_fabric_window = check(cfg, dict(before, pending=pending), now, node_check, watch)
    except (OSError, ValueError, RuntimeError, subprocess.TimeoutExpired) as exc:
        result, state["error"] = None, "cannot check this node: %s" % exc
        lines.append(state["error"])
        if pending:
            state["pending"] = pending
        if held:
            state["pending_fabric"] = held
    if result is not None:
        found, report = watch.findings(result)
        take, held = watch.held_fabric(found, held, now, gate_fabric_window, boot_id())
        state.update(take_out=take, report=report, checks={c["name"]: c["status"] for c in result.get("checks", [])})
        if take and not state["taken_out"]:
            lines += act_on(cfg, state, take, take[len(found) :], node_check, result)
            if not state["taken_out"]:
                state["pending"] = take
                if held:
                    state["pending_fabric"] = held
    # A raylet gone without a take-out (killed, crashed): reported, not restarted. Under systemd its
    # unit restarts it; under the process supervisor the next site.yml does. Only where Ray is
    # installed (health.yml's watcher may watch nodes that never run Ray). Looked at again after a
    # take-out in this run, which stopped it.
    state["raylet_up"] = (started if not state["taken_out"] else raylet_started_at(proc_root)) is not None
    if not state["raylet_up"] and not state["taken_out"] and os.path.exists(cfg.get("venv") or ""):
        lines.append("no raylet runs here and this watcher did not stop it: the next site.yml starts it again")
    if cfg["role"] == "head":
        state["gcs_up"] = port_up(cfg["head_ip"], cfg["gcs_port"])
        if cfg.get("redis"):
            state["redis_up"] = port_up(cfg["redis"]["host"], cfg["redis"]["port"])
    verdict = "do-not-allocate" if state.get("take_out") else "error" if state.get("error") else "healthy"
    record = dict(state, verdict=verdict, lines=lines, run=run_figures(began, cpu_before))
    write_atomic(state_path, json.dumps(record, indent=1, sort_keys=True) + "\n")
    log = os.path.join(cfg["state_dir"], "watch.log")
    append_log(log, json.dumps(record, sort_keys=True) + "\n", int(cfg.get("log_max_bytes") or LOG_MAX_BYTES))
    if cfg.get("textfile") and os.path.isdir(os.path.dirname(cfg["textfile"])):
        write_atomic(cfg["textfile"], watch.render_textfile(cfg["host"], record))
    print("raygate-node-watch: %s: %s" % (cfg["host"], verdict))
    for line in (state.get("take_out") or []) + lines:
        print("  %s" % line)
    return 0


def main(argv=None):
    args = parse_args(argv)
    cfg = load_json(args.config)
    if not isinstance(cfg, dict):
        print("raygate-node-watch: no settings at %s" % args.config)
        return 2
    cfg["path"] = args.config
    if args.command == "ray-take-out":
        return ray_take_out(cfg)
    if args.command == "once":
        return once(cfg)
    if not detach(args):
        return 0
    while True:
        began = time.monotonic()
        try:
            once(cfg)
        except Exception as exc:  # pylint: disable=broad-except
            print("raygate-node-watch: run failed: %s" % exc)
        trim_output(sys.stdout)
        time.sleep(max(1.0, cfg["interval"] - (time.monotonic() - began)))


if __name__ == "__main__":
    sys.exit(main())
