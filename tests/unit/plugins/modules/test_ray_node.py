import fcntl
import grp
import json
import os
import shutil
import socket
import subprocess

import pytest
import yaml
from harness import fake_venv, run_case

from ansible_collections.raygate.cluster.plugins.module_utils.node import config as node_config
from ansible_collections.raygate.cluster.plugins.module_utils.node import labels as nl
from ansible_collections.raygate.cluster.plugins.module_utils.node import node as node_step
from ansible_collections.raygate.cluster.plugins.module_utils.node import procs as ray_procs
from ansible_collections.raygate.cluster.plugins.module_utils.node import session as node_session
from ansible_collections.raygate.cluster.plugins.module_utils.node import stop as node_stop
from ansible_collections.raygate.cluster.plugins.module_utils.node import unit as node_unit
from ansible_collections.raygate.cluster.plugins.modules import ray_node

HELP = """Usage: ray start [OPTIONS]
  --node-ip-address TEXT
  --address TEXT
  --port INTEGER
  --object-manager-port INTEGER
  --node-manager-port INTEGER
  --min-worker-port INTEGER
  --max-worker-port INTEGER
  --ray-client-server-port INTEGER
  --memory INTEGER
  --num-cpus INTEGER
  --num-gpus INTEGER
  --head
  --dashboard-host TEXT
  --dashboard-port INTEGER
  --dashboard-agent-listen-port INTEGER
  --dashboard-agent-grpc-port INTEGER
  --metrics-export-port INTEGER
  --disable-usage-stats
"""


@pytest.fixture(autouse=True)
def no_ray_here(monkeypatch):
    # The host's /proc also shows Ray running inside sandbox nodes: never look at it here.
    monkeypatch.setattr(ray_procs, "ray_processes", lambda **kwargs: [])


@pytest.fixture(autouse=True)
def no_gcs_connection(monkeypatch):
    """No test reaches a real GCS: without a patch of its own, a head's GCS does not answer."""
    monkeypatch.setattr(node_session.Session, "gcs_answers", lambda self, plan: "Connection refused (test)")


def base_args(tmp, role="head", **over):
    args = {
        "role": role,
        "node_ip": "198.18.0.11",
        "head_ip": "198.18.0.11",
        "venv": "%s/venv" % tmp,
        "num_cpus": 2,
        "num_gpus": 8,
        "memory": 2147483648,
        "auth": False,
        "env_files": [],
        "config_dir": "%s/etc" % tmp,
        "state_dir": "%s/run" % tmp,
        "unit_dir": "%s/units" % tmp,
    }
    args.update(over)
    return args


def test_stop_with_nothing_running_changes_nothing(tmp_path, monkeypatch):
    case = {"args": base_args(tmp_path, state="absent"), "expect": {"changed": False, "stopped": [], "removed": []}}
    result = run_case(case, ray_node.main, tmp_path, monkeypatch)
    assert result["leftovers"] == {"processes": [], "ports": [], "gpu_processes": []}


def test_absent_removes_what_raygate_wrote(tmp_path, monkeypatch):
    for path in ("etc/ray.env", "etc/labels.yaml", "etc/auth_token", "run/ray-node.json"):
        (tmp_path / path).parent.mkdir(exist_ok=True)
        (tmp_path / path).write_text("x")
    args = base_args(tmp_path, state="absent", auth_token_file="%s/etc/auth_token" % tmp_path)
    case = {"args": args, "expect": {"changed": True}, "absent": ["{tmp}/etc", "{tmp}/run", "{tmp}/run.lock"]}
    result = run_case(case, ray_node.main, tmp_path, monkeypatch)
    assert sorted(os.path.basename(p) for p in result["removed"]) == [
        "auth_token",
        "labels.yaml",
        "ray-node.json",
        "ray.env",
    ]


def test_a_call_still_at_work_on_the_node_is_waited_for_then_named(tmp_path, monkeypatch):
    # A head start launched in the background by a run that was killed goes on: the next run's call
    # waits for it (start_timeout plus drain_timeout), and changes nothing when it is still there.
    lock = tmp_path / "run.lock"
    fd = os.open(str(lock), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, b"4242\n")
    try:
        case = {
            "args": base_args(tmp_path, state="absent", start_timeout=1, drain_timeout=0),
            "expect": {"failed": True},
            "expect_contains": {
                "msg": ["another ray_node call (or the node watcher", "pid 4242", str(lock), "after 1 s"]
            },
        }
        run_case(case, ray_node.main, tmp_path, monkeypatch)  # no command ran: none was expected
    finally:
        os.close(fd)


def bind_outside_ephemeral_range(sock):
    # A port below the ephemeral range, so the plan itself stays valid.
    for port in range(20000, 30000, 7):
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        sock.listen()
        return port
    pytest.fail("no free port between 20000 and 30000")


def test_bound_port_fails_naming_the_process(tmp_path, monkeypatch):
    with socket.socket() as sock:
        port = bind_outside_ephemeral_range(sock)
        args = base_args(tmp_path, ports={"gcs": port})
        case = {"args": args, "check_mode": True, "expect": {"failed": True}}
        result = run_case(case, ray_node.main, tmp_path, monkeypatch)
    assert "port %d is already bound by" % port in result["msg"]
    assert "(pid %d)" % os.getpid() in result["msg"]
    assert result["busy_ports"] == [port]


def test_invalid_plan_fails_before_any_command(tmp_path, monkeypatch):
    args = base_args(tmp_path, ports={"dashboard": 6379})
    case = {"args": args, "expect": {"failed": True, "msg_contains": ["invalid port plan", "6379"]}}
    run_case(case, ray_node.main, tmp_path, monkeypatch)


def test_worker_needs_head_ip(tmp_path, monkeypatch):
    args = base_args(tmp_path, role="worker", head_ip=None)
    run_case({"args": args, "expect": {"msg_contains": "head_ip is required"}}, ray_node.main, tmp_path, monkeypatch)


def test_check_mode_start_reports_change_and_runs_nothing(tmp_path, monkeypatch):
    case = {"args": base_args(tmp_path), "check_mode": True, "expect": {"changed": True}, "absent": ["{tmp}/run"]}
    run_case(case, ray_node.main, tmp_path, monkeypatch)


