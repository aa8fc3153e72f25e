"""Unit tests for the Prometheus file_sd targets (plugins/plugin_utils/file_sd.py) and its filter."""

import json

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.raygate.cluster.plugins.filter.prometheus import prometheus_file_sd
from ansible_collections.raygate.cluster.plugins.module_utils.net import port_plan as pp
from ansible_collections.raygate.cluster.plugins.plugin_utils import file_sd

PLAN = pp.build_plan({}, 0)
NODES = [{"name": "gpu-a", "ip": "10.0.0.1"}, {"name": "gpu-b", "ip": "fd00::2"}]


def by_job(groups, job):
    return [(g["labels"]["host"], g["labels"]["role"], g["targets"]) for g in groups if g["labels"]["job"] == job]


def test_every_node_gets_its_metrics_exporter_with_its_labels():
    groups = file_sd.file_sd_targets(NODES, "gpu-a", PLAN, "prod")
    assert by_job(groups, "raygate-ray") == [
        ("gpu-a", "head", ["10.0.0.1:8269"]),
        ("gpu-b", "worker", ["[fd00::2]:8269"]),
    ]
    assert all(g["labels"]["raygate_cluster"] == "prod" for g in groups)
    assert all(set(g["labels"]) == {"job", "raygate_cluster", "host", "role"} for g in groups)


def test_only_the_head_gets_the_dashboard_and_autoscaler_metric_ports():
    groups = file_sd.file_sd_targets(NODES, "gpu-b", pp.build_plan({}, 100), "c2")
    assert by_job(groups, "raygate-ray-head") == [("gpu-b", "head", ["[fd00::2]:8371", "[fd00::2]:8370"])]


def test_node_exporter_per_node_and_none_with_port_zero():
    groups = file_sd.file_sd_targets(NODES, "gpu-a", PLAN, "prod", node_exporter_port=9101)
    assert by_job(groups, "raygate-node") == [
        ("gpu-a", "head", ["10.0.0.1:9101"]),
        ("gpu-b", "worker", ["[fd00::2]:9101"]),
    ]
    assert by_job(file_sd.file_sd_targets(NODES, "gpu-a", PLAN, "prod", node_exporter_port=0), "raygate-node") == []


def test_the_list_is_what_file_sd_reads_and_stable():
    first = json.dumps(file_sd.file_sd_targets(NODES, "gpu-a", PLAN, "prod"), sort_keys=True)
    again = json.dumps(file_sd.file_sd_targets(NODES, "gpu-a", PLAN, "prod"), sort_keys=True)
    assert first == again
    for group in json.loads(first):
        assert isinstance(group["targets"], list) and all(isinstance(v, str) for v in group["labels"].values())


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"head": "gpu-z"}, "the head 'gpu-z' is not one of the nodes (gpu-a, gpu-b)"),
        ({"plan": {}}, "the port plan's metrics_export is None"),
        ({"plan": dict(PLAN, dashboard_metric="x")}, "dashboard_metric is 'x'"),
        ({"node_exporter_port": 70000}, "node_exporter_port: 70000 is not a port"),
        ({"nodes": [{"name": "gpu-a", "ip": ""}]}, "node 'gpu-a' has no address"),
    ],
)
def test_bad_input_is_refused_naming_the_value(kwargs, needle):
    args = dict(nodes=NODES, head="gpu-a", plan=PLAN, cluster="prod", node_exporter_port=9100)
    args.update(kwargs)
    with pytest.raises(file_sd.FileSdError) as exc:
        file_sd.file_sd_targets(**args)
    assert needle in str(exc.value)


def test_the_filter_takes_a_string_port_and_names_itself_on_errors():
    groups = prometheus_file_sd(NODES, "gpu-a", PLAN, "prod", "9102")
    assert by_job(groups, "raygate-node")[0][2] == ["10.0.0.1:9102"]
    with pytest.raises(AnsibleFilterError, match="prometheus_file_sd: the head 'nope'"):
        prometheus_file_sd(NODES, "nope", PLAN, "prod")
