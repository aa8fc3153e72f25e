"""node_steps: several raygate steps in one module call, each exactly as its own module."""

import importlib.util
import json
import os
import shutil
from types import SimpleNamespace

import pytest
import yaml
from ansible.module_utils import basic
from ansible.module_utils.common.parameters import PASS_VARS
from ansible.module_utils.testing import patch_module_args
from harness import ModuleExit, _exit, _fail, fake_venv, run_case

from ansible_collections.raygate.cluster.plugins.module_utils import files
from ansible_collections.raygate.cluster.plugins.module_utils._runner import CommandRunner
from ansible_collections.raygate.cluster.plugins.module_utils.node import install as install_step
from ansible_collections.raygate.cluster.plugins.module_utils.node import node as node_step
from ansible_collections.raygate.cluster.plugins.module_utils.node import procs as ray_procs
from ansible_collections.raygate.cluster.plugins.module_utils.node import steps
from ansible_collections.raygate.cluster.plugins.modules import nccl_env, node_steps, ray_firewall, ray_install

HERE = os.path.dirname(__file__)
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
SIM = os.path.join(ROOT, "tests", "sandbox", "sim", "raygate_sim.py")
_spec = importlib.util.spec_from_file_location("raygate_sim", SIM)
raygate_sim = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(raygate_sim)

HELP = "Usage: ray start [OPTIONS]\n  --node-ip-address TEXT\n  --port INTEGER\n  --head\n  --disable-usage-stats\n"
IP_ADDR = "2: eth0@if7    inet 198.18.0.11/24 brd 198.18.0.255 scope global eth0\\       valid_lft forever\n"
SECRET = "tok-" + "5eCr3t" * 8


@pytest.fixture(autouse=True)
def no_ray_here(monkeypatch):
    # The host's /proc also shows Ray running inside sandbox nodes: never look at it here.
    monkeypatch.setattr(ray_procs, "ray_processes", lambda **kwargs: [])
    # The ray_firewall cases with boot: true run as if systemd were the init system here.
    monkeypatch.setattr(files, "systemd_booted", lambda: True)


@pytest.fixture(autouse=True)
def plenty_of_disk(monkeypatch):
    # The ray_install cases rerun here report free_mb: give them a fixed 100 GiB, not this disk's.
    monkeypatch.setattr(install_step, "free_bytes", lambda path: 100 * 2**30)


def load(name):
    with open(os.path.join(HERE, "%s.yml" % name)) as fh:
        return yaml.safe_load(fh)


INSTALL = load("ray_install")
FIREWALL = load("ray_firewall")
FIREWALL_BY_ID = {case["id"]: case for case in FIREWALL}
EQUIVALENCE = [pytest.param("ray_install", ray_install.main, c, id="ray_install-" + c["id"]) for c in INSTALL] + [
    pytest.param("ray_firewall", ray_firewall.main, c, id="ray_firewall-" + c["id"]) for c in FIREWALL
]


def empty(path):
    for entry in os.listdir(path):
        full = os.path.join(path, entry)
        if os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full)
        else:
            os.unlink(full)


def as_step(case, name):
    """The same case run through node_steps: same commands, files and warnings; the args wrapped."""
    step = {k: v for k, v in case.items() if k not in ("expect", "expect_contains")}
    step["args"] = {name: case["args"]}
    return step


@pytest.mark.parametrize("name, main, case", EQUIVALENCE)
def test_a_step_returns_exactly_what_its_module_returns(name, main, case, tmp_path, monkeypatch):
    """Every scripted case of the module, run again as a step: the same commands in the same
    order (the harness fails on any other), the same files, and the same result."""
    if "after" in case:
        run_case(FIREWALL_BY_ID[case["after"]], main, tmp_path, monkeypatch)
    alone = run_case(case, main, tmp_path, monkeypatch)
    empty(tmp_path)
    if "after" in case:
        run_case(FIREWALL_BY_ID[case["after"]], main, tmp_path, monkeypatch)
    together = run_case(as_step(case, name), node_steps.main, tmp_path, monkeypatch)
    assert together["steps"] == [name]
    assert together["step_results"] == {name: alone}
    if alone.get("failed"):
        assert together["failed"] is True
        assert together["msg"] == "%s: %s" % (name, alone["msg"])
        assert together["failed_step"] == name
    else:
        assert "failed" not in together
        assert together["changed"] == alone["changed"]
        assert together["changed"] == alone["changed"]


# -- nccl_env over a simulated sysfs tree -------------------------------------------------------


