"""raygate_node_watch.py (the role's node watcher) over the GPU simulators, with the bundle laid out
as tasks/node_check.yml lays it out: one run's verdict, state and textfile, and what it does when it
must not or cannot take the node out (the head; a head it cannot reach)."""

import fcntl
import getpass
import importlib.util
import json
import os
import socket
import subprocess
import sys

import test_node_check

# The bundle fixture and the simulated node of raygate-node-check's tests: the watcher runs the same.
bundle = test_node_check.bundle
node = test_node_check.node

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCRIPT = os.path.join(ROOT, "roles", "watcher", "files", "raygate_node_watch.py")
XID = {"gpu": {"model": "H100", "faults": [{"type": "xid", "xid": 79, "gpu": 3}]}}


def free_port():
    """A loopback port nothing listens on (the head's GCS of these tests: never another address)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def settings(tmp_path, lib, role="worker"):
    # A Ray virtualenv whose Python cannot reach any GCS: what a watcher sees with the head down.
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").write_text("#!/bin/sh\necho 'GCS at 127.0.0.1 unreachable' >&2\nexit 1\n")
    (venv / "python").chmod(0o755)
    (tmp_path / "textfiles").mkdir()
    config = {
        "host": "node1", "role": role, "node_ip": "127.0.0.3", "head_ip": "127.0.0.1", "gcs_port": free_port(),
        "venv": str(tmp_path / "venv"), "env_files": [], "user": getpass.getuser(), "supervisor": "process",
        "unit": "raygate-ray", "lib": str(lib), "check_config": str(tmp_path / "config.json"),
        "check_timeout": 300, "state_dir": str(tmp_path / "state"),
        "textfile": str(tmp_path / "textfiles" / "raygate_watch.prom"), "interval": 60, "deadline": 5,
        "breaker": {"window": 3600, "threshold": 50, "min_nodes": 3}, "slurm": "off", "slurm_node": "node1",
        "redis": None, "ray_lock": str(tmp_path / "raygate.lock"),
    }  # fmt: skip
    with open(tmp_path / "config.json", encoding="utf-8") as fh:
        checks = json.load(fh)
    checks["xid_window"] = 0  # the simulator's clock is its own: read the whole log on the first run
    (tmp_path / "config.json").write_text(json.dumps(checks))
    (tmp_path / "watch.json").write_text(json.dumps(config))
    return str(tmp_path / "watch.json")


def watch_once(tmp_path, env, config):
    done = subprocess.run([sys.executable, SCRIPT, "--config", config, "once"], capture_output=True, text=True,
                          env=env, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    with open(tmp_path / "state" / "state.json", encoding="utf-8") as fh:
        state = json.load(fh)
    return done.stdout, state, (tmp_path / "textfiles" / "raygate_watch.prom").read_text()


def test_a_healthy_node_is_written_down_as_healthy(tmp_path, bundle):
    env = node(tmp_path, {"gpu": {"model": "H100"}})
    config = settings(tmp_path, bundle)
    out, state, text = watch_once(tmp_path, env, config)
    assert "node1: healthy" in out
    assert state["verdict"] == "healthy" and state["checks"]["xid"] == "pass" and not state["take_out"]
    assert 'raygate_watch_node_healthy{host="node1"} 1' in text
    assert 'raygate_watch_check_status{check="xid",host="node1"} 0' in text
    # One line per run in the log.
    watch_once(tmp_path, env, config)
    assert len((tmp_path / "state" / "watch.log").read_text().splitlines()) == 2
    # What the run cost, for the soak and for anyone reading the state: the checks' CPU included.
    figures = state["run"]
    assert figures["cpu_s"] > 0 and figures["wall_s"] >= figures["cpu_s"] / 4, figures
    assert figures["rss_kib"] > 0 and figures["checks_max_rss_kib"] > 0 and figures["fds"] >= 3, figures


def test_a_raylet_gone_without_a_take_out_is_reported(tmp_path, bundle):
    # The process table the watcher reads is empty: no raylet runs here, and the watcher stopped none.
    env = node(tmp_path, {"gpu": {"model": "H100"}})
    config = settings(tmp_path, bundle)
    cfg = json.loads((tmp_path / "watch.json").read_text())
    (tmp_path / "proc").mkdir()
    (tmp_path / "watch.json").write_text(json.dumps(dict(cfg, proc_root=str(tmp_path / "proc"))))
    out, state, text = watch_once(tmp_path, env, config)
    assert state["raylet_up"] is False and state["verdict"] == "healthy", state
    assert "no raylet runs here and this watcher did not stop it" in out
    assert 'raygate_watch_raylet_up{host="node1"} 0' in text.splitlines()
    # Where Ray is not installed (a watcher over nodes that never run Ray), nothing is said.
    os.rename(tmp_path / "venv", tmp_path / "venv.away")
    out, state, _text = watch_once(tmp_path, env, config)
    assert state["raylet_up"] is False and "no raylet runs here" not in out


def test_a_head_out_of_reach_drains_nothing_and_says_so(tmp_path, bundle):
    env = node(tmp_path, XID)
    out, state, text = watch_once(tmp_path, env, settings(tmp_path, bundle))
    assert state["verdict"] == "do-not-allocate" and state["take_out"][0].startswith("xid: Xid 79")
    assert state["taken_out"] is None
    assert state["refused"]["why"] == "head" and "unreachable" in state["refused"]["detail"], state
    assert "not taken out (head): the head could not be asked" in out
    assert 'raygate_watch_drain_refused{host="node1",why="head"} 1' in text
    assert 'raygate_watch_node_healthy{host="node1"} 0' in text


def gate_window_since_boot(tmp_path):
    """node() writes the checks' arguments afresh; read the whole simulated log, as settings() does."""
    checks = json.loads((tmp_path / "config.json").read_text())
    checks["xid_window"] = 0
    (tmp_path / "config.json").write_text(json.dumps(checks))


