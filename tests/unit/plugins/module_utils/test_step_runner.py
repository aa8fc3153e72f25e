"""run_step and StepModule: a module's implementation run as a step inside another module."""

import json
from types import SimpleNamespace

import pytest
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args

from ansible_collections.raygate.cluster.plugins.module_utils import step_runner
from ansible_collections.raygate.cluster.plugins.module_utils.node import install as install_step
from ansible_collections.raygate.cluster.plugins.module_utils.node import node as node_step
from ansible_collections.raygate.cluster.plugins.module_utils.step_runner import StepFailed, StepModule, run_step

SPEC = dict(
    name=dict(type="str", required=True),
    count=dict(type="int", default=3),
    tags=dict(type="list", elements="str", default=[]),
    secret=dict(type="str", no_log=True),
    left=dict(type="str"),
    right=dict(type="str"),
)


class Parent:
    """What run_step needs of the parent module."""

    def __init__(self, diff=False):
        self.no_log_values = set()
        self._diff = diff
        self.warnings = []

    def warn(self, warning):
        self.warnings.append(warning)


def impl(run, **relations):
    return SimpleNamespace(ARGUMENT_SPEC=SPEC, run=run, **relations)


def echo(module):
    module.exit_json(params=module.params, check_mode=module.check_mode, diff=module._diff)


def test_defaults_are_applied_and_types_coerced():
    result = run_step(Parent(), "demo", impl(echo), {"name": "x", "count": "5"}, check_mode=False)
    assert result["params"] == {
        "name": "x",
        "count": 5,
        "tags": [],
        "secret": None,
        "left": None,
        "right": None,
    }
    assert result["changed"] is False  # exit_json's default, as AnsibleModule's


def test_check_mode_is_the_callers_and_diff_the_parents():
    result = run_step(Parent(diff=True), "demo", impl(echo), {"name": "x"}, check_mode=True)
    assert result["check_mode"] is True and result["diff"] is True
    result = run_step(Parent(diff=False), "demo", impl(echo), {"name": "x"}, check_mode=False)
    assert result["check_mode"] is False and result["diff"] is False


def test_the_given_args_are_not_modified():
    args = {"name": "x", "count": "5"}
    run_step(Parent(), "demo", impl(echo), args, check_mode=False)
    assert args == {"name": "x", "count": "5"}


def test_a_default_list_is_not_shared_between_runs():
    def grow(module):
        module.params["tags"].append("mine")
        module.exit_json(tags=module.params["tags"])

    step = impl(grow)
    run_step(Parent(), "demo", step, {"name": "x"}, check_mode=False)
    assert run_step(Parent(), "demo", step, {"name": "x"}, check_mode=False)["tags"] == ["mine"]
    assert SPEC["tags"]["default"] == []


@pytest.mark.parametrize(
    "args, words",
    [
        ({"name": "x", "bogus": 1}, ["unsupported parameters", "bogus"]),
        ({}, ["missing required arguments", "name"]),
        ({"name": "x", "count": "many"}, ["count", "int"]),
    ],
)
def test_invalid_args_fail_naming_the_step_and_the_option(args, words):
    ran = []
    with pytest.raises(StepFailed) as exc:
        run_step(Parent(), "demo", impl(ran.append), args, check_mode=False)
    assert exc.value.step == "demo"
    assert str(exc.value).startswith("demo: invalid options: ")
    for word in words:
        assert word in exc.value.msg
    assert ran == []  # the step never ran


def test_every_problem_is_named_at_once():
    with pytest.raises(StepFailed) as exc:
        run_step(Parent(), "demo", impl(echo), {"bogus": 1, "count": "many"}, check_mode=False)
    assert "bogus" in exc.value.msg and "name" in exc.value.msg and "count" in exc.value.msg


def test_relations_of_the_step_are_checked():
    step = impl(echo, MUTUALLY_EXCLUSIVE=[("left", "right")], REQUIRED_IF=[("count", 7, ("left",))])
    with pytest.raises(StepFailed) as exc:
        run_step(Parent(), "demo", step, {"name": "x", "left": "a", "right": "b"}, check_mode=False)
    assert "mutually exclusive" in exc.value.msg and "left|right" in exc.value.msg
    with pytest.raises(StepFailed) as exc:
        run_step(Parent(), "demo", step, {"name": "x", "count": 7}, check_mode=False)
    assert "count is 7" in exc.value.msg and "left" in exc.value.msg


