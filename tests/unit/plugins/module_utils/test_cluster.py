from ansible_collections.raygate.cluster.plugins.module_utils.node.cluster import node_rows, summarize, waiting_message


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
