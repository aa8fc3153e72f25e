"""What the sandbox tests share: where sandbox.sh and its state live, the skip marker, and
the one way they run sandbox.sh (failing the test with its output)."""

import os
import shutil
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SANDBOX = os.path.join(HERE, "sandbox.sh")
STATE = os.environ.get("RAYGATE_SANDBOX_DIR", "/srv/raygate/sandbox")

needs_sandbox = pytest.mark.skipif(
    os.geteuid() != 0 or not all(shutil.which(tool) for tool in ("ip", "unshare", "nsenter", "tini")),
    reason="the sandbox needs root, iproute2, util-linux and tini",
)


def sandbox(*args, check=True, timeout=120):
    result = subprocess.run(
        [SANDBOX, *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False
    )
    if check and result.returncode != 0:
        pytest.fail(f"sandbox.sh {' '.join(args)} -> rc {result.returncode}\n{result.stdout}\n{result.stderr}")
    return result
