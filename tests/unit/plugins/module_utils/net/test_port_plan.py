"""Unit tests for the port plan (plugins/module_utils/net/port_plan.py)."""

import os
import socket
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.raygate.cluster.plugins.module_utils.net import port_plan as pp

LINUX_EPHEMERAL = (32768, 60999)
SINGLE_KEYS = [k for k in pp.DEFAULT_PORTS if k not in ("min_worker", "max_worker")]

HEAD_ARGS = [
    "--port=6379",
    "--dashboard-port=8265",
    "--ray-client-server-port=10001",
    "--node-manager-port=8076",
    "--object-manager-port=8077",
    "--dashboard-agent-listen-port=8266",
    "--dashboard-agent-grpc-port=8267",
    "--runtime-env-agent-port=8268",
    "--metrics-export-port=8269",
    "--min-worker-port=10002",
    "--max-worker-port=10999",
]
WORKER_ARGS = HEAD_ARGS[3:]

# A hand-written excerpt in click's help format, modelled on `ray start --help` of an older Ray
# that lacks --runtime-env-agent-port. The wrapped help text mentions that flag (and others) to
# prove that only declarations count, not mentions in descriptions.
OLD_RAY_HELP = """\
Usage: ray start [OPTIONS]

  Start Ray processes manually on the local machine.

Options:
  --node-ip-address TEXT          the IP address of this node
  --address TEXT                  the address to use for Ray
  --port INTEGER                  the port of the head ray process. If not
                                  provided, defaults to 6379; if port is set
                                  to 0, we will allocate an available port.
  --object-manager-port INTEGER   the port to use for starting the object
                                  manager
  --node-manager-port INTEGER     the port to use for starting the node
                                  manager
  --min-worker-port INTEGER       the lowest port number that workers will
                                  bind on. If not set, random ports will be
                                  chosen.
  --max-worker-port INTEGER       the highest port number that workers will
                                  bind on. If set, '--min-worker-port' must
                                  also be set.
  --worker-port-list TEXT         a comma-separated list of open ports for
                                  workers to bind on. Overrides '--min-worker-
                                  port' and '--max-worker-port'.
  --ray-client-server-port INTEGER
                                  the port number the ray client server binds
                                  on, default to 10001.
  --head                          provide this argument for the head node
  --include-dashboard BOOLEAN     provide this argument to start the Ray
                                  dashboard GUI
  --dashboard-port INTEGER        the port to bind the dashboard server
                                  to--defaults to 8265
  --dashboard-agent-listen-port INTEGER
                                  the port for dashboard agents to listen for
                                  http on.
  --dashboard-agent-grpc-port INTEGER
                                  the port for dashboard agents to listen for
                                  grpc on. Newer Rays add
                                  --runtime-env-agent-port next to it.
  --metrics-export-port INTEGER   like --runtime-env-agent-port in newer Rays:
                                  the port to expose Ray metrics on.
  -v, --verbose                   print more output
  --log-color [auto|false|true]   use color logging
  --disable-usage-stats / --enable-usage-stats
                                  disable the usage stats collection
  --help                          Show this message and exit.
"""


def _msgs(problems, *needles):
    """The problems that contain every needle."""
    return [p for p in problems if all(n in p for n in needles)]


# --------------------------------------------------------------------------- constants


def test_constants_are_consistent():
    assert len(pp.DEFAULT_PORTS) == 14
    assert set(pp.FLAGS) | set(pp.ENV_ONLY) | pp.STORE_KEYS == set(pp.DEFAULT_PORTS)
    assert not set(pp.FLAGS) & set(pp.ENV_ONLY)
    assert not (set(pp.FLAGS) | set(pp.ENV_ONLY)) & pp.STORE_KEYS
    assert pp.STORE_KEYS == {"gcs_redis"}
    assert pp.HEAD_ONLY == {"gcs", "dashboard", "client_server", "autoscaler_metric", "dashboard_metric"}
    assert pp.ENV_ONLY == {"autoscaler_metric": "AUTOSCALER_METRIC_PORT", "dashboard_metric": "DASHBOARD_METRIC_PORT"}
    assert issubclass(pp.PortPlanError, ValueError)


