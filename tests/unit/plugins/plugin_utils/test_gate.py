"""The health gate's per-node report input, assembled from what the gate's steps registered."""

import pytest
from role_answers import ANSWERS

from ansible_collections.raygate.cluster.plugins.module_utils.checks import result
from ansible_collections.raygate.cluster.plugins.plugin_utils import gate_decision as gate
from ansible_collections.raygate.cluster.plugins.plugin_utils.report import decision

SKIPPED = {"changed": False, "skipped": True, "skip_reason": "Conditional result was False"}
GPU = [result("gpu_count", "pass", "8 GPUs", 8, 8), result("xid", "pass", "no Xid", [], [])]
SINGLE = [result("nccl_busbw", "pass", "480 GB/s", 480.0, 460.0)]
PAIR = [result("nccl_pair_busbw", "pass", "45 GB/s with 10.0.0.2", 45.0, 40.0)]
LONE = {
    "name": "nccl_pairs",
    "status": "skip",
    "source": "nccl_pairs",
    "detail": "no other node to run the network test with; set raygate_health_pair_partner to a member whose GPUs "
    "may run a short nccl-test",
}


def pairs(*addresses):
    """A pair test's result as run_once registers it on every host."""
    return {"changed": False, "healthy": True, "nodes": {a: {"healthy": True, "checks": PAIR} for a in addresses}}


FINGERPRINT = {"driver": "550.90.07", "vbios": ["96.00.74.00.0D"], "gpu_count": 8}


def checked(address, candidate=True, pair_result=None, **extra):
    hv = {
        "raygate_gate_status": "checked",
        "raygate_gate_skip_reason": "no GPUs on this node (raygate_num_gpus: 0)",
        "raygate_gate_address": address,
        "raygate_gpu_health": {"changed": False, "healthy": True, "checks": GPU, "fingerprint": FINGERPRINT},
        # No pair candidate: its single-node nccl-test failed.
        "raygate_nccl_single": {"changed": False, "healthy": bool(candidate), "checks": SINGLE},
        "raygate_nccl_pairs": SKIPPED if pair_result is None else pair_result,
    }
    hv.update(extra)
    return hv


def skipped(address, reason="already a running member (pid 42); health.yml re-checks it", pair_result=None):
    return {
        "raygate_gate_status": "skipped",
        "raygate_gate_skip_reason": reason,
        "raygate_gate_address": address,
        "raygate_gpu_health": SKIPPED,
        "raygate_nccl_single": SKIPPED,
        "raygate_nccl_pairs": SKIPPED if pair_result is None else pair_result,
    }


def sources(checks):
    return [(c["name"], c["source"]) for c in checks]


# ---- checks -----------------------------------------------------------------------------


def test_checks_from_the_three_sources_are_tagged_with_their_source_in_order():
    hv = checked("10.0.0.1", pair_result=pairs("10.0.0.1", "10.0.0.2"))
    assert sources(gate.node_checks(hv, "10.0.0.1", answers=ANSWERS)) == [
        ("gpu_count", "gpu_health"),
        ("xid", "gpu_health"),
        ("nccl_busbw", "nccl_test"),
        ("nccl_pair_busbw", "nccl_pairs"),
    ]


def test_the_source_replaces_one_a_check_carried_and_the_results_are_not_changed():
    hv = checked("10.0.0.1", raygate_gpu_health={"checks": [dict(GPU[0], source="nccl_test")]})
    [first] = gate.node_checks(hv, "10.0.0.1", answers=ANSWERS)[:1]
    assert first == dict(GPU[0], source="gpu_health")
    assert hv["raygate_gpu_health"]["checks"][0]["source"] == "nccl_test"
    assert "source" not in GPU[0]


def test_only_the_nodes_own_pair_result_is_taken():
    hv = checked("10.0.0.2", pair_result=pairs("10.0.0.1", "10.0.0.2"))
    hv["raygate_nccl_pairs"]["nodes"]["10.0.0.1"] = {"checks": [result("other", "fail", "not mine")]}
    assert sources(gate.node_checks(hv, "10.0.0.2", answers=ANSWERS))[-1] == ("nccl_pair_busbw", "nccl_pairs")
    assert "other" not in [c["name"] for c in gate.node_checks(hv, "10.0.0.2", answers=ANSWERS)]


def test_skipped_tasks_add_no_checks():
    hv = checked("10.0.0.1", raygate_nccl_single=SKIPPED)
    assert sources(gate.node_checks(hv, "10.0.0.1", pairs=False, answers=ANSWERS)) == [
        ("gpu_count", "gpu_health"),
        ("xid", "gpu_health"),
    ]
    assert gate.node_checks(skipped("10.0.0.3"), "10.0.0.3", answers=ANSWERS) == []


