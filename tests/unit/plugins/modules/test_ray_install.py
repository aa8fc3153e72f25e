import os

import pytest
from harness import load_cases, run_case

from ansible_collections.raygate.cluster.plugins.modules import ray_install

CASES = load_cases(os.path.join(os.path.dirname(__file__), "ray_install.yml"))


@pytest.mark.parametrize("case", CASES)
def test_ray_install(case, tmp_path, monkeypatch):
    run_case(case, ray_install.main, tmp_path, monkeypatch)