def test_start_runs_ray_start_with_the_plan(tmp_path, monkeypatch):
    ray = fake_venv(tmp_path)
    monkeypatch.setattr(node_step.Node, "wait_head", lambda self, url: None)
    monkeypatch.setattr(node_step.Node, "_raylet_up", lambda self: (True, {"pid": 4242}))
    expected_start = [
        ray, "start", "--head", "--node-ip-address=198.18.0.11",
        "--port=6379", "--dashboard-port=8265", "--ray-client-server-port=10001",
        "--node-manager-port=8076", "--object-manager-port=8077",
        "--dashboard-agent-listen-port=8266", "--dashboard-agent-grpc-port=8267",
        "--metrics-export-port=8269", "--min-worker-port=10002", "--max-worker-port=10999",
        "--num-cpus=2", "--num-gpus=8", "--memory=2147483648",
        '--resources={{"accel_a":1}}', "--labels-file={tmp}/etc/labels.yaml",
        "--dashboard-host=198.18.0.11", "--disable-usage-stats",
    ]  # fmt: skip
    case = {
        "args": base_args(tmp_path, resources={"accel_a": 1}, labels={"rack": "r1"}),
        "commands": [{"cmd": [ray, "start", "--help"], "out": HELP}, {"cmd": expected_start, "out": "started"}],
        "expect": {"changed": True, "pid": 4242, "dropped_ports": ["runtime_env_agent"]},
        "exists": ["{tmp}/etc/ray.env", "{tmp}/etc/labels.yaml", "{tmp}/run/ray-node.json"],
    }
    run_case(case, ray_node.main, tmp_path, monkeypatch)
    env = (tmp_path / "etc" / "ray.env").read_text()
    assert "AUTOSCALER_METRIC_PORT=8270" in env and "DASHBOARD_METRIC_PORT=8271" in env


def test_worker_args_point_at_the_head_and_skip_head_flags(tmp_path):
    class Stub:
        params = dict(
            base_args(tmp_path, role="worker", head_ip="198.18.0.11", node_ip="198.18.0.12"),
            resources={},
            labels={},
            dashboard_host=None,
            temp_dir="/data/ray",
            object_store_memory=None,
            ports={},
            port_offset=0,
            min_worker_ports=64,
            env={},
            supervisor="process",
            unit_name="raygate-ray",
            auth_token_file="/etc/raygate/auth_token",
            start_timeout=60,
            dashboard_proxy=False,
            dashboard_proxy_run_dir="/run/raygate-dashboard-proxy",
            dashboard_proxy_unit="raygate-dashboard-proxy",
        )

    node = node_step.Node(Stub())
    from ansible_collections.raygate.cluster.plugins.module_utils.net import port_plan as pp

    args, dropped = node.command.args(pp.build_plan({}), None)
    assert args[2] == "--address=198.18.0.11:6379"
    head_only = ("--port=", "--dashboard-port", "--dashboard-host", "--ray-client", "--temp-dir")
    assert not any(a.startswith(head_only) for a in args)
    assert "--dashboard-agent-grpc-port=8267" in args
    assert dropped == []


def render(tmp_path):
    ray = tmp_path / "ray"
    ray.write_text("#!/bin/sh\n")
    ray.chmod(0o755)
    cmd = [str(ray), "start", "--head", "--port=6379", '--resources={"a b":1}']
    return node_unit.render_unit(
        "head", cmd, ["/etc/raygate/ray.env", "/etc/raygate/nccl.env"], venv_bin="/opt/raygate/ray-2.60.0-py3.11/bin"
    )


def test_unit_shape(tmp_path):
    unit = render(tmp_path)
    assert "KillMode=mixed" in unit and "SuccessExitStatus=1" in unit
    # `ray start --block` exits 1 when its raylet dies too: only Restart=always brings the node back.
    assert "Restart=always" in unit and "Restart=on-failure" not in unit
    assert "ExecStop" not in unit
    assert "EnvironmentFile=-/etc/raygate/nccl.env" in unit
    # A job's `python` is Ray's: the virtualenv comes first on PATH, before any env file may change it.
    path = [line for line in unit.splitlines() if line.startswith("Environment=PATH=")]
    assert path == ["Environment=PATH=/opt/raygate/ray-2.60.0-py3.11/bin:" + node_step.DEFAULT_PATH], unit
    assert unit.index("Environment=PATH=") < unit.index("EnvironmentFile=")
    exec_line = [line for line in unit.splitlines() if line.startswith("ExecStart=")][0]
    assert exec_line.endswith("--block")
    assert '"--resources={\\"a b\\":1}"' in exec_line


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze is not installed")
def test_unit_passes_systemd_analyze_verify(tmp_path):
    path = tmp_path / "raygate-ray.service"
    path.write_text(render(tmp_path))
    proc = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(path)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "raygate-ray.service" not in proc.stderr, proc.stderr


def started_head(monkeypatch):
    waited = []
    monkeypatch.setattr(node_step.Node, "wait_head", lambda self, url: waited.append("dashboard"))
    monkeypatch.setattr(node_step.Node, "wait_gcs", lambda self, plan: waited.append("gcs"))
    monkeypatch.setattr(node_step.Node, "_raylet_up", lambda self: (True, {"pid": 4242}))
    return waited


def test_start_flags_are_asked_once_per_virtualenv(tmp_path, monkeypatch):
    ray = fake_venv(tmp_path)
    started_head(monkeypatch)
    calls = []

    def fake_run(self, args, **kwargs):
        calls.append(args[:3])
        return (0, HELP, "") if args[1:] == ["start", "--help"] else (0, "started", "")

    monkeypatch.setattr(node_step.Node, "run", fake_run)
    for _attempt in range(2):
        (tmp_path / "run").mkdir(exist_ok=True)
        for f in (tmp_path / "run").iterdir():
            f.unlink()  # not running any more: the second call starts again
        run_case({"args": base_args(tmp_path), "expect": {"changed": True}}, ray_node.main, tmp_path, monkeypatch)
    assert calls.count([ray, "start", "--help"]) == 1, calls
    assert calls.count([ray, "start", "--head"]) == 2, calls
    cache = tmp_path / "venv" / "raygate-start-flags.json"
    assert "--dashboard-agent-grpc-port" in cache.read_text()
    # A different Ray behind the same path (reinstalled: new mtime/size) asks again.
    (tmp_path / "venv" / "bin" / "ray").write_text("#!/bin/sh\n# reinstalled\n")
    for f in (tmp_path / "run").iterdir():
        f.unlink()
    run_case({"args": base_args(tmp_path), "expect": {"changed": True}}, ray_node.main, tmp_path, monkeypatch)
    assert calls.count([ray, "start", "--help"]) == 2, calls