def test_missing_results_add_no_checks():
    assert gate.node_checks({"raygate_gate_status": "checked"}, "10.0.0.1", answers=ANSWERS) == []


# ---- the lone node's skip check ---------------------------------------------------------


def test_a_lone_pair_candidate_gets_the_skip_check():
    checks = gate.node_checks(checked("10.0.0.1"), "10.0.0.1", answers=ANSWERS)
    assert checks[-1] == LONE
    assert sources(checks) == [
        ("gpu_count", "gpu_health"),
        ("xid", "gpu_health"),
        ("nccl_busbw", "nccl_test"),
        ("nccl_pairs", "nccl_pairs"),
    ]


def test_a_candidate_left_out_of_a_pair_test_that_ran_gets_the_skip_check():
    checks = gate.node_checks(
        checked("10.0.0.4", pair_result=pairs("10.0.0.1", "10.0.0.2")), "10.0.0.4", answers=ANSWERS
    )
    assert checks[-1] == LONE


def test_no_skip_check_for_a_node_with_a_pair_result():
    checks = gate.node_checks(
        checked("10.0.0.1", pair_result=pairs("10.0.0.1", "10.0.0.2")), "10.0.0.1", answers=ANSWERS
    )
    assert LONE not in checks


def test_a_pair_result_without_checks_still_counts_as_tested():
    hv = checked("10.0.0.1", pair_result={"nodes": {"10.0.0.1": {"healthy": True}}})
    assert sources(gate.node_checks(hv, "10.0.0.1", answers=ANSWERS))[-1] == ("nccl_busbw", "nccl_test")


@pytest.mark.parametrize(
    "change",
    [
        {"raygate_nccl_single": {"healthy": False, "checks": []}},
        {"raygate_gpu_health": {"healthy": False, "checks": []}},
        {"raygate_gpu_health": SKIPPED},
        {"raygate_gate_status": "skipped"},
    ],
    ids=["single-test-failed", "gpus-unhealthy", "gpu-checks-skipped", "not-checked"],
)
def test_no_skip_check_for_a_node_that_was_no_candidate(change):
    assert LONE not in gate.node_checks(checked("10.0.0.1", **change), "10.0.0.1", answers=ANSWERS)


def test_a_node_is_a_candidate_when_the_single_test_did_not_run():
    """raygate_health_nccl off: the single-node test is skipped, the GPUs' verdict decides."""
    assert gate.node_checks(checked("10.0.0.1", raygate_nccl_single=SKIPPED), "10.0.0.1", answers=ANSWERS)[-1] == LONE


def test_no_skip_check_when_the_gate_runs_no_pair_tests():
    assert LONE not in gate.node_checks(checked("10.0.0.1"), "10.0.0.1", pairs=False, answers=ANSWERS)


# ---- the pair plan and the gate's decision ------------------------------------------------


def _plan_vars():
    return {
        "n1": checked("10.0.0.1", raygate_gpu_health={"healthy": True, "fabric": {"fabric": "ib"}}),
        "n2": checked("10.0.0.2", candidate=False),
        "n3": checked("10.0.0.3", ansible_host="10.9.9.3", raygate_node_ip=""),
        "n4": checked("10.0.0.4", raygate_node_ip="10.0.0.4"),
    }


def test_pair_plan_takes_the_candidates_in_play_order_from_the_first():
    hv = _plan_vars()
    plan = gate.pair_plan(["n2", "n1", "n3"], hv, answers=ANSWERS)
    assert plan["launcher"] == "n1"
    assert plan["hosts"] == ["n1", "10.9.9.3"]  # no raygate_node_ip: ansible_host, else the name
    assert (plan["fabric"], plan["require_transport"], plan["known_good"]) == ("ib", "GDRDMA", [])
    assert plan["args"] == {k: plan[k] for k in ("hosts", "known_good", "fabric", "require_transport")}


def test_pair_plan_adds_a_partner_outside_the_test_as_known_good():
    hv = _plan_vars()
    plan = gate.pair_plan(["n1"], hv, partner="n4", answers=ANSWERS)
    assert plan["hosts"] == ["n1", "10.0.0.4"] and plan["known_good"] == ["10.0.0.4"]
    # Under test itself, or with nobody to pair: no partner.
    assert gate.pair_plan(["n1", "n4"], hv, partner="n4", answers=ANSWERS)["known_good"] == []
    assert gate.pair_plan(["n2"], hv, partner="n4", answers=ANSWERS) == dict(
        gate.pair_plan(["n2"], hv, partner="n4", answers=ANSWERS), hosts=[], known_good=[], launcher="n2"
    )


@pytest.mark.parametrize(
    "fabric, gdr, wanted, expected",
    [
        ("ib", True, "", "GDRDMA"),
        ("efa", False, "", "no_socket"),
        ("none", True, "", "any"),
        ("ib", True, "any", "any"),
    ],
)
def test_pair_transport(fabric, gdr, wanted, expected):
    assert gate.pair_transport(fabric, gdr, wanted) == expected


