"""cluster_lock's node half: the lock file on the head, one look and at most one change per call."""

import json
import os
import stat

import pytest

from ansible_collections.raygate.cluster.plugins.module_utils.node import cluster_lock

ME = {"id": "ctl1:100:5", "user": "root", "controller": "ctl1", "pid": 100, "playbook": "site"}
OTHER = {"id": "ctl2:200:7", "user": "ops", "controller": "ctl2", "pid": 200, "playbook": "teardown"}


def params(path, state="held", holder=None, take_over=None):
    holder = holder or ME
    return {"state": state, "path": str(path), "holder": holder, "take_over": take_over, "playbook": "site"}


@pytest.fixture
def path(tmp_path):
    return tmp_path / "raygate" / "cluster.lock"


def test_a_free_lock_is_taken_with_who_and_since_in_a_0600_file(path):
    answer = cluster_lock.change(params(path), now=1000)
    assert answer["action"] == "take" and answer["changed"] is False
    assert answer["holder"] == dict(ME, since=1000, age=0) and answer["taken_over"] is None
    assert json.loads(path.read_text()) == dict(ME, since=1000)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    # The flock of the change is gone with it: no second file stays beside the lock.
    assert sorted(os.listdir(path.parent)) == ["cluster.lock"]


def test_the_holder_keeps_it_and_another_run_finds_it_busy_with_its_age(path):
    cluster_lock.change(params(path), now=1000)
    assert cluster_lock.change(params(path), now=1010)["action"] == "keep"
    busy = cluster_lock.change(params(path, holder=OTHER), now=1042)
    assert busy["action"] == "busy"
    assert busy["holder"] == dict(ME, since=1000, age=42)
    assert json.loads(path.read_text())["id"] == ME["id"]


def test_take_over_needs_the_id_of_the_holder_seen(path):
    cluster_lock.change(params(path, holder=OTHER), now=1000)
    # The lock changed hands since the waiter looked: its take-over names someone else.
    assert cluster_lock.change(params(path, take_over="ctl9:1:1"), now=2000)["action"] == "busy"
    taken = cluster_lock.change(params(path, take_over=OTHER["id"]), now=2000)
    assert taken["action"] == "take"
    assert taken["taken_over"] == dict(OTHER, since=1000, age=1000)
    assert json.loads(path.read_text()) == dict(ME, since=2000)


def test_only_the_holder_releases(path):
    cluster_lock.change(params(path, holder=OTHER), now=1000)
    assert cluster_lock.change(params(path, state="released"))["action"] == "none"
    assert path.exists()
    assert cluster_lock.change(params(path, state="released", holder=OTHER))["action"] == "release"
    assert not path.exists()
    assert cluster_lock.change(params(path, state="released", holder=OTHER))["action"] == "none"


def test_check_mode_looks_only_and_makes_no_directory(path):
    assert cluster_lock.change(params(path), check_mode=True, now=5)["action"] == "take"
    assert not path.parent.exists()
    cluster_lock.change(params(path, holder=OTHER), now=5)
    assert cluster_lock.change(params(path), check_mode=True, now=9)["holder"]["age"] == 4
    assert cluster_lock.change(params(path, holder=OTHER, state="released"), check_mode=True)["action"] == "release"
    assert path.exists()


@pytest.mark.parametrize("text", ["", "not json", "[1, 2]", '{"user": "root"}'])
def test_a_file_that_names_no_run_holds_nothing(path, text):
    path.parent.mkdir()
    path.write_text(text)
    assert cluster_lock.change(params(path), now=1)["action"] == "take"


def test_the_module_refuses_a_call_without_the_action_plugins_holder(path):
    class Module:
        params = dict(params(path), holder=None)
        check_mode = False

        def fail_json(self, msg):
            raise RuntimeError(msg)

    with pytest.raises(RuntimeError, match="set by the cluster_lock action plugin"):
        cluster_lock.run(Module())
    assert not path.exists()
