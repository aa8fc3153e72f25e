import pytest

from ansible_collections.raygate.cluster.plugins.plugin_utils import inventory
from ansible_collections.raygate.cluster.plugins.plugin_utils.inventory import validate


def host(ip, **over):
    v = {
        "ray_version": "2.60.0",
        "ray_extras": ["default"],
        "auth": True,
        "ports": {},
        "port_offset": 0,
        "min_worker_ports": 64,
        "num_cpus": 2,
        "num_gpus": 8,
        "memory": 2 << 30,
        "python_version_match_level": "patch",
        "node_ip": ip,
    }
    v.update(over)
    return v


def cluster(**per_host):
    hv = {"node1": host("198.18.0.11"), "node2": host("198.18.0.12"), "node3": host("198.18.0.13")}
    for name, over in per_host.items():
        hv[name].update(over)
    return hv


def run(hv, heads=("node1",), workers=("node2", "node3")):
    return validate("ray_head", list(heads), list(workers), hv)


def test_valid_cluster_summary():
    errors, summary = run(cluster())
    assert errors == []
    assert summary["head"] == "node1" and summary["workers"] == ["node2", "node3"]
    assert summary["gpus"] == 24
    assert summary["nodes"][0] == {"name": "node1", "ip": "198.18.0.11"}
    assert summary["plan"]["gcs"] == 6379


@pytest.mark.parametrize(
    "heads,workers,needle",
    [
        ((), ("node2", "node3"), "found none"),
        (("node1", "node2"), ("node3",), "found node1, node2"),
    ],
)
def test_head_count(heads, workers, needle):
    errors = run(cluster(), heads, workers)[0]
    assert any("exactly one host" in e and needle in e for e in errors), errors


def test_host_in_both_groups():
    errors = run(cluster(), ("node1",), ("node1", "node2"))[0]
    assert any("node1 is in both" in e for e in errors)


def test_mixed_versions_named_per_host():
    errors = run(cluster(node3={"ray_version": "2.59.0"}))[0]
    (err,) = [e for e in errors if "raygate_ray_version differs" in e]
    assert "'2.59.0' on node3" in err and "'2.60.0' on node1, node2" in err


def test_inexact_version():
    errors = run(cluster(node2={"ray_version": "2.60"}))[0]
    assert any(e.startswith("host node2: raygate_ray_version='2.60'") for e in errors)


def test_auth_needs_252():
    errors = run(cluster(**{n: {"ray_version": "2.51.2"} for n in ("node1", "node2", "node3")}))[0]
    assert any("raygate_auth: false" in e and "2.51.2" in e for e in errors)
    hv = cluster(**{n: {"ray_version": "2.51.2", "auth": False} for n in ("node1", "node2", "node3")})
    assert run(hv)[0] == []


def test_overlapping_ports_stop_with_host_value_and_fix():
    errors = run(cluster(node2={"ports": {"dashboard": 6379}}))[0]
    assert any(e.startswith("host node2:") and "6379" in e for e in errors)
    assert any("port plan" in e and "differs" in e for e in errors)


def test_unknown_port_key_did_you_mean():
    errors = run(cluster(node1={"ports": {"dashbaord": 9000}}))[0]
    assert any("dashbaord" in e and "dashboard" in e for e in errors)


def test_out_of_range_port_and_small_worker_range():
    errors = run(cluster(node1={"ports": {"gcs": 80, "min_worker": 10002, "max_worker": 10010}}))[0]
    text = "\n".join(errors)
    assert "80" in text and "1024" in text
    assert "min_worker" in text


def test_duplicate_node_ip_and_bad_ip():
    errors = run(cluster(node3={"node_ip": "198.18.0.12"}, node1={"node_ip": "head.example"}))[0]
    assert any("share the node address 198.18.0.12" in e for e in errors)
    assert any("host node1: node address 'head.example'" in e for e in errors)


def test_resources_must_be_explicit():
    errors = run(cluster(node2={"num_cpus": None, "memory": "lots"}))[0]
    assert any("raygate_num_cpus=None" in e for e in errors)
    assert any("raygate_memory='lots'" in e for e in errors)


def test_default_extra_required():
    errors = run(cluster(node1={"ray_extras": []}))[0]
    assert any("lacks 'default'" in e for e in errors)


def test_the_pair_partner_must_be_a_member():
    assert inventory.check_pair_partner("", ["h", "w1"]) == []
    assert inventory.check_pair_partner("w1", ["h", "w1"]) == []
    [error] = inventory.check_pair_partner("w9", ["h", "w1"])
    assert "raygate_health_pair_partner is w9" in error and "(h, w1)" in error


# ---- purpose: the health gate alone needs no Ray resource amounts (issue 29, item 5) ----


def without_amounts(hv, *keys):
    for v in hv.values():
        for key in keys:
            v.pop(key)
    return hv


def test_the_gate_accepts_hosts_without_cpu_and_memory_amounts():
    hv = without_amounts(cluster(), "num_cpus", "memory")
    errors, summary = validate("ray_head", ["node1"], ["node2", "node3"], hv, purpose="gate")
    assert errors == []
    assert summary["gpus"] == 24 and summary["plan"]["gcs"] == 6379


def test_a_cluster_still_needs_cpu_and_memory_amounts():
    hv = without_amounts(cluster(), "num_cpus", "memory")
    for errors in (run(hv)[0], validate("ray_head", ["node1"], ["node2", "node3"], hv, purpose="cluster")[0]):
        for host in ("node1", "node2", "node3"):
            assert any(e.startswith("host %s: raygate_num_cpus=None must be" % host) for e in errors), errors
            assert any(e.startswith("host %s: raygate_memory=None must be" % host) for e in errors), errors


@pytest.mark.parametrize(
    "over,needle",
    [
        ({"num_gpus": "eight"}, "host node2: raygate_num_gpus='eight' must be an integer >= 0"),
        ({"num_gpus": None}, "host node2: raygate_num_gpus=None must be an integer >= 0"),
        ({"num_cpus": 0}, "host node2: raygate_num_cpus=0 must be an integer >= 1"),
        ({"memory": True}, "host node2: raygate_memory=True must be an integer >= 1"),
        ({"ray_extras": []}, "host node2: raygate_ray_extras=[] lacks 'default'"),
    ],
)
def test_the_gate_still_refuses_bad_values(over, needle):
    hv = without_amounts(cluster(), "num_cpus", "memory")
    hv["node2"].update(over)
    errors = validate("ray_head", ["node1"], ["node2", "node3"], hv, purpose="gate")[0]
    assert any(needle in e for e in errors), errors
    assert len(errors) == 1, errors


def test_an_unknown_purpose_is_refused():
    with pytest.raises(ValueError, match="purpose must be one of cluster, gate, not 'ray'"):
        validate("ray_head", ["node1"], ["node2", "node3"], cluster(), purpose="ray")
