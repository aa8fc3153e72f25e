"""GCS fault tolerance in the role, templated by ansible-playbook itself (local connection, no node touched).

A throw-away role links the real defaults/, vars/ and templates/; its tasks record the derived
values. Checks: who runs the managed Redis and where the head finds it, what ray_node and
ray_firewall get on each host, the Redis configuration and unit, and the controller-side
validation task of validate.yml with good and bad settings.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml
from role_probe import PLAYBOOK_BIN, ROLE, run_playbook, task_file

HOSTS = ("h1", "w1", "w2")


def inventory(all_vars, store=("w1",)):
    groups = {
        "ray_head": {"hosts": {"h1": {"raygate_node_ip": "10.0.0.1"}}},
        "ray_workers": {"hosts": {"w1": {"ansible_host": "10.0.0.2"}, "w2": {"ansible_host": "10.0.0.3"}}},
    }
    if store:
        groups["ray_gcs_store"] = {"hosts": {name: {} for name in store}}
    # TLS apart (test_role_vars covers it): these hosts have no certificates on the controller.
    base = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, "raygate_tls": False}
    return {"all": {"vars": dict(base, **all_vars), "children": groups}}


def validate_task():
    """validate.yml's GCS task, run as it is (an assert on localhost)."""
    with open(task_file("validate.yml")) as fh:
        tasks = yaml.safe_load(fh)
    (task,) = [t for t in tasks if t["name"] == "Validate GCS fault tolerance"]
    return task


def run_probe(tmp, inv, tasks, limit="all"):
    role = tmp / "roles" / "probe"
    (role / "tasks").mkdir(parents=True)
    for part in ("defaults", "vars"):
        os.symlink(os.path.abspath(os.path.join(ROLE, part)), role / part)
    # The managed Redis's templates are the GCS store role's own.
    os.symlink(os.path.abspath(os.path.join(ROLE, "..", "gcs_store", "templates")), role / "templates")
    (role / "tasks" / "main.yml").write_text(yaml.safe_dump(tasks))
    (tmp / "inventory.yml").write_text(yaml.safe_dump(inv))
    (tmp / "site.yml").write_text(yaml.safe_dump([{"hosts": limit, "gather_facts": False, "roles": ["probe"]}]))
    return run_playbook(tmp)


PROBE = [
    {
        "ansible.builtin.set_fact": {
            "own": {
                "node": "{{ raygate_node_args }}",
                "fw": "{{ raygate_firewall_args }}",
                "store": "{{ raygate_gcs.store_host }}",
                "endpoint": "{{ raygate_gcs.endpoint }}",
                "managed": "{{ raygate_gcs.managed | bool }}",
                "password_needed": "{{ raygate_gcs.password_needed | bool }}",
                "conf": "{{ lookup('ansible.builtin.template', 'redis.conf.j2') if raygate_gcs.managed else '' }}",
                "unit": "{{ lookup('ansible.builtin.template', 'raygate-redis.service.j2') }}",
            }
        },
        "vars": {"_raygate_node_state": "started", "_raygate_firewall_state": "present"},
    },
    {
        "ansible.builtin.copy": {
            "dest": "{{ playbook_dir }}/own-{{ inventory_hostname }}.json",
            "content": "{{ own | to_json }}",
        }
    },
]


def templated(tmp, all_vars, store=("w1",)):
    if not os.path.exists(PLAYBOOK_BIN):
        pytest.skip("ansible-playbook is not installed next to this Python")
    proc = run_probe(tmp, inventory(all_vars, store), PROBE)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {h: json.loads((tmp / ("own-%s.json" % h)).read_text()) for h in HOSTS}


MANAGED = {"raygate_gcs_ft": "redis", "raygate_gcs_cluster_id": "0a1b2c", "raygate_gcs_redis_password": "pw-managed"}


@pytest.fixture(scope="module")
def managed(tmp_path_factory):
    return templated(tmp_path_factory.mktemp("gcs_managed"), MANAGED)


