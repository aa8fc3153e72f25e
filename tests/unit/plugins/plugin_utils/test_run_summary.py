"""run_summary: the result of a raygate play from each node's outcome, and the SSH probe."""

import json
import socket

import pytest
from role_answers import ANSWERS

from ansible_collections.raygate.cluster.plugins.plugin_utils import run_summary as rs

CLUSTER = ("site", "scale")  # upgrade: a cluster too, but a failed head is "failed" (it rolls back)
CLEANUP = ("teardown", "remove_node")


def ok(host, role="worker"):
    return {"host": host, "role": role, "address": host, "ok": True, "out": None}


def out(host, status, task="", error="", role="worker"):
    return {
        "host": host,
        "role": role,
        "address": host,
        "ok": False,
        "out": {"status": status, "task": task, "error": error},
    }


def silent(host, role="worker"):
    return {"host": host, "role": role, "address": host, "ok": False, "out": None}


def test_the_playbooks_and_their_kinds():
    assert sorted(rs.PLAYBOOKS) == ["health", "remove_node", "scale", "site", "teardown", "upgrade"]
    assert [rs.PLAYBOOKS[p] for p in CLUSTER] == ["cluster", "cluster"]
    assert rs.PLAYBOOKS["health"] == "gate"
    assert [rs.PLAYBOOKS[p] for p in CLEANUP] == ["cleanup", "cleanup"]


@pytest.mark.parametrize("playbook", sorted(rs.PLAYBOOKS))
def test_every_node_in_is_complete(playbook):
    s = rs.summarize(playbook, [ok("n1", "head"), ok("n2"), ok("n3")], "n1", now=0)
    assert (s["result"], s["failed"]) == ("complete", False)
    assert s["in"] == ["n1", "n2", "n3"] and s["out"] == {}
    assert s["playbook"] == playbook and s["head"] == "n1"
    word = "done" if playbook in CLEANUP else "in"
    assert s["message"] == "%s: every node is %s (3 of 3)" % (playbook, word)
    assert s["finished_at"] == "1970-01-01T00:00:00Z"


@pytest.mark.parametrize(
    "playbook, result, failed",
    [(p, "degraded", False) for p in CLUSTER + ("upgrade", "health")] + [(p, "incomplete", True) for p in CLEANUP],
)
def test_a_worker_out_by_playbook_kind(playbook, result, failed):
    s = rs.summarize(playbook, [ok("n1", "head"), out("n2", "failed", "ray start", "boom")], "n1")
    assert (s["result"], s["failed"]) == (result, failed)
    assert s["in"] == ["n1"] and list(s["out"]) == ["n2"]


@pytest.mark.parametrize(
    "playbook, result, failed",
    [(p, "no_cluster", True) for p in CLUSTER]
    + [("health", "degraded", False)]
    + [(p, "incomplete", True) for p in CLEANUP],
)
def test_the_head_out_by_playbook_kind(playbook, result, failed):
    s = rs.summarize(playbook, [out("n1", "unreachable", "preflight", "timeout", "head"), ok("n2")], "n1")
    assert (s["result"], s["failed"]) == (result, failed)
    assert s["in"] == ["n2"] and list(s["out"]) == ["n1"]


def test_degraded_names_each_node_out_with_status_task_and_error():
    nodes = [
        ok("n1", "head"),
        out("n2", "failed", "install ray", "pip exited 1"),
        out("n3", "unreachable", "preflight", "ssh timed out"),
    ]
    s = rs.summarize("site", nodes, "n1")
    assert (s["result"], s["failed"]) == ("degraded", False)
    assert s["in"] == ["n1"]
    assert s["out"] == {
        "n2": {"status": "failed", "task": "install ray", "error": "pip exited 1"},
        "n3": {"status": "unreachable", "task": "preflight", "error": "ssh timed out"},
    }
    assert s["message"] == (
        "site: 1 of 3 nodes in; out: n2 failed at 'install ray': pip exited 1; "
        "n3 unreachable at 'preflight': ssh timed out"
    )


