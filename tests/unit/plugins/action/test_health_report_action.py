"""The health_report action: argument checking, the files it writes, check mode, what it returns."""

import json
import os
import xml.etree.ElementTree as ET
from unittest.mock import MagicMock

import pytest
from ansible.errors import AnsibleActionFail

from ansible_collections.raygate.cluster.plugins.action import health_report as action
from ansible_collections.raygate.cluster.plugins.module_utils.checks import result

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
    task = MagicMock()
    task.args = args
    task.check_mode = check_mode
    task.async_val = 0
    task.action = "raygate.cluster.health_report"
    connection = MagicMock()
    connection._shell.tmpdir = None
    plugin = action.ActionModule(task, connection, MagicMock(), MagicMock(), MagicMock(), None)
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
        ({"nodes": [{"host": "a", "role": "worker"}]}, "no head"),
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
    [entry] = action.left_entries(["node4"], hv, "node1")
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
    [entry] = action.left_entries(["node4"], hv, "node1")
    assert (entry["status"], entry["error"]) == ("failed", "install ray: pip exited 1")


@pytest.mark.parametrize("status", ["unhealthy", "stopped", "bogus", None])
def test_left_entries_any_other_status_is_failed(status):
    hv = {"node4": {"raygate_out": {"status": status, "task": "", "error": "it broke"}}}
    [entry] = action.left_entries(["node4"], hv, "node1")
    assert (entry["status"], entry["error"]) == ("failed", "it broke")


def test_left_entries_an_out_without_error_says_so():
    hv = {"node4": {"raygate_out": {"status": "failed", "task": "ray start"}}}
    assert action.left_entries(["node4"], hv, "node1")[0]["error"] == "ray start: no error recorded"


@pytest.mark.parametrize("hv", [{}, {"node4": {}}, {"node4": {"raygate_out": None}}])
def test_left_entries_a_node_without_raygate_out_stopped_answering(hv):
    [entry] = action.left_entries(["node4"], hv, "node1")
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
    assert action.left_entries(["node4"], {"node4": hv}, "node1")[0]["address"] == address


def test_left_entries_roles_and_order():
    entries = action.left_entries(["node3", "node1"], {}, "node1")
    assert [(e["host"], e["role"]) for e in entries] == [("node3", "worker"), ("node1", "head")]


def run_action_with_hostvars(args, hostvars):
    task = MagicMock()
    task.args = args
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
    res = run_action_with_hostvars(args, hostvars)
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