def test_defaults_avoid_ray_defaults_inside_ephemeral_range():
    # Ray's own agent defaults fall in the ephemeral range; ours must not.
    lo, hi = LINUX_EPHEMERAL
    assert all(not lo <= p <= hi for p in pp.DEFAULT_PORTS.values())


# --------------------------------------------------------------------------- build_plan


def test_build_plan_defaults_returns_new_dict():
    plan = pp.build_plan()
    assert plan == pp.DEFAULT_PORTS
    plan["gcs"] = 1
    assert pp.DEFAULT_PORTS["gcs"] == 6379


def test_build_plan_overrides_numeric_strings_and_none():
    plan = pp.build_plan({"dashboard": "9265", "gcs": 7000, "node_manager": None, "min_worker": " 20000 "})
    assert plan["dashboard"] == 9265
    assert plan["gcs"] == 7000
    assert plan["node_manager"] == 8076
    assert plan["min_worker"] == 20000
    assert all(isinstance(v, int) and not isinstance(v, bool) for v in plan.values())


def test_build_plan_offset_added_to_every_port():
    plan = pp.build_plan({"dashboard": 9000}, offset="1000")
    assert plan["dashboard"] == 10000
    assert {k: v - 1000 for k, v in plan.items()} == pp.build_plan({"dashboard": 9000})


def test_build_plan_unknown_key_suggests_and_lists_known():
    with pytest.raises(pp.PortPlanError) as err:
        pp.build_plan({"dashbaord": 8265})
    text = str(err.value)
    assert "'dashbaord'" in text
    assert "did you mean 'dashboard'?" in text
    assert "known keys:" in text and "min_worker" in text and "gcs" in text


def test_build_plan_unknown_key_without_close_match_has_no_suggestion():
    with pytest.raises(pp.PortPlanError) as err:
        pp.build_plan({"zzzzzz": 1})
    assert "did you mean" not in str(err.value)
    assert "'zzzzzz'" in str(err.value)


@pytest.mark.parametrize("value", ["abc", "80.5", 8265.0, True, [8265], ""])
def test_build_plan_non_integer_names_key_and_value(value):
    with pytest.raises(pp.PortPlanError) as err:
        pp.build_plan({"dashboard": value})
    assert "ports.dashboard" in str(err.value)
    assert repr(value) in str(err.value)


def test_build_plan_rejects_bad_offset_and_non_dict():
    with pytest.raises(pp.PortPlanError, match="offset='ten'"):
        pp.build_plan(offset="ten")
    with pytest.raises(pp.PortPlanError, match="must be a dict"):
        pp.build_plan([("gcs", 1)])


# --------------------------------------------------------------------------- validate_plan


def test_defaults_valid_against_default_ephemeral_range():
    assert pp.validate_plan(pp.build_plan(), ephemeral_range=LINUX_EPHEMERAL) == []
    assert pp.validate_plan(pp.build_plan(), ephemeral_range=pp.parse_port_range("32768\t60999\n")) == []


@pytest.mark.parametrize("value", [0, 80, 1023, 65536, 70000])
def test_validate_out_of_range(value):
    problems = pp.validate_plan(pp.build_plan({"dashboard": value}))
    assert len(_msgs(problems, f"ports.dashboard={value} is outside 1024..65535", "choose a port")) == 1


@pytest.mark.parametrize("value", [1024, 65535])
def test_validate_range_bounds_inclusive(value):
    plan = pp.build_plan({"metrics_export": value})
    assert pp.validate_plan(plan) == []


def test_validate_non_integer_missing_and_unknown_keys():
    plan = pp.build_plan()
    plan["dashboard"] = "8265"
    del plan["gcs"]
    plan["dashbaord"] = 1
    problems = pp.validate_plan(plan)
    assert _msgs(problems, "ports.dashboard='8265' is not an integer")
    assert _msgs(problems, "ports.gcs is missing")
    assert _msgs(problems, "ports.dashbaord is not a known port key", "did you mean 'dashboard'?")
    assert pp.validate_plan("nope") and "must be a dict" in pp.validate_plan("nope")[0]