def test_head_out_for_site_is_no_cluster_and_fails():
    nodes = [out("n1", "failed", "ray start", "port in use", "head"), ok("n2"), out("n3", "unhealthy", "", "xid")]
    s = rs.summarize("site", nodes, "n1")
    assert (s["result"], s["failed"]) == ("no_cluster", True)
    assert s["message"].startswith("site: no cluster: n1 failed at 'ray start': port in use")
    assert "n3 unhealthy: xid" in s["message"]


def test_head_out_for_health_is_degraded_not_no_cluster():
    s = rs.summarize("health", [out("n1", "unhealthy", "gpu checks", "xid 79", "head"), ok("n2")], "n1")
    assert (s["result"], s["failed"]) == ("degraded", False)
    assert s["message"] == "health: 1 of 2 nodes in; out: n1 unhealthy at 'gpu checks': xid 79"


def test_gate_message_for_site_is_no_cluster_with_the_gate_message():
    gate = "health gate failed: 1 healthy of 3, need 2"
    s = rs.summarize("site", [ok("n1", "head"), ok("n2"), ok("n3")], "n1", gate_message=gate)
    assert (s["result"], s["failed"]) == ("no_cluster", True)
    assert s["message"] == "site: no cluster: " + gate


def test_gate_message_for_upgrade_is_no_cluster():
    gate = "health gate failed: 0 healthy of 2, need 1"
    s = rs.summarize("upgrade", [ok("n1", "head"), ok("n2")], "n1", gate_message=gate)
    assert (s["result"], s["failed"]) == ("no_cluster", True)
    assert s["message"] == "upgrade: no cluster: " + gate


def test_upgrade_with_the_head_unreachable_is_no_cluster():
    s = rs.summarize("upgrade", [out("n1", "unreachable", "preflight", "timeout", "head"), ok("n2")], "n1")
    assert (s["result"], s["failed"]) == ("no_cluster", True)
    assert s["message"].startswith("upgrade: no cluster: n1 unreachable at 'preflight': timeout")


@pytest.mark.parametrize("status", ["failed", "unhealthy", "stopped"])
def test_upgrade_with_the_head_failed_is_failed(status):
    s = rs.summarize("upgrade", [out("n1", status, "ray upgrade", "rolled back to 2.9.0", "head"), ok("n2")], "n1")
    assert (s["result"], s["failed"]) == ("failed", True)
    assert s["message"] == "upgrade: failed: rolled back to 2.9.0"


def test_gate_message_for_health_is_gate_failed():
    gate = "health gate failed: head n1 is unhealthy (xid: Xid 79)"
    s = rs.summarize("health", [ok("n1", "head"), out("n2", "unhealthy", "", "ecc")], "n1", gate_message=gate)
    assert (s["result"], s["failed"]) == ("gate_failed", True)
    assert s["message"] == "health: " + gate


def test_gate_message_does_not_change_a_cleanup():
    s = rs.summarize("teardown", [ok("n1", "head")], "n1", gate_message="health gate failed")
    assert (s["result"], s["failed"]) == ("complete", False)


def test_teardown_with_a_node_out_is_incomplete_and_says_to_run_again():
    s = rs.summarize("teardown", [ok("n1", "head"), out("n2", "unreachable", "preflight", "no route")], "n1")
    assert (s["result"], s["failed"]) == ("incomplete", True)
    assert s["message"] == (
        "teardown: 1 of 2 nodes done; not done: n2 unreachable at 'preflight': no route. Run it again once they answer."
    )


def test_a_silent_node_that_answers_now_is_stopped():
    s = rs.summarize("site", [ok("n1", "head"), silent("n2")], "n1", probes={"n2": None})
    assert s["out"] == {"n2": {"status": "stopped", "task": "", "error": "the run ended before this node was done"}}
    assert s["result"] == "degraded"
    assert "n2 stopped: the run ended before this node was done" in s["message"]


