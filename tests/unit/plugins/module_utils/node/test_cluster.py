from ansible_collections.raygate.cluster.plugins.module_utils.node.cluster import (
    is_member,
    node_rows,
    summarize,
    waiting_message,
)


def api(*rows):
    return {"result": True, "msg": "", "data": {"result": {"total": len(rows), "result": list(rows)}}}


def row(ip, state="ALIVE", gpus=8, head=False):
    return {
        "node_id": "id-" + ip,
        "node_ip": ip,
        "node_name": ip,
        "is_head_node": head,
        "state": state,
        "resources_total": {"CPU": 2.0, "GPU": float(gpus)},
        "labels": {"ray.io/node-id": "id-" + ip},
    }


EXPECTED = [{"name": "node1", "ip": "198.18.0.11"}, {"name": "node2", "ip": "198.18.0.12"}]


def test_complete_cluster():
    s = summarize(api(row("198.18.0.12"), row("198.18.0.11", head=True)), EXPECTED, 2, 16)
    assert s["complete"] is True
    assert s["alive_nodes"] == 2 and s["total_gpus"] == 16.0 and s["total_cpus"] == 4.0
    assert [n["ip"] for n in s["nodes"]] == ["198.18.0.11", "198.18.0.12"]  # head first
    assert s["missing"] == []


def test_dead_node_is_missing_and_named():
    s = summarize(api(row("198.18.0.11", head=True), row("198.18.0.12", state="DEAD")), EXPECTED, 2, 16)
    assert s["complete"] is False
    assert s["missing"] == ["node2"]
    assert waiting_message(s) == "1/2 nodes, 8/16 GPUs alive; never joined: node2"


def test_gpu_target_not_met():
    s = summarize(api(row("198.18.0.11", gpus=8, head=True), row("198.18.0.12", gpus=4)), EXPECTED, 2, 16)
    assert s["complete"] is False and s["missing"] == []


def test_unreachable():
    s = summarize(None, EXPECTED, 2, 16)
    assert s["reachable"] is False and s["complete"] is False
    assert waiting_message(s) == "the head's state API does not answer yet"


def test_node_rows_tolerates_junk():
    assert node_rows(None) == []
    assert node_rows({"data": {"result": "oops"}}) == []


def test_a_member_is_alive_with_the_gpus_it_should_offer():
    rows = api(row("198.18.0.11", head=True), row("198.18.0.12", gpus=4), row("198.18.0.13", state="DEAD"))
    s = summarize(rows, EXPECTED, 2, 16)
    assert s["alive_gpus"] == {"198.18.0.11": 8.0, "198.18.0.12": 4.0}
    assert is_member(s, "198.18.0.11", 8) and is_member(s, "198.18.0.11", "8")
    assert not is_member(s, "198.18.0.12", 8)  # listed with fewer GPUs: started again
    assert not is_member(s, "198.18.0.13", 8)  # dead
    assert not is_member(s, "198.18.0.14", 0)  # not listed at all
    assert not is_member(summarize(None, EXPECTED), "198.18.0.11", 8)  # the head did not answer


def test_the_ray_member_filter_says_what_is_wrong_with_a_gpu_count():
    import pytest
    from ansible.errors import AnsibleFilterError

    from ansible_collections.raygate.cluster.plugins.filter.cluster import ray_member

    s = summarize(api(row("198.18.0.11", head=True)), EXPECTED)
    assert ray_member(s, "198.18.0.11", 8.0) is True
    with pytest.raises(AnsibleFilterError, match="GPU count must be a number"):
        ray_member(s, "198.18.0.11", "eight")
