"""gpu_health's device_access check: can the account Ray runs as open the NVIDIA device files?"""

import grp
import os
import shutil
import stat
import tempfile

import pytest

from ansible_collections.raygate.cluster.plugins.module_utils._runner import CommandRunner
from ansible_collections.raygate.cluster.plugins.module_utils.gate import device_access as da
from ansible_collections.raygate.cluster.plugins.module_utils.node import service_user as su

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="testing as another account needs root")

# The lines of /proc/driver/nvidia/params that matter, from a real H100 (driver 580.159.04), read on the
# machine lent on 2026-11-26 (docs/SECURITY.md, "GPUs").
H100_PARAMS = "ModifyDeviceFiles: 1\nDeviceFileUID: 0\nDeviceFileGID: 0\nDeviceFileMode: 438\n"


@pytest.fixture
def root():
    """A sysfs_root another account can walk into (pytest's tmp_path is 0700 root's)."""
    path = tempfile.mkdtemp(prefix="raygate-devtest-")
    os.chmod(path, 0o755)
    os.mkdir(os.path.join(path, "dev"), 0o755)
    yield path
    shutil.rmtree(path)


def make(root, names, mode=0o666, group="root"):
    gid = grp.getgrnam(group).gr_gid
    for name in names:
        path = os.path.join(root, "dev", name)
        with open(path, "w", encoding="utf-8"):
            pass
        os.chown(path, 0, gid)
        os.chmod(path, mode)


def params(root, text):
    os.makedirs(os.path.join(root, "proc", "driver", "nvidia"))
    with open(os.path.join(root, "proc", "driver", "nvidia", "params"), "w", encoding="utf-8") as fh:
        fh.write(text)


def test_the_driver_params_give_uid_gid_and_mode():
    assert da.parse_params(H100_PARAMS) == {"DeviceFileUID": 0, "DeviceFileGID": 0, "DeviceFileMode": 0o666}
    assert da.parse_params("DeviceFileMode: x\nnothing\n") == {}
    assert da.read_params("/raygate-no-such-root") == {}


def test_only_the_files_cuda_opens_are_judged_in_a_stable_order(root):
    make(root, ["nvidia10", "nvidia2", "nvidia-uvm-tools", "nvidia-modeset", "nvidia0", "nvidia-uvm", "nvidiactl"])
    os.mkdir(os.path.join(root, "dev", "nvidia-caps"))
    found = [os.path.basename(p) for p in da.device_files(os.path.join(root, "dev"))]
    assert found == ["nvidiactl", "nvidia-uvm", "nvidia0", "nvidia2", "nvidia10"]
    assert da.device_files(os.path.join(root, "none")) == []


def test_many_gpus_are_shown_as_a_range():
    paths = ["/dev/nvidiactl", "/dev/nvidia-uvm"] + ["/dev/nvidia%d" % i for i in range(8)]
    assert da._short(paths) == "/dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia0-7"
    assert da._short(["/dev/nvidia0", "/dev/nvidia3"]) == "/dev/nvidia0, /dev/nvidia3"


def test_nothing_to_test_skips_and_says_why():
    assert da.check(None)["status"] == "skip"
    assert "root" in da.check(da.gather("root", "/", None))["detail"]
    missing = da.check(da.gather("raygate-no-such", "/", None))
    assert missing["status"] == "skip" and "does not exist yet" in missing["detail"]


def test_no_device_files_fails_unless_nvidia_smi_already_did(root):
    ev = da.gather("nobody", root, CommandRunner())
    assert da.check(ev)["status"] == "fail" and "no NVIDIA device files" in da.check(ev)["detail"]
    assert da.check(ev, nvsmi_failed=True)["status"] == "skip"


def test_a_caller_that_is_neither_root_nor_the_account_cannot_test(monkeypatch):
    monkeypatch.setattr(da.os, "geteuid", lambda: 4242)
    result = da.check(da.gather("nobody", "/", None))
    assert result["status"] == "skip" and "uid 4242" in result["detail"]


def test_a_test_that_cannot_run_warns(root):
    make(root, ["nvidiactl"])

    class Broken:
        def run(self, args, **kwargs):
            return 126, "", "python3: permission denied"

    nobody = su.lookup("nobody")
    result = da.check(da.gather("nobody", root, Broken(), lookup=lambda name: nobody))
    assert result["status"] == "warn" and "permission denied" in result["detail"]


@as_root
def test_the_driver_default_0666_passes(root):
    make(root, ["nvidiactl", "nvidia-uvm"] + ["nvidia%d" % i for i in range(8)])
    result = da.check(da.gather("nobody", root, CommandRunner()))
    assert result["status"] == "pass", result
    dev = root + "/dev"
    assert result["detail"] == "nobody can open %s/nvidiactl, %s/nvidia-uvm, %s/nvidia0-7" % (dev, dev, dev)
    assert result["value"] == 10


@as_root
def test_files_0660_for_a_group_fail_naming_the_group_to_join(root):
    make(root, ["nvidiactl", "nvidia0"], mode=0o660, group="video")
    params(root, H100_PARAMS.replace("DeviceFileMode: 438", "DeviceFileMode: 432").replace("GID: 0", "GID: 44"))
    result = da.check(da.gather("nobody", root, CommandRunner()))
    assert result["status"] == "fail"
    # Regular files here (mode -rw-), character devices on a node (crw-): the mode is shown as ls does.
    assert result["detail"].startswith("nobody cannot read and write %s/dev/nvidiactl (-rw-rw---- root:video)" % root)
    assert "the driver makes them 0660, group id 44" in result["detail"]
    assert "raygate_user_groups: [video]" in result["action"] and "NVreg_DeviceFileMode=0666" in result["action"]
    assert (result["value"], result["threshold"]) == (0, 2)


@as_root
def test_files_only_root_may_open_name_the_driver_option(root):
    make(root, ["nvidiactl", "nvidia0"], mode=0o660)
    make(root, ["nvidia-uvm"])
    result = da.check(da.gather("nobody", root, CommandRunner()))
    assert result["status"] == "fail" and "nvidia-uvm" not in result["detail"]
    assert result["action"].startswith("have the driver make them readable to nobody")
    assert result["value"] == 1


@as_root
def test_the_account_s_own_groups_count(root):
    """The test runs as the account with its supplementary groups, as Ray does."""
    make(root, ["nvidiactl"], mode=0o660, group="video")
    nobody = su.lookup("nobody")
    member = su.ServiceUser("nobody", nobody.uid, nobody.gid, [grp.getgrnam("video").gr_gid], nobody.home, False)
    result = da.check(da.gather("nobody", root, CommandRunner(), lookup=lambda name: member))
    assert result["status"] == "pass", result
    described = da.describe(os.path.join(root, "dev", "nvidiactl"))
    assert described["group_rw"] and stat.S_ISREG(os.stat(described["path"]).st_mode)
