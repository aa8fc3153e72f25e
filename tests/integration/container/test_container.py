"""Ray from a container image (issue 43), on 3 sandbox nodes with Debian's real Podman.

The image is the one `make image` builds offline (tools/image/build.sh), pinned by its registry
digest. The nodes pull it from a real registry (Debian's docker-registry) listening on the sandbox
bridge, or load it from the OCI archive on a path every node sees. The GPUs are simulated, so each
node holds a site CDI spec that maps /dev/null where a GPU's device node would be.

In order: the bad inputs (each refused before anything changes, the message asserted), the
bring-up, its guarantees (every node joined, the printed jobs line runs a GPU task on every node,
no Ray process is root, no token on the wire), a re-run that restarts nothing, a killed container
that comes back by itself, the node watcher taking a worker out on an injected Xid, teardown with
purge (no container, unit, CDI spec or image left; a second one changes nothing), and the same
image from the archive.
"""

import os
import re
import subprocess
import warnings

import pytest
from conftest import ROOT, SANDBOX, Capture, node, recap, run, scenario, scratch_inventory, wait_until, watch_state

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root, Podman and the sandbox")

NODES = {1: "198.18.0.11", 2: "198.18.0.12", 3: "198.18.0.13"}
IMAGE_OUT = os.environ.get("RAYGATE_IMAGE_OUT", os.path.join(ROOT, ".build", "image"))
RAY_VERSION = os.environ.get("RAYGATE_RAY_VERSION", "2.60.0")
BUILD = os.path.join(ROOT, "tools", "image", "build.sh")
IMAGE_STATE = os.environ.get("RAYGATE_IMAGE_DIR", "/srv/raygate/image")
# The registry the nodes pull from: the build's registry data, served on the bridge; a second one that
# takes only the user and password below (htpasswd auth).
REGISTRY = "198.18.0.1:5051"
LOCKED_REGISTRY = "198.18.0.1:5052"
REGISTRY_USER, REGISTRY_PASSWORD = "raygate", "registry-secret-7f3a"
# This host's root may not raise a limit (no CAP_SYS_RESOURCE): Podman's defaults fail (docs/CONTAINERS.md).
ULIMITS = "[nofile=20000:20000, nproc=32768:32768]"
# A site's CDI spec (cdiVersion 0.5.0: Debian 12's Podman 4.3 reads no newer), simulated GPUs.
CDI_SPEC = """\
cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
  - name: all
    containerEdits:
      deviceNodes:
        - path: /dev/nvidia0
          hostPath: /dev/null
containerEdits:
  env:
    - NVIDIA_VISIBLE_DEVICES=void
"""
HANG = 900


def _read(path):
    with open(path) as fh:
        return fh.read().strip()


def _registry(path, addr, auth=False):
    """Serve the build's registry data on ``addr`` (docker-registry), until the suite ends; with ``auth``,
    to REGISTRY_USER with REGISTRY_PASSWORD only (a bcrypt htpasswd line, from the C library's crypt)."""
    config = _read(os.path.join(IMAGE_STATE, "registry", "config.yml")).replace("127.0.0.1:5050", addr)
    if auth:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            import crypt  # pylint: disable=import-outside-toplevel,deprecated-module

            hashed = crypt.crypt(REGISTRY_PASSWORD, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << 10))
        with open(path + ".htpasswd", "w") as fh:
            fh.write("%s:%s\n" % (REGISTRY_USER, hashed))
        config += "\nauth:\n  htpasswd:\n    realm: raygate-test\n    path: %s.htpasswd\n" % path
    with open(path, "w") as fh:
        fh.write(config + "\n")
    proc = subprocess.Popen(["docker-registry", "serve", path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    host, port = addr.split(":")

    def answers():
        rc, out = run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "http://%s/v2/" % addr], timeout=10)
        return out.strip() in ("200", "401")

    wait_until("the registry on %s" % addr, answers, timeout=60)
    return proc


