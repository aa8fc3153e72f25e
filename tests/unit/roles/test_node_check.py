"""raygate_node_check.py (the role's node-local check) over the sandbox's GPU simulators, with the
bundle laid out as tasks/node_check.yml lays it out: the module, raygate's and Ansible's module_utils."""

import json
import os
import shutil
import subprocess
import sys

import ansible.module_utils
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCRIPT = os.path.join(ROOT, "roles", "watcher", "files", "raygate_node_check.py")
SIM = os.path.join(ROOT, "tests", "sandbox", "sim")
EPOCH = "1763719200"


@pytest.fixture
def bundle(tmp_path):
    lib = tmp_path / "lib"
    (lib / "ansible").mkdir(parents=True)
    (lib / "ansible" / "__init__.py").write_text("")
    shutil.copytree(os.path.dirname(ansible.module_utils.__file__), lib / "ansible" / "module_utils")
    plugins = lib / "ansible_collections" / "raygate" / "cluster" / "plugins"
    shutil.copytree(os.path.join(ROOT, "plugins", "module_utils"), plugins / "module_utils")
    (plugins / "modules").mkdir()
    shutil.copy(os.path.join(ROOT, "plugins", "modules", "gpu_health.py"), plugins / "modules")
    return lib


def node(tmp_path, scenario):
    """A simulated node's tree and the environment its tools read."""
    (tmp_path / "scenario.json").write_text(json.dumps(scenario))
    (tmp_path / "scenarios").mkdir(exist_ok=True)
    env = dict(
        os.environ,
        PATH=os.path.join(SIM, "bin") + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin"),
        RAYGATE_SIM_SCENARIO=str(tmp_path / "scenario.json"),
        RAYGATE_SIM_SCENARIOS_DIR=str(tmp_path / "scenarios"),
        RAYGATE_SIM_HOSTNAME="node1",
        RAYGATE_SIM_EPOCH=EPOCH,
        RAYGATE_SIM_KERN_LOG=str(tmp_path / "root" / "var" / "log" / "kern.log"),
    )
    build = [sys.executable, "-B", os.path.join(SIM, "raygate_sim.py"), "build"]
    build += ["--scenario", str(tmp_path / "scenario.json"), "--root", str(tmp_path / "root")]
    subprocess.run(build, check=True, capture_output=True, env=env)
    config = {
        "expected_gpus": 8,
        "kernel_log": str(tmp_path / "root" / "var" / "log" / "kern.log"),
        "sysfs_root": str(tmp_path / "root"),
        "dcgm_diag_level": 1,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    return env


def check(tmp_path, lib, env, *extra):
    args = [sys.executable, SCRIPT, "--lib", str(lib), "--config", str(tmp_path / "config.json"), "--node", "node1"]
    return subprocess.run(args + list(extra), capture_output=True, text=True, env=env, timeout=300, check=False)


def test_a_healthy_node_exits_0(tmp_path, bundle):
    done = check(tmp_path, bundle, node(tmp_path, {"gpu": {"model": "H100"}}))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "node1: healthy in" in done.stdout


def test_an_xid_exits_1_and_names_the_check(tmp_path, bundle):
    env = node(tmp_path, {"gpu": {"model": "H100", "faults": [{"type": "xid", "xid": 79, "gpu": 3}]}})
    done = check(tmp_path, bundle, env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "node1: UNHEALTHY" in done.stdout and "fail: xid: Xid 79" in done.stdout
    whole = check(tmp_path, bundle, env, "--json").stdout
    result = json.loads(whole[: whole.rindex("}") + 1])
    assert result["healthy"] is False and "xid" in [c["name"] for c in result["checks"] if c["status"] == "fail"]


def test_a_missing_bundle_or_config_exits_2(tmp_path, bundle):
    env = node(tmp_path, {"gpu": {"model": "H100"}})
    done = check(tmp_path, tmp_path / "nowhere", env)
    assert done.returncode == 2 and "no module at" in done.stdout, done.stdout
    (tmp_path / "config.json").unlink()
    done = check(tmp_path, bundle, env)
    assert done.returncode == 2 and "cannot check this node" in done.stdout, done.stdout