def test_head_wait_gcs_skips_the_dashboard(tmp_path, monkeypatch):
    ray = fake_venv(tmp_path)
    waited = started_head(monkeypatch)
    monkeypatch.setattr(node_step.Node, "run", lambda self, args, **kw: (0, HELP if "--help" in args else "", ""))
    run_case({"args": base_args(tmp_path, head_wait="gcs"), "expect": {"changed": True}}, ray_node.main, tmp_path,
             monkeypatch)  # fmt: skip
    assert waited == ["gcs"]
    assert os.access(ray, os.X_OK)


def test_auth_token_is_written_0600_and_never_returned(tmp_path, monkeypatch):
    fake_venv(tmp_path)
    started_head(monkeypatch)
    monkeypatch.setattr(node_step.Node, "run", lambda self, args, **kw: (0, HELP if "--help" in args else "", ""))
    token_file = tmp_path / "etc" / "auth_token"
    secret = "0123456789abcdef" * 4
    args = base_args(tmp_path, auth=True, auth_token=secret, auth_token_file=str(token_file))
    result = run_case({"args": args, "diff_mode": True, "expect": {"changed": True}}, ray_node.main, tmp_path,
                      monkeypatch)  # fmt: skip
    assert token_file.read_text() == secret + "\n"
    assert oct(token_file.stat().st_mode & 0o777) == "0o600"
    assert secret not in str(result)


def test_auth_token_check_mode_writes_nothing_and_predicts_a_change(tmp_path, monkeypatch):
    fake_venv(tmp_path)
    token_file = tmp_path / "etc" / "auth_token"
    args = base_args(tmp_path, auth=True, auth_token="abc", auth_token_file=str(token_file))
    result = run_case({"args": args, "check_mode": True, "expect": {"changed": True}},
                      ray_node.main, tmp_path, monkeypatch)  # fmt: skip
    assert not token_file.exists()
    assert "abc" not in str(result)


def test_empty_auth_token_is_refused(tmp_path, monkeypatch):
    fake_venv(tmp_path)
    args = base_args(tmp_path, auth=True, auth_token="  ", auth_token_file=str(tmp_path / "t"))
    run_case({"args": args, "expect": {"failed": True, "msg_contains": "auth_token is empty"}}, ray_node.main,
             tmp_path, monkeypatch)  # fmt: skip
    assert not (tmp_path / "t").exists()


def test_absent_removes_extra_files_and_reports_the_change(tmp_path, monkeypatch):
    extra = tmp_path / "textfile" / "raygate_health.prom"
    extra.parent.mkdir()
    extra.write_text("raygate_health_node_healthy 1\n")
    args = base_args(tmp_path, state="absent", extra_files=[str(extra), str(tmp_path / "missing.prom")])
    run_case({"args": args, "expect": {"changed": True, "removed": [str(extra)]}},
             ray_node.main, tmp_path, monkeypatch)  # fmt: skip
    assert not extra.exists()
    run_case({"args": args, "expect": {"changed": False, "removed": []}}, ray_node.main,
             tmp_path, monkeypatch)  # fmt: skip


def test_stop_terminates_raylet_then_the_rest_then_the_gcs(tmp_path, monkeypatch):
    # Ray's own order: the GCS lingers while its clients live, so it gets SIGTERM last.
    alive = {1: "gcs_server", 2: "raylet", 3: "python", 4: "ray::IDLE"}
    sent = []

    def procs(**kwargs):
        return [{"pid": pid, "comm": comm, "argv": [comm]} for pid, comm in sorted(alive.items())]

    def kill(pid, sig):
        sent.append((alive.get(pid), sig))
        alive.pop(pid, None)
        if pid == 2:
            alive.pop(4, None)  # the raylet's workers go with it

    monkeypatch.setattr(ray_procs, "ray_processes", procs)
    monkeypatch.setattr(node_step.os, "kill", kill)
    monkeypatch.setattr(
        node_step.Node, "leftovers", lambda self, plan: {"processes": [], "ports": [], "gpu_processes": []}
    )
    run_case({"args": base_args(tmp_path, state="stopped"), "expect": {"changed": True}}, ray_node.main, tmp_path,
             monkeypatch)  # fmt: skip
    assert [name for name, sig in sent] == ["raylet", "python", "gcs_server"]
    assert all(sig == node_stop.signal.SIGTERM for name, sig in sent)


def worker_with_raylet(monkeypatch, on_kill=None):
    """A worker whose raylet (node id abc123) and agent run; the raylet exits after a drain when
    ``exit_on_drain`` is set. Returns the dict of alive processes and the list of signals sent."""
    alive = {2: "raylet", 3: "python"}
    sent = []

    def procs(**kwargs):
        return [
            {"pid": pid, "comm": comm, "argv": [comm, "--node_id=abc123"] if comm == "raylet" else [comm]}
            for pid, comm in sorted(alive.items())
        ]

    def kill(pid, sig):
        sent.append((alive.get(pid), sig))
        alive.pop(pid, None)

    monkeypatch.setattr(ray_procs, "ray_processes", procs)
    monkeypatch.setattr(node_step.os, "kill", kill)
    monkeypatch.setattr(
        node_step.Node, "leftovers", lambda self, plan: {"processes": [], "ports": [], "gpu_processes": []}
    )
    return alive, sent


def drain_args(tmp_path, **over):
    fake_venv(tmp_path)
    args = base_args(tmp_path, role="worker", state="stopped", drain=True, drain_timeout=30)
    args.update(over)
    return args


def test_drain_asks_ray_then_waits_for_the_raylet_to_exit(tmp_path, monkeypatch):
    alive, sent = worker_with_raylet(monkeypatch)
    calls = []

    def fake_run(self, args, **kw):
        calls.append(args)
        alive.pop(2, None)  # Ray ends a drained, idle raylet by itself
        return 0, "", ""

    monkeypatch.setattr(node_step.Node, "run", fake_run)
    result = run_case({"args": drain_args(tmp_path), "expect": {"changed": True, "drained": True}}, ray_node.main,
                      tmp_path, monkeypatch)  # fmt: skip
    assert len(calls) == 1
    args = calls[0]
    assert args[1] == "drain-node"
    assert args[args.index("--node-id") + 1] == "abc123"
    assert args[args.index("--address") + 1] == "198.18.0.11:6379"
    assert args[args.index("--reason") + 1] == "DRAIN_NODE_REASON_PREEMPTION"
    assert args[args.index("--deadline-remaining-seconds") + 1] == "30"
    # The raylet left by itself: only the agent was signalled.
    assert [name for name, sig in sent] == ["python"]
    assert result["drain_timed_out"] is False


