"""The fleet view: the version table, majority and pinned drift, ties, small fleets."""

import pytest

from ansible_collections.raygate.cluster.plugins.module_utils.gate import fingerprint as fp
from ansible_collections.raygate.cluster.plugins.plugin_utils import fleet

BASE = fp.build(
    None,
    gpu_model=["NVIDIA H100 80GB HBM3"],
    gpu_count=8,
    driver="550.90.07",
    cuda="12.4",
    vbios=["96.00.74.00.0D"],
    pcie_link=["x16/x16"],
    hca_firmware=["28.39.1002"],
    rdma_stack="MLNX_OFED_LINUX-23.10-0.5.5.0",
    nccl=["2.21.5"],
    kernel="6.1.0-18-amd64",
)


def node_fp(**changes):
    out = dict(BASE)
    out.update(changes)
    return out


def table(prints, expect=None):
    return fleet.fleet_table(list(prints.items()), expect)


def test_table_counts_each_value_with_its_hosts_most_common_first():
    prints = {
        "n1": node_fp(),
        "n2": node_fp(),
        "n3": node_fp(driver="535.161.08"),
        "n4": node_fp(driver=None),
    }
    t = table(prints)
    assert t["nodes"] == 4
    driver = t["fields"]["driver"]
    assert driver["values"] == [
        {"value": "550.90.07", "count": 2, "hosts": ["n1", "n2"]},
        {"value": "535.161.08", "count": 1, "hosts": ["n3"]},
        {"value": None, "count": 1, "hosts": ["n4"]},
    ]
    # 2 of the 3 nodes that read a driver: a majority; the unread one is shown, not counted.
    assert (driver["majority"], driver["expected"], driver["split"]) == ("550.90.07", None, False)
    assert t["fields"]["kernel"]["values"] == [
        {"value": "6.1.0-18-amd64", "count": 4, "hosts": ["n1", "n2", "n3", "n4"]}
    ]


def test_sets_compare_as_their_sorted_values():
    prints = {
        "n1": node_fp(vbios=["96.00.74.00.0D", "96.00.99.00.01"]),
        "n2": node_fp(vbios=["96.00.99.00.01", "96.00.74.00.0D"]),
        "n3": node_fp(),
    }
    vbios = table(prints)["fields"]["vbios"]
    assert vbios["values"][0] == {"value": "96.00.74.00.0D, 96.00.99.00.01", "count": 2, "hosts": ["n1", "n2"]}
    assert vbios["majority"] == "96.00.74.00.0D, 96.00.99.00.01"


def test_majority_drift_names_the_node_the_field_and_the_fleets_value():
    prints = {"n1": node_fp(), "n2": node_fp(), "n3": node_fp(hca_firmware=["28.39.1002", "28.41.1000"])}
    t = table(prints)
    assert fleet.node_drift(prints["n1"], t) == []
    assert fleet.node_drift(prints["n3"], t) == [
        {
            "field": "hca_firmware",
            "value": "28.39.1002, 28.41.1000",
            "expected": "28.39.1002",
            "reference": "majority",
            "count": 2,
            "reporting": 3,
        }
    ]
    check = fleet.drift_check(prints["n3"], t, "warn")
    assert (check["name"], check["status"], check["severity"]) == ("fleet_drift", "warn", "degraded")
    assert check["detail"] == "hca_firmware 28.39.1002, 28.41.1000, the fleet runs 28.39.1002 (2 of 3 nodes)"
    assert check["value"] == {"hca_firmware": "28.39.1002, 28.41.1000"}
    assert check["threshold"] == {"hca_firmware": "28.39.1002"}
    assert check["action"].startswith("update the HCA firmware to 28.39.1002")
    failing = fleet.drift_check(prints["n3"], t, "fail")
    assert (failing["status"], failing["severity"]) == ("fail", "do-not-allocate")
    passing = fleet.drift_check(prints["n1"], t, "warn")
    assert passing["status"] == "pass" and "severity" not in passing
    assert passing["detail"] == "same versions as the fleet (10 fields compared)"


@pytest.mark.parametrize(
    "drivers",
    [
        # Two nodes that disagree: a tie.
        ["550.90.07", "535.161.08"],
        # Split evenly.
        ["550.90.07", "550.90.07", "535.161.08", "535.161.08"],
        # A plurality (2 of 4) is no majority either.
        ["550.90.07", "550.90.07", "535.161.08", "545.23.08"],
    ],
)
def test_ties_and_pluralities_invent_no_majority_and_blame_nobody(drivers):
    prints = dict(("n%d" % i, node_fp(driver=d)) for i, d in enumerate(drivers))
    t = table(prints)
    assert t["fields"]["driver"]["majority"] is None and t["fields"]["driver"]["split"] is True
    for host, node in prints.items():
        assert fleet.node_drift(node, t) == [], host
        check = fleet.drift_check(node, t, "fail")
        assert check["status"] == "pass"
        assert "no majority to compare with for driver: pin it with raygate_health_fleet_expect" in check["detail"]


