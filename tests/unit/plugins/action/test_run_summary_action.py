"""The run_summary action: nodes from host variables, the probe of silent nodes, the file it writes."""

import json

import pytest
from action_harness import plugin_for
from ansible.errors import AnsibleActionFail
from role_answers import ANSWERS

from ansible_collections.raygate.cluster.plugins.action import run_summary as action
from ansible_collections.raygate.cluster.plugins.plugin_utils import run_summary as rs

HOSTS = ["node1", "node2", "node3"]


def hostvars():
    return {
        "node1": {"raygate_run_ok": True, "raygate_node_ip": "10.0.0.1"},
        "node2": {"raygate_run_ok": True, "ansible_host": "10.0.0.2"},
        "node3": {"raygate_out": {"status": "failed", "task": "install ray", "error": "pip exited 1"}},
    }


def run_action(args, hv, check_mode=False):
    # The role's names for what each node left (raygate_answers), as the role passes them.
    args = dict(args, answers=args.get("answers", ANSWERS))
    plugin = plugin_for(action, "raygate.cluster.run_summary", args, check_mode)
    return plugin.run(task_vars={"hostvars": hv})


@pytest.fixture()
def probes(monkeypatch):
    """Every probe the action makes, as (address, port, timeout); none of them touches the network."""
    calls = []

    def fake(address, port=22, timeout=5.0):
        calls.append((address, port, timeout))
        return "%s:%s: Connection refused" % (address, port)

    monkeypatch.setattr(rs, "probe", fake)
    return calls


def test_a_node_out_is_degraded_and_written(tmp_path, probes):
    dest = tmp_path / "runs"
    res = run_action({"playbook": "site", "hosts": HOSTS, "head": "node1", "dest": str(dest)}, hostvars())
    assert (res["result"], res["failed"], res["changed"]) == ("degraded", False, False)
    assert res["in"] == ["node1", "node2"]
    assert res["out"] == {"node3": {"status": "failed", "task": "install ray", "error": "pip exited 1"}}
    assert res["msg"] == res["message"] == "site: 2 of 3 nodes in; out: node3 failed at 'install ray': pip exited 1"
    assert res["path"] == str(dest / "site.json")
    saved = json.loads((dest / "site.json").read_text())
    assert saved["result"] == "degraded" and saved["out"] == res["out"] and saved["in"] == res["in"]
    assert saved["message"] == res["message"] and "path" not in saved
    assert probes == []  # every node said why it is in or out


def test_the_head_out_fails_the_task(tmp_path, probes):
    hv = hostvars()
    hv["node1"] = {"raygate_out": {"status": "failed", "task": "ray start", "error": "port 6379 in use"}}
    res = run_action({"playbook": "site", "hosts": HOSTS, "head": "node1", "dest": str(tmp_path)}, hv)
    assert (res["result"], res["failed"]) == ("no_cluster", True)
    assert res["msg"].startswith("site: no cluster")
    assert "node1 failed at 'ray start': port 6379 in use" in res["msg"]
    assert json.loads((tmp_path / "site.json").read_text())["failed"] is True


def test_only_a_node_that_left_without_a_reason_is_probed(tmp_path, probes):
    hv = hostvars()
    hv["node2"] = {"ansible_host": "10.0.0.2", "ansible_port": 2222}
    args = {"playbook": "scale", "hosts": HOSTS, "head": "node1", "dest": str(tmp_path), "probe_timeout": 1.5}
    res = run_action(args, hv)
    assert probes == [("10.0.0.2", 2222, 1.5)]
    assert res["out"]["node2"] == {
        "status": "unreachable",
        "task": "",
        "error": "stopped answering during the run; now: 10.0.0.2:2222: Connection refused",
    }
    assert res["out"]["node3"]["status"] == "failed"
    assert res["in"] == ["node1"]
    assert (res["result"], res["failed"]) == ("degraded", False)


def test_a_silent_node_is_probed_at_raygate_node_ip_then_its_name(tmp_path, probes):
    hv = {
        "node1": {"raygate_run_ok": True},
        "node2": {"raygate_node_ip": "10.0.0.2", "ansible_host": "192.0.2.2"},
        "node3": {},
    }
    run_action({"playbook": "site", "hosts": HOSTS, "head": "node1", "dest": str(tmp_path)}, hv)
    assert sorted(probes) == [("10.0.0.2", 22, 5.0), ("node3", 22, 5.0)]


def test_a_silent_node_that_answers_now_is_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr(rs, "probe", lambda address, port=22, timeout=5.0: None)
    hv = dict(hostvars(), node3={})
    res = run_action({"playbook": "teardown", "hosts": HOSTS, "head": "node1", "dest": str(tmp_path)}, hv)
    assert res["out"]["node3"]["status"] == "stopped"
    assert (res["result"], res["failed"]) == ("incomplete", True)
    assert res["msg"].endswith("Run it again once they answer.")
    assert (tmp_path / "teardown.json").is_file()


