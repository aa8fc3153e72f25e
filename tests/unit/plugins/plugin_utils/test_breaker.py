"""The circuit breaker: when it trips, when it does not, overrides, small fleets, likely causes."""

import pytest

from ansible_collections.raygate.cluster.plugins.module_utils.checks import reason, result
from ansible_collections.raygate.cluster.plugins.plugin_utils import breaker


def entry(host, healthy=True, status="checked", failing=(), warning=()):
    checks = [result(name, "fail", "%s broke" % name) for name in failing]
    checks += [result(name, "warn", "%s is off" % name) for name in warning]
    checks.append(result("gpu_count", "pass", "8 GPUs"))
    reasons = [reason(c) for c in checks if c["status"] == "fail"]
    if not healthy and not reasons:  # fail_on_warn: the warnings are the reasons
        reasons = [reason(c) for c in checks if c["status"] == "warn"]
    return {"host": host, "status": status, "healthy": healthy, "reasons": reasons, "checks": checks}


def fleet(failed, total, check="xid"):
    return [entry("n%d" % i, healthy=i >= failed, failing=[check] if i < failed else ()) for i in range(total)]


def test_more_than_half_failing_trips_it():
    state = breaker.judge(fleet(3, 4))
    assert state["tripped"] is True
    assert (state["checked"], state["failed"], state["share"]) == (4, 3, 75.0)
    assert state["failed_hosts"] == ["n0", "n1", "n2"]
    assert state["detail"] == "3 of 4 checked nodes failed (75%), more than raygate_health_breaker_threshold 50%"
    assert state["causes"][0] == (
        "all 3 failing nodes fail xid: its threshold or tool may be wrong for this fleet, or something they share"
        " broke it"
    )
    assert state["causes"][-1] == breaker.GENERAL_CAUSES


def test_exactly_half_does_not_trip_it():
    state = breaker.judge(fleet(2, 4))
    assert state["tripped"] is False and state["causes"] == []
    assert state["detail"] == "2 of 4 checked nodes failed (50%), not more than raygate_health_breaker_threshold 50%"


@pytest.mark.parametrize(
    "threshold, failed, total, tripped",
    [
        (0, 10, 10, False),  # off
        (100, 10, 10, False),  # more than 100 % cannot happen
        (25, 2, 6, True),  # 33 % > 25 %
        (34, 1, 3, False),  # 33 % is not more than 34 %
        (90, 9, 10, False),
        (90, 10, 10, True),
    ],
)
def test_the_threshold_overrides_the_default(threshold, failed, total, tripped):
    assert breaker.judge(fleet(failed, total), threshold=threshold)["tripped"] is tripped


def test_off_says_so():
    assert breaker.judge(fleet(4, 4), threshold=0)["detail"].endswith(
        "the breaker is off (raygate_health_breaker_threshold 0)"
    )


@pytest.mark.parametrize("failed, total", [(1, 1), (2, 2), (1, 2)])
def test_a_fleet_of_one_or_two_does_not_trip_on_its_own_failures(failed, total):
    state = breaker.judge(fleet(failed, total))
    assert state["tripped"] is False
    assert "not judged: fewer than raygate_health_breaker_min_nodes (3) were checked" in state["detail"]


def test_min_nodes_one_lets_a_lone_node_trip_it():
    assert breaker.judge(fleet(1, 1), min_nodes=1)["tripped"] is True
    assert breaker.judge(fleet(2, 3), min_nodes=4)["tripped"] is False


def test_unreachable_and_failed_nodes_count_as_failed_skipped_ones_do_not_count():
    entries = [
        entry("n1"),
        entry("n2", healthy=False, status="unreachable", failing=["reachable"]),
        entry("n3", healthy=False, status="failed", failing=["run"]),
        entry("n4", status="skipped"),
        entry("n5", status="skipped"),
    ]
    state = breaker.judge(entries)
    # 2 of 3 checked, skipped members aside: tripped.
    assert (state["checked"], state["failed"], state["tripped"]) == (3, 2, True)
    assert state["detail"].startswith("2 of 3 checked nodes failed (66.7%)")


def test_all_unreachable_points_at_the_network_not_the_gpus():
    entries = [entry("n%d" % i, healthy=False, status="unreachable", failing=["reachable"]) for i in range(3)]
    entries.append(entry("n3"))
    causes = breaker.judge(entries)["causes"]
    assert causes[0].startswith("all 3 failing nodes fail reachable: they left the run (no answer, or a step failed)")


def test_a_fabric_check_failing_everywhere_points_at_the_fabric():
    causes = breaker.judge(fleet(3, 4, check="nccl_pair_transport"))["causes"]
    assert "a fabric-wide outage" in causes[0]
    causes = breaker.judge(fleet(3, 4, check="driver_version"))["causes"]
    assert "a bad driver roll-out" in causes[0]


def test_warnings_count_only_when_they_left_the_node_out():
    entries = [entry("n%d" % i, healthy=False, warning=["thermal_throttle"]) for i in range(3)] + [entry("n3")]
    state = breaker.judge(entries)
    assert state["tripped"] is True
    assert state["causes"][0].startswith("all 3 failing nodes fail thermal_throttle:")


def test_a_version_only_the_failing_nodes_run_is_named():
    entries = fleet(3, 4, check="nccl_busbw")
    entries[0]["checks"].insert(0, result("xid", "fail", "Xid 79"))  # not shared: not a cause
    prints = {"n0": {"driver": "560.35.03"}, "n1": {"driver": "560.35.03"}, "n2": {"driver": "560.35.03"}}
    prints["n3"] = {"driver": "550.90.07"}
    causes = breaker.judge(entries, fingerprints=prints)["causes"]
    assert causes == [
        "all 3 failing nodes fail nccl_busbw: its threshold or tool may be wrong for this fleet, or something they"
        " share broke it",
        "every failing node runs driver 560.35.03, which no passing node does: a roll-out of it gone wrong?",
        breaker.GENERAL_CAUSES,
    ]


def test_no_version_is_named_when_a_passing_node_shares_it_or_one_is_unknown():
    entries = fleet(3, 4, check="nccl_busbw")
    shared = {
        "n0": {"driver": "1.0.0"},
        "n1": {"driver": "1.0.0"},
        "n2": {"driver": "2.0.0"},
        "n3": {"driver": "2.0.0"},
    }
    assert len(breaker.judge(entries, fingerprints=shared)["causes"]) == 2
    unknown = {"n0": {"driver": "1.0.0"}, "n1": {"driver": "1.0.0"}, "n3": {"driver": "2.0.0"}}
    assert len(breaker.judge(entries, fingerprints=unknown)["causes"]) == 2


def test_message_names_the_share_and_what_to_do():
    text = breaker.message(breaker.judge(fleet(3, 4)))
    assert text.startswith("health gate stopped: circuit breaker tripped: 3 of 4 checked nodes failed (75%)")
    assert "nobody was left out or evicted" in text
    assert "raise raygate_health_breaker_threshold (0 turns the breaker off)" in text


@pytest.mark.parametrize(
    "threshold, min_nodes, match",
    [(-1, 3, "breaker_threshold"), (101, 3, "breaker_threshold"), (50, 0, "breaker_min_nodes"), (True, 3, "threshold")],
)
def test_bad_settings_are_refused(threshold, min_nodes, match):
    with pytest.raises(ValueError, match=match):
        breaker.judge(fleet(1, 3), threshold=threshold, min_nodes=min_nodes)
