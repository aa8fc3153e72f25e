"""ray_install with runtime container: the image pinned by digest in the engine's storage and the versions
inside it (plugins/module_utils/node/image.py). A scripted engine: no podman runs here."""

import base64
import json
import os
import socket
import stat

import pytest
from harness import run_case
from oci_layout import image_blobs, write_archive

from ansible_collections.raygate.cluster.plugins.module_utils.node import image
from ansible_collections.raygate.cluster.plugins.modules import ray_install

PODMAN = "/usr/bin/podman"
DOCKER = "/usr/bin/docker"
HEX = "821568441caa5102ba513cbdd27c9e0e2484e7693307c9f39e42fe96408f3f3d"
DIGEST = "sha256:" + HEX
REPO = "127.0.0.1:5050/raygate/ray"
REF = REPO + "@" + DIGEST
IMAGE_ID = "58b8aca5" + "0" * 56
VERSIONS = json.dumps({"ray": "2.60.0", "python": "3.11.2"}) + "\n"
PASSWORD = "s3cret-pa55"


def esc(value):
    """``value`` with its braces doubled: the harness expands every string with str.format."""
    if isinstance(value, str):
        return value.replace("{", "{{").replace("}", "}}")
    if isinstance(value, list):
        return [esc(v) for v in value]
    if isinstance(value, dict):
        return {k: esc(v) for k, v in value.items()}
    return value


def exists(rc, ref=REF, engine=PODMAN):
    if engine == DOCKER:
        return {"cmd": esc([DOCKER, "image", "inspect", "--format", "{{.Id}}", ref]), "rc": rc}
    return {"cmd": [engine, "image", "exists", ref], "rc": rc}


def inspect(ref=REF, engine=PODMAN, out=IMAGE_ID):
    return {"cmd": esc([engine, "image", "inspect", "--format", "{{.Id}}", ref]), "out": out + "\n"}


def run(out=VERSIONS, rc=0, err="", run_args=(), ref=REF, engine=PODMAN):
    args = [engine, "run", "--rm", "--pull=never", "--network", "none"] + list(run_args)
    args += ["--entrypoint", "python", ref, "-c", image.VERSIONS_CODE]
    return {"cmd": esc(args), "out": esc(out), "rc": rc, "err": esc(err)}


def pull(rc=0, err="", extra=(), ref=REF, engine=PODMAN, check=None):
    step = {"cmd": [engine, "pull"] + list(extra) + [ref], "rc": rc, "err": esc(err)}
    if check:
        step["check"] = check
    return step


def case(commands, args=None, expect=None, check_mode=False, which=None, **more):
    base = {
        "version": "2.60.0",
        "runtime": "container",
        "image": REF,
        "base_dir": "{tmp}/opt",
    }
    result = {
        "id": "container",
        "which": which if which is not None else {"podman": PODMAN},
        "args": dict(base, **(args or {})),
        "commands": commands,
        "check_mode": check_mode,
        "expect": expect or {},
        "names": {"host": socket.gethostname(), "marker": "{tmp}/opt/images/%s.json" % HEX},
    }
    result.update(more)
    return result


def marker(tmp_path, ray="2.60.0", image_id="sha256:" + IMAGE_ID, key=HEX):
    path = tmp_path / "opt" / "images" / (key + ".json")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"id": image_id, "ray": ray, "python": "3.11.2", "digest": DIGEST, "reference": REF}))
    return path


ANSWER = {
    "version_info": {"ray": "2.60.0", "python": "3.11.2", "image": DIGEST},
    "venv": None,
    "current": None,
}


# -- the reference and the engine ---------------------------------------------------------------


def test_a_tag_without_digest_is_refused_before_any_command(tmp_path, monkeypatch):
    tagged = REPO + ":2.60.0-bookworm"
    expect = {
        "failed": True,
        "msg_contains": [
            "{host}: raygate_image %r names a tag and no digest" % tagged,
            "Pin it: %s@sha256:<digest>" % REPO,
            "raygate_image_allow_tag: true",
        ],
    }
    run_case(case([], args={"image": tagged}, expect=expect), ray_install.main, tmp_path, monkeypatch)


