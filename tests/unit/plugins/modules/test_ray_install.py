import builtins
import copy
import errno
import os
import socket

import pytest
import yaml
from harness import load_cases, run_case

from ansible_collections.raygate.cluster.plugins.module_utils.node import install as install_step
from ansible_collections.raygate.cluster.plugins.modules import ray_install

PATH = os.path.join(os.path.dirname(__file__), "ray_install.yml")
CASES = load_cases(PATH)
with open(PATH) as fh:
    BY_ID = {case["id"]: case for case in yaml.safe_load(fh)}
MIB = 1 << 20
PY = ["{py}", "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"]
PIP_RAY = BY_ID["failed_pip_install_reports_its_output"]["commands"][2]["cmd"]
ENOSPC = "[Errno 28] No space left on device"


@pytest.fixture(autouse=True)
def disk(monkeypatch):
    """The free space the module sees, in MiB: plenty unless a test says otherwise. ``disk.free`` is
    a list answered in order (the last one repeats), for a disk that fills up during the install."""

    class Disk:
        free = [100 * 1024]
        asked = []

        def free_bytes(self, path):
            self.asked.append(path)
            return (self.free.pop(0) if len(self.free) > 1 else self.free[0]) * MIB

    fake = Disk()
    monkeypatch.setattr(install_step, "free_bytes", fake.free_bytes)
    return fake


def case_from(base, **changes):
    """A case of ray_install.yml with some keys replaced; these cases need a fake disk, which
    test_node_steps (it reruns every case of the YAML file as a step) does not give them."""
    case = copy.deepcopy(BY_ID[base])
    case.update(changes)
    case.setdefault("names", {})["host"] = socket.gethostname()
    return case


@pytest.mark.parametrize("case", CASES)
def test_ray_install(case, tmp_path, monkeypatch):
    run_case(case, ray_install.main, tmp_path, monkeypatch)


@pytest.mark.parametrize("check_mode", [False, True], ids=["run", "check_mode"])
def test_not_enough_space_fails_before_anything_is_created(check_mode, disk, tmp_path, monkeypatch):
    disk.free = [41]
    case = case_from(
        "offline_pip_install_from_scratch",
        check_mode=check_mode,
        commands=[{"cmd": PY, "out": "3.11.2\n"}],
        expect={
            "failed": True,
            "msg_contains": [
                "{host}: not enough space for Ray 2.60.0 in {venv}: 41 MiB free on {tmp}, ",
                "about 512 MiB needed (estimated; min_free_mb overrides it)",
                "set base_dir (raygate_base_dir) to a larger filesystem",
            ],
        },
        exists=[],
        absent=["{tmp}/opt"],
    )
    run_case(case, ray_install.main, tmp_path, monkeypatch)
    assert disk.asked == [str(tmp_path)]  # base_dir does not exist yet: its nearest existing parent


def test_no_space_left_during_pip_removes_the_half_built_venv(disk, tmp_path, monkeypatch):
    disk.free = [900, 3]  # enough before the install, 3 MiB once pip filled the disk
    old = str(tmp_path / "opt" / "ray-2.59.0-py3.11")
    case = case_from(
        "failed_pip_install_reports_its_output",
        commands=[
            {"cmd": PY, "out": "3.11.2\n"},
            {"cmd": ["{py}", "-m", "venv", "{venv}"], "effect": {"mkdir": ["{venv}/bin", "{venv}/lib"]}},
            {"cmd": PIP_RAY, "rc": 1, "err": "ERROR: Could not install packages due to an OSError: " + ENOSPC},
        ],
    )
    case["setup"]["mkdir"].append(old)
    case["setup"]["symlink"] = {"{tmp}/opt/current": old}
    case["expect"]["msg_contains"] = [
        "{host}: ran out of space installing Ray 2.60.0 in {venv}: 3 MiB free now on {tmp}/opt",
        "about 512 MiB needed",
        "The half-built virtualenv was removed",
        ENOSPC,
    ]
    case["absent"] = ["{venv}"]
    run_case(case, ray_install.main, tmp_path, monkeypatch)
    assert os.readlink(tmp_path / "opt" / "current") == old


def test_disk_full_writing_the_marker_removes_the_half_built_venv(disk, tmp_path, monkeypatch):
    def full_open(path, mode="r", *args, **kwargs):
        if path.endswith(install_step.MARKER) and "w" in mode:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        return builtins.open(path, mode, *args, **kwargs)

    monkeypatch.setattr(install_step, "open", full_open, raising=False)
    disk.free = [600, 0]
    case = case_from("offline_pip_install_from_scratch", absent=["{venv}", "{tmp}/opt/current"], exists=[])
    case["commands"] = case["commands"][:-1]  # no Python version asked of a venv that is gone
    case["expect"] = {"failed": True, "msg_contains": ["0 MiB free now", "The half-built virtualenv was removed"]}
    run_case(case, ray_install.main, tmp_path, monkeypatch)


