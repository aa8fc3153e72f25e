"""A node without a working nvidia-smi is reported once, by its root cause (issue 29, item 5).

gpu_health fails one check, gpu_count, whose detail is the root cause followed by the checks it
prevented; those checks skip, pointing at gpu_count. The report's message, the play summary,
report.md and the run's error then say "nvidia-smi not found" once per node, not once per check.
"""

from harness import run_case

from ansible_collections.raygate.cluster.plugins.module_utils.checks import result as check_result
from ansible_collections.raygate.cluster.plugins.module_utils.gate import gpu_checks as gc
from ansible_collections.raygate.cluster.plugins.modules import gpu_health
from ansible_collections.raygate.cluster.plugins.plugin_utils.report import decision, markdown, summary

ROOT_CAUSE = "nvidia-smi not found: no NVIDIA driver tools on this node"
JOURNAL = {
    "cmd": ["/usr/bin/journalctl", "-k", "-b", "--no-pager", "-o", "short-monotonic"],
    "out": "[    0.000000] node3 kernel: Linux version 6.1.0-18-amd64\n",
}
# Every nvidia-smi check but gpu_count, then dcgm_diag (dcgmi is not run without nvidia-smi).
PREVENTED = list(gc.NVSMI_CHECKS[1:]) + ["dcgm_diag"]


def run_without_nvidia_smi(tmp_path, monkeypatch, **args):
    case = {
        "which": {"journalctl": "/usr/bin/journalctl", "dcgmi": "/usr/bin/dcgmi"},
        "args": dict({"fabric": "none", "dcgm_diag_level": 1, "expected_gpus": 8}, **args),
        "commands": [JOURNAL],
    }
    return run_case(case, gpu_health.main, tmp_path, monkeypatch)


def test_one_failing_check_names_the_root_cause_and_what_it_prevented(tmp_path, monkeypatch):
    result = run_without_nvidia_smi(tmp_path, monkeypatch)
    assert [c["name"] for c in result["checks"]] == list(gc.CHECK_NAMES)
    failing = [c for c in result["checks"] if c["status"] == "fail"]
    assert [c["name"] for c in failing] == ["gpu_count"]
    detail = failing[0]["detail"]
    assert detail == "%s; not run: %s (16 checks)" % (ROOT_CAUSE, ", ".join(PREVENTED))
    # The remedy is the driver's, not gpu_count's "find the missing GPU".
    assert "NVIDIA driver" in failing[0]["action"] and failing[0]["severity"] == "do-not-allocate"
    by_name = {c["name"]: c for c in result["checks"]}
    for name in gc.NVSMI_CHECKS[1:]:
        assert by_name[name]["status"] == "skip" and by_name[name]["detail"] == "needs nvidia-smi (see gpu_count)"
    assert by_name["dcgm_diag"] == {
        "name": "dcgm_diag",
        "status": "skip",
        "detail": "not run: needs nvidia-smi (see gpu_count)",
        "value": None,
        "threshold": None,
    }
    assert by_name["xid"]["status"] == "pass"
    assert result["verdict"] == "fail" and result["healthy"] is False
    assert result["reasons"] == ["gpu_count: " + detail]
    assert sum(c["detail"].count("nvidia-smi not found") for c in result["checks"]) == 1


def test_checks_not_asked_for_are_not_listed_as_prevented(tmp_path, monkeypatch):
    result = run_without_nvidia_smi(
        tmp_path, monkeypatch, dcgm_diag_level=0, check_nvlink=False, check_fabric_manager="no"
    )
    by_name = {c["name"]: c for c in result["checks"]}
    listed = [n for n in gc.NVSMI_CHECKS[1:] if n not in ("nvlink", "fabric_manager")]
    assert by_name["gpu_count"]["detail"] == "%s; not run: %s (13 checks)" % (ROOT_CAUSE, ", ".join(listed))
    assert by_name["nvlink"]["detail"] == by_name["fabric_manager"]["detail"] == "not checked"
    assert by_name["dcgm_diag"]["detail"] == "not run (dcgm_diag_level=0)"
    assert [c["name"] for c in result["checks"] if c["status"] == "fail"] == ["gpu_count"]


def test_a_failing_nvidia_smi_is_the_root_cause_too():
    evidence = {"nvsmi": None, "nvsmi_error": "nvidia-smi -q -x failed (rc 9): no driver", "dcgm_level": 0}
    results = gc.evaluate(evidence, {})
    failing = [r for r in results if r["status"] == "fail"]
    assert len(failing) == 1 and failing[0]["name"] == "gpu_count"
    assert failing[0]["detail"].startswith("nvidia-smi -q -x failed (rc 9): no driver; not run: driver_version, ")
    assert failing[0]["detail"].endswith("fabric_manager (15 checks)")


def test_not_captured_still_skips_every_gpu_check_without_a_failure():
    results = gc.evaluate({"dcgm_level": None}, {"check_pcie": False})
    by_name = {r["name"]: r for r in results}
    assert by_name["gpu_count"] == check_result("gpu_count", "skip", "nvidia-smi output not captured")
    assert by_name["pcie_link"]["detail"] == "not checked"
    assert gc.summarize(results)["verdict"] == "pass"


def _report(tmp_path, monkeypatch, driverless_role):
    checks = run_without_nvidia_smi(tmp_path, monkeypatch)["checks"]
    good = [dict(check_result("gpu_count", "pass", "8 GPUs visible", 8, 8), source="gpu_health")]
    head, worker = ("gpu1", "gpu2") if driverless_role == "head" else ("gpu2", "gpu1")
    nodes = [
        {"host": head, "role": "head", "checks": good},
        {"host": worker, "role": "worker", "checks": good},
    ]
    bad = nodes[0] if driverless_role == "head" else nodes[1]
    bad["host"] = "nodriver"
    bad["checks"] = [dict(c, source="gpu_health") for c in checks]
    return decision.build_report(nodes, checked_at=1767323045, breaker_threshold=0)


def test_the_summary_and_report_md_say_the_root_cause_once_for_a_worker(tmp_path, monkeypatch):
    report = _report(tmp_path, monkeypatch, "worker")
    assert report["unhealthy"]["nodriver"] == ["gpu_count: " + report["nodes"][1]["checks"][0]["detail"]]
    lines = summary.render_summary(report)
    assert sum(line.count("nvidia-smi not found") for line in lines) == 1
    row = [line for line in lines if line.startswith("nodriver")][0]
    assert row.count(ROOT_CAUSE) == 1 and "(16 checks)" in row
    md = markdown.render_markdown(report)
    nodes_table, section = md.split("\n## nodriver ")
    # Once in the table of nodes (its reasons), once in its own table of checks (gpu_count's detail).
    assert nodes_table.count("nvidia-smi not found") == 1
    assert section.count("nvidia-smi not found") == 1
    assert section.count("needs nvidia-smi (see gpu_count)") == 16


def test_the_runs_error_says_the_root_cause_once_for_the_head(tmp_path, monkeypatch):
    report = _report(tmp_path, monkeypatch, "head")
    assert report["ok"] is False
    assert report["message"].startswith("health gate failed: head nodriver is unhealthy (gpu_count: " + ROOT_CAUSE)
    assert report["message"].count("nvidia-smi not found") == 1
    row = [line for line in summary.render_summary(report) if line.startswith("nodriver")][0]
    assert row.count("nvidia-smi not found") == 1
