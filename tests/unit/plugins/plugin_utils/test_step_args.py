"""Unit tests for each role step's arguments (plugins/plugin_utils/step_args.py), from plain values:
the role's defaults with their few templates resolved, and what a run would have set."""

import os

import pytest
import yaml

from ansible_collections.raygate.cluster.plugins.module_utils.net import port_plan as pp
from ansible_collections.raygate.cluster.plugins.plugin_utils import step_args as sa

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")
PLAN = pp.build_plan({}, offset=0)


def role_values(**more):
    """defaults/main.yml, templates resolved as a run of h1 (the head of h1, w1, w2) would, plus ``more``."""
    with open(os.path.join(ROOT, "roles", "_common", "defaults", "main.yml")) as fh:
        values = yaml.safe_load(fh)
    values.update(
        raygate_firewall_boot=True,
        raygate_health_require_gdr=values["raygate_nccl_require_gdr"],
        raygate_health_sysfs_root=values["raygate_nccl_sysfs_root"],
        raygate_tls_dir="/inv/.raygate_tls",
        inventory_hostname="h1",
        groups={"all": ["h1", "w1", "w2"], "ray_head": ["h1"], "ray_workers": ["w1", "w2"]},
        hostvars={"localhost": {}, "h1": {"ansible_host": "10.0.0.1"}, "w1": {}, "w2": {}},
        raygate_node_role="head",
        raygate_node_address="10.0.0.1",
        raygate_head_address="10.0.0.1",
        raygate_head_host="h1",
        raygate_plan=PLAN,
        raygate_node_tls_needed=False,
        raygate_node_tls_base="/inv/.raygate_tls/nodes/h1",
        raygate_tls_ca_path="/inv/.raygate_tls/ca.crt",
        ansible_run_tags=["all"],
        ansible_skip_tags=[],
        ansible_play_hosts=["h1", "w1", "w2"],
        ansible_play_hosts_all=["h1", "w1", "w2"],
        raygate_answers={},
        _raygate_node_state="started",
        _raygate_env_state="present",
        _raygate_firewall_state="present",
        _raygate_firewall_host="h1",
    )
    values.update(more)
    # The derived dicts the steps read, built as the lookup builds them (unless a test gives its own).
    for name, step in (("raygate_gcs", "gcs"), ("raygate_dashboard", "dashboard")):
        if name not in more:
            values[name] = sa.from_dict(step, values)
    return values


def no_read(path):
    raise AssertionError("read %s: no file is needed here" % path)


def test_install_leaves_out_the_empty_options_and_a_root_service_user():
    args = sa.from_dict("ray_install", role_values(raygate_user="root"))
    assert args["version"] and args["set_current"] is True
    assert not {"wheelhouse", "index_url", "requirements", "service_user"} & set(args)
    args = sa.from_dict(
        "ray_install", role_values(raygate_wheelhouse="/srv/w", raygate_user="ray", _raygate_install_set_current=False)
    )
    assert (args["wheelhouse"], args["service_user"], args["set_current"]) == ("/srv/w", "ray", False)


def test_node_args_convert_and_leave_out_as_the_jinja_did():
    args = sa.from_dict("ray_node", role_values(raygate_start_timeout="30", raygate_object_store_memory="0"), no_read)
    assert args["start_timeout"] == 30 and args["venv"] == "/opt/raygate/current"
    assert args["plan"] == PLAN and args["dashboard_proxy"] is True and args["head_wait"] == "gcs"
    for key in ("num_cpus", "num_gpus", "memory", "object_store_memory", "temp_dir", "member", "tls_cert"):
        assert key not in args, key
    assert "redis_address" not in args and "gcs_reconnect_timeout" not in args and args["gcs_ft"] == "none"
    args = sa.from_dict("ray_node", role_values(raygate_num_gpus=8, raygate_object_store_memory=10**9), no_read)
    assert (args["num_gpus"], args["object_store_memory"]) == (8, 10**9)


def test_only_a_start_with_tls_reads_the_controllers_files():
    read = []
    values = role_values(raygate_node_tls_needed=True)
    args = sa.from_dict("ray_node", values, lambda path: read.append(path) or "pem:" + path)
    assert read == ["/inv/.raygate_tls/ca.crt", "/inv/.raygate_tls/nodes/h1.crt"]
    assert args["tls_cert"] == "pem:/inv/.raygate_tls/nodes/h1.crt"
    sa.from_dict("ray_node", role_values(_raygate_node_state="stopped"), no_read)


def test_redis_options_only_with_redis_and_the_namespace_only_for_a_start():
    values = role_values(raygate_gcs_ft="redis", raygate_tls=True, raygate_gcs_namespace_prefix="raygate-c1")
    args = sa.from_dict("ray_node", values, no_read)
    assert (args["redis_address"], args["redis_tls"], args["storage_namespace"]) == (
        "10.0.0.1:%d" % PLAN["gcs_redis"],
        True,
        "raygate-c1",
    )
    assert args["redis_username"] == values["raygate_gcs_managed_user"]
    assert isinstance(args["gcs_reconnect_timeout"], int)
    # Not needed (a stop): the namespace (its file) is not read at all.
    values = role_values(raygate_gcs_ft="redis", _raygate_node_state="stopped")
    assert "raygate_gcs_namespace_prefix" not in values
    assert "storage_namespace" not in sa.from_dict("ray_node", values, no_read)


