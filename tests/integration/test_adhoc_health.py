"""The documented ad-hoc uses of the health modules work on files, with no cluster:

    ansible localhost -m raygate.cluster.gpu_health -a capture_dir=DIR
    ansible localhost -m raygate.cluster.nccl_test -a log_path=FILE

The files come from the sandbox's simulated tools (the formats of the real ones), and from the
real outputs in ../shared/samples when that folder is present.
"""

import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT, VENV_BIN, run

SIM_DIR = os.path.join(ROOT, "tests", "sandbox", "sim")
SAMPLES = os.path.join(ROOT, "..", "shared", "samples")
HOSTS = "127.0.0.1 localhost\n198.18.0.11 node1\n198.18.0.12 node2\n"

needs_venv = pytest.mark.skipif(not os.path.exists(os.path.join(VENV_BIN, "ansible")), reason="needs the project venv")
needs_samples = pytest.mark.skipif(not os.path.isdir(SAMPLES), reason="../shared/samples is not present")


def adhoc(module, args):
    """Run one module ad hoc on localhost; returns its result as the minimal callback prints it."""
    rc, out = run(
        [os.path.join(VENV_BIN, "ansible"), "localhost", "-m", "raygate.cluster." + module, "-a", args],
        timeout=120,
        env={"ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.minimal", "ANSIBLE_CALLBACK_RESULT_FORMAT": "json"},
    )
    # minimal: "localhost | SUCCESS => {...}" (or FAILED!)
    result = json.loads(out[out.index("=> {") + 3 :])
    result["failed"] = "localhost | FAILED! =>" in out
    assert rc == (2 if result["failed"] else 0), out
    return result


def statuses(result):
    return {c["name"]: c["status"] for c in result["checks"]}


class Node:
    """A simulated node whose tools write their output into files, as an operator captures them."""

    def __init__(self, tmp_path, gpu):
        self.tmp = tmp_path
        (tmp_path / "hosts").write_text(HOSTS)
        (tmp_path / "scenarios").mkdir()
        (tmp_path / "scenario.json").write_text(json.dumps({"gpu": gpu}))
        self.root = tmp_path / "root"
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LC_ALL": "C",
            "RAYGATE_SIM_SCENARIO": str(tmp_path / "scenario.json"),
            "RAYGATE_SIM_SCENARIOS_DIR": str(tmp_path / "scenarios"),
            "RAYGATE_SIM_HOSTS_FILE": str(tmp_path / "hosts"),
            "RAYGATE_SIM_HOSTNAME": "node1",
            "RAYGATE_SIM_ROOT": str(self.root),
            "RAYGATE_SIM_KERN_LOG": str(tmp_path / "kern.log"),
        }
        self.sim("raygate_sim.py", "build", "--scenario", str(tmp_path / "scenario.json"), "--root", str(self.root))

    def sim(self, script, *args, rc=0):
        proc = subprocess.run(
            [sys.executable, "-B", os.path.join(SIM_DIR, script), *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=60,
            check=False,
        )
        assert proc.returncode == rc, proc.stdout + proc.stderr
        return proc.stdout

    def tool(self, name, *args, rc=0):
        script = "raygate_sim.py" if name in ("ibstat", "fi_info") else "gpu_sim.py"
        return self.sim(script, "tool", name, name, *args, rc=rc)

    def capture(self):
        """The files gpu_health's capture_dir documents, made with the simulated tools."""
        out = self.tmp / "capture"
        out.mkdir()
        (out / "nvidia-smi.xml").write_text(self.tool("nvidia-smi", "-q", "-x"))
        (out / "nvlink.txt").write_text(self.tool("nvidia-smi", "nvlink", "-s"))
        (out / "dcgmi-diag.json").write_text(self.tool("dcgmi", "diag", "-r", "1", "-j"))
        (out / "ibstat.txt").write_text(self.tool("ibstat"))
        (out / "kern.log").write_text((self.tmp / "kern.log").read_text())
        return out


@needs_venv
def test_gpu_health_judges_a_healthy_capture(tmp_path):
    result = adhoc("gpu_health", "capture_dir=%s" % Node(tmp_path, {"model": "H100"}).capture())
    assert result["healthy"] is True and result["source"] == "capture", result
    found = statuses(result)
    assert found["remapped_rows_pending"] == found["xid"] == found["nvlink"] == found["dcgm_diag"] == "pass"
    assert found["fabric_ports"] == "pass"
    assert found["gpudirect_rdma"] == "skip"  # not something a capture holds
    assert len(result["gpus"]) == 8


@needs_venv
def test_gpu_health_names_the_faults_of_a_capture(tmp_path):
    faults = [
        {"type": "remap_pending", "gpu": 5},
        {"type": "xid", "xid": 79, "gpu": 2},
        {"type": "nvlink_down", "gpu": 1},
    ]
    result = adhoc("gpu_health", "capture_dir=%s" % Node(tmp_path, {"model": "H100", "faults": faults}).capture())
    assert result["healthy"] is False
    failed = sorted(name for name, status in statuses(result).items() if status == "fail")
    assert failed == ["nvlink", "remapped_rows_pending", "xid"], result["reasons"]
    reasons = " ".join(result["reasons"])
    assert "GPU 5" in reasons and "Xid 79" in reasons


@needs_venv
def test_gpu_health_refuses_a_capture_dir_that_is_not_one(tmp_path):
    result = adhoc("gpu_health", "capture_dir=%s" % (tmp_path / "nope"))
    assert result["failed"] and "nope" in result["msg"]


@needs_venv
def test_nccl_test_judges_a_log_of_one_node(tmp_path):
    node = Node(tmp_path, {"model": "H100"})
    log = tmp_path / "single.log"
    log.write_text(
        node.sim("gpu_sim.py", "tool", "all_reduce_perf", "all_reduce_perf", "-b", "8", "-e", "16G", "-g", "8")
    )
    result = adhoc("nccl_test", "log_path=%s" % log)
    assert result["healthy"] is True and result["source"] == "log", result
    assert result["busbw"] >= 460


@needs_venv
def test_nccl_test_fails_a_two_node_log_that_fell_back_to_socket(tmp_path):
    node = Node(tmp_path, {"model": "H100", "faults": [{"type": "socket_fallback"}]})
    pair = ["-np", "16", "-H", "node1:8,node2:8", "--allow-run-as-root", "-x", "NCCL_DEBUG=INFO"]
    out = node.sim(
        "gpu_sim.py", "tool", "mpirun", "mpirun", *pair, "all_reduce_perf", "-b", "8", "-e", "16G", "-g", "1"
    )
    log = tmp_path / "pair.log"
    log.write_text(out)
    result = adhoc("nccl_test", "log_path=%s" % log)
    assert result["healthy"] is False
    assert statuses(result)["nccl_transport"] == "fail"
    assert "Socket" in " ".join(result["reasons"] if "reasons" in result else [c["detail"] for c in result["checks"]])


@needs_venv
@needs_samples
def test_nccl_test_on_real_logs():
    fallback = os.path.join(SAMPLES, "nccltests_allreduce_2pod_eks_socket_fallback_excerpt.txt")
    gdr = os.path.join(SAMPLES, "nccltests_allreduce_2node_p4d_efa_gdrdma_with_nccl_info.txt")
    assert statuses(adhoc("nccl_test", "log_path=%s" % fallback))["nccl_transport"] == "fail"
    assert statuses(adhoc("nccl_test", "log_path=%s" % gdr))["nccl_transport"] == "pass"
