"""gate_node_checks: gpu_health then, on a healthy node, nccl-tests, in one call (module_utils/gate/node_checks.py).

The two steps are replaced by small implementations with the same surface (ARGUMENT_SPEC and
run(module)), which record the options they got: what is under test is the order, the skip, the
fabric hand-off and the failure, not the checks (their own tests cover those).
"""

import json
from types import SimpleNamespace

import pytest

from ansible_collections.raygate.cluster.plugins.module_utils.gate import node_checks


class Done(Exception):
    def __init__(self, result):
        super().__init__(json.dumps(result, default=str))
        self.result = result


class Module:
    """What node_checks.run needs of AnsibleModule."""

    def __init__(self, params, check_mode=False):
        self.params = dict({"nccl_test": None}, **params)
        self.check_mode = check_mode
        self.no_log_values = set()
        self._diff = False
        self.warnings = []

    def warn(self, text):
        self.warnings.append(text)

    def exit_json(self, **kwargs):
        raise Done(kwargs)

    def fail_json(self, msg, **kwargs):
        raise Done(dict(kwargs, failed=True, msg=msg))


def fake_step(answer, spec, seen):
    def run(module):
        seen.append((dict(module.params), module.check_mode))
        if isinstance(answer, Exception):
            module.fail_json(msg=str(answer))
        module.exit_json(**answer)

    return SimpleNamespace(ARGUMENT_SPEC=spec, run=run)


GPU_SPEC = {"expected_gpus": {"type": "int"}}
NCCL_SPEC = {
    "gpus": {"type": "int"},
    "fabric": {"type": "str", "default": "auto"},
    "mode": {"type": "str", "default": "single"},
}


@pytest.fixture
def steps(monkeypatch):
    seen = {"gpu_health": [], "nccl_test": []}

    def install(gpu_answer, nccl_answer=None):
        monkeypatch.setattr(node_checks, "gpu_health_step", fake_step(gpu_answer, GPU_SPEC, seen["gpu_health"]))
        monkeypatch.setattr(node_checks, "nccl_runner", fake_step(nccl_answer or {}, NCCL_SPEC, seen["nccl_test"]))
        return seen

    return install


def run(params, check_mode=False):
    with pytest.raises(Done) as done:
        node_checks.run(Module(params, check_mode))
    return done.value.result


def test_a_healthy_node_runs_nccl_tests_on_the_fabric_the_gpu_checks_found(steps):
    seen = steps(
        {"healthy": True, "verdict": "pass", "fabric": {"fabric": "efa"}},
        {"healthy": True, "verdict": "warn", "busbw": 100.0},
    )
    got = run({"gpu_health": {"expected_gpus": 8}, "nccl_test": {"gpus": 8, "fabric": "ib"}}, check_mode=True)
    assert got["steps"] == ["gpu_health", "nccl_test"]
    assert seen["nccl_test"] == [({"gpus": 8, "fabric": "efa", "mode": "single"}, True)]
    assert seen["gpu_health"] == [({"expected_gpus": 8}, True)]
    assert got["step_results"]["nccl_test"]["busbw"] == 100.0
    assert (got["verdict"], got["healthy"], got["changed"]) == ("warn", True, False)
    assert "failed" not in got


def test_without_a_detected_fabric_nccl_tests_keep_the_given_one(steps):
    seen = steps({"healthy": True, "verdict": "pass", "fabric": None}, {"healthy": True, "verdict": "pass"})
    got = run({"gpu_health": {}, "nccl_test": {"gpus": 8, "fabric": "ib"}})
    assert seen["nccl_test"][0][0]["fabric"] == "ib"
    assert got["verdict"] == "pass"


def test_an_unhealthy_node_skips_nccl_tests_and_says_why(steps):
    seen = steps({"healthy": False, "verdict": "fail", "fabric": {"fabric": "ib"}})
    got = run({"gpu_health": {}, "nccl_test": {"gpus": 8}})
    assert seen["nccl_test"] == []
    assert got["steps"] == ["gpu_health"]
    nccl = got["step_results"]["nccl_test"]
    assert nccl["skipped"] is True and "unhealthy (verdict fail)" in nccl["skip_reason"]
    assert (got["verdict"], got["healthy"]) == ("fail", False)
    assert "failed" not in got  # an unhealthy node is a verdict, not a failed task


def test_no_nccl_test_given_is_a_skipped_step(steps):
    seen = steps({"healthy": True, "verdict": "pass"})
    got = run({"gpu_health": {}})
    assert seen["nccl_test"] == []
    assert got["step_results"]["nccl_test"]["skipped"] is True
    assert got["healthy"] is True


def test_a_failing_step_fails_the_call_naming_it_with_the_answers_so_far(steps):
    steps({"healthy": True, "verdict": "pass"}, RuntimeError("nccl-tests binary all_reduce_perf not found"))
    got = run({"gpu_health": {}, "nccl_test": {"gpus": 8}})
    assert got["failed"] is True and got["failed_step"] == "nccl_test"
    assert got["msg"].startswith("nccl_test: ")
    assert got["step_results"]["gpu_health"]["verdict"] == "pass"
    assert got["step_results"]["nccl_test"]["failed"] is True


def test_invalid_step_options_fail_before_any_step_runs(steps):
    seen = steps({"healthy": True, "verdict": "pass"})
    got = run({"gpu_health": {"expected_gpus": 8, "colour": "red"}, "nccl_test": {"gpus": 8}})
    assert got["failed"] is True and got["failed_step"] == "gpu_health"
    assert "colour" in got["msg"]
    assert seen["gpu_health"] == [] and seen["nccl_test"] == []


def test_pair_mode_is_refused_before_any_step_runs(steps):
    seen = steps({"healthy": True, "verdict": "pass"})
    got = run({"gpu_health": {}, "nccl_test": {"gpus": 8, "mode": "pairs"}})
    assert got["failed"] is True and "mode must be single" in got["msg"]
    assert seen["gpu_health"] == []
