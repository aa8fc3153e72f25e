# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""ray_install's container runtime (issue 43, docs/CONTAINERS.md): "installing Ray" is the pinned
image in the engine's local storage (already there, loaded from a verified OCI archive, or pulled by
digest), and the Ray and Python versions inside it, answered as the virtualenv runtime answers them.

Reading the versions starts a container (1 to 2 s), so the answer is kept in a marker file per image,
``<base_dir>/images/<digest hex>.json``, reused while the engine's image ID is the recorded one: a
re-run asks the engine two things (is it there, which ID) and starts nothing.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import socket
import tempfile

from ansible_collections.raygate.cluster.plugins.module_utils._runner import CommandError
from ansible_collections.raygate.cluster.plugins.module_utils.node.image_ref import (
    ImageRefError,
    check_archive_checksum,
    check_image_ref,
    check_oci_archive,
    parse_image_ref,
)

MARKERS = "images"
# Run by the image's own python (the first on its PATH: the image's Ray virtualenv). An image without
# Ray answers {"ray": null}, so that is told apart from an engine that cannot start a container.
VERSIONS_CODE = (
    "import json, sys\n"
    "py = '%d.%d.%d' % sys.version_info[:3]\n"
    "try:\n"
    "    import ray\n"
    "except ImportError as exc:\n"
    "    print(json.dumps({'ray': None, 'python': py, 'error': str(exc)}))\n"
    "else:\n"
    "    print(json.dumps({'ray': ray.__version__, 'python': py}))\n"
)
PULL_AUTH = ("unauthorized", "authentication required", "denied")
PULL_MISSING = ("manifest unknown", "not found", "name unknown")
PULL_UNREACHABLE = ("connection refused", "no such host", "i/o timeout", "network is unreachable", "no route to host")
PULL_PLAIN_HTTP = ("http response to https client",)
# What an engine says when it cannot start any container here (runtime, cgroups, rlimits).
RUN_TROUBLE = ("oci runtime", "runc", "crun", "cgroup", "operation not permitted", "rlimit", "permission denied")
NO_EXECUTABLE = ("executable file not found", "no such file or directory")
# Docker keeps Docker Hub's credentials under its index's URL, not under docker.io.
DOCKER_HUB_AUTH_KEY = "https://index.docker.io/v1/"


def tail(text, lines=3):
    """The last ``lines`` non-empty lines of an engine's output, on one line."""
    kept = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return " | ".join(kept[-lines:]) or "(no output)"


