import pytest
from ansible.errors import AnsibleFilterError
from role_answers import ANSWERS

from ansible_collections.raygate.cluster.plugins.filter.node_labels import health_labels
from ansible_collections.raygate.cluster.plugins.filter.port_plan import plan_ports, port_plan
from ansible_collections.raygate.cluster.plugins.filter.versions import version_mismatch_hosts, version_mismatch_table
from ansible_collections.raygate.cluster.plugins.module_utils.net import port_plan as pp


def test_port_plan_and_plan_ports():
    plan = port_plan({"dashboard": "9265"}, offset="0")
    assert plan["dashboard"] == 9265
    ports = plan_ports(plan, "worker")
    assert 8076 in ports and 9265 not in ports and 6379 not in ports
    assert ports == sorted(ports)
    assert 6379 in plan_ports(port_plan({}), "head")


def test_port_plan_offset_is_applied_as_ray_node_applies_it():
    # roles/_common/vars/main.yml: raygate_ports | port_plan(offset=raygate_port_offset | int),
    # raygate_dashboard_url from its .dashboard; ray_node builds its plan with build_plan().
    for overrides, offset in (({}, 0), ({}, 100), ({"dashboard": "9265", "gcs": None}, "10"), (None, None)):
        plan = port_plan(overrides, offset=offset)
        assert plan == pp.build_plan(overrides or {}, offset=int(offset or 0))
    assert port_plan({}, offset=100)["dashboard"] == pp.DEFAULT_PORTS["dashboard"] + 100
    assert port_plan({"dashboard": 9000}, offset=5)["dashboard"] == 9005
    assert port_plan({}, offset="")["gcs"] == pp.DEFAULT_PORTS["gcs"]


@pytest.mark.parametrize("offset", [1.5, True, "ten"])
def test_port_plan_refuses_an_offset_ray_node_refuses(offset):
    with pytest.raises(AnsibleFilterError, match="offset"):
        port_plan({}, offset=offset)


def test_port_plan_errors_are_filter_errors():
    with pytest.raises(AnsibleFilterError, match="dashbaord"):
        port_plan({"dashbaord": 1})


def test_version_table_empty_when_equal_and_names_the_odd_one():
    same = {h: {"ray": "2.60.0", "python": "3.11.2"} for h in ("node1", "node2")}
    assert version_mismatch_table(same, reference="node1") == ""
    odd = dict(same, node3={"ray": "2.60.0", "python": "3.11.9"})
    table = version_mismatch_table(odd, reference="node1")
    assert table.startswith("Ray or Python versions differ between nodes")
    assert "node3  2.60.0  3.11.9  python" in table
    assert version_mismatch_table(odd, level="minor", reference="node1") == ""


def test_version_table_of_container_nodes_names_the_odd_image():
    image = {"ray": "2.60.0", "python": "3.11.2", "image": "sha256:" + "a" * 64}
    infos = {"node1": image, "node2": dict(image, image="sha256:" + "b" * 64)}
    table = version_mismatch_table(infos, reference="node1")
    assert table.startswith("the nodes' container images differ (their digests): pin one image for every node:\n")
    assert "node2  2.60.0  3.11.2  sha256:" + "b" * 64 + "  image" in table
    assert version_mismatch_hosts(infos, reference="node1") == ["node2"]
    both = dict(infos, node2=dict(infos["node2"], ray="2.59.0"))
    assert version_mismatch_table(both, reference="node1").startswith(
        "Ray or Python versions differ between nodes; Ray would refuse to join them; the nodes' container images differ"
    )


def test_version_hosts_are_the_tables_differing_rows_without_the_head():
    infos = {
        "head": {"ray": "2.60.0", "python": "3.11.2"},
        "a": {"ray": "2.60.0", "python": "3.11.2"},
        "b": {"ray": "2.59.0", "python": "3.11.2"},
        "c": {"ray": "2.60.0", "python": "3.11.9"},
    }
    assert version_mismatch_hosts(infos, reference="head") == ["b", "c"]
    # at the minor level only Ray's own version differs; with every node alike nobody leaves
    assert version_mismatch_hosts(infos, level="minor", reference="head") == ["b"]
    assert version_mismatch_hosts({h: infos["head"] for h in infos}, reference="head") == []
    # the head differs from nobody: against the head, an odd head makes every other node differ
    assert version_mismatch_hosts(dict(infos, head={"ray": "2.61.0", "python": "3.11.2"}), reference="head") == [
        "a",
        "b",
        "c",
    ]
    with pytest.raises(AnsibleFilterError, match="version_mismatch_hosts expects a dict"):
        version_mismatch_hosts(["head"])


def test_version_table_rejects_missing_info():
    with pytest.raises(AnsibleFilterError, match="node2"):
        version_mismatch_table({"node1": {"ray": "2.60.0", "python": "3.11.2"}, "node2": None})


def test_health_labels_of_a_node_that_passed_in_this_run():
    # What raygate.cluster.health_report returns: w2 is a running member the gate skipped.
    report = {"checked_at": 1785283200, "healthy": ["w1", "w2"], "warned": {"w1": ["x: y"]}, "breaker_tripped": False}
    assert health_labels(report, "w1", checked=True, fingerprint_hash="d88dcaf0b538") == {
        "raygate.io/health": "warn",
        "raygate.io/checked-at": "1785283200",
        "raygate.io/checked-date": "2026-07-29",
        "raygate.io/fingerprint": "d88dcaf0b538",
    }
    assert health_labels(report, "w2", checked=False, fingerprint_hash="d88dcaf0b538") == {}
    assert health_labels({"skipped": True}, "w1") == {}
    with pytest.raises(AnsibleFilterError, match="fingerprint_hash"):
        health_labels(report, "w1", fingerprint_hash=12)


def test_gate_pairs_refuses_a_partner_outside_the_inventory():
    from ansible.errors import AnsibleFilterError

    from ansible_collections.raygate.cluster.plugins.filter import gate as gate_filter

    hostvars = {"n1": {"raygate_gate_status": "checked", "raygate_gpu_health": {"healthy": True}}}
    with pytest.raises(AnsibleFilterError, match="pair partner 'ghost'"):
        gate_filter.gate_pairs(["n1"], hostvars, partner="ghost", answers=ANSWERS)
    assert gate_filter.gate_pairs(["n1"], hostvars, answers=ANSWERS)["hosts"] == ["n1"]
    with pytest.raises(AnsibleFilterError, match="raygate_num_gpus must be a whole number"):
        gate_filter.gate_decision("eight")


def test_step_result_reads_both_shapes_and_a_missing_answer_as_skipped():
    from ansible_collections.raygate.cluster.plugins.filter.steps import step_result

    alone = {"changed": True, "pid": 4242}
    together = {"changed": True, "step_results": {"ray_node": {"changed": False, "pid": 7}, "nccl_env": alone}}
    assert step_result(alone, "ray_node") == alone
    assert step_result(together, "ray_node") == {"changed": False, "pid": 7}
    assert step_result(together, "nccl_env") is alone
    # A node_steps call that did not run this step: its own answer, as the role read it before.
    assert step_result(together, "ray_install") is together
    assert step_result(None, "ray_firewall") == {"skipped": True}
    skipped_task = {"skipped": True, "changed": False, "skip_reason": "Conditional result was False"}
    assert step_result(skipped_task, "ray_install") is skipped_task
    with pytest.raises(AnsibleFilterError, match="unknown step 'ray_nod'"):
        step_result(alone, "ray_nod")
