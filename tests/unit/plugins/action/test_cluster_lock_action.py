"""The cluster_lock action: it waits for another run's lock, takes over a stale one, and stops naming
the holder; the module's answers come from the real node half over a lock file in a temporary dir."""

import json
from unittest import mock

from action_harness import plugin_for

from ansible_collections.raygate.cluster.plugins.action import cluster_lock as action
from ansible_collections.raygate.cluster.plugins.module_utils.node import cluster_lock as node
from ansible_collections.raygate.cluster.plugins.modules import cluster_lock as module

ME = {"id": "ctl1:100:5", "user": "root", "controller": "ctl1", "pid": 100, "playbook": "site"}
OTHER = {"id": "ctl1:200:7", "user": "ops", "controller": "ctl1", "pid": 200, "playbook": "teardown"}


def run_action(path, check_mode=False, alive=True, on_call=None, **args):
    """Run the plugin as run ME on controller ctl1; OTHER's process runs while ALIVE."""
    task_args = dict({"playbook": "site", "path": str(path), "wait": 0, "interval": 0.01}, **args)
    plugin = plugin_for(action, "raygate.cluster.cluster_lock", task_args, check_mode)
    plugin._task.delegate_to = "node1"
    calls = []

    def execute(name, module_args=None, task_vars=None):
        calls.append(dict(module_args))
        if on_call:
            on_call(len(calls))
        params = {k: None for k in node.ARGUMENT_SPEC} | {"state": "held"} | module_args
        return node.change(params, check_mode=check_mode)

    plugin._execute_module = execute
    with mock.patch.object(action.lock, "this_run", return_value=ME), \
         mock.patch.object(action.lock, "holder_alive", return_value=alive), \
         mock.patch.object(action.socket, "gethostname", return_value="ctl1"), \
         mock.patch.object(action, "display") as display:  # fmt: skip
        return plugin.run(task_vars={"inventory_hostname": "node2"}), calls, display


def held_by(path, holder, since):
    path.write_text(json.dumps(dict(holder, since=since)))


def test_the_action_and_the_module_share_one_spec():
    assert module.ARGUMENT_SPEC is node.ARGUMENT_SPEC


def test_a_free_lock_is_taken_at_once_and_reports_no_change(tmp_path):
    result, calls, _display = run_action(tmp_path / "cluster.lock")
    assert result["action"] == "take" and not result.get("failed") and result["changed"] is False
    assert calls[0]["holder"] == ME and "take_over" not in calls[0]
    assert json.loads((tmp_path / "cluster.lock").read_text())["id"] == ME["id"]


def test_a_running_holder_makes_the_run_wait_then_stop_naming_it(tmp_path):
    path = tmp_path / "cluster.lock"
    held_by(path, OTHER, since=0)  # old, but its run is seen running: never taken over
    result, calls, _display = run_action(path, wait=1, stale=1, interval=0.2)
    assert result["failed"] is True and len(calls) > 1
    assert "node1: the cluster lock is held by teardown.yml run by ops on ctl1 (pid 200)" in result["msg"]
    assert "that run is still going" in result["msg"]
    assert json.loads(path.read_text())["id"] == OTHER["id"]


def test_the_run_takes_the_lock_once_the_holder_gives_it_back(tmp_path):
    path = tmp_path / "cluster.lock"
    held_by(path, OTHER, since=0)

    def give_back(count):
        if count == 3:
            node.change({"state": "released", "path": str(path), "holder": OTHER, "take_over": None})

    result, calls, _display = run_action(path, wait=30, on_call=give_back)
    assert result["action"] == "take" and not result.get("failed")
    assert len(calls) == 3 and result["taken_over"] is None


def test_the_lock_of_a_run_gone_from_this_controller_is_taken_over_at_once(tmp_path):
    path = tmp_path / "cluster.lock"
    with mock.patch.object(node.time, "time", return_value=1000.0):
        held_by(path, OTHER, since=999)
        result, calls, display = run_action(path, alive=False, wait=30, stale=900)
    assert result["action"] == "take" and result["taken_over"]["id"] == OTHER["id"]
    assert calls[-1]["take_over"] == OTHER["id"]
    warning = display.warning.call_args[0][0]
    assert "took over the cluster lock of teardown.yml run by ops on ctl1 (pid 200)" in warning
    assert "that run is gone" in warning


def test_another_controllers_lock_is_taken_over_once_stale_and_kept_before(tmp_path):
    path = tmp_path / "cluster.lock"
    other = dict(OTHER, id="ctl2:200:7", controller="ctl2")
    with mock.patch.object(node.time, "time", return_value=1000.0):
        held_by(path, other, since=990)
        result, calls, _display = run_action(path, alive=None, wait=0, stale=60)
        assert result["failed"] is True and "only the lock's age can tell" in result["msg"]
        assert all("take_over" not in c for c in calls)
        held_by(path, other, since=940)
        result, calls, display = run_action(path, alive=None, wait=30, stale=60)
    assert result["action"] == "take" and result["taken_over"]["id"] == other["id"]
    assert "another controller" in display.warning.call_args[0][0]


def test_check_mode_looks_once_and_warns(tmp_path):
    path = tmp_path / "cluster.lock"
    held_by(path, OTHER, since=0)
    result, calls, display = run_action(path, check_mode=True, wait=30)
    assert len(calls) == 1 and result["action"] == "busy" and not result.get("failed")
    assert "check mode: the cluster lock is held by teardown.yml" in display.warning.call_args[0][0]
    assert json.loads(path.read_text())["id"] == OTHER["id"]
