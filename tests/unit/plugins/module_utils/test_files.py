import fcntl
import os
import stat
import threading

import pytest

from ansible_collections.raygate.cluster.plugins.module_utils.files import (
    LockBusy,
    exclusive_lock,
    parse_env,
    render_env,
    write_file,
)


def test_write_file_mode_diff_and_idempotence(tmp_path):
    path = str(tmp_path / "sub" / "token")
    changed, diff = write_file(path, "secret", mode=0o600)
    assert changed and diff["before"] == "" and diff["after"] == "secret"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert write_file(path, "secret", mode=0o600)[0] is False
    os.chmod(path, 0o644)
    assert write_file(path, "secret", mode=0o600)[0] is True  # a wrong mode is a change too
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a file's group to one we are not in needs root")
def test_write_file_group_is_part_of_the_file(tmp_path):
    # The token the service user reads through its group: the group set before the file appears,
    # a wrong group a change like a wrong mode.
    path = str(tmp_path / "token")
    assert write_file(path, "secret", mode=0o640, gid=4321)[0] is True
    st = os.stat(path)
    assert (st.st_gid, stat.S_IMODE(st.st_mode)) == (4321, 0o640)
    assert write_file(path, "secret", mode=0o640, gid=4321)[0] is False
    os.chown(path, -1, 0)
    assert write_file(path, "secret", mode=0o640, gid=4321)[0] is True
    assert os.stat(path).st_gid == 4321


def test_write_file_check_mode_writes_nothing(tmp_path):
    path = tmp_path / "f"
    changed = write_file(str(path), "x", check_mode=True)[0]
    assert changed and not path.exists()


def test_env_round_trip():
    env = {"NCCL_SOCKET_IFNAME": "=eth0", "B": "a b", "C": "it's"}
    assert parse_env(render_env(env, header="h")) == env


def test_parse_env_forms_and_errors():
    text = "# comment\n\nexport A=1\nB='two words'\nC=\"x\"\n"
    assert parse_env(text) == {"A": "1", "B": "two words", "C": "x"}
    with pytest.raises(ValueError, match="line 1"):
        parse_env("not a pair")
    with pytest.raises(ValueError):
        render_env({"BAD-NAME": "1"})


def test_exclusive_lock_names_its_holder_while_held_and_leaves_no_file(tmp_path):
    path = str(tmp_path / "raygate.lock")
    with exclusive_lock(path, timeout=1):
        with open(path) as fh:
            assert fh.read().strip() == str(os.getpid())
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert not os.path.lexists(path)


def test_exclusive_lock_held_elsewhere_times_out_naming_the_holder(tmp_path):
    path = str(tmp_path / "raygate.lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another open file: flock makes it wait as another process would
    os.write(fd, b"4242\n")
    entered = []
    try:
        with pytest.raises(LockBusy) as busy:
            with exclusive_lock(path, timeout=0.3, interval=0.05):
                entered.append(True)
    finally:
        os.close(fd)
    assert entered == [] and busy.value.holder == 4242 and busy.value.waited >= 0.3
    assert os.path.exists(path)  # the holder's file is not the waiter's to remove


def test_exclusive_lock_waits_for_the_holder_then_takes_the_path_again(tmp_path):
    # The holder removes the file as it lets go: the waiter, which locked the removed file, must
    # lock the path anew, or a third caller could hold a new file at the same time.
    path = str(tmp_path / "raygate.lock")
    holding, release, order = threading.Event(), threading.Event(), []

    def holder():
        with exclusive_lock(path, timeout=5):
            order.append("first")
            holding.set()
            release.wait(5)
            # Still inside the block: once the block is left, the waiter may run before this thread
            # appends anything (the landing CI of 35c7877 caught that order).
            order.append("first letting go")

    thread = threading.Thread(target=holder)
    thread.start()
    assert holding.wait(5)
    threading.Timer(0.3, release.set).start()
    with exclusive_lock(path, timeout=10, interval=0.05):
        order.append("second")
        with open(path) as fh:
            assert fh.read().strip() == str(os.getpid())
    thread.join(5)
    assert order == ["first", "first letting go", "second"]
    assert not os.path.lexists(path)