@pytest.fixture()
def fabric_node(tmp_path, monkeypatch):
    """A sysfs tree for one fabric, interface eth0, no fabric tools; nccl_env's files under tmp/etc."""
    net = tmp_path / "net"
    (net / "eth0").mkdir(parents=True)
    (net / "lo").mkdir()

    def fake_run(self, args, **kwargs):
        assert list(args[:3]) == ["ip", "-o", "addr"], "unexpected command %s" % args
        return 0, IP_ADDR, ""

    monkeypatch.setattr(CommandRunner, "which", lambda self, name, extra_dirs=(): None)
    monkeypatch.setattr(CommandRunner, "run", fake_run)
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", _exit)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", _fail)
    etc = tmp_path / "etc"

    def args(**over):
        base = {
            "sysfs_root": str(tmp_path / "sim"),
            "path": str(etc / "raygate" / "nccl.env"),
            "nccl_conf_path": str(etc / "nccl.conf"),
            "node_ip": "198.18.0.11",
        }
        return dict(base, **over)

    def fabric(**spec):
        raygate_sim.build_tree(str(tmp_path / "sim"), spec, net_target=str(net))

    return SimpleNamespace(args=args, fabric=fabric, etc=etc)


def call(main, args, check=False, diff=False):
    args = dict(args, _ansible_check_mode=check, _ansible_diff=diff)
    with patch_module_args(args), pytest.raises(ModuleExit) as exc:
        main()
    return exc.value.result


@pytest.mark.parametrize(
    "fabric, over",
    [
        ({"type": "ib", "devices": 4, "down": [1]}, {}),
        ({"type": "efa", "devices": 4}, {"force_net": True, "nccl_conf": True}),
        ({"type": "roce", "devices": 2}, {"env": {"NCCL_DEBUG": "WARN", "NCCL_NET_GDR_LEVEL": None}}),
        ({"type": "ib", "devices": 2}, {"fabric": "none", "require_gdr": False}),
        ({"type": "none"}, {}),  # fails: no RDMA while require_gdr is on
        ({"type": "ib", "devices": 2}, {"env": {"NCCL_IB_HCAS": "=mlx5_0"}}),  # fails: unknown name
        ({"type": "ib", "devices": 2}, {"node_ip": "10.9.9.9"}),  # fails: no interface holds it
    ],
)
@pytest.mark.parametrize("check, diff", [(False, False), (True, True), (False, True)])
def test_nccl_env_step_returns_exactly_what_the_module_returns(fabric_node, fabric, over, check, diff):
    fabric_node.fabric(**fabric)
    args = fabric_node.args(**over)
    alone = call(nccl_env.main, args, check, diff)
    written = sorted(str(p) for p in fabric_node.etc.rglob("*"))
    shutil.rmtree(fabric_node.etc, ignore_errors=True)
    together = call(node_steps.main, {"nccl_env": args}, check, diff)
    assert together["step_results"] == {"nccl_env": alone}
    assert sorted(str(p) for p in fabric_node.etc.rglob("*")) == written
    assert together.get("failed") == alone.get("failed")
    if not alone.get("failed"):
        assert together["changed"] == alone["changed"]


def test_nccl_env_defaults_are_the_modules(fabric_node):
    """Nothing but the file locations given: the step fills in every default as the module does."""
    fabric_node.fabric(type="ib", devices=2)
    args = {"sysfs_root": fabric_node.args()["sysfs_root"], "path": fabric_node.args()["path"]}
    args["nccl_conf_path"] = fabric_node.args()["nccl_conf_path"]
    alone = call(nccl_env.main, args, check=True)
    together = call(node_steps.main, {"nccl_env": args}, check=True)
    assert together["step_results"]["nccl_env"] == alone
    assert alone["changed"] is True and "NCCL_IB_HCA" in alone["env"]


def test_diff_mode_lists_the_steps_diffs_with_headers(fabric_node, tmp_path):
    fabric_node.fabric(type="ib", devices=2)
    node = node_args(tmp_path, state="absent")
    result = call(node_steps.main, {"nccl_env": fabric_node.args(), "ray_node": node}, diff=True)
    assert result["steps"] == ["ray_node", "nccl_env"]
    env_path = fabric_node.args()["path"]
    # ray_node's (empty) diff carries no header of its own: it gets the step's name.
    assert result["diff"][0] == {"before": "", "after": "", "before_header": "ray_node", "after_header": "ray_node"}
    assert result["diff"][1]["after_header"] == env_path and "NCCL_IB_HCA" in result["diff"][1]["after"]
    assert result["step_results"]["ray_node"]["diff"] == {"before": "", "after": ""}  # the step's own result untouched
    assert "diff" not in call(node_steps.main, {"nccl_env": fabric_node.args()}, check=True)


