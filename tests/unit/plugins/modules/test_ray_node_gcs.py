"""ray_node with GCS fault tolerance: the head's store settings, the masked Redis password,
the workers' reconnect timeout, and the refusals that come before anything changes."""

import json
import os
import shutil
import subprocess

import pytest
from ansible.module_utils.testing import patch_module_args
from harness import run_case

from ansible_collections.raygate.cluster.plugins.module_utils import files
from ansible_collections.raygate.cluster.plugins.module_utils.node import gcs_store
from ansible_collections.raygate.cluster.plugins.module_utils.node import node as node_step
from ansible_collections.raygate.cluster.plugins.module_utils.node import procs as ray_procs
from ansible_collections.raygate.cluster.plugins.module_utils.node import session as node_session
from ansible_collections.raygate.cluster.plugins.module_utils.node import unit as node_unit
from ansible_collections.raygate.cluster.plugins.modules import node_steps, ray_node

HELP = "Usage: ray start [OPTIONS]\n  --node-ip-address TEXT\n  --port INTEGER\n  --head\n  --disable-usage-stats\n"
PASSWORD = "redis-" + "9f8e7d" * 6
VERSION_DIR = "ray-2.60.0-py3.11"


@pytest.fixture(autouse=True)
def no_ray_here(monkeypatch):
    monkeypatch.setattr(ray_procs, "ray_processes", lambda **kwargs: [])
    monkeypatch.setattr(node_session.Session, "gcs_answers", lambda self, plan: "Connection refused (test)")


@pytest.fixture
def launched(monkeypatch):
    """Every command ray_node runs, with its environment; the head comes up at once."""
    calls = []

    def fake_run(self, args, **kwargs):
        calls.append({"args": list(args), "env": dict(kwargs.get("env") or {})})
        return (0, HELP, "") if "--help" in args else (0, "started", "")

    monkeypatch.setattr(node_step.Node, "run", fake_run)
    monkeypatch.setattr(node_step.Node, "wait_gcs", lambda self, plan: None)
    monkeypatch.setattr(node_step.Node, "wait_head", lambda self, url: None)
    monkeypatch.setattr(node_step.Node, "_raylet_up", lambda self: (True, {"pid": 4242}))
    return calls


def versioned_venv(tmp_path):
    """/opt/raygate/current -> ray-2.60.0-py3.11, as ray_install lays it out."""
    real = tmp_path / VERSION_DIR / "bin"
    real.mkdir(parents=True)
    (real / "ray").write_text("#!/bin/sh\n")
    (real / "ray").chmod(0o755)
    os.symlink(VERSION_DIR, str(tmp_path / "current"))
    return str(tmp_path / "current")


def args(tmp, role="head", **over):
    base = {
        "role": role,
        "node_ip": "198.18.0.11" if role == "head" else "198.18.0.12",
        "head_ip": "198.18.0.11",
        "venv": versioned_venv(tmp),
        "num_cpus": 2,
        "num_gpus": 0,
        "memory": 2147483648,
        "auth": False,
        "env_files": [],
        "config_dir": "%s/etc" % tmp,
        "state_dir": "%s/run" % tmp,
        "unit_dir": "%s/units" % tmp,
        "gcs_ft": "redis",
        "redis_address": "198.18.0.11:6380",
        "redis_username": "default",
        "redis_password": PASSWORD,
        "storage_namespace": "raygate-0a1b2c",
        "gcs_storage_path": "%s/gcs" % tmp,
        "gcs_reconnect_timeout": 300,
    }
    base.update(over)
    return base


def start_command(calls):
    return [c for c in calls if c["args"][1:2] == ["start"] and "--help" not in c["args"]][0]


