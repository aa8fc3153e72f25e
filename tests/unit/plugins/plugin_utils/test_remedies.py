"""The default actions and the severity order."""

import pytest

from ansible_collections.raygate.cluster.plugins.module_utils.checks import result
from ansible_collections.raygate.cluster.plugins.module_utils.gate.gpu_checks import CHECK_NAMES
from ansible_collections.raygate.cluster.plugins.plugin_utils import remedies
from ansible_collections.raygate.cluster.plugins.plugin_utils.report.decision import LEFT_CHECKS

NCCL = ["nccl_busbw", "nccl_wrong", "nccl_completed", "nccl_transport", "nccl_fabric_errors"]
PAIRS = [name.replace("nccl_", "nccl_pair_") for name in NCCL[:4]] + ["nccl_pair_isolation"]
MADE = list(LEFT_CHECKS.values()) + ["checks", "fleet_drift"]


@pytest.mark.parametrize("name", list(CHECK_NAMES) + NCCL + PAIRS + MADE)
def test_every_check_raygate_makes_has_its_own_action(name):
    for status in ("fail", "warn"):
        action = remedies.default_action(name, status)
        assert action and action != remedies.FALLBACK, (name, status)


def test_a_warning_can_ask_for_less_than_a_failure():
    assert remedies.default_action("ecc_correctable_dram", "warn").startswith("watch the count")
    assert remedies.default_action("ecc_correctable_dram", "fail").startswith("drain the node")


def test_unknown_checks_get_the_fallback():
    assert remedies.default_action("sxid_from_the_future") == remedies.FALLBACK


def test_severity_order_and_the_worst_of_a_node():
    assert [remedies.severity_rank(s) for s in ("do-not-allocate", "degraded", "info", None, "bogus")] == [
        3,
        2,
        1,
        0,
        0,
    ]
    checks = [
        result("a", "warn", "", severity="info"),
        result("b", "warn", ""),
        result("c", "pass", ""),
    ]
    assert remedies.worst_severity(checks) == "degraded"
    assert remedies.worst_severity(checks + [result("d", "fail", "")]) == "do-not-allocate"
    assert remedies.worst_severity([result("c", "pass", ""), result("s", "skip", "")]) is None