# -- order, failures, validation, with recording fake steps ------------------------------------


@pytest.fixture()
def fakes(monkeypatch):
    """Replace the four implementations by recorders: ``fail`` names the steps that fail."""
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", _exit)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", _fail)
    state = SimpleNamespace(ran=[], fail=set(), changed=set())

    def make(name):
        def run(module):
            state.ran.append((name, module.check_mode, dict(module.params)))
            if name in state.fail:
                module.fail_json(msg="%s broke" % name, detail=name)
            module.exit_json(changed=name in state.changed, who=name)

        return SimpleNamespace(ARGUMENT_SPEC=dict(x=dict(type="int", default=1)), run=run)

    for name in steps.ORDER:
        monkeypatch.setitem(steps.STEPS, name, make(name))
    return state


def names(state):
    return [name for name, _check, _params in state.ran]


def test_the_default_order_and_only_the_given_steps(fakes):
    result = call(node_steps.main, {"ray_firewall": {}, "ray_install": {}, "nccl_env": {}})
    assert names(fakes) == ["ray_install", "nccl_env", "ray_firewall"]
    assert result["steps"] == ["ray_install", "nccl_env", "ray_firewall"]
    assert result["changed"] is False and "would_change" not in result
    assert result["step_results"]["nccl_env"] == {"changed": False, "who": "nccl_env"}


def test_order_is_honoured(fakes):
    order = ["ray_firewall", "ray_node", "ray_install", "nccl_env"]
    args = {name: {} for name in steps.ORDER}
    result = call(node_steps.main, dict(args, order=order))
    assert names(fakes) == order and result["steps"] == order


def test_steps_get_their_validated_options(fakes):
    call(node_steps.main, {"ray_install": {"x": "7"}, "ray_node": {}})
    assert [params for _name, _check, params in fakes.ran] == [{"x": 7}, {"x": 1}]


def test_changed_is_any_steps(fakes):
    fakes.changed.add("nccl_env")
    result = call(node_steps.main, {"ray_install": {}, "nccl_env": {}})
    assert result["changed"] is True
    assert result["step_results"]["ray_install"]["changed"] is False


def test_the_first_failure_stops_the_rest(fakes):
    fakes.fail.add("ray_node")
    fakes.changed.add("ray_install")
    result = call(node_steps.main, {name: {} for name in steps.ORDER})
    assert names(fakes) == ["ray_install", "ray_node"]
    assert result["failed"] is True
    assert result["msg"] == "ray_node: ray_node broke"
    assert result["failed_step"] == "ray_node"
    assert result["steps"] == ["ray_install", "ray_node"]
    assert result["step_results"]["ray_node"] == {"failed": True, "msg": "ray_node broke", "detail": "ray_node"}
    assert set(result["step_results"]) == {"ray_install", "ray_node"}
    assert result["changed"] is True  # what ray_install did before is still reported


def test_continue_on_failure_runs_every_step_and_names_every_failure(fakes):
    fakes.fail.update({"ray_install", "nccl_env"})
    result = call(node_steps.main, dict({name: {} for name in steps.ORDER}, continue_on_failure=True))
    assert names(fakes) == steps.ORDER
    assert result["failed"] is True
    assert result["msg"] == "ray_install: ray_install broke; nccl_env: nccl_env broke"
    assert result["failed_step"] == ["ray_install", "nccl_env"]
    assert result["step_results"]["ray_firewall"]["who"] == "ray_firewall"
    assert result["steps"] == steps.ORDER


def test_continue_on_failure_with_one_failure_still_gives_a_list(fakes):
    fakes.fail.add("ray_firewall")
    result = call(node_steps.main, {"ray_install": {}, "ray_firewall": {}, "continue_on_failure": True})
    assert result["failed_step"] == ["ray_firewall"]
    assert names(fakes) == ["ray_install", "ray_firewall"]


def test_a_step_given_but_not_in_order_fails_before_anything_runs(fakes):
    result = call(node_steps.main, {"ray_install": {}, "ray_node": {}, "order": ["ray_node"]})
    assert result["failed"] is True
    assert "ray_install given but not in order (ray_node)" in result["msg"]
    assert fakes.ran == []


def test_a_step_listed_twice_fails(fakes):
    result = call(node_steps.main, {"ray_node": {}, "order": ["ray_node", "ray_install", "ray_node"]})
    assert "order lists ray_node more than once" in result["msg"]
    assert fakes.ran == []


