"""The role's derived variables, templated by ansible-playbook itself (local connection, no node touched).

A throw-away role links the real defaults/ and vars/; its tasks only record values with set_fact.
Checks: raygate_dashboard.url comes from the port plan filter (the head's address, this host's
plan); firewall_member.yml gives a member outside the run the same options as its own run would.
"""

import json
import os
import sys

import pytest
import yaml
from role_probe import PLAYBOOK_BIN, ROLE, run_playbook, task_file

from ansible_collections.raygate.cluster.plugins.module_utils.net import port_plan as pp

with open(task_file("node.yml")) as _fh:
    NODE_CALL_ARGS = yaml.safe_load(_fh)[0]["raygate.cluster.ray_node"]
# summary.yml's file_sd targets, as written there (less the JSON it writes them as).
with open(task_file("summary.yml")) as _fh:
    (_FILE_SD,) = [t for t in yaml.safe_load(_fh) if "file_sd" in t["name"]]
    FILE_SD_TARGETS = _FILE_SD["ansible.builtin.copy"]["content"].replace("| to_nice_json ", "")

INVENTORY = {
    "all": {
        "vars": {
            "ansible_connection": "local",
            "ansible_python_interpreter": sys.executable,
            "raygate_ports": {"dashboard": 9000},
        },
        "children": {
            "ray_head": {
                "hosts": {
                    "h1": {
                        "raygate_node_ip": "10.0.0.1",
                        "ansible_host": "192.0.2.1",
                        "raygate_firewall_backend": "nftables",
                        "raygate_supervisor": "systemd",
                    }
                }
            },
            "ray_workers": {
                "hosts": {
                    "w1": {
                        "ansible_host": "10.0.0.2",
                        "raygate_firewall_table": "t1",
                        "raygate_firewall_zone": "z1",
                        "raygate_firewall_boot": False,
                        "raygate_supervisor": "systemd",
                        "raygate_prometheus_sources": ["192.0.2.50"],
                        "raygate_prometheus_node_exporter_port": "9101",
                    },
                    "w2": {
                        "ansible_host": "10.0.0.3",
                        "raygate_port_offset": "100",
                        "raygate_firewall_sources": ["10.9.0.0/16"],
                        "raygate_firewall_manage": False,
                    },
                    # The host that runs the members' task: nothing of its own.
                    "w3": {"ansible_host": "10.0.0.4"},
                }
            },
        },
    }
}
NODES = [{"name": "h1", "ip": "10.0.0.1"}, {"name": "w1", "ip": "10.0.0.2"}, {"name": "w2", "ip": "10.0.0.3"}]
# What gate.yml leaves: the report (health_report's answer, run_once), each node's gate status and
# gpu_health answer. h1 passed with a warning, w1 passed, w2 is a running member the gate did not
# check again (healthy all the same), w3 failed.
GATE_REPORT = {
    "checked_at": 1785283200,
    "healthy": ["h1", "w1", "w2"],
    "warned": {"h1": ["x: y"]},
    "unhealthy": {"w3": ["xid: Xid 79 on GPU 3"]},
}
GATE_STATUS = {"h1": "checked", "w1": "checked", "w2": "skipped", "w3": "checked"}


def member_task():
    """firewall_member.yml's task with its module swapped for set_fact: same vars, options and condition."""
    with open(task_file("firewall_member.yml")) as fh:
        (task,) = yaml.safe_load(fh)
    return {
        "ansible.builtin.set_fact": {
            "fw": task["module_defaults"]["raygate.cluster.ray_firewall"],
            "manage": "{{ %s }}" % task["when"],
        },
        "vars": task["vars"],
        "loop": ["h1", "w1", "w2"],
        "loop_control": {"loop_var": "_raygate_member"},
        "register": "members",
    }


