# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The unprivileged account Ray runs as (ray_node's ``user``): looked up, created and removed
(ray_install's ``service_user``), and what a process started as it needs (its ids, groups, home).

raygate creates the account as a system user with its own group, no login shell and its home
under /var/lib/raygate, and marks it in its comment (GECOS) field: a purge removes only an
account that carries that mark, never one the site made itself.
"""

from __future__ import annotations

import grp
import os
import pwd
import re

ROOT = "root"
MARK = "raygate service user"
DEFAULT_HOME = "/var/lib/raygate/home"
NOLOGIN = ("/usr/sbin/nologin", "/sbin/nologin", "/bin/false")
# useradd's own rule on Debian (NAME_REGEX of adduser is stricter still): a leading letter or _.
NAME_RE = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")


class ServiceUser:
    """A resolved account: name, uid, gid, supplementary gids, home, and whether raygate made it."""

    def __init__(self, name, uid, gid, groups, home, ours):
        self.name = name
        self.uid = uid
        self.gid = gid
        self.groups = groups
        self.home = home
        self.ours = ours

    @property
    def is_root(self):
        return self.uid == 0

    def popen_args(self):
        """The subprocess.Popen arguments that start a process as this account (Python 3.9+)."""
        if self.is_root:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": list(self.groups)}

    def env(self):
        """The login environment of the account, for a process started as it."""
        return {"HOME": self.home, "USER": self.name, "LOGNAME": self.name}

    def describe(self):
        return {"name": self.name, "uid": self.uid, "gid": self.gid, "home": self.home}


def name_problem(name):
    """Why ``name`` cannot be an account name (None when it can)."""
    if not name or not NAME_RE.match(name):
        return "%r is not a valid user name (lower-case letters, digits, _ and -, starting with a letter or _)" % name
    return None


def lookup(name):
    """The account ``name`` as a ServiceUser, or None when it does not exist here."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    groups = sorted({g.gr_gid for g in grp.getgrall() if name in g.gr_mem} - {entry.pw_gid})
    return ServiceUser(name, entry.pw_uid, entry.pw_gid, groups, entry.pw_dir, entry.pw_gecos == MARK)


def group_problem(groups):
    """Why the supplementary ``groups`` cannot be given to the account (None when they can)."""
    missing = []
    for group in groups:
        try:
            grp.getgrnam(group)
        except KeyError:
            missing.append(group)
    if missing:
        return "no group %s on this node: create it (the driver's device files name it) or leave it out" % (
            ", ".join(missing)
        )
    return None


def group_names(gids):
    """The names of the groups ``gids`` (a gid with no name is left out)."""
    names = set()
    for gid in gids:
        try:
            names.add(grp.getgrgid(gid).gr_name)
        except KeyError:
            continue
    return names


def member_of(account):
    """The names of every group the account is in (its own and the supplementary ones)."""
    return group_names([account.gid] + list(account.groups))


def ensure(name, runner, check_mode, home=DEFAULT_HOME, groups=()):
    """Create the account unless it exists, and put it in the supplementary ``groups`` it is not in
    yet (never taken out of any); returns (changed, ServiceUser or None in check mode for a new one).
    ``runner`` runs useradd/usermod; a failure, or a group that does not exist, raises CommandFailed."""
    found = lookup(name)
    if name == ROOT:
        return False, found
    problem = group_problem(groups)
    if problem:
        raise CommandFailed(problem)
    if found is not None:
        wanted = [g for g in groups if g not in member_of(found)]
        if not wanted:
            return False, found
        if check_mode:
            return True, found
        rc, out, err = runner.run(["usermod", "--append", "--groups", ",".join(wanted), name])
        if rc != 0:
            raise CommandFailed("usermod %s failed (rc=%s): %s" % (name, rc, (err or out).strip()))
        return True, lookup(name)
    if check_mode:
        return True, None
    shell = next((s for s in NOLOGIN if os.path.exists(s)), NOLOGIN[-1])
    os.makedirs(os.path.dirname(home), mode=0o755, exist_ok=True)
    args = ["useradd", "--system", "--user-group", "--home-dir", home, "--create-home", "--shell", shell]
    if groups:
        args += ["--groups", ",".join(groups)]
    rc, out, err = runner.run(args + ["--comment", MARK, name])
    if rc != 0:
        raise CommandFailed("useradd %s failed (rc=%s): %s" % (name, rc, (err or out).strip()))
    made = lookup(name)
    if made is None:
        raise CommandFailed("useradd %s reported success but the account is not there" % name)
    return True, made


def remove(name, runner, check_mode):
    """Remove the account and its home when raygate made it (its mark) and nothing runs as it;
    returns (removed, why_kept). Never removes an account raygate did not make."""
    found = lookup(name)
    if found is None or found.is_root:
        return False, None
    if not found.ours:
        return False, "the account %s was not made by raygate (its comment is not %r): kept" % (name, MARK)
    running = processes_of(found.uid)
    if running:
        pids = ", ".join(map(str, running[:10]))
        return False, "processes still run as %s (pids %s): the account is kept" % (name, pids)
    if check_mode:
        return True, None
    rc, out, err = runner.run(["userdel", "--remove", name])
    # userdel exits 12 when it removed the account but not the home (already gone): removed.
    if rc not in (0, 12):
        raise CommandFailed("userdel %s failed (rc=%s): %s" % (name, rc, (err or out).strip()))
    return True, None


def processes_of(uid, proc_root="/proc"):
    """The pids whose real uid is ``uid``."""
    pids = []
    for entry in os.listdir(proc_root):
        if not entry.isdigit():
            continue
        try:
            if os.stat(os.path.join(proc_root, entry)).st_uid == uid:
                pids.append(int(entry))
        except OSError:
            continue  # gone meanwhile
    return sorted(pids)


def own_tree(path, user):
    """Make ``path`` (created if absent, 0755) and everything under it owned by ``user``; True
    when anything changed. A tree the account already owns at its top is left as it is: Ray
    creates its session directories as the account, so only a switch from root walks it."""
    if not os.path.isdir(path):
        os.makedirs(path, mode=0o755, exist_ok=True)
    st = os.lstat(path)
    if st.st_uid == user.uid and st.st_gid == user.gid:
        return False
    for root, dirs, names in os.walk(path):
        for entry in [root] + [os.path.join(root, n) for n in dirs + names]:
            try:
                os.lchown(entry, user.uid, user.gid)
            except FileNotFoundError:
                continue
    return True


class CommandFailed(Exception):
    """useradd or userdel failed."""
