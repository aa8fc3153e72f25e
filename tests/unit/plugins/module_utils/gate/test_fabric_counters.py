"""RDMA port error counters: reading sysfs, growth over a window of snapshots, and the checks."""

import importlib.util
import json
import os

import pytest

from ansible_collections.raygate.cluster.plugins.module_utils.gate import fabric_counters as fc
from ansible_collections.raygate.cluster.plugins.module_utils.net import fabric

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
NOW = 1763719200.0
DAY = 86400


def _load_sim():
    path = os.path.join(REPO, "tests", "sandbox", "sim", "raygate_sim.py")
    spec = importlib.util.spec_from_file_location("raygate_sim", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sim = _load_sim()


def tree(tmp_path, **spec):
    root = str(tmp_path / "node")
    sim.build_tree(root, spec, net_target=str(tmp_path / "net"))
    return root


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(text)


def info(growth, span=3600.0, within=True, kind="ib"):
    return {"fabric": kind, "growth": growth, "since": NOW - span, "span": span, "within": within}


# ------------------------------------------------------------------ reading sysfs
# Real counter files, short excerpts with their sources:
# - influxdata/telegraf, plugins/inputs/infiniband/README.md ("Example Output"): one healthy mlx5
#   port; every error counter 0, port_xmit_wait saturated at 2^32-1 (a wait counter, not an error).
TELEGRAF_MLX5_0_PORT1 = {
    "VL15_dropped": "0",
    "excessive_buffer_overrun_errors": "0",
    "link_downed": "0",
    "link_error_recovery": "0",
    "local_link_integrity_errors": "0",
    "port_rcv_constraint_errors": "0",
    "port_rcv_data": "237159415345822",
    "port_rcv_errors": "0",
    "port_rcv_packets": "801977655075",
    "port_rcv_remote_physical_errors": "0",
    "port_rcv_switch_relay_errors": "0",
    "port_xmit_constraint_errors": "0",
    "port_xmit_data": "238334949937759",
    "port_xmit_discards": "0",
    "port_xmit_wait": "4294967295",
    "symbol_error": "0",
}
# - prometheus/node_exporter issue 966 (`grep -s . .../i40iw0/ports/1/counters/*`): an iWARP
#   device without a PMA answers every counter with "N/A (no PMA)".
NO_PMA = "N/A (no PMA)"


def test_real_healthy_mlx5_port_reads_its_error_counters_as_zero(tmp_path):
    root = str(tmp_path)
    base = os.path.join(root, "sys", "class", "infiniband", "mlx5_0", "ports", "1")
    for name, value in TELEGRAF_MLX5_0_PORT1.items():
        write(os.path.join(base, "counters", name), value + "\n")
    write(os.path.join(base, "link_layer"), "InfiniBand\n")
    write(os.path.join(base, "state"), "4: ACTIVE\n")
    snap = fc.snapshot(root, fabric.read_sysfs(root))
    assert list(snap) == ["mlx5_0:1"]
    # The eleven error counters of the PortCounters, none of the traffic or wait counters.
    errors = set(TELEGRAF_MLX5_0_PORT1) - {"port_rcv_data", "port_rcv_packets", "port_xmit_data"}
    assert set(snap["mlx5_0:1"]) == errors - {"port_xmit_wait"}
    assert set(snap["mlx5_0:1"].values()) == {0}
    counted = fc.window_growth([], snap, NOW, DAY, NOW - 3600)
    check = fc.check_fabric_errors(dict(counted, fabric="ib"), fc.limits(), "auto", DAY)
    assert check["status"] == "pass" and "on 1 ib ports in the last 1 h" in check["detail"]


def test_a_device_without_pma_has_nothing_to_judge(tmp_path):
    root = str(tmp_path)
    base = os.path.join(root, "sys", "class", "infiniband", "i40iw0", "ports", "1")
    for name in ("link_downed", "symbol_error", "port_rcv_errors", "excessive_buffer_overrun_errors"):
        write(os.path.join(base, "counters", name), NO_PMA + "\n")
    write(os.path.join(base, "link_layer"), "Ethernet\n")
    assert fc.parse_value(NO_PMA) is None
    snap = fc.snapshot(root, fabric.read_sysfs(root))
    assert snap == {}
    check = fc.check_fabric_errors({"fabric": "roce", "growth": {}}, fc.limits(), "auto", DAY)
    assert check["status"] == "skip" and "no PMA" in check["detail"]


@pytest.mark.parametrize("text, value", [("0\n", 0), (" 17 ", 17), ("", None), ("-3", None), ("12abc", None)])
def test_parse_value(text, value):
    assert fc.parse_value(text) == value


def test_simulated_trees_have_the_kernels_files_per_fabric(tmp_path):
    ib = fc.snapshot(tree(tmp_path / "ib", type="ib", devices=2), fabric.read_sysfs(str(tmp_path / "ib" / "node")))
    assert sorted(ib) == ["mlx5_0:1", "mlx5_1:1"]
    assert {"symbol_error", "link_downed", "rnr_nak_retry_err", "local_ack_timeout_err"} <= set(ib["mlx5_0:1"])
    assert "roce_slow_restart" not in ib["mlx5_0:1"]
    roce_root = tree(tmp_path / "roce", type="roce", devices=1)
    roce = fc.snapshot(roce_root, fabric.read_sysfs(roce_root))
    assert "roce_slow_restart" in roce["mlx5_0:1"]
    efa_root = tree(tmp_path / "efa", type="efa", devices=2)
    efa = fc.snapshot(efa_root, fabric.read_sysfs(efa_root))
    # Port statistics per port, the admin-queue counters per device; no PMA counters on EFA.
    assert sorted(efa) == ["rdmap16s0", "rdmap16s0:1", "rdmap21s0", "rdmap21s0:1"]
    assert set(efa["rdmap16s0"]) == {"no_completion_cmds", "cmds_err"}
    assert "retrans_timeout_events" in efa["rdmap16s0:1"] and "link_downed" not in efa["rdmap16s0:1"]
    for snap in (ib, roce, efa):
        assert all(v == 0 for values in snap.values() for v in values.values())


def test_only_the_fabrics_ports_are_read(tmp_path):
    root = tree(tmp_path, type="ib", devices=2, eth_devices=1, counters={"2": {"symbol_error": 9}})
    devices = fabric.read_sysfs(root)
    assert sorted(fc.snapshot(root, devices, kinds=("ib",))) == ["mlx5_0:1", "mlx5_1:1"]
    assert fc.snapshot(root, devices, kinds=("roce",)) == {"mlx5_2:1": fc.snapshot(root, devices)["mlx5_2:1"]}
    assert fc.snapshot(root, devices, kinds=("roce",))["mlx5_2:1"]["symbol_error"] == 9


# ------------------------------------------------------------------ growth
def snap(age, counters, boot_id="b1"):
    return {"time": NOW - age, "boot_id": boot_id, "counters": counters}


def test_delta_counts_a_reset_as_growth_from_zero():
    before = {"mlx5_0:1": {"symbol_error": 10, "link_downed": 2}}
    after = {"mlx5_0:1": {"symbol_error": 3, "link_downed": 5}, "mlx5_1:1": {"link_downed": 1}}
    want = {"mlx5_0:1": {"symbol_error": 3, "link_downed": 3}, "mlx5_1:1": {"link_downed": 1}}
    assert fc.delta(before, after) == want


def test_window_growth_starts_at_the_last_snapshot_before_the_window():
    history = [
        snap(3 * DAY, {"p:1": {"link_downed": 0}}),
        snap(DAY + 600, {"p:1": {"link_downed": 2}}),
        snap(DAY / 2, {"p:1": {"link_downed": 1}}),  # cleared in between: +1
        snap(600, {"p:1": {"link_downed": 9}}, boot_id="an-earlier-boot"),
    ]
    out = fc.window_growth(history, {"p:1": {"link_downed": 4}}, NOW, DAY, NOW - 5 * DAY, "b1")
    assert out["growth"] == {"p:1": {"link_downed": 4}}
    assert out["since"] == NOW - DAY - 600 and out["within"] is True


def test_window_growth_without_history_counts_from_boot():
    current = {"p:1": {"symbol_error": 7}}
    recent = fc.window_growth([], current, NOW, DAY, NOW - 3600)
    assert recent == {"growth": {"p:1": {"symbol_error": 7}}, "since": NOW - 3600, "span": 3600.0, "within": True}
    old = fc.window_growth([], current, NOW, DAY, NOW - 10 * DAY)
    assert old["within"] is False and old["span"] == 10 * DAY
    unknown = fc.window_growth([], current, NOW, DAY)
    assert unknown["since"] is None and unknown["within"] is False
    # window 0 judges the growth since boot, whatever its length.
    assert fc.window_growth([], current, NOW, 0, NOW - 10 * DAY)["within"] is True


def test_snapshots_before_boot_do_not_count():
    history = [snap(2 * DAY, {"p:1": {"link_downed": 50}}, boot_id=None)]
    out = fc.window_growth(history, {"p:1": {"link_downed": 1}}, NOW, DAY, NOW - 3600)
    assert out["growth"] == {"p:1": {"link_downed": 1}} and out["since"] == NOW - 3600


def test_state_round_trip_prunes_to_the_window_and_this_boot():
    history = [snap(3 * DAY, {}), snap(2 * DAY, {}), snap(DAY / 2, {}), snap(60, {}, boot_id="other")]
    text = fc.dump_state(history, {"p:1": {"link_downed": 1}}, NOW, DAY, NOW - 4 * DAY, "b1")
    kept = fc.load_state(text)
    assert [NOW - s["time"] for s in kept] == [2 * DAY, DAY / 2, 0]
    assert kept[-1]["counters"] == {"p:1": {"link_downed": 1}} and kept[-1]["boot_id"] == "b1"
    many = [snap(i, {}) for i in range(500, 0, -1)]
    assert len(fc.load_state(fc.dump_state(many, {}, NOW, DAY, None, "b1"))) == fc.MAX_SNAPSHOTS


def test_load_state_refuses_foreign_files_and_skips_bad_entries():
    assert fc.load_state("") == []
    with pytest.raises(ValueError, match="not JSON"):
        fc.load_state("{nope")
    with pytest.raises(ValueError, match="no snapshots"):
        fc.load_state(json.dumps({"version": 1}))
    text = json.dumps(
        {
            "snapshots": [
                {"time": "yesterday", "counters": {}},
                {"time": NOW, "counters": {"p:1": {"link_downed": 2, "symbol_error": "x", "flag": True}}},
                "junk",
            ]
        }
    )
    assert fc.load_state(text) == [{"time": NOW, "boot_id": None, "counters": {"p:1": {"link_downed": 2}}}]


# ------------------------------------------------------------------ thresholds and checks
def test_validate_thresholds():
    assert fc.validate_thresholds({"symbol_error": 10, "link_downed": None}) == []
    problems = fc.validate_thresholds({"crc": 1, "symbol_error": -1, "link_downed": "5", "rx_drops": True})
    assert len(problems) == 4 and problems[0].startswith("unknown counter 'crc'")


def test_rates_use_at_least_an_hour():
    maxima = fc.limits()
    # 100 symbol errors in 10 minutes is 100/h at most: under 120/h.
    assert fc.breaches({"p:1": {"symbol_error": 100}}, maxima, 600) == []
    found = fc.breaches({"p:1": {"symbol_error": 130}}, maxima, 600)
    assert [(b["counter"], b["measured"], b["status"]) for b in found] == [("symbol_error", 130.0, "fail")]
    # Over a day, 2000 is 83/h: under the limit.
    assert fc.breaches({"p:1": {"symbol_error": 2000}}, maxima, DAY) == []


def test_fabric_errors_names_the_port_and_the_remedy():
    growth = {"mlx5_3:1": {"symbol_error": 5000, "port_rcv_errors": 10}, "mlx5_4:1": {"symbol_error": 0}}
    check = fc.check_fabric_errors(info(growth, span=DAY), fc.limits(), "auto", DAY)
    assert check["status"] == "fail" and check["severity"] == "do-not-allocate"
    assert check["detail"] == "mlx5_3:1 symbol_error +5000 (208.3/h, max 120/h) in the last 24 h"
    assert check["action"].startswith("reseat or replace the cable/transceiver of mlx5_3 port 1")
    assert check["value"] == 1 and check["threshold"] == 0


def test_fabric_errors_warn_only_classes_and_old_errors():
    warn = fc.check_fabric_errors(info({"mlx5_0:1": {"rnr_nak_retry_err": 2}}), fc.limits(), "auto", DAY)
    assert warn["status"] == "warn" and warn["severity"] == "degraded"
    old = info({"mlx5_0:1": {"excessive_buffer_overrun_errors": 1}}, span=10 * DAY, within=False)
    check = fc.check_fabric_errors(old, fc.limits(), "auto", DAY)
    assert check["status"] == "warn" and "no snapshot near the start of the 24 h window" in check["detail"]


def test_fabric_errors_skips():
    assert fc.check_fabric_errors(None, fc.limits(), "auto", DAY)["detail"] == "port counters not read (not captured)"
    assert fc.check_fabric_errors(info({}), fc.limits(), "none", DAY)["detail"] == "not checked (fabric=none)"
    none = {"fabric": "none", "growth": {}}
    assert fc.check_fabric_errors(none, fc.limits(), "auto", DAY)["detail"] == "no RDMA fabric on this node"


def test_fabric_errors_notes_state_file_trouble_and_unjudged_growth():
    data = info({"mlx5_0:1": {"VL15_dropped": 4, "symbol_error": 1}})
    data["state_error"] = "state file /x not written: Permission denied"
    check = fc.check_fabric_errors(data, fc.limits(), "auto", DAY)
    assert check["status"] == "pass"
    assert "grew, not judged: mlx5_0:1 VL15_dropped +4" in check["detail"]
    assert "state file /x not written: Permission denied" in check["detail"]


def test_link_flaps_follow_aznhc_and_warn_below_it():
    def flaps(data, maxima=None):
        return fc.check_link_flaps(data, maxima or fc.limits(), "auto", DAY)

    five = flaps(info({"mlx5_1:1": {"link_downed": 5}, "mlx5_0:1": {"link_downed": 0}}))
    assert five["status"] == "fail" and five["value"] == 5 and five["threshold"] == 4
    assert five["detail"].startswith("mlx5_1:1 down 5 times in the last 1 h")
    assert "mlx5_1 port 1" in five["action"]
    one = flaps(info({"mlx5_1:1": {"link_downed": 1}}))
    assert one["status"] == "warn" and one["detail"] == "mlx5_1:1 down 1 time in the last 1 h"
    calm = flaps(info({"mlx5_1:1": {"link_downed": 0}}))
    assert calm["status"] == "pass" and calm["detail"] == "no link went down on 1 ports in the last 1 h"
    efa = flaps(info({"rdmap16s0:1": {"rx_drops": 0}}, kind="efa"))
    assert efa["status"] == "skip"
    off = flaps(info({"mlx5_1:1": {"link_downed": 9}}), fc.limits({"link_downed": None}))
    assert off["status"] == "skip"


def test_test_deltas_blame_the_port_that_grew():
    before = {"mlx5_2:1": {"link_downed": 0, "symbol_error": 5}, "mlx5_3:1": {"link_downed": 0}}
    after = {"mlx5_2:1": {"link_downed": 1, "symbol_error": 9}, "mlx5_3:1": {"link_downed": 0}}
    check = fc.check_test_deltas(before, after, fc.limits(), 95.0)
    assert check["status"] == "fail"
    assert check["detail"] == "mlx5_2:1 link_downed +1 (max 4) during the 1 min test"
    warn = fc.check_test_deltas({"d:1": {"rdma_read_wr_err": 0}}, {"d:1": {"rdma_read_wr_err": 3}}, fc.limits(), 30)
    assert warn["status"] == "warn" and "d:1 rdma_read_wr_err +3" in warn["detail"]
    calm = fc.check_test_deltas(before, before, fc.limits(), 30)
    assert calm["status"] == "pass" and calm["detail"] == "no error counter grew on 2 ports during the 30 s test"
    assert fc.check_test_deltas(None, after, fc.limits(), 1)["status"] == "skip"
    assert fc.check_test_deltas({}, {}, fc.limits(), 1)["status"] == "skip"


def test_every_counter_has_a_documented_source_and_a_remedy():
    for name, spec in fc.COUNTERS.items():
        assert spec["where"] in fc.PORT_DIRS, name
        assert spec["unit"] in (fc.COUNT, fc.PER_HOUR) and spec["status"] in ("fail", "warn"), name
        assert spec["source"] and "%s" in spec["action"], name
        if spec["max"] is None:
            assert spec["source"].startswith("reported only"), name


def test_summary_keeps_only_what_grew():
    assert fc.summary(None) is None
    data = info({"mlx5_0:1": {"symbol_error": 0}, "mlx5_1:1": {"symbol_error": 3, "link_downed": 0}})
    assert fc.summary(data) == {"since": NOW - 3600, "span": 3600.0, "grown": {"mlx5_1:1": {"symbol_error": 3}}}