def test_refused_drain_fails_before_anything_stops(tmp_path, monkeypatch):
    alive, sent = worker_with_raylet(monkeypatch)
    monkeypatch.setattr(
        node_step.Node, "run", lambda self, args, **kw: (1, "", "The drain request is not accepted: node is busy")
    )
    run_case({"args": drain_args(tmp_path), "expect": {"failed": True, "msg_contains": "refused to drain"}},
             ray_node.main, tmp_path, monkeypatch)  # fmt: skip
    assert sent == [] and sorted(alive) == [2, 3]


def test_ray_without_drain_node_is_stopped_with_a_warning(tmp_path, monkeypatch):
    alive, sent = worker_with_raylet(monkeypatch)
    monkeypatch.setattr(node_step.Node, "run", lambda self, args, **kw: (2, "", "Error: No such command 'drain-node'."))
    case = {"args": drain_args(tmp_path), "expect": {"changed": True, "drained": False},
            "warnings_contain": ["no drain-node"]}  # fmt: skip
    run_case(case, ray_node.main, tmp_path, monkeypatch)
    assert [name for name, sig in sent] == ["raylet", "python"]


def test_drain_is_refused_for_the_head(tmp_path, monkeypatch):
    alive, sent = worker_with_raylet(monkeypatch)
    args = drain_args(tmp_path, role="head")
    run_case({"args": args, "expect": {"failed": True, "msg_contains": "drain is for workers"}}, ray_node.main,
             tmp_path, monkeypatch)  # fmt: skip
    assert sent == []


def test_drain_in_check_mode_only_predicts(tmp_path, monkeypatch):
    alive, sent = worker_with_raylet(monkeypatch)
    monkeypatch.setattr(node_step.Node, "run", lambda self, args, **kw: pytest.fail("ran %s in check mode" % args))
    run_case({"args": drain_args(tmp_path), "check_mode": True, "expect": {"changed": True, "drained": True}},
             ray_node.main, tmp_path, monkeypatch)  # fmt: skip
    assert sent == []


def test_worker_without_a_raylet_is_cleared_and_started_again(tmp_path, monkeypatch):
    # Its raylet died (or a drain ended it); the agent lingers and holds ports. Not a member:
    # restarting it disturbs nothing, leaving it would keep the node out of the cluster.
    fake_venv(tmp_path)
    alive, sent = worker_with_raylet(monkeypatch)
    alive.pop(2)
    monkeypatch.setattr(node_step.Node, "run", lambda self, args, **kw: (0, HELP if "--help" in args else "", ""))
    monkeypatch.setattr(node_step.Node, "_raylet_up", lambda self: (True, {"pid": 77}))
    args = base_args(tmp_path, role="worker", head_ip="198.18.0.12")
    case = {"args": args, "expect": {"changed": True, "restarted": True, "pid": 77},
            "warnings_contain": ["no raylet runs on this worker"]}  # fmt: skip
    run_case(case, ray_node.main, tmp_path, monkeypatch)
    assert [name for name, sig in sent] == ["python"]


def restartable(monkeypatch):
    """Fakes for a start after a stop: `ray start --help` and `ray start` succeed, a raylet 77 appears."""
    monkeypatch.setattr(node_step.Node, "run", lambda self, args, **kw: (0, HELP if "--help" in args else "", ""))
    monkeypatch.setattr(node_step.Node, "_raylet_up", lambda self: (True, {"pid": 77}))
    monkeypatch.setattr(node_step.Node, "wait_gcs", lambda self, plan: None)
    monkeypatch.setattr(node_step.Node, "wait_head", lambda self, url: None)


def test_head_without_a_raylet_is_cleared_and_started_again(tmp_path, monkeypatch):
    # Only a dead session's helpers are left (the GCS crashed, its raylet gave up): a re-run
    # must bring the head back instead of trusting that some Ray process exists.
    fake_venv(tmp_path)
    alive, sent = worker_with_raylet(monkeypatch)
    alive.pop(2)
    alive[1] = "gcs_server"
    restartable(monkeypatch)
    case = {"args": base_args(tmp_path), "expect": {"changed": True, "restarted": True, "new_session": True},
            "warnings_contain": ["the head is not working: no raylet runs"]}  # fmt: skip
    run_case(case, ray_node.main, tmp_path, monkeypatch)
    assert sorted(name for name, sig in sent) == ["gcs_server", "python"]


def test_head_whose_gcs_does_not_answer_is_started_again(tmp_path, monkeypatch):
    fake_venv(tmp_path)
    alive, sent = worker_with_raylet(monkeypatch)
    alive[1] = "gcs_server"
    restartable(monkeypatch)
    monkeypatch.setattr(node_session.Session, "gcs_answers", lambda self, plan: "Connection refused")
    case = {"args": base_args(tmp_path), "expect": {"changed": True, "restarted": True},
            "warnings_contain": ["its GCS does not answer", "Connection refused"]}  # fmt: skip
    run_case(case, ray_node.main, tmp_path, monkeypatch)
    assert sorted(name for name, sig in sent) == ["gcs_server", "python", "raylet"]


def test_head_whose_gcs_answers_is_left_alone(tmp_path, monkeypatch):
    fake_venv(tmp_path)
    alive, sent = worker_with_raylet(monkeypatch)
    alive[1] = "gcs_server"
    monkeypatch.setattr(node_session.Session, "gcs_answers", lambda self, plan: None)
    monkeypatch.setattr(node_step.Node, "run", lambda self, args, **kw: (0, HELP if "--help" in args else "", ""))
    case = {"args": base_args(tmp_path), "check_mode": True, "expect": {"changed": False, "restarted": False},
            "warnings_contain": ["not started by raygate"]}  # fmt: skip
    run_case(case, ray_node.main, tmp_path, monkeypatch)
    assert sent == []