def test_an_allowed_tag_runs_and_pins_the_answer_to_the_image_id(tmp_path, monkeypatch):
    tagged = REPO + ":2.60.0-bookworm"
    commands = [exists(0, tagged), inspect(tagged), run(ref=tagged)]
    expect = dict(
        ANSWER, changed=False, version_info={"ray": "2.60.0", "python": "3.11.2", "image": "sha256:" + IMAGE_ID}
    )
    c = case(commands, args={"image": tagged, "image_allow_tag": True}, expect=expect)
    c["exists"] = ["{tmp}/opt/images/%s.json" % IMAGE_ID]
    run_case(c, ray_install.main, tmp_path, monkeypatch)


def test_a_missing_engine_fails_naming_it_and_the_role_variable(tmp_path, monkeypatch):
    expect = {
        "failed": True,
        "msg_contains": [
            "{host}: the container engine podman is not installed on this node",
            "raygate_container_engine",
        ],
    }
    run_case(case([], which={}, expect=expect), ray_install.main, tmp_path, monkeypatch)


# -- already there: nothing pulled, the versions read once ------------------------------------------


def test_an_image_already_there_is_not_pulled_and_its_versions_are_recorded(tmp_path, monkeypatch):
    expect = dict(ANSWER, changed=False, installed=False)
    expect["image"] = {"reference": REF, "digest": DIGEST, "id": "sha256:" + IMAGE_ID, "source": "present"}
    c = case([exists(0), inspect(), run()], expect=expect, exists=["{marker}"])
    run_case(c, ray_install.main, tmp_path, monkeypatch)
    path = tmp_path / "opt" / "images" / (HEX + ".json")
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert json.loads(path.read_text())["id"] == "sha256:" + IMAGE_ID


def test_a_rerun_with_the_marker_asks_the_engine_two_things_and_starts_nothing(tmp_path, monkeypatch):
    marker(tmp_path)
    c = case([exists(0), inspect()], expect=dict(ANSWER, changed=False, installed=False))
    run_case(c, ray_install.main, tmp_path, monkeypatch)


def test_a_marker_of_another_image_id_is_read_again(tmp_path, monkeypatch):
    marker(tmp_path, ray="2.59.0", image_id="sha256:" + "f" * 64)
    c = case([exists(0), inspect(), run()], expect=dict(ANSWER, changed=False))
    run_case(c, ray_install.main, tmp_path, monkeypatch)


def test_the_service_user_is_handled_as_with_a_virtualenv(tmp_path, monkeypatch):
    marker(tmp_path)
    expect = dict(ANSWER, changed=False)
    expect["service_user"] = {"name": "nobody", "uid": 65534, "gid": 65534, "home": "/nonexistent"}
    expect["service_user"].update(groups=["nogroup"], created=False)
    c = case([exists(0), inspect()], args={"service_user": "nobody"}, expect=expect)
    run_case(c, ray_install.main, tmp_path, monkeypatch)


# -- pulled ----------------------------------------------------------------------------------------


def test_a_missing_image_is_pulled_by_digest_without_tls_when_told(tmp_path, monkeypatch):
    commands = [
        exists(1),
        pull(extra=["--tls-verify=false"]),
        inspect(),
        run(run_args=["--ulimit", "nofile=20000:20000"]),
    ]
    expect = dict(ANSWER, changed=True, installed=True)
    expect["image"] = {"reference": REF, "digest": DIGEST, "id": "sha256:" + IMAGE_ID, "source": "pulled"}
    args = {"registry_tls_verify": False, "run_args": ["--ulimit", "nofile=20000:20000"]}
    run_case(case(commands, args=args, expect=expect), ray_install.main, tmp_path, monkeypatch)


