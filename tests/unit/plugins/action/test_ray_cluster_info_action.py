"""The ray_cluster_info action: its arguments validated with the module's spec, the wait it does, check mode."""

import pytest
from action_harness import plugin_for
from ansible.errors import AnsibleActionFail

from ansible_collections.raygate.cluster.plugins.action import ray_cluster_info as action
from ansible_collections.raygate.cluster.plugins.module_utils.node import cluster
from ansible_collections.raygate.cluster.plugins.modules import ray_cluster_info as module

URL = "http://198.18.0.11:8265"


def answer(alive, gpus=0.0, complete=False, reachable=True, **extra):
    out = {"reachable": reachable, "alive_nodes": alive, "total_gpus": gpus, "complete": complete, "missing": []}
    out["targets"] = {"nodes": 2, "gpus": gpus}
    out.update(extra)
    return out


def run_action(args, answers, check_mode=False):
    """Run the plugin with _execute_module answering from ANSWERS in turn; returns (result, module calls)."""
    plugin = plugin_for(action, "raygate.cluster.ray_cluster_info", args, check_mode)
    calls = []
    pending = list(answers)

    def execute(name, module_args=None, task_vars=None):
        calls.append((name, dict(module_args)))
        return dict(pending.pop(0) if len(pending) > 1 else pending[0])

    plugin._execute_module = execute
    return plugin.run(task_vars={"inventory_hostname": "node1"}), calls


def test_the_action_and_the_module_share_one_spec():
    assert action.ARGUMENT_SPEC is module.ARGUMENT_SPEC is cluster.ARGUMENT_SPEC


@pytest.mark.parametrize("wait", ["no", "false", False, 0, "off"])
def test_wait_given_as_no_does_not_wait(wait):
    res, calls = run_action({"dashboard_url": URL, "wait": wait, "wait_nodes": 2}, [answer(1)])
    assert len(calls) == 1
    assert calls[0] == (action.MODULE, {"dashboard_url": URL, "wait": wait, "wait_nodes": 2})
    assert res["complete"] is False and not res.get("failed")


def test_no_target_means_one_answer():
    res, calls = run_action({"dashboard_url": URL, "wait_nodes": "0", "wait_gpus": "0.0"}, [answer(1)])
    assert len(calls) == 1 and res["alive_nodes"] == 1


def test_waits_until_complete_with_arguments_as_strings():
    answers = [answer(0, reachable=False, failed=True, msg="did not answer"), answer(1), answer(2, 16.0, complete=True)]
    args = {"dashboard_url": URL, "wait": "yes", "wait_nodes": "2", "wait_gpus": "16", "wait_sleep": "0"}
    res, calls = run_action(args, answers)
    assert len(calls) == 3
    assert all(c == (action.MODULE, args) for c in calls)  # the task's own arguments, each time
    assert res["complete"] is True and res["changed"] is False and not res.get("failed")
    assert "msg" not in res and isinstance(res["elapsed"], float)


def test_times_out_naming_what_it_waited_for():
    args = {"dashboard_url": URL, "wait_nodes": 2, "wait_timeout": 0, "wait_sleep": 0}
    res, calls = run_action(args, [answer(1, missing=["node2"])])
    assert len(calls) == 1
    assert res["failed"] is True
    assert res["msg"].startswith("timed out after 0s: 1/2 nodes")


def test_a_real_error_stops_the_wait_at_once():
    args = {"dashboard_url": URL, "wait_nodes": 2, "wait_sleep": 0}
    res, calls = run_action(args, [{"failed": True, "msg": "auth is on but the token file /x is missing or empty"}])
    assert len(calls) == 1 and res["failed"] is True and "token file" in res["msg"]


def test_check_mode_asks_once_and_does_not_wait():
    args = {"dashboard_url": URL, "wait_nodes": 3, "wait_timeout": 600}
    res, calls = run_action(args, [answer(0, reachable=False)], check_mode=True)
    assert len(calls) == 1
    assert res["reachable"] is False and not res.get("failed")


@pytest.mark.parametrize(
    "args,needle",
    [
        (
            {"dashboard_url": URL, "wait_nodes": "many"},
            "'wait_nodes' is of type .*str.* and we were unable to convert to int",
        ),
        ({"dashboard_url": URL, "wait": "perhaps"}, "The value 'perhaps' is not a valid boolean"),
        (
            {"dashboard_url": URL, "wait_gpus": "lots"},
            "'wait_gpus' is of type .*str.* and we were unable to convert to float",
        ),
        (
            {"dashboard_url": URL, "expected": "node2"},
            "'expected' is of type .*str.* and we were unable to convert to dict",
        ),
        ({"wait_nodes": 2}, "missing required arguments: dashboard_url"),
        ({"dashboard_url": URL, "wait_node": 2}, "Unsupported parameters .* wait_node"),
    ],
)
@pytest.mark.parametrize("check_mode", [False, True])
def test_a_bad_argument_fails_with_the_validators_message_before_the_module(args, needle, check_mode):
    # No answers: a call to the module would raise IndexError instead of the validator's failure.
    with pytest.raises(AnsibleActionFail, match=needle):
        run_action(args, [], check_mode=check_mode)
