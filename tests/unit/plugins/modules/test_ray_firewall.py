import os

import pytest
import yaml
from harness import load_cases, run_case

from ansible_collections.raygate.cluster.plugins.modules import ray_firewall

PATH = os.path.join(os.path.dirname(__file__), "ray_firewall.yml")
CASES = load_cases(PATH)
with open(PATH) as fh:
    BY_ID = {case["id"]: case for case in yaml.safe_load(fh)}


@pytest.mark.parametrize("case", CASES)
def test_ray_firewall(case, tmp_path, monkeypatch):
    # `after`: the state a previous run left (files on this node) comes from really running that case first.
    if "after" in case:
        run_case(BY_ID[case["after"]], ray_firewall.main, tmp_path, monkeypatch)
    run_case(case, ray_firewall.main, tmp_path, monkeypatch)