def test_pair_plan_falls_back_to_the_given_fabric():
    hv = _plan_vars()
    assert gate.pair_plan(["n3", "n4"], hv, default_fabric="none", answers=ANSWERS)["require_transport"] == "any"


@pytest.mark.parametrize(
    "gpus, pid, check_all, recheck, status",
    [
        (8, None, False, False, "checked"),
        (0, None, True, True, "skipped"),
        ("8", 4242, False, False, "skipped"),
        (8, 4242, True, False, "checked"),
        (8, 4242, "false", "true", "checked"),
        (8, "", False, False, "checked"),
    ],
)
def test_gate_decision(gpus, pid, check_all, recheck, status):
    decided = gate.gate_decision(gpus, pid, check_all, recheck)
    assert decided["status"] == status
    assert bool(decided["skip_reason"]) == (status == "skipped")
    if status == "skipped" and pid:
        assert "pid %s" % pid in decided["skip_reason"]


def test_the_skip_check_is_a_valid_report_check():
    [node] = decision.normalize_nodes([{"host": "a", "role": "head", "checks": [LONE]}])
    assert node["checks"][0]["status"] == "skip" and node["checks"][0]["source"] == "nccl_pairs"


# ---- entries ----------------------------------------------------------------------------


def test_a_checked_node_entry():
    entry = gate.gate_entry(
        "node2", checked("10.0.0.2", pair_result=pairs("10.0.0.1", "10.0.0.2")), "node1", answers=ANSWERS
    )
    assert {k: v for k, v in entry.items() if k != "checks"} == {
        "host": "node2",
        "role": "worker",
        "address": "10.0.0.2",
        "status": "checked",
        "skip_reason": "",
        "fingerprint": FINGERPRINT,
    }
    assert len(entry["checks"]) == 4


def test_a_skipped_node_entry_keeps_its_reason_and_has_no_checks():
    entry = gate.gate_entry("node3", skipped("10.0.0.3"), "node1", answers=ANSWERS)
    assert entry == {
        "host": "node3",
        "role": "worker",
        "address": "10.0.0.3",
        "status": "skipped",
        "skip_reason": "already a running member (pid 42); health.yml re-checks it",
        "fingerprint": None,
        "checks": [],
    }


def test_the_head_entry_has_role_head():
    assert gate.gate_entry("node1", checked("10.0.0.1"), "node1", answers=ANSWERS)["role"] == "head"


@pytest.mark.parametrize("missing", ["raygate_gate_status", "raygate_gate_address"])
def test_a_host_the_gate_did_not_run_on_is_an_error(missing):
    hv = checked("10.0.0.1")
    del hv[missing]
    with pytest.raises(ValueError, match="host node1 has no %s" % missing):
        gate.gate_entry("node1", hv, "node1", answers=ANSWERS)


# ---- the nodes of the play, and the head outside it --------------------------------------


def cluster():
    both = pairs("10.0.0.1", "10.0.0.2")
    return {
        "node1": checked("10.0.0.1", pair_result=both, raygate_node_ip="10.0.0.1"),
        "node2": checked("10.0.0.2", pair_result=both),
        "node3": skipped("10.0.0.3", pair_result=both),
        "node4": checked("10.0.0.4", pair_result=both),
    }


def test_gate_nodes_in_the_order_of_hosts_without_a_placeholder_when_the_head_is_in():
    nodes = gate.gate_nodes(["node2", "node1", "node3", "node4"], cluster(), "node1", ANSWERS, "10.0.0.1")
    assert [(n["host"], n["role"], n["status"]) for n in nodes] == [
        ("node2", "worker", "checked"),
        ("node1", "head", "checked"),
        ("node3", "worker", "skipped"),
        ("node4", "worker", "checked"),
    ]
    assert [n["checks"][-1]["name"] for n in nodes if n["checks"]] == [
        "nccl_pair_busbw",
        "nccl_pair_busbw",
        "nccl_pairs",
    ]


def test_a_head_outside_the_run_gets_a_placeholder_after_the_play_hosts():
    nodes = gate.gate_nodes(["node2", "node3"], cluster(), "node1", ANSWERS, "10.0.0.1")
    assert [n["host"] for n in nodes] == ["node2", "node3", "node1"]
    assert nodes[-1] == {
        "host": "node1",
        "role": "head",
        "address": "10.0.0.1",
        "status": "skipped",
        "skip_reason": "outside this run (--limit); not re-checked",
        "checks": [],
    }