def _no_ray_image():
    """An image of the same base (the build's, in its storage) without Ray but with a `python`, pushed
    to the build's registry; its digest."""
    ctx = os.path.join(IMAGE_STATE, "tmp", "noray")
    os.makedirs(ctx, exist_ok=True)
    with open(os.path.join(ctx, "Containerfile"), "w") as fh:
        fh.write(
            "FROM localhost/raygate/ray:%s-bookworm\n"
            "RUN rm -rf /opt/raygate && ln -sf /usr/bin/python3 /usr/local/bin/python\n" % RAY_VERSION
        )
    storage = [
        "podman", "--root", os.path.join(IMAGE_STATE, "storage"),
        "--runroot", os.path.join(IMAGE_STATE, "run", "storage"),
        "--tmpdir", os.path.join(IMAGE_STATE, "run", "libpod"), "--storage-driver", "overlay",
    ]  # fmt: skip
    env = {"CONTAINERS_CONF": os.path.join(ROOT, "tools", "image", "containers.conf"), "TMPDIR": "/var/tmp"}
    limits = ["--ulimit", "nofile=20000:20000", "--ulimit", "nproc=32768:32768"]
    tag = "127.0.0.1:5050/raygate/noray:test"
    rc, out = run(storage + ["build", "--network", "none", "--pull=never"] + limits + ["-t", tag, ctx], env=env)
    assert rc == 0, out[-3000:]
    digest_file = os.path.join(ctx, "digest")
    rc, out = run(storage + ["push", "--tls-verify=false", "--digestfile", digest_file, tag], env=env)
    assert rc == 0, out[-3000:]
    return _read(digest_file)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    digest_path = os.path.join(IMAGE_OUT, "ray-%s.digest" % RAY_VERSION)
    if not os.path.exists(digest_path):
        pytest.fail("no image: run `make image` first (make container and make test do)")
    digest = _read(digest_path)
    base = tmp_path_factory.mktemp("container")
    rc, out = run([BUILD, "registry", "start"], timeout=120)
    assert rc == 0, out
    noray = _no_ray_image()
    rc, out = run([SANDBOX, "up", "3"], timeout=300)
    assert rc == 0, out
    registries = [
        _registry(str(base / "registry.yml"), REGISTRY),
        _registry(str(base / "locked.yml"), LOCKED_REGISTRY, auth=True),
    ]
    for index in NODES:
        rc, out = node(index, "mkdir -p /etc/cdi && cat > /etc/cdi/site-nvidia.yaml <<'EOF'\n%sEOF" % CDI_SPEC)
        assert rc == 0, out
    # From the registry that asks for credentials: the bring-up proves they reach the pull.
    image = "%s/raygate/ray@%s" % (LOCKED_REGISTRY, digest)
    settings = (
        "raygate_runtime: container\n"
        "raygate_image: %s\n"
        "raygate_image_registry_tls_verify: false\n"
        "raygate_image_registry_username: %s\n"
        "raygate_image_registry_password: %s\n"
        "raygate_container_ulimits: %s\n" % (image, REGISTRY_USER, REGISTRY_PASSWORD, ULIMITS)
    )
    inv = scratch_inventory(base / "inventory", base, "container", settings=settings)
    state = {"inv": inv, "base": base, "digest": digest, "image": image, "noray": noray}
    yield state
    play(state, "teardown.yml", "-e", "raygate_teardown_purge=true")
    run([SANDBOX, "down"], timeout=300)
    for proc in registries:
        proc.terminate()
        proc.wait(timeout=30)


def play(cluster, name, *extra):
    cmd = [os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), "-i", cluster["inv"], os.path.join(ROOT, name)]
    return run(cmd + list(extra), timeout=HANG)


def containers(index):
    """{name: (running, started at)} of the node's containers (podman in the node)."""
    rc, out = node(
        index,
        "podman ps --all --format '{{.Names}}'"
        " | xargs -r podman inspect --format '{{.Name}} {{.State.Running}} {{.State.StartedAt}}'",
    )
    assert rc == 0, out
    found = {}
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3:
            found[parts[0]] = (parts[1] == "true", parts[2])
    return found


