"""The health_report action: arguments, the nodes it makes from the play's hosts, its files, check mode, its return."""

import json
import os
import re
import xml.etree.ElementTree as ET
from unittest.mock import MagicMock

import pytest
import yaml
from action_harness import plugin_for
from ansible.errors import AnsibleActionFail
from role_answers import ANSWERS

from ansible_collections.raygate.cluster.plugins.action import health_report as action
from ansible_collections.raygate.cluster.plugins.module_utils.checks import result
from ansible_collections.raygate.cluster.plugins.modules import health_report as module

FILES = ("report.json", "report.md", "junit.xml", "healthy_hosts.txt")


def check(name, status, detail="", value=None, threshold=None, source="gpu_health"):
    return dict(result(name, status, detail, value, threshold), source=source)


def nodes():
    ok = [check("gpu_count", "pass", "8 GPUs", 8, 8), check("nccl_busbw", "pass", "480", 480.0, 460.0, "nccl_test")]
    return [
        {"host": "node1", "role": "head", "address": "10.0.0.1", "checks": ok},
        {"host": "node2", "role": "worker", "address": "10.0.0.2", "checks": ok + [check("xid", "fail", "Xid 79")]},
        {"host": "node3", "role": "worker", "status": "skipped", "skip_reason": "running member"},
    ]


def run_action(args, check_mode=False):
    # The role's names for what each node left (raygate_answers), as the role passes them.
    args = dict(args, answers=args.get("answers", ANSWERS))
    plugin = plugin_for(action, "raygate.cluster.health_report", args, check_mode)
    return plugin.run(task_vars={})


def test_run_writes_every_file_and_returns_the_decision(tmp_path):
    dest = tmp_path / "artifacts" / "health"
    res = run_action({"nodes": nodes(), "min_healthy": 2, "dest": str(dest), "run_id": "r1"})
    report_dir = str(dest / "r1")
    assert res["changed"] is True and res["written"] is True
    assert res["report_dir"] == report_dir
    assert sorted(os.listdir(report_dir)) == sorted(FILES)
    assert res["files"] == {
        "json": os.path.join(report_dir, "report.json"),
        "markdown": os.path.join(report_dir, "report.md"),
        "junit": os.path.join(report_dir, "junit.xml"),
        "healthy_hosts": os.path.join(report_dir, "healthy_hosts.txt"),
    }
    assert res["healthy"] == ["node1", "node3"]
    assert res["unhealthy"] == {"node2": ["xid: Xid 79"]}
    assert (res["ok"], res["head_healthy"], res["enough"]) == (True, True, True)
    assert res["valid_until"] - res["checked_at"] == 86400
    assert res["run_id"] == "r1"
    assert sorted(res["textfiles"]) == ["node1", "node2"]
    assert res["summary"][-1] == res["message"]
    assert "failed" not in res
    saved = json.loads((dest / "r1" / "report.json").read_text())
    assert saved["message"] == res["message"] and saved["checked_at_epoch"] == res["checked_at"]
    assert [n["verdict"] for n in saved["nodes"]] == ["pass", "fail", "skipped"]
    assert (dest / "r1" / "healthy_hosts.txt").read_text() == "node1\nnode3\n"
    assert ET.parse(str(dest / "r1" / "junit.xml")).getroot().get("failures") == "1"
    assert oct(os.stat(res["files"]["json"]).st_mode & 0o777) == "0o644"
    assert [n for n in os.listdir(report_dir) if n.startswith(".")] == []


def test_unhealthy_cluster_does_not_fail_the_task(tmp_path):
    res = run_action({"nodes": nodes(), "min_healthy": 3, "dest": str(tmp_path), "run_id": "r"})
    assert res["ok"] is False and res["enough"] is False
    assert res["message"] == "health gate failed: 2 healthy of 3, need 3"
    assert not res.get("failed")


def test_check_mode_writes_nothing_and_predicts_a_change(tmp_path):
    dest = tmp_path / "out"
    res = run_action({"nodes": nodes(), "dest": str(dest)}, check_mode=True)
    assert res["changed"] is True and res["written"] is False
    assert not dest.exists()
    assert res["files"]["json"].startswith(str(dest) + os.sep)
    assert res["healthy"] == ["node1", "node3"]


def test_write_false_writes_nothing_and_changes_nothing(tmp_path):
    res = run_action({"nodes": nodes(), "dest": str(tmp_path / "out"), "write": False})
    assert (res["changed"], res["written"]) == (False, False)
    assert not (tmp_path / "out").exists()


def test_default_run_id_is_a_utc_timestamp_and_dest_is_relative_to_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(action.time, "time", lambda: 1767323045.7)
    res = run_action({"nodes": nodes()})
    assert res["run_id"] == "20260102T030405Z"
    assert res["checked_at"] == 1767323045
    assert res["report_dir"] == str(tmp_path / "artifacts" / "health" / "20260102T030405Z")
    assert (tmp_path / "artifacts" / "health" / "20260102T030405Z" / "report.md").is_file()