def test_the_gate_message_fails_health(tmp_path, probes):
    hv = dict(hostvars(), node3={"raygate_run_ok": True})
    gate = "health gate failed: 1 healthy of 3, need 2"
    args = {"playbook": "health", "hosts": HOSTS, "head": "node1", "dest": str(tmp_path), "gate_message": gate}
    res = run_action(args, hv)
    assert (res["result"], res["failed"], res["msg"]) == ("gate_failed", True, "health: " + gate)


def test_check_mode_writes_no_file(tmp_path, probes):
    dest = tmp_path / "runs"
    res = run_action({"playbook": "site", "hosts": HOSTS, "head": "node1", "dest": str(dest)}, hostvars(), True)
    assert res["result"] == "degraded"
    assert not dest.exists()
    assert "path" not in res


def test_write_false_writes_no_file(tmp_path, probes):
    dest = tmp_path / "runs"
    args = {"playbook": "site", "hosts": HOSTS, "head": "node1", "dest": str(dest), "write": False}
    res = run_action(args, hostvars())
    assert res["result"] == "degraded" and not dest.exists() and "path" not in res


@pytest.mark.parametrize(
    "args, match",
    [
        ({"playbook": "deploy", "hosts": HOSTS, "head": "node1"}, "value of playbook must be one of: .*got: deploy"),
        ({"hosts": HOSTS, "head": "node1"}, "missing required arguments: playbook"),
        ({"playbook": "site", "head": "node1"}, "missing required arguments: hosts"),
        ({"playbook": "site", "hosts": HOSTS}, "missing required arguments: head"),
        ({"playbook": "site", "hosts": HOSTS, "head": "node1", "bogus": 1}, "bogus"),
    ],
)
def test_invalid_arguments_fail_and_write_nothing(tmp_path, probes, args, match):
    with pytest.raises(AnsibleActionFail, match=match):
        run_action(dict(args, dest=str(tmp_path / "runs")), hostvars())
    assert not (tmp_path / "runs").exists()
    assert probes == []


def upgrade_hostvars():
    """upgrade.yml's end with node3 gone dark after its version was read, node4 dead from the start."""
    return {
        "node1": {
            "raygate_run_ok": True,
            "raygate_upgrade_from": "/opt/raygate/ray-2.59.0-py3.11",
            "raygate_upgrade_to": "/opt/raygate/ray-2.60.0-py3.11",
        },  # fmt: skip
        "node2": {
            "raygate_run_ok": True,
            "raygate_upgrade_from": "/opt/raygate/ray-2.59.0-py3.11",
            "raygate_upgrade_to": "/opt/raygate/ray-2.60.0-py3.11",
        },  # fmt: skip
        "node3": {
            "raygate_upgrade_from": "/opt/raygate/ray-2.59.0-py3.11",
            "raygate_upgrade_to": "/opt/raygate/ray-2.60.0-py3.11",
            "raygate_node_call": {"unreachable": True, "msg": "ssh: connect timed out"},
        },  # fmt: skip
        "node4": {"raygate_preflight_call": {"unreachable": True, "msg": "ssh: no route to host"}},
    }


def test_an_upgrade_names_the_nodes_it_left_behind_with_their_version(tmp_path, probes):
    hosts = ["node1", "node2", "node3", "node4"]
    args = {"playbook": "upgrade", "hosts": hosts, "head": "node1", "dest": str(tmp_path)}
    res = run_action(args, upgrade_hostvars())
    assert (res["result"], res["failed"]) == ("degraded", False)
    assert res["left_on"] == {"node3": "ray-2.59.0-py3.11", "node4": None}
    assert res["msg"].endswith(
        "not upgraded: node3 on ray-2.59.0-py3.11, node4 (its version not read: it never answered); once they "
        "answer, site.yml with the same raygate_ray_version brings them to ray-2.60.0-py3.11 without stopping "
        "the others (upgrade.yml would restart every node)"
    ), res["msg"]
    assert json.loads((tmp_path / "upgrade.json").read_text())["left_on"] == res["left_on"]


def test_a_rolled_back_upgrade_names_no_node_left_behind(tmp_path, probes):
    # Rolled back: every node failed the last step and runs the old version again; nobody is behind.
    hv = upgrade_hostvars()
    for host in ("node1", "node2"):
        hv[host] = dict(hv[host], raygate_run_ok=False, raygate_out={"status": "failed", "task": "upgrade",
                                                                     "error": "rolled back"})  # fmt: skip
    res = run_action({"playbook": "upgrade", "hosts": list(hv), "head": "node1", "dest": str(tmp_path)}, hv)
    assert res["result"] == "failed" and "left_on" not in res
    assert "not upgraded" not in res["msg"]


def test_site_names_no_version(tmp_path, probes):
    res = run_action({"playbook": "site", "hosts": ["node1", "node3"], "head": "node1", "dest": str(tmp_path)},
                     upgrade_hostvars())  # fmt: skip
    assert res["result"] == "degraded" and "left_on" not in res and "not upgraded" not in res["msg"]