@pytest.mark.parametrize(
    "err, said",
    [
        (
            "Error: initializing source docker://%s: reading manifest %s in %s: unauthorized: authentication required"
            % (REF, DIGEST, REPO),
            "the registry 127.0.0.1:5050 refused the credentials for %s (raygate_image_registry_username / _password)"
            % REPO,
        ),
        (
            "Error: initializing source docker://%s: reading manifest %s in %s: manifest unknown: manifest unknown"
            % (REF, DIGEST, REPO),
            "the registry 127.0.0.1:5050 has no image %s: check the digest" % REF,
        ),
        (
            'Error: initializing source docker://%s: pinging container registry 127.0.0.1:5050: Get "http://127.0.0.1:5050'
            '/v2/": dial tcp 127.0.0.1:5050: connect: connection refused' % REF,
            "cannot reach the registry 127.0.0.1:5050",
        ),
    ],
    ids=["credentials", "not_found", "unreachable"],
)
def test_a_refused_pull_says_why_with_the_engines_words(err, said, tmp_path, monkeypatch):
    args = {"registry_username": "puller", "registry_password": PASSWORD}
    commands = [
        exists(1),
        {**pull(rc=125, err=err), "cmd": pull()["cmd"][:2] + ["--authfile", "{tmp}/auth/auth.json", REF]},
    ]
    monkeypatch.setattr(image.tempfile, "mkdtemp", lambda prefix: make_private(tmp_path))
    expect = {"failed": True, "msg_contains": ["{host}: " + said, esc(err.split(": ")[-1])]}
    run_case(case(commands, args=args, expect=expect), ray_install.main, tmp_path, monkeypatch)


def make_private(tmp_path):
    path = tmp_path / "auth"
    path.mkdir(mode=0o700)
    return str(path)


@pytest.mark.parametrize("engine", [PODMAN, DOCKER], ids=["podman", "docker"])
def test_credentials_go_in_a_private_file_removed_afterwards_never_on_a_command_line(engine, tmp_path, monkeypatch):
    seen = {}

    def check(args, kwargs):
        if engine == PODMAN:
            path = args[args.index("--authfile") + 1]
        else:
            path = os.path.join(kwargs["env"]["DOCKER_CONFIG"], "config.json")
        seen["path"] = path
        seen["mode"] = stat.S_IMODE(os.stat(path).st_mode)
        with open(path) as fh:
            seen["auths"] = json.load(fh)["auths"]

    monkeypatch.setattr(image.tempfile, "mkdtemp", lambda prefix: make_private(tmp_path))
    extra = ["--authfile", "{tmp}/auth/auth.json"] if engine == PODMAN else []
    commands = [exists(1, engine=engine), pull(extra=extra, engine=engine, check=check), inspect(engine=engine)]
    commands.append(run(engine=engine))
    args = {"registry_username": "puller", "registry_password": PASSWORD, "engine": os.path.basename(engine)}
    which = {os.path.basename(engine): engine}
    c = case(commands, args=args, which=which, expect={"changed": True}, absent=["{tmp}/auth"])
    result = run_case(c, ray_install.main, tmp_path, monkeypatch)
    assert seen["mode"] == 0o600
    token = base64.b64encode(("puller:" + PASSWORD).encode()).decode()
    assert seen["auths"] == {"127.0.0.1:5050": {"auth": token}}
    assert not any(PASSWORD in " ".join(step["cmd"]) for step in c["commands"])
    assert PASSWORD not in json.dumps(result)


# -- loaded from an archive --------------------------------------------------------------------------


def archive(tmp_path, digests=None, **kwargs):
    """A one-layer image's OCI archive at TMP/ray.oci.tar: (its path, its sha256, the manifest digest)."""
    blobs, digest = image_blobs()
    path = tmp_path / "ray.oci.tar"
    return str(path), write_archive(path, blobs, digests or [digest], **kwargs), digest


def test_a_good_archive_is_loaded_and_the_image_checked_by_its_digest(tmp_path, monkeypatch):
    path, sha, digest = archive(tmp_path)
    ref = REPO + "@" + digest
    commands = [exists(1, ref), {"cmd": [PODMAN, "load", "-i", path]}, exists(0, ref), inspect(ref), run(ref=ref)]
    expect = {"changed": True, "installed": True}
    expect["image"] = {"reference": ref, "digest": digest, "id": "sha256:" + IMAGE_ID, "source": "loaded"}
    args = {"image": ref, "image_archive": path, "image_archive_sha256": "sha256:" + sha}
    run_case(case(commands, args=args, expect=expect), ray_install.main, tmp_path, monkeypatch)


