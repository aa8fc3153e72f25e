"""CommandRunner: which (PATH first, then a tool's usual home outside PATH) and run (output,
input, and a command past its timeout killed with its children, or left behind when it cannot be)."""

import os
import sys
import time

import pytest

from ansible_collections.raygate.cluster.plugins.module_utils import _runner
from ansible_collections.raygate.cluster.plugins.module_utils._runner import CommandRunner, CommandTimeout


def tool(directory, name):
    directory.mkdir(exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return str(path)


def test_which_prefers_path_and_falls_back_to_extra_dirs(tmp_path):
    on_path = tool(tmp_path / "bin", "fi_info")
    elsewhere = tool(tmp_path / "efa", "fi_info")
    only_there = tool(tmp_path / "efa", "fi_pingpong")
    runner = CommandRunner(base_env={"PATH": str(tmp_path / "bin")})
    extra = (str(tmp_path / "efa"),)
    assert runner.which("fi_info", extra) == on_path != elsewhere
    assert runner.which("fi_pingpong", extra) == only_there
    assert runner.which("fi_pingpong") is None
    assert runner.which("nope", extra) is None


def test_which_takes_an_absolute_path_only_if_executable(tmp_path):
    path = tool(tmp_path / "bin", "all_reduce_perf")
    runner = CommandRunner(base_env={"PATH": "/nonexistent"})
    assert runner.which(path) == path
    os.chmod(path, 0o644)
    assert runner.which(path) is None


def test_run_returns_rc_output_and_takes_input():
    runner = CommandRunner(base_env={"PATH": "/usr/bin:/bin"})
    rc, out, err = runner.run([sys.executable, "-c", "import sys; d = sys.stdin.read(); print(d.upper()); sys.exit(3)"],
                              data="abc")  # fmt: skip
    assert (rc, out, err) == (3, "ABC\n", "")
    assert runner.log[-1][0] == sys.executable


def _pid_gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_command_past_its_timeout_is_killed_with_its_children(tmp_path):
    # The command starts a child of its own (in its process group) and waits: both go.
    pidfile = tmp_path / "child.pid"
    script = "sleep 300 & echo $! > %s; wait" % pidfile
    runner = CommandRunner(base_env={"PATH": "/usr/bin:/bin"})
    with pytest.raises(CommandTimeout) as caught:
        runner.run(["sh", "-c", script], timeout=1)
    assert not caught.value.stuck
    assert "did not finish within 1s (killed)" in str(caught.value)
    child = int(pidfile.read_text())
    assert _wait_gone(child), "the command's child %d outlived the kill" % child


def _wait_gone(pid, seconds=10):
    """Polls until PID is gone (a generous bound: the machine may be busy)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if _pid_gone(pid):
            return True
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.05)
    return _pid_gone(pid)


def test_a_command_whose_output_outlives_the_kill_is_left_behind(tmp_path, monkeypatch):
    # As a process stuck in the kernel: the kill does not end what holds the output (here a helper
    # in a session of its own). The runner gives up after KILL_GRACE instead of waiting for ever.
    monkeypatch.setattr(_runner, "KILL_GRACE", 1)
    pidfile = tmp_path / "holder.pid"
    script = "setsid sh -c 'echo $$ > %s; exec sleep 60' & sleep 60" % pidfile
    runner = CommandRunner(base_env={"PATH": "/usr/bin:/bin"})
    try:
        with pytest.raises(CommandTimeout) as caught:
            runner.run(["sh", "-c", script], timeout=1)
        assert caught.value.stuck
        message = str(caught.value)
        assert "did not finish within 1s and left its output open after SIGKILL" in message, message
        assert "left behind" in message
    finally:
        if pidfile.exists():
            os.kill(int(pidfile.read_text()), 9)
