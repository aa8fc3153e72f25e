"""The documented example inventories parse and pass raygate's controller-side validation.

No host is contacted (validate_only.yml runs on localhost only), so this runs with the units, on
the ansible-core of the venv that runs pytest (make units: .venv; make compat: each older minor).
"""

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
EXAMPLES = os.path.join(ROOT, "inventories", "example")
# The ansible-core beside this interpreter: the venv that runs the tests.
BIN = os.path.dirname(sys.executable)

needs_venv = pytest.mark.skipif(
    not os.path.exists(os.path.join(BIN, "ansible-playbook")), reason="needs ansible-core in the venv that runs pytest"
)


def run(args):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    env["ANSIBLE_COLLECTIONS_PATH"] = os.path.join(ROOT, ".build", "collections")
    env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
    proc = subprocess.run(
        args, capture_output=True, text=True, timeout=300, env=env, cwd=ROOT, stdin=subprocess.DEVNULL, check=False
    )
    return proc.returncode, proc.stdout + proc.stderr


@needs_venv
@pytest.mark.parametrize("name, fabric", [("p5-efa", "efa"), ("h100-ib", "auto")])
def test_example_inventory_validates(name, fabric, tmp_path):
    inventory = os.path.join(EXAMPLES, name)
    rc, out = run([os.path.join(BIN, "ansible-inventory"), "-i", inventory, "--list"])
    assert rc == 0, out
    hostvars = json.loads(out[out.index("{") :])["_meta"]["hostvars"]
    assert len(hostvars) == 4
    assert {v["raygate_nccl_fabric"] for v in hostvars.values()} == {fabric}
    rc, out = run(
        [
            os.path.join(BIN, "ansible-playbook"),
            "-i",
            inventory,
            os.path.join(HERE, "validate_only.yml"),
            "-e",
            "validate_out=%s" % (tmp_path / "out.json"),
        ]
    )
    assert rc == 0, out
    summary = json.loads((tmp_path / "out.json").read_text())
    assert len(summary["nodes"]) == 4 and summary["gpus"] == 32
