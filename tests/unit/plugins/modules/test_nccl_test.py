"""nccl_test: the data-driven cases of nccl_test.yml, plus the environment and runner-error cases."""

import copy
import importlib.util
import os
import threading

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args
from harness import ModuleExit, _exit, _fail, expand, fake_which, load_cases, run_case

from ansible_collections.raygate.cluster.plugins.module_utils._runner import CommandError, CommandRunner
from ansible_collections.raygate.cluster.plugins.module_utils.gate import nccl_runner
from ansible_collections.raygate.cluster.plugins.modules import nccl_test

CASES = load_cases(os.path.join(os.path.dirname(__file__), "nccl_test.yml"))
SIM = os.path.join(os.path.dirname(__file__), "..", "..", "..", "sandbox", "sim", "raygate_sim.py")


def _load_sim():
    spec = importlib.util.spec_from_file_location("raygate_sim", SIM)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sim = _load_sim()


@pytest.fixture(autouse=True)
def no_host_sysfs(tmp_path, monkeypatch):
    """A case that does not name sysfs_root reads an empty tree, never this machine's RDMA devices."""
    monkeypatch.setitem(nccl_runner.ARGUMENT_SPEC["sysfs_root"], "default", str(tmp_path / "no-sysfs"))


def expand_pairs(case):
    """``pair: [a, b]`` steps -> the case's ``pair_cmd`` with HOSTS = a:G,b:G."""
    case = copy.deepcopy(case)
    gpus = case.get("args", {}).get("gpus", 1)
    if case.get("args", {}).get("mode") == "pairs":
        # The cases list commands in their exact order: run the pairs of a round one by one.
        case["args"].setdefault("parallel", False)
    for step in case.get("commands", []):
        if "pair" in step:
            a, b = step.pop("pair")
            hosts = "%s:%d,%s:%d" % (a, gpus, b, gpus)
            step["cmd"] = [hosts if token == "HOSTS" else token for token in case["pair_cmd"]]
    return case


def statuses(checks):
    return {check["name"]: check["status"] for check in checks}


@pytest.mark.parametrize("case", CASES)
def test_nccl_test(case, tmp_path, monkeypatch):
    # fabric_tree: a scenario `fabric` built as the sandbox's sysfs tree under {tmp}/sim.
    if "fabric_tree" in case:
        sim.build_tree(str(tmp_path / "sim"), case["fabric_tree"], net_target=str(tmp_path / "net"))
    result = run_case(expand_pairs(case), nccl_test.main, tmp_path, monkeypatch)
    got = statuses(result.get("checks") or [])
    for name, status in case.get("statuses", {}).items():
        assert got.get(name) == status, "%s: %r" % (name, got)
    nodes = result.get("nodes") or {}
    for host, want in case.get("node_statuses", {}).items():
        got = statuses(nodes[host]["checks"])
        for name, status in want.items():
            assert got.get(name) == status, "%s %s: %r" % (host, name, nodes[host]["checks"])
    for host, verdict in case.get("isolation", {}).items():
        isolation = [c for c in nodes[host]["checks"] if c["name"] == "nccl_pair_isolation"]
        assert [c["value"] for c in isolation] == [verdict], nodes[host]
    for host, healthy in case.get("healthy", {}).items():
        assert nodes[host]["healthy"] is healthy, nodes[host]
        assert (nodes[host]["verdict"] == "fail") is (not healthy)
    if "nodes" in result:
        for node in nodes.values():
            names = [c["name"] for c in node["checks"]]
            assert names == [
                "nccl_pair_busbw",
                "nccl_pair_wrong",
                "nccl_pair_completed",
                "nccl_pair_transport",
                "nccl_pair_isolation",
            ]
    assert "log" not in result


def run_main(args, monkeypatch, fake_run, which):
    monkeypatch.setattr(CommandRunner, "run", fake_run)
    monkeypatch.setattr(CommandRunner, "which", fake_which(which))
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", _exit)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", _fail)
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, warning, **kw: None)
    with patch_module_args(args), pytest.raises(ModuleExit) as exc:
        nccl_test.main()
    return exc.value.result


def test_single_env_sets_nccl_debug_and_keeps_the_file_under_env(tmp_path, monkeypatch):
    env_file = tmp_path / "nccl.env"
    env_file.write_text("NCCL_IB_HCA==mlx5_0:1\nNCCL_SOCKET_IFNAME=eth0\nNCCL_DEBUG=WARN\n")
    seen = {}

    def fake_run(self, args, env=None, timeout=None, **kwargs):
        seen.update(env=env, timeout=timeout)
        return 0, "", ""

    args = {"gpus": 2, "env_file": str(env_file), "env": {"NCCL_SOCKET_IFNAME": "eth1"}, "timeout": 90}
    run_main(args, monkeypatch, fake_run, {"all_reduce_perf": "/usr/bin/all_reduce_perf"})
    assert seen["env"] == {
        "NCCL_IB_HCA": "=mlx5_0:1",
        "NCCL_SOCKET_IFNAME": "eth1",
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": "INIT,NET",
    }
    assert seen["timeout"] == 90