def test_managed_redis_runs_on_the_store_host_and_the_head_points_at_it(managed):
    assert {managed[h]["store"] for h in HOSTS} == {"w1"}
    assert {managed[h]["endpoint"] for h in HOSTS} == {"10.0.0.2:6380"}
    head = managed["h1"]["node"]
    assert (head["gcs_ft"], head["redis_address"], head["redis_username"]) == ("redis", "10.0.0.2:6380", "raygate")
    assert head["redis_tls"] is False  # raygate_tls is off here
    assert head["storage_namespace"] == "raygate-0a1b2c"
    assert int(head["gcs_reconnect_timeout"]) == 300
    assert managed["h1"]["password_needed"] is True
    # A worker needs neither the namespace nor the password, only the reconnect timeout.
    assert "storage_namespace" not in managed["w1"]["node"]
    assert managed["w1"]["password_needed"] is False
    assert "redis_password" not in head  # passed by the task itself, masked


def test_only_the_store_host_opens_redis_and_only_to_the_head(managed):
    assert (managed["w1"]["fw"]["gcs_store"], managed["w1"]["fw"]["gcs_store_sources"]) == (True, ["10.0.0.1"])
    for host in ("h1", "w2"):
        assert (managed[host]["fw"]["gcs_store"], managed[host]["fw"]["gcs_store_sources"]) == (False, [])


def test_redis_configuration_binds_the_cluster_address_with_password_and_aof(managed):
    conf = dict(line.split(" ", 1) for line in managed["w1"]["conf"].splitlines() if line and not line.startswith("#"))
    assert conf["bind"] == "10.0.0.2"
    assert conf["port"] == "6380"
    # One ACL user with the password; the default user off; no dangerous command but INFO.
    assert "requirepass" not in conf and "\nuser default off\n" in managed["w1"]["conf"]
    assert conf["user"] == "raygate on >pw-managed ~* &* +@all -@dangerous +info"
    assert (conf["appendonly"], conf["appendfsync"]) == ("yes", "everysec")
    assert conf["protected-mode"] == "yes"
    # Default supervisor is process: Redis daemonizes with a pid file the role reads.
    assert (conf["daemonize"], conf["pidfile"]) == ("yes", "/run/raygate-redis/redis.pid")


def test_redis_unit_runs_as_redis_and_comes_before_the_ray_head(managed):
    unit = managed["w1"]["unit"]
    assert "User=redis" in unit and "Type=notify" in unit and "Restart=always" in unit
    assert "Before=raygate-ray.service" in unit
    assert "ExecStart=/usr/bin/redis-server /etc/raygate/redis/redis.conf" in unit


def test_with_tls_the_managed_redis_speaks_tls_only_and_the_head_presents_its_certificate(tmp_path):
    tls_dir = tmp_path / "tls"
    (tls_dir / "nodes").mkdir(parents=True)
    (tls_dir / "ca.crt").write_text("CA\n")
    for host in HOSTS:
        (tls_dir / "nodes" / ("%s.crt" % host)).write_text("CERT %s\n" % host)
        (tls_dir / "nodes" / ("%s.key" % host)).write_text("KEY %s\n" % host)
    own = templated(tmp_path / "run", dict(MANAGED, raygate_tls=True, raygate_tls_dir=str(tls_dir)))
    conf = dict(line.split(" ", 1) for line in own["w1"]["conf"].splitlines() if line and not line.startswith("#"))
    assert (conf["port"], conf["tls-port"], conf["tls-auth-clients"]) == ("0", "6380", "yes")
    assert conf["tls-cert-file"] == "/etc/raygate/redis/tls/redis.crt"
    assert conf["tls-ca-cert-file"] == "/etc/raygate/redis/tls/ca.crt"
    head = own["h1"]["node"]
    assert (head["redis_address"], head["redis_tls"], head["tls"]) == ("10.0.0.2:6380", True, True)
    # The user's own Redis is used as it is: no TLS asked of it.
    mine = dict(MANAGED, raygate_tls=True, raygate_tls_dir=str(tls_dir), raygate_gcs_redis_address="r.example:6379")
    assert templated(tmp_path / "own", mine)["h1"]["node"]["redis_tls"] is False


