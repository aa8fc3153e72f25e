"""ray_node's dashboard_proxy: the head's HTTPS front (nginx) for Ray's dashboard and jobs API.

What runs is checked by the exact commands (nginx -t before nginx itself, as the service user), what
is written by the files (the nginx configuration, the unit); the real nginx in front of a real
dashboard is the fault suite's (tests/integration/faults: a job submitted over HTTPS, a capture of
port 8265 without the token)."""

import pytest
from harness import fake_venv, run_case

from ansible_collections.raygate.cluster.plugins.module_utils.node import node as node_step
from ansible_collections.raygate.cluster.plugins.module_utils.node import procs as ray_procs
from ansible_collections.raygate.cluster.plugins.module_utils.node import proxy as node_proxy
from ansible_collections.raygate.cluster.plugins.module_utils.node import session as node_session
from ansible_collections.raygate.cluster.plugins.modules import ray_node

HELP = """Usage: ray start [OPTIONS]
  --node-ip-address TEXT
  --port INTEGER
  --head
  --dashboard-host TEXT
  --dashboard-port INTEGER
"""


@pytest.fixture(autouse=True)
def no_ray_here(monkeypatch):
    monkeypatch.setattr(ray_procs, "ray_processes", lambda **kwargs: [])
    monkeypatch.setattr(node_session.Session, "gcs_answers", lambda self, plan: "Connection refused (test)")


def proxy_args(tmp, **over):
    """A head with the proxy on, serving a site's own certificate (files on the head)."""
    for name in ("site.crt", "site.key"):
        (tmp / name).write_text("-----BEGIN PEM-----\n")
    nginx = tmp / "nginx"
    nginx.write_text("#!/bin/sh\n")
    nginx.chmod(0o755)
    args = {
        "role": "head",
        "node_ip": "198.18.0.11",
        "venv": "%s/venv" % tmp,
        "auth": False,
        "env_files": [],
        "config_dir": "%s/etc" % tmp,
        "state_dir": "%s/run" % tmp,
        "unit_dir": "%s/units" % tmp,
        "dashboard_proxy": True,
        "dashboard_proxy_cert": "%s/site.crt" % tmp,
        "dashboard_proxy_key": "%s/site.key" % tmp,
        "dashboard_proxy_binary": str(nginx),
        "dashboard_proxy_run_dir": "%s/proxy" % tmp,
    }
    args.update(over)
    return args


def test_head_start_puts_the_dashboard_on_loopback_and_starts_nginx_in_front(tmp_path, monkeypatch):
    ray = fake_venv(tmp_path)
    waited = []
    monkeypatch.setattr(node_step.Node, "wait_head", lambda self, url: waited.append(url))
    monkeypatch.setattr(node_step.Node, "_raylet_up", lambda self: (True, {"pid": 4242}))
    monkeypatch.setattr(node_proxy.DashboardProxy, "wait_listening", lambda self, plan: None)
    nginx = [str(tmp_path / "nginx"), "-c", "{tmp}/etc/dashboard-proxy.conf", "-e", "{tmp}/proxy/error.log"]
    start = [ray, "start", "--head", "--node-ip-address=198.18.0.11", "--port=6379", "--dashboard-port=8265"]
    case = {
        "args": proxy_args(tmp_path),
        "commands": [
            {"cmd": [ray, "start", "--help"], "out": HELP},
            {"cmd": start + ["--dashboard-host=127.0.0.1"], "out": "started"},
            {"cmd": nginx + ["-t", "-q"]},
            {"cmd": nginx},
        ],
        "expect": {"changed": True, "dashboard_url": "https://198.18.0.11:8265"},
        "exists": ["{tmp}/etc/dashboard-proxy.conf", "{tmp}/run/dashboard-proxy.sha256"],
    }
    result = run_case(case, ray_node.main, tmp_path, monkeypatch)
    assert result["dashboard_proxy"] == {"url": "https://198.18.0.11:8265", "action": "start", "changed": True}
    # The module waits on Ray's own dashboard (loopback, plain HTTP), not through the proxy.
    assert waited == ["http://127.0.0.1:8265"]
    conf = (tmp_path / "etc" / "dashboard-proxy.conf").read_text()
    assert "listen 198.18.0.11:8265 ssl;" in conf
    assert "proxy_pass http://127.0.0.1:8265;" in conf
    assert "ssl_certificate %s/site.crt;" % tmp_path in conf and "ssl_certificate_key %s/site.key;" % tmp_path in conf
    # Job log streaming (a websocket) and working-directory uploads of any size pass.
    assert "proxy_set_header Upgrade $http_upgrade;" in conf and "client_max_body_size 0;" in conf
    # Under the process supervisor nginx daemonizes; as root its workers run as root's service account.
    assert "daemon on;" in conf and "user root;" in conf