def started_at(index):
    rc, out = node(index, "podman inspect --format '{{.State.StartedAt}}' raygate-ray")
    assert rc == 0, out
    return out.strip()


def ray_status():
    rc, out = node(1, "podman exec raygate-ray ray status")
    return out if rc == 0 else ""


def alive_nodes():
    return len(re.findall(r"^\s*1 node_", ray_status(), re.M))


def nothing_changed(index):
    """No container, no Ray process, no raygate file on the node."""
    rc, out = node(index, "podman ps -aq | wc -l; pgrep -c raylet; ls /etc/raygate 2>/dev/null | wc -l")
    return out.split()


# ---- bad input: each refused before anything changes, naming the node and the fix ---------------


def refused(cluster, *extra):
    """site.yml with ``extra``; asserts it failed and left every node as it was; its output."""
    rc, out = play(cluster, "site.yml", *extra)
    assert rc != 0, out[-3000:]
    for index in NODES:
        rc_ps, ps = node(index, "podman ps -aq | wc -l; pgrep raylet || true; test -e /etc/raygate/ray.env && echo ENV")
        assert ps.split() == ["0"], (index, ps)
    return out


def test_a_tag_without_digest_is_refused_naming_the_digest_to_use(cluster):
    out = refused(cluster, "-e", "raygate_image=%s/raygate/ray:2.60.0-bookworm" % REGISTRY)
    assert "raygate_image '%s/raygate/ray:2.60.0-bookworm' names a tag" % REGISTRY in out, out[-3000:]
    assert "skopeo inspect --format '{{.Digest}}' docker://%s/raygate/ray:2.60.0-bookworm" % REGISTRY in out
    assert not recap(out), "the validation on the controller refuses it: no node is contacted"


def test_an_image_the_registry_does_not_have_is_refused(cluster):
    missing = "%s/raygate/ray@sha256:%s" % (LOCKED_REGISTRY, "0" * 64)
    out = refused(cluster, "-e", "raygate_image=" + missing)
    assert "has no image" in out and missing in out, out[-3000:]


def test_a_registry_that_refuses_the_credentials_is_refused(cluster):
    out = refused(
        cluster,
        "-e",
        "raygate_image_registry_password=not-the-password",
        "-e",
        "raygate_image_registry_username=raygate",
    )
    assert "refused the credentials" in out and LOCKED_REGISTRY in out, out[-3000:]
    assert "not-the-password" not in out


def test_a_missing_archive_is_refused(cluster):
    out = refused(cluster, "-e", "raygate_image_archive=/srv/raygate/no-such-archive.tar")
    assert "/srv/raygate/no-such-archive.tar" in out and "node1" in out, out[-3000:]


def test_an_archive_with_another_checksum_is_refused(cluster):
    archive = os.path.join(IMAGE_OUT, "ray-%s.oci.tar" % RAY_VERSION)
    out = refused(cluster, "-e", "raygate_image_archive=" + archive, "-e", "raygate_image_archive_sha256=" + "1" * 64)
    assert "1" * 64 in out and archive in out, out[-3000:]


def test_an_image_without_ray_is_refused(cluster):
    # From the open registry (the credentials the inventory gives are not asked for there).
    noray = "%s/raygate/noray@%s" % (REGISTRY, cluster["noray"])
    out = refused(cluster, "-e", "raygate_image=" + noray)
    assert "has no Ray" in out and noray in out, out[-3000:]
    for index in NODES:
        node(index, "podman rmi --force %s >/dev/null 2>&1 || true" % noray)