def test_head_is_the_store_without_a_store_group(tmp_path):
    own = templated(tmp_path, MANAGED, store=())
    assert own["h1"]["store"] == "h1" and own["h1"]["endpoint"] == "10.0.0.1:6380"
    assert own["h1"]["fw"]["gcs_store"] is True and own["h1"]["fw"]["gcs_store_sources"] == ["10.0.0.1"]


def test_external_redis_is_used_as_given_and_nothing_is_managed(tmp_path):
    own = templated(
        tmp_path,
        {
            "raygate_gcs_ft": "redis",
            "raygate_gcs_cluster_id": "0a1b2c",
            "raygate_gcs_redis_address": "redis.example.com:6379",
            "raygate_gcs_redis_username": "ray",
            "raygate_gcs_redis_password": "pw-vault",
        },
    )
    head = own["h1"]["node"]
    assert (head["redis_address"], head["redis_username"]) == ("redis.example.com:6379", "ray")
    assert all(own[h]["managed"] is False and own[h]["fw"]["gcs_store"] is False for h in HOSTS)


def test_none_passes_no_gcs_options_but_the_mode(tmp_path):
    own = templated(tmp_path, {})
    head = own["h1"]["node"]
    assert head["gcs_ft"] == "none"
    assert not {"redis_address", "storage_namespace", "gcs_reconnect_timeout"} & set(head)
    assert own["h1"]["password_needed"] is False


@pytest.mark.parametrize(
    ("all_vars", "store", "words"),
    [
        ({"raygate_gcs_ft": "etcd"}, (), "must be none, redis or rocksdb"),
        ({"raygate_gcs_ft": "rocksdb", "raygate_ray_version": "2.52.0"}, (), "checked in Ray 2.60.0 only"),
        ({"raygate_gcs_ft": "redis", "raygate_gcs_redis_address": "r:6379"}, (), "raygate_gcs_redis_password is not"),
        (
            {"raygate_gcs_ft": "redis", "raygate_gcs_redis_address": "r", "raygate_gcs_redis_password": "x"},
            (),
            "must be host:port",
        ),
        (
            {
                "raygate_gcs_ft": "redis",
                "raygate_gcs_redis_address": "rediss://r:6379",
                "raygate_gcs_redis_password": "x",
            },
            (),
            "is TLS, which needs raygate_tls",
        ),
        ({"raygate_gcs_ft": "redis"}, ("w1", "w2"), "give it one host"),
        ({"raygate_gcs_ft": "redis"}, ("outsider",), "must be a node of the cluster"),
        ({"raygate_gcs_ft": "redis", "raygate_gcs_reconnect_timeout": 0}, (), "at least 1 second"),
    ],
)
def test_validation_refuses_with_a_message(tmp_path, all_vars, store, words):
    if not os.path.exists(PLAYBOOK_BIN):
        pytest.skip("ansible-playbook is not installed next to this Python")
    proc = run_probe(tmp_path, inventory(all_vars, store), [validate_task()], limit="localhost")
    assert proc.returncode != 0
    assert words in proc.stdout, proc.stdout


@pytest.mark.parametrize(
    "all_vars",
    [
        {},
        {"raygate_gcs_ft": "rocksdb"},
        MANAGED,
        dict(MANAGED, raygate_gcs_redis_address="r:1", raygate_gcs_redis_password="x"),
        dict(MANAGED, raygate_gcs_redis_address="rediss://r:1", raygate_gcs_redis_password="x", raygate_tls=True),
    ],
)
def test_validation_accepts_good_settings(tmp_path, all_vars):
    if not os.path.exists(PLAYBOOK_BIN):
        pytest.skip("ansible-playbook is not installed next to this Python")
    proc = run_probe(tmp_path, inventory(all_vars), [validate_task()], limit="localhost")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ok: [localhost" in proc.stdout


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze is not installed")
@pytest.mark.skipif(not os.path.exists("/usr/bin/redis-server"), reason="verify needs the unit's binary (redis-server)")
def test_redis_unit_passes_systemd_analyze_verify(managed, tmp_path):
    path = tmp_path / "raygate-redis.service"
    path.write_text(managed["w1"]["unit"])
    proc = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(path)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "raygate-redis.service" not in proc.stderr, proc.stderr
