# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpu_health's ``device_access`` check: can the account Ray runs as open the NVIDIA device files?

CUDA opens ``/dev/nvidiactl``, ``/dev/nvidia-uvm`` and one ``/dev/nvidiaN`` per GPU read-write. The
driver makes them 0666 root:root by default; a site that loads it with ``NVreg_DeviceFileMode=0660``
(and a ``NVreg_DeviceFileGID``) or whose udev rules narrow them leaves an unprivileged Ray with no
GPU at all: every task asking for one waits forever, and ``torch.cuda.is_available()`` is False.

The test is the kernel's own: a short child process started as the account (its uid, gid and
supplementary groups) calls ``access(R_OK | W_OK)`` on each file, so ACLs and path permissions
count, and the driver is never entered (nothing can hang on a GPU that fell off the bus). Only files
present are judged: a missing ``nvidia-uvm`` or ``nvidiaN`` is made on demand by the set-uid
``nvidia-modprobe`` when CUDA starts.
"""

from __future__ import annotations

import grp
import os
import pwd
import re
import stat
import sys

from ansible_collections.raygate.cluster.plugins.module_utils.checks import result
from ansible_collections.raygate.cluster.plugins.module_utils.node import service_user as su

NAME = "device_access"
DEVICE_RE = re.compile(r"^nvidia(ctl|-uvm|\d+)$")
# Lines of /proc/driver/nvidia/params that say how the driver makes its device files.
PARAM_KEYS = ("DeviceFileUID", "DeviceFileGID", "DeviceFileMode")
PROBE_TIMEOUT = 30
# Run as the account: print every path it may not both read and write.
PROBE = "import os, sys\nfor p in sys.argv[1:]:\n    if not os.access(p, os.R_OK | os.W_OK):\n        print(p)\n"


def _order(name):
    match = DEVICE_RE.match(name)
    tail = match.group(1)
    if tail.isdigit():
        return (2, int(tail))
    return (0 if tail == "ctl" else 1, 0)


def device_files(dev_dir):
    """The NVIDIA device files in ``dev_dir``: nvidiactl, nvidia-uvm, then nvidia0, nvidia1, ..."""
    try:
        names = [n for n in os.listdir(dev_dir) if DEVICE_RE.match(n)]
    except OSError:
        return []
    return [os.path.join(dev_dir, n) for n in sorted(names, key=_order)]


def _owner(uid, gid):
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = str(uid)
    try:
        group = grp.getgrgid(gid).gr_name
    except KeyError:
        group = str(gid)
    return user, group


def describe(path):
    """``{path, mode, owner, group, group_rw}`` of one file as ls shows it, or None when it is gone."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    owner, group = _owner(st.st_uid, st.st_gid)
    group_rw = bool(st.st_mode & stat.S_IRGRP and st.st_mode & stat.S_IWGRP)
    return {"path": path, "mode": stat.filemode(st.st_mode), "owner": owner, "group": group, "group_rw": group_rw}


def parse_params(text):
    """``{DeviceFileUID: int, DeviceFileGID: int, DeviceFileMode: int}`` from /proc/driver/nvidia/params
    (``Key: value`` lines; the mode is decimal there, 438 = 0666). Keys not found are left out."""
    found = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition(":")
        key = key.strip()
        if sep and key in PARAM_KEYS:
            try:
                found[key] = int(value.strip())
            except ValueError:
                continue
    return found


def read_params(root):
    try:
        with open(os.path.join(root, "proc", "driver", "nvidia", "params"), encoding="utf-8") as fh:
            return parse_params(fh.read())
    except (OSError, UnicodeDecodeError):
        return {}


def probe(paths, account, runner):
    """(denied paths, error): which of ``paths`` the account may not read and write. Run in-process
    when this process already is the account, else as a child process started as it (needs root)."""
    if os.geteuid() == account.uid:
        return [p for p in paths if not os.access(p, os.R_OK | os.W_OK)], None
    try:
        rc, out, err = runner.run([sys.executable, "-c", PROBE] + list(paths), user=account, timeout=PROBE_TIMEOUT)
    except Exception as exc:  # pylint: disable=broad-except
        # The runner's own errors (not found, timeout, no permission to switch user) all mean the
        # same here: the test did not run.
        return None, str(exc)
    if rc != 0:
        return None, "the test as %s failed (rc %s): %s" % (account.name, rc, (err or out).strip()[-300:])
    return [line for line in out.splitlines() if line in paths], None


