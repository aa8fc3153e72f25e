"""CommandRunner.which: PATH first, then a tool's usual home outside PATH."""

import os

from ansible_collections.raygate.cluster.plugins.module_utils._runner import CommandRunner


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
