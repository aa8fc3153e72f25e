"""The validate_inventory action: arguments validated as documented, values read from hostvars, check mode."""

import pytest
from action_harness import plugin_for
from ansible.errors import AnsibleActionFail, AnsibleError

from ansible_collections.raygate.cluster.plugins.action import validate_inventory as action

DEFAULTS = {
    "ray_version": "2.60.0",
    "ray_extras": ["default"],
    "auth": True,
    "ports": {},
    "port_offset": 0,
    "min_worker_ports": 64,
    "python_version_match_level": "patch",
}


def hostvars():
    node = {"raygate_num_cpus": 2, "raygate_num_gpus": 8, "raygate_memory": 2 << 30}
    return {
        "node1": dict(node, ansible_host="198.18.0.11"),
        "node2": dict(node, raygate_node_ip="198.18.0.12", ansible_host="192.0.2.12"),
    }


def run_action(args, groups=None, check_mode=False):
    plugin = plugin_for(action, "raygate.cluster.validate_inventory", args, check_mode)
    groups = groups if groups is not None else {"ray_head": ["node1"], "ray_workers": ["node2"]}
    return plugin.run(task_vars={"groups": groups, "hostvars": hostvars()})


@pytest.mark.parametrize("check_mode", [False, True])
def test_a_valid_cluster_with_the_documented_defaults(check_mode):
    res = run_action({"defaults": DEFAULTS}, check_mode=check_mode)
    assert res["errors"] == [] and not res.get("failed") and res["changed"] is False
    assert res["cluster"]["head"] == "node1" and res["cluster"]["workers"] == ["node2"]
    assert res["cluster"]["nodes"] == [{"name": "node1", "ip": "198.18.0.11"}, {"name": "node2", "ip": "198.18.0.12"}]


def test_group_names_are_taken_from_the_arguments():
    groups = {"heads": ["node1"], "gpus": ["node2"]}
    res = run_action({"head_group": "heads", "worker_group": "gpus", "defaults": DEFAULTS}, groups)
    assert res["errors"] == []
    res = run_action({"defaults": DEFAULTS}, groups)  # the documented default groups are empty here
    assert res["failed"] is True and "'ray_head' must hold exactly one host" in res["msg"]


@pytest.mark.parametrize("check_mode", [False, True])
def test_problems_fail_the_task_in_check_mode_too(check_mode):
    res = run_action({"defaults": dict(DEFAULTS, ray_version="2.60")}, check_mode=check_mode)
    assert res["failed"] is True and "raygate_ray_version='2.60'" in res["msg"]


def test_defaults_left_out_mean_none():
    res = run_action({})
    assert res["failed"] is True and "raygate_ray_version=None" in res["msg"]


@pytest.mark.parametrize(
    "args,needle",
    [
        ({"defaults": ["ray_version"]}, "'defaults' is of type .*list.* and we were unable to convert to dict"),
        # A dict option with a default refuses null, as a module's would.
        ({"defaults": None}, "argument 'defaults' is of type .*NoneType.* and we were unable to convert to dict"),
        ({"head_grup": "ray_head"}, "Unsupported parameters .* head_grup"),
    ],
)
@pytest.mark.parametrize("check_mode", [False, True])
def test_a_bad_argument_fails_with_the_validators_message(args, needle, check_mode):
    with pytest.raises(AnsibleActionFail, match=needle):
        run_action(args, check_mode=check_mode)


def test_an_unknown_default_is_named():
    with pytest.raises(AnsibleError, match="unknown defaults \\['ray_versoin'\\]"):
        run_action({"defaults": {"ray_versoin": "2.60.0"}})


def hostvars_without_amounts():
    return {
        h: {k: v for k, v in hv.items() if k not in ("raygate_num_cpus", "raygate_memory")}
        for h, hv in hostvars().items()
    }


def run_without_amounts(args):
    plugin = plugin_for(action, "raygate.cluster.validate_inventory", args, False)
    groups = {"ray_head": ["node1"], "ray_workers": ["node2"]}
    return plugin.run(task_vars={"groups": groups, "hostvars": hostvars_without_amounts()})


def test_purpose_gate_needs_no_cpu_or_memory_amounts():
    res = run_without_amounts({"defaults": DEFAULTS, "purpose": "gate"})
    assert res["errors"] == [] and not res.get("failed")
    assert res["cluster"]["gpus"] == 16


def test_purpose_defaults_to_a_cluster_that_needs_them():
    res = run_without_amounts({"defaults": DEFAULTS})
    assert res["failed"] is True
    assert "host node1: raygate_num_cpus=None must be an integer >= 1" in res["msg"]
    assert "host node2: raygate_memory=None must be an integer >= 1" in res["msg"]


def test_an_unknown_purpose_fails_with_the_validators_message():
    with pytest.raises(AnsibleActionFail, match="value of purpose must be one of: cluster, gate, got: ray"):
        run_action({"defaults": DEFAULTS, "purpose": "ray"})


def test_a_cluster_run_as_root_warns_once_naming_the_hosts():
    res = run_action({"defaults": dict(DEFAULTS, user="ray")})
    assert res["cluster"]["runs_as_root"] == [] and "warnings" not in res
    res = run_action({"defaults": dict(DEFAULTS, user="root")})
    assert res["errors"] == [] and res["cluster"]["runs_as_root"] == ["node1", "node2"]
    (warning,) = res["warnings"]
    assert "Ray runs as root on node1, node2 (raygate_user: root)" in warning
    # health.yml starts no Ray: nothing to warn about.
    res = run_action({"defaults": dict(DEFAULTS, user="root"), "purpose": "gate"})
    assert "warnings" not in res


def test_a_bad_account_name_fails_naming_host_and_value():
    res = run_action({"defaults": dict(DEFAULTS, user="Ray Team")})
    assert res["failed"] is True and "host node1: raygate_user='Ray Team' is not a user name" in res["msg"]


def test_a_variable_the_role_spec_refuses_fails_before_any_host_is_contacted():
    plugin = plugin_for(action, "raygate.cluster.validate_inventory", {"defaults": DEFAULTS}, False)
    bad = hostvars()
    bad["node2"]["raygate_nccl_fabric"] = "ethernet"
    res = plugin.run(task_vars={"groups": {"ray_head": ["node1"], "ray_workers": ["node2"]}, "hostvars": bad})
    assert res["failed"] is True
    wanted = (
        '- node2: raygate_nccl_fabric is set to "ethernet": '
        "value of raygate_nccl_fabric must be one of: auto, efa, ib, roce, none, got: ethernet"
    )
    assert wanted in res["msg"]
