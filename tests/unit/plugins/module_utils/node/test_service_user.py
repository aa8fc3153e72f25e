"""The account Ray runs as: its name checked, created once, removed only when raygate made it, its
directories given to it, and a command run as it."""

import os

import pytest

from ansible_collections.raygate.cluster.plugins.module_utils._runner import CommandRunner
from ansible_collections.raygate.cluster.plugins.module_utils.node import service_user as su

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="changing owners and users needs root")


class FakeRunner:
    def __init__(self, rc=0, err=""):
        self.calls = []
        self.rc = rc
        self.err = err

    def run(self, args, **kwargs):
        self.calls.append(args)
        return self.rc, "", self.err


@pytest.mark.parametrize("name", ["ray", "_ray", "ray-svc", "r2"])
def test_good_names(name):
    assert su.name_problem(name) is None


@pytest.mark.parametrize("name", ["", "Ray", "2ray", "ray team", "ray;rm", "a" * 33])
def test_bad_names_are_refused_naming_the_value(name):
    assert repr(name) in su.name_problem(name)


def test_root_needs_no_popen_switch_and_nobody_does():
    root = su.lookup("root")
    assert root.is_root and root.popen_args() == {}
    nobody = su.lookup("nobody")
    assert nobody.popen_args() == {"user": nobody.uid, "group": nobody.gid, "extra_groups": nobody.groups}
    assert nobody.env()["HOME"] == nobody.home and nobody.env()["USER"] == "nobody"
    assert su.lookup("raygate-no-such") is None


def test_an_existing_account_is_not_created_again():
    runner = FakeRunner()
    assert su.ensure("nobody", runner, check_mode=False)[0] is False
    assert runner.calls == []


def test_a_missing_account_is_only_predicted_in_check_mode():
    runner = FakeRunner()
    assert su.ensure("raygate-no-such", runner, check_mode=True) == (True, None)
    assert runner.calls == []


def test_the_account_is_made_a_marked_system_account(monkeypatch, tmp_path):
    made = su.ServiceUser("ray", 990, 990, [], str(tmp_path / "home"), True)
    answers = [None, made]
    monkeypatch.setattr(su, "lookup", lambda name: answers.pop(0))
    runner = FakeRunner()
    assert su.ensure("ray", runner, check_mode=False, home=str(tmp_path / "home")) == (True, made)
    (args,) = runner.calls
    assert args[0] == "useradd" and args[-1] == "ray"
    assert "--system" in args and "--user-group" in args and "--create-home" in args
    assert args[args.index("--comment") + 1] == su.MARK
    assert args[args.index("--shell") + 1] in su.NOLOGIN


def test_a_failed_useradd_says_why(monkeypatch, tmp_path):
    monkeypatch.setattr(su, "lookup", lambda name: None)
    runner = FakeRunner(rc=9, err="useradd: group ray exists\n")
    with pytest.raises(su.CommandFailed, match="useradd ray failed .rc=9.: useradd: group ray exists"):
        su.ensure("ray", runner, check_mode=False, home=str(tmp_path / "home" / "ray"))


def test_only_an_account_raygate_made_is_removed(monkeypatch):
    runner = FakeRunner()
    removed, kept = su.remove("nobody", runner, check_mode=False)
    assert not removed and "not made by raygate" in kept and runner.calls == []
    monkeypatch.setattr(su, "lookup", lambda name: su.ServiceUser("ray", 990, 990, [], "/h", True))
    monkeypatch.setattr(su, "processes_of", lambda uid: [])
    assert su.remove("ray", runner, check_mode=True) == (True, None) and runner.calls == []
    assert su.remove("ray", runner, check_mode=False) == (True, None)
    assert runner.calls == [["userdel", "--remove", "ray"]]


def test_an_account_with_processes_is_kept(monkeypatch):
    monkeypatch.setattr(su, "lookup", lambda name: su.ServiceUser("ray", 990, 990, [], "/h", True))
    monkeypatch.setattr(su, "processes_of", lambda uid: [4242])
    runner = FakeRunner()
    removed, kept = su.remove("ray", runner, check_mode=False)
    assert not removed and "4242" in kept and runner.calls == []


def test_processes_of_finds_this_process():
    assert os.getpid() in su.processes_of(os.getuid())


@as_root
def test_own_tree_gives_a_root_tree_to_the_account_once(tmp_path):
    nobody = su.lookup("nobody")
    root = tmp_path / "ray"
    (root / "session_1" / "logs").mkdir(parents=True)
    (root / "session_1" / "logs" / "raylet.out").write_text("x")
    (root / "session_latest").symlink_to(root / "session_1")
    assert su.own_tree(str(root), nobody) is True
    for path in (root, root / "session_1" / "logs", root / "session_1" / "logs" / "raylet.out"):
        st = os.stat(path)
        assert (st.st_uid, st.st_gid) == (nobody.uid, nobody.gid), path
    assert os.lstat(root / "session_latest").st_uid == nobody.uid
    assert su.own_tree(str(root), nobody) is False
    fresh = tmp_path / "new" / "tmp"
    assert su.own_tree(str(fresh), nobody) is True and os.stat(fresh).st_uid == nobody.uid


@as_root
def test_a_command_runs_as_the_account_with_its_home(tmp_path):
    nobody = su.lookup("nobody")
    runner = CommandRunner(base_env={"PATH": os.environ["PATH"], "HOME": "/root"})
    rc, out, err = runner.run(["sh", "-c", "id -u; id -g; echo $HOME"], user=nobody, cwd="/")
    assert rc == 0, err
    assert out.split() == [str(nobody.uid), str(nobody.gid), nobody.home]
    log = tmp_path / "start.log"
    rc, out, err = runner.run(["id", "-u"], user=nobody, output_file=str(log), cwd="/")
    assert (rc, out.strip()) == (0, str(nobody.uid))
    # The caller opened the output file: it stays root's, as the state directory is.
    assert os.stat(log).st_uid == 0


def test_a_new_account_gets_its_supplementary_groups(monkeypatch, tmp_path):
    made = su.ServiceUser("ray", 990, 990, [44], str(tmp_path / "home"), True)
    answers = [None, made]
    monkeypatch.setattr(su, "lookup", lambda name: answers.pop(0))
    runner = FakeRunner()
    su.ensure("ray", runner, check_mode=False, home=str(tmp_path / "home"), groups=["video"])
    (args,) = runner.calls
    assert args[args.index("--groups") + 1] == "video"


def test_an_existing_account_gets_only_the_groups_it_lacks():
    runner = FakeRunner()
    # nobody is in its own group (nogroup) already; video is added, nogroup is not asked again.
    changed, account = su.ensure("nobody", runner, check_mode=False, groups=["nogroup", "video"])
    assert changed is True and account.name == "nobody"
    assert runner.calls == [["usermod", "--append", "--groups", "video", "nobody"]]
    runner = FakeRunner()
    assert su.ensure("nobody", runner, check_mode=False, groups=["nogroup"])[0] is False
    assert su.ensure("nobody", runner, check_mode=True, groups=["video"])[0] is True
    assert runner.calls == []


def test_a_group_the_node_lacks_fails_before_anything_runs():
    runner = FakeRunner()
    with pytest.raises(su.CommandFailed, match="no group raygate-no-such-group on this node"):
        su.ensure("raygate-no-such", runner, check_mode=False, groups=["video", "raygate-no-such-group"])
    assert runner.calls == []
    assert su.group_problem(["video"]) is None
    assert su.member_of(su.lookup("nobody")) == {"nogroup"}
