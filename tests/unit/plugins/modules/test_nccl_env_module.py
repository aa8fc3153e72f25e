"""nccl_env end to end over simulated sysfs trees (the sandbox's own generator)."""

import importlib.util
import os

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args
from harness import ModuleExit, _exit, _fail

from ansible_collections.raygate.cluster.plugins.module_utils._runner import CommandRunner
from ansible_collections.raygate.cluster.plugins.modules import nccl_env

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
SIM = os.path.join(ROOT, "tests", "sandbox", "sim", "raygate_sim.py")
_spec = importlib.util.spec_from_file_location("raygate_sim", SIM)
raygate_sim = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(raygate_sim)

IP_ADDR = (
    "1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever\n"
    "2: eth0@if7    inet 198.18.0.11/24 brd 198.18.0.255 scope global eth0\\       valid_lft forever\n"
)


@pytest.fixture()
def node(tmp_path, monkeypatch):
    """A fake node: a sysfs tree under tmp/sim, interfaces eth0 and lo, no fabric tools installed."""
    net = tmp_path / "net"
    for name in ("eth0", "lo"):
        (net / name).mkdir(parents=True)
    commands = []

    def fake_run(self, args, **kwargs):
        commands.append([str(a) for a in args])
        assert args[:3] == ["ip", "-o", "addr"], "unexpected command %s" % args
        return 0, IP_ADDR, ""

    monkeypatch.setattr(CommandRunner, "which", lambda self, name, extra_dirs=(): None)
    monkeypatch.setattr(CommandRunner, "run", fake_run)
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", _exit)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", _fail)

    class Node:
        root = str(tmp_path / "sim")
        env_path = str(tmp_path / "etc" / "raygate" / "nccl.env")
        conf_path = str(tmp_path / "etc" / "nccl.conf")
        ran = commands

        def fabric(self, **fabric):
            raygate_sim.build_tree(self.root, fabric, net_target=str(net))

        def run(self, check=False, diff=False, **args):
            args.setdefault("sysfs_root", self.root)
            args.setdefault("path", self.env_path)
            args.setdefault("nccl_conf_path", self.conf_path)
            args.setdefault("node_ip", "198.18.0.11")
            args.update(_ansible_check_mode=check, _ansible_diff=diff)
            with patch_module_args(args), pytest.raises(ModuleExit) as exc:
                nccl_env.main()
            return exc.value.result

        def env_file(self):
            with open(self.env_path) as fh:
                return fh.read()

    return Node()


