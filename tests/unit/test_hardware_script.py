"""tests/hardware/run.sh, the hardware check (issue 29), off a GPU node: it must say there is nothing
to check and stop at once, with status 0 and nothing written, so that it is safe to run anywhere.

Its real work needs a GPU node (docs/HARDWARE.md); here only its behaviour without one and its syntax.
"""

import os
import shutil
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "tests", "hardware", "run.sh")
NO_GPU = "no nvidia-smi on this machine: nothing to check (run this on a GPU node)"


def bash():
    found = shutil.which("bash")
    assert found, "bash is needed to run tests/hardware/run.sh"
    return found


def run_without_gpu(tmp_path, *args):
    # PATH is an empty folder: no nvidia-smi, even on a GPU node; the script must need nothing from
    # PATH before it looks for one. Its output would go to HARDWARE_OUT and ./artifacts.
    empty = tmp_path / "bin"
    empty.mkdir(exist_ok=True)
    env = {"PATH": str(empty), "HOME": str(tmp_path), "HARDWARE_OUT": str(tmp_path / "out")}
    return subprocess.run(
        [bash(), SCRIPT, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_without_nvidia_smi_it_says_so_and_exits_0_having_run_nothing(tmp_path):
    proc = run_without_gpu(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == NO_GPU
    assert proc.stderr == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin"], "it wrote something"


def test_options_are_read_before_the_check_and_a_bad_one_is_refused(tmp_path):
    proc = run_without_gpu(tmp_path, "--nccl-tests-src", "/nonexistent.tar.gz", "--build-dir", str(tmp_path / "b"))
    assert (proc.returncode, proc.stdout.strip()) == (0, NO_GPU)
    proc = run_without_gpu(tmp_path, "--no-such-option")
    assert proc.returncode == 2
    assert "unknown option --no-such-option" in proc.stderr
    proc = run_without_gpu(tmp_path, "--help")
    assert proc.returncode == 0
    assert "NCCL_TESTS_SRC" in proc.stdout


def test_bash_accepts_the_script():
    proc = subprocess.run([bash(), "-n", SCRIPT], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr


def test_the_script_is_executable_and_not_part_of_make_test():
    assert os.access(SCRIPT, os.X_OK)
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as fh:
        makefile = fh.read()
    assert "tests/hardware/run.sh" in makefile
    test_line = next(line for line in makefile.splitlines() if line.startswith("test:"))
    assert "hardware" not in test_line
