"""The pure parts of bench/scale.py: cgroup files, /proc parsing, pair rounds, the model, the doc."""

import json
import os
import sys
import time

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import bringup  # noqa: E402
import scale  # noqa: E402

PROC_CGROUP = """\
9:name=systemd:/
4:memory:/process_api/abc
3:cpu,cpuacct:/jobs/7
0::/
"""


def fake_cgroup(tmp_path, cpu_ns="2500000000\n", peak="104857600\n"):
    """A v1 layout under tmp_path: cpuacct (linked to the combined cpu,cpuacct) and memory."""
    (tmp_path / "cpu,cpuacct" / "jobs" / "7").mkdir(parents=True)
    os.symlink("cpu,cpuacct", tmp_path / "cpuacct")
    (tmp_path / "memory" / "process_api" / "abc").mkdir(parents=True)
    (tmp_path / "cpuacct" / "jobs" / "7" / "cpuacct.usage").write_text(cpu_ns)
    (tmp_path / "memory" / "process_api" / "abc" / "memory.max_usage_in_bytes").write_text(peak)
    return tmp_path


def test_parse_proc_cgroup_splits_combined_controllers():
    paths = scale.parse_proc_cgroup(PROC_CGROUP)
    assert paths["cpu"] == paths["cpuacct"] == "/jobs/7"
    assert paths["memory"] == "/process_api/abc"
    assert paths["name=systemd"] == "/"
    assert "" not in paths  # the v2 line names no controller


def test_cgroup_dirs_and_usage_from_a_fake_tree(tmp_path):
    root = fake_cgroup(tmp_path)
    dirs = scale.cgroup_dirs(PROC_CGROUP, root=str(root))
    assert dirs == {
        "cpuacct": os.path.join(str(root), "cpuacct", "jobs/7"),
        "memory": os.path.join(str(root), "memory", "process_api/abc"),
    }
    usage = scale.read_usage(dirs)
    assert usage == {"cpu_s": 2.5, "peak_bytes": 104857600}


def test_cgroup_dirs_without_a_v1_hierarchy(tmp_path):
    (tmp_path / "memory").mkdir()
    with pytest.raises(OSError, match="cpuacct"):
        scale.cgroup_dirs(PROC_CGROUP, root=str(tmp_path))
    (tmp_path / "cpuacct").mkdir()
    with pytest.raises(OSError, match="memory"):
        scale.cgroup_dirs("3:cpuacct:/\n", root=str(tmp_path))


def test_meter_falls_back_when_there_is_no_cgroup(tmp_path):
    meter = scale.Meter("raygate-bench-unit", root=str(tmp_path))
    assert meter.dirs is None and "getrusage" in meter.method
    assert meter.popen_kw() == {}


def test_host_cpu_ticks_and_mem_used():
    stat = "cpu  100 5 50 1000 20 3 2 1 0 0\ncpu0 50 2 25 500 10 1 1 0 0 0\n"
    assert bringup.host_cpu_ticks(stat) == 100 + 5 + 50 + 3 + 2 + 1
    with pytest.raises(ValueError):
        bringup.host_cpu_ticks("intr 1 2 3\n")
    meminfo = "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   20000000 kB\n"
    assert scale.mem_used(meminfo) == 4000000 * 1024


def test_pair_rounds_counts_retest_phases_and_failed_nodes():
    doc = {
        "pairs": [
            {
                "planned_rounds": 2,
                "tests": [
                    {"hosts": ["a", "b"], "round": 1, "verdict": "pass"},
                    {"hosts": ["c", "d"], "round": 1, "verdict": "fail"},
                    {"hosts": ["b", "c"], "round": 2, "verdict": "fail"},
                    {"hosts": ["d", "a"], "round": 2, "verdict": "pass"},
                    {"hosts": ["c", "a"], "round": 3, "verdict": "fail"},
                ],
                "nodes": {"a": "pass", "b": "pass", "c": "fail", "d": "pass"},
            }
        ]
    }
    assert scale.pair_rounds(doc) == {"planned": 2, "rounds": 3, "retest_phases": 1, "tests": 5, "failed": ["c"]}
    assert scale.pair_rounds({"pairs": []}) is None
    assert scale.pair_rounds(None) is None


@pytest.mark.parametrize(
    ("n", "count", "nodes"),
    [(10, 0, []), (10, 1, [6]), (10, 3, [5, 6, 7]), (100, 3, [50, 51, 52]), (3, 1, [2]), (2, 3, None), (1, 1, None)],
)
def test_bad_nodes_sit_in_the_middle_and_spare_the_head(n, count, nodes):
    assert scale.bad_nodes(n, count) == nodes


def test_fit_linear():
    fit = scale.fit_linear([(1, 3.0), (3, 7.0), (6, 13.0)])
    assert fit["a"] == pytest.approx(1.0) and fit["b"] == pytest.approx(2.0) and fit["points"] == 3
    assert scale.at(fit, 100) == pytest.approx(201.0)
    one = scale.fit_linear([(4, 8.0), (4, None)])
    assert one == {"a": 0.0, "b": 2.0, "points": 1}
    assert scale.fit_linear([]) is None


def run(wall, cpu, mem, host):
    return {"wall_s": wall, "cpu_s": cpu, "peak_mib": mem, "host_cpu_s": host}