def gather(user, root, runner, lookup=su.lookup):
    """The ``device_access`` evidence for ``user`` (None: not asked) with device files under ``root``/dev."""
    if not user:
        return None
    ev = {"user": user}
    if user == su.ROOT:
        ev["skip"] = "Ray runs as root (raygate_user: root): nothing to check"
        return ev
    account = lookup(user)
    if account is None:
        ev["skip"] = "the account %s does not exist yet (site.yml's install makes it)" % user
        return ev
    if os.geteuid() not in (0, account.uid):
        ev["skip"] = "gpu_health runs as uid %d, neither root nor %s: cannot test as %s" % (os.geteuid(), user, user)
        return ev
    dev_dir = os.path.join(root, "dev")
    paths = device_files(dev_dir)
    ev["dev_dir"] = dev_dir
    ev["files"] = [d for d in (describe(p) for p in paths) if d is not None]
    ev["params"] = read_params(root)
    if paths:
        ev["denied"], ev["error"] = probe(paths, account, runner)
    return ev


def _short(paths):
    """``/dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia0-7``: the numbered ones as a range when contiguous."""
    named, numbered = [], []
    for path in paths:
        tail = DEVICE_RE.match(os.path.basename(path)).group(1)
        (numbered if tail.isdigit() else named).append((path, tail))
    out = [p for p, _t in named]
    if numbered:
        numbers = [int(t) for _p, t in numbered]
        if len(numbers) > 2 and numbers == list(range(numbers[0], numbers[-1] + 1)):
            out.append("%s%d-%d" % (numbered[0][0][: -len(numbered[0][1])], numbers[0], numbers[-1]))
        else:
            out.extend(p for p, _t in numbered)
    return ", ".join(out)


def _fix(user, denied_files, params):
    groups = sorted({f["group"] for f in denied_files if f["group_rw"] and f["group"] != su.ROOT})
    driver = "options nvidia NVreg_DeviceFileMode=0666 in /etc/modprobe.d/ (then reload the driver or reboot)"
    if groups:
        listed = ", ".join(groups)
        return (
            "add %s to the group that may open them (raygate_user_groups: [%s], then run site.yml again), or"
            " have the driver make them 0666: %s" % (user, listed, driver)
        )
    return (
        "have the driver make them readable to %s: %s, or NVreg_DeviceFileGID=<a group of %s> with"
        " NVreg_DeviceFileMode=0660 and that group in raygate_user_groups" % (user, driver, user)
    )


def check(ev, nvsmi_failed=False):
    """The ``device_access`` result from ``gather``'s evidence."""
    if ev is None:
        return result(NAME, "skip", "not checked (no service_user)")
    if "skip" in ev:
        return result(NAME, "skip", ev["skip"])
    user, files = ev["user"], ev["files"]
    if not files:
        if nvsmi_failed:
            return result(NAME, "skip", "no NVIDIA device files in %s (see gpu_count)" % ev["dev_dir"])
        return result(
            NAME,
            "fail",
            "no NVIDIA device files in %s though nvidia-smi answered" % ev["dev_dir"],
            action="make the driver's device files (nvidia-modprobe -c 0 -u, or the udev rules of the driver package)",
        )
    if ev.get("error"):
        return result(NAME, "warn", "could not test the device files as %s: %s" % (user, ev["error"]))
    denied = [f for f in files if f["path"] in ev["denied"]]
    if not denied:
        return result(NAME, "pass", "%s can open %s" % (user, _short([f["path"] for f in files])), len(files))
    shown = ", ".join("%s (%s %s:%s)" % (f["path"], f["mode"], f["owner"], f["group"]) for f in denied[:4])
    if len(denied) > 4:
        shown += " and %d more" % (len(denied) - 4)
    params = ev.get("params") or {}
    driver = ""
    if "DeviceFileMode" in params:
        driver = "; the driver makes them %04o, group id %s" % (
            params["DeviceFileMode"],
            params.get("DeviceFileGID", "?"),
        )
    detail = "%s cannot read and write %s: Ray's processes would see no GPU%s" % (user, shown, driver)
    return result(NAME, "fail", detail, len(files) - len(denied), len(files), action=_fix(user, denied, params))
