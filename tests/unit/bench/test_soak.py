"""bench/soak.py: how a soak is judged and written down (no sandbox)."""

import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import soak  # noqa: E402

WATCHER = {"pid": 40, "fds": 6, "rss_kib": 30000, "cpu_s": 1.0}
SIZES = {"state": 2000, "log_total": 90000, "daemon_out": 3000, "textfile": 900, "fabric": 0}


def fault(kind, node, injected, latency, **extra):
    return dict(
        {"kind": kind, "node": node, "injected": injected, "limit_s": soak.INTERVAL + soak.SLACK_S,
         "at_text": "12:00:00", "latency_s": latency, "detail": "taken out", "recovered": True, "recovery_s": 30.0},
        **extra,
    )  # fmt: skip


def report(faults=(), takeouts=(), nodes=None, keys=2):
    nodes = nodes or {
        i: {"run_count": 20, "max_sizes": dict(SIZES), "watcher_start": dict(WATCHER), "watcher_end": dict(WATCHER),
            "runs": soak.run_figures([{"run": {"cpu_s": 0.8, "wall_s": 2.0, "rss_kib": 30000, "fds": 6,
                                               "checks_max_rss_kib": 60000}}] * 6)}
        for i in (1, 2, 3)
    }  # fmt: skip
    return {"faults": list(faults), "takeouts": list(takeouts), "started_text": "2026-11-29 12:00:00",
            "minutes": 6.0, "commit": "abc1234", "growth": {"nodes": nodes, "gcs_keys_max": keys,
                                                            "gcs_keys_end": 1}}  # fmt: skip


def test_faults_acted_on_in_time_and_their_own_take_outs_pass():
    faults = [
        fault("xid", 2, 1000.0, 12.0, healed=1100.0),
        fault("raylet", 3, 1200.0, 9.0),
        fault("gcs", 1, 1400.0, 14.0),
    ]
    assert soak.judge(report(faults, [{"node": 2, "at": 1012.0, "reason": "raygate-watch: xid"}])) == []


def test_a_late_or_missed_fault_a_failed_recovery_and_a_false_take_out_fail():
    faults = [
        fault("xid", 2, 1000.0, soak.INTERVAL + soak.SLACK_S + 1, healed=1100.0),
        fault("raylet", 3, 1200.0, None, detail="no run"),
        fault("gcs", 1, 1400.0, 5.0, recovered=False, recovery="rc 2"),
    ]
    takeouts = [{"node": 2, "at": 1036.0, "reason": "xid"}, {"node": 3, "at": 1210.0, "reason": "xid: stale"}]
    problems = soak.judge(report(faults, takeouts))
    assert len(problems) == 4, problems
    assert "past 35 s" in problems[0] and "not acted on (no run)" in problems[1]
    assert "did not bring the cluster back: rc 2" in problems[2] and problems[3].startswith("false take-out: node3")


def test_growth_past_the_bounds_fails():
    r = report(keys=soak.BOUNDS["gcs_keys"] + 1)
    r["growth"]["nodes"][2]["max_sizes"]["log_total"] = soak.BOUNDS["log_total"] + 1
    r["growth"]["nodes"][3]["watcher_end"] = dict(WATCHER, fds=WATCHER["fds"] + soak.BOUNDS["fds_growth"] + 1)
    r["growth"]["nodes"][1]["watcher_end"] = dict(WATCHER, pid=41)
    problems = soak.judge(r)
    assert any("node2: log_total reached" in p for p in problems), problems
    assert any("node3: the watcher's fds grew" in p for p in problems), problems
    assert any("node1: the watcher daemon restarted" in p for p in problems), problems
    assert any("GCS held 4 raygate keys" in p for p in problems), problems
    r = report(keys=None)
    assert soak.judge(r) == ["the raygate keys in the head's GCS could not be counted"]


def test_run_figures_take_the_first_and_last_runs():
    runs = [{"run": {"cpu_s": float(n), "wall_s": 1.0, "rss_kib": 100 + n, "fds": 6, "checks_max_rss_kib": n}}
            for n in range(20)]  # fmt: skip
    figures = soak.run_figures(runs)
    assert figures["start"]["cpu_s"] == 2.0 and figures["end"]["cpu_s"] == 17.0
    assert figures["end"]["checks_max_rss_kib"] == 19


def test_the_table_names_each_fault_and_each_node():
    r = report([fault("xid", 2, 1000.0, 12.0, healed=1100.0)], [{"node": 2, "at": 1012.0, "reason": "xid"}])
    r["problems"] = []
    text = soak.render_md(r)
    assert "| xid | node2 | 12:00:00 | 12.0 s | 35 s | taken out | 30 s |" in text
    assert "False take-outs: 0" in text and "| node3 | 20 |" in text and text.rstrip().endswith("pass")


def test_the_probe_line_is_found_among_other_output():
    assert soak.parse_probe('warning\nSOAK {"a": 1}\n') == {"a": 1}
    assert soak.parse_probe("SOAK {broken") is None and soak.parse_probe("") is None


def test_observe_keeps_what_the_fault_judgments_read(monkeypatch, tmp_path):
    # A raylet kill is judged by the first run after it that reports raylet_up false: the run record
    # the soak keeps must carry it (the first hour-long run missed every raylet kill for want of it).
    state = {"last_run": 100.0, "verdict": "healthy", "run": {"wall_s": 1.0}, "raylet_up": False, "gcs_up": None}
    monkeypatch.setattr(soak, "probe", lambda index: {"state": state, "sizes": dict(SIZES), "watcher": None})
    run = soak.Soak(str(tmp_path), 1)
    run.observe()
    assert run.runs[2][-1]["raylet_up"] is False
    monkeypatch.setattr(run, "wait", lambda what, found, timeout: found(None))
    assert run.first_run_after(2, 99.0, lambda r: r.get("raylet_up") is False)["last_run"] == 100.0