def test_worker_the_gcs_does_not_list_is_started_again(tmp_path, monkeypatch):
    # The head came back as a new cluster: this raylet belongs to the dead one.
    fake_venv(tmp_path)
    alive, sent = worker_with_raylet(monkeypatch)
    restartable(monkeypatch)
    args = base_args(tmp_path, role="worker", head_ip="198.18.0.12", member=False)
    case = {"args": args, "expect": {"changed": True, "restarted": True, "pid": 77},
            "warnings_contain": ["does not list this worker alive"]}  # fmt: skip
    run_case(case, ray_node.main, tmp_path, monkeypatch)
    assert [name for name, sig in sent] == ["raylet", "python"]


def test_interrupted_start_is_recorded(tmp_path, monkeypatch):
    # The record is written before `ray start`: a run killed during the start leaves a node
    # whose configuration the next run recognises.
    fake_venv(tmp_path)
    restartable(monkeypatch)
    monkeypatch.setattr(ray_procs, "ray_processes", lambda **kw: [])

    def killed(self, args, env, digest):
        raise KeyboardInterrupt

    monkeypatch.setattr(node_step.Node, "launch", killed)
    args = base_args(tmp_path, role="worker", head_ip="198.18.0.12")
    with pytest.raises(KeyboardInterrupt):
        run_case({"args": args, "expect": {}}, ray_node.main, tmp_path, monkeypatch)
    record = json.loads((tmp_path / "run" / node_step.STATE_FILE).read_text())
    assert record["pid"] is None and len(record["config_hash"]) == 16


def token_drift_case(tmp_path, monkeypatch, **over):
    fake_venv(tmp_path)
    alive, sent = worker_with_raylet(monkeypatch)
    args = base_args(tmp_path, role="worker", head_ip="198.18.0.12", auth=True, auth_token="new-token", **over)
    args["auth_token_file"] = str(tmp_path / "etc" / "auth_token")
    os.makedirs(os.path.dirname(args["auth_token_file"]), exist_ok=True)
    with open(args["auth_token_file"], "w") as fh:
        fh.write("old-token\n")
    return args, alive, sent


def test_token_drift_fails_before_anything_changes(tmp_path, monkeypatch):
    args, alive, sent = token_drift_case(tmp_path, monkeypatch)
    monkeypatch.setattr(node_step.Node, "run", lambda self, a, **kw: pytest.fail("ran %s" % a))
    case = {
        "args": args,
        "expect": {"failed": True, "token_drift": True},
        "expect_contains": {"msg": ["another auth token", "raygate_rotate_token=true", "Nothing was changed"]},
    }
    run_case(case, ray_node.main, tmp_path, monkeypatch)
    assert sent == [] and open(args["auth_token_file"]).read() == "old-token\n"


def test_token_drift_with_rotate_token_restarts_on_the_new_token(tmp_path, monkeypatch):
    args, alive, sent = token_drift_case(tmp_path, monkeypatch, rotate_token=True)
    restartable(monkeypatch)
    case = {"args": args, "expect": {"changed": True, "restarted": True}, "warnings_contain": ["rotated"]}
    result = run_case(case, ray_node.main, tmp_path, monkeypatch)
    assert [name for name, sig in sent] == ["raylet", "python"]
    assert open(args["auth_token_file"]).read() == "new-token\n"
    assert "new-token" not in json.dumps(result)


def test_unit_keeps_the_config_hash_for_after_a_reboot(tmp_path, monkeypatch):
    # /run/raygate is gone after a reboot; the unit (in /etc) says what raygate started, so a
    # re-run finds the node as it left it and restarts nothing.
    args = base_args(tmp_path, role="worker", head_ip="198.18.0.12", supervisor="systemd")
    node = node_step.Node.__new__(node_step.Node)
    node.p = {name: spec.get("default") for name, spec in node_step.ARGUMENT_SPEC.items()}
    node.p.update(args)
    node.state_path = str(tmp_path / "run" / node_step.STATE_FILE)
    node.unit_path = str(tmp_path / "units" / "raygate-ray.service")
    os.makedirs(tmp_path / "units")
    with open(node.unit_path, "w") as unit:
        unit.write(node_unit.render_unit("worker", ["/x/ray", "start"], [], config_hash="0123abcd"))
    assert node_config.NodeConfig(node).recorded() == {"config_hash": "0123abcd", "role": "worker"}
    node.p["supervisor"] = "process"
    assert node_config.NodeConfig(node).recorded() == {}


def test_systemd_supervisor_without_systemd_fails_before_anything(tmp_path, monkeypatch):
    fake_venv(tmp_path)
    monkeypatch.setattr(node_step.files, "systemd_booted", lambda: False)
    monkeypatch.setattr(node_step.Node, "run", lambda self, args, **kw: pytest.fail("ran %s" % args))
    case = {"args": base_args(tmp_path, supervisor="systemd"), "expect": {"failed": True},
            "expect_contains": {"msg": ["systemd is not the init system", "raygate_supervisor"]}}  # fmt: skip
    run_case(case, ray_node.main, tmp_path, monkeypatch)
    assert not (tmp_path / "units").exists() and not (tmp_path / "etc").exists()


# ---- status labels: the node's state, never its configuration -----------------------------

OLD_CHECK = nl.health("pass", 1785283200, "d88dcaf0b538")  # 2026-07-29
NEW_CHECK = nl.health("warn", 1785369600, "d88dcaf0b538")  # 2026-07-30


def labelled_worker(tmp_path, **over):
    return base_args(tmp_path, role="worker", head_ip="198.18.0.12", labels={"rack": "r1"}, **over)


def recording_start(monkeypatch):
    """`ray start --help` and `ray start` succeed and are recorded; a raylet 77 appears."""
    ran = []

    def fake_run(self, args, **kw):
        ran.append(list(args))
        return 0, HELP if "--help" in args else "", ""

    monkeypatch.setattr(node_step.Node, "run", fake_run)
    monkeypatch.setattr(node_step.Node, "_raylet_up", lambda self: (True, {"pid": 77}))
    return ran


def now_running(monkeypatch):
    """From here on a raylet (pid 77) runs on this node, as the start above left it."""
    procs = [{"pid": 77, "comm": "raylet", "argv": ["raylet", "--node_id=abc123"]}]
    monkeypatch.setattr(ray_procs, "ray_processes", lambda **kw: procs)


def labels_file(tmp_path):
    """The labels file as Ray reads it: YAML, so comments are skipped (its body is JSON)."""
    text = (tmp_path / "etc" / "labels.yaml").read_text()
    return yaml.safe_load(text), text


