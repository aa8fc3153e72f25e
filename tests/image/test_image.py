"""The Ray node image `make image` built (tools/image/build.sh, docs/CONTAINERS.md), checked end to end.

The digest it recorded is the one the registry serves; the archive is the one its checksum file names
and holds that digest; Ray runs from the image as a user other than root, pulled by digest from the
registry and loaded from the archive, each into a Podman storage of its own (never the host's).

`make image-check` runs this as root after starting the registry; `make test` does not. Without a
built image (no .build/image/ray-<version>.digest) every test skips, and the end of the run says so.
"""

import hashlib
import json
import os
import resource
import shutil
import subprocess
import tempfile
import urllib.request

import pytest

from ansible_collections.raygate.cluster.plugins.plugin_utils import image_ref

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RAY_VERSION = os.environ.get("RAYGATE_RAY_VERSION", "2.60.0")
OUT = os.environ.get("RAYGATE_IMAGE_OUT", os.path.join(ROOT, ".build", "image"))
STATE = os.environ.get("RAYGATE_IMAGE_DIR", "/srv/raygate/image")
NAME = "ray-%s" % RAY_VERSION
DIGEST_FILE = os.path.join(OUT, NAME + ".digest")
TAG = "%s-bookworm" % RAY_VERSION
# A uid and gid with no account in the image: Ray needs none (root podman, --user).
USER = "990:990"
PYTHON = "/opt/raygate/current/bin/python"
TIMEOUT = 600

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (rootful podman)"),
    pytest.mark.skipif(
        not os.path.isfile(DIGEST_FILE), reason="the Ray node image is not built: no %s (make image)" % DIGEST_FILE
    ),
    pytest.mark.skipif(
        not (shutil.which("podman") and shutil.which("skopeo")), reason="needs podman and skopeo (make image)"
    ),
]


def run(argv, env=None):
    done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, env=env, check=False)
    assert done.returncode == 0, "%s: rc %d\n%s%s" % (" ".join(argv), done.returncode, done.stdout, done.stderr)
    return done.stdout


def read(path):
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def ulimits():
    """This host's root lacks CAP_SYS_RESOURCE: podman's default limits cannot be set (docs/CONTAINERS.md)."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    hard = 1048576 if hard == resource.RLIM_INFINITY else hard
    return ["--ulimit", "nofile=%d:%d" % (hard, hard), "--ulimit", "nproc=32768:32768"]


@pytest.fixture(scope="module")
def built():
    digest = read(DIGEST_FILE).strip()
    ref = image_ref.check_image_ref(read(os.path.join(OUT, NAME + ".ref")).strip())
    assert ref["digest"] == digest, "%s.ref and %s.digest disagree" % (NAME, NAME)
    assert ref["registry"].startswith("127.0.0.1:"), ref
    try:
        # Straight to loopback, whatever proxy the environment names.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        opener.open("http://%s/v2/" % ref["registry"], timeout=5).close()
    except OSError as exc:
        pytest.fail(
            "the registry on %s does not answer (%s): tools/image/build.sh registry start (make image-check "
            "starts it)" % (ref["registry"], exc)
        )
    return ref


def unmount_under(path):
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        points = [line.split()[4] for line in fh]
    for point in sorted((p for p in points if p == path or p.startswith(path + "/")), reverse=True):
        subprocess.run(["umount", "-l", point], check=False)


@pytest.fixture
def podman():
    """podman on a fresh storage of its own under the image's state dir, removed afterwards."""
    os.makedirs(STATE, exist_ok=True)
    top = tempfile.mkdtemp(prefix="check.", dir=STATE)
    os.makedirs(os.path.join(top, "tmp"))
    env = dict(os.environ, CONTAINERS_CONF=os.path.join(ROOT, "tools", "image", "containers.conf"))
    env["TMPDIR"] = os.path.join(top, "tmp")
    base = ["podman", "--root", top + "/storage", "--runroot", top + "/run", "--tmpdir", top + "/libpod"]
    base += ["--storage-driver", "overlay"]

    def podman(*args):
        return run(base + list(args), env=env)

    yield podman
    subprocess.run(base + ["rmi", "-a", "-f"], env=env, capture_output=True, timeout=TIMEOUT, check=False)
    unmount_under(top)
    shutil.rmtree(top)


def ray_as_user(podman, reference):
    argv = ["run", "--rm", "--pull=never", "--network", "none", "--user", USER] + ulimits()
    argv += [reference, PYTHON, "-c", "import os, ray; print(os.getuid(), os.getgid(), ray.__version__)"]
    return podman(*argv).split()


def manifest(reference):
    raw = run(["skopeo", "inspect", "--tls-verify=false", "--raw", "docker://" + reference])
    return raw, json.loads(raw)


def test_the_registry_serves_the_recorded_digest_under_the_tag_too(built):
    raw = manifest(built["reference"])[0]
    assert "sha256:" + hashlib.sha256(raw.encode("utf-8")).hexdigest() == built["digest"]
    tagged = "docker://%s:%s" % (built["repository"], TAG)
    got = run(["skopeo", "inspect", "--tls-verify=false", "--format", "{{.Digest}}", tagged]).strip()
    assert got == built["digest"], "%s names %s, %s was recorded" % (tagged, got, DIGEST_FILE)


def test_the_archive_matches_its_checksum_file_and_holds_the_digest(built):
    archive = os.path.join(OUT, NAME + ".oci.tar")
    recorded = read(archive + ".sha256").split()[0]
    assert image_ref.check_archive_checksum(archive, recorded) == "sha256:" + recorded
    got = run(["skopeo", "inspect", "--format", "{{.Digest}}", "oci-archive:" + archive]).strip()
    assert got == built["digest"], "%s holds %s, %s was recorded" % (archive, got, DIGEST_FILE)


def test_ray_runs_pulled_by_digest_as_another_user(built, podman):
    podman("pull", "-q", "--tls-verify=false", built["reference"])
    config = manifest(built["reference"])[1]["config"]["digest"]
    assert "sha256:" + podman("image", "inspect", "--format", "{{.Id}}", built["reference"]).strip() == config
    assert ray_as_user(podman, built["reference"]) == ["990", "990", RAY_VERSION]


def test_ray_runs_loaded_from_the_archive_found_by_its_digest(built, podman):
    podman("load", "-q", "-i", os.path.join(OUT, NAME + ".oci.tar"))
    # The pinned reference finds the loaded image by its digest, without the registry.
    podman("image", "exists", built["reference"])
    assert ray_as_user(podman, built["reference"]) == ["990", "990", RAY_VERSION]
