# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The one place where raygate modules run commands.

It resolves binaries, forces the C locale (parsers read English tool output), applies a
timeout, and returns (rc, stdout, stderr). Modules never call subprocess directly, so unit
tests replace exactly one seam: ``CommandRunner.run``.
"""

from __future__ import annotations

import os
import shutil
import subprocess

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class CommandError(Exception):
    """A command could not be run, or ran past its timeout."""


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

    def environment(self, env=None):
        merged = dict(self.base_env)
        merged.update(env or {})
        return merged

    def run(self, args, env=None, timeout=None, cwd=None, data=None, output_file=None):
        """Run ``args`` and return (rc, stdout, stderr).

        ``output_file``: send stdout and stderr to this file instead of pipes and return its
        content as stdout. Needed for commands that leave daemons behind (``ray start``):
        a daemon inheriting our pipe would keep it open and the call would never return.
        """
        args = [str(a) for a in args]
        self.log.append(args)
        limit = self.timeout if timeout is None else timeout
        try:
            if output_file is not None:
                return self._run_to_file(args, env, limit, cwd, output_file)
            # ansible-core 2.21's sanity asks for AnsibleModule.run_command: it has no timeout and
            # no new session for daemons, and this runner serves code without an AnsibleModule.
            proc = subprocess.run(  # pylint: disable=ansible-bad-function
                args,
                input=data,
                capture_output=True,
                env=self.environment(env),
                cwd=cwd,
                timeout=limit,
                text=True,
                errors="replace",
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise CommandError("%s did not finish within %ss" % (" ".join(args), limit)) from exc
        except OSError as exc:
            raise CommandError("cannot run %s: %s" % (args[0], exc)) from exc
        return proc.returncode, proc.stdout, proc.stderr

    def _run_to_file(self, args, env, limit, cwd, output_file):
        with open(output_file, "wb") as out:
            proc = subprocess.Popen(  # pylint: disable=ansible-bad-function
                args,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.environment(env),
                cwd=cwd,
                start_new_session=True,
            )
            try:
                rc = proc.wait(timeout=limit)
            except subprocess.TimeoutExpired as exc:
                proc.kill()
                raise CommandError("%s did not finish within %ss" % (" ".join(args), limit)) from exc
        with open(output_file, encoding="utf-8", errors="replace") as fh:
            return rc, fh.read(), ""