def test_a_refused_take_out_stays_pending_until_the_gate_would_no_longer_see_the_xid(tmp_path, bundle):
    # The head out of reach refuses the take-out. The next run's kernel log window (since the last
    # run) has moved past the Xid: it must judge the node again over the gate's window, not call it
    # healthy and clear the refusal (and its alert) while the fatal Xid stands.
    env = node(tmp_path, XID)
    config = settings(tmp_path, bundle)
    _out, state, _text = watch_once(tmp_path, env, config)
    assert state["refused"]["why"] == "head" and state["pending"][0].startswith("xid: Xid 79"), state
    out, state, text = watch_once(tmp_path, env, config)
    assert state["verdict"] == "do-not-allocate" and state["take_out"][0].startswith("xid: Xid 79"), state
    assert state["refused"]["why"] == "head" and "not taken out (head)" in out, (state, out)
    assert 'raygate_watch_drain_refused{host="node1",why="head"} 1' in text
    # A run whose checks cannot run keeps the take-out pending for the one after.
    (tmp_path / "config.json").rename(tmp_path / "config.json.away")
    _out, state, _text = watch_once(tmp_path, env, config)
    assert state["verdict"] == "error" and state["pending"][0].startswith("xid: Xid 79"), state
    (tmp_path / "config.json.away").rename(tmp_path / "config.json")
    _out, state, _text = watch_once(tmp_path, env, config)
    assert state["verdict"] == "do-not-allocate" and state["refused"]["why"] == "head", state
    # The Xid gone from the kernel log (the GPU replaced and the node rebooted): healthy, nothing
    # pending, no refusal left.
    env = node(tmp_path, {"gpu": {"model": "H100"}})
    gate_window_since_boot(tmp_path)
    _out, state, text = watch_once(tmp_path, env, config)
    assert state["verdict"] == "healthy" and "pending" not in state and "refused" not in state, state
    assert "raygate_watch_drain_refused{" not in text