def test_pairs_pass_the_env_values_to_mpirun_whose_x_flags_name_them(monkeypatch):
    seen = []

    def fake_run(self, args, env=None, timeout=None, **kwargs):
        seen.append((args, env))
        return 0, "", ""

    args = {"mode": "pairs", "hosts": ["a", "b"], "gpus": 4, "env": {"FI_PROVIDER": "efa", "NCCL_DEBUG_SUBSYS": "ALL"}}
    which = {"mpirun": "/usr/bin/mpirun", "all_reduce_perf": "/usr/bin/all_reduce_perf"}
    run_main(args, monkeypatch, fake_run, which)
    ((cmd, env),) = seen
    exported = [cmd[i + 1] for i, token in enumerate(cmd) if token == "-x"]
    assert exported == ["FI_PROVIDER", "NCCL_DEBUG", "NCCL_DEBUG_SUBSYS"]
    assert env == {"FI_PROVIDER": "efa", "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "ALL"}


@pytest.mark.parametrize(
    "message",
    [
        "cannot run /srv/nccl/all_reduce_perf: [Errno 2] No such file or directory",
        "/usr/bin/all_reduce_perf -b 8 did not finish within 600s",
    ],
)
def test_single_runner_error_fails_completed_not_the_task(monkeypatch, message):
    def fake_run(self, args, **kwargs):
        raise CommandError(message)

    result = run_main({"gpus": 8, "binary": "/srv/nccl/all_reduce_perf"}, monkeypatch, fake_run, {})
    assert "failed" not in result
    assert result["healthy"] is False
    completed = [c for c in result["checks"] if c["name"] == "nccl_completed"]
    assert completed[0]["status"] == "fail" and completed[0]["detail"] == message
    assert result["log_tail"] == [message]


def test_pairs_timeout_is_a_failed_test_that_counts_as_evidence(monkeypatch):
    def fake_run(self, args, **kwargs):
        if "a:1,b:1" in args:
            raise CommandError("mpirun did not finish within 600s")
        return 0, PAIR_OK, ""

    which = {"mpirun": "/usr/bin/mpirun", "all_reduce_perf": "/usr/bin/all_reduce_perf"}
    result = run_main(
        {"mode": "pairs", "hosts": ["a", "b", "c"], "gpus": 1, "min_busbw": 1, "min_bytes": "16G"},
        monkeypatch,
        fake_run,
        which,
    )
    # (a,b) timed out, (b,c) passed: b and c are good, a failed with a good node.
    isolation = {
        h: [c for c in n["checks"] if c["name"] == "nccl_pair_isolation"][0] for h, n in result["nodes"].items()
    }
    assert {h: c["value"] for h, c in isolation.items()} == {"a": "bad", "b": "good", "c": "good"}
    assert "did not finish" in str(result["nodes"]["a"]["checks"])


PAIR_OK = """\
# nThread 1 nGpus 1 minBytes 17179869184 maxBytes 17179869184 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1
#  Rank  0 Group  0 Pid   11 on b device  0 [0x18] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid   12 on c device  0 [0x18] NVIDIA H100 80GB HBM3
b:11:40 [0] NCCL INFO Using network IB
b:11:40 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0/GDRDMA
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
 17179869184    4294967296     float     sum      -1  370120.0   46.42   46.42      0  370333.1   46.39   46.39      0
# Out of bounds values : 0 OK
"""


def test_the_pairs_of_a_round_run_at_the_same_time(tmp_path, monkeypatch):
    """With parallel (the default) both pairs of each round must be running at once: every test
    waits at a two-party barrier, which only opens when its round's other pair arrives too."""
    case = expand_pairs([p.values[0] for p in CASES if p.id == "pairs_four_hosts_one_bad_node_is_isolated"][0])
    names = {"tmp": str(tmp_path)}
    names.update({k: expand(v, names) for k, v in case["names"].items()})
    outputs = {}
    for step in case["commands"]:
        step = expand(step, names)
        outputs[step["cmd"][step["cmd"].index("-H") + 1]] = step["out"]
    barrier = threading.Barrier(2, timeout=60)
    ran = []

    def fake_run(self, args, env=None, timeout=None, **kwargs):
        hosts = args[args.index("-H") + 1]
        barrier.wait()  # raises BrokenBarrierError if the round's other pair is not running
        ran.append(hosts)
        return 0, outputs[hosts], ""

    args = dict(case["args"], parallel=True)
    result = run_main(args, monkeypatch, fake_run, expand(case["which"], names))
    assert sorted(ran[:2]) == ["node1:1,node2:1", "node3:1,node4:1"]
    assert sorted(ran[2:]) == ["node2:1,node3:1", "node4:1,node1:1"]
    assert [t["hosts"] for t in result["tests"]] == [
        ["node1", "node2"],
        ["node3", "node4"],
        ["node2", "node3"],
        ["node4", "node1"],
    ]
    assert {h: n["healthy"] for h, n in result["nodes"].items()} == case["healthy"]
