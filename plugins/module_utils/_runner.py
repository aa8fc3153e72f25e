# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The one place where raygate modules run commands.

It resolves binaries, forces the C locale (parsers read English tool output), applies a
timeout, and returns (rc, stdout, stderr). Modules never call subprocess directly, so unit
tests replace exactly one seam: ``CommandRunner.run``.

A command past its timeout is killed with its process group, and waited for only KILL_GRACE
seconds more: a process stuck in the kernel (nvidia-smi on a GPU fallen off the bus sits in the
driver, where even SIGKILL waits) or one whose output stays open in a process the kill does not
reach is left behind, and the module goes on, instead of waiting on it for ever.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Seconds a killed command gets to end and close its output before it is left behind.
KILL_GRACE = 5
# Seconds a quick query of a tool (nvidia-smi's) may run by default: gpu_health's query_timeout and
# ray_node's leftover check. Long runs (DCGM's diag, nccl-tests) keep their own timeout.
QUERY_TIMEOUT = 30


class CommandError(Exception):
    """A command could not be run, or ran past its timeout."""


class CommandTimeout(CommandError):
    """A command ran past its timeout (``limit`` seconds). ``stuck``: it did not end (or close its
    output) when killed, and process ``pid`` was left behind."""

    def __init__(self, message, limit, pid=None, stuck=False):
        super().__init__(message)
        self.limit = limit
        self.pid = pid
        self.stuck = stuck


class CommandRunner:
    """Runs commands for one module invocation."""

    def __init__(self, timeout=120, base_env=None):
        self.timeout = timeout
        self.base_env = dict(os.environ if base_env is None else base_env)
        self.base_env.setdefault("PATH", DEFAULT_PATH)
        self.base_env.update(LC_ALL="C", LANG="C")
        self.log = []

    def which(self, name, extra_dirs=()):
        """Absolute path of ``name`` on PATH, else in ``extra_dirs`` (a tool's usual home outside
        PATH, such as /opt/amazon/efa/bin), or None."""
        if os.path.isabs(name):
            return name if os.access(name, os.X_OK) else None
        search = os.pathsep.join([self.base_env["PATH"]] + list(extra_dirs))
        return shutil.which(name, path=search)

    def environment(self, env=None, user=None):
        merged = dict(self.base_env)
        if user is not None:
            merged.update(user.env())
        merged.update(env or {})
        return merged

    def run(self, args, env=None, timeout=None, cwd=None, data=None, output_file=None, user=None):
        """Run ``args`` and return (rc, stdout, stderr).

        ``output_file``: send stdout and stderr to this file instead of pipes and return its
        content as stdout. Needed for commands that leave daemons behind (``ray start``):
        a daemon inheriting our pipe would keep it open and the call would never return.
        ``user``: a service_user.ServiceUser to run the command as (its ids, groups and home);
        the output file is still opened by the caller.
        """
        args = [str(a) for a in args]
        self.log.append(args)
        limit = self.timeout if timeout is None else timeout
        as_user = user.popen_args() if user is not None else {}
        if output_file is not None:
            return self._run_to_file(args, self.environment(env, user), limit, cwd, output_file, as_user)
        try:
            # ansible-core 2.21's sanity asks for AnsibleModule.run_command: it has no timeout and
            # no new session for daemons, and this runner serves code without an AnsibleModule.
            # A session of its own: the kill on timeout reaches the command's children too.
            proc = subprocess.Popen(  # pylint: disable=ansible-bad-function
                args,
                stdin=subprocess.PIPE if data is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.environment(env, user),
                cwd=cwd,
                text=True,
                errors="replace",
                start_new_session=True,
                **as_user,
            )
        except OSError as exc:
            raise CommandError("cannot run %s: %s" % (args[0], exc)) from exc
        try:
            out, err = proc.communicate(input=data, timeout=limit)
        except subprocess.TimeoutExpired as exc:
            raise self._timed_out(proc, args, limit) from exc
        return proc.returncode, out, err

    @staticmethod
    def _timed_out(proc, args, limit):
        """Kill PROC's process group; wait KILL_GRACE seconds at most for it to end and close its
        output. The CommandTimeout to raise says which of the two happened."""
        command = " ".join(args)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass  # ended meanwhile, or its group is gone
        try:
            proc.communicate(timeout=KILL_GRACE)
        except subprocess.TimeoutExpired:
            for pipe in (proc.stdout, proc.stderr, proc.stdin):
                if pipe is not None:
                    try:
                        pipe.close()
                    except OSError:
                        pass
            how = "is still running" if proc.poll() is None else "left its output open"
            return CommandTimeout(
                "%s did not finish within %ss and %s after SIGKILL (pid %d, left behind)"
                % (command, limit, how, proc.pid),
                limit,
                pid=proc.pid,
                stuck=True,
            )
        return CommandTimeout("%s did not finish within %ss (killed)" % (command, limit), limit, pid=proc.pid)

    @staticmethod
    def _run_to_file(args, env, limit, cwd, output_file, as_user):
        with open(output_file, "wb") as out:
            proc = subprocess.Popen(  # pylint: disable=ansible-bad-function
                args,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=cwd,
                start_new_session=True,
                **as_user,
            )
            try:
                rc = proc.wait(timeout=limit)
            except subprocess.TimeoutExpired as exc:
                proc.kill()
                raise CommandError("%s did not finish within %ss" % (" ".join(args), limit)) from exc
        with open(output_file, encoding="utf-8", errors="replace") as fh:
            return rc, fh.read(), ""