def test_the_head_is_reported_never_taken_out(tmp_path, bundle):
    env = node(tmp_path, XID)
    out, state, _text = watch_once(tmp_path, env, settings(tmp_path, bundle, role="head"))
    assert state["refused"]["why"] == "head" and "holds the GCS" in state["refused"]["detail"], state
    assert "not taken out: it is the head" in out
    # The head's watcher also says whether its GCS answers (nothing listens here).
    assert state["gcs_up"] is False


def test_a_run_changing_ray_here_defers_the_take_out_to_the_next_watch_run(tmp_path, bundle):
    # ray_node holds this lock while it starts or stops Ray: the watcher must not drain and stop the
    # node under it. It leaves the node for its next run, without asking the head, and that is no
    # refusal (the RaygateDrainRefused alert fires at once on one).
    env = node(tmp_path, XID)
    config = settings(tmp_path, bundle)
    lock = tmp_path / "raygate.lock"
    fd = os.open(str(lock), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another open file: as a ray_node call in another process
    os.write(fd, b"4242\n")
    try:
        out, state, text = watch_once(tmp_path, env, config)
    finally:
        os.close(fd)
    assert state["verdict"] == "do-not-allocate" and state["taken_out"] is None
    assert state["deferred"]["why"] == "busy" and state["deferred"]["holder"] == 4242, state
    assert "refused" not in state, state  # the head was not asked (it would have said unreachable)
    assert "not taken out now: a raygate run is changing Ray on this node (pid 4242 holds %s)" % lock in out
    assert "raygate_watch_drain_refused{" not in text
    assert state["pending"][0].startswith("xid: Xid 79"), state
    # The lock free again, the next run judges the node again over the gate's window (the window
    # since the last run has moved past the Xid) and acts: it asks the head (out of reach here), and
    # leaves no lock file.
    out, state, _text = watch_once(tmp_path, env, config)
    assert state["take_out"][0].startswith("xid: Xid 79") and state["verdict"] == "do-not-allocate", state
    assert state["refused"]["why"] == "head" and "deferred" not in state, state
    assert not lock.exists()


def load_script():
    spec = importlib.util.spec_from_file_location("raygate_node_watch", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_ten_thousand_runs_keep_the_log_within_twice_its_cap(tmp_path):
    # A line per run, for ever: the log turns over to watch.log.1 past its cap, the one before dropped.
    script = load_script()
    log = tmp_path / "watch.log"
    cap = 64 << 10
    line = json.dumps({"verdict": "healthy", "lines": ["x" * 1500]}) + "\n"
    for n in range(10000):
        script.append_log(str(log), line.replace("healthy", "run %05d" % n, 1), cap)
    sizes = [log.stat().st_size, (tmp_path / "watch.log.1").stat().st_size]
    assert max(sizes) <= cap and sum(sizes) <= 2 * cap, sizes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["watch.log", "watch.log.1"]
    # The newest run is the log's last line, and every line is whole.
    lines = log.read_text().splitlines()
    assert json.loads(lines[-1])["verdict"] == "run 09999" and all(json.loads(x) for x in lines)
    assert script.LOG_MAX_BYTES == 1 << 20


def test_the_loops_output_file_starts_again_past_its_cap(tmp_path):
    # The daemon's stdout and stderr: one file that node_watch opened, the same open file for both.
    script = load_script()
    path = tmp_path / "daemon.out"
    with open(path, "w", encoding="utf-8") as out:
        err = os.fdopen(os.dup(out.fileno()), "w", encoding="utf-8")
        for n in range(20000):
            print("raygate-node-watch: node2: healthy %d" % n, file=out)
            if n % 1000 == 0:
                print("raygate-node-watch: run failed: boom", file=err)
                err.flush()
            script.trim_output(out, 16 << 10)
        err.close()
    assert path.stat().st_size <= (16 << 10) + 200, path.stat().st_size
    text = path.read_text()
    assert "\0" not in text and text.rstrip().endswith("healthy 19999"), text[-200:]
    # A pipe (or a terminal) is left alone.
    read_end, write_end = os.pipe()
    with os.fdopen(write_end, "w") as pipe:
        pipe.write("x" * 100)
        assert script.trim_output(pipe, 10) is False
    os.close(read_end)


def test_the_watcher_takes_ray_nodes_own_lock():
    script = load_script()
    from ansible_collections.raygate.cluster.plugins.module_utils.node import node as ray_node

    assert script.RAY_LOCK == ray_node.lock_path({"state_dir": ray_node.ARGUMENT_SPEC["state_dir"]["default"]})


def later(tmp_path, seconds):
    """The watcher's next run, ``seconds`` after the last: its state and counter snapshots moved back."""
    state_dir = tmp_path / "state"
    counters = json.loads((state_dir / "fabric-counters.json").read_text())
    for snap in counters["snapshots"]:
        snap["time"] -= seconds
    (state_dir / "fabric-counters.json").write_text(json.dumps(counters))
    state = json.loads((state_dir / "state.json").read_text())
    state["last_run"] -= seconds
    for held in state.get("pending_fabric") or []:
        held["at"] -= seconds
    (state_dir / "state.json").write_text(json.dumps(state))


def link_downed(tmp_path, value, device="mlx5_0"):
    counter = tmp_path / "root" / "sys" / "class" / "infiniband" / device / "ports" / "1" / "counters" / "link_downed"
    counter.write_text("%d\n" % value)


def gate_fabric_window(tmp_path, seconds):
    checks = json.loads((tmp_path / "config.json").read_text())
    checks["fabric_window"] = seconds
    (tmp_path / "config.json").write_text(json.dumps(checks))


def test_a_refused_take_out_for_fabric_counters_stays_pending_while_the_gate_would_count_the_growth(tmp_path, bundle):
    # The watcher judges counter growth over two intervals (120 s here), not the gate's window: a
    # link that went down 10 times is out of its sight a run or two later (a run sooner: over a span
    # of more than 1.5 windows a failure only warns). A take-out the head refused must stay pending
    # as an Xid's does, not be forgotten once the growth leaves that short window.
    env = node(tmp_path, {"gpu": {"model": "H100"}, "fabric": {"type": "ib", "devices": 2}})
    config = settings(tmp_path, bundle)
    gate_fabric_window(tmp_path, 600)
    _out, state, _text = watch_once(tmp_path, env, config)
    assert state["verdict"] == "healthy", state
    later(tmp_path, 120)
    link_downed(tmp_path, 10)
    _out, state, _text = watch_once(tmp_path, env, config)
    assert state["checks"]["link_flaps"] == "fail" and state["refused"]["why"] == "head", state
    assert state["pending"][0].startswith("link_flaps: mlx5_0:1 down 10 times"), state
    for _run in range(3):
        later(tmp_path, 60)
        out, state, text = watch_once(tmp_path, env, config)
        assert state["verdict"] == "do-not-allocate" and state["refused"]["why"] == "head", state
        assert state["take_out"][0].startswith("link_flaps: mlx5_0:1 down 10 times"), state
        assert state["pending"] == state["take_out"] and "not taken out (head)" in out, (state, out)
        assert 'raygate_watch_drain_refused{host="node1",why="head"} 1' in text
    assert state["checks"]["link_flaps"] == "pass", state  # held, no longer seen
    assert "still pending from an earlier run (a gate run would still count it): link_flaps: " in out
    # A run whose checks cannot run keeps it too.
    (tmp_path / "config.json").rename(tmp_path / "config.json.away")
    later(tmp_path, 61)
    _out, state, _text = watch_once(tmp_path, env, config)
    assert state["verdict"] == "error" and state["pending"][0].startswith("link_flaps: "), state
    (tmp_path / "config.json.away").rename(tmp_path / "config.json")
    # Past the gate's own window (600 s) after the last run that saw the growth, a gate run would no
    # longer count it: healthy, nothing pending, no refusal left.
    later(tmp_path, 600)
    _out, state, text = watch_once(tmp_path, env, config)
    assert state["verdict"] == "healthy" and "pending" not in state and "refused" not in state, state
    assert "pending_fabric" not in state and "raygate_watch_drain_refused{" not in text, state
