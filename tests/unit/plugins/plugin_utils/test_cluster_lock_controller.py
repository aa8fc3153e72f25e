"""cluster_lock's controller half: naming this run, judging whether a holder is gone, the messages."""

import pytest

from ansible_collections.raygate.cluster.plugins.plugin_utils import cluster_lock as lock

# /proc/PID/stat of a process whose command name holds a space and a parenthesis; field 22 is 98765.
STAT = "4242 (ansible (play) x) S 1 4242 4242 0 -1 4194560 9 0 0 0 1 2 0 0 20 0 1 0 98765 1000 10\n"


@pytest.fixture
def proc(tmp_path):
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "stat").write_text(STAT)
    return str(tmp_path)


def test_process_start_reads_field_22_past_a_command_name_with_spaces(proc):
    assert lock.process_start(4242, proc) == "98765"
    assert lock.process_start(4243, proc) is None


def test_this_run_is_the_controller_the_process_and_its_start(proc):
    run = lock.this_run("upgrade", pid=4242, controller="ctl1", user="ops", proc=proc)
    assert run == {"id": "ctl1:4242:98765", "user": "ops", "controller": "ctl1", "pid": 4242, "playbook": "upgrade"}


def test_a_holder_is_alive_while_its_process_runs_with_the_same_start(proc):
    holder = {"id": "ctl1:4242:98765", "controller": "ctl1", "pid": 4242}
    assert lock.holder_alive(holder, "ctl1", proc) is True
    # The same pid, started again since: another process, so the holder is gone.
    assert lock.holder_alive(dict(holder, id="ctl1:4242:11111"), "ctl1", proc) is False
    assert lock.holder_alive(dict(holder, pid=4243, id="ctl1:4243:98765"), "ctl1", proc) is False
    # Another controller's process cannot be seen from here.
    assert lock.holder_alive(holder, "ctl2", proc) is None


@pytest.mark.parametrize(
    "alive, age, stale, allowed",
    [
        (True, 10_000, 900, False),  # seen running: never taken, however old
        (False, 0, 900, True),  # seen gone from this controller: taken at once
        (None, 899, 900, False),  # another controller's, younger than stale
        (None, 900, 900, True),  # another controller's, stale
    ],
)
def test_take_over_a_run_seen_gone_at_once_and_another_controllers_once_stale(alive, age, stale, allowed):
    assert lock.may_take_over({"age": age}, alive, stale) is allowed


def test_the_take_over_warning_says_why():
    holder = {"playbook": "site", "user": "root", "controller": "ctl1", "pid": 9, "age": 3}
    assert "that run is gone" in lock.take_over_warning("node1", holder, 900, False)
    assert "another controller" in lock.take_over_warning("node1", holder, 900, None)


@pytest.mark.parametrize(
    "alive, words", [(True, "still going"), (False, "another run took the lock first"), (None, "not this one")]
)
def test_the_busy_message_names_the_holder_the_wait_and_the_fix(alive, words):
    holder = {"playbook": "teardown", "user": "ops", "controller": "ctl2", "pid": 77, "age": 312}
    msg = lock.busy_message("node1", holder, 600.4, 600, 900, alive)
    for part in ("node1:", "teardown.yml run by ops on ctl2 (pid 77), held for 312 s", "waited 600 s",
                 "raygate_cluster_lock_wait", "changed nothing", words):  # fmt: skip
        assert part in msg, (part, msg)
