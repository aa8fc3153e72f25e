"""The container of a Ray node (runtime: container): its `run`, its checks before a start, its unit."""

import json

import pytest

from ansible_collections.raygate.cluster.plugins.module_utils.node import container as ct
from ansible_collections.raygate.cluster.plugins.module_utils.node.gcs_store import REDIS_PASSWORD_ARG


class Failed(Exception):
    pass


class User:
    uid, gid, groups, is_root = 990, 990, [44], False


class RunAs:
    def user(self):
        return User()


class Gcs:
    def __init__(self, password=False):
        self.password = password

    def unit_env_files(self):
        return ["/etc/raygate/gcs.secret"] if self.password else []

    def on_head(self):
        return False


class Runner:
    def __init__(self, found=("podman",), answers=None):
        self.found, self.answers, self.calls = found, answers or {}, []

    def which(self, name):
        return "/usr/bin/" + name if name in self.found else None


class Node:
    def __init__(self, runner=None, password=False, **params):
        self.p = dict(
            runtime="container", engine="podman", image="r.example/ray@sha256:" + "a" * 64,
            container_name="raygate-ray",
            gpu_devices=["nvidia.com/gpu=all"], container_ulimits=["memlock=-1:-1"], container_run_args=[],
            container_ipc="host", config_dir="/etc/raygate", user="ray", role="worker", stop_grace=10,
            object_store_memory=None, gcs_ft="none", container_mounts=[], node_ip="node2",
        )  # fmt: skip
        self.p.update(params)
        self.runner = runner or Runner()
        self.session_roots = ("/tmp/ray",)
        self.run_as = RunAs()
        self.gcs = Gcs(password)

    def where(self):
        return "node2"

    def fail(self, msg, **kwargs):
        raise Failed(msg)

    def run(self, args, **kwargs):
        self.runner.calls.append(args)
        for key, answer in self.runner.answers.items():
            if key in " ".join(args):
                return answer
        return 0, "", ""


def test_the_run_is_ray_start_on_the_host_network_as_the_service_user():
    box = ct.Container(Node())
    args = box.run_args(["/ignored/ray", "start", "--address=10.0.0.1:6379", "--node-ip-address=10.0.0.2"], True, "h1")
    cut = args.index("r.example/ray@sha256:" + "a" * 64)
    opts, command = args[:cut], args[cut + 1 :]
    assert command == ["ray", "start", "--address=10.0.0.1:6379", "--node-ip-address=10.0.0.2", "--block"]
    assert opts[:6] == ["run", "--name", "raygate-ray", "--replace", "--network", "host"]
    text = " ".join(opts)
    assert "--ipc host" in text and "--pull never" in text and "--restart always" in text and "--detach" in text
    assert "--user 990:990" in text and "--group-add=44" in text
    assert "--env-file /etc/raygate/ray-container.env" in text
    assert "--volume /etc/raygate:/etc/raygate:ro" in text and "--volume /tmp/ray:/tmp/ray:rw" in text
    assert "--device nvidia.com/gpu=all" in text and "--ulimit memlock=-1:-1" in text
    assert "--label io.raygate.config=h1" in text


def test_under_systemd_the_container_runs_in_the_foreground_and_is_removed_on_exit():
    args = ct.Container(Node()).run_args(["ray", "start"], False, "h1")
    assert "--rm" in args and "--detach" not in args and "--restart" not in args


def test_a_private_ipc_namespace_gets_shm_from_the_object_store():
    args = ct.Container(Node(container_ipc="private", object_store_memory=1000 << 20)).run_args(
        ["ray", "start"], 1, "h"
    )
    assert "--ipc" not in args
    assert args[args.index("--shm-size") + 1] == "%db" % int((1000 << 20) * 1.1)