def test_an_unknown_step_name_in_order_fails(fakes):
    result = call(node_steps.main, {"ray_node": {}, "order": ["ray_node", "gpu_health"]})
    assert result["failed"] is True and "gpu_health" in result["msg"]
    assert fakes.ran == []


def test_check_mode_reaches_every_step(fakes):
    call(node_steps.main, {"ray_install": {}, "ray_firewall": {}}, check=True)
    assert [check for _name, check, _params in fakes.ran] == [True, True]


def test_no_step_given_changes_nothing(fakes):
    result = call(node_steps.main, {})
    assert result == {"changed": False, "steps": [], "step_results": {}}


# -- validation by the real implementations ---------------------------------------------------


@pytest.mark.parametrize(
    "name, args, words",
    [
        ("nccl_env", {"bogus": 1}, ["nccl_env: invalid options: unsupported parameters: bogus"]),
        ("ray_node", {}, ["ray_node: invalid options: missing required arguments: role"]),
        ("ray_firewall", {"port_offset": "lots"}, ["ray_firewall: invalid options:", "port_offset", "int"]),
        ("ray_install", {"installer": "conda"}, ["ray_install: invalid options:", "installer", "pip, uv"]),
    ],
)
def test_invalid_step_options_fail_naming_the_step_and_the_option(name, args, words, monkeypatch):
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", _exit)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", _fail)
    monkeypatch.setattr(CommandRunner, "run", lambda self, args, **kw: pytest.fail("ran %s" % args))
    result = call(node_steps.main, {name: args})
    assert result["failed"] is True and result["failed_step"] == name
    for word in words:
        assert word in result["msg"]


def test_continue_on_failure_reports_every_invalid_step(monkeypatch):
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", _exit)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", _fail)
    result = call(node_steps.main, {"ray_install": {}, "nccl_env": {"bogus": 1}, "continue_on_failure": True}, True)
    assert result["failed_step"] == ["ray_install", "nccl_env"]
    assert result["msg"].startswith("ray_install: version is required when state=present")
    assert "; nccl_env: invalid options: unsupported parameters: bogus" in result["msg"]


# -- ray_node and the auth token ---------------------------------------------------------------


def node_args(tmp, **over):
    args = {
        "role": "head",
        "node_ip": "198.18.0.11",
        "venv": "%s/venv" % tmp,
        "num_cpus": 2,
        "num_gpus": 0,
        "memory": 2147483648,
        "env_files": [],
        "config_dir": "%s/etc/raygate" % tmp,
        "state_dir": "%s/run" % tmp,
        "unit_dir": "%s/units" % tmp,
        "auth_token_file": "%s/etc/raygate/auth_token" % tmp,
    }
    args.update(over)
    return args


def run_for_real(args, capsys, check=False, diff=False):
    """main() with AnsibleModule's own exit_json/fail_json: the JSON that leaves the node."""
    args = dict(args, _ansible_check_mode=check, _ansible_diff=diff)
    # ansible-core 2.21 returns the invocation only when the controller asks for it (its
    # INJECT_INVOCATION setting); older cores always return it and refuse the parameter.
    if "inject_invocation" in PASS_VARS:
        args["_ansible_inject_invocation"] = True
    with patch_module_args(args), pytest.raises(SystemExit):
        node_steps.main()
    out = capsys.readouterr().out
    return out, json.loads(out)


def test_auth_token_reaches_ray_node_and_never_leaves_the_node(tmp_path, monkeypatch, capsys):
    fake_venv(tmp_path)
    monkeypatch.setattr(node_step.Node, "wait_head", lambda self, url: None)
    monkeypatch.setattr(node_step.Node, "_raylet_up", lambda self: (True, {"pid": 4242}))
    monkeypatch.setattr(node_step.Node, "run", lambda self, args, **kw: (0, HELP if "--help" in args else "", ""))
    args = {"ray_node": node_args(tmp_path, auth=True), "auth_token": SECRET}
    out, result = run_for_real(args, capsys, diff=True)
    token_file = tmp_path / "etc" / "raygate" / "auth_token"
    assert token_file.read_text() == SECRET + "\n"
    assert oct(token_file.stat().st_mode & 0o777) == "0o600"
    assert result["changed"] is True and result["step_results"]["ray_node"]["pid"] == 4242
    assert SECRET not in out
    assert result["invocation"]["module_args"]["auth_token"] == "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"