def last_json(text):
    """The last line of ``text`` that is a JSON object, else None (an engine may print warnings first)."""
    for line in reversed((text or "").splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def read_json(path):
    try:
        with open(path) as fh:
            value = json.load(fh)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


@contextlib.contextmanager
def registry_auth(docker, registry, user, password):
    """(extra pull arguments, extra environment) that give the engine the registry credentials: a
    file only root can read, in a private directory removed afterwards; never a command line."""
    if not user:
        yield [], None
        return
    private = tempfile.mkdtemp(prefix="raygate-auth-")  # mode 0700
    try:
        token = base64.b64encode(("%s:%s" % (user, password or "")).encode("utf-8")).decode("ascii")
        key = DOCKER_HUB_AUTH_KEY if docker and registry == "docker.io" else registry
        path = os.path.join(private, "config.json" if docker else "auth.json")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump({"auths": {key: {"auth": token}}}, fh)
        if docker:
            yield [], {"DOCKER_CONFIG": private}
        else:
            yield ["--authfile", path], None
    finally:
        shutil.rmtree(private, ignore_errors=True)


def pull_failure(engine, ref, text, with_credentials):
    """Why a pull of ``ref`` failed, from the engine's output ``text``, and what to do."""
    registry, low = ref["registry"], (text or "").lower()
    said = "; the engine said: %s" % tail(text)
    if any(word in low for word in PULL_AUTH):
        if with_credentials:
            why = "the registry %s refused the credentials for %s" % (registry, ref["repository"])
        else:
            why = "the registry %s asks for credentials for %s and none were given" % (registry, ref["repository"])
        return why + " (raygate_image_registry_username / _password)" + said
    if any(word in low for word in PULL_MISSING):
        return "the registry %s has no image %s: check the digest (image, raygate_image)%s" % (
            registry,
            ref["reference"],
            said,
        )
    if any(word in low for word in PULL_PLAIN_HTTP):
        return "the registry %s speaks plain HTTP: set registry_tls_verify false (%s)" % (registry, said[2:])
    if any(word in low for word in PULL_UNREACHABLE):
        return "cannot reach the registry %s from this node to pull %s%s" % (registry, ref["reference"], said)
    return "%s pull %s failed%s" % (engine, ref["reference"], said)


def run_failure(ref, rc, text, version):
    """Why the image's python did not answer its versions, from the engine's output ``text``."""
    low = (text or "").lower()
    if "python" in low and any(word in low for word in NO_EXECUTABLE):
        return "image %s has no python on its PATH (%s): build it with a virtualenv holding ray==%s first in PATH" % (
            ref["reference"],
            tail(text),
            version,
        )
    if any(word in low for word in RUN_TROUBLE):
        return (
            "the container engine cannot run a container on this node: %s. Limits it may not set (error setting "
            "rlimit): give run_args such as --ulimit nofile=N:N --ulimit nproc=N:N "
            "within the node's hard limits; cgroup errors: check the engine's runtime and cgroup manager "
            "(containers.conf)" % tail(text)
        )
    return "python in image %s failed (rc %s): %s" % (ref["reference"], rc, tail(text))


class ImageStore:
    """The image of one ray_install call in one engine's local storage."""

    def __init__(self, module, runner):
        self.module = module
        self.runner = runner
        self.params = module.params
        self.engine = None

    @property
    def docker(self):
        return self.params["engine"] == "docker"

    def fail(self, msg):
        self.module.fail_json(msg="%s: %s" % (socket.gethostname(), msg))

    def call(self, args, **kwargs):
        try:
            return self.runner.run([self.engine] + list(args), timeout=self.params["timeout"], **kwargs)
        except CommandError as exc:
            self.fail(str(exc))

    def find_engine(self):
        """The engine binary's path (also kept for every call), or None when it is not installed."""
        self.engine = self.runner.which(self.params["engine"])
        return self.engine

    def require_engine(self):
        if not self.find_engine():
            name = self.params["engine"]
            self.fail(
                "the container engine %s is not installed on this node (not on PATH); the role installs it with "
                "raygate_container_engine, or install the package %s, or set runtime (raygate_runtime) to venv"
                % (name, "docker.io" if name == "docker" else name)
            )

    def reference(self):
        """The parsed ``image``; a tag without digest refused unless image_allow_tag."""
        value = self.params["image"]
        if not value:
            self.fail("image (raygate_image) is required with runtime container: registry/name@sha256:<digest>")
        try:
            return check_image_ref(value, allow_tag=self.params["image_allow_tag"])
        except ImageRefError as exc:
            self.fail(str(exc))

    # -- what the engine has -------------------------------------------------------------------

    def exists(self, reference):
        """Whether the engine's storage holds ``reference``; a digest matches whatever name the
        image is stored under (an archive loaded as localhost/...). Docker has no `image exists`."""
        if self.docker:
            rc, out, err = self.call(["image", "inspect", "--format", "{{.Id}}", reference])
            return rc == 0
        rc, out, err = self.call(["image", "exists", reference])
        if rc not in (0, 1):
            self.fail("%s image exists %s failed (rc %s): %s" % (self.engine, reference, rc, tail(err or out)))
        return rc == 0

    def image_id(self, reference):
        """The engine's image ID (the config digest, the same however the image arrived), sha256:<hex>."""
        rc, out, err = self.call(["image", "inspect", "--format", "{{.Id}}", reference])
        value = out.strip()
        if rc != 0 or not value:
            self.fail("%s image inspect %s failed (rc %s): %s" % (self.engine, reference, rc, tail(err or out)))
        return value if value.startswith("sha256:") else "sha256:" + value

    # -- getting it ------------------------------------------------------------------------------

    def check_archive(self, ref):
        """Read-only checks of image_archive against image_archive_sha256 and the reference's digest."""
        path = self.params["image_archive"]
        if not os.path.isfile(path):
            self.fail(
                "image archive %s (image_archive, raygate_image_archive) does not exist on this node: copy it "
                "there, or unset image_archive to pull %s from its registry" % (path, ref["reference"])
            )
        try:
            if self.params["image_archive_sha256"]:
                check_archive_checksum(path, self.params["image_archive_sha256"])
            check_oci_archive(path, ref["digest"])
        except ImageRefError as exc:
            self.fail(str(exc))

    def load(self, ref):
        path = self.params["image_archive"]
        rc, out, err = self.call(["load", "-i", path])
        if rc != 0:
            self.fail("%s load -i %s failed (rc %s): %s" % (self.params["engine"], path, rc, tail(err or out)))
        if not self.exists(ref["reference"]):
            self.fail(
                "%s loaded %s, but holds no image %s afterwards: the archive holds another image"
                % (self.params["engine"], path, ref["reference"])
            )

    def pull(self, ref):
        args = ["pull"]
        if not self.params["registry_tls_verify"]:
            if self.docker:
                self.module.warn(
                    "registry_tls_verify false has no effect with docker: list %s in insecure-registries of "
                    "/etc/docker/daemon.json instead" % ref["registry"]
                )
            else:
                args.append("--tls-verify=false")
        user, password = self.params["registry_username"], self.params["registry_password"]
        with registry_auth(self.docker, ref["registry"], user, password) as (auth_args, env):
            rc, out, err = self.call(args + auth_args + [ref["reference"]], env=env)
        if rc != 0:
            self.fail(pull_failure(self.params["engine"], ref, err or out, bool(user)))

    # -- what is inside ----------------------------------------------------------------------------

    def marker_path(self, ref, image_id):
        key = (ref["digest"] or image_id or "").split(":")[-1]
        return os.path.join(self.params["base_dir"], MARKERS, key + ".json") if key else None

    def read_versions(self, ref):
        """{ray, python} of the image's own python; fails naming what is missing or what broke."""
        args = ["run", "--rm", "--pull=never", "--network", "none"] + list(self.params["run_args"])
        rc, out, err = self.call(args + ["--entrypoint", "python", ref["reference"], "-c", VERSIONS_CODE])
        info = last_json(out) if rc == 0 else None
        version = self.params["version"]
        if info is not None and info.get("ray") is None:
            self.fail(
                "image %s has no Ray (python could not import ray: %s): build it with ray==%s"
                % (ref["reference"], info.get("error"), version)
            )
        if info is not None:
            return {"ray": info.get("ray"), "python": info.get("python")}
        self.fail(run_failure(ref, rc, err or out, version))

    def marker_matches(self, ref, image_id):
        """Whether the versions marker of the image is there and names ``image_id``."""
        path = self.marker_path(ref, image_id)
        marker = read_json(path) if path else None
        return marker is not None and image_id is not None and marker.get("id") == image_id

    def versions(self, ref, image_id):
        """The image's versions: from its marker while the image ID matches, else read (and recorded).
        In check mode nothing runs: an unknown Python is None."""
        path = self.marker_path(ref, image_id)
        marker = read_json(path) if path else None
        if marker is not None and image_id is not None and marker.get("id") == image_id:
            return {"ray": marker.get("ray"), "python": marker.get("python")}
        if self.module.check_mode or image_id is None:
            return {"ray": self.params["version"], "python": None}
        info = self.read_versions(ref)
        # Recorded even when it is not the Ray wanted: a re-run fails as fast, without a container.
        self.write_marker(path, dict(info, id=image_id, reference=ref["reference"], digest=ref["digest"]))
        return info

    @staticmethod
    def write_marker(path, content):
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        tmp = path + ".raygate-new"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        with os.fdopen(fd, "w") as fh:
            json.dump(content, fh, indent=2, sort_keys=True)
        os.chmod(tmp, 0o644)  # whatever the umask
        os.replace(tmp, path)

    # -- the two states --------------------------------------------------------------------------

    def present(self):
        """The image in the engine's storage, checked before anything changes; the answer's keys."""
        ref = self.reference()
        reference, check_mode = ref["reference"], self.module.check_mode
        if check_mode and not self.find_engine():
            # The role installs the engine after its read-only preflight: predict the pull or load.
            if self.params["image_archive"]:
                self.check_archive(ref)
            info = {"ray": self.params["version"], "python": None, "image": ref["digest"]}
            source = "loaded" if self.params["image_archive"] else "pulled"
            image = {"reference": reference, "digest": ref["digest"], "id": None, "source": source}
            return {"changed": True, "installed": True, "version_info": info, "image": image}
        self.require_engine()
        there = self.exists(reference)
        source = "present"
        if not there and self.params["image_archive"]:
            self.check_archive(ref)  # read-only: in check mode too
            source = "loaded"
            if not check_mode:
                self.load(ref)
        elif not there:
            source = "pulled"
            if not check_mode:
                self.pull(ref)
        image_id = self.image_id(reference) if there or not check_mode else None
        # An image whose versions were never read here (no marker) still needs the install's read: a
        # check-mode answer of "nothing to do" would skip it, and the start would be the first to run it.
        unread = there and not self.marker_matches(ref, image_id)
        info = self.versions(ref, image_id)
        if info["ray"] != self.params["version"]:
            want = self.params["version"]
            self.fail(
                "image %s holds Ray %s, not %s (version, raygate_ray_version): pin the image built with ray==%s, "
                "or set the version to %s" % (reference, info["ray"], want, want, info["ray"])
            )
        pinned = ref["digest"] or image_id
        return {
            "changed": not there or (unread and check_mode),
            "installed": not there,
            "version_info": dict(info, image=pinned),
            "image": {"reference": reference, "digest": ref["digest"], "id": image_id, "source": source},
        }

    def absent(self):
        """The image removed from the engine's storage (``image`` given) and the markers; what was done."""
        value, removed_image = self.params["image"], False
        ref = None
        if value:
            try:
                ref = parse_image_ref(value)
            except ImageRefError as exc:
                self.fail(str(exc))
        if ref is not None and self.find_engine() and self.exists(ref["reference"]):
            removed_image = True
            if not self.module.check_mode:
                rc, out, err = self.call(["rmi", ref["reference"]])
                if rc != 0:
                    self.fail(
                        "%s rmi %s failed (rc %s): %s; a container still using it must be removed first (ray_node "
                        "state absent)" % (self.params["engine"], ref["reference"], rc, tail(err or out))
                    )
        markers = os.path.join(self.params["base_dir"], MARKERS)
        removed = [markers] if os.path.isdir(markers) else []
        if removed and not self.module.check_mode:
            shutil.rmtree(markers)
        image = {"reference": ref["reference"], "digest": ref["digest"], "removed": removed_image} if ref else None
        return {"changed": bool(removed) or removed_image, "removed": removed, "image": image}