def test_the_redis_password_never_appears_on_the_command_line():
    box = ct.Container(Node(password=True))
    args = box.run_args(["ray", "start", "--head", REDIS_PASSWORD_ARG], True, "h1")
    assert "--env-file" in args and "/etc/raygate/gcs.secret" in args
    tail = args[args.index(box.p["image"]) + 1 :]
    assert tail[:2] == ["sh", "-c"] and "$RAYGATE_REDIS_PASSWORD" in tail[2]
    assert REDIS_PASSWORD_ARG not in tail and tail[-1] == "--block"


def test_the_env_file_is_unquoted_and_refuses_a_line_break():
    text = ct.engine_env_text({"NCCL_SOCKET_IFNAME": "^lo,docker", "A": "x y"})
    assert "NCCL_SOCKET_IFNAME=^lo,docker\n" in text and "A=x y\n" in text
    with pytest.raises(ValueError, match="line break"):
        ct.engine_env_text({"B": "one\ntwo"})


def _spec(tmp_path, name, version="0.5.0", devices=("all",)):
    body = "cdiVersion: %s\nkind: nvidia.com/gpu\ndevices:\n" % version
    body += "".join("  - name: %s\n    containerEdits: {}\n" % d for d in devices)
    (tmp_path / name).write_text(body)


def test_cdi_specs_are_read_as_text(tmp_path):
    _spec(tmp_path, "a.yaml", devices=("0", "all"))
    found = ct.cdi_specs([str(tmp_path), str(tmp_path / "missing")])
    assert sorted(found) == ["nvidia.com/gpu=0", "nvidia.com/gpu=all"]
    assert found["nvidia.com/gpu=all"] == [(str(tmp_path / "a.yaml"), "0.5.0")]


def _check(monkeypatch, tmp_path, node, check_mode=False):
    monkeypatch.setattr(ct, "CDI_DIRS", (str(tmp_path),))
    ct.Container(node).check(check_mode)


def test_no_cdi_spec_and_no_nvidia_ctk_is_refused_naming_both(monkeypatch, tmp_path):
    with pytest.raises(Failed) as err:
        _check(monkeypatch, tmp_path, Node(), check_mode=True)
    assert "no GPU device mapping is possible on node2" in str(err.value)
    assert "nvidia-ctk" in str(err.value) and "nvidia.com/gpu=all" in str(err.value)


def test_nvidia_ctk_writes_the_spec_when_the_site_has_none(monkeypatch, tmp_path):
    runner = Runner(found=("podman", "nvidia-ctk"))
    node = Node(runner)
    monkeypatch.setattr(ct, "GENERATED_CDI_SPEC", str(tmp_path / "raygate-nvidia.yaml"))

    def generate(args, **kwargs):
        runner.calls.append(args)
        if "cdi" in args:
            _spec(tmp_path, "raygate-nvidia.yaml")
        if "version" in args:
            return 0, "4.3.1\n", ""
        return 0, "", ""

    node.run = generate
    _check(monkeypatch, tmp_path, node)
    assert ["/usr/bin/nvidia-ctk", "cdi", "generate", "--output=%s" % ct.GENERATED_CDI_SPEC] in runner.calls


def test_a_device_in_two_specs_is_refused(monkeypatch, tmp_path):
    _spec(tmp_path, "a.yaml")
    _spec(tmp_path, "b.yaml")
    with pytest.raises(Failed, match="defined by 2 specs"):
        _check(monkeypatch, tmp_path, Node(), check_mode=True)


def test_a_spec_newer_than_podman_43_reads_is_refused(monkeypatch, tmp_path):
    _spec(tmp_path, "a.yaml", version="0.7.0")
    node = Node(Runner(answers={"version": (0, "4.3.1\n", "")}))
    with pytest.raises(Failed, match="cdiVersion 0.7.0, which this Podman"):
        _check(monkeypatch, tmp_path, node, check_mode=True)
    node = Node(Runner(answers={"version": (0, "5.4.2\n", "")}))
    _check(monkeypatch, tmp_path, node, check_mode=True)