def probe(tmp_path_factory, cluster):
    """Template the role's variables on every host, with ``cluster`` as validate_inventory's answer."""
    if not os.path.exists(PLAYBOOK_BIN):
        pytest.skip("ansible-playbook is not installed next to this Python")
    tmp = tmp_path_factory.mktemp("role_vars")
    # The cluster's token, where validate.yml would have made it (beside the inventory); no Redis files.
    (tmp / ".raygate_auth_token").write_text("probe-token\n")
    # The TLS material, where tls.yml would have made it (beside the inventory).
    (tmp / ".raygate_tls" / "nodes").mkdir(parents=True)
    (tmp / ".raygate_tls" / "ca.crt").write_text("probe-ca\n")
    for host in ("h1", "w1", "w2", "w3"):
        (tmp / ".raygate_tls" / "nodes" / ("%s.crt" % host)).write_text("probe-cert-%s\n" % host)
        (tmp / ".raygate_tls" / "nodes" / ("%s.key" % host)).write_text("probe-key-%s\n" % host)
    role = tmp / "roles" / "probe"
    (role / "tasks").mkdir(parents=True)
    for part in ("defaults", "vars"):
        os.symlink(os.path.abspath(os.path.join(ROLE, part)), role / part)
    own = [
        {
            "ansible.builtin.set_fact": {"raygate_validated": {"cluster": cluster}},
            "delegate_to": "localhost",
            "delegate_facts": True,
            "run_once": True,
        },
        {
            "ansible.builtin.set_fact": {
                "raygate_health": GATE_REPORT,
                "raygate_gpu_health": {"fingerprint_hash": "fp-{{ inventory_hostname }}"},
                "raygate_gate_status": "{{ %s[inventory_hostname] }}" % GATE_STATUS,
            },
        },
        {
            "ansible.builtin.set_fact": {"labels_off": "{{ raygate_node_args }}"},
            "vars": {"_raygate_node_state": "started", "raygate_health_labels": False},
        },
        {
            "ansible.builtin.set_fact": {
                "own": {
                    "node": "{{ raygate_node_args }}",
                    "labels_off": "{{ labels_off }}",
                    "url": "{{ raygate_dashboard.url }}",
                    "api_url": "{{ raygate_dashboard.api_url }}",
                    "plan": "{{ raygate_plan }}",
                    "fw": "{{ raygate_firewall_args }}",
                    "targets": FILE_SD_TARGETS.strip(),
                    "cluster": "{{ raygate_prometheus_cluster }}",
                    # node.yml's own arguments, as written there (secrets only where needed).
                    "call": NODE_CALL_ARGS,
                }
            },
            "vars": {"_raygate_firewall_state": "present", "_raygate_node_state": "started"},
        },
        {
            "ansible.builtin.copy": {
                "dest": "%s/own-{{ inventory_hostname }}.json" % tmp,
                "content": "{{ own | to_json }}",
            },
        },
    ]
    members = [
        member_task(),
        {
            "ansible.builtin.copy": {
                "dest": "%s/members.json" % tmp,
                "content": "{{ members.results | items2dict(key_name='_raygate_member', value_name='ansible_facts')"
                " | to_json }}",
            },
        },
    ]
    (role / "tasks" / "main.yml").write_text(yaml.safe_dump(own))
    (role / "tasks" / "members.yml").write_text(yaml.safe_dump(members))
    (tmp / "inventory.yml").write_text(yaml.safe_dump(INVENTORY))
    plays = [
        {"hosts": "all", "gather_facts": False, "roles": ["probe"]},
        {
            "hosts": "w3",
            "gather_facts": False,
            "tasks": [{"ansible.builtin.include_role": {"name": "probe", "tasks_from": "members"}}],
        },
    ]
    (tmp / "site.yml").write_text(yaml.safe_dump(plays))
    proc = run_playbook(tmp)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    own = {h: json.loads((tmp / ("own-%s.json" % h)).read_text()) for h in ("h1", "w1", "w2", "w3")}
    return own, json.loads((tmp / "members.json").read_text())


@pytest.fixture(scope="module")
def templated(tmp_path_factory):
    return probe(tmp_path_factory, {"nodes": NODES})


# The plan validate_inventory computed for the run: every port moved, so none can come from a default.
VALIDATED_PLAN = pp.build_plan({"dashboard": 9000}, offset=20)


@pytest.fixture(scope="module")
def validated(tmp_path_factory):
    return probe(tmp_path_factory, {"nodes": NODES, "plan": VALIDATED_PLAN})


def test_dashboard_url_is_the_heads_address_with_this_hosts_plan(templated):
    own = templated[0]
    # HTTPS (raygate_tls is on by default: the head's proxy); the role's own calls on the head go to
    # Ray's dashboard on its loopback, behind the proxy.
    assert own["h1"]["url"] == own["w1"]["url"] == "https://10.0.0.1:9000"
    assert own["h1"]["api_url"] == "http://127.0.0.1:9000"
    assert own["h1"]["node"]["dashboard_proxy"] is True
    assert own["w2"]["url"] == "https://10.0.0.1:9100"  # its own offset: the validator refuses such a cluster
    assert own["w2"]["plan"]["gcs"] == 6479 and own["w2"]["plan"]["max_worker"] == 11099


def test_own_firewall_options(templated):
    own = templated[0]
    head, w1, w2 = own["h1"]["fw"], own["w1"]["fw"], own["w2"]["fw"]
    assert (head["role"], head["backend"], head["boot"], head["table"]) == ("head", "nftables", True, "raygate")
    assert "zone" not in head and sorted(head["sources"]) == ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    assert (w1["role"], w1["backend"], w1["boot"], w1["table"], w1["zone"]) == ("worker", "auto", False, "t1", "z1")
    assert (w2["sources"], w2["boot"]) == (["10.9.0.0/16"], False)
    # Not validated here: w2's firewall gets the plan of its own overrides and offset, as data.
    assert w2["plan"] == pp.build_plan({"dashboard": 9000}, offset=100)


def test_a_member_outside_the_run_gets_its_own_options(templated):
    own, members = templated
    for host in ("h1", "w1", "w2"):
        fw = dict(members[host]["fw"], sources=sorted(members[host]["fw"]["sources"]))
        assert fw == dict(own[host]["fw"], sources=sorted(own[host]["fw"]["sources"])), host
    assert [members[h]["manage"] for h in ("h1", "w1", "w2")] == [True, True, False]