def test_a_second_run_replaces_the_files(tmp_path):
    run_action({"nodes": nodes(), "dest": str(tmp_path), "run_id": "same"})
    healthy = [dict(n, checks=n.get("checks", [])[:1]) for n in nodes()]
    run_action({"nodes": healthy, "dest": str(tmp_path), "run_id": "same"})
    assert (tmp_path / "same" / "healthy_hosts.txt").read_text() == "node1\nnode2\nnode3\n"


@pytest.mark.parametrize(
    "args, match",
    [
        ({}, "nodes"),
        ({"nodes": [{"host": "a", "role": "boss"}]}, "role"),
        ({"nodes": [{"role": "head"}]}, "host"),
        ({"nodes": [{"host": "a", "role": "head"}], "bogus": 1}, "bogus"),
        ({"nodes": [{"host": "a", "role": "head"}], "min_healthy": "many"}, "min_healthy"),
        ({"nodes": [{"host": "a", "role": "head"}], "min_healthy": 0}, "min_healthy"),
        ({"nodes": [{"host": "a", "role": "head"}], "run_id": "../x"}, "run_id"),
        (
            {
                "nodes": [
                    {"host": "a", "role": "head", "checks": [{"name": "x", "status": "meh", "source": "gpu_health"}]}
                ]
            },
            "status 'meh'",
        ),
    ],
)
def test_bad_arguments_fail_the_task_and_write_nothing(tmp_path, args, match):
    with pytest.raises(AnsibleActionFail, match=match):
        run_action(dict(args, dest=str(tmp_path / "out")))
    assert not (tmp_path / "out").exists()


