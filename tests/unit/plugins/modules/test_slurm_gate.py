"""slurm_gate: the scontrol commands it runs and what it returns, on the sandbox Slurm's real output."""

import os
import sys

import pytest
from harness import load_cases, run_case

from ansible_collections.raygate.cluster.plugins.modules import slurm_gate

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "module_utils", "gate"))
from test_slurm import SHOW_NODE  # noqa: E402

CASES = load_cases(os.path.join(os.path.dirname(__file__), "slurm_gate.yml"))
NAMES = {"show_node": SHOW_NODE, "show_node_drained": SHOW_NODE.replace("State=IDLE ", "State=IDLE+DRAIN ", 1)}


@pytest.mark.parametrize("case", CASES)
def test_slurm_gate(case, tmp_path, monkeypatch):
    case = dict(case, names=dict(case.get("names", {}), **NAMES))
    run_case(case, slurm_gate.main, tmp_path, monkeypatch)