def test_a_silent_node_without_a_probe_is_stopped():
    s = rs.summarize("site", [ok("n1", "head"), silent("n2")], "n1")
    assert s["out"]["n2"]["status"] == "stopped"


def test_a_silent_node_that_does_not_answer_is_unreachable_with_the_probe_error():
    error = "127.0.0.1:2222: Connection refused"
    s = rs.summarize("scale", [ok("n1", "head"), silent("n2")], "n1", probes={"n2": error})
    assert s["out"]["n2"] == {
        "status": "unreachable",
        "task": "",
        "error": "stopped answering during the run; now: " + error,
    }
    assert error in s["message"]
    assert "n2 unreachable: stopped answering during the run; now: " + error in s["message"]


def test_the_probe_of_a_node_with_an_out_entry_is_ignored():
    s = rs.summarize("site", [ok("n1", "head"), out("n2", "failed", "t", "e")], "n1", probes={"n2": "refused"})
    assert s["out"]["n2"] == {"status": "failed", "task": "t", "error": "e"}


@pytest.mark.parametrize("status", rs.OUT_STATUSES)
def test_a_known_out_status_is_kept(status):
    s = rs.summarize("site", [ok("n1", "head"), out("n2", status, "t", "e")], "n1")
    assert s["out"]["n2"]["status"] == status


@pytest.mark.parametrize("status", ["exploded", "", None, "FAILED", "ok"])
def test_an_unknown_out_status_becomes_failed(status):
    s = rs.summarize("site", [ok("n1", "head"), out("n2", status, "t", "e")], "n1")
    assert s["out"]["n2"]["status"] == "failed"


def test_an_out_entry_without_task_or_error():
    node = dict(silent("n2"), out={"status": "unreachable", "task": None, "error": None})
    s = rs.summarize("site", [ok("n1", "head"), node], "n1")
    assert s["out"]["n2"] == {"status": "unreachable", "task": "", "error": ""}
    assert s["message"] == "site: 1 of 2 nodes in; out: n2 unreachable: no error recorded"


def test_an_error_that_is_not_a_string_is_made_one():
    s = rs.summarize("site", [ok("n1", "head"), out("n2", "failed", "t", 42)], "n1")
    assert s["out"]["n2"]["error"] == "42"


@pytest.mark.parametrize("playbook", ["deploy", "", "Site", None])
def test_an_unknown_playbook_raises(playbook):
    with pytest.raises(ValueError, match="is not one of"):
        rs.summarize(playbook, [ok("n1", "head")], "n1")


def test_describe():
    assert rs.describe("n2", {"status": "failed", "task": "ray start", "error": "boom"}) == (
        "n2 failed at 'ray start': boom"
    )
    assert rs.describe("n3", {"status": "stopped", "task": "", "error": ""}) == "n3 stopped: no error recorded"


def test_finished_at_is_utc_iso():
    s = rs.summarize("site", [ok("n1", "head")], "n1", now=1767323045.7)
    assert s["finished_at"] == "2026-01-02T03:04:05Z"


def test_render_is_json_with_sorted_keys():
    nodes = [ok("n1", "head"), out("n3", "failed", "t", "e"), out("n2", "unreachable", "p", "x")]
    s = rs.summarize("site", nodes, "n1", now=0)
    text = rs.render(s)
    assert text.endswith("}\n")
    assert json.loads(text) == s
    orders = []
    json.loads(text, object_pairs_hook=lambda pairs: orders.append([pair[0] for pair in pairs]) or dict(pairs))
    assert [sorted(keys) for keys in orders] == orders
    assert ["failed", "finished_at", "head", "in", "message", "out", "playbook", "result"] in orders
    assert ["n2", "n3"] in orders  # the nodes out, too


@pytest.fixture()
def listening():
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    yield server.getsockname()[1]
    server.close()


def test_probe_of_a_listening_port_is_none(listening):
    assert rs.probe("127.0.0.1", listening, timeout=2.0) is None
    assert rs.probe("127.0.0.1", str(listening), timeout=2.0) is None