def test_proxy_needs_a_certificate_before_anything_changes(tmp_path, monkeypatch):
    fake_venv(tmp_path)
    args = proxy_args(tmp_path, dashboard_proxy_cert=None, dashboard_proxy_key=None, tls=False)
    case = {"args": args, "expect": {"failed": True, "msg_contains": ["tls is off", "raygate_dashboard_tls_cert"]}}
    run_case(case, ray_node.main, tmp_path, monkeypatch)
    assert not (tmp_path / "etc").exists()


def test_half_a_certificate_is_refused(tmp_path, monkeypatch):
    fake_venv(tmp_path)
    args = proxy_args(tmp_path, dashboard_proxy_key=None)
    case = {"args": args, "expect": {"failed": True, "msg_contains": "dashboard_proxy_cert and dashboard_proxy_key"}}
    run_case(case, ray_node.main, tmp_path, monkeypatch)


def test_a_dashboard_host_beside_the_proxy_is_refused(tmp_path, monkeypatch):
    fake_venv(tmp_path)
    args = proxy_args(tmp_path, dashboard_host="0.0.0.0")
    case = {"args": args, "expect": {"failed": True, "msg_contains": ["dashboard_host 0.0.0.0", "127.0.0.1"]}}
    run_case(case, ray_node.main, tmp_path, monkeypatch)


def test_missing_nginx_names_the_package(tmp_path, monkeypatch):
    fake_venv(tmp_path)
    args = proxy_args(tmp_path, dashboard_proxy_binary="%s/no-nginx" % tmp_path)
    case = {"args": args, "expect": {"failed": True, "msg_contains": ["no-nginx is not there", "install nginx"]}}
    run_case(case, ray_node.main, tmp_path, monkeypatch)


def test_check_mode_says_the_proxy_would_start_and_writes_nothing(tmp_path, monkeypatch):
    args = proxy_args(tmp_path)
    case = {"args": args, "check_mode": True, "expect": {"changed": True}, "absent": ["{tmp}/etc", "{tmp}/proxy"]}
    run_case(case, ray_node.main, tmp_path, monkeypatch)


def test_workers_ignore_the_proxy(tmp_path, monkeypatch):
    ray = fake_venv(tmp_path)
    monkeypatch.setattr(node_step.Node, "_raylet_up", lambda self: (True, {"pid": 4243}))
    args = proxy_args(tmp_path, role="worker", node_ip="198.18.0.12", head_ip="198.18.0.11")
    start = [ray, "start", "--address=198.18.0.11:6379", "--node-ip-address=198.18.0.12"]
    case = {
        "args": args,
        "commands": [{"cmd": [ray, "start", "--help"], "out": HELP}, {"cmd": start, "out": "started"}],
        "expect": {"changed": True},
        "absent": ["{tmp}/etc/dashboard-proxy.conf"],
    }
    result = run_case(case, ray_node.main, tmp_path, monkeypatch)
    assert "dashboard_proxy" not in result


def test_the_unit_runs_nginx_as_the_service_user_sandboxed():
    unit = node_proxy.render_unit("/usr/sbin/nginx", "/etc/raygate/dashboard-proxy.conf", "/run/rdp", user="ray")
    lines = unit.splitlines()
    assert "User=ray" in lines and "NoNewPrivileges=yes" in lines and "CapabilityBoundingSet=" in lines
    assert "RuntimeDirectory=rdp" in lines
    # A configuration nginx refuses keeps the unit from starting, with nginx's own words in the journal.
    assert "ExecStartPre=/usr/sbin/nginx -c /etc/raygate/dashboard-proxy.conf -e /run/rdp/error.log -t -q" in lines
    assert "ExecReload=/bin/kill -HUP $MAINPID" in lines
    root = node_proxy.render_unit("/usr/sbin/nginx", "/c", "/run/rdp", user="root").splitlines()
    assert not any(line.startswith(("User=", "NoNewPrivileges")) for line in root)


def test_systemd_conf_keeps_nginx_in_the_foreground_and_brackets_ipv6():
    conf = node_proxy.render_conf(node_proxy.listen_address("fd00::11", 8265), 8265, "/c", "/k", "/r", daemon=False)
    assert "daemon off;" in conf and "listen [fd00::11]:8265 ssl;" in conf and "user " not in conf