def test_redis_head_gets_address_namespace_and_the_password_only_at_launch(tmp_path, monkeypatch, launched):
    result = run_case({"args": args(tmp_path), "expect": {"changed": True}}, ray_node.main, tmp_path, monkeypatch)
    launch = start_command(launched)
    assert "--redis-username=default" in launch["args"]
    assert "--redis-password=%s" % PASSWORD in launch["args"]
    assert launch["env"]["RAY_REDIS_ADDRESS"] == "198.18.0.11:6380"
    assert launch["env"]["RAY_external_storage_namespace"] == "raygate-0a1b2c-" + VERSION_DIR
    assert launch["env"]["RAY_gcs_rpc_server_reconnect_timeout_s"] == "300"
    # What is returned and what is written in plain files name the variable, never the password.
    assert gcs_store.REDIS_PASSWORD_ARG in result["command"]
    assert PASSWORD not in json.dumps(result)
    assert PASSWORD not in (tmp_path / "etc" / "ray.env").read_text()
    secret = tmp_path / "etc" / node_step.GCS_SECRET_FILE
    assert files.parse_env(secret.read_text()) == {gcs_store.REDIS_PASSWORD_VAR: PASSWORD}
    assert oct(secret.stat().st_mode & 0o777) == "0o600"
    assert result["gcs_storage"] == {
        "backend": "redis",
        "address": "198.18.0.11:6380",
        "namespace": "raygate-0a1b2c-" + VERSION_DIR,
    }


def test_redis_over_tls_names_rediss_and_the_node_s_own_certificate(tmp_path, monkeypatch, launched):
    pem = {"tls_ca_cert": "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----"}
    pem["tls_cert"] = "-----BEGIN CERTIFICATE-----\nNODE\n-----END CERTIFICATE-----"
    pem["tls_key"] = "-----BEGIN PRIVATE KEY-----\nKEY\n-----END PRIVATE KEY-----"
    given = args(tmp_path, **dict(pem, tls=True, tls_dir=str(tmp_path / "tls"), redis_tls=True))
    result = run_case({"args": given, "expect": {"changed": True}}, ray_node.main, tmp_path, monkeypatch)
    env = start_command(launched)["env"]
    assert env["RAY_REDIS_ADDRESS"] == "rediss://198.18.0.11:6380"
    tls_dir = str(tmp_path / "tls")
    assert (env["RAY_REDIS_CA_CERT"], env["RAY_REDIS_CLIENT_CERT"], env["RAY_REDIS_CLIENT_KEY"]) == (
        tls_dir + "/ca.crt",
        tls_dir + "/node.crt",
        tls_dir + "/node.key",
    )
    assert result["gcs_storage"]["address"] == "rediss://198.18.0.11:6380"
    # TLS to Redis is part of the configuration: the same head without it is another one.
    plain = run_case({"args": dict(given, redis_tls=False), "check_mode": True, "expect": {"changed": True}},
                     ray_node.main, tmp_path, monkeypatch)  # fmt: skip
    assert plain["config_hash"] != result["config_hash"]


def test_systemd_unit_reads_the_password_from_the_secret_file(tmp_path, monkeypatch, launched):
    monkeypatch.setattr(files, "systemd_booted", lambda: True)
    monkeypatch.setattr(node_unit.Unit, "supervised_ok", lambda self: True)
    run_case({"args": args(tmp_path, supervisor="systemd"), "expect": {"changed": True}}, ray_node.main, tmp_path,
             monkeypatch)  # fmt: skip
    unit = (tmp_path / "units" / "raygate-ray.service").read_text()
    assert PASSWORD not in unit
    assert "EnvironmentFile=-%s/etc/%s" % (tmp_path, node_step.GCS_SECRET_FILE) in unit
    exec_line = [line for line in unit.splitlines() if line.startswith("ExecStart=")][0]
    assert '"--redis-password=${RAYGATE_REDIS_PASSWORD}"' in exec_line
    # systemd starts the unit: no command of ours ever carries the password.
    assert all(PASSWORD not in " ".join(c["args"]) for c in launched)


def test_worker_gets_only_the_reconnect_timeout(tmp_path, monkeypatch, launched):
    run_case({"args": args(tmp_path, role="worker"), "expect": {"changed": True}}, ray_node.main, tmp_path,
             monkeypatch)  # fmt: skip
    launch = start_command(launched)
    assert launch["env"]["RAY_gcs_rpc_server_reconnect_timeout_s"] == "300"
    assert not {"RAY_REDIS_ADDRESS", "RAY_external_storage_namespace", "RAY_gcs_storage"} & set(launch["env"])
    assert not any(a.startswith("--redis-") for a in launch["args"])
    assert not (tmp_path / "etc" / node_step.GCS_SECRET_FILE).exists()