def test_status_labels_join_the_labels_file_ray_starts_with(tmp_path, monkeypatch):
    fake_venv(tmp_path)
    ran = recording_start(monkeypatch)
    case = {"args": labelled_worker(tmp_path, status_labels=OLD_CHECK),
            "expect": {"changed": True, "status_labels": OLD_CHECK}}  # fmt: skip
    run_case(case, ray_node.main, tmp_path, monkeypatch)
    start = [args for args in ran if "--help" not in args][0]
    assert "--labels-file=%s/etc/labels.yaml" % tmp_path in start
    labels, text = labels_file(tmp_path)
    assert labels == dict(OLD_CHECK, rack="r1")
    assert all(isinstance(value, str) for value in labels.values())  # Ray refuses other types
    assert nl.status_from_file(text) == OLD_CHECK


def test_status_labels_alone_pass_the_labels_file(tmp_path, monkeypatch):
    fake_venv(tmp_path)
    ran = recording_start(monkeypatch)
    status = {"raygate.io/checked-at": 1785283200}
    args = base_args(tmp_path, role="worker", head_ip="198.18.0.12", status_labels=status)
    run_case({"args": args, "expect": {"changed": True}}, ray_node.main, tmp_path, monkeypatch)
    assert any(a.startswith("--labels-file=") for a in ran[-1])
    # A templated number arrives as an int: Ray reads only strings from the file.
    assert labels_file(tmp_path)[0] == {"raygate.io/checked-at": "1785283200"}


def test_a_newer_check_restarts_nothing_and_reports_the_labels_the_node_carries(tmp_path, monkeypatch):
    fake_venv(tmp_path)
    recording_start(monkeypatch)
    run_case({"args": labelled_worker(tmp_path, status_labels=OLD_CHECK), "expect": {"changed": True}},
             ray_node.main, tmp_path, monkeypatch)  # fmt: skip
    before = (tmp_path / "etc" / "labels.yaml").read_text()
    now_running(monkeypatch)
    monkeypatch.setattr(node_step.Node, "run", lambda self, args, **kw: pytest.fail("ran %s" % args))
    monkeypatch.setattr(node_step.os, "kill", lambda pid, sig: pytest.fail("signalled %s" % pid))
    # restart_on_change: a node whose configuration differed would be restarted now.
    case = {"args": labelled_worker(tmp_path, status_labels=NEW_CHECK, restart_on_change=True),
            "expect": {"changed": False, "restarted": False, "new_session": False, "pid": 77,
                       "status_labels": OLD_CHECK}, "no_warnings": True}  # fmt: skip
    run_case(case, ray_node.main, tmp_path, monkeypatch)
    assert (tmp_path / "etc" / "labels.yaml").read_text() == before
    # Not given at all (a member the gate did not check again): the same.
    case = {"args": labelled_worker(tmp_path, restart_on_change=True),
            "expect": {"changed": False, "status_labels": OLD_CHECK}, "no_warnings": True}  # fmt: skip
    run_case(case, ray_node.main, tmp_path, monkeypatch)


def test_a_restarted_node_keeps_its_status_labels_unless_new_ones_are_given(tmp_path, monkeypatch):
    # The head came back as a new cluster (member: false): a restart for that says nothing new
    # about the node's health, and jobs selecting on it would otherwise find no node.
    fake_venv(tmp_path)
    recording_start(monkeypatch)
    run_case({"args": labelled_worker(tmp_path, status_labels=OLD_CHECK), "expect": {"changed": True}},
             ray_node.main, tmp_path, monkeypatch)  # fmt: skip
    alive, sent = worker_with_raylet(monkeypatch)
    recording_start(monkeypatch)
    case = {"args": labelled_worker(tmp_path, member=False),
            "expect": {"changed": True, "restarted": True, "status_labels": OLD_CHECK}}  # fmt: skip
    run_case(case, ray_node.main, tmp_path, monkeypatch)
    assert labels_file(tmp_path)[0] == dict(OLD_CHECK, rack="r1")
    alive.update({2: "raylet", 3: "python"})
    case = {"args": labelled_worker(tmp_path, member=False, status_labels={}),
            "expect": {"changed": True, "restarted": True, "status_labels": {}}}  # fmt: skip
    run_case(case, ray_node.main, tmp_path, monkeypatch)
    labels, text = labels_file(tmp_path)
    assert labels == {"rack": "r1"} and nl.status_from_file(text) == {}


def test_a_stopped_node_starts_again_with_the_status_labels_of_its_last_start(tmp_path, monkeypatch):
    # upgrade.yml stops every node, switches the version and starts them: nothing new is known of
    # their health, and jobs selecting on it would otherwise find no node.
    fake_venv(tmp_path)
    ran = recording_start(monkeypatch)
    args = labelled_worker(tmp_path, status_labels=OLD_CHECK)
    run_case({"args": args, "expect": {"changed": True}}, ray_node.main, tmp_path, monkeypatch)
    (tmp_path / "run" / node_step.STATE_FILE).unlink()  # stopped (the state file goes with it)
    del args["status_labels"]
    run_case({"args": args, "expect": {"changed": True, "status_labels": OLD_CHECK}}, ray_node.main, tmp_path,
             monkeypatch)  # fmt: skip
    assert any(a.startswith("--labels-file=") for a in ran[-1])
    assert labels_file(tmp_path)[0] == dict(OLD_CHECK, rack="r1")
    # A key that became a label of the configuration is no longer carried as a status label.
    (tmp_path / "run" / node_step.STATE_FILE).unlink()
    args["labels"] = {"rack": "r1", "raygate.io/health": "manual"}
    carried = dict(OLD_CHECK)
    del carried["raygate.io/health"]
    run_case({"args": args, "expect": {"changed": True, "status_labels": carried}}, ray_node.main, tmp_path,
             monkeypatch)  # fmt: skip
    assert labels_file(tmp_path)[0]["raygate.io/health"] == "manual"


