"""raygate_node_watch.py (the role's node watcher) over the GPU simulators, with the bundle laid out
as tasks/node_check.yml lays it out: one run's verdict, state and textfile, and what it does when it
must not or cannot take the node out (the head; a head it cannot reach)."""

import getpass
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
SCRIPT = os.path.join(ROOT, "roles", "raygate", "files", "raygate_node_watch.py")
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
        "redis": None,
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


def test_a_head_out_of_reach_drains_nothing_and_says_so(tmp_path, bundle):
    env = node(tmp_path, XID)
    out, state, text = watch_once(tmp_path, env, settings(tmp_path, bundle))
    assert state["verdict"] == "do-not-allocate" and state["take_out"][0].startswith("xid: Xid 79")
    assert state["taken_out"] is None
    assert state["refused"]["why"] == "head" and "unreachable" in state["refused"]["detail"], state
    assert "not taken out (head): the head could not be asked" in out
    assert 'raygate_watch_drain_refused{host="node1",why="head"} 1' in text
    assert 'raygate_watch_node_healthy{host="node1"} 0' in text


def test_the_head_is_reported_never_taken_out(tmp_path, bundle):
    env = node(tmp_path, XID)
    out, state, _text = watch_once(tmp_path, env, settings(tmp_path, bundle, role="head"))
    assert state["refused"]["why"] == "head" and "holds the GCS" in state["refused"]["detail"], state
    assert "not taken out: it is the head" in out
    # The head's watcher also says whether its GCS answers (nothing listens here).
    assert state["gcs_up"] is False