def test_unwritable_dest_fails_with_the_reason(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(AnsibleActionFail, match="cannot write the report"):
        run_action({"nodes": nodes(), "dest": str(blocker), "run_id": "r"})


def test_the_roles_shape_is_accepted(tmp_path):
    # gate.yml passes every play host's entry, an empty skip_reason on checked nodes, numbers as strings at worst.
    entries = [dict(n, skip_reason=n.get("skip_reason", "")) for n in nodes()[1:]]
    res = run_action({"nodes": entries, "head": "node1", "min_healthy": "1", "dest": str(tmp_path), "run_id": "r"})
    assert res["head_healthy"] is False and res["ok"] is False  # the head left the play before the gate
    assert res["message"].startswith("health gate failed: head node1 is not among the nodes")
    junit = ET.parse(str(tmp_path / "r" / "junit.xml")).getroot()
    names = [p.get("name") for p in junit.find("testsuite/properties")]
    assert "skip_reason" not in names


# ---- nodes that left the run before the gate (left_hosts) ---------------------------------


def test_left_entries_an_unreachable_node_keeps_its_status_and_task():
    hv = {"node4": {"raygate_out": {"status": "unreachable", "task": "preflight", "error": "ssh timed out"}}}
    [entry] = action.left_entries(["node4"], hv, "node1", answers=ANSWERS)
    assert entry == {
        "host": "node4",
        "role": "worker",
        "address": "node4",
        "status": "unreachable",
        "error": "preflight: ssh timed out",
        "checks": [],
    }


def test_left_entries_a_failed_node_stays_failed():
    hv = {"node4": {"raygate_out": {"status": "failed", "task": "install ray", "error": "pip exited 1"}}}
    [entry] = action.left_entries(["node4"], hv, "node1", answers=ANSWERS)
    assert (entry["status"], entry["error"]) == ("failed", "install ray: pip exited 1")


@pytest.mark.parametrize("status", ["unhealthy", "stopped", "bogus", None])
def test_left_entries_any_other_status_is_failed(status):
    hv = {"node4": {"raygate_out": {"status": status, "task": "", "error": "it broke"}}}
    [entry] = action.left_entries(["node4"], hv, "node1", answers=ANSWERS)
    assert (entry["status"], entry["error"]) == ("failed", "it broke")


def test_left_entries_an_out_without_error_says_so():
    hv = {"node4": {"raygate_out": {"status": "failed", "task": "ray start"}}}
    assert action.left_entries(["node4"], hv, "node1", answers=ANSWERS)[0]["error"] == "ray start: no error recorded"


@pytest.mark.parametrize("hv", [{}, {"node4": {}}, {"node4": {"raygate_out": None}}])
def test_left_entries_a_node_without_raygate_out_stopped_answering(hv):
    [entry] = action.left_entries(["node4"], hv, "node1", answers=ANSWERS)
    assert (entry["status"], entry["error"]) == ("unreachable", "stopped answering during the run")


@pytest.mark.parametrize(
    "hv, address",
    [
        ({"raygate_node_ip": "10.0.0.4", "ansible_host": "192.0.2.4"}, "10.0.0.4"),
        ({"ansible_host": "192.0.2.4"}, "192.0.2.4"),
        ({}, "node4"),
    ],
)
def test_left_entries_address(hv, address):
    assert action.left_entries(["node4"], {"node4": hv}, "node1", answers=ANSWERS)[0]["address"] == address


def test_left_entries_roles_and_order():
    entries = action.left_entries(["node3", "node1"], {}, "node1", answers=ANSWERS)
    assert [(e["host"], e["role"]) for e in entries] == [("node3", "worker"), ("node1", "head")]


def run_action_with_hostvars(args, hostvars):
    task = MagicMock()
    task.args = dict(args, answers=args.get("answers", ANSWERS))
    task.check_mode = False
    task.async_val = 0
    task.action = "raygate.cluster.health_report"
    connection = MagicMock()
    connection._shell.tmpdir = None
    plugin = action.ActionModule(task, connection, MagicMock(), MagicMock(), MagicMock(), None)
    return plugin.run(task_vars={"hostvars": hostvars})


def test_run_reports_left_hosts_and_ignores_those_already_in_nodes(tmp_path):
    hostvars = {
        "node2": {"raygate_out": {"status": "failed", "task": "never", "error": "must not be used"}},
        "node4": {
            "raygate_node_ip": "10.0.0.4",
            "raygate_out": {"status": "unreachable", "task": "preflight", "error": "ssh timed out"},
        },
        "node5": {"ansible_host": "10.0.0.5"},
    }
    args = {"nodes": nodes(), "left_hosts": ["node4", "node2", "node5"], "dest": str(tmp_path), "run_id": "r"}
    # 3 of 5 failing would trip the circuit breaker (test_breaker_*): off here, to see who is left out.
    res = run_action_with_hostvars(dict(args, breaker_threshold=0), hostvars)
    assert res["healthy"] == ["node1", "node3"]
    assert res["unhealthy"] == {
        "node2": ["xid: Xid 79"],
        "node4": ["reachable: preflight: ssh timed out"],
        "node5": ["reachable: stopped answering during the run"],
    }
    saved = json.loads((tmp_path / "r" / "report.json").read_text())
    by_host = {n["host"]: n for n in saved["nodes"]}
    assert [n["host"] for n in saved["nodes"]] == ["node1", "node2", "node3", "node4", "node5"]
    assert (by_host["node4"]["status"], by_host["node4"]["address"]) == ("unreachable", "10.0.0.4")
    assert (by_host["node5"]["status"], by_host["node5"]["address"]) == ("unreachable", "10.0.0.5")
    assert by_host["node2"]["status"] == "checked"


def test_run_with_the_head_left_fails_the_gate_naming_why(tmp_path):
    hostvars = {"node1": {"raygate_out": {"status": "failed", "task": "ray start", "error": "port in use"}}}
    args = {"nodes": nodes()[1:], "head": "node1", "left_hosts": ["node1"], "dest": str(tmp_path), "run_id": "r"}
    res = run_action_with_hostvars(args, hostvars)
    assert (res["ok"], res["head_healthy"]) == (False, False)
    assert res["unhealthy"]["node1"] == ["run: ray start: port in use"]
    assert res["message"].startswith("health gate failed: head node1 is unhealthy (run: ray start: port in use)")


# ---- the role's form: nodes made from the play's hosts (hosts) ----------------------------

SKIPPED = {"changed": False, "skipped": True, "skip_reason": "Conditional result was False"}
LONE_DETAIL = (
    "no other node to run the network test with; set raygate_health_pair_partner to a member whose GPUs"
    " may run a short nccl-test"
)


def gate_vars(address, status="checked", candidate=True, pairs=None, **extra):
    """What gate.yml leaves on a host: its set_facts and registered results (plain check dicts, no source)."""
    ran = status == "checked"
    hv = {
        "raygate_gate_status": status,
        "raygate_gate_skip_reason": "already a running member (pid 7); health.yml re-checks it",
        "raygate_gate_address": address,
        "raygate_gpu_health": {"healthy": True, "checks": [result("gpu_count", "pass", "8 GPUs", 8, 8)]}
        if ran
        else SKIPPED,
        # A node that is no pair candidate: its single-node test failed.
        "raygate_nccl_single": {
            "healthy": bool(candidate),
            "checks": [result("nccl_busbw", "pass" if candidate else "fail", "480", 480.0, 460.0)],
        }
        if ran
        else SKIPPED,
        "raygate_nccl_pairs": pairs or SKIPPED,
    }
    hv.update(extra)
    return hv


def pair_result(*addresses):
    return {"nodes": {a: {"checks": [result("nccl_pair_busbw", "pass", "45", 45.0, 40.0)]} for a in addresses}}


def hosts_args(tmp_path, hosts, **extra):
    args = {"hosts": hosts, "head": "node1", "head_address": "10.0.0.1", "dest": str(tmp_path), "run_id": "r"}
    args.update(extra)
    return args


def saved_nodes(tmp_path):
    return {n["host"]: n for n in json.loads((tmp_path / "r" / "report.json").read_text())["nodes"]}


def test_hosts_checks_from_the_three_sources_are_tagged(tmp_path):
    both = pair_result("10.0.0.1", "10.0.0.2")
    hostvars = {"node1": gate_vars("10.0.0.1", pairs=both), "node2": gate_vars("10.0.0.2", pairs=both)}
    res = run_action_with_hostvars(hosts_args(tmp_path, ["node1", "node2"], min_healthy=2), hostvars)
    assert res["healthy"] == ["node1", "node2"] and res["ok"] is True
    nodes = saved_nodes(tmp_path)
    assert [(c["name"], c["source"]) for c in nodes["node2"]["checks"]] == [
        ("gpu_count", "gpu_health"),
        ("nccl_busbw", "nccl_test"),
        ("nccl_pair_busbw", "nccl_pairs"),
    ]
    assert (nodes["node1"]["role"], nodes["node2"]["role"]) == ("head", "worker")
    assert nodes["node2"]["address"] == "10.0.0.2"


def test_hosts_a_lone_candidate_gets_the_skip_check_in_every_report(tmp_path):
    hostvars = {"node1": gate_vars("10.0.0.1")}
    res = run_action_with_hostvars(hosts_args(tmp_path, ["node1"]), hostvars)
    [last] = saved_nodes(tmp_path)["node1"]["checks"][-1:]
    assert last == {
        "name": "nccl_pairs",
        "status": "skip",
        "detail": LONE_DETAIL,
        "value": None,
        "threshold": None,
        "source": "nccl_pairs",
    }
    assert res["healthy"] == ["node1"]  # a skipped check does not count against the node
    assert 'check="nccl_pairs",host="node1",source="nccl_pairs"} -1' in res["textfiles"]["node1"]
    junit = ET.parse(str(tmp_path / "r" / "junit.xml")).getroot()
    assert junit.get("skipped") == "1"


def test_hosts_no_skip_check_with_a_pair_result_or_without_candidacy(tmp_path):
    hostvars = {
        "node1": gate_vars("10.0.0.1", pairs=pair_result("10.0.0.1", "10.0.0.2")),
        "node2": gate_vars("10.0.0.2", pairs=pair_result("10.0.0.1", "10.0.0.2")),
        "node3": gate_vars("10.0.0.3", candidate=False, pairs=pair_result("10.0.0.1", "10.0.0.2")),
    }
    run_action_with_hostvars(hosts_args(tmp_path, ["node1", "node2", "node3"]), hostvars)
    names = {host: [c["name"] for c in n["checks"]] for host, n in saved_nodes(tmp_path).items()}
    assert names == {
        "node1": ["gpu_count", "nccl_busbw", "nccl_pair_busbw"],
        "node2": ["gpu_count", "nccl_busbw", "nccl_pair_busbw"],
        "node3": ["gpu_count", "nccl_busbw"],
    }


def test_hosts_a_skipped_node(tmp_path):
    hostvars = {"node1": gate_vars("10.0.0.1"), "node2": gate_vars("10.0.0.2", status="skipped")}
    res = run_action_with_hostvars(hosts_args(tmp_path, ["node1", "node2"], pair_tests=False), hostvars)
    node2 = saved_nodes(tmp_path)["node2"]
    assert (node2["status"], node2["verdict"], node2["checks"]) == ("skipped", "skipped", [])
    assert node2["skip_reason"] == "already a running member (pid 7); health.yml re-checks it"
    assert saved_nodes(tmp_path)["node1"]["skip_reason"] is None
    assert res["healthy"] == ["node1", "node2"]
    assert sorted(res["textfiles"]) == ["node1"]


def test_hosts_the_head_outside_the_run_is_a_placeholder(tmp_path):
    hostvars = {"node1": {"raygate_node_ip": "10.9.9.9"}, "node2": gate_vars("10.0.0.2")}
    res = run_action_with_hostvars(hosts_args(tmp_path, ["node2"], pair_tests=False), hostvars)
    nodes = saved_nodes(tmp_path)
    assert list(nodes) == ["node2", "node1"]
    assert {k: nodes["node1"][k] for k in ("role", "address", "status", "skip_reason", "verdict")} == {
        "role": "head",
        "address": "10.0.0.1",  # head_address wins over its host variables
        "status": "skipped",
        "skip_reason": "outside this run (--limit); not re-checked",
        "verdict": "skipped",
    }
    assert (res["ok"], res["head_healthy"], res["healthy"]) == (True, True, ["node2", "node1"])


def test_hosts_the_head_in_the_run_gets_no_placeholder(tmp_path):
    hostvars = {"node1": gate_vars("10.0.0.1"), "node2": gate_vars("10.0.0.2")}
    run_action_with_hostvars(hosts_args(tmp_path, ["node2", "node1"], pair_tests=False), hostvars)
    nodes = saved_nodes(tmp_path)
    assert list(nodes) == ["node2", "node1"]
    assert (nodes["node1"]["status"], nodes["node1"]["verdict"]) == ("checked", "pass")


def test_hosts_left_hosts_are_reported_and_a_head_that_left_is_no_placeholder(tmp_path):
    hostvars = {
        "node1": {"raygate_out": {"status": "unreachable", "task": "health gate", "error": "no answer"}},
        "node2": gate_vars("10.0.0.2"),
        "node4": {"raygate_out": {"status": "failed", "task": "install ray", "error": "pip exited 1"}},
    }
    args = hosts_args(
        tmp_path, ["node2"], left_hosts=["node4", "node1", "node2"], breaker_threshold=0, pair_tests=False
    )
    res = run_action_with_hostvars(args, hostvars)
    nodes = saved_nodes(tmp_path)
    assert list(nodes) == ["node2", "node4", "node1"]
    assert (nodes["node1"]["role"], nodes["node1"]["status"]) == ("head", "unreachable")
    assert res["unhealthy"] == {
        "node4": ["run: install ray: pip exited 1"],
        "node1": ["reachable: health gate: no answer"],
    }
    assert (res["ok"], res["head_healthy"]) == (False, False)


def test_hosts_without_head_address_take_the_heads_host_variables(tmp_path):
    hostvars = {"node1": {"ansible_host": "192.0.2.1"}, "node2": gate_vars("10.0.0.2")}
    args = hosts_args(tmp_path, ["node2"], pair_tests=False)
    del args["head_address"]
    run_action_with_hostvars(args, hostvars)
    assert saved_nodes(tmp_path)["node1"]["address"] == "192.0.2.1"


def test_hosts_a_host_without_the_gates_facts_fails_the_task(tmp_path):
    hostvars = {"node1": gate_vars("10.0.0.1"), "node2": {"ansible_host": "10.0.0.2"}}
    with pytest.raises(AnsibleActionFail, match="host node2 has no raygate_gate_status"):
        run_action_with_hostvars(hosts_args(tmp_path, ["node1", "node2"]), hostvars)
    assert not (tmp_path / "r").exists()


def test_hosts_without_a_head_judge_the_fleet_alone(tmp_path):
    """The health_gate role alone over nodes that run no Ray gives no head (raygate_head_host '')."""
    hostvars = {"node1": gate_vars("10.0.0.1"), "node2": gate_vars("10.0.0.2")}
    result = run_action_with_hostvars(hosts_args(tmp_path, ["node1", "node2"], head="", head_address=""), hostvars)
    assert (result["head_healthy"], result["ok"]) == (True, True), result["message"]
    assert sorted(result["healthy"]) == ["node1", "node2"] and "head" not in result["message"]
    assert {n["role"] for n in saved_nodes(tmp_path).values()} == {"worker"}


@pytest.mark.parametrize(
    "args, match",
    [
        ({"hosts": ["node1"], "answers": None}, "answers"),
        ({"hosts": ["node1"], "head": "node1", "nodes": [{"host": "node1", "role": "head"}]}, "mutually exclusive"),
        ({"head": "node1"}, "one of the following is required: nodes, hosts"),
    ],
)
def test_hosts_and_nodes_arguments(tmp_path, args, match):
    with pytest.raises(AnsibleActionFail, match=match):
        run_action_with_hostvars(dict(args, dest=str(tmp_path / "out")), {"node1": gate_vars("10.0.0.1")})
    assert not (tmp_path / "out").exists()


def test_hosts_and_the_roles_old_nodes_give_the_same_report(tmp_path):
    # What gate.yml passed before the action made the nodes itself, for the same host variables.
    both = pair_result("10.0.0.2", "10.0.0.3")
    hostvars = {
        "node1": {"raygate_node_ip": "10.0.0.1"},
        "node2": gate_vars("10.0.0.2", pairs=both),
        "node3": gate_vars("10.0.0.3", pairs=both),
        "node4": gate_vars("10.0.0.4", pairs=both),
        "node5": gate_vars("10.0.0.5", status="skipped", pairs=both),
        "node6": {"raygate_out": {"status": "unreachable", "task": "health gate", "error": "no answer"}},
    }
    old_nodes = [
        {
            "host": host,
            "role": "worker",
            "address": hostvars[host]["raygate_gate_address"],
            "status": hostvars[host]["raygate_gate_status"],
            "skip_reason": hostvars[host]["raygate_gate_skip_reason"]
            if hostvars[host]["raygate_gate_status"] == "skipped"
            else "",
            "checks": [dict(c, source="gpu_health") for c in hostvars[host]["raygate_gpu_health"].get("checks", [])]
            + [dict(c, source="nccl_test") for c in hostvars[host]["raygate_nccl_single"].get("checks", [])]
            + [
                dict(c, source="nccl_pairs")
                for c in both["nodes"].get(hostvars[host]["raygate_gate_address"], {}).get("checks", [])
            ]
            + (
                [{"name": "nccl_pairs", "status": "skip", "source": "nccl_pairs", "detail": LONE_DETAIL}]
                if hostvars[host]["raygate_gate_status"] == "checked"
                and hostvars[host]["raygate_nccl_single"]["healthy"]
                and hostvars[host]["raygate_gate_address"] not in both["nodes"]
                else []
            ),
        }
        for host in ("node2", "node3", "node4", "node5")
    ] + [
        {
            "host": "node1",
            "role": "head",
            "address": "10.0.0.1",
            "status": "skipped",
            "skip_reason": "outside this run (--limit); not re-checked",
            "checks": [],
        }
    ]
    common = {"head": "node1", "left_hosts": ["node6"], "dest": str(tmp_path), "min_healthy": 3}
    run_action_with_hostvars(dict(common, nodes=old_nodes, run_id="old"), hostvars)
    hosts = ["node2", "node3", "node4", "node5"]
    run_action_with_hostvars(dict(common, hosts=hosts, head_address="10.0.0.1", run_id="new"), hostvars)
    old_saved, new_saved = (json.loads((tmp_path / run / "report.json").read_text()) for run in ("old", "new"))
    for key in ("run_id", "checked_at", "valid_until", "checked_at_epoch", "valid_until_epoch"):
        old_saved.pop(key), new_saved.pop(key)
    assert old_saved == new_saved
    for name in ("report.md", "junit.xml", "healthy_hosts.txt"):
        # Past the run id and the times (in report.md's header, in each of junit.xml's testsuites).
        old, new = (re.sub(r'report (old|new)|\d{4}-\d\d-\d\dT[\d:]+Z?', "X", (tmp_path / run / name).read_text())
                    for run in ("old", "new"))  # fmt: skip
        assert old == new, name
    assert [n["host"] for n in json.loads((tmp_path / "new" / "report.json").read_text())["nodes"]] == [
        "node2", "node3", "node4", "node5", "node1", "node6",
    ]  # fmt: skip


def test_the_spec_says_what_the_documentation_says():
    documented = yaml.safe_load(module.DOCUMENTATION)["options"]
    assert sorted(action.ARGUMENT_SPEC) == sorted(documented)
    for name, spec in action.ARGUMENT_SPEC.items():
        doc = documented[name]
        for key in ("type", "elements", "default", "choices"):
            assert spec.get(key) == doc.get(key), (name, key)
        assert bool(spec.get("required")) == bool(doc.get("required")), name
    assert {documented[n].get("version_added") for n in ("hosts", "head_address", "left_hosts")} == {"0.4.0"}


# ---- fleet view, severities and the circuit breaker through the action ----------------------


def gpu_with(address, driver, healthy=True):
    """gate_vars whose gpu_health registered a fingerprint with ``driver`` (and failed when not healthy)."""
    checks = [result("gpu_count", "pass", "8 GPUs", 8, 8)]
    if not healthy:
        checks.append(result("xid", "fail", "Xid 79 on GPU 3"))
    registered = {"healthy": healthy, "checks": checks, "fingerprint": {"driver": driver, "gpu_count": 8}}
    return gate_vars(address, raygate_gpu_health=registered)


def test_hosts_fingerprints_make_the_fleet_view_and_drift(tmp_path):
    hostvars = {
        "node1": gpu_with("10.0.0.1", "550.90.07"),
        "node2": gpu_with("10.0.0.2", "550.90.07"),
        "node3": gpu_with("10.0.0.3", "535.161.08"),
    }
    res = run_action_with_hostvars(hosts_args(tmp_path, ["node1", "node2", "node3"], fleet_drift="fail"), hostvars)
    assert res["fleet"]["fields"]["driver"]["majority"] == "550.90.07"
    assert res["unhealthy"] == {"node3": ["fleet_drift: driver 535.161.08, the fleet runs 550.90.07 (2 of 3 nodes)"]}
    assert res["severities"] == {"node3": "do-not-allocate"}
    assert res["breaker_tripped"] is False and res["breaker"]["detail"].startswith("1 of 3 checked nodes failed")
    md = (tmp_path / "r" / "report.md").read_text()
    assert "| driver | 535.161.08 | 1 | node3 | differs from the majority |" in md
    assert "raygate_health_fingerprint_info{" in res["textfiles"]["node3"]


def test_breaker_tripped_by_failed_and_unreachable_hosts_keeps_everyone(tmp_path):
    hostvars = {
        "node1": gpu_with("10.0.0.1", "550.90.07"),
        "node2": gpu_with("10.0.0.2", "550.90.07", healthy=False),
        "node3": {"raygate_out": {"status": "unreachable", "task": "health gate", "error": "no answer"}},
        "node4": {"raygate_out": {"status": "unreachable", "task": "health gate", "error": "no answer"}},
    }
    args = hosts_args(tmp_path, ["node1", "node2"], left_hosts=["node3", "node4"])
    res = run_action_with_hostvars(args, hostvars)
    assert (res["breaker_tripped"], res["ok"]) == (True, False)
    assert res["healthy"] == ["node1", "node2", "node3", "node4"] and res["unhealthy"] == {}
    assert res["breaker"]["failed_hosts"] == ["node2", "node3", "node4"]
    assert res["message"].startswith("health gate stopped: circuit breaker tripped: 3 of 4 checked nodes failed (75%)")
    assert (tmp_path / "r" / "healthy_hosts.txt").read_text() == "node1\nnode2\nnode3\nnode4\n"
    saved = json.loads((tmp_path / "r" / "report.json").read_text())
    assert saved["breaker"]["tripped"] is True and saved["breaker_tripped"] is True
    off = run_action_with_hostvars(dict(args, breaker_threshold=0), hostvars)
    assert sorted(off["unhealthy"]) == ["node2", "node3", "node4"] and off["breaker_tripped"] is False


def test_bad_fleet_and_breaker_arguments_fail_the_task(tmp_path):
    for extra, needle in (
        ({"fleet_expect": {"bios": "1"}}, "not a fingerprint field"),
        ({"breaker_threshold": 150}, "breaker_threshold must be an integer 0..100"),
        ({"breaker_min_nodes": 0}, "breaker_min_nodes"),
    ):
        with pytest.raises(AnsibleActionFail, match=needle):
            run_action(dict({"nodes": nodes(), "dest": str(tmp_path)}, **extra))


def test_hosts_the_report_keeps_the_pair_rounds(tmp_path):
    ran = dict(
        pair_result("10.0.0.1", "10.0.0.2", "10.0.0.3"),
        rounds=[[["10.0.0.1", "10.0.0.2"]], [["10.0.0.2", "10.0.0.3"]]],
        tests=[
            {
                "hosts": ["10.0.0.1", "10.0.0.2"],
                "round": 1,
                "verdict": "pass",
                "busbw": 45.0,
                "transport": "NET/IB/GDRDMA",
            },
            {"hosts": ["10.0.0.2", "10.0.0.3"], "round": 2, "verdict": "fail", "busbw": 3.1, "transport": "NET/Socket"},
        ],
        retests=[
            {"hosts": ["10.0.0.3", "10.0.0.1"], "round": 3, "verdict": "fail", "busbw": 3.0, "transport": "NET/Socket"}
        ],
    )
    hostvars = {"node%d" % i: gate_vars("10.0.0.%d" % i, pairs=ran) for i in (1, 2, 3)}
    run_action_with_hostvars(hosts_args(tmp_path, ["node1", "node2", "node3"]), hostvars)
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert {k: report["pairs"][k] for k in ("planned_rounds", "rounds", "retest_phases")} == {
        "planned_rounds": 2,
        "rounds": 3,
        "retest_phases": 1,
    }
    assert [t["hosts"] for t in report["pairs"]["tests"]] == [
        ["node1", "node2"],
        ["node2", "node3"],
        ["node3", "node1"],
    ]
    md = (tmp_path / "r" / "report.md").read_text()
    assert "- pair nccl-tests: 3 test(s) in 3 round(s): 2 planned, 1 retest phase(s)" in md
    assert "| 3 | retest | node3 + node1 | fail | 3.0 | NET/Socket |" in md


def test_hosts_without_pair_tests_the_report_says_none(tmp_path):
    run_action_with_hostvars(hosts_args(tmp_path, ["node1"]), {"node1": gate_vars("10.0.0.1")})
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["pairs"] is None
    assert "Pair nccl-tests" not in (tmp_path / "r" / "report.md").read_text()


# ---- merge: one fleet report from the reports of slices of the fleet ------------------------
def fingerprint(vbios):
    return {"gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 8, "driver": "550.90.07", "vbios": vbios}


def gated(host, role="worker", vbios="96.00.74.00.0D", extra=()):
    ok = [check("gpu_count", "pass", "8 GPUs", 8, 8)] + list(extra)
    return {
        "host": host,
        "role": role,
        "address": "10.0.0.%s" % host[-1],
        "checks": ok,
        "fingerprint": fingerprint(vbios),
    }


def slice_run(tmp_path, run_id, members):
    res = run_action({"nodes": members, "dest": str(tmp_path / "slices"), "run_id": run_id})
    return res, os.path.dirname(res["files"]["json"])


def test_merge_judges_drift_over_the_whole_fleet_and_keeps_a_shared_node_once(tmp_path):
    # Slice 1: the head and node3, which runs another VBIOS: two nodes that disagree, no majority.
    one, one_dir = slice_run(tmp_path, "s1", [gated("node1", "head"), gated("node3", vbios="96.00.99.00.01")])
    assert one["warned"] == {} and one["fleet"]["fields"]["vbios"]["majority"] is None
    # Slice 2: the head again (the known-good pair partner), four more workers, node6 with an Xid,
    # and node7 that did not answer.
    members = [gated("node1", "head"), gated("node4"), gated("node5")]
    members += [gated("node6", extra=[check("xid", "fail", "Xid 79")])]
    members += [{"host": "node7", "role": "worker", "status": "unreachable", "error": "ssh: no route to host"}]
    two, two_dir = slice_run(tmp_path, "s2", members)
    merged = run_action({"merge": [one_dir, two["files"]["json"]], "dest": str(tmp_path / "fleet"), "run_id": "m"})
    with open(merged["files"]["json"]) as fh:
        doc = json.load(fh)
    assert [n["host"] for n in doc["nodes"]] == ["node1", "node3", "node4", "node5", "node6", "node7"]
    # Over the fleet the majority VBIOS is clear, and node3 drifts from it.
    assert doc["fleet"]["fields"]["vbios"]["majority"] == "96.00.74.00.0D"
    assert "fleet_drift" in merged["warned"]["node3"][0]
    assert merged["unhealthy"] == {"node6": ["xid: Xid 79"], "node7": ["reachable: ssh: no route to host"]}
    assert merged["breaker_tripped"] is False and merged["ok"] is True
    assert [s["run_id"] for s in merged["slices"]] == ["s1", "s2"] and doc["slices"][1]["nodes"] == 5
    with open(merged["files"]["markdown"]) as fh:
        assert "- merged from 2 slices: s1 (2 nodes), s2 (5 nodes)" in fh.read()


def test_merge_keeps_a_node_s_worst_result_and_the_breaker_judges_the_fleet(tmp_path):
    bad = check("ecc_uncorrectable_volatile", "fail", "2 uncorrectable")
    _one, one_dir = slice_run(tmp_path, "s1", [gated("node1", "head"), gated("node2", extra=[bad])])
    _two, two_dir = slice_run(tmp_path, "s2", [gated("node1", "head"), gated("node2")])
    merged = run_action({"merge": [one_dir, two_dir], "dest": str(tmp_path / "fleet"), "run_id": "m"})
    assert list(merged["unhealthy"]) == ["node2"]  # failed in one slice: failed in the fleet
    # Three slices of two, each with one failing worker: no slice may judge (3 nodes needed), the
    # fleet of four does: 3 of 4 failed trips it, and nobody is left out.
    runs = [
        slice_run(tmp_path, "t%d" % i, [gated("node1", "head"), gated("node%d" % i, extra=[bad])])[1] for i in (2, 3, 4)
    ]
    fleet = run_action({"merge": runs, "dest": str(tmp_path / "fleet"), "run_id": "f", "breaker_min_nodes": 3})
    assert fleet["breaker_tripped"] is True and fleet["unhealthy"] == {} and fleet["ok"] is False


def test_merge_refuses_slices_of_two_fleets_and_files_that_are_no_report(tmp_path):
    _one, one_dir = slice_run(tmp_path, "s1", [gated("node1", "head")])
    _two, two_dir = slice_run(tmp_path, "s2", [gated("nodeA", "head")])
    with pytest.raises(AnsibleActionFail, match="the slices name different heads .node1, nodeA."):
        run_action({"merge": [one_dir, two_dir], "dest": str(tmp_path / "fleet")})
    junk = tmp_path / "junk.json"
    junk.write_text('{"hello": 1}')
    with pytest.raises(AnsibleActionFail, match="junk.json is not a health report"):
        run_action({"merge": [str(junk)], "dest": str(tmp_path / "fleet")})
    with pytest.raises(AnsibleActionFail, match="cannot read the slice report .*missing: No such file or directory"):
        run_action({"merge": [str(tmp_path / "missing")], "dest": str(tmp_path / "fleet")})
    assert not (tmp_path / "fleet").exists()