@pytest.mark.parametrize("leftover_mb, fits", [(4, True), (1, False)])
def test_a_leftover_half_built_venv_counts_as_free_space(leftover_mb, fits, disk, tmp_path, monkeypatch):
    """509 MiB free and 512 needed: the unfinished venv of an interrupted run, which the install
    removes first, makes up the difference when it is big enough."""
    disk.free = [509]
    venv = tmp_path / "opt" / "ray-2.60.0-py3.11"
    (venv / "lib").mkdir(parents=True)
    (venv / "lib" / "big.so").write_bytes(b"x" * leftover_mb * MIB)  # really written: blocks are counted
    case = case_from("offline_pip_install_from_scratch")
    if not fits:
        case["commands"] = case["commands"][:1]
        case["expect"] = {"failed": True, "msg_contains": "510 MiB free on {tmp}/opt (counting the unfinished"}
        case["exists"] = [str(venv / "lib" / "big.so")]  # nothing removed before failing
    result = run_case(case, ray_install.main, tmp_path, monkeypatch)
    if fits:
        assert (result["free_mb"], result["needed_mb"]) == (509 + leftover_mb, 512)
        assert not (venv / "lib" / "big.so").exists()


@pytest.mark.parametrize(
    "min_free_mb, free, fails",
    [(100, 200, False), (4096, 2000, True)],
    ids=["lower_than_the_estimate", "higher_than_the_free_space"],
)
def test_min_free_mb_overrides_the_estimate(min_free_mb, free, fails, disk, tmp_path, monkeypatch):
    disk.free = [free]
    case = case_from("offline_pip_install_from_scratch")
    case["args"] = dict(case["args"], min_free_mb=min_free_mb)
    if fails:
        case.update(commands=case["commands"][:1], exists=[], absent=["{tmp}/opt"])
        case["expect"] = {"failed": True, "msg_contains": "2000 MiB free on {tmp}, about 4096 MiB needed (set by min"}
    else:
        case["expect"].update(free_mb=200, needed_mb=100)
    run_case(case, ray_install.main, tmp_path, monkeypatch)


def test_an_index_install_needs_1536_mib_by_default(disk, tmp_path, monkeypatch):
    disk.free = [1535]
    case = case_from(
        "offline_pip_install_from_scratch",
        args={"version": "2.60.0", "base_dir": "{tmp}/opt"},
        commands=[
            {"cmd": PY, "out": "3.11.2\n"},
            {
                "cmd": ["{py}", "-m", "pip", "index", "versions", "ray", "--disable-pip-version-check"],
                "out": "ray (2.60.0)\nAvailable versions: 2.60.0, 2.59.0\n",
            },
        ],
        expect={"failed": True, "msg_contains": "1535 MiB free on {tmp}, about 1536 MiB needed"},
        exists=[],
        absent=["{tmp}/opt"],
    )
    run_case(case, ray_install.main, tmp_path, monkeypatch)


def test_the_wheelhouse_estimate_is_three_times_its_wheels(tmp_path):
    for name, size in [("ray-2.60.0-cp311-cp311-linux_x86_64.whl", 300), ("grpcio-1.0-py3-none-any.whl", 100)]:
        with open(tmp_path / name, "wb") as fh:
            fh.truncate(size * MIB)  # sparse: the size counts, not the blocks
    (tmp_path / "notes.txt").write_text("not a wheel")
    params = {"min_free_mb": 0, "wheelhouse": str(tmp_path)}
    assert install_step.estimate_bytes(params) == 1200 * MIB
    assert install_step.estimate_bytes(dict(params, wheelhouse=str(tmp_path / "empty"), min_free_mb=7)) == 7 * MIB


def test_an_installed_venv_needs_nothing(disk, tmp_path, monkeypatch):
    disk.free = [41]  # a full disk does not fail a run that installs nothing
    case = case_from("already_installed_changes_nothing")
    case["expect"].update(free_mb=41, needed_mb=0)
    run_case(case, ray_install.main, tmp_path, monkeypatch)


def test_a_negative_min_free_mb_is_refused(tmp_path, monkeypatch):
    case = case_from("inexact_version_is_refused")
    case["args"] = dict(case["args"], version="2.60.0", min_free_mb=-1)
    case["expect"] = {"failed": True, "msg_contains": "min_free_mb must be 0"}
    run_case(case, ray_install.main, tmp_path, monkeypatch)
