"""node_watch (module_utils/node/watch_step.py): the watcher's settings, its systemd units or its
daemon, check mode, and a removal that leaves nothing."""

import json
import os
import sys
import time

import pytest

from ansible_collections.raygate.cluster.plugins.module_utils.node import watch_step
from ansible_collections.raygate.cluster.plugins.module_utils.step_runner import (
    StepExit,
    StepFailed,
    StepModule,
    validate,
)

SETTINGS = {"interval": 60, "role": "worker", "node_ip": "10.0.0.3", "head_ip": "10.0.0.1", "gcs_port": 6379}


class Parent:
    def __init__(self):
        self.no_log_values = set()
        self._diff = True
        self.warnings = []

    def warn(self, text):
        self.warnings.append(text)


def run(args, check_mode=False):
    parent = Parent()
    params = validate(parent, "node_watch", watch_step, args)
    module = StepModule(parent, "node_watch", params, check_mode)
    with pytest.raises((StepExit, StepFailed)) as caught:
        watch_step.run(module)
    if isinstance(caught.value, StepFailed):
        return dict(caught.value.result)
    return caught.value.result


ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
# The real watcher: started and stopped as a daemon for real. Its runs fail here (its settings name no
# bundle), which its loop reports and outlives, as it does on a node.
SCRIPT = os.path.join(ROOT, "roles", "watcher", "files", "raygate_node_watch.py")


@pytest.fixture(name="paths")
def fixture_paths(tmp_path):
    return {
        "script": SCRIPT,
        "python": sys.executable,
        "config_path": str(tmp_path / "etc" / "watch.json"),
        "state_dir": str(tmp_path / "state"),
        "run_dir": str(tmp_path / "run"),
        "unit_dir": str(tmp_path / "units"),
        "textfile": str(tmp_path / "raygate_watch.prom"),
    }


def daemon_pid(paths):
    with open(os.path.join(paths["run_dir"], watch_step.PID_FILE), encoding="utf-8") as fh:
        return json.load(fh)["pid"]


def test_process_daemon_starts_once_restarts_on_new_settings_and_goes_with_absent(paths):
    args = dict(paths, settings=SETTINGS)
    first = run(args)
    assert first["changed"] and first["watch"] == {}
    pid = daemon_pid(paths)
    assert watch_step.running(pid)
    assert json.loads(open(paths["config_path"], encoding="utf-8").read())["node_ip"] == "10.0.0.3"
    assert run(args)["changed"] is False and daemon_pid(paths) == pid
    # New settings: the daemon runs what it reads at its start, so it is started again.
    second = run(dict(args, settings=dict(SETTINGS, interval=120)))
    assert second["changed"] and daemon_pid(paths) != pid
    deadline = time.monotonic() + 10
    while watch_step.running(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not watch_step.running(pid)
    newer = daemon_pid(paths)
    os.makedirs(paths["state_dir"], exist_ok=True)
    with open(paths["textfile"], "w", encoding="utf-8") as fh:
        fh.write("raygate_watch_node_healthy 1\n")
    bundle = os.path.join(paths["state_dir"], "..", "bundle")
    os.makedirs(os.path.join(bundle, "lib"))
    gone = run(dict(paths, state="absent", remove_also=[bundle]))
    assert gone["changed"] and not os.path.exists(bundle)
    deadline = time.monotonic() + 10
    while watch_step.running(newer) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not watch_step.running(newer)
    for path in (
        paths["config_path"],
        paths["state_dir"],
        paths["textfile"],
        os.path.join(paths["run_dir"], "raygate-watch.pid"),
    ):
        assert not os.path.exists(path), path
    assert run(dict(paths, state="absent"))["changed"] is False


def test_check_mode_says_it_would_start_and_starts_nothing(paths):
    result = run(dict(paths, settings=SETTINGS), check_mode=True)
    assert result["changed"]
    assert not os.path.exists(paths["config_path"])
    assert not os.path.exists(os.path.join(paths["run_dir"], watch_step.PID_FILE))
    assert result["diff"][0]["after_header"] == paths["config_path"]


def test_systemd_units_and_the_timer_enabled(paths, monkeypatch):
    calls = []

    def fake_run(_runner, argv, **_kwargs):
        calls.append(argv[1:])
        rc = 1 if argv[1] in ("is-enabled", "is-active") else 0
        return rc, "", ""

    monkeypatch.setattr(watch_step.CommandRunner, "run", fake_run)
    result = run(dict(paths, settings=SETTINGS, supervisor="systemd"))
    assert result["changed"]
    service = open(os.path.join(paths["unit_dir"], "raygate-watch.service"), encoding="utf-8").read()
    timer = open(os.path.join(paths["unit_dir"], "raygate-watch.timer"), encoding="utf-8").read()
    assert "Type=oneshot" in service and "%s --config %s once" % (paths["script"], paths["config_path"]) in service
    assert "OnUnitActiveSec=60" in timer and "Unit=raygate-watch.service" in timer
    assert ["daemon-reload"] in calls and ["enable", "--now", "raygate-watch.timer"] in calls
    calls.clear()
    result = run(dict(paths, state="absent", supervisor="systemd"))
    assert result["changed"]
    assert ["disable", "--now", "raygate-watch.timer"] in calls
    assert not os.listdir(paths["unit_dir"])


def test_query_reads_the_state_and_changes_nothing(paths):
    os.makedirs(paths["state_dir"])
    state = {"verdict": "do-not-allocate", "taken_out": {"at": 5.0, "check": "xid", "reason": "raygate-watch: xid"}}
    with open(os.path.join(paths["state_dir"], "state.json"), "w", encoding="utf-8") as fh:
        json.dump(state, fh)
    result = run(dict(paths, state="query"))
    assert result == {"changed": False, "watch": state}


@pytest.mark.parametrize("settings, message", [
    ({"role": "worker", "node_ip": "10.0.0.3"}, "settings lacks interval"),
    (dict(SETTINGS, interval=5), "interval 5 is under 10 s"),
])  # fmt: skip
def test_bad_settings_fail_before_anything_is_written(paths, settings, message):
    result = run(dict(paths, settings=settings))
    assert result["failed"] and message in result["msg"]
    assert not os.path.exists(paths["config_path"])