def test_validate_overlap_between_single_ports():
    problems = pp.validate_plan(pp.build_plan({"dashboard": 6379}))
    assert problems == [
        "ports.dashboard=6379 overlaps ports.gcs=6379: choose another port for one of them",
    ]


def test_validate_single_port_in_worker_range():
    problems = pp.validate_plan(pp.build_plan({"metrics_export": 10500}))
    assert len(problems) == 1
    assert "ports.metrics_export=10500 lies inside the worker range" in problems[0]
    assert "ports.min_worker..ports.max_worker=10002-10999" in problems[0]
    assert "choose a port outside it" in problems[0]


def test_validate_worker_range_edges_against_client_server():
    # client_server 10001 sits just below the default worker range; one lower and they collide.
    assert pp.validate_plan(pp.build_plan({"min_worker": 10001})) != []
    assert pp.validate_plan(pp.build_plan()) == []


def test_validate_worker_range_too_small():
    problems = pp.validate_plan(pp.build_plan({"min_worker": 10002, "max_worker": 10010}))
    assert problems == [
        "ports.min_worker..ports.max_worker=10002-10010 holds 9 ports, fewer than the 64 required: "
        "widen the range (every Ray worker process needs its own port)"
    ]
    assert pp.validate_plan(pp.build_plan({"max_worker": 10010}), min_worker_ports=9) == []


def test_validate_min_greater_than_max():
    problems = pp.validate_plan(pp.build_plan({"min_worker": 11000, "max_worker": 10999}))
    assert problems == [
        "ports.min_worker=11000 is greater than ports.max_worker=10999: swap them so min_worker <= max_worker"
    ]


def test_validate_ephemeral_single_port():
    plan = pp.build_plan({"dashboard_agent_grpc": 44217})
    assert pp.validate_plan(plan) == []
    problems = pp.validate_plan(plan, ephemeral_range=LINUX_EPHEMERAL)
    assert len(problems) == 1
    msg = problems[0]
    assert "ports.dashboard_agent_grpc=44217" in msg and "32768-60999" in msg
    assert "outgoing connection" in msg and "net.ipv4.ip_local_port_range" in msg


@pytest.mark.parametrize("port, inside", [(32767, False), (32768, True), (60999, True), (61000, False)])
def test_validate_ephemeral_bounds_inclusive(port, inside):
    problems = pp.validate_plan(pp.build_plan({"dashboard": port}), ephemeral_range=LINUX_EPHEMERAL)
    assert bool(_msgs(problems, f"ports.dashboard={port} is inside the ephemeral port range")) is inside
    assert len(problems) == int(inside)


def test_validate_ephemeral_worker_range():
    plan = pp.build_plan({"min_worker": 30000, "max_worker": 32768})
    problems = pp.validate_plan(plan, ephemeral_range=LINUX_EPHEMERAL)
    assert len(problems) == 1
    assert (
        "ports.min_worker..ports.max_worker=30000-32768 intersects the ephemeral port range 32768-60999" in problems[0]
    )
    assert "change net.ipv4.ip_local_port_range" in problems[0]
    assert pp.validate_plan(plan, ephemeral_range=(32769, 60999)) == []


def test_validate_offset_plan_valid_and_disjoint_from_base():
    base = pp.build_plan()
    plan = pp.build_plan(offset=1000)
    assert pp.validate_plan(plan, ephemeral_range=LINUX_EPHEMERAL, offset=1000) == []
    assert not pp.all_ports(plan, "head") & pp.all_ports(base, "head")