def test_a_node_that_passed_the_gate_now_starts_with_health_labels(templated):
    own = templated[0]
    assert own["w1"]["node"]["status_labels"] == {
        "raygate.io/health": "pass",
        "raygate.io/checked-at": "1785283200",
        "raygate.io/checked-date": "2026-07-29",
        "raygate.io/fingerprint": "fp-w1",
    }
    assert own["h1"]["node"]["status_labels"]["raygate.io/health"] == "warn"


def test_a_node_not_checked_now_is_given_none_and_keeps_its_own(templated):
    # No status_labels at all (omit), not {}: ray_node then keeps what a running node carries.
    own = templated[0]
    assert "status_labels" not in own["w2"]["node"]
    assert own["w2"]["node"]["labels"] == {}


def test_a_node_that_failed_the_gate_now_forgets_its_labels(templated):
    # site.yml: it leaves the play; health.yml with eviction: its stop forgets what it carried.
    assert templated[0]["w3"]["node"]["status_labels"] == {}


def test_health_labels_off_starts_every_node_without_them(templated):
    own = templated[0]
    assert [own[h]["labels_off"]["status_labels"] for h in ("h1", "w1", "w2", "w3")] == [{}, {}, {}, {}]


def test_the_node_call_reads_no_redis_secret_without_redis(templated):
    # Without GCS fault tolerance no password file exists: before ansible-core 2.19 Jinja resolved
    # every name of `raygate_gcs_password if <needed> else omit` first, and the lookup failed.
    own = templated[0]
    for host in ("h1", "w1"):
        assert "redis_password" not in own[host]["call"], own[host]["call"]
        assert own[host]["node"]["gcs_ft"] == "none" and "storage_namespace" not in own[host]["node"]
    assert own["h1"]["call"]["auth_token"] == "probe-token"  # what a start needs
    # The TLS material of each node its own, the key apart from the module's options (masked).
    assert own["w1"]["call"]["tls_key"] == "probe-key-w1" and "tls_key" not in own["w1"]["node"]
    assert own["w1"]["node"]["tls_cert"] == "probe-cert-w1" and own["w1"]["node"]["tls_ca_cert"] == "probe-ca"
    assert own["w1"]["node"]["tls"] is True and own["w1"]["node"]["tls_dir"] == "/etc/raygate/tls"


def test_the_validated_plan_is_the_one_every_module_is_given(validated):
    # Computed once on the controller: ray_node and ray_firewall get it as data, for every host and
    # for a member outside the run alike; no host's own overrides (w2's offset) build another one.
    own, members = validated
    for host in ("h1", "w1", "w2", "w3"):
        assert own[host]["plan"] == VALIDATED_PLAN, host
        assert own[host]["node"]["plan"] == VALIDATED_PLAN, host
        assert own[host]["fw"]["plan"] == VALIDATED_PLAN, host
        assert "ports" not in own[host]["node"] and "port_offset" not in own[host]["fw"], host
    for host in ("h1", "w1", "w2"):
        assert members[host]["fw"]["plan"] == VALIDATED_PLAN, host
    assert own["w2"]["url"] == "https://10.0.0.1:9020"


def test_prometheus_sources_and_node_exporter_port_reach_the_firewall(templated):
    own, members = templated
    assert own["w1"]["fw"]["prometheus_sources"] == ["192.0.2.50"]
    assert int(own["w1"]["fw"]["node_exporter_port"]) == 9101
    # the default: nobody, node_exporter on 9100
    assert own["h1"]["fw"]["prometheus_sources"] == [] and int(own["h1"]["fw"]["node_exporter_port"]) == 9100
    # a member outside the run (scale.yml --limit) gets its own, as its own run would
    assert members["w1"]["fw"]["prometheus_sources"] == ["192.0.2.50"]


JOB_RAY = "raygate-ray"


def test_file_sd_targets_name_every_node_with_the_clusters_labels(templated):
    own = templated[0]
    targets = own["h1"]["targets"]
    cluster = own["h1"]["cluster"]
    # the inventory's directory name (a pytest temporary directory here)
    assert cluster.startswith("role_vars")
    assert {t["labels"]["raygate_cluster"] for t in targets} == {cluster}
    ray = [
        (t["labels"]["host"], t["labels"]["role"], t["targets"]) for t in targets if t["labels"]["job"] == "raygate-ray"
    ]
    assert ray == [
        ("h1", "head", ["10.0.0.1:8269"]),
        ("w1", "worker", ["10.0.0.2:8269"]),
        ("w2", "worker", ["10.0.0.3:8269"]),
    ]
    head = [t for t in targets if t["labels"]["job"] == "raygate-ray-head"]
    assert [(t["labels"]["host"], t["targets"]) for t in head] == [("h1", ["10.0.0.1:8271", "10.0.0.1:8270"])]
    assert [t["targets"] for t in targets if t["labels"]["job"] == "raygate-node"] == [
        ["10.0.0.1:9100"],
        ["10.0.0.2:9100"],
        ["10.0.0.3:9100"],
    ]
