"""bench/fault_mix.py: where the faults go and how a run over them is judged (no sandbox)."""

import copy
import os
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import fault_mix  # noqa: E402


def test_thirty_nodes_get_one_of_each_kind_none_on_the_head_and_no_two_side_by_side():
    mix = fault_mix.assign(30, 7)
    assert sorted(mix.values()) == sorted(fault_mix.KINDS)
    indices = sorted(mix)
    assert indices[0] >= 2 and indices[-1] <= 30
    assert all(b - a > 1 for a, b in zip(indices, indices[1:])), indices


def test_five_percent_of_a_thousand_cycles_through_the_kinds():
    mix = fault_mix.assign(1000, 50)
    assert len(mix) == 50 and max(mix) <= 1000 and min(mix) >= 2
    counts = {kind: list(mix.values()).count(kind) for kind in fault_mix.KINDS}
    assert set(counts.values()) <= {7, 8}, counts
    assert fault_mix.assign(10, 0) == {}
    with pytest.raises(ValueError, match="head"):
        fault_mix.assign(5, 5)


def _entry(host, status="fail", checks=()):
    return {"host": host, "status": status, "checks": [dict(c) for c in checks]}


def _good_run(mix, n):
    """The report, healthy_hosts.txt and run summary of a run that got everything right."""
    reasons = {
        "dead": ("unreachable", [{"name": "reachable", "status": "fail", "detail": "ssh: refused"}]),
        "dark": ("unreachable", [{"name": "reachable", "status": "fail", "detail": "ssh: timeout"}]),
        "hung": ("fail", [{"name": "gpu_count", "status": "fail",
                           "detail": "nvidia-smi -q -x did not answer within 10s (query_timeout) and did not end"}]),
        "xid": ("fail", [{"name": "xid", "status": "fail", "detail": "Xid 79 on GPU 3"}]),
        "uplink": ("fail", [{"name": "nccl_pair_busbw", "status": "fail", "detail": "180 GB/s"}]),
    }  # fmt: skip
    nodes, unhealthy, out = [], {}, {}
    for i in range(1, n + 1):
        host = "node%d" % i
        kind = mix.get(i)
        if kind in reasons:
            status, checks = reasons[kind]
            nodes.append(_entry(host, status, checks))
            unhealthy[host] = kind
            out[host] = {"status": "unreachable" if status == "unreachable" else "unhealthy", "error": kind}
        else:
            nodes.append(_entry(host, "ok", [{"name": "gpu_count", "status": "pass"}]))
    healthy = ["node%d" % i for i in range(1, n + 1) if "node%d" % i not in unhealthy]
    report = {"breaker_tripped": False, "nodes": nodes, "unhealthy": unhealthy}
    return report, healthy, {"result": "degraded", "out": out}


MIX = fault_mix.assign(30, 7)
BY_KIND = {kind: i for i, kind in MIX.items()}


def test_a_run_that_got_everything_right_has_no_problem():
    report, healthy, summary = _good_run(MIX, 30)
    assert fault_mix.judge(MIX, 30, report, healthy, summary, 10) == []


def _spoil(kind):
    report, healthy, summary = _good_run(MIX, 30)
    host = "node%d" % BY_KIND.get(kind, 1)
    entry = [e for e in report["nodes"] if e["host"] == host][0]
    if kind == "breaker":
        report["breaker_tripped"] = True
    elif kind == "dark":
        entry.update(status="fail", checks=[{"name": "gpu_count", "status": "fail", "detail": "?"}])
    elif kind == "hung":
        entry["checks"][0]["detail"] = "nvidia-smi failed"
    elif kind == "xid":
        entry["checks"][0]["detail"] = "Xid 13"
    elif kind == "uplink":
        entry["checks"] = [{"name": "fleet_drift", "status": "warn", "detail": ""}]
    elif kind == "slow":
        healthy.remove(host)
    elif kind == "summary":
        del summary["out"]["node%d" % BY_KIND["xid"]]
    return report, healthy, summary


@pytest.mark.parametrize(
    ("kind", "words"),
    [
        ("breaker", "the breaker tripped"),
        ("dark", "(dark): not reported unreachable"),
        ("hung", "(hung): gpu_count does not say"),
        ("xid", "(xid): no failing xid check naming 79"),
        ("uplink", "(uplink): no failing nccl_pair check"),
        ("slow", "healthy_hosts.txt lacks ['node%d']" % BY_KIND["slow"]),
        ("summary", "(xid): not out in the run summary"),
    ],
)
def test_each_requirement_missed_is_said(kind, words):
    report, healthy, summary = _spoil(kind)
    problems = fault_mix.judge(MIX, 30, copy.deepcopy(report), healthy, summary, 10)
    assert any(words in p for p in problems), problems


class FakeProc:
    def __init__(self, returncode=0):
        self.returncode, self.stdout, self.stderr = returncode, "", ""


def test_apply_puts_the_faults_in_order_and_kills_sshd_only_after_the_ping(monkeypatch, tmp_path):
    calls = []

    def fake_run(cmd, check=True, **kw):
        calls.append(cmd)
        return FakeProc()

    monkeypatch.setattr(fault_mix.bringup, "run", fake_run)
    monkeypatch.setattr(fault_mix, "refuses_ssh", lambda i: any("pkill" in c for c in calls))
    mix = {3: "dead", 5: "flaky", 7: "xid", 9: "dark"}
    ping = fault_mix.apply(mix, tmp_path, "/venv/bin/ansible", "/inv", {})
    assert ping.returncode == 0
    words = [" ".join(c[1:4]) if c[0] == fault_mix.bringup.SANDBOX else c[0] for c in calls]
    assert words == [
        "scenario 7 " + str(tmp_path / "fault-mix-xid.json"),
        "exec 5 bash",
        "/venv/bin/ansible",
        "exec 3 pkill",
    ]
    assert not any("9" in c for c in calls if c[0] == fault_mix.bringup.SANDBOX), "the dark node is touched later"


def test_apply_says_which_dead_nodes_still_answer(monkeypatch, tmp_path):
    monkeypatch.setattr(fault_mix.bringup, "run", lambda cmd, check=True, **kw: FakeProc())
    monkeypatch.setattr(fault_mix, "refuses_ssh", lambda i: False)
    with pytest.raises(RuntimeError, match=r"\[4\] still accept SSH"):
        fault_mix.apply({4: "dead"}, tmp_path, "ansible", "/inv", {}, wait=0)
