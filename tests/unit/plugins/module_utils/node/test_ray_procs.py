import os

from ansible_collections.raygate.cluster.plugins.module_utils._runner import QUERY_TIMEOUT, CommandTimeout
from ansible_collections.raygate.cluster.plugins.module_utils.node import procs as ray_procs


def make_proc(root, pid, comm, argv, ppid=1):
    base = root / str(pid)
    base.mkdir()
    (base / "comm").write_text(comm + "\n")
    (base / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    (base / "stat").write_text("%d (%s) S %d 0 0" % (pid, comm, ppid))


def test_finds_ray_by_binary_script_title_and_session(tmp_path):
    make_proc(tmp_path, 10, "raylet", ["/opt/x/raylet", "--node_ip_address=198.18.0.11", "--node_manager_port=8076"])
    make_proc(tmp_path, 11, "python", ["python", "/v/lib/ray/dashboard/agent.py", "--x=1"])
    make_proc(tmp_path, 12, "ray::IDLE", ["ray::IDLE"])
    make_proc(tmp_path, 13, "python3", ["python3", "-u", "log_mon.py", "--session-dir=/tmp/ray/session_2026"])
    make_proc(tmp_path, 14, "sshd", ["sshd: root@pts/0"])
    make_proc(tmp_path, 15, "python3", ["python3", "app.py", "--logs=/tmp/raylogs"])
    (tmp_path / "self").mkdir()  # non-numeric entries are ignored
    found = {p["pid"] for p in ray_procs.ray_processes(proc_root=str(tmp_path))}
    assert found == {10, 11, 12, 13}


def test_custom_temp_dir_and_exclusion(tmp_path):
    make_proc(tmp_path, 20, "python3", ["python3", "x.py", "--session-dir=/data/ray/session_1"])
    assert ray_procs.ray_processes(proc_root=str(tmp_path)) == []
    found = ray_procs.ray_processes(proc_root=str(tmp_path), session_roots=("/data/ray",))
    assert [p["pid"] for p in found] == [20]
    assert ray_procs.ray_processes(proc_root=str(tmp_path), session_roots=("/data/ray",), exclude=(20,)) == []


def test_daemon_flags(tmp_path):
    make_proc(tmp_path, 10, "raylet", ["/opt/x/raylet", "--node_ip_address=198.18.0.11", "--node-manager-port=8076"])
    raylet = ray_procs.find_daemon(ray_procs.process_table(str(tmp_path)), "raylet")
    assert raylet["pid"] == 10
    assert raylet["flags"] == {"node_ip_address": "198.18.0.11", "node_manager_port": "8076"}
    assert ray_procs.find_daemon([], "raylet") is None


def test_real_proc_does_not_list_this_test_process():
    pids = {p["pid"] for p in ray_procs.ray_processes()}
    assert os.getpid() not in pids


def test_client_server_started_as_a_module_is_found(tmp_path):
    # The head's Ray client server: `python -m ray.util.client.server`, no session dir on its
    # command line. Missed, it keeps port 10001 after a stop.
    argv = ["/opt/raygate/v/bin/python", "-m", "ray.util.client.server", "--address=198.18.0.11:6379", "--port=10001"]
    make_proc(tmp_path, 30, "python", argv)
    make_proc(tmp_path, 31, "python", ["/usr/bin/python3", "-m", "http.server", "10001"])
    assert [p["pid"] for p in ray_procs.ray_processes(proc_root=str(tmp_path))] == [30]


class _Runner:
    """which() finds nvidia-smi; run() answers with ANSWER or raises it."""

    def __init__(self, answer):
        self.answer = answer
        self.timeouts = []

    def which(self, name):
        return "/usr/bin/nvidia-smi" if name == "nvidia-smi" else None

    def run(self, args, timeout=None):
        self.timeouts.append(timeout)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_gpu_processes_lists_what_nvidia_smi_names_within_its_bound():
    runner = _Runner((0, "4242, ray::Trainer\n\n", ""))
    warnings = []
    assert ray_procs.gpu_processes(runner, warnings.append) == ["4242, ray::Trainer"]
    assert runner.timeouts == [QUERY_TIMEOUT] and warnings == []


def test_gpu_processes_warns_and_goes_on_when_nvidia_smi_does_not_answer():
    hung = CommandTimeout("nvidia-smi did not finish within 30s and is still running after SIGKILL", 30, 7, True)
    warnings = []
    assert ray_procs.gpu_processes(_Runner(hung), warnings.append) == []
    assert len(warnings) == 1 and "GPU processes not checked" in warnings[0] and "30s" in warnings[0]


def test_started_at_is_boot_time_plus_the_start_in_ticks(tmp_path):
    (tmp_path / "stat").write_text("cpu  1 2 3\nbtime 1795000000\nprocesses 42\n")
    (tmp_path / "77").mkdir()
    fields = ["S"] + ["0"] * 18 + [str(os.sysconf("SC_CLK_TCK") * 30)] + ["0"] * 10
    (tmp_path / "77" / "stat").write_text("77 (ray let) " + " ".join(fields) + "\n")
    assert ray_procs.started_at(77, proc_root=str(tmp_path)) == 1795000030.0
    assert ray_procs.started_at(78, proc_root=str(tmp_path)) is None
