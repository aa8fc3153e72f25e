# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Atomic file writes with diff and check mode, KEY=VALUE environment files, and a lock file."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shlex
import tempfile

from ansible_collections.raygate.cluster.plugins.module_utils.waiter import wait_for

ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def read_text(path):
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except FileNotFoundError:
        return None


def write_file(path, content, mode=0o644, check_mode=False, gid=None):
    """Write ``content`` to ``path`` atomically if it differs (or the mode or group does).

    Returns ``(changed, diff)`` where diff is Ansible's before/after dict. The temporary
    file gets its final mode (and ``gid``, when given: a secret the service user reads
    through its group) before it is renamed into place, so a secret is never readable by
    others, not even for an instant.
    """
    before = read_text(path)
    mode_ok = False
    if before is not None:
        st = os.stat(path)
        mode_ok = (st.st_mode & 0o7777) == mode and (gid is None or st.st_gid == gid)
    changed = before != content or not mode_ok
    diff = {"before": before or "", "after": content, "before_header": path, "after_header": path}
    if not changed or check_mode:
        return changed, diff
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, mode=0o755, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".raygate-", dir=directory)
    try:
        if gid is not None:
            os.fchown(fd, -1, gid)
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(content)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return True, diff


def remove_path(path, check_mode=False):
    """Remove a file or symlink; True when something was (or would be) removed."""
    if not os.path.lexists(path):
        return False
    if not check_mode:
        os.unlink(path)
    return True


def remove_empty_parent(path, check_mode=False):
    """Remove the directory of ``path`` when it is raygate's own (named raygate) and empty.

    Several modules write into /etc/raygate; whichever removes the last file also removes
    the directory, so teardown leaves nothing behind whatever the order of the modules.
    """
    parent = os.path.dirname(path)
    if check_mode or os.path.basename(parent) != "raygate":
        return False
    try:
        os.rmdir(parent)
    except OSError:
        return False
    return True


def parse_env(text):
    """Parse KEY=VALUE lines (systemd EnvironmentFile / shell style) into a dict."""
    env = {}
    for number, line in enumerate((text or "").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].strip()
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not ENV_NAME_RE.match(key):
            raise ValueError("line %d is not KEY=VALUE: %r" % (number, line))
        value = value.strip()
        if value[:1] in ("'", '"'):
            parts = shlex.split(value)
            value = parts[0] if parts else ""
        env[key] = value
    return env


def render_env(env, header=None):
    """Render a dict as an environment file both systemd and a shell can read."""
    lines = ["# %s" % line for line in (header or "").splitlines()]
    for key in sorted(env):
        if not ENV_NAME_RE.match(key):
            raise ValueError("not a valid environment variable name: %r" % key)
        lines.append("%s=%s" % (key, shlex.quote(str(env[key]))))
    return "\n".join(lines) + "\n"


SYSTEMD_RUNTIME_DIR = "/run/systemd/system"


def systemd_booted():
    """True when systemd runs as the init system (what sd_booted() checks)."""
    return os.path.isdir(SYSTEMD_RUNTIME_DIR)


class LockBusy(Exception):
    """The lock was still held when the wait ended; ``holder`` is the pid its holder wrote, or None."""

    def __init__(self, path, holder, waited):
        super().__init__("%s is held by %s" % (path, holder or "another process"))
        self.path, self.holder, self.waited = path, holder, waited


def _lock_holder(path):
    try:
        return int((read_text(path) or "").strip()) or None
    except (ValueError, OSError):
        return None


def _take_lock(path):
    """One try: ``(True, fd)`` holding the lock of the file now at ``path``, else ``(False, None)``
    (held by another, or removed by its holder after we opened it: the next try opens the path anew)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.fstat(fd).st_ino == os.stat(path).st_ino:
            return True, fd
    except (BlockingIOError, FileNotFoundError):
        pass
    os.close(fd)
    return False, None


@contextlib.contextmanager
def exclusive_lock(path, timeout, interval=0.2):
    """Hold ``path`` locked (flock) for the block: one holder at a time, the others wait at most
    ``timeout`` seconds, then LockBusy. The holder writes its pid into the file and removes the file
    when it is done, so no lock file stays behind; a waiter that got the lock of a file already
    removed opens the path again. A holder that dies (SIGKILL included) releases the lock with it.
    """
    ok, fd, waited = wait_for(lambda: _take_lock(path), timeout=timeout, interval=interval)
    if not ok:
        raise LockBusy(path, _lock_holder(path), waited)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, b"%d\n" % os.getpid())
        yield
    finally:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        os.close(fd)
