# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The work of raygate.cluster.ray_install, runnable by its module or as a node_steps step."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import socket

from ansible_collections.raygate.cluster.plugins.module_utils._runner import CommandError, CommandRunner
from ansible_collections.raygate.cluster.plugins.module_utils.node import image, service_user
from ansible_collections.raygate.cluster.plugins.module_utils.node.versions import RAY_VERSION_RE

MARKER = "raygate-install.json"
PY_VERSION = "import sys; print('%d.%d.%d' % sys.version_info[:3])"
MIB = 1 << 20
# What a Ray install needs when nothing better is known. Wheels unpack to about three times their
# size; an index install (Ray with the default extras and its dependencies) takes about 1.5 GiB.
WHEEL_UNPACK_FACTOR = 3
MIN_WHEELHOUSE_MIB = 512
INDEX_INSTALL_MIB = 1536
ENOSPC_TEXT = "No space left on device"


def sha256_file(path):
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_marker(venv):
    try:
        with open(os.path.join(venv, MARKER)) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def existing_ancestor(path):
    """``path`` or its nearest existing parent: base_dir may not exist before the first install."""
    path = os.path.abspath(path)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def free_bytes(path):
    """Bytes an unprivileged process may still write on the filesystem holding ``path`` (an existing path)."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def tree_bytes(path):
    """Disk space removing ``path`` gives back: allocated blocks, each inode once (hard links)."""
    seen, total = set(), 0
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


def estimate_bytes(params):
    """Space an install needs: min_free_mb when set, else a deliberately rough estimate (see the docs)."""
    if params["min_free_mb"] > 0:
        return params["min_free_mb"] * MIB
    wheelhouse = params["wheelhouse"]
    if not wheelhouse:
        return INDEX_INSTALL_MIB * MIB
    # Every wheel, not only those this install resolves: resolving them here would redo pip's work.
    wheels = [os.path.join(wheelhouse, n) for n in os.listdir(wheelhouse) if n.endswith(".whl")]
    return max(MIN_WHEELHOUSE_MIB * MIB, WHEEL_UNPACK_FACTOR * sum(os.path.getsize(w) for w in wheels))


class BuildFailed(Exception):
    """A step of building the virtualenv failed; the caller removes the half-built virtualenv."""


def wheel_versions(wheelhouse, py_tag):
    """Ray versions in a wheelhouse that install on ``py_tag`` (cp311), and all others."""
    usable, other = set(), set()
    for name in os.listdir(wheelhouse):
        match = re.match(r"^ray-([^-]+)-([^-]+)-([^-]+)-[^-]+\.whl$", name)
        if match:
            (usable if match.group(2) in (py_tag, "py3") else other).add(match.group(1))
    return usable, other - usable


class Installer:
    def __init__(self, module, runner):
        self.module = module
        self.runner = runner
        self.params = module.params

    def fail(self, msg, **kwargs):
        self.module.fail_json(msg=msg, **kwargs)

    def run(self, args, **kwargs):
        try:
            rc, out, err = self.runner.run(args, timeout=self.params["timeout"], **kwargs)
        except CommandError as exc:
            self.fail(str(exc))
        return rc, out, err

    def python_version(self, python):
        rc, out, err = self.run([python, "-c", PY_VERSION])
        if rc != 0:
            self.fail("cannot run the Python interpreter %s: %s" % (python, (err or out).strip()))
        return out.strip()

    def check_available(self, version, py_version):
        """Fail before any change when the requested Ray version cannot be installed."""
        wheelhouse = self.params["wheelhouse"]
        py_tag = "cp" + "".join(py_version.split(".")[:2])
        if wheelhouse:
            if not os.path.isdir(wheelhouse):
                self.fail("wheelhouse %s does not exist on this node; build it or unset wheelhouse" % wheelhouse)
            usable, other = wheel_versions(wheelhouse, py_tag)
            if version not in usable:
                hint = " (a wheel for another Python exists: %s)" % ", ".join(sorted(other)) if version in other else ""
                self.fail(
                    "Ray %s for Python %s (%s) is not in the wheelhouse %s%s; available: %s. "
                    "Set raygate_ray_version to one of those or add its wheels."
                    % (version, py_version, py_tag, wheelhouse, hint, ", ".join(sorted(usable)) or "none")
                )
            return
        args = [self.params["python"], "-m", "pip", "index", "versions", "ray", "--disable-pip-version-check"]
        if self.params["index_url"]:
            args += ["--index-url", self.params["index_url"]]
        rc, out, err = self.run(args)
        if rc != 0:
            self.fail("cannot list Ray versions on the package index: %s" % (err or out).strip())
        listed = re.search(r"Available versions:(.*)", out)
        versions = {v.strip() for v in listed.group(1).split(",")} if listed else set()
        if version not in versions:
            self.fail(
                "Ray %s is not on the package index (newest: %s); set raygate_ray_version to a released version."
                % (version, ", ".join(sorted(versions, reverse=True)[:5]) or "none found")
            )

    def desired_marker(self, version, py_version):
        requirements = self.params["requirements"]
        return {
            "version": version,
            "extras": sorted(set(self.params["extras"])),
            "python": ".".join(py_version.split(".")[:2]),
            "requirements_sha256": sha256_file(requirements) if requirements else None,
        }

    def source_args(self):
        if self.params["wheelhouse"]:
            return ["--no-index", "--find-links", self.params["wheelhouse"]]
        if self.params["index_url"]:
            return ["--index-url", self.params["index_url"]]
        return []

    def space(self, venv, needs_install):
        """(free, needed) bytes for installing ``venv``; free counts the stale copy the install removes."""
        free = free_bytes(existing_ancestor(self.params["base_dir"]))
        if not needs_install:
            return free, 0
        return free + (tree_bytes(venv) if os.path.isdir(venv) else 0), estimate_bytes(self.params)

    def space_message(self, trouble, venv, free, needed, free_what="free"):
        where = existing_ancestor(self.params["base_dir"])
        if os.path.isdir(venv):
            where += " (counting the unfinished %s it replaces)" % os.path.basename(venv)
        how = "set by min_free_mb" if self.params["min_free_mb"] > 0 else "estimated; min_free_mb overrides it"
        return (
            "%s: %s: %d MiB %s on %s, about %d MiB needed (%s); "
            "free space there or set base_dir (raygate_base_dir) to a larger filesystem"
            % (socket.gethostname(), trouble, free // MIB, free_what, where, needed // MIB, how)
        )

    def check_space(self, venv, version, free, needed):
        """Fail before anything is created or removed when the install cannot fit."""
        if free < needed:
            self.fail(self.space_message("not enough space for Ray %s in %s" % (version, venv), venv, free, needed))

    def install(self, venv, version, marker, needed):
        """Build ``venv``; on any failure remove it again, so no half-built virtualenv stays behind
        and ``current`` (switched only after this returns) never points at one."""
        if os.path.exists(venv):
            shutil.rmtree(venv)
        os.makedirs(os.path.dirname(venv), mode=0o755, exist_ok=True)
        try:
            self.build(venv, version, marker)
        except (BuildFailed, OSError) as exc:
            shutil.rmtree(venv, ignore_errors=True)
            self.fail(self.build_failure(exc, venv, version, needed))
        except BaseException:
            # Whatever else ends the module here (an interrupt): still leave no half-built virtualenv.
            shutil.rmtree(venv, ignore_errors=True)
            raise

    def build_failure(self, exc, venv, version, needed):
        detail = str(exc)
        full = (isinstance(exc, OSError) and exc.errno == errno.ENOSPC) or ENOSPC_TEXT in detail
        if not full:
            return "%s (the half-built virtualenv %s was removed)" % (detail, venv)
        # Measured after the removal: what the operator finds on the node now.
        free = free_bytes(existing_ancestor(self.params["base_dir"]))
        trouble = "ran out of space installing Ray %s in %s" % (version, venv)
        msg = self.space_message(trouble, venv, free, needed, "free now")
        return "%s. The half-built virtualenv was removed. Error: %s" % (msg, detail[-500:])

    def build(self, venv, version, marker):
        self.checked([self.params["python"], "-m", "venv", venv], "create the virtualenv %s" % venv)
        pip = [os.path.join(venv, "bin", "python"), "-m", "pip", "--disable-pip-version-check"]
        spec = "ray[%s]==%s" % (",".join(marker["extras"]), version) if marker["extras"] else "ray==%s" % version
        if self.params["installer"] == "uv":
            self.checked(pip + ["install", "--quiet"] + self.source_args() + ["uv"], "install uv")
            tool = [os.path.join(venv, "bin", "uv"), "pip", "install", "--python", os.path.join(venv, "bin", "python")]
            env = {"UV_NO_CACHE": "1"} if self.params["wheelhouse"] else {}
        else:
            tool, env = pip + ["install", "--quiet"], {}
        self.checked(tool + self.source_args() + [spec], "install %s" % spec, env=env)
        if self.params["requirements"]:
            args = tool + self.source_args() + ["--require-hashes", "-r", self.params["requirements"]]
            self.checked(args, "install %s" % self.params["requirements"], env=env)
        rc, out, err = self.command([os.path.join(venv, "bin", "ray"), "--version"])
        if rc != 0 or version not in out.split():
            raise BuildFailed("ray --version in %s answered %r, expected %s" % (venv, (out or err).strip(), version))
        with open(os.path.join(venv, MARKER), "w") as fh:
            json.dump(marker, fh, indent=2, sort_keys=True)

    def command(self, args, **kwargs):
        try:
            return self.runner.run(args, timeout=self.params["timeout"], **kwargs)
        except CommandError as exc:
            raise BuildFailed(str(exc)) from exc

    def checked(self, args, what, **kwargs):
        rc, out, err = self.command(args, **kwargs)
        if rc != 0:
            raise BuildFailed("failed to %s (rc=%s): %s" % (what, rc, ((err or "") + (out or "")).strip()[-2000:]))

    def wanted_service_user(self):
        """The service_user option, checked; None when none is to be managed (unset or root)."""
        name = self.module.params["service_user"]
        if not name or name == service_user.ROOT:
            return None
        problem = service_user.name_problem(name)
        if problem:
            self.fail("service_user: %s" % problem)
        problem = service_user.group_problem(self.module.params["service_user_groups"])
        if problem:
            self.fail("service_user_groups: %s" % problem)
        return name

    def service_user_present(self):
        """Create the service account unless it exists; what the result says of it (None: none)."""
        name = self.wanted_service_user()
        if name is None:
            return None
        try:
            before = service_user.lookup(name)
            groups = self.module.params["service_user_groups"]
            changed, account = service_user.ensure(name, self.runner, self.module.check_mode, groups=groups)
        except (service_user.CommandFailed, CommandError) as exc:
            self.fail("cannot create the service user %s: %s" % (name, exc))
        described = account.describe() if account is not None else {"name": name}
        if account is not None:
            described["groups"] = sorted(service_user.member_of(account) | set(groups))
        return dict(described, created=changed and before is None, changed=changed)

    def service_user_absent(self):
        """Remove the service account when raygate made it and nothing runs as it (None: none)."""
        name = self.wanted_service_user()
        if name is None:
            return None
        try:
            removed, kept = service_user.remove(name, self.runner, self.module.check_mode)
        except (service_user.CommandFailed, CommandError) as exc:
            self.fail("cannot remove the service user %s: %s" % (name, exc))
        result = {"name": name, "removed": removed}
        if kept:
            result["kept"] = kept
            self.module.warn(kept)
        return result

    def switch_current(self, venv):
        link = os.path.join(self.params["base_dir"], "current")
        if os.path.islink(link) and os.readlink(link) == venv:
            return False
        if os.path.exists(link) and not os.path.islink(link):
            self.fail("%s exists and is not a symlink; move it away so raygate can manage it" % link)
        if not self.module.check_mode:
            tmp = link + ".raygate-new"
            if os.path.lexists(tmp):
                os.unlink(tmp)
            os.symlink(venv, tmp)
            os.replace(tmp, link)
        return True


def current_target(base_dir):
    link = os.path.join(base_dir, "current")
    return os.readlink(link) if os.path.islink(link) else ""


def present(module, inst):
    params = module.params
    version = params["version"]
    if not version:
        module.fail_json(msg="version is required when state=present (for example 2.60.0)")
    if not RAY_VERSION_RE.match(version):
        module.fail_json(msg="version %r is not an exact Ray release such as 2.60.0" % version)
    if params["runtime"] == "container":
        return present_container(module, inst)
    if params["min_free_mb"] < 0:
        module.fail_json(msg="min_free_mb must be 0 (estimate the space needed) or a number of MiB")
    if params["requirements"] and not os.path.isfile(params["requirements"]):
        module.fail_json(msg="requirements file %s does not exist on this node" % params["requirements"])
    inst.wanted_service_user()  # a bad name fails before anything changes
    py_version = inst.python_version(params["python"])
    minor = ".".join(py_version.split(".")[:2])
    venv = os.path.join(params["base_dir"], "ray-%s-py%s" % (version, minor))
    marker = inst.desired_marker(version, py_version)
    existing = read_marker(venv)
    needs_install = existing != marker
    if needs_install:
        inst.check_available(version, py_version)
    free, needed = inst.space(venv, needs_install)
    if needs_install:
        inst.check_space(venv, version, free, needed)
        if not module.check_mode:
            inst.install(venv, version, marker, needed)
    changed = needs_install
    if params["set_current"]:
        changed = inst.switch_current(venv) or changed
    account = inst.service_user_present()
    changed = changed or bool(account and account.pop("changed"))
    venv_python = os.path.join(venv, "bin", "python")
    actual_py = py_version if module.check_mode and needs_install else inst.python_version(venv_python)
    extra = {"service_user": account} if account else {}
    module.exit_json(
        changed=changed,
        venv=venv,
        installed=needs_install,
        current=venv if params["set_current"] else current_target(params["base_dir"]),
        version_info={"ray": version, "python": actual_py},
        free_mb=free // MIB,
        needed_mb=needed // MIB,
        **extra,
    )


def present_container(module, inst):
    """The image instead of a virtualenv (image.py); the same answer, and the service user as ever."""
    inst.wanted_service_user()  # a bad name fails before anything changes
    result = image.ImageStore(module, inst.runner).present()
    account = inst.service_user_present()
    changed = result.pop("changed") | bool(account and account.pop("changed"))
    extra = {"service_user": account} if account else {}
    module.exit_json(changed=changed, venv=None, current=None, **dict(result, **extra))


def remove_venvs(module, base_dir, version):
    """The virtualenvs of ``version`` (every one when None) and the current link to one removed; their paths."""
    removed = []
    if os.path.isdir(base_dir):
        for name in sorted(os.listdir(base_dir)):
            path = os.path.join(base_dir, name)
            if not re.match(r"^ray-.+-py\d+\.\d+$", name) or (version and not name.startswith("ray-%s-" % version)):
                continue
            removed.append(path)
            if not module.check_mode:
                shutil.rmtree(path)
    link = os.path.join(base_dir, "current")
    if os.path.islink(link) and (not version or os.readlink(link) in removed):
        removed.append(link)
        if not module.check_mode:
            os.unlink(link)
    return removed


def absent(module, inst):
    base_dir = module.params["base_dir"]
    version = module.params["version"]
    extra = {}
    if module.params["runtime"] == "container":
        extra = image.ImageStore(module, inst.runner).absent()
        removed, changed = extra.pop("removed"), extra.pop("changed")
    else:
        removed = remove_venvs(module, base_dir, version)
        changed = bool(removed)
    if not version and os.path.isdir(base_dir) and not module.check_mode and not os.listdir(base_dir):
        os.rmdir(base_dir)
    account = inst.service_user_absent() if not version else None
    if account:
        extra["service_user"] = account
    changed = changed or bool(account and account["removed"])
    module.exit_json(changed=changed, removed=removed, current=current_target(base_dir), **extra)


ARGUMENT_SPEC = dict(
    version=dict(type="str"),
    extras=dict(type="list", elements="str", default=["default"]),
    python=dict(type="path", default="/usr/bin/python3"),
    base_dir=dict(type="path", default="/opt/raygate"),
    wheelhouse=dict(type="path"),
    index_url=dict(type="str"),
    requirements=dict(type="path"),
    installer=dict(type="str", choices=["pip", "uv"], default="pip"),
    set_current=dict(type="bool", default=True),
    state=dict(type="str", choices=["present", "absent"], default="present"),
    timeout=dict(type="int", default=1200),
    min_free_mb=dict(type="int", default=0),
    service_user=dict(type="str"),
    service_user_groups=dict(type="list", elements="str", default=[]),
    runtime=dict(type="str", choices=["venv", "container"], default="venv"),
    engine=dict(type="str", choices=["podman", "docker"], default="podman"),
    image=dict(type="str"),
    image_allow_tag=dict(type="bool", default=False),
    image_archive=dict(type="path"),
    image_archive_sha256=dict(type="str"),
    registry_username=dict(type="str"),
    registry_password=dict(type="str", no_log=True),
    registry_tls_verify=dict(type="bool", default=True),
    run_args=dict(type="list", elements="str", default=[]),
)
MUTUALLY_EXCLUSIVE = [("wheelhouse", "index_url")]
REQUIRED_TOGETHER = [("registry_username", "registry_password")]


def run(module):
    """Install or remove as ``module.params`` say; ends with ``module.exit_json`` or ``module.fail_json``."""
    inst = Installer(module, CommandRunner(timeout=module.params["timeout"]))
    if module.params["state"] == "present":
        present(module, inst)
    absent(module, inst)