def test_ray_install_mutually_exclusive_sources_fail_as_the_module_does():
    args = {"version": "2.60.0", "wheelhouse": "/w", "index_url": "https://pypi.example"}
    with pytest.raises(StepFailed) as exc:
        run_step(Parent(), "ray_install", install_step, args, check_mode=True)
    assert str(exc.value) == "ray_install: invalid options: parameters are mutually exclusive: wheelhouse|index_url"


def test_no_log_values_join_the_parents():
    parent = Parent()
    run_step(parent, "demo", impl(echo), {"name": "x", "secret": "s3cr3t-value"}, check_mode=False)
    assert "s3cr3t-value" in parent.no_log_values
    parent = Parent()
    with pytest.raises(StepFailed):
        run_step(parent, "ray_node", node_step, {"auth_token": "tok-123", "bogus": 1}, check_mode=True)
    assert "tok-123" in parent.no_log_values  # known even when validation fails


def test_fail_json_raises_step_failed_with_msg_and_keys():
    def fail(module):
        module.fail_json(msg="port 6379 is taken", busy_ports=[6379])

    with pytest.raises(StepFailed) as exc:
        run_step(Parent(), "ray_node", impl(fail), {"name": "x"}, check_mode=False)
    assert exc.value.msg == "port 6379 is taken"
    assert exc.value.kwargs == {"busy_ports": [6379]}
    assert str(exc.value) == "ray_node: port 6379 is taken"
    assert exc.value.result == {"failed": True, "msg": "port 6379 is taken", "busy_ports": [6379]}


def test_a_broad_except_inside_a_step_cannot_swallow_its_end():
    def stubborn(module):
        try:
            module.fail_json(msg="real failure")
        except Exception:
            module.exit_json(changed=True)

    with pytest.raises(StepFailed) as exc:
        run_step(Parent(), "demo", impl(stubborn), {"name": "x"}, check_mode=False)
    assert exc.value.msg == "real failure"


def test_an_unexpected_exception_becomes_a_failure_with_its_traceback():
    def broken(module):
        raise OSError("disk full")

    with pytest.raises(StepFailed) as exc:
        run_step(Parent(), "demo", impl(broken), {"name": "x"}, check_mode=False)
    assert exc.value.msg == "OSError: disk full"
    assert "Traceback" in exc.value.kwargs["exception"]


def test_a_step_that_returns_without_a_result_fails():
    with pytest.raises(StepFailed) as exc:
        run_step(Parent(), "demo", impl(lambda module: None), {"name": "x"}, check_mode=False)
    assert "without a result" in exc.value.msg


def test_warnings_go_to_the_parent_prefixed_with_the_step():
    def warn(module):
        module.warn("ufw is inactive")
        module.exit_json()

    parent = Parent()
    run_step(parent, "ray_firewall", impl(warn), {"name": "x"}, check_mode=False)
    assert parent.warnings == ["ray_firewall: ufw is inactive"]


def test_step_module_surface():
    parent = Parent(diff=True)
    module = StepModule(parent, "demo", {"a": 1}, check_mode=True)
    assert (module.params, module.check_mode, module._diff) == ({"a": 1}, True, True)


def test_a_real_parent_masks_the_steps_no_log_values_in_its_output(capsys):
    """The step hands a no_log value back in its result; the parent's exit_json must mask it."""

    def leak(module):
        module.exit_json(echoed=module.params["secret"], note="token %s" % module.params["secret"])

    with patch_module_args({}):
        parent = AnsibleModule(argument_spec={}, supports_check_mode=True)
        result = run_step(parent, "demo", impl(leak), {"name": "x", "secret": "hunter2-token"}, check_mode=False)
        assert result["echoed"] == "hunter2-token"  # unmasked inside the process...
        with pytest.raises(SystemExit):
            parent.exit_json(results={"demo": result})
    out = capsys.readouterr().out
    assert "hunter2-token" not in out  # ...masked in what leaves it
    assert json.loads(out)["results"]["demo"]["note"] == "token ********"


def test_no_log_values_reach_into_suboptions_and_lists():
    spec = {
        "token": {"type": "str", "no_log": True},
        "plain": {"type": "str"},
        "backends": {
            "type": "list",
            "elements": "dict",
            "options": {"password": {"type": "str", "no_log": True}, "host": {"type": "str"}},
        },
    }
    params = {"token": "t0k", "plain": "seen", "backends": [{"password": "pw1", "host": "h"}, {"host": "h2"}]}
    assert step_runner.no_log_values(spec, params) == {"t0k", "pw1"}
    assert step_runner.no_log_values(spec, {"token": None, "plain": "x"}) == set()