def test_a_lone_node_and_two_agreeing_nodes_never_drift():
    lone = {"n1": node_fp(driver="535.161.08")}
    assert fleet.node_drift(lone["n1"], table(lone)) == []
    pair = {"n1": node_fp(), "n2": node_fp()}
    assert [fleet.node_drift(n, table(pair)) for n in pair.values()] == [[], []]


def test_unread_values_are_never_judged():
    prints = {"n1": node_fp(), "n2": node_fp(), "n3": node_fp(nccl=None, rdma_stack=None)}
    t = table(prints)
    assert fleet.node_drift(prints["n3"], t) == []
    assert fleet.drift_check(prints["n3"], t)["detail"] == "same versions as the fleet (8 fields compared)"


def test_pinned_expectations_override_the_majority():
    # Three nodes got the new driver by mistake; the pin says the old one is intended.
    prints = {
        "n1": node_fp(driver="560.35.03"),
        "n2": node_fp(driver="560.35.03"),
        "n3": node_fp(driver="560.35.03"),
        "n4": node_fp(),
    }
    t = table(prints, {"driver": "550.90"})
    assert t["fields"]["driver"]["expected"] == ["550.90"]
    assert [h for h, n in prints.items() if fleet.node_drift(n, t)] == ["n1", "n2", "n3"]
    assert fleet.node_drift(prints["n1"], t) == [
        {"field": "driver", "value": "560.35.03", "expected": "550.90", "reference": "pinned"}
    ]
    check = fleet.drift_check(prints["n1"], t)
    assert check["detail"] == "driver 560.35.03, expected 550.90 (pinned)"
    assert check["action"].startswith("install NVIDIA driver 550.90 (the fleet's) and reboot")


def test_pins_resolve_a_tie_and_accept_lists_for_sets():
    prints = {"n1": node_fp(vbios=["96.00.74.00.0D", "96.00.99.00.01"]), "n2": node_fp()}
    t = table(prints, {"vbios": ["96.00.74.00.0D", "96.00.99.00.01"], "gpu_count": 8})
    assert [fleet.node_drift(n, t) for n in prints.values()] == [[], []]
    assert t["fields"]["vbios"]["split"] is False
    strict = table(prints, {"vbios": "96.00.74.00.0D"})
    assert [f["field"] for f in fleet.node_drift(prints["n1"], strict)] == ["vbios"]
    assert fleet.node_drift(prints["n2"], strict) == []


def test_a_prefix_matches_at_a_dot_only():
    assert fleet.pinned_match("550.90.07", ["550"])
    assert fleet.pinned_match("550.90.07", ["550.90."])
    assert not fleet.pinned_match("5500.1", ["550"])
    assert fleet.pinned_match(["28.39.1002", "28.41.1000"], ["28.39", "28.41"])
    assert not fleet.pinned_match(["28.39.1002", "28.41.1000"], ["28.39"])


@pytest.mark.parametrize(
    "expect, match",
    [
        ({"firmware": "1"}, "not a fingerprint field"),
        ({"driver": ""}, "give the expected value"),
        ({"vbios": []}, "give"),
    ],
)
def test_bad_pins_are_refused(expect, match):
    with pytest.raises(ValueError, match=match):
        fleet.check_expect(expect)


def test_off_makes_no_check_and_bad_modes_are_refused():
    prints = {"n1": node_fp(), "n2": node_fp(), "n3": node_fp(driver="1.2.3")}
    assert fleet.drift_check(prints["n3"], table(prints), "off") is None
    with pytest.raises(ValueError, match="fleet_drift must be one of warn, fail, off"):
        fleet.drift_check(prints["n3"], table(prints), "loud")


def test_several_drifting_fields_give_one_check_with_every_remedy():
    prints = {"n1": node_fp(), "n2": node_fp(), "n3": node_fp(driver="535.161.08", kernel="5.15.0-105-generic")}
    check = fleet.drift_check(prints["n3"], table(prints), "fail")
    assert check["detail"] == (
        "driver 535.161.08, the fleet runs 550.90.07 (2 of 3 nodes); "
        "kernel 5.15.0-105-generic, the fleet runs 6.1.0-18-amd64 (2 of 3 nodes)"
    )
    assert "install NVIDIA driver 550.90.07" in check["action"] and "boot kernel 6.1.0-18-amd64" in check["action"]
