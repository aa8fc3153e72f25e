"""A GPU node without any RDMA fabric passes the health gate when GPUDirect RDMA is not required.

NCCL on such a node reports "Using network Socket" even for a single-node run that stays on
NVLink; the gate must take the fabric gpu_health found into account instead of failing it.
"""

import glob
import json
import os

from conftest import SANDBOX, needs_root, playbook, run


@needs_root
def test_gpu_node_without_rdma_passes_the_gate(sandbox3, tmp_path):
    scenario = tmp_path / "no-rdma.json"
    scenario.write_text(json.dumps({"fabric": {"type": "none"}, "gpu": {"model": "H100"}}))
    default = tmp_path / "default.json"
    default.write_text("{}")
    rc, out = run([SANDBOX, "scenario", "1", str(scenario)])
    assert rc == 0, out
    try:
        reports = tmp_path / "health"
        extra = {"raygate_nccl_require_gdr": False, "raygate_health_report_dir": str(reports)}
        rc, out = playbook("health.yml", "--limit", "node1", "-e", json.dumps(extra))
        assert rc == 0, out
        (path,) = glob.glob(os.path.join(str(reports), "*", "report.json"))
        with open(path, encoding="utf-8") as handle:
            report = json.load(handle)
        assert report["healthy"] == ["node1"], report["message"]
        (node,) = report["nodes"]
        checks = {(c["source"], c["name"]): c for c in node["checks"]}
        transport = checks[("nccl_test", "nccl_transport")]
        assert transport["status"] == "pass" and "Socket" in transport["detail"], transport
        assert checks[("gpu_health", "gpudirect_rdma")]["status"] == "skip"
        assert checks[("gpu_health", "gpu_count")]["status"] == "pass"
    finally:
        rc, out = run([SANDBOX, "scenario", "1", str(default)])
        assert rc == 0, out