def test_a_stop_with_empty_status_labels_forgets_them(tmp_path, monkeypatch):
    # The gate evicted the node (health.yml): a later start must not say it passed.
    fake_venv(tmp_path)
    ran = recording_start(monkeypatch)
    status_only = base_args(tmp_path, role="worker", head_ip="198.18.0.12", status_labels=OLD_CHECK)
    run_case({"args": status_only, "expect": {"changed": True}}, ray_node.main, tmp_path, monkeypatch)
    before = (tmp_path / "etc" / "labels.yaml").read_text()
    stop = dict(status_only, state="stopped", status_labels={})
    monkeypatch.setattr(
        node_step.Node, "leftovers", lambda self, plan: {"processes": [], "ports": [], "gpu_processes": []}
    )
    case = {"args": stop, "check_mode": True, "expect": {"changed": True, "status_labels_forgotten": True}}
    run_case(case, ray_node.main, tmp_path, monkeypatch)
    assert (tmp_path / "etc" / "labels.yaml").read_text() == before
    run_case({"args": stop, "expect": {"changed": True, "status_labels_forgotten": True}}, ray_node.main, tmp_path,
             monkeypatch)  # fmt: skip
    # Still there, empty: a systemd unit started with --labels-file passes it at the next boot.
    assert labels_file(tmp_path)[0] == {}
    run_case({"args": stop, "expect": {"changed": False, "status_labels_forgotten": False}}, ray_node.main, tmp_path,
             monkeypatch)  # fmt: skip
    del status_only["status_labels"]
    run_case({"args": status_only, "expect": {"changed": True, "status_labels": {}}}, ray_node.main, tmp_path,
             monkeypatch)  # fmt: skip
    assert not any(a.startswith("--labels-file=") for a in ran[-1])
    # No labels at all: no file is left to claim labels the node does not carry.
    assert not (tmp_path / "etc" / "labels.yaml").exists()


def test_check_mode_says_which_status_labels_a_start_would_give(tmp_path, monkeypatch):
    fake_venv(tmp_path)
    case = {"args": labelled_worker(tmp_path, status_labels=NEW_CHECK), "check_mode": True,
            "expect": {"changed": True, "status_labels": NEW_CHECK}}  # fmt: skip
    run_case(case, ray_node.main, tmp_path, monkeypatch)
    assert not (tmp_path / "etc").exists()


@pytest.mark.parametrize(
    "labels, status, needles",
    [
        ({}, {"ray.io/health": "pass"}, ["status_labels", "ray.io/health", "Ray's own"]),
        ({}, {"raygate.io/health": "not ok"}, ["raygate.io/health", "'not ok'"]),
        ({}, {"raygate.io/checked-at": 1785283200.5}, ["must be a string", "1785283200.5"]),
        ({}, {"raygate.io/health": None}, ["must be a string"]),
        ({}, {"raygate.io/": "pass"}, ["name ''"]),
        ({}, {"-raygate.io/health": "pass"}, ["prefix '-raygate.io'"]),
        ({}, {"raygate.io/health": "x" * 64}, ["raygate.io/health"]),
        ({"rack": "r1"}, {"rack": "r2"}, ["rack in both labels and status_labels"]),
        ({"rack": "r 1"}, {}, ["invalid Ray node label in labels", "'r 1'"]),
    ],
)
def test_bad_labels_fail_before_anything_changes(tmp_path, monkeypatch, labels, status, needles):
    fake_venv(tmp_path)
    alive, sent = worker_with_raylet(monkeypatch)
    monkeypatch.setattr(node_step.Node, "run", lambda self, args, **kw: pytest.fail("ran %s" % args))
    args = base_args(tmp_path, role="worker", head_ip="198.18.0.12", labels=labels, status_labels=status,
                     restart_on_change=True)  # fmt: skip
    case = {"args": args, "expect": {"failed": True}, "expect_contains": {"msg": needles + ["nothing was changed"]}}
    run_case(case, ray_node.main, tmp_path, monkeypatch)
    assert sent == [] and not (tmp_path / "etc").exists() and not (tmp_path / "run").exists()


def recorded_launches(monkeypatch):
    """Node.run answers `ray start --help` with HELP and records the keyword arguments of every other
    command (the launch: its env, its user); returns that list."""
    launches = []

    def fake_run(self, args, **kwargs):
        if "--help" in args:
            return 0, HELP, ""
        launches.append(kwargs)
        return 0, "", ""

    monkeypatch.setattr(node_step.Node, "run", fake_run)
    return launches


# -- the account Ray runs as (user) -------------------------------------------------------------
def test_unit_of_an_unprivileged_node_names_the_account_and_is_sandboxed(tmp_path):
    ray = tmp_path / "ray"
    ray.write_text("#!/bin/sh\n")
    unit = node_unit.render_unit("worker", [str(ray), "start"], [], user="ray")
    lines = unit.splitlines()
    assert "User=ray" in lines
    for directive in ("NoNewPrivileges=yes", "CapabilityBoundingSet=", "ProtectSystem=full", "ProtectHome=read-only"):
        assert directive in lines, directive
    # Root keeps the unit it had: no account, no sandbox that would take root's powers away.
    plain = node_unit.render_unit("worker", [str(ray), "start"], [], user="root")
    assert "User=" not in plain and "NoNewPrivileges" not in plain


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze is not installed")
def test_the_sandboxed_unit_passes_systemd_analyze_verify(tmp_path):
    ray = tmp_path / "ray"
    ray.write_text("#!/bin/sh\n")
    ray.chmod(0o755)
    path = tmp_path / "raygate-ray.service"
    path.write_text(node_unit.render_unit("worker", [str(ray), "start"], [], user="ray"))
    proc = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(path)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "raygate-ray.service" not in proc.stderr, proc.stderr


def test_a_missing_account_fails_before_anything_changes_naming_the_fix(tmp_path, monkeypatch):
    fake_venv(tmp_path)
    args = base_args(tmp_path, user="raygate-no-such")
    case = {"args": args, "expect": {"failed": True}}
    result = run_case(case, ray_node.main, tmp_path, monkeypatch)
    assert "user raygate-no-such" in result["msg"] and "service_user" in result["msg"]
    assert not (tmp_path / "etc").exists() and not (tmp_path / "run").exists()
    # In check mode the install would create it first: a start is predicted.
    result = run_case({"args": args, "check_mode": True, "expect": {"changed": True}}, ray_node.main, tmp_path,
                      monkeypatch)  # fmt: skip
    assert result["user"] == "raygate-no-such"


def test_a_bad_account_name_is_refused(tmp_path, monkeypatch):
    fake_venv(tmp_path)
    case = {"args": base_args(tmp_path, user="Ray Team"), "check_mode": True,
            "expect": {"failed": True, "msg_contains": "user: 'Ray Team' is not a valid user name"}}  # fmt: skip
    run_case(case, ray_node.main, tmp_path, monkeypatch)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another group needs root")
