"""The join wait on a real cluster: progress lines while waiting, missing hosts named on timeout."""

import json
import os

from conftest import ROOT, VENV_BIN, needs_root, playbook, run

pytestmark = needs_root


def cluster_info(**args):
    cmd = [
        os.path.join(VENV_BIN, "ansible"),
        "-i",
        os.path.join(ROOT, "inventories", "sandbox"),
        "node1",
        "-m",
        "raygate.cluster.ray_cluster_info",
        "-a",
        json.dumps(dict(dashboard_url="http://198.18.0.11:8265", **args)),
    ]
    return run(cmd, timeout=300)


def test_wait_names_the_hosts_that_never_joined(sandbox3):
    rc, out = playbook("site.yml")
    assert rc == 0, out[-3000:]
    try:
        expected = [
            {"name": "node1", "ip": "198.18.0.11"},
            {"name": "node2", "ip": "198.18.0.12"},
            {"name": "node3", "ip": "198.18.0.13"},
            {"name": "ghost", "ip": "198.18.0.99"},
        ]
        rc, out = cluster_info(expected=expected, wait_nodes=4, wait_gpus=32, wait_timeout=6, wait_sleep=1)
        assert rc != 0
        assert "timed out after 6s: 3/4 nodes, 24/32 GPUs alive; never joined: ghost" in out
        assert "[node1] waiting for the cluster" in out  # progress, not a wall of retries
        assert "FAILED - RETRYING" not in out

        rc, out = cluster_info(expected=expected[:3], wait_nodes=3, wait_gpus=24, wait_timeout=60)
        assert rc == 0, out
        assert "alive_nodes: 3" in out and "missing: []" in out

        rc, out = cluster_info(auth_token_file="/nonexistent")
        assert rc != 0 and "token file /nonexistent is missing" in out
    finally:
        rc, out = playbook("teardown.yml")
        assert rc == 0, out[-3000:]
