"""The documented example inventories parse and pass raygate's controller-side validation."""

import json
import os

import pytest
from conftest import ROOT, VENV_BIN, run

EXAMPLES = os.path.join(ROOT, "inventories", "example")

needs_venv = pytest.mark.skipif(
    not os.path.exists(os.path.join(VENV_BIN, "ansible-playbook")), reason="needs the project venv"
)


@needs_venv
@pytest.mark.parametrize("name, fabric", [("p5-efa", "efa"), ("h100-ib", "auto")])
def test_example_inventory_validates(name, fabric, tmp_path):
    inventory = os.path.join(EXAMPLES, name)
    rc, out = run([os.path.join(VENV_BIN, "ansible-inventory"), "-i", inventory, "--list"])
    assert rc == 0, out
    hostvars = json.loads(out[out.index("{") :])["_meta"]["hostvars"]
    assert len(hostvars) == 4
    assert {v["raygate_nccl_fabric"] for v in hostvars.values()} == {fabric}
    rc, out = run(
        [
            os.path.join(VENV_BIN, "ansible-playbook"),
            "-i",
            inventory,
            os.path.join(ROOT, "tests", "integration", "validate_only.yml"),
            "-e",
            "validate_out=%s" % (tmp_path / "out.json"),
        ]
    )
    assert rc == 0, out
    summary = json.loads((tmp_path / "out.json").read_text())
    assert len(summary["nodes"]) == 4 and summary["gpus"] == 32