def test_an_unprivileged_node_starts_as_its_account_and_reads_the_token_by_group(tmp_path, monkeypatch):
    from ansible_collections.raygate.cluster.plugins.module_utils.node import service_user

    fake_venv(tmp_path)
    started_head(monkeypatch)
    owned = []
    monkeypatch.setattr(service_user, "own_tree", lambda path, user: owned.append((path, user.name)))
    launches = recorded_launches(monkeypatch)
    token_file = tmp_path / "etc" / "auth_token"
    args = base_args(tmp_path, user="nobody", auth=True, auth_token="t" * 64, auth_token_file=str(token_file),
                     temp_dir=str(tmp_path / "raytmp"))  # fmt: skip
    result = run_case({"args": args, "expect": {"changed": True, "user": "nobody"}}, ray_node.main, tmp_path,
                      monkeypatch)  # fmt: skip
    nobody = service_user.lookup("nobody")
    assert [kw["user"].name for kw in launches] == ["nobody"]
    st = token_file.stat()
    assert (st.st_uid, st.st_gid, oct(st.st_mode & 0o777)) == (0, nobody.gid, "0o640")
    assert owned == [(str(tmp_path / "raytmp"), "nobody"), ("/tmp/ray", "nobody")]
    # The account is part of the configuration: the same node as root is another one.
    root_hash = run_case({"args": dict(args, user="root"), "check_mode": True, "expect": {"changed": True}},
                         ray_node.main, tmp_path, monkeypatch)["config_hash"]  # fmt: skip
    assert root_hash != result["config_hash"]
    # So are its supplementary groups (raygate_user_groups): a new one restarts Ray, which carries it.
    video = grp.getgrnam("video").gr_gid
    monkeypatch.setattr(service_user, "lookup", lambda name: service_user.ServiceUser(
        nobody.name, nobody.uid, nobody.gid, sorted(set(nobody.groups) | {video}), nobody.home, False))  # fmt: skip
    grouped = run_case({"args": args, "check_mode": True, "expect": {"changed": True}}, ray_node.main, tmp_path,
                       monkeypatch)  # fmt: skip
    assert grouped["config_hash"] not in (result["config_hash"], root_hash)


# -- mutual TLS (tls) ---------------------------------------------------------------------------
PEM_CA = "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----"
PEM_CERT = "-----BEGIN CERTIFICATE-----\nNODE\n-----END CERTIFICATE-----"
PEM_KEY = "-----BEGIN PRIVATE KEY-----\nSECRETKEY\n-----END PRIVATE KEY-----"


def tls_args(tmp_path, **over):
    args = base_args(tmp_path, tls=True, tls_dir=str(tmp_path / "etc" / "tls"), tls_ca_cert=PEM_CA,
                     tls_cert=PEM_CERT, tls_key=PEM_KEY)  # fmt: skip
    args.update(over)
    return args


def test_tls_material_is_written_and_every_ray_process_gets_it(tmp_path, monkeypatch):
    fake_venv(tmp_path)
    started_head(monkeypatch)
    launches = recorded_launches(monkeypatch)
    result = run_case({"args": tls_args(tmp_path), "diff_mode": True, "expect": {"changed": True}}, ray_node.main,
                      tmp_path, monkeypatch)  # fmt: skip
    tls = tmp_path / "etc" / "tls"
    assert (tls / "ca.crt").read_text() == PEM_CA + "\n" and (tls / "node.crt").read_text() == PEM_CERT + "\n"
    assert oct((tls / "node.key").stat().st_mode & 0o777) == "0o600"
    assert "SECRETKEY" not in json.dumps(result)
    (env,) = [kw["env"] for kw in launches]
    assert env["RAY_USE_TLS"] == "1" and env["RAY_TLS_CA_CERT"] == str(tls / "ca.crt")
    assert env["RAY_TLS_SERVER_CERT"] == str(tls / "node.crt") and env["RAY_TLS_SERVER_KEY"] == str(tls / "node.key")
    assert "RAY_USE_TLS=1" in (tmp_path / "etc" / "ray.env").read_text()
    assert result["tls"]
    # Teardown removes the material and its directory.
    run_case({"args": tls_args(tmp_path, state="absent"), "expect": {"changed": True}}, ray_node.main, tmp_path,
             monkeypatch)  # fmt: skip
    assert not tls.exists()


@pytest.mark.parametrize(
    "over,needle",
    [
        ({"tls_key": None}, "give tls_ca_cert, tls_cert and tls_key together"),
        ({"tls_cert": "not a pem"}, "must be PEM text"),
        ({"tls_ca_cert": None, "tls_cert": None, "tls_key": None}, "missing on this node and no material was given"),
    ],
)
def test_bad_tls_material_fails_before_anything_changes(tmp_path, monkeypatch, over, needle):
    fake_venv(tmp_path)
    run_case({"args": tls_args(tmp_path, **over), "expect": {"failed": True, "msg_contains": needle}}, ray_node.main,
             tmp_path, monkeypatch)  # fmt: skip
    assert not (tmp_path / "etc").exists()


def test_a_renewed_certificate_restarts_the_running_node_alone(tmp_path, monkeypatch):
    fake_venv(tmp_path)
    tls = tmp_path / "etc" / "tls"
    tls.mkdir(parents=True)
    (tls / "ca.crt").write_text(PEM_CA + "\n")
    (tls / "node.crt").write_text(PEM_CERT + "\n")
    (tls / "node.key").write_text(PEM_KEY + "\n")
    (tls / "node.key").chmod(0o600)
    raylet = {"pid": 7, "comm": "raylet", "argv": ["raylet"], "flags": {}}
    monkeypatch.setattr(ray_procs, "ray_processes", lambda **kwargs: [raylet])
    monkeypatch.setattr(node_session.Session, "dead", lambda self, plan, procs, raylet: None)
    # The same material, on a node raygate did not record: left alone, as any running node.
    case = {"args": tls_args(tmp_path), "check_mode": True, "expect": {"changed": False, "restarted": False}}
    run_case(case, ray_node.main, tmp_path, monkeypatch)
    # A renewed certificate: restarted whatever restart_on_change says, and said why.
    renewed = PEM_CERT.replace("NODE", "NODE-RENEWED")
    case = {"args": tls_args(tmp_path, tls_cert=renewed), "check_mode": True,
            "expect": {"changed": True, "restarted": True},
            "warnings_contain": ["TLS certificate or CA was renewed"]}  # fmt: skip
    run_case(case, ray_node.main, tmp_path, monkeypatch)