def test_probe_of_a_closed_port_names_the_address_and_port():
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    error = rs.probe("127.0.0.1", port, timeout=2.0)
    assert isinstance(error, str)
    assert error.startswith("127.0.0.1:%d: " % port)
    assert len(error) > len("127.0.0.1:%d: " % port)


def test_failure_of_takes_the_step_that_failed():
    hv = {
        "raygate_preflight_call": {"changed": False},
        "raygate_install_call": {"failed": True, "msg": "node3: not enough space"},
        "raygate_node_call": {"skipped": True},
    }
    assert rs.failure_of(hv, answers=ANSWERS) == {
        "status": "failed",
        "task": "install",
        "error": "node3: not enough space",
    }


def test_failure_of_reports_unreachable_and_ignores_clean_answers():
    assert (
        rs.failure_of({"raygate_node_call": {"unreachable": True, "msg": "ssh: no route"}}, answers=ANSWERS)["status"]
        == "unreachable"
    )
    assert rs.failure_of({"raygate_node_call": {"changed": True}, "other": {"failed": True}}, answers=ANSWERS) is None


def test_gate_message_finds_a_failed_verdict_only():
    assert rs.gate_message({"n1": {"raygate_health": {"ok": True, "message": "passed"}}}, answers=ANSWERS) is None
    failed = {"n1": {}, "n2": {"raygate_health": {"ok": False, "message": "health gate failed: head n1 is unhealthy"}}}
    assert rs.gate_message(failed, answers=ANSWERS) == "health gate failed: head n1 is unhealthy"


NAMES = {"upgrade_from": "was", "upgrade_to": "goes"}


def test_left_on_reads_each_out_node_s_version_and_the_target_from_a_node_in():
    hv = {
        "n1": {"was": "/opt/raygate/ray-1.0.0-py3.11", "goes": "/opt/raygate/ray-2.0.0-py3.11/"},
        "n2": {"was": "/opt/raygate/ray-1.0.0-py3.11", "goes": "/opt/raygate/ray-2.0.0-py3.11"},
        "n3": {},
    }
    assert rs.left_on(hv, NAMES, {"n2": {}, "n3": {}}) == (
        {"n2": "ray-1.0.0-py3.11", "n3": None},
        "ray-2.0.0-py3.11",
    )


@pytest.mark.parametrize("venv", [None, "", "/", 3, {}])
def test_left_on_a_version_never_read_is_none(venv):
    assert rs.left_on({"n1": {"was": venv}}, NAMES, ["n1"]) == ({"n1": None}, None)


def test_left_on_without_the_names_is_nothing():
    assert rs.left_on({"n1": {"was": "/x/ray-1"}}, {}, ["n1"]) == ({}, None)
    assert rs.left_on({"n1": {"was": "/x/ray-1"}}, {"upgrade_from": "was"}, ["n1"]) == ({}, None)


def test_left_on_text_without_a_target_says_the_new_version():
    text = rs.left_on_text({"b": None, "a": "ray-1"}, None)
    assert text.startswith("not upgraded: a on ray-1, b (its version not read: it never answered);")
    assert "brings them to the new version" in text


@pytest.mark.parametrize("playbook", sorted(rs.PLAYBOOKS))
def test_a_run_the_cluster_lock_refused_is_busy_and_fails_naming_the_holder(playbook):
    """lock.yml: every node leaves with status busy; whatever the playbook, the result says so (rc 2)."""
    held = "the cluster lock is held by site.yml run by root on ctl1 (pid 42); that run is still going"
    nodes = [out("n1", "busy", "cluster lock", held, role="head"), out("n2", "busy", "cluster lock", held)]
    got = rs.summarize(playbook, nodes, "n1", now=0)
    assert (got["result"], got["failed"]) == ("busy", True)
    assert got["message"] == "%s: changed nothing: %s" % (playbook, held)
    assert got["out"]["n2"]["status"] == "busy"