@pytest.mark.parametrize(
    "hv, address",
    [
        ({"raygate_node_ip": "10.0.0.1", "ansible_host": "192.0.2.1"}, "10.0.0.1"),
        ({"ansible_host": "192.0.2.1"}, "192.0.2.1"),
        ({}, "node1"),
    ],
)
def test_the_placeholder_address_defaults_to_the_heads_host_variables(hv, address):
    nodes = gate.gate_nodes(["node2"], {"node1": hv, "node2": checked("10.0.0.2")}, "node1", answers=ANSWERS)
    assert nodes[-1]["address"] == address


def test_a_head_not_in_the_inventory_is_still_placed_by_its_name():
    assert (
        gate.gate_nodes(["node2"], {"node2": checked("10.0.0.2")}, "node1", answers=ANSWERS)[-1]["address"] == "node1"
    )


def test_no_placeholder_for_a_head_that_left_the_run():
    nodes = gate.gate_nodes(["node2", "node3"], cluster(), "node1", ANSWERS, "10.0.0.1", left_hosts=["node1"])
    assert [n["host"] for n in nodes] == ["node2", "node3"]


def test_left_hosts_are_not_made_here():
    nodes = gate.gate_nodes(["node1", "node2"], cluster(), "node1", left_hosts=["node4"], answers=ANSWERS)
    assert [n["host"] for n in nodes] == ["node1", "node2"]


def test_a_host_not_in_the_inventory_is_an_error():
    with pytest.raises(ValueError, match="host node9 is not in the inventory"):
        gate.gate_nodes(["node1", "node9"], cluster(), "node1", answers=ANSWERS)


def test_the_nodes_make_a_report():
    nodes = gate.gate_nodes(["node2", "node3", "node4"], cluster(), "node1", ANSWERS, "10.0.0.1")
    report = decision.build_report(nodes, head="node1", min_healthy=3)
    assert report["healthy"] == ["node2", "node3", "node4", "node1"]
    assert [n["verdict"] for n in report["nodes"]] == ["pass", "skipped", "pass", "skipped"]
    assert report["ok"] is True


# ---- the pair tests' rounds, for the report ----------------------------------------------


def ran_pairs():
    """Four nodes, two planned rounds, node3 bad: it failed both rounds and one retest phase
    (round 3) settled it against a good node."""

    def test(a, b, number, verdict, busbw):
        return {"hosts": [a, b], "round": number, "verdict": verdict, "busbw": busbw, "transport": "NET/IB/GDRDMA"}

    return dict(
        pairs("10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"),
        rounds=[
            [["10.0.0.1", "10.0.0.2"], ["10.0.0.3", "10.0.0.4"]],
            [["10.0.0.2", "10.0.0.3"], ["10.0.0.4", "10.0.0.1"]],
        ],
        tests=[
            test("10.0.0.1", "10.0.0.2", 1, "pass", 371.5),
            test("10.0.0.3", "10.0.0.4", 1, "fail", 150.2),
            test("10.0.0.2", "10.0.0.3", 2, "fail", 149.8),
            test("10.0.0.4", "10.0.0.1", 2, "pass", 370.9),
        ],
        retests=[test("10.0.0.4", "10.9.9.9", 3, "pass", 372.0)],
    )


def test_pair_run_counts_rounds_retest_phases_and_names_the_hosts():
    result = ran_pairs()
    hostvars = {"node%d" % i: checked("10.0.0.%d" % i, pair_result=result) for i in range(1, 5)}
    run = gate.pair_run(["node1", "node2", "node3", "node4"], hostvars, answers=ANSWERS)
    assert (run["planned_rounds"], run["rounds"], run["retest_phases"]) == (2, 3, 1)
    assert [t["hosts"] for t in run["tests"]] == [
        ["node1", "node2"],
        ["node3", "node4"],
        ["node2", "node3"],
        ["node4", "node1"],
        # A partner outside the run (raygate_health_pair_partner) keeps its address.
        ["node4", "10.9.9.9"],
    ]
    assert [t["phase"] for t in run["tests"]] == ["round"] * 4 + ["retest"]
    assert run["tests"][1] == {
        "round": 1,
        "phase": "round",
        "hosts": ["node3", "node4"],
        "addresses": ["10.0.0.3", "10.0.0.4"],
        "verdict": "fail",
        "busbw": 150.2,
        "transport": "NET/IB/GDRDMA",
    }


def test_pair_run_is_none_when_no_pair_test_ran():
    # The task skipped (one node, or pair tests off), or a play that never registered it.
    assert gate.pair_run(["node1"], {"node1": checked("10.0.0.1")}, answers=ANSWERS) is None
    assert gate.pair_run(["node1"], {"node1": {}}, answers=ANSWERS) is None
    # An older result without tests (the report then has no pairs either).
    assert (
        gate.pair_run(["node1"], {"node1": checked("10.0.0.1", pair_result=pairs("10.0.0.1"))}, answers=ANSWERS) is None
    )