def test_validate_offset_collision_with_base_reported():
    problems = pp.validate_plan(pp.build_plan(offset=1), offset=1)
    assert (
        "ports.node_manager=8077 (offset 1) collides with the offset-0 cluster's ports.object_manager=8077: "
        "both clusters would listen there; choose an offset that moves every port past the other cluster's ports"
    ) in problems
    assert _msgs(problems, "ports.min_worker..ports.max_worker=10003-11000 (offset 1)", "10002-10999")
    # the same plan validated as a standalone (offset 0) cluster is fine
    assert pp.validate_plan(pp.build_plan(offset=1)) == []


def test_validate_offset_worker_range_collision():
    problems = pp.validate_plan(pp.build_plan(offset=500), offset=500)
    assert problems
    assert all("(offset 500)" in p for p in problems)
    assert _msgs(problems, "ports.client_server=10501 (offset 500)", "10002-10999")


# --------------------------------------------------------------------------- role_ports / args / env


def test_role_ports():
    plan = pp.build_plan()
    head = pp.role_ports(plan, "head")
    worker = pp.role_ports(plan, "worker")
    assert set(head) == set(plan) - pp.STORE_KEYS
    assert set(worker) == set(plan) - pp.HEAD_ONLY - pp.STORE_KEYS
    assert worker["min_worker"] == 10002 and worker["max_worker"] == 10999
    with pytest.raises(pp.PortPlanError, match="role must be one of head, worker"):
        pp.role_ports(plan, "driver")


def test_ray_start_args_head_and_worker_exact():
    plan = pp.build_plan()
    assert pp.ray_start_args(plan, "head") == (HEAD_ARGS, [])
    assert pp.ray_start_args(plan, "worker") == (WORKER_ARGS, [])


def test_ray_start_args_all_supported_flags_kept():
    args, dropped = pp.ray_start_args(pp.build_plan(), "head", set(pp.FLAGS.values()))
    assert args == HEAD_ARGS and dropped == []


def test_ray_start_args_filters_by_help_text():
    supported = pp.parse_ray_start_help(OLD_RAY_HELP)
    args, dropped = pp.ray_start_args(pp.build_plan(), "head", supported)
    assert dropped == ["runtime_env_agent"]
    assert args == [a for a in HEAD_ARGS if not a.startswith("--runtime-env-agent-port")]
    w_args, w_dropped = pp.ray_start_args(pp.build_plan(), "worker", supported)
    assert w_dropped == ["runtime_env_agent"]
    assert "--port=6379" not in w_args and len(w_args) == len(WORKER_ARGS) - 1


def test_ray_start_args_worker_range_dropped_as_pair():
    supported = set(pp.FLAGS.values()) - {"--max-worker-port"}
    args, dropped = pp.ray_start_args(pp.build_plan(), "worker", supported)
    assert dropped == ["min_worker", "max_worker"]
    assert not [a for a in args if "worker-port" in a]


def test_ray_start_args_accepts_flags_without_dashes():
    names = {f[2:] for f in pp.FLAGS.values()} - {"dashboard-port"}
    args, dropped = pp.ray_start_args(pp.build_plan(), "head", names)
    assert dropped == ["dashboard"]
    assert len(args) == len(HEAD_ARGS) - 1


def test_env_vars():
    plan = pp.build_plan({"autoscaler_metric": "9270"})
    assert pp.env_vars(plan, "head") == {"AUTOSCALER_METRIC_PORT": "9270", "DASHBOARD_METRIC_PORT": "8271"}
    assert pp.env_vars(plan, "worker") == {}


# --------------------------------------------------------------------------- firewall / all_ports


def test_firewall_ports_head():
    rules = pp.firewall_ports(pp.build_plan(), "head")
    assert [(r["name"], r["port"]) for r in rules] == [
        ("gcs", "6379"),
        ("node_manager", "8076"),
        ("object_manager", "8077"),
        ("dashboard", "8265"),
        ("dashboard_agent_listen", "8266"),
        ("dashboard_agent_grpc", "8267"),
        ("runtime_env_agent", "8268"),
        ("metrics_export", "8269"),
        ("autoscaler_metric", "8270"),
        ("dashboard_metric", "8271"),
        ("client_server", "10001"),
        ("worker", "10002-10999"),
    ]
    assert {r["proto"] for r in rules} == {"tcp"}
    assert rules[0] == {"name": "gcs", "port": "6379", "proto": "tcp"}