def test_the_gcs_values_of_a_managed_and_an_external_redis():
    managed = role_values(raygate_gcs_ft="redis", raygate_tls=False)["raygate_gcs"]
    assert managed["managed"] and (managed["store_host"], managed["redis_tls"]) == ("h1", False)
    assert managed["conf"].endswith("/redis.conf") and managed["unit_file"].startswith("/etc/systemd/system/")
    # The first host of the store group, by its own address; IPv6 in brackets.
    store = role_values(
        raygate_gcs_ft="redis",
        groups={"ray_gcs_store": ["w1"], "ray_head": ["h1"]},
        hostvars={"localhost": {}, "w1": {"ansible_host": "fd00::2"}},
    )["raygate_gcs"]
    assert (store["store_host"], store["endpoint"]) == ("w1", "[fd00::2]:%d" % PLAN["gcs_redis"])
    external = role_values(raygate_gcs_ft="redis", raygate_gcs_redis_address="rediss://r.example:6379")["raygate_gcs"]
    assert (external["managed"], external["endpoint"], external["redis_tls"]) == (
        False,
        "rediss://r.example:6379",
        True,
    )
    assert external["username"] == role_values()["raygate_gcs_redis_username"]
    # A worker never needs the password, nor a head that does not start.
    worker = role_values(raygate_gcs_ft="redis", raygate_node_role="worker")["raygate_gcs"]
    assert worker["password_needed"] is False and managed["password_needed"] is True


def test_the_dashboard_behind_the_proxy_and_without_it():
    proxied = role_values(raygate_dashboard_https=True, raygate_tls=True)["raygate_dashboard"]
    port = PLAN["dashboard"]
    assert proxied == {"proxy": True, "url": "https://10.0.0.1:%d" % port, "api_url": "http://127.0.0.1:%d" % port}
    plain = role_values(raygate_dashboard_https=True, raygate_tls=False, raygate_dashboard_tls_cert="")
    assert plain["raygate_dashboard"] == {
        "proxy": False,
        "url": "http://10.0.0.1:%d" % port,
        "api_url": "http://10.0.0.1:%d" % port,
    }


def test_the_removal_names_each_host_once_with_its_validated_address():
    nodes = [{"name": "w1", "ip": "10.0.0.2"}, {"name": "w2", "ip": "10.0.0.3"}]
    values = role_values(
        raygate_remove=" w2, ,w1,w2", hostvars={"localhost": {"raygate_validated": {"cluster": {"nodes": nodes}}}}
    )
    assert sa.from_dict("removal", values) == {"hosts": ["w2", "w1"], "addresses": ["10.0.0.2", "10.0.0.3"]}
    assert sa.from_dict("removal", role_values(raygate_remove=["w1"])) == {"hosts": ["w1"], "addresses": []}


REPORT = {"checked_at": 1785283200, "healthy": ["h1"], "unhealthy": {"w3": ["xid"]}}


@pytest.mark.parametrize(
    "more,expected",
    [
        ({}, None),  # no gate now: left out, the node keeps its labels
        ({"raygate_health": REPORT, "raygate_gate_status": "checked"}, "pass"),
        ({"raygate_health": REPORT, "raygate_gate_status": "checked", "inventory_hostname": "w3"}, {}),
        ({"raygate_health": REPORT, "raygate_gate_status": "checked", "raygate_health_labels": False}, {}),
        ({"_raygate_node_status_labels": {"a": "b"}}, {"a": "b"}),
    ],
)
def test_status_labels(more, expected):
    args = sa.from_dict("ray_node", role_values(**more), no_read)
    if expected is None:
        assert "status_labels" not in args
    elif expected == "pass":
        assert args["status_labels"]["raygate.io/health"] == "pass"
    else:
        assert args["status_labels"] == expected


def test_firewall_of_this_host_and_of_a_member_outside_the_run():
    validated = {"cluster": {"nodes": [{"name": n, "ip": "10.0.0.%d" % i} for i, n in enumerate(["h1", "w1"], 1)]}}
    member = {"raygate_firewall_table": "t1", "raygate_supervisor": "runit", "raygate_port_offset": "100"}
    values = role_values(hostvars={"localhost": {"raygate_validated": validated}, "w1": member})
    own = sa.from_dict("ray_firewall", values)
    assert (own["role"], own["table"], own["boot"], own["sources"]) == (
        "head",
        "raygate",
        True,
        ["10.0.0.1", "10.0.0.2"],
    )
    assert "zone" not in own and own["plan"] == PLAN
    values.update(_raygate_firewall_host="w1", _raygate_firewall_exclude=["10.0.0.2"])
    fw = sa.from_dict("ray_firewall", values)
    assert (fw["role"], fw["table"], fw["boot"], fw["sources"]) == ("worker", "t1", False, ["10.0.0.1"])
    # Not validated: the member's own offset makes its plan.
    assert fw["plan"] == pp.build_plan({}, offset=100)