def test_root_and_a_missing_engine_are_refused(monkeypatch, tmp_path):
    with pytest.raises(Failed, match="uid 0 in the container"):
        _check(monkeypatch, tmp_path, Node(user="root"), check_mode=True)
    _spec(tmp_path, "a.yaml")
    with pytest.raises(Failed, match="container engine podman is not installed on node2"):
        _check(monkeypatch, tmp_path, Node(Runner(found=())))
    # In check mode (the role's preflight) the engine may still come: only the GPUs are judged.
    _check(monkeypatch, tmp_path, Node(Runner(found=())), check_mode=True)
    (tmp_path / "a.yaml").unlink()
    with pytest.raises(Failed, match="no GPU device mapping"):
        _check(monkeypatch, tmp_path, Node(Runner(found=())), check_mode=True)


def test_outside_check_mode_the_image_must_be_there(monkeypatch, tmp_path):
    _spec(tmp_path, "a.yaml")
    node = Node(Runner(answers={"image exists": (1, "", ""), "version": (0, "4.3.1", "")}))
    with pytest.raises(Failed, match="is not in podman's storage on node2"):
        _check(monkeypatch, tmp_path, node)


def test_a_node_without_gpus_needs_no_spec(monkeypatch, tmp_path):
    _check(monkeypatch, tmp_path, Node(gpu_devices=[]), check_mode=True)


def test_stop_stops_then_removes_and_does_nothing_without_a_container():
    inspect = (0, json.dumps([{"State": {"Running": True}}]), "")
    runner = Runner(answers={"container inspect": inspect})
    assert ct.Container(Node(runner)).stop()
    verbs = [call[1] for call in runner.calls]
    assert verbs == ["container", "stop", "rm"]
    runner = Runner(answers={"container inspect": (125, "", "no such container")})
    assert not ct.Container(Node(runner)).stop()
    assert [call[1] for call in runner.calls] == ["container"]


def test_without_an_engine_there_is_no_container_to_see():
    assert ct.Container(Node(Runner(found=()))).inspect() == {}


def test_the_unit_runs_the_container_in_the_foreground_and_stops_it_through_the_engine():
    text = ct.unit_text(ct.Container(Node()), ["ray", "start"], "abc123")
    assert "# raygate-config-hash: abc123" in text
    assert "ExecStart=/usr/bin/podman run --name raygate-ray --replace" in text and " --rm " in text
    assert "ExecStop=/usr/bin/podman stop --time 30 raygate-ray" in text
    assert "Restart=always" in text and "SuccessExitStatus=1" in text
    assert "--detach" not in text


def test_cli_runs_ray_commands_in_the_container_or_as_given():
    assert ct.Container(Node()).cli(["ray", "drain-node"]) == [
        "/usr/bin/podman",
        "exec",
        "raygate-ray",
        "ray",
        "drain-node",
    ]
    assert ct.Container(Node(runtime="venv")).cli(["/v/bin/ray", "x"]) == ["/v/bin/ray", "x"]


def test_another_image_than_the_one_running_restarts_the_node():
    box = ct.Container(Node())
    assert box.image_changed({"image": box.p["image"]}) is None
    assert box.image_changed({}) is None  # started before raygate recorded images: judged by the hash
    said = box.image_changed({"image": "r.example/ray@sha256:" + "b" * 64})
    assert said.startswith("this node runs the image r.example/ray@sha256:bbbb") and box.p["image"] in said
    assert ct.Container(Node(runtime="venv")).image_changed({"image": "x"}) is None


def test_a_spec_every_podman_reads_asks_the_engine_nothing(monkeypatch, tmp_path):
    _spec(tmp_path, "a.yaml", version="0.5.0")
    runner = Runner(answers={"version": (0, "4.3.1\n", "")})
    _check(monkeypatch, tmp_path, Node(runner), check_mode=True)
    assert not [call for call in runner.calls if "version" in call]