def test_a_missing_archive_fails_naming_its_path(tmp_path, monkeypatch):
    path = str(tmp_path / "nowhere.oci.tar")
    expect = {"failed": True, "msg_contains": ["{host}: image archive %s (image_archive" % path, "does not exist"]}
    c = case([exists(1)], args={"image_archive": path}, expect=expect)
    run_case(c, ray_install.main, tmp_path, monkeypatch)


def test_an_archive_with_another_checksum_fails_naming_both_before_any_load(tmp_path, monkeypatch):
    path, sha, digest = archive(tmp_path)
    ref = REPO + "@" + digest
    expect = {"failed": True, "msg_contains": "its sha256 is %s, the checksum given is %s" % (sha, "0" * 64)}
    c = case(
        [exists(1, ref)], args={"image": ref, "image_archive": path, "image_archive_sha256": "0" * 64}, expect=expect
    )
    run_case(c, ray_install.main, tmp_path, monkeypatch)


def test_an_archive_of_another_digest_fails_naming_what_it_holds(tmp_path, monkeypatch):
    path, sha, digest = archive(tmp_path)
    expect = {
        "failed": True,
        "msg_contains": "image archive %s holds %s, not the image's digest %s" % (path, digest, DIGEST),
    }
    c = case([exists(1)], args={"image_archive": path, "image_archive_sha256": sha}, expect=expect)
    run_case(c, ray_install.main, tmp_path, monkeypatch)


def test_an_archive_with_a_tampered_blob_is_not_loaded(tmp_path, monkeypatch):
    blobs, digest = image_blobs()
    layer = [h for h, data in blobs.items() if data == b"a layer's bytes"][0]
    path = str(tmp_path / "ray.oci.tar")
    write_archive(path, blobs, [digest], replace={layer: b"another layer's bytes"})
    ref = REPO + "@" + digest
    expect = {"failed": True, "msg_contains": "image archive %s was altered or damaged: blob sha256:%s" % (path, layer)}
    run_case(
        case([exists(1, ref)], args={"image": ref, "image_archive": path}, expect=expect),
        ray_install.main,
        tmp_path,
        monkeypatch,
    )


# -- the versions inside ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "step, said",
    [
        (
            run(out=json.dumps({"ray": None, "python": "3.11.2", "error": "No module named 'ray'"})),
            "image %s has no Ray (python could not import ray: No module named 'ray'): build it with ray==2.60.0" % REF,
        ),
        (run(out=json.dumps({"ray": "2.59.0", "python": "3.11.2"})), "image %s holds Ray 2.59.0, not 2.60.0" % REF),
        (
            run(
                rc=126,
                out="",
                err="Error: OCI runtime error: runc: runc create failed: unable to start container process: error "
                "during container init: error setting rlimit type 7: operation not permitted",
            ),
            "the container engine cannot run a container on this node: Error: OCI runtime error",
        ),
        (
            run(rc=127, out="", err="Error: executable file `python` not found in $PATH: No such file or directory"),
            "image %s has no python on its PATH" % REF,
        ),
    ],
    ids=["no_ray", "another_ray", "engine_cannot_run", "no_python"],
)
def test_the_versions_inside_fail_naming_what_is_wrong(step, said, tmp_path, monkeypatch):
    c = case([exists(0), inspect(), step], expect={"failed": True, "msg_contains": ["{host}: " + esc(said)]})
    # Another Ray is a fact about the image, recorded (the next run fails without a container); the rest not.
    c["exists" if "holds Ray" in said else "absent"] = ["{marker}"]
    run_case(c, ray_install.main, tmp_path, monkeypatch)


def test_an_engine_that_cannot_run_points_at_run_args(tmp_path, monkeypatch):
    step = run(
        rc=126, out="", err="Error: OCI runtime error: runc: error setting rlimit type 7: operation not permitted"
    )
    c = case([exists(0), inspect(), step], expect={"failed": True, "msg_contains": ["run_args", "--ulimit", "cgroup"]})
    run_case(c, ray_install.main, tmp_path, monkeypatch)


def test_a_recorded_other_ray_fails_without_starting_a_container(tmp_path, monkeypatch):
    marker(tmp_path, ray="2.59.0")
    c = case([exists(0), inspect()], expect={"failed": True, "msg_contains": "holds Ray 2.59.0, not 2.60.0"})
    run_case(c, ray_install.main, tmp_path, monkeypatch)