def test_another_ray_and_a_node_without_gpu_mapping_are_refused_in_one_run(cluster):
    # Two refusals, one run (CI time): node3 has no CDI spec (refused in the preflight), and the image
    # holds another Ray than the one pinned (refused on the others when the install reads its versions).
    rc, out = node(3, "mv /etc/cdi/site-nvidia.yaml /root/site-nvidia.yaml")
    assert rc == 0, out
    try:
        out = refused(cluster, "-e", "raygate_ray_version=2.59.0")
    finally:
        node(3, "mv /root/site-nvidia.yaml /etc/cdi/site-nvidia.yaml")
    assert "no GPU device mapping is possible on 198.18.0.13" in out and "nvidia-ctk" in out, out[-3000:]
    assert "holds Ray 2.60.0, not 2.59.0" in out, out[-3000:]


def test_an_engine_that_cannot_run_a_container_is_refused(cluster):
    # The role's default limits (memlock unlimited, for RDMA) are more than this host's root may set (no
    # CAP_SYS_RESOURCE, memlock 8 MiB): here no container can start with them. The images are there from
    # the earlier runs; without their versions markers the install asks them again.
    for index in NODES:
        node(index, "rm -rf /opt/raygate/images")
    out = refused(cluster, "-e", '{"raygate_container_ulimits": ["memlock=-1:-1"]}')
    assert "the container engine cannot run a container on this node" in out, out[-3000:]
    assert "error setting rlimit" in out, out[-3000:]


# ---- the cluster ----------------------------------------------------------------------------------


def test_bring_up_from_the_registry(cluster):
    capture = Capture(str(cluster["base"] / "bring-up.pcap"), "net 198.18.0.0/24")
    with capture:
        rc, out = play(cluster, "site.yml")
        assert rc == 0, out[-4000:]
        printed = re.search(r"Jobs \(in a shell on node1 as root\): (.*?script\.py)", out, re.S)
        assert printed, out[-3000:]
        command = " ".join(printed.group(1).split())
        job = (
            "import ray\nray.init()\n"
            "@ray.remote(num_gpus=1)\ndef where():\n    import socket, os\n"
            "    return socket.gethostname(), os.getuid()\n"
            "seen = ray.get([where.options(scheduling_strategy='SPREAD').remote() for _ in range(24)])\n"
            "print('HOSTS', sorted({h for h, u in seen}), 'UIDS', sorted({u for h, u in seen}))\n"
        )
        rc, ran = node(1, "cd $(mktemp -d) && cat > script.py <<'EOF'\n%sEOF\n%s" % (job, command))
    assert rc == 0 and "succeeded" in ran, ran[-3000:]
    assert "HOSTS ['node1', 'node2', 'node3']" in ran, ran[-3000:]
    assert "UIDS [0]" not in ran, ran[-3000:]
    status = re.search(r"Status \(in a shell on any node as root\): ([^'\"\n]*)", out)
    assert status and status.group(1).strip() == "podman exec raygate-ray ray status", out[-3000:]
    assert alive_nodes() == 3, ray_status()
    token = _read(str(cluster["base"] / "token"))
    assert capture.dropped == 0, "tcpdump dropped packets: the capture proves nothing"
    assert len(capture.data) > 10000
    assert token.encode() not in capture.data
    # The host's view: every Ray process (in the node's /proc) runs as the service user, none as root.
    for index in NODES:
        # (The brackets keep pgrep from matching this very shell's command line.)
        rc, users = node(index, "ps -o user= -p $(pgrep -d, -f '[r]aylet|[g]cs_server|[d]efault_worker')")
        assert rc == 0 and set(users.split()) == {"ray"}, (index, users)
        assert containers(index)["raygate-ray"][0], index


def test_a_rerun_changes_nothing_and_restarts_no_container(cluster):
    before = {index: started_at(index) for index in NODES}
    rc, out = play(cluster, "site.yml")
    assert rc == 0, out[-4000:]
    assert all(counts["changed"] == "0" for counts in recap(out).values()), recap(out)
    assert {index: started_at(index) for index in NODES} == before


