"""ray_node and ray_firewall take the port plan the controller computed, as data (issue 26).

The plan here moves every port by 1000, so a port from the defaults or from `ports`/`port_offset`
cannot pass for one of the given plan's.
"""

import socket

import pytest
from harness import run_case
from test_ray_node import base_args, bind_outside_ephemeral_range

from ansible_collections.raygate.cluster.plugins.module_utils.net import port_plan as pp
from ansible_collections.raygate.cluster.plugins.module_utils.node import procs as ray_procs
from ansible_collections.raygate.cluster.plugins.modules import ray_firewall, ray_node

PLAN = pp.build_plan({}, offset=1000)


@pytest.fixture(autouse=True)
def no_ray_here(monkeypatch):
    # The host's /proc also shows Ray running inside sandbox nodes: never look at it here.
    monkeypatch.setattr(ray_procs, "ray_processes", lambda **kwargs: [])


def node_args(tmp, **over):
    return base_args(tmp, **dict({"plan": PLAN}, **over))


def test_ray_node_uses_the_plan_it_is_given(tmp_path, monkeypatch):
    case = {"args": node_args(tmp_path), "check_mode": True, "expect": {"changed": True}}
    result = run_case(case, ray_node.main, tmp_path, monkeypatch)
    assert result["gcs_address"] == "198.18.0.11:7379"
    assert result["dashboard_url"] == "http://198.18.0.11:9265"


def test_ray_node_checks_the_given_plans_ports_on_the_node(tmp_path, monkeypatch):
    # What only the node can see is still checked: a port of the given plan already taken here.
    with socket.socket() as sock:
        port = bind_outside_ephemeral_range(sock)
        plan = dict(PLAN, gcs=port)
        case = {"args": node_args(tmp_path, plan=plan), "check_mode": True, "expect": {"failed": True}}
        result = run_case(case, ray_node.main, tmp_path, monkeypatch)
    assert "port %d is already bound by" % port in result["msg"]
    assert result["busy_ports"] == [port]


def test_ray_node_refuses_a_plan_and_overrides_together(tmp_path, monkeypatch):
    args = node_args(tmp_path, ports={"dashboard": 8265})
    expect = {"failed": True, "msg_contains": ["plan and ports/port_offset were both given"]}
    run_case({"args": args, "check_mode": True, "expect": expect}, ray_node.main, tmp_path, monkeypatch)


def test_ray_node_refuses_a_partial_plan_naming_the_key(tmp_path, monkeypatch):
    plan = {key: port for key, port in PLAN.items() if key != "object_manager"}
    expect = {"failed": True, "msg_contains": ["invalid port plan on this node", "ports.object_manager is missing"]}
    run_case({"args": node_args(tmp_path, plan=plan), "expect": expect}, ray_node.main, tmp_path, monkeypatch)


def test_ray_firewall_opens_the_ports_of_the_plan_it_is_given(tmp_path, monkeypatch):
    nft = "/usr/sbin/nft"
    case = {
        "which": {"nft": nft},
        "args": {
            "role": "worker",
            "sources": ["198.18.0.11", "198.18.0.12"],
            "rules_file": "%s/firewall.nft" % tmp_path,
            "plan": PLAN,
        },
        "commands": [
            {"cmd": [nft, "list", "table", "inet", "raygate"], "rc": 1, "err": "Error: No such file or directory\n"},
            {
                "cmd": [nft, "-f", "-"],
                "data_contains": ["ip saddr @cluster4 tcp dport {{ 9076, 9077, 9266, 9267, 9268, 9269, 11002-11999 }}"],
            },
        ],
        "expect": {"changed": True, "backend": "nftables"},
    }
    result = run_case(case, ray_firewall.main, tmp_path, monkeypatch)
    assert [entry["port"] for entry in result["ports"]] == [
        "9076",
        "9077",
        "9266",
        "9267",
        "9268",
        "9269",
        "11002-11999",
    ]