# -- check mode ------------------------------------------------------------------------------------


def test_check_mode_predicts_a_pull_and_runs_nothing_that_changes(tmp_path, monkeypatch):
    expect = dict(ANSWER, changed=True, installed=True, version_info={"ray": "2.60.0", "python": None, "image": DIGEST})
    expect["image"] = {"reference": REF, "digest": DIGEST, "id": None, "source": "pulled"}
    c = case([exists(1)], check_mode=True, expect=expect, absent=["{tmp}/opt"])
    run_case(c, ray_install.main, tmp_path, monkeypatch)


def test_check_mode_reads_the_marker_of_an_image_there(tmp_path, monkeypatch):
    marker(tmp_path)
    c = case([exists(0), inspect()], check_mode=True, expect=dict(ANSWER, changed=False, installed=False))
    run_case(c, ray_install.main, tmp_path, monkeypatch)


def test_check_mode_without_a_marker_does_not_start_a_container(tmp_path, monkeypatch):
    # ...and predicts a change: the install must read the versions, before any start runs the image.
    expect = dict(ANSWER, changed=True, version_info={"ray": "2.60.0", "python": None, "image": DIGEST})
    c = case([exists(0), inspect()], check_mode=True, expect=expect, absent=["{tmp}/opt"])
    run_case(c, ray_install.main, tmp_path, monkeypatch)


def test_check_mode_checks_the_archive_but_loads_nothing(tmp_path, monkeypatch):
    path, sha, digest = archive(tmp_path)
    ref = REPO + "@" + digest
    c = case([exists(1, ref)], check_mode=True, args={"image": ref, "image_archive": path}, expect={"changed": True})
    assert run_case(c, ray_install.main, tmp_path, monkeypatch)["image"]["source"] == "loaded"
    c = case(
        [exists(1, ref)], check_mode=True, args={"image": ref, "image_archive": path, "image_archive_sha256": "1" * 64}
    )
    c["expect"] = {"failed": True, "msg_contains": "the checksum given is " + "1" * 64}
    run_case(c, ray_install.main, tmp_path, monkeypatch)


# -- absent ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("check_mode", [False, True], ids=["run", "check_mode"])
def test_absent_removes_the_image_and_the_markers(check_mode, tmp_path, monkeypatch):
    marker(tmp_path)
    commands = [exists(0)] + ([] if check_mode else [{"cmd": [PODMAN, "rmi", REF]}])
    expect = {
        "changed": True,
        "removed": ["{tmp}/opt/images"],
        "image": {"reference": REF, "digest": DIGEST, "removed": True},
    }
    c = case(commands, args={"state": "absent"}, check_mode=check_mode, expect=expect)
    c[("exists" if check_mode else "absent")] = ["{tmp}/opt/images"]
    run_case(c, ray_install.main, tmp_path, monkeypatch)


def test_absent_without_an_engine_has_nothing_to_do(tmp_path, monkeypatch):
    expect = {"changed": False, "removed": [], "image": {"reference": REF, "digest": DIGEST, "removed": False}}
    run_case(case([], args={"state": "absent"}, which={}, expect=expect), ray_install.main, tmp_path, monkeypatch)


def test_absent_of_an_image_not_there_changes_nothing(tmp_path, monkeypatch):
    expect = {"changed": False, "removed": []}
    run_case(case([exists(1)], args={"state": "absent"}, expect=expect), ray_install.main, tmp_path, monkeypatch)


def test_check_mode_without_the_engine_predicts_the_pull_the_role_will_do_after_installing_it(tmp_path, monkeypatch):
    # The role's preflight is read-only: the engine it installs next is not there yet, and that is no refusal.
    expect = dict(ANSWER, changed=True, installed=True, version_info={"ray": "2.60.0", "python": None, "image": DIGEST})
    expect["image"] = {"reference": REF, "digest": DIGEST, "id": None, "source": "pulled"}
    c = case([], which={}, check_mode=True, expect=expect, absent=["{tmp}/opt"])
    run_case(c, ray_install.main, tmp_path, monkeypatch)