def results():
    """site.yml cost 10 + 2 N CPU seconds and 100 + 5 N MiB; health.yml 4 + 0.5 N and 80 + 1 N."""
    site = {
        str(n): {
            "runs": {"c": run(20.0 + n, 10 + 2 * n, 100 + 5 * n, 30 + 6 * n), "d": run(4.0, 3 + n, 90, 8)},
            "sandbox": {"up_s": 1.0, "status_s": 0.5, "down_s": 0.3, "node_mib": 9.0},
            "ray_node_mib": 300.0,
        }
        for n in (1, 3, 6, 12, 20)
    }
    health = {
        str(n): {
            "cases": {
                "0": dict(run(10.0 + n / 5.0, 4 + 0.5 * n, 80 + n, 5 + 3 * n), bad=[], pairs=None),
                "1": dict(
                    run(11.0, 5.0, 90.0, 20.0),
                    bad=[n // 2 + 1],
                    pairs={"planned": 2, "rounds": 2, "retest_phases": 0, "tests": n, "failed": ["node6"]},
                ),
            },
            "sandbox": {"up_s": 2.0, "status_s": 1.0, "down_s": 1.0, "node_mib": 8.5},
        }
        for n in (10, 30, 100)
    }
    return {"site": site, "health": health}


def test_project_shows_waves_and_the_cpu_bound():
    fit = scale.fit_play(results(), "site")
    assert fit["cpu"]["a"] == pytest.approx(10) and fit["cpu"]["b"] == pytest.approx(2)
    assert fit["wave_n"] == 1 and fit["wave_s"] == pytest.approx(21.0)
    p = scale.project(fit, 1000, forks=50, cores=8)
    assert p["cpu_s"] == pytest.approx(2010)
    assert p["mem_mib"] == pytest.approx(5100)
    assert p["waves"] == 20 and p["latency_s"] == pytest.approx(420)
    assert p["cpu_bound_s"] == pytest.approx(2010 / 8.0)
    assert p["wall_s"] == pytest.approx(420)
    assert p["cores_needed"] == 5  # ceil(2010 / 420)
    slow = scale.project(fit, 1000, forks=50, cores=2)
    assert slow["wall_s"] == pytest.approx(1005)
    # Fitted where the smallest size (100, 146 s) already took two waves of 50: a wave is 73 s.
    big = dict(fit, wave_n=100, wave_s=146.0)
    assert scale.project(big, 1000, forks=50, cores=8)["latency_s"] == pytest.approx(20 * 73.0)


def test_split_at_finds_the_largest_size_within_the_limits():
    fit = scale.fit_play(results(), "site")
    # 8 cores: latency waves of 21 s dominate; 30 min allows 85 waves of 50 = 4250 nodes,
    # memory 100 + 5 N <= 16384 MiB allows 3256.
    assert scale.split_at(fit, forks=50, cores=8, mem_mib=16384, target_s=1800) == 3256
    assert scale.split_at(fit, forks=50, cores=8, mem_mib=50, target_s=1800) is None


def test_check_model_predicts_the_largest_size_from_the_smaller():
    rows = scale.check_model(results(), host_cores=2)
    site = {r["quantity"]: r for r in rows if r["play"] == "site"}
    assert site["cpu_s"]["n"] == 20 and site["cpu_s"]["fitted_on"] == [1, 3, 6, 12]
    assert site["cpu_s"]["predicted"] == pytest.approx(50) and site["cpu_s"]["error_pct"] == pytest.approx(0)
    # On this machine: max(one wave 21 s, host CPU (30 + 6 x 20) / 2 cores = 75 s), measured 40 s.
    assert site["wall_s"]["predicted"] == pytest.approx(75) and site["wall_s"]["measured"] == pytest.approx(40)
    assert site["wall_s"]["error_pct"] == pytest.approx(87.5)
    health = {r["quantity"]: r for r in rows if r["play"] == "health"}
    assert health["peak_mib"]["n"] == 100 and health["peak_mib"]["predicted"] == pytest.approx(180)


def test_render_doc_has_markers_tables_and_the_arithmetic():
    meta = {
        "started": "2026-11-24 04:00 UTC",
        "duration_s": 600,
        "argv": "--site 1,3 --health 10",
        "repeats": 1,
        "forks": 50,
        "method": "cgroup v1",
        "host_cores": 2,
        "controller_cores": 8,
        "controller_mem_mib": 16384,
        "target_s": 1800,
        "machine": {"CPU": "2 cores"},
        "versions": {"raygate": "abc123"},
    }
    doc = scale.render_doc(results(), meta, {"scale": "scale.png", "model": "scale-model.png"})
    assert doc.startswith(scale.MARK_BEGIN) and doc.endswith(scale.MARK_END)
    assert "| (c) controller CPU per node, s | 12.0 | 5.3 | 3.7 | 2.8 | 2.5 |" in doc
    assert "| 2010 = 10 + 2 x 1000 |" in doc  # the arithmetic of the projection
    assert "| 420 = 20 x 21.0 |" in doc
    assert "2 (2 + 0)" in doc and "node6" in doc
    assert "![projection to 1,000 nodes](scale-model.png)" in doc
    assert "| site.yml (c) | 20 | 1, 3, 6, 12 | controller CPU, s | 50.0 | 50.0 | +0% |" in doc
    assert "at most" not in doc  # no throttle recorded: nothing said
    assert "### Targets (issue 27), from this run" in doc and "issue 19" not in doc
    assert "### The fault mix\n\nThe fault mix did not run." in doc
    assert "#### Fault mix at N = 100" in scale.render_doc(_health_with_mix(), meta, {})
    throttled = scale.render_doc(results(), dict(meta, start_throttle=5), {})
    assert "Workers start at most 5 at a time in site.yml (`raygate_start_throttle`) and in the floor" in throttled
    # Through bringup's merge, the text outside the markers stays.
    merged = scale.bringup.merge_doc("# Scale\n\nhand\n\n" + doc + "\n\nafter\n", doc, scale.MARK_BEGIN, scale.MARK_END)
    assert merged.count(scale.MARK_BEGIN) == 1 and "hand" in merged and "after" in merged


def test_render_with_nothing_measured():
    empty = {"site": {}, "health": {}}
    assert "No site.yml" in scale.render_site(empty)
    assert "No health.yml" in scale.render_health(empty)
    assert scale.render_model(empty, 50, 8, 16384, 1800) == "Nothing measured to fit."
    assert "Too few sizes" in scale.render_check(empty, 2)


def test_from_json_renders_without_running(tmp_path):
    meta = {
        "started": "x",
        "duration_s": 60,
        "argv": "",
        "repeats": 1,
        "forks": 50,
        "method": "cgroup v1",
        "host_cores": 2,
        "machine": {},
        "versions": {},
    }
    src = tmp_path / "results.json"
    src.write_text(json.dumps({"meta": meta, "results": results()}))
    doc = tmp_path / "SCALE.md"
    args = ["--from-json", str(src), "--doc", str(doc), "--plot", str(tmp_path / "a.png")]
    args += ["--model-plot", str(tmp_path / "b.png"), "--controller-cores", "4"]
    assert scale.main(args) == 0
    text = doc.read_text()
    assert text.startswith("# Scale") and "a controller with 4 cores" in text


def _site(c, b, d, restarted, e, left, cpu, joined=None, c0=None, d_cpu=None):
    site = {
        "peer": {"b": b},
        "runs": {
            "c": {"wall_s": c, "cpu_s": cpu, "joined_s": joined},
            "d": {"wall_s": d, "restarted": restarted, "cpu_s": d_cpu},
            "e": {"wall_s": e, "left": left},
        },
    }
    if c0 is not None:
        site["runs"]["c0"] = {"joined_s": c0, "wall_s": c0 + 2.0, "cpu_s": 5.0}
    return site


def _mix_case(problems=(), ended=True, rc=0):
    return {
        "mix": {"2": "dead", "16": "dark", "30": "flaky"},
        "wall_s": 900.0,
        "rc": rc,
        "ended": ended,
        "limit_s": 1800.0,
        "problems": list(problems),
    }


def _targets_results():
    return {
        "site": {
            # c's controller CPU 2 + 0.9 N (slope 0.9 <= 1.0), d's 1 + 0.6 N (0.6 > 0.5)
            "3": _site(17.0, 17.6, 4.0, 0, 4.5, 0, 4.7, joined=30.0, c0=16.0, d_cpu=2.8),  # c0 <= b; d/c 0.24
            "6": _site(26.0, 24.6, 7.0, 1, 5.0, 0, 7.4, joined=45.0, c0=25.0, d_cpu=4.6),  # c0 > b; d/c 0.27
            "12": _site(60.0, 70.0, 12.0, 0, 9.0, 0, 12.8, joined=55.0, d_cpu=8.2),
        },
        "health": {
            # 5 + 0.3 N CPU seconds (0.3 <= 0.4); 3.5 GiB at 1,000 (<= 4)
            str(n): {"cases": {"0": {"cpu_s": 5 + 0.3 * n, "wall_s": 2.0 * n, "peak_mib": 3.5 * n * 1024 / 1000}}}
            for n in (100, 300, 1000)
        },
    }


def test_targets_of_issue_27_met_and_missed():
    results = _targets_results()
    results["health"]["1000"]["cases"]["mix"] = _mix_case()
    rows = scale.evaluate_targets(results, forks=50)
    got = {target: met for target, measured, met in rows}
    text = {target: measured for target, measured, met in rows}
    assert got["site.yml (c): controller CPU per node, the fitted slope b <= 1.0 s"] is True
    assert text["site.yml (c): controller CPU per node, the fitted slope b <= 1.0 s"] == (
        "b = 0.90 s (a = 2.0 s; over N = 3, 6, 12)"
    )
    assert got["site.yml again (d): controller CPU per node, the fitted slope b <= 0.5 s"] is False
    assert got["health.yml (healthy): controller CPU per node, the fitted slope b <= 0.4 s"] is True
    memory = "health.yml controller peak memory at N = 1000 (forks 50) <= 4 GiB"
    assert got[memory] is True and text[memory] == "3.50 GiB, forks 50"
    c0 = "c0 <= b, N=%d: site.yml with the gate off against `ray up`, both to all joined in the GCS"
    assert got[c0 % 3] is True
    assert text[c0 % 3] == "c0 16.0 s, b 17.6 s; the gate's own cost c - c0 = 14.0 s"
    assert got[c0 % 6] is False
    assert got["d <= 0.25 c, no raylet restarted, N=3"] is True
    assert got["d <= 0.25 c, no raylet restarted, N=6"] is False
    assert got["e <= 5 s at N=3, nothing left"] is True
    mix = "the fault mix at N = 1000 (the largest health.yml size): it ends, judge finds nothing wrong"
    assert got[mix] is True and text[mix] == "3 faulted; ended, rc 0; nothing wrong"
    # issue 19's rows are gone
    assert not [t for t in got if t.startswith("c <= b") or "1.2 x" in t]
    table = scale.render_targets(results, forks=50)
    assert "| %s | c0 25.0 s, b 24.6 s; the gate's own cost c - c0 = 20.0 s | **no** |" % (c0 % 6) in table


def test_targets_of_the_mix_and_the_memory_missed():
    results = _targets_results()
    results["health"]["1000"]["cases"]["0"]["peak_mib"] = 5000.0
    results["health"]["1000"]["cases"]["mix"] = _mix_case(problems=["node2 (dead): not out | in the run summary"])
    got = {t: (m, met) for t, m, met in scale.evaluate_targets(results, forks=50)}
    assert got["health.yml controller peak memory at N = 1000 (forks 50) <= 4 GiB"] == ("4.88 GiB, forks 50", False)
    measured, met = got["the fault mix at N = 1000 (the largest health.yml size): it ends, judge finds nothing wrong"]
    assert met is False and "1 wrong, the first: node2 (dead): not out \\| in" in measured
    results["health"]["1000"]["cases"]["mix"] = _mix_case(ended=False, rc=None)
    hung = {t: met for t, m, met in scale.evaluate_targets(results)}
    assert hung["the fault mix at N = 1000 (the largest health.yml size): it ends, judge finds nothing wrong"] is False


def test_targets_not_measured():
    rows = scale.evaluate_targets({"site": {"3": _site(20.0, None, 5.0, 0, 4.0, 2, 9.0)}})
    got = {target: met for target, measured, met in rows}
    text = {target: measured for target, measured, met in rows}
    # One size is no slope.
    slope = "site.yml (c): controller CPU per node, the fitted slope b <= 1.0 s"
    assert got[slope] is None and text[slope] == "fewer than two sizes measured"
    assert got["health.yml (healthy): controller CPU per node, the fitted slope b <= 0.4 s"] is None
    assert got["health.yml controller peak memory at N = 1000 (forks 50) <= 4 GiB"] is None
    assert got["c0 <= b, N=3: site.yml with the gate off against `ray up`, both to all joined in the GCS"] is None
    assert got["e <= 5 s at N=3, nothing left"] is False  # fast, but something was left
    assert got["the fault mix at N = ? (the largest health.yml size): it ends, judge finds nothing wrong"] is None
    assert "not measured" in scale.render_targets({})
    # Measured with other forks than the target's; the largest size without a mix; a mix not applied.
    results = _targets_results()
    got = {t: (m, met) for t, m, met in scale.evaluate_targets(results, forks=20)}
    assert got["health.yml controller peak memory at N = 1000 (forks 50) <= 4 GiB"] == (
        "3.50 GiB, forks 20 (not the target's)",
        None,
    )
    mix = "the fault mix at N = 1000 (the largest health.yml size): it ends, judge finds nothing wrong"
    assert got[mix] == ("the mix did not run at N = 1000", None)
    results["health"]["1000"]["cases"]["mix"] = {"mix": {"2": "dead"}, "error": "scale: node9: no rule", "ended": False}
    assert {t: met for t, m, met in scale.evaluate_targets(results)}[mix] is None


def test_joined_at_is_the_start_of_the_final_wait():
    doc = {
        "tasks": [
            {"name": "raygate.cluster.raygate : Ray node: started", "at": 1000.5},
            {"name": "raygate.cluster.raygate : Wait until every node and GPU has joined", "at": 1017.25},
            {"name": "raygate.cluster.raygate : Show the cluster", "at": 1022.0},
        ]
    }
    assert scale.joined_at(doc, 1000.0) == 17.25
    # A run that left before the wait (the gate failed, the head never came up) never joined;
    # neither did a document from a callback without start times.
    assert scale.joined_at({"tasks": doc["tasks"][:1]}, 1000.0) is None
    assert scale.joined_at({"tasks": [{"name": doc["tasks"][1]["name"]}]}, 1000.0) is None
    assert scale.joined_at(None, 1000.0) is None


def test_merge_results_later_sizes_win():
    first = {"meta": {"started": "t1", "argv": "--site 1,3"}, "results": {"site": {"1": {"a": 1}, "3": {"a": 3}}}}
    second = {
        "meta": {"started": "t2", "argv": "--site 3 --health 10"},
        "results": {"site": {"3": {"a": 33}}, "health": {"10": {"b": 1}}},
    }
    doc = scale.merge_results([first, second])
    assert doc["results"] == {"site": {"1": {"a": 1}, "3": {"a": 33}}, "health": {"10": {"b": 1}}}
    assert [r["started"] for r in doc["meta"]["runs"]] == ["t1", "t2"]


def test_the_recording_callback_documents_itself_in_valid_yaml():
    # Ansible parses every callback plugin's DOCUMENTATION when it loads callbacks: a YAML error
    # there ends every bench run before its first task.
    import yaml  # noqa: PLC0415

    sys.path.insert(0, os.path.join(ROOT, "bench", "callback_plugins"))
    try:
        import raygate_bench  # noqa: PLC0415
    finally:
        sys.path.pop(0)
    doc = yaml.safe_load(raygate_bench.DOCUMENTATION)
    assert doc["name"] == "raygate_bench"
    assert any("C(at)" in line for line in doc["description"])


def test_every_node_in_reads_the_run_summary():
    assert scale.every_node_in("...\n    - 'site: every node is in (12 of 12)'\n")
    # A degraded run ends with rc 0 too: its final wait starts, but not every node joined.
    assert not scale.every_node_in("    - 'site: 1 of 20 nodes are in; 19 left out'\n")
    assert not scale.every_node_in("    - 'site: every node is in (1 of 20)'\n")
    assert not scale.every_node_in("")


def test_yardstick_is_the_best_of_its_rounds(monkeypatch):
    clock = iter([0.0, 5.0, 10.0, 12.0, 20.0, 23.0])
    monkeypatch.setattr(scale.time, "perf_counter", lambda: next(clock))
    assert scale.yardstick(rounds=3, n=10) == 2.0


def test_mix_count_and_hang_limit():
    assert [scale.mix_count(n) for n in (30, 100, 300, 1000)] == [7, 7, 15, 50]
    assert scale.hang_limit(900.0, 1000) == 2700.0
    assert scale.hang_limit(None, 1000) == 6000.0  # no healthy case measured: 6 s a node
    assert scale.hang_limit(20.0, 10) == 600.0


def test_the_parser_defaults_to_the_run_that_met_issue_27s_targets():
    args = scale.build_parser().parse_args([])
    assert args.health == "100,300,1000" and args.site == "1,3,6" and args.bad == "0" and args.repeats == 3
    assert scale.build_parser().parse_args(["--bad", "0,1,3", "-k", "1"]).repeats == 1
    assert args.skip_mix is False
    assert scale.build_parser().parse_args(["--skip-mix"]).skip_mix is True


def test_detect_times_from_the_callbacks_marks():
    launched = 1000.0
    doc = {
        "marks": {
            # dead: unreachable at the first check, its fact later
            "node2": {
                "unreachable": {"at": 1030.5, "task": "Check the GPUs, their links and the fabric"},
                "out": {"at": 1031.0, "task": "Keep why this node leaves the run"},
            },
            # hung: a failure under ignore_errors earlier does not count
            "node5": {
                "ignored": {"at": 1001.0, "task": "probe"},
                "unhealthy": {"at": 1045.25, "task": "Check the GPUs, their links and the fabric"},
            },
            # uplink: the pair test names it by its address, before its fact
            scale.bringup.node_ip(8): {"pair": {"at": 1100.0, "task": "Run nccl-tests between pairs of nodes"}},
            "node8": {"out": {"at": 1102.0, "task": "Keep the gate's reasons for the run summary"}},
            "node9": {"ok": {"at": 1000.5, "task": "not a mark that detects"}},
        }
    }
    got = scale.detect_times(doc, launched, {2: "dead", 5: "hung", 8: "uplink", 9: "slow", 11: "flaky"})
    assert got["node2"] == {"after_s": 30.5, "how": "unreachable", "task": "Check the GPUs, their links and the fabric"}
    assert got["node5"]["after_s"] == 45.25 and got["node5"]["how"] == "unhealthy"
    assert got["node8"] == {"after_s": 100.0, "how": "pair", "task": "Run nccl-tests between pairs of nodes"}
    assert got["node9"] is None and got["node11"] is None
    # A callback document without marks (an older callback, or none written).
    assert scale.detect_times({"tasks": []}, launched, {2: "dead"}) == {"node2": None}
    assert scale.detect_times(None, launched, {}) == {}


def test_report_as_names_reasons_health_or_absence():
    report = {
        "unhealthy": {"node2": ["reachable: ssh: connect to host refused"], "node5": "xid 79 on GPU 3"},
        "nodes": [{"host": "node7", "status": "warn"}],
    }
    healthy = ["node1", "node3"]
    assert scale.report_as(report, healthy, "node2") == "unhealthy: reachable: ssh: connect to host refused"
    assert scale.report_as(report, healthy, "node5") == "unhealthy: xid 79 on GPU 3"
    assert scale.report_as(report, healthy, "node3") == "healthy (in healthy_hosts.txt)"
    assert scale.report_as(report, healthy, "node7") == "warn, not in healthy_hosts.txt"
    assert scale.report_as(report, healthy, "node9") == "not in the report"
    assert scale.report_as(None, [], "node2") == "not in the report"


def _write_mix_outputs(base, report, healthy, summary):
    run_dir = base / "health" / "20261127T070000Z"
    run_dir.mkdir(parents=True)
    (base / "health" / "20261126T070000Z").mkdir()  # an older run: the newest is read
    (run_dir / "report.json").write_text(json.dumps(report))
    (run_dir / "healthy_hosts.txt").write_text("\n".join(healthy) + "\n")
    (base / "runs").mkdir()
    (base / "runs" / "health.json").write_text(json.dumps(summary))


def _right_mix_outputs(n, mix):
    bad = scale.fault_mix.names(scale.fault_mix.unusable(mix))
    report = {
        "breaker_tripped": False,
        "unhealthy": {h: ["reason"] for h in bad},
        "nodes": [
            {"host": "node2", "status": "unreachable", "checks": [{"name": "reachable", "status": "fail"}]},
            {"host": "node3", "status": "fail", "checks": [{"name": "xid", "status": "fail", "detail": "Xid 79"}]},
        ],
    }
    healthy = sorted(scale.fault_mix.names(range(1, n + 1)) - bad)
    return report, healthy, {"result": "degraded", "out": {h: {} for h in bad}}


def test_judge_mix_reads_the_run_and_adds_exit_status_and_result(tmp_path):
    mix = {2: "dead", 3: "xid", 4: "slow"}
    report, healthy, summary = _right_mix_outputs(6, mix)
    _write_mix_outputs(tmp_path, report, healthy, summary)
    problems, got_report, got_healthy = scale.judge_mix(mix, 6, str(tmp_path), rc=0)
    assert problems == [] and got_report == report and got_healthy == healthy
    problems, unused_report, unused_healthy = scale.judge_mix(mix, 6, str(tmp_path), rc=2)
    assert problems == ["health.yml exited with 2, expected 0"]
    summary["result"] = "ok"
    (tmp_path / "runs" / "health.json").write_text(json.dumps(summary))
    problems = scale.judge_mix(mix, 6, str(tmp_path), rc=0)[0]
    assert problems == ["the run summary says 'ok', expected 'degraded'"]
    # fault_mix.judge's own findings come through: the slow node missing from healthy_hosts.txt.
    (tmp_path / "health" / "20261127T070000Z" / "healthy_hosts.txt").write_text("node1\nnode5\nnode6\n")
    assert any("healthy_hosts.txt lacks ['node4']" in p for p in scale.judge_mix(mix, 6, str(tmp_path), rc=0)[0])


def test_judge_mix_without_a_report(tmp_path):
    problems, report, healthy = scale.judge_mix({2: "dead"}, 3, str(tmp_path), rc=None)
    assert len(problems) == 1 and problems[0].startswith("no report to judge: ")
    assert report is None and healthy == []
    (tmp_path / "health").mkdir()
    assert "no report under" in scale.judge_mix({2: "dead"}, 3, str(tmp_path), rc=0)[0][0]


def _health_with_mix():
    res = results()
    res["health"]["100"]["cases"]["mix"] = dict(
        run(300.0, 150.0, 1300.0, 600.0),
        mix={"2": "dead", "16": "dark", "30": "flaky", "44": "slow"},
        rc=0,
        ended=True,
        limit_s=600.0,
        query_timeout=10,
        problems=[],
        pairs=None,
        detect={
            "node2": {"after_s": 12.25, "how": "unreachable", "task": "Check the GPUs"},
            "node16": {"after_s": 70.0, "how": "unreachable", "task": "Check the GPUs"},
            "node30": None,
            "node44": None,
        },
        report_as={
            "node2": "unhealthy: reachable: refused | closed",
            "node16": "unhealthy: reachable: timed out",
            "node30": "healthy (in healthy_hosts.txt)",
        },
    )
    return res


def test_render_mix_tables_and_verdicts():
    res = _health_with_mix()
    text = scale.render_mix(res)
    assert text.startswith("#### Fault mix at N = 100\n")
    assert (
        "4 faulted nodes, query_timeout 10 s. The run ended (rc 0) after 300.0 s; fault_mix.judge: nothing wrong."
        in text
    )
    assert "| node | kind | detected after, s | in the report as |" in text
    assert "| node2 | dead | 12.2 (unreachable: Check the GPUs) | unhealthy: reachable: refused \\| closed |" in text
    assert "| node30 | flaky | not marked (usable: it stays in) | healthy (in healthy_hosts.txt) |" in text
    assert "| node44 | slow | not marked (usable: it stays in) | - |" in text
    assert text.index("node2 |") < text.index("node16 |") < text.index("node30 |")  # by index, not as text
    case = res["health"]["100"]["cases"]["mix"]
    case.update(ended=False, rc=None, problems=["node16 (dark): not out", "the breaker tripped"])
    hung = scale.render_mix(res)
    assert (
        "The run **hung**: killed after 600.0 s; fault_mix.judge: **2 wrong**: node16 (dark): not out; the breaker"
        in hung
    )
    case.update(error="scale: node30: the flaky rule did not go in", detect=None, report_as=None)
    assert "did not run (the mix could not be applied)" in scale.render_mix(res)
    assert scale.render_mix(results()) == "The fault mix did not run."


def test_render_health_puts_the_mix_after_the_bad_node_cases():
    text = scale.render_health(_health_with_mix())
    rows = [line for line in text.splitlines() if line.startswith("| 100 |")]
    assert [r.split(" | ")[1] for r in rows] == ["none", "node51", "the fault mix, 4 nodes (below)"]
    assert sorted(["mix", "10", "3", "0"], key=scale.case_order) == ["0", "3", "10", "mix"]


def test_the_site_table_has_c0_where_it_ran():
    res = {"site": {"3": _site(17.0, 17.6, 4.0, 0, 4.5, 0, 4.7, joined=30.0, c0=16.0), "1": _site(9, 9, 2, 0, 2, 0, 3)}}
    for r in res["site"].values():
        r["runs"]["d"]["cpu_s"] = 1.0
    text = scale.render_site(res)
    assert "| (c0) site.yml, gate off: all joined (GCS), s | n/a | 16.0 |" in text
    assert "| (c0) controller CPU, s | n/a | 5.0 |" in text


def test_the_model_fitted_on_100_and_300_predicts_1000():
    res = _health_with_mix()
    res["health"] = {
        str(n): {"cases": {"0": dict(run(20.0 + 1.9 * n, 4 + 1.6 * n, 250 + 1.0 * n, 5 + 3.7 * n), bad=[], pairs=None)}}
        for n in (100, 300, 1000)
    }
    res["health"]["1000"]["cases"]["mix"] = {"mix": {"2": "dead"}, "wall_s": 5000.0, "cpu_s": 9999.0}
    rows = [r for r in scale.check_model(res, host_cores=2) if r["play"] == "health"]
    assert {r["n"] for r in rows} == {1000} and rows[0]["fitted_on"] == [100, 300]
    cpu = {r["quantity"]: r for r in rows}["cpu_s"]
    assert cpu["predicted"] == pytest.approx(1604) and cpu["measured"] == pytest.approx(1604)  # not the mix's
    table = scale.render_check(res, 2)
    assert "| health.yml (healthy) | 1000 | 100, 300 | controller CPU, s | 1604.0 | 1604.0 | +0% |" in table


def test_log_watch_fires_once_on_the_first_matching_line(tmp_path):
    path = tmp_path / "run.log"
    fired = []
    watch = scale.LogWatch(str(path), scale.NODE_PLAY, lambda: fired.append(1), poll=0.01).start()
    time.sleep(0.05)  # no file yet: it waits
    with open(path, "w", encoding="utf-8") as f:
        f.write("PLAY [Validate the raygate inventory (controller only, no host is contacted)] ***\n")
        f.flush()
        time.sleep(0.05)
        assert not fired
        f.write("PLAY [Check the health")  # half a line is not a line yet
        f.flush()
        time.sleep(0.05)
        assert not fired
        f.write(" of every node] *****\nPLAY [Check the health of every node] again\n")
    deadline = time.monotonic() + 5
    while not fired and time.monotonic() < deadline:
        time.sleep(0.01)
    watch.stop()
    assert fired == [1] and watch.fired is not None


def test_log_watch_stops_without_a_match(tmp_path):
    watch = scale.LogWatch(str(tmp_path / "never.log"), scale.NODE_PLAY, lambda: None, poll=0.01).start()
    watch.stop()
    assert watch.fired is None and not watch.thread.is_alive()


class _Named:
    def __init__(self, name):
        self.name = name

    def get_name(self):
        return self.name


class _Result:
    def __init__(self, host, task, result):
        self._host, self._task, self._result = _Named(host), _Named(task), result


def test_the_recording_callback_marks_when_each_host_was_found(tmp_path, monkeypatch):
    sys.path.insert(0, os.path.join(ROOT, "bench", "callback_plugins"))
    try:
        import raygate_bench  # noqa: PLC0415
    finally:
        sys.path.pop(0)
    clock = iter([100.0, 101.0, 102.0, 103.0, 104.0, 105.0, 106.0, 107.0])
    monkeypatch.setattr(raygate_bench.time, "time", lambda: next(clock))
    cb = raygate_bench.CallbackModule()
    check = "Check the GPUs, their links and the fabric"
    cb.v2_runner_on_unreachable(_Result("node2", check, {"unreachable": True}))  # 100
    cb.v2_runner_on_ok(_Result("node5", check, {"healthy": False}))  # 101
    cb.v2_runner_on_ok(_Result("node5", check, {"healthy": False}))  # not again
    cb.v2_runner_on_failed(_Result("node6", "probe", {}), ignore_errors=True)  # 102
    cb.v2_runner_on_failed(_Result("node6", "step", {}))  # 103
    pairs = {"nodes": {"198.18.0.18": {"verdict": "fail"}, "198.18.0.19": {"verdict": "pass"}}}
    cb.v2_runner_on_ok(_Result("node1", "pairs", pairs))  # 104
    cb.v2_runner_on_ok(_Result("node2", "leave", {"ansible_facts": {"raygate_out": {"status": "unreachable"}}}))  # 105
    cb.v2_runner_on_ok(_Result("node3", "fine", {"healthy": True, "ansible_facts": {"x": 1}}))
    out = tmp_path / "tasks.json"
    monkeypatch.setenv("RAYGATE_BENCH_TASKS_OUT", str(out))
    cb.v2_playbook_on_stats(None)
    marks = json.loads(out.read_text())["marks"]
    assert marks == {
        "node2": {"unreachable": {"at": 100.0, "task": check}, "out": {"at": 105.0, "task": "leave"}},
        "node5": {"unhealthy": {"at": 101.0, "task": check}},
        "node6": {"ignored": {"at": 102.0, "task": "probe"}, "failed": {"at": 103.0, "task": "step"}},
        "198.18.0.18": {"pair": {"at": 104.0, "task": "pairs"}},
    }


def _callback(monkeypatch, tmp_path, usage_ns):
    """The recording callback with its CPU read from a fake cpuacct.usage whose value the test sets."""
    sys.path.insert(0, os.path.join(ROOT, "bench", "callback_plugins"))
    try:
        import raygate_bench  # noqa: PLC0415
    finally:
        sys.path.pop(0)
    usage = tmp_path / "cpuacct.usage"
    usage.write_text("%d\n" % usage_ns)
    monkeypatch.setenv("RAYGATE_BENCH_CPU_FILE", str(usage))
    monkeypatch.setenv("RAYGATE_BENCH_TASKS_OUT", str(tmp_path / "tasks.json"))
    return raygate_bench.CallbackModule(), usage


class _Task:
    def __init__(self, name, path):
        self.name, self.path = name, path

    def get_name(self):
        return self.name

    def get_path(self):
        return self.path


def test_the_callback_charges_each_task_the_cgroups_cpu_until_the_next_task(monkeypatch, tmp_path):
    cb, usage = _callback(monkeypatch, tmp_path, 1_000_000_000)
    usage.write_text("1500000000\n")  # Ansible's own start-up is not the first task's
    cb.v2_playbook_on_task_start(_Task("Preflight", "/r/tasks/preflight.yml:3"), False)
    usage.write_text("4000000000\n")
    cb.v2_playbook_on_task_start(_Task("Leave the run", "/r/tasks/leave_now.yml:12"), False)
    usage.write_text("4250000000\n")
    cb.v2_playbook_on_stats(None)
    doc = json.loads((tmp_path / "tasks.json").read_text())
    assert [(t["name"], t["path"], t["cpu_s"]) for t in doc["tasks"]] == [
        ("Preflight", "/r/tasks/preflight.yml:3", 2.5),
        ("Leave the run", "/r/tasks/leave_now.yml:12", 0.25),
    ]
    assert doc["cpu_s"] == 3.25


def test_without_a_cpu_file_the_callback_records_no_cpu(monkeypatch, tmp_path):
    cb, unused_usage = _callback(monkeypatch, tmp_path, 0)
    cb.cpu_file = None
    cb.v2_playbook_on_task_start(_Task("Preflight", "/r/tasks/preflight.yml:3"), False)
    cb.v2_playbook_on_stats(None)
    doc = json.loads((tmp_path / "tasks.json").read_text())
    assert "cpu_s" not in doc and "cpu_s" not in doc["tasks"][0]
    assert scale.task_cpu(doc, 5.0) is None


def test_task_cpu_sums_a_task_by_name_and_place_and_keeps_what_no_task_took():
    doc = {
        "tasks": [
            {"name": "Preflight", "path": "/r/tasks/preflight.yml:3", "cpu_s": 2.0, "hosts": 3},
            {"name": "Leave the run", "path": "/r/tasks/leave_now.yml:12", "cpu_s": 0.25, "hosts": 0},
            # an include's tasks run once per include: the same place twice is one row
            {"name": "Leave the run", "path": "/r/tasks/leave_now.yml:12", "cpu_s": 0.25, "hosts": 1},
            # the same name elsewhere is another row
            {"name": "Leave the run", "path": "/r/tasks/leave_many.yml:9", "cpu_s": 0.5, "hosts": 1},
        ]
    }
    assert scale.task_cpu(doc, 10.0) == [
        ["Preflight (preflight.yml:3)", 2.0, 3],
        ["Leave the run (leave_now.yml:12)", 0.5, 1],
        ["Leave the run (leave_many.yml:9)", 0.5, 1],
        [scale.OUTSIDE_TASKS, 7.0, 0],
    ]
    assert scale.task_cpu(doc)[-1][0] != scale.OUTSIDE_TASKS


def _profiled(per_size):
    """Results whose site.yml c runs carry task profiles: {N: {label: cpu}}."""
    return {
        "site": {
            str(n): {"runs": {"c": {"task_cpu": [[label, cpu, n] for label, cpu in per.items()]}}}
            for n, per in per_size.items()
        }
    }


def test_the_profile_fits_each_task_over_the_sizes_and_the_slopes_add_up():
    results = _profiled(
        {
            1: {"preflight": 1.5, "start": 2.0, "summary": 1.0},
            3: {"preflight": 3.5, "start": 2.0, "summary": 1.0, "leave": 0.6},  # leave ran at N = 3 only
        }
    )
    fits = dict(scale.profile_fits(results, "site"))
    assert fits["preflight"]["b"] == pytest.approx(1.0) and fits["preflight"]["a"] == pytest.approx(0.5)
    assert fits["leave"]["b"] == pytest.approx(0.3)
    assert fits["start"]["b"] == pytest.approx(0.0)
    assert [label for label, unused_fit in scale.profile_fits(results, "site")][:2] == ["preflight", "leave"]
    text = scale.render_profile(results, top=1)
    assert "1.30 s per node in all, from 4 tasks" in text
    assert "| preflight | 1.000 | 77% | 0.50 |" in text
    assert "| the other 3 tasks | 0.300 | 23% | " in text
    # one size has no slope to fit; no profile at all says why
    assert scale.profile_fits(_profiled({3: {"preflight": 3.5}}), "site") is None
    assert "No run recorded" in scale.render_profile({"site": {}, "health": {}})