def test_firewall_ports_worker():
    rules = pp.firewall_ports(pp.build_plan(), "worker")
    assert [(r["name"], r["port"]) for r in rules] == [
        ("node_manager", "8076"),
        ("object_manager", "8077"),
        ("dashboard_agent_listen", "8266"),
        ("dashboard_agent_grpc", "8267"),
        ("runtime_env_agent", "8268"),
        ("metrics_export", "8269"),
        ("worker", "10002-10999"),
    ]


def test_firewall_ports_sorted_numerically_and_one_port_range():
    plan = pp.build_plan({"min_worker": 2000, "max_worker": 2000, "gcs": 9999})
    rules = pp.firewall_ports(plan, "head")
    assert rules[0] == {"name": "worker", "port": "2000", "proto": "tcp"}
    assert [r["name"] for r in rules][-2:] == ["gcs", "client_server"]


def test_all_ports():
    plan = pp.build_plan()
    head = pp.all_ports(plan, "head")
    worker = pp.all_ports(plan, "worker")
    assert len(head) == 11 + 998
    assert len(worker) == 6 + 998
    assert {6379, 8265, 10001, 8270, 8271, 10002, 10999} <= head
    assert not {6379, 8265, 10001, 8270, 8271} & worker
    assert 11000 not in head


# --------------------------------------------------------------------------- parsers


def test_parse_ray_start_help():
    flags = pp.parse_ray_start_help(OLD_RAY_HELP)
    assert {
        "--port",
        "--node-manager-port",
        "--object-manager-port",
        "--min-worker-port",
        "--max-worker-port",
        "--worker-port-list",
        "--ray-client-server-port",
        "--dashboard-port",
        "--dashboard-agent-listen-port",
        "--dashboard-agent-grpc-port",
        "--metrics-export-port",
        "--verbose",
        "--head",
        "--disable-usage-stats",
        "--enable-usage-stats",
        "--log-color",
        "--help",
    } <= flags
    # mentioned only in wrapped help text, never declared
    assert "--runtime-env-agent-port" not in flags
    assert "--min-worker-" not in flags
    assert "-v" not in flags
    assert all(f.startswith("--") for f in flags)


def test_parse_ray_start_help_without_options_heading_and_empty():
    assert pp.parse_ray_start_help("  -p, --port INTEGER  the port\n  --block\n") == {"--port", "--block"}
    assert pp.parse_ray_start_help("") == set()
    assert pp.parse_ray_start_help(None) == set()


@pytest.mark.parametrize(
    "text, expected",
    [("32768\t60999\n", (32768, 60999)), ("1024 65535", (1024, 65535)), ("  40000   40000 \n", (40000, 40000))],
)
def test_parse_port_range_good(text, expected):
    assert pp.parse_port_range(text) == expected


@pytest.mark.parametrize("text", ["", "32768", "a b", "32768 60999 1", "60999 32768", "0 100", "1 70000", "-1 5"])
def test_parse_port_range_junk(text):
    with pytest.raises(pp.PortPlanError):
        pp.parse_port_range(text)


# --------------------------------------------------------------------------- find_listeners

TCP_HEADER = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"


def _tcp_row(sl, local, remote, state, inode):
    return (
        f"   {sl}: {local} {remote} {state} 00000000:00000000 00:00000000 00000000  1000        0 {inode} 1 "
        "0000000000000000 100 0 0 10 0\n"
    )


def _hexport(port):
    return f"{port:04X}"