def test_the_proxy_s_own_listener_is_no_stranger_on_the_dashboard_port(tmp_path, monkeypatch):
    # A head whose Ray died while its proxy still runs: the proxy's port is raygate's, a stranger's is not.
    class Module:
        params = dict(node_proxy_params(tmp_path))
        check_mode = True

        def fail_json(self, **kwargs):
            raise AssertionError(kwargs["msg"])

    node = node_step.Node(Module())
    plan = node.plan()
    monkeypatch.setattr(node_proxy.DashboardProxy, "pids", lambda self: {70, 71})
    owners = {8265: [{"pid": 70, "comm": "nginx", "cmdline": ""}, {"pid": 71, "comm": "nginx", "cmdline": ""}]}
    monkeypatch.setattr(node_step.pp, "find_listeners", lambda ports: dict(owners))
    node_step.check_ports_free(node, plan)
    owners[8265].append({"pid": 99, "comm": "python3", "cmdline": ""})
    with pytest.raises(AssertionError, match="port 8265 is already bound by .*python3"):
        node_step.check_ports_free(node, plan)


def node_proxy_params(tmp):
    params = dict((name, spec.get("default")) for name, spec in node_step.ARGUMENT_SPEC.items())
    params.update(proxy_args(tmp))
    return params


def test_absent_removes_the_proxy_s_configuration_and_its_stamp(tmp_path, monkeypatch):
    # A head torn down after its proxy ran (the proxy itself already gone): nothing of it is left.
    for path in ("etc/dashboard-proxy.conf", "run/dashboard-proxy.sha256", "run/ray-node.json"):
        (tmp_path / path).parent.mkdir(exist_ok=True)
        (tmp_path / path).write_text("x")
    args = proxy_args(tmp_path, state="absent")
    case = {"args": args, "expect": {"changed": True}, "absent": ["{tmp}/etc", "{tmp}/run"]}
    result = run_case(case, ray_node.main, tmp_path, monkeypatch)
    assert sorted(p.rsplit("/", 1)[-1] for p in result["removed"]) == ["dashboard-proxy.conf", "ray-node.json"]
    again = run_case({"args": args, "expect": {"changed": False}}, ray_node.main, tmp_path, monkeypatch)
    assert again["removed"] == []


class _Module:
    check_mode = False

    def __init__(self, params):
        self.params = params

    def fail_json(self, **kwargs):
        raise AssertionError(kwargs["msg"])


@pytest.fixture()
def head(tmp_path, monkeypatch):
    """A head's Node with the proxy on whose nginx runs (pid 4100); the commands it runs, recorded."""
    ran, signals = [], []
    monkeypatch.setattr(node_step.Node, "run", lambda self, args, **kwargs: ran.append(args) or (0, "", ""))
    monkeypatch.setattr(node_proxy.DashboardProxy, "master_pid", lambda self: 4100)
    monkeypatch.setattr(node_proxy.DashboardProxy, "wait_listening", lambda self, plan: None)
    monkeypatch.setattr(node_proxy.os, "kill", lambda pid, sig: signals.append((pid, sig)))
    node = node_step.Node(_Module(node_proxy_params(tmp_path)))
    return node, ran, signals


def test_a_running_proxy_with_its_files_unchanged_is_left_alone(head, tmp_path):
    node, ran, signals = head
    first = node.proxy.ensure(node.plan())
    assert first["action"] == "reload" and signals == [(4100, node_proxy.signal.SIGHUP)]
    ran.clear(), signals.clear()
    assert node.proxy.ensure(node.plan()) == {"url": "https://198.18.0.11:8265", "action": "none", "changed": False}
    assert ran == [] and signals == []


def test_a_renewed_certificate_reloads_the_proxy_after_nginx_t(head, tmp_path):
    node, ran, signals = head
    node.proxy.ensure(node.plan())
    ran.clear(), signals.clear()
    (tmp_path / "site.crt").write_text("-----BEGIN PEM----- renewed\n")
    node.module.check_mode = True
    assert node.proxy.ensure(node.plan())["action"] == "reload"  # what the preflight predicts
    assert ran == [] and signals == []
    node.module.check_mode = False
    assert node.proxy.ensure(node.plan())["action"] == "reload"
    assert ran[-1][-2:] == ["-t", "-q"] and signals == [(4100, node_proxy.signal.SIGHUP)]


def test_a_proxy_the_unit_started_at_boot_is_not_reloaded(head, tmp_path):
    # /run is empty after a reboot, the unit started nginx from the files raygate wrote: no record, no reload.
    node, ran, signals = head
    node.proxy.ensure(node.plan())
    (tmp_path / "run" / "dashboard-proxy.sha256").unlink()
    ran.clear(), signals.clear()
    assert node.proxy.ensure(node.plan())["action"] == "none"
    assert ran == [] and signals == [] and (tmp_path / "run" / "dashboard-proxy.sha256").exists()