def test_the_managed_redis_port_is_opened_on_its_host_to_the_head_only():
    fw = sa.from_dict("ray_firewall", role_values(raygate_gcs_ft="redis"))
    assert (fw["gcs_store"], fw["gcs_store_sources"]) == (True, ["10.0.0.1"])
    groups = {"ray_gcs_store": ["w1"], "ray_head": ["h1"]}
    fw = sa.from_dict("ray_firewall", role_values(raygate_gcs_ft="redis", groups=groups))
    assert (fw["gcs_store"], fw["gcs_store_sources"]) == (False, [])


@pytest.mark.parametrize(
    "run,skip,done,expected",
    [
        (["all"], [], {}, (True, True, True)),
        (["all"], [], {"install": True, "env": True}, (False, False, True)),
        (["install"], [], {}, (True, False, False)),
        (["nccl"], [], {}, (False, True, True)),
        (["tagged"], ["firewall"], {}, (True, False, False)),
        (["all"], ["install"], {}, (False, True, True)),
        (["health"], [], {}, (False, False, False)),
    ],
)
def test_configure_selects_each_step_as_its_own_tagged_task_would_be(run, skip, done, expected):
    values = role_values(ansible_run_tags=run, ansible_skip_tags=skip, _raygate_done=done)
    selected = sa.from_dict("configure", values)
    got = tuple(selected[s] for s in ("install", "env", "firewall"))
    assert got == expected


def test_configure_leaves_an_unmanaged_step_out():
    values = role_values(raygate_nccl_manage=False, raygate_firewall_manage="no")
    selected = sa.from_dict("configure", values)
    assert (selected["env"], selected["firewall"]) == (False, False)


def test_gate_options_leave_out_the_unset_ones():
    args = sa.from_dict("gpu_health", role_values())
    assert "driver_version" not in args and "expected_ports" not in args
    assert args["textfile_dir"] == "/var/lib/node_exporter/textfile_collector" and args["expected_gpus"] == 0
    args = sa.from_dict("gpu_health", role_values(raygate_health_driver_version="580", raygate_health_expected_ports=4))
    assert (args["driver_version"], args["expected_ports"]) == ("580", 4)
    single = sa.from_dict("nccl_single", role_values(raygate_health_nccl_min_busbw=10.5, raygate_num_gpus="8"))
    assert (single["mode"], single["gpus"], single["min_busbw"], single["env_file_optional"]) == (
        "single",
        8,
        10.5,
        True,
    )
    pair = sa.from_dict("nccl_pair", role_values())
    assert pair["mode"] == "pairs" and "min_busbw" not in pair and "fabric" not in pair


def test_health_report_names_the_hosts_that_left():
    values = role_values(ansible_play_hosts=["h1"], ansible_play_hosts_all=["h1", "w1"], raygate_answers={"x": "y"})
    args = sa.from_dict("health_report", values)
    assert (args["hosts"], args["left_hosts"], args["answers"]) == (["h1"], ["w1"], {"x": "y"})
    assert isinstance(args["min_healthy"], int) and isinstance(args["fail_on_warn"], bool)


def test_watch_settings_carry_the_redis_only_on_the_head_of_a_managed_one():
    assert sa.from_dict("watch_present", role_values())["settings"]["redis"] is None
    settings = sa.from_dict("watch_present", role_values(raygate_gcs_ft="redis"))["settings"]
    assert settings["redis"] == {"host": "10.0.0.1", "port": PLAN["gcs_redis"]}
    assert settings["slurm_node"] == "h1" and settings["env_files"][0] == "/etc/raygate/ray.env"


def test_the_plan_is_the_validated_one_else_this_hosts_own():
    assert sa.from_dict("plan", role_values(raygate_port_offset="10")) == pp.build_plan({}, offset=10)
    given = pp.build_plan({}, offset=20)
    values = role_values(hostvars={"localhost": {"raygate_validated": {"cluster": {"plan": given}}}})
    assert sa.from_dict("plan", values) == given


def test_every_step_reads_only_what_its_table_lists():
    values = role_values()
    for step in sa.STEPS:
        sa.from_dict(step, values, lambda path: "x")  # a name outside READS would fail here
    with pytest.raises(sa.StepArgsError, match="not in the variables"):
        sa.StepVariables("plan", values.__getitem__, values.__contains__)["raygate_user"]
    with pytest.raises(sa.StepArgsError, match="no step"):
        sa.from_dict("nope", values)


@pytest.mark.parametrize(
    "value,as_bool,as_int",
    [
        ("yes", True, 0),
        ("0", False, 0),
        ("1", True, 1),
        (2, False, 2),
        ("2.5", False, 2),
        (None, False, 0),
        (True, True, 1),
    ],
)
def test_conversions_are_jinjas(value, as_bool, as_int):
    assert (sa.as_bool(value), sa.as_int(value)) == (as_bool, as_int)