def test_rocksdb_head_keeps_one_store_per_ray_version(tmp_path, monkeypatch, launched):
    over = {"gcs_ft": "rocksdb", "redis_address": None, "redis_password": None, "storage_namespace": None}
    result = run_case({"args": args(tmp_path, **over), "expect": {"changed": True}}, ray_node.main, tmp_path,
                      monkeypatch)  # fmt: skip
    launch = start_command(launched)
    store = str(tmp_path / "gcs" / VERSION_DIR)
    assert launch["env"]["RAY_gcs_storage"] == "rocksdb"
    assert launch["env"]["RAY_gcs_storage_path"] == store
    assert "RAY_REDIS_ADDRESS" not in launch["env"]
    assert oct(os.stat(store).st_mode & 0o777) == "0o700"
    assert result["gcs_storage"] == {"backend": "rocksdb", "path": store}


def test_none_adds_nothing(tmp_path, monkeypatch, launched):
    result = run_case({"args": args(tmp_path, gcs_ft="none"), "expect": {"changed": True}}, ray_node.main, tmp_path,
                      monkeypatch)  # fmt: skip
    launch = start_command(launched)
    assert not [k for k in launch["env"] if "gcs" in k.lower() or "REDIS" in k]
    assert not any(a.startswith("--redis-") for a in launch["args"])
    assert "gcs_storage" not in result


@pytest.mark.parametrize(
    ("over", "words"),
    [
        ({"redis_password": None}, "redis_password is empty"),
        ({"redis_password": "  "}, "redis_password is empty"),
        ({"redis_address": ""}, "redis_address is empty"),
        ({"storage_namespace": ""}, "storage_namespace is empty"),
        ({"storage_namespace": "a@b"}, "must not contain '@'"),
        ({"gcs_reconnect_timeout": 0}, "at least 1 second"),
        ({"redis_tls": True}, "redis_tls needs tls"),
    ],
)
def test_bad_options_fail_before_anything_runs(tmp_path, monkeypatch, over, words):
    monkeypatch.setattr(node_step.Node, "run", lambda self, a, **kw: pytest.fail("ran %s" % a))
    expect = {"failed": True, "msg_contains": words}
    result = run_case({"args": args(tmp_path, **over), "expect": expect}, ray_node.main, tmp_path, monkeypatch)
    assert not (tmp_path / "etc").exists()
    if over.get("redis_password") is None:
        assert PASSWORD not in json.dumps(result)


def test_a_new_password_changes_the_configuration(tmp_path):
    class Stub:
        params = {key: spec.get("default") for key, spec in node_step.ARGUMENT_SPEC.items()}

    Stub.params.update(args(tmp_path))
    plan = node_step.pp.build_plan()
    one = node_step.Node(Stub()).config.hash(plan, {})
    assert node_step.Node(Stub()).config.hash(plan, {}) == one
    Stub.params["redis_password"] = "another-one"
    assert node_step.Node(Stub()).config.hash(plan, {}) != one


def test_node_steps_passes_the_password_and_the_json_never_shows_it(tmp_path, monkeypatch, launched, capsys):
    node = args(tmp_path)
    node.pop("redis_password")
    with patch_module_args({"ray_node": node, "redis_password": PASSWORD}), pytest.raises(SystemExit):
        node_steps.main()
    out = capsys.readouterr().out
    result = json.loads(out)
    assert result["changed"] is True
    assert "--redis-password=%s" % PASSWORD in start_command(launched)["args"]
    assert PASSWORD not in out


def test_node_steps_refuses_a_password_nested_in_ray_node(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(node_step.Node, "run", lambda self, a, **kw: pytest.fail("ran %s" % a))
    with patch_module_args({"ray_node": args(tmp_path)}), pytest.raises(SystemExit):
        node_steps.main()
    out = capsys.readouterr().out
    assert "ray_node must not contain redis_password" in json.loads(out)["msg"]
    assert PASSWORD not in out


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze is not installed")
def test_head_unit_with_the_password_variable_passes_systemd_analyze_verify(tmp_path, monkeypatch, launched):
    monkeypatch.setattr(files, "systemd_booted", lambda: True)
    monkeypatch.setattr(node_unit.Unit, "supervised_ok", lambda self: True)
    run_case({"args": args(tmp_path, supervisor="systemd"), "expect": {"changed": True}}, ray_node.main, tmp_path,
             monkeypatch)  # fmt: skip
    path = tmp_path / "units" / "raygate-ray.service"
    proc = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(path)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "raygate-ray.service" not in proc.stderr, proc.stderr