def test_auth_token_in_check_mode_writes_nothing_and_stays_masked_on_failure(tmp_path, monkeypatch, capsys):
    fake_venv(tmp_path)
    monkeypatch.setattr(CommandRunner, "run", lambda self, args, **kw: pytest.fail("ran %s" % args))
    # ray_install fails (no version), so the JSON is a failure carrying ray_node's result as well.
    args = {
        "ray_node": node_args(tmp_path, auth=True),
        "ray_install": {"base_dir": str(tmp_path / "opt")},
        "auth_token": SECRET,
        "order": ["ray_node", "ray_install"],
        "continue_on_failure": True,
    }
    out, result = run_for_real(args, capsys, check=True, diff=True)
    assert result["failed"] is True and result["failed_step"] == ["ray_install"]
    assert result["step_results"]["ray_node"]["changed"] is True  # the token file would be written
    assert not (tmp_path / "etc").exists()
    assert SECRET not in out


def test_auth_token_inside_ray_node_is_refused_and_masked(tmp_path, monkeypatch, capsys):
    fake_venv(tmp_path)
    monkeypatch.setattr(CommandRunner, "run", lambda self, args, **kw: pytest.fail("ran %s" % args))
    args = {"ray_node": node_args(tmp_path, auth=True, auth_token=SECRET)}
    out, result = run_for_real(args, capsys)
    assert result["failed"] is True
    assert "ray_node must not contain auth_token" in result["msg"]
    assert "auth_token option of node_steps" in result["msg"]
    assert "steps" not in result  # refused before any step ran
    assert not (tmp_path / "etc").exists()
    assert SECRET not in out


def test_auth_token_without_ray_node_is_unused(fakes):
    call(node_steps.main, {"ray_install": {}, "auth_token": SECRET})
    assert fakes.ran == [("ray_install", False, {"x": 1})]


# -- check mode over all four real steps ------------------------------------------------------


def snapshot(root):
    """Every path under ``root`` with its content (files), target (links) or None (directories)."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                found[path] = ("link", os.readlink(path))
            elif os.path.isfile(path):
                with open(path, "rb") as fh:
                    found[path] = ("file", fh.read(), os.stat(path).st_mode)
            else:
                found[path] = ("dir", os.stat(path).st_mode)
    return found


def test_check_mode_over_every_step_changes_nothing_on_disk(tmp_path, monkeypatch):
    fake_venv(tmp_path)
    (tmp_path / "wheels").mkdir()
    (tmp_path / "wheels" / "ray-2.60.0-cp311-cp311-manylinux2014_x86_64.whl").write_text("")
    (tmp_path / "net" / "eth0").mkdir(parents=True)
    raygate_sim.build_tree(str(tmp_path / "sim"), {"type": "ib", "devices": 2}, net_target=str(tmp_path / "net"))
    rules = "{tmp}/etc/raygate/firewall.nft"
    case = {
        "args": {
            "continue_on_failure": True,
            "auth_token": SECRET,
            "ray_install": {"version": "2.60.0", "base_dir": "{tmp}/opt", "wheelhouse": "{tmp}/wheels"},
            "ray_node": node_args(tmp_path, auth=True),
            "nccl_env": {
                "sysfs_root": "{tmp}/sim",
                "path": "{tmp}/etc/raygate/nccl.env",
                "nccl_conf_path": "{tmp}/etc/nccl.conf",
                "socket_ifname": "=eth0",
            },
            "ray_firewall": {"backend": "nftables", "sources": ["198.18.0.0/24"], "rules_file": rules},
        },
        "check_mode": True,
        "diff_mode": True,
        "which": {"nft": "/usr/sbin/nft"},
        "commands": [
            {
                "cmd": ["/usr/bin/python3", "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                "out": "3.11.2\n",
            },
            {
                "cmd": ["/usr/sbin/nft", "list", "table", "inet", "raygate"],
                "rc": 1,
                "err": "Error: No such file or directory; did you mean table 'raygate' in family inet?",
            },
            {"cmd": ["/usr/sbin/nft", "-c", "-f", "-"], "data_contains": ["table inet raygate"]},
        ],
        "expect": {"changed": True, "steps": steps.ORDER},
        "absent": ["{tmp}/opt", "{tmp}/etc", "{tmp}/run"],
    }
    before = snapshot(str(tmp_path))
    result = run_case(case, node_steps.main, tmp_path, monkeypatch)
    assert snapshot(str(tmp_path)) == before
    assert "failed" not in result, result.get("msg")
    for name in steps.ORDER:
        assert result["step_results"][name]["changed"] is True, name
    env_file = str(tmp_path / "etc" / "raygate" / "nccl.env")
    assert [d["after_header"] for d in result["diff"]] == ["ray_node", env_file, "ray_firewall"]