def test_a_killed_container_comes_back_by_itself(cluster):
    before = started_at(2)
    rc, out = node(2, "kill -9 $(podman inspect --format '{{.State.Pid}}' raygate-ray)")
    assert rc == 0, out
    wait_until("node2's container restarted", lambda: started_at(2) != before and containers(2)["raygate-ray"][0])
    wait_until("3 nodes alive again", lambda: alive_nodes() == 3, timeout=300)


XID = {"gpu": {"model": "H100", "faults": [{"type": "xid", "xid": 79, "gpu": 3}]}}
HEALTHY = {"gpu": {"model": "H100"}}
WATCH = ["-e", "raygate_watch=true", "-e", "raygate_watch_interval=15", "-e", "raygate_watch_drain_deadline=20"]


def test_the_watcher_takes_a_worker_out_on_an_xid_and_the_engine_keeps_it_out(cluster):
    rc, out = play(cluster, "site.yml", *WATCH)
    assert rc == 0, out[-4000:]
    scenario(cluster, 2, XID)
    seen = []

    def taken_out():
        seen[:] = [watch_state(2)]
        return seen[0].get("taken_out")

    try:
        try:
            state = wait_until("node2 taken out", taken_out, timeout=180)
        except BaseException:
            log = node(2, "tail -n 40 /var/lib/raygate/watch/watch.log 2>&1")[1]
            raise AssertionError("node2 was not taken out; its watcher's state: %r\n%s" % (seen, log)) from None
        assert state["check"] == "xid" and "Xid 79" in state["reason"], state
        # The head asked from inside the container, then the engine stopped it: no restart policy undoes it.
        wait_until("2 nodes alive", lambda: alive_nodes() == 2, timeout=120)
        assert not containers(2)["raygate-ray"][0], containers(2)
        assert node(2, "pgrep -x raylet")[0] == 1
        assert alive_nodes() == 2 and not containers(2)["raygate-ray"][0]
    finally:
        scenario(cluster, 2, HEALTHY)


def test_teardown_with_purge_leaves_nothing_and_a_second_changes_nothing(cluster):
    rc, out = play(cluster, "teardown.yml", "-e", "raygate_teardown_purge=true", *WATCH)
    assert rc == 0, out[-4000:]
    for index in NODES:
        rc, left = node(
            index,
            "podman ps -aq | wc -l; podman images -q | wc -l; pgrep -c -f '[r]aylet|[g]cs_server' || true;"
            " ls /var/run/cdi/raygate-nvidia.yaml /etc/systemd/system/raygate-ray.service /etc/raygate 2>&1"
            " | grep -vc 'No such'",
        )
        assert left.split() == ["0", "0", "0", "0"], (index, left)
        # The site's CDI spec and the engine (the node had it) stay.
        rc, kept = node(index, "test -f /etc/cdi/site-nvidia.yaml && command -v podman")
        assert rc == 0, (index, kept)
    rc, out = play(cluster, "teardown.yml", "-e", "raygate_teardown_purge=true")
    assert rc == 0, out[-4000:]
    assert all(counts["changed"] == "0" for counts in recap(out).values()), recap(out)


def test_the_same_image_from_the_archive(cluster):
    archive = os.path.join(IMAGE_OUT, "ray-%s.oci.tar" % RAY_VERSION)
    checksum = _read(archive + ".sha256").split()[0]
    extra = ["-e", "raygate_image_archive=" + archive, "-e", "raygate_image_archive_sha256=" + checksum]
    rc, out = play(cluster, "site.yml", *extra)
    assert rc == 0, out[-4000:]
    assert alive_nodes() == 3, ray_status()
    for index in NODES:
        rc, images = node(index, "podman image exists %s && echo PRESENT" % cluster["image"])
        assert "PRESENT" in images, (index, images)
    rc, out = play(cluster, "site.yml", *extra)
    assert rc == 0, out[-4000:]
    assert all(counts["changed"] == "0" for counts in recap(out).values()), recap(out)
    rc, out = play(cluster, "teardown.yml", "-e", "raygate_teardown_purge=true")
    assert rc == 0, out[-4000:]