def _make_proc(root, with_tcp6=True):
    """A fake /proc: redis on 6379 (v4), python on 8265 (v4 + v6), an orphan LISTEN on 8077."""
    (root / "net").mkdir(parents=True)
    v4 = TCP_HEADER
    v4 += _tcp_row(0, f"00000000:{_hexport(6379)}", "00000000:0000", "0A", 11111)
    v4 += _tcp_row(1, f"0100007F:{_hexport(8265)}", "00000000:0000", "0A", 33333)
    # ESTABLISHED from local port 8076: not a listener
    v4 += _tcp_row(2, f"0100007F:{_hexport(8076)}", f"0100007F:{_hexport(6379)}", "01", 44444)
    # LISTEN whose inode no process holds (other user's process, or it just exited)
    v4 += _tcp_row(3, f"00000000:{_hexport(8077)}", "00000000:0000", "0A", 99999)
    (root / "net" / "tcp").write_text(v4)
    if with_tcp6:
        v6 = TCP_HEADER
        v6 += _tcp_row(0, f"{'0' * 32}:{_hexport(8265)}", f"{'0' * 32}:0000", "0A", 22222)
        v6 += _tcp_row(1, f"{'0' * 24}0100007F:{_hexport(8271)}", f"{'0' * 32}:0000", "06", 55555)
        (root / "net" / "tcp6").write_text(v6)

    def proc(pid, comm, argv, links):
        d = root / str(pid)
        (d / "fd").mkdir(parents=True)
        (d / "comm").write_text(comm + "\n")
        (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
        for fd, target in links.items():
            os.symlink(target, d / "fd" / str(fd))

    proc(123, "redis-server", ["redis-server", "*:6379"], {0: "/dev/null", 3: "socket:[11111]"})
    proc(456, "python", ["python", "-m", "http.server"], {3: "socket:[22222]", 4: "socket:[33333]", 5: "pipe:[7]"})
    proc(789, "ray", ["ray", "status"], {3: "socket:[44444]"})
    (root / "999").mkdir()  # no fd dir: a process we may not inspect
    (root / "self").mkdir()
    return root


def test_find_listeners_fake_proc(tmp_path):
    root = _make_proc(tmp_path / "proc")
    found = pp.find_listeners([6379, 8265, 8076, 8077, 8271, 9999], proc_root=str(root))
    assert set(found) == {6379, 8265, 8077}
    assert found[6379] == [{"pid": 123, "comm": "redis-server", "cmdline": "redis-server *:6379"}]
    assert found[8265] == [{"pid": 456, "comm": "python", "cmdline": "python -m http.server"}]
    assert found[8077] == [{"pid": None, "comm": "unknown", "cmdline": ""}]


def test_find_listeners_only_requested_ports(tmp_path):
    root = _make_proc(tmp_path / "proc")
    assert pp.find_listeners([8265], proc_root=str(root)) == {
        8265: [{"pid": 456, "comm": "python", "cmdline": "python -m http.server"}]
    }
    assert pp.find_listeners([], proc_root=str(root)) == {}
    assert pp.find_listeners([1], proc_root=str(tmp_path / "missing")) == {}


def test_find_listeners_without_tcp6(tmp_path):
    root = _make_proc(tmp_path / "proc", with_tcp6=False)
    assert list(pp.find_listeners([6379, 8265], proc_root=str(root))) == [6379, 8265]


def test_find_listeners_tolerates_vanishing_processes(tmp_path, monkeypatch):
    root = _make_proc(tmp_path / "proc")
    real_readlink = os.readlink
    real_listdir = os.listdir

    def readlink(path, *args, **kwargs):
        # redis exits between listing its fds and reading them
        if os.sep + "123" + os.sep in str(path):
            raise FileNotFoundError(path)
        return real_readlink(path, *args, **kwargs)

    def listdir(path="."):
        if str(path).endswith(os.sep + "456" + os.sep + "fd"):
            raise PermissionError(path)
        return real_listdir(path)

    monkeypatch.setattr(pp.os, "readlink", readlink)
    monkeypatch.setattr(pp.os, "listdir", listdir)
    found = pp.find_listeners([6379, 8265], proc_root=str(root))
    assert found == {
        6379: [{"pid": None, "comm": "unknown", "cmdline": ""}],
        8265: [{"pid": None, "comm": "unknown", "cmdline": ""}],
    }


def test_find_listeners_owner_gone_before_comm_read(tmp_path):
    root = _make_proc(tmp_path / "proc")
    (root / "123" / "comm").unlink()
    (root / "123" / "cmdline").unlink()
    assert pp.find_listeners([6379], proc_root=str(root)) == {6379: [{"pid": 123, "comm": "unknown", "cmdline": ""}]}


def test_find_listeners_shared_socket_and_partial_owner(tmp_path):
    root = _make_proc(tmp_path / "proc")
    # a forked child shares redis's listening socket
    (root / "124" / "fd").mkdir(parents=True)
    (root / "124" / "comm").write_text("redis-child\n")
    (root / "124" / "cmdline").write_bytes(b"redis-child\0")
    os.symlink("socket:[11111]", root / "124" / "fd" / "7")
    # and a second, unowned, IPv6 listener on 6379
    with open(root / "net" / "tcp6", "a") as fh:
        fh.write(_tcp_row(2, f"{'0' * 32}:{_hexport(6379)}", f"{'0' * 32}:0000", "0A", 77777))
    owners = pp.find_listeners([6379], proc_root=str(root))[6379]
    assert [o["pid"] for o in owners] == [123, 124, None]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux /proc")
def test_find_listeners_real_proc_finds_own_socket():
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        port = sock.getsockname()[1]
        found = pp.find_listeners([port])
        assert port in found
        assert os.getpid() in [o["pid"] for o in found[port]]
    finally:
        sock.close()


def test_describe_listener():
    assert (
        pp.describe_listener(8265, [{"pid": 123, "comm": "redis-server", "cmdline": "redis-server"}])
        == "port 8265 is already bound by redis-server (pid 123)"
    )
    two = pp.describe_listener(
        6379, [{"pid": 1, "comm": "a", "cmdline": ""}, {"pid": None, "comm": "unknown", "cmdline": ""}]
    )
    assert two.startswith("port 6379 is already bound by a (pid 1), an unknown process")
    assert "run as root" in two
    assert pp.describe_listener(10001, []) == "port 10001 is already bound by an unknown process"


# --------------------------------------------------------------------------- properties

IN_RANGE = st.integers(1024, 65535)
# Values from a small pool make collisions likely; a few out-of-range values test the bounds.
PORT_VALUES = st.one_of(
    IN_RANGE,
    st.sampled_from([6379, 8265, 8076, 10001, 10002, 10500, 10999, 32767, 32768, 60999, 61000]),
    st.sampled_from([0, 80, 1023, 65536, 70000]),
)
EPHEMERAL = st.one_of(
    st.none(),
    st.just(LINUX_EPHEMERAL),
    st.tuples(IN_RANGE, st.integers(0, 20000)).map(lambda t: (t[0], min(65535, t[0] + t[1]))),
)


@settings(max_examples=300, deadline=None)
@given(
    overrides=st.dictionaries(st.sampled_from(SINGLE_KEYS), PORT_VALUES),
    worker_lo=PORT_VALUES,
    worker_size=st.integers(-3, 3000),
    ephemeral=EPHEMERAL,
    min_worker_ports=st.sampled_from([1, 64, 500]),
)
def test_validate_plan_property(overrides, worker_lo, worker_size, ephemeral, min_worker_ports):
    overrides = dict(overrides, min_worker=worker_lo, max_worker=worker_lo + worker_size - 1)
    plan = pp.build_plan(overrides)
    problems = pp.validate_plan(plan, ephemeral_range=ephemeral, min_worker_ports=min_worker_ports)

    # the truth, computed with sets
    singles = [plan[k] for k in SINGLE_KEYS]
    lo, hi = plan["min_worker"], plan["max_worker"]
    workers = set(range(lo, hi + 1))
    in_range = all(1024 <= v <= 65535 for v in plan.values())
    ordered = lo <= hi
    big_enough = len(workers) >= min_worker_ports
    distinct = len(set(singles)) == len(singles)
    clear_of_workers = not set(singles) & workers
    eph = set(range(ephemeral[0], ephemeral[1] + 1)) if ephemeral else set()
    clear_of_ephemeral = not (set(singles) | workers) & eph
    ok = in_range and ordered and big_enough and distinct and clear_of_workers and clear_of_ephemeral

    assert (problems == []) == ok, problems
    if not problems:
        assert len(pp.all_ports(plan, "head")) == 11 + len(workers)
        assert len(pp.all_ports(plan, "worker")) == 6 + len(workers)
        assert pp.all_ports(plan, "head") == set(singles) - {plan[k] for k in pp.STORE_KEYS} | workers


@settings(max_examples=300, deadline=None)
@given(
    overrides=st.dictionaries(st.sampled_from(SINGLE_KEYS), IN_RANGE, max_size=3),
    offset=st.integers(-3000, 3000).filter(bool),
)
def test_offset_property(overrides, offset):
    base = pp.build_plan(overrides)
    plan = pp.build_plan(overrides, offset=offset)
    collisions = [p for p in pp.validate_plan(plan, offset=offset) if f"(offset {offset})" in p]
    shared = _every_port(plan) & _every_port(base)
    assert (collisions == []) == (not shared), (collisions, sorted(shared)[:5])


def _every_port(plan):
    """Ray's head ports and the GCS store's: every port of one cluster's plan."""
    return pp.all_ports(plan, "head") | {plan[k] for k in pp.STORE_KEYS}


class Refused(Exception):
    pass


def _refuse(msg, **kwargs):
    raise Refused(msg, kwargs)


def test_node_plan_or_fail_words_both_kinds_of_refusal():
    with pytest.raises(Refused) as err:
        pp.node_plan_or_fail({"ports": {"dashbaord": 8265}, "port_offset": 0, "min_worker_ports": 64}, _refuse)
    assert err.value.args[0].startswith("invalid port plan: ") and "did you mean 'dashboard'?" in err.value.args[0]
    params = {"ports": {"dashboard": 6379}, "port_offset": 0, "min_worker_ports": 64}
    with pytest.raises(Refused) as err:
        pp.node_plan_or_fail(params, _refuse)
    assert err.value.args[0].startswith("invalid port plan on this node: ") and err.value.args[1]["errors"]


def test_node_plan_or_fail_returns_the_plan():
    plan = pp.node_plan_or_fail({"ports": {}, "port_offset": 0, "min_worker_ports": 64}, _refuse)
    assert plan["gcs"] == 6379 and plan["dashboard"] == 8265


# --------------------------------------------------------------------------- the GCS store's port


def test_gcs_redis_is_planned_but_never_a_ray_port():
    plan = pp.build_plan({"gcs_redis": 7000}, offset=100)
    assert plan["gcs_redis"] == 7100
    for role in ("head", "worker"):
        assert 7100 not in pp.all_ports(plan, role)
        assert all(rule["name"] != "gcs_redis" for rule in pp.firewall_ports(plan, role))
        assert not any("7100" in arg for arg in pp.ray_start_args(plan, role)[0])
        assert "7100" not in pp.env_vars(plan, role).values()
    assert pp.store_firewall_ports(plan) == [{"name": "gcs_redis", "port": "7100", "proto": "tcp"}]


def test_gcs_redis_overlap_is_refused_like_any_port():
    problems = pp.validate_plan(pp.build_plan({"gcs_redis": 6379}))
    assert _msgs(problems, "ports.gcs_redis=6379 overlaps ports.gcs=6379")
    problems = pp.validate_plan(pp.build_plan({"gcs_redis": 10500}))
    assert _msgs(problems, "ports.gcs_redis=10500 lies inside the worker range")
    problems = pp.validate_plan(pp.build_plan({"gcs_redis": 40000}), ephemeral_range=LINUX_EPHEMERAL)
    assert _msgs(problems, "ports.gcs_redis=40000 is inside the ephemeral port range")