def test_ib_node_gets_its_active_hcas_and_the_interface_of_its_address(node):
    node.fabric(type="ib", devices=4, down=[1])
    result = node.run()
    assert result["changed"] is True
    assert result["fabric"]["fabric"] == "ib"
    assert result["env"]["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_2:1,mlx5_3:1"
    assert result["env"]["NCCL_SOCKET_IFNAME"] == "=eth0"
    text = node.env_file()
    assert "NCCL_IB_HCA==mlx5_0:1,mlx5_2:1,mlx5_3:1\n" in text
    assert text.startswith("# Managed by raygate.cluster.nccl_env (fabric ib")
    assert oct(os.stat(node.env_path).st_mode & 0o777) == "0o644"
    again = node.run()
    assert again["changed"] is False


def test_check_mode_predicts_and_writes_nothing_with_a_diff(node):
    node.fabric(type="ib", devices=2)
    result = node.run(check=True, diff=True)
    assert result["changed"] is True
    assert not os.path.exists(node.env_path)
    assert "NCCL_IB_HCA==mlx5_0:1,mlx5_1:1" in result["diff"][0]["after"]
    assert result["diff"][0]["before"] == ""


def test_efa_node_gets_the_libfabric_profile(node):
    node.fabric(type="efa", devices=4)
    result = node.run(force_net=True)
    env = result["env"]
    assert result["fabric"]["fabric"] == "efa"
    assert env["FI_PROVIDER"] == "efa"
    assert env["FI_EFA_USE_DEVICE_RDMA"] == "1"
    assert env["FI_EFA_FORK_SAFE"] == "1"
    assert "NCCL_NET" in env and "NCCL_IB_HCA" not in env


def test_roce_node_gets_the_gid_index(node):
    node.fabric(type="roce", devices=2)
    env = node.run()["env"]
    assert env["NCCL_IB_GID_INDEX"] == "3"
    assert env["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_1:1"


def test_unknown_name_fails_with_a_suggestion_and_writes_nothing(node):
    node.fabric(type="ib", devices=2)
    result = node.run(env={"NCCL_IB_HCAS": "=mlx5_0"})
    assert result["failed"] is True
    assert "NCCL_IB_HCAS" in result["msg"] and "NCCL_IB_HCA" in result["msg"]
    assert any("did you mean" in e for e in result["errors"])
    assert not os.path.exists(node.env_path)


@pytest.mark.parametrize(
    "overrides, words",
    [
        ({"NCCL_IB_DISABLE": True}, ["NCCL_IB_DISABLE"]),
        ({"NCCL_NET": "Socket"}, ["NCCL_NET", "Socket"]),
        ({"NCCL_IB_TIMEOUT": "twenty"}, ["NCCL_IB_TIMEOUT", "twenty"]),
        ({"NCCL_SOCKET_IFNAME": "=ens5"}, ["NCCL_SOCKET_IFNAME", "ens5", "eth0"]),
        ({"NCCL_IB_HCA": "=mlx5_9"}, ["NCCL_IB_HCA", "mlx5_9"]),
    ],
)
def test_bad_values_and_contradictions_fail_before_writing(node, overrides, words):
    node.fabric(type="ib", devices=2)
    result = node.run(env=overrides)
    assert result["failed"] is True
    for word in words:
        assert word in result["msg"]
    assert not os.path.exists(node.env_path)


def test_a_fabric_that_is_not_there_is_refused(node):
    node.fabric(type="ib", devices=2)
    result = node.run(fabric="efa")
    assert result["failed"] is True
    assert "fabric efa was requested, but this host shows ib" in result["msg"]


def test_no_fabric_needs_require_gdr_off(node):
    node.fabric(type="none")
    assert node.run()["failed"] is True
    result = node.run(require_gdr=False)
    assert result["fabric"]["fabric"] == "none"
    assert set(result["env"]) == {"NCCL_SOCKET_IFNAME"}


def test_fabric_none_on_an_ib_host_turns_ib_off(node):
    node.fabric(type="ib", devices=2)
    env = node.run(fabric="none", require_gdr=False)["env"]
    assert env["NCCL_IB_DISABLE"] == "1" and "NCCL_IB_HCA" not in env


def test_an_address_on_no_interface_is_named(node):
    node.fabric(type="ib", devices=2)
    result = node.run(node_ip="10.9.9.9")
    assert result["failed"] is True
    assert "10.9.9.9" in result["msg"] and "eth0" in result["msg"]


def test_null_override_removes_a_profile_variable_and_allow_names_passes_plugins(node):
    node.fabric(type="ib", devices=2)
    result = node.run(env={"NCCL_NET_GDR_LEVEL": None, "NCCL_FUTURE_KNOB": "1"}, allow_names=["NCCL_FUTURE_KNOB"])
    assert "NCCL_NET_GDR_LEVEL" not in result["env"]
    assert result["env"]["NCCL_FUTURE_KNOB"] == "1"


def test_nccl_conf_is_written_and_only_ours_is_removed(node):
    node.fabric(type="ib", devices=2)
    node.run(nccl_conf=True, env={"FI_LOG_LEVEL": "warn"})
    with open(node.conf_path) as fh:
        conf = fh.read()
    assert "NCCL_IB_HCA==mlx5_0:1,mlx5_1:1\n" in conf and "FI_LOG_LEVEL" not in conf
    assert node.run(nccl_conf=False)["changed"] is True
    assert not os.path.exists(node.conf_path)
    with open(node.conf_path, "w") as fh:
        fh.write("NCCL_DEBUG=INFO\n")  # the operator's own file
    result = node.run(state="absent")
    assert result["changed"] is True
    assert not os.path.exists(node.env_path)
    assert not os.path.exists(os.path.dirname(node.env_path))  # /etc/raygate is left empty: removed
    assert os.path.exists(node.conf_path)
    assert node.run(state="absent")["changed"] is False
