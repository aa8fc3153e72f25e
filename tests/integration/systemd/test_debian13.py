"""Scenario `systemd` on Debian 13 (issue 29): a Debian 13 controller drives Debian 13 nodes.

The nodes boot a trixie rootfs (rootfs.sh with RAYGATE_ROOTFS_SUITE=trixie: Python 3.13, systemd
257) and install Ray's cp313 wheels from the wheelhouse (make systemd downloads them). The
controller is tests/controller/trixie.sh's chroot: Python 3.13 and the newest ansible-core tested
(2.21), with the collection installed from the tarball built from this checkout, as a user
installs it, and run by its FQCN playbooks. In order, on one 2-node cluster: site.yml enables and
starts the units; a re-run restarts nothing; a raylet killed with SIGKILL is restarted by systemd
and rejoins; teardown leaves nothing, twice. The rest of the systemd scenario (reboot, upgrade, a
killed GCS) runs on Debian 12 nodes in test_systemd.py.

Run on its own (`pytest tests/integration/systemd`): it owns the sandbox while it runs.
"""

import os
import re

import pytest
from conftest import ROOT, SANDBOX, STATE, VENV_BIN, needs_root, node, run
from systemd_nodes import (
    NODES,
    alive_ips,
    changed_nothing,
    killed_raylet_comes_back,
    nothing_left,
    raylet,
    site_changes_nothing,
    units_run_ray,
    up,
    write_inventory,
)

pytestmark = needs_root

TRIXIE = os.path.join(ROOT, "tests", "controller", "trixie.sh")
RAY_VERSION = os.environ.get("RAYGATE_RAY_VERSION", "2.60.0")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    up("trixie")
    base = tmp_path_factory.mktemp("debian13")
    rc, out = run([os.path.join(VENV_BIN, "ansible-galaxy"), "collection", "build", "--output-path", str(base), ROOT])
    assert rc == 0, out
    (tarball,) = base.glob("raygate-cluster-*.tar.gz")
    inv = write_inventory(base)
    # The chroot sees the inventory (and the token it writes) and the sandbox's key at their paths.
    binds = {"BINDS": "%s:%s" % (os.path.dirname(STATE), base)}

    def play(name, *extra):
        """raygate.cluster.NAME from the Debian 13 controller (or ansible-playbook EXTRA without NAME)."""
        args = ["-i", inv, "raygate.cluster." + name] if name else []
        return run([TRIXIE, "play", str(tarball), *args, *extra], timeout=1200, env=binds)

    yield play
    if os.path.exists(STATE):  # the last test takes the sandbox down itself
        play("teardown")
        run([SANDBOX, "down"], timeout=300)


def test_controller_and_nodes_run_debian_13(cluster):
    rc, out = cluster(None, "--version")
    assert rc == 0, out[-3000:]
    assert re.search(r"core 2\.2[1-9]", out) and re.search(r"python version = 3\.1[3-9]", out), out
    assert "/opt/raygate-controller/collections" in out, out  # the tarball's copy, not the checkout
    for index in NODES:
        rc, out = node(index, ". /etc/os-release; echo $VERSION_ID; python3 -c 'import sys; print(sys.version[:4])'")
        assert out.split() == ["13", "3.13"], (index, out)


def test_site_enables_and_starts_the_units(cluster):
    rc, out = cluster("site")
    assert rc == 0, out[-4000:]
    units_run_ray()
    for index in NODES:
        # Ray's cp313 wheel, in the versioned virtualenv for this node's Python.
        rc, exe = node(index, "readlink -f /proc/%d/exe" % raylet(index))
        assert "/ray-%s-py3.13/" % RAY_VERSION in exe, (index, exe)
    assert alive_ips() == sorted(NODES.values())


def test_rerun_restarts_nothing(cluster):
    site_changes_nothing(cluster)


def test_killed_raylet_is_restarted_by_systemd_and_rejoins(cluster):
    killed_raylet_comes_back(2)
    assert raylet(1)


def test_teardown_leaves_nothing_twice(cluster):
    rc, out = cluster("teardown")
    assert rc == 0, out[-4000:]
    for index in NODES:
        assert nothing_left(index) == "", index
    rc, out = cluster("teardown")
    assert rc == 0, out[-4000:]
    changed_nothing(out)
    rc, out = run([SANDBOX, "down"], timeout=300)
    assert rc == 0, out
