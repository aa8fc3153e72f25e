"""The pure parts of bench/scale.py: cgroup files, /proc parsing, pair rounds, the model, the doc."""

import json
import os
import sys

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


def _site(c, b, d, restarted, e, left, cpu, joined=None):
    return {
        "peer": {"b": b},
        "runs": {
            "c": {"wall_s": c, "cpu_s": cpu, "joined_s": joined},
            "d": {"wall_s": d, "restarted": restarted},
            "e": {"wall_s": e, "left": left},
        },
    }


def test_targets_met_and_missed():
    results = {
        "site": {
            "3": _site(17.0, 17.6, 4.0, 0, 4.5, 0, 9.0, joined=12.0),  # met: c <= b, d/c 0.24, e 4.5 s
            # missed: the whole run is longer than b (joined in the GCS is not), d/c 0.27 and a restart
            "6": _site(26.0, 24.6, 7.0, 1, 5.0, 0, 15.0, joined=20.0),
            "20": _site(60.0, 70.0, 12.0, 0, 9.0, 0, 40.0),  # 2.0 s per node against 1.2 x 3.0
        },
        "health": {"10": {"cases": {"0": {"cpu_s": 9.0}}}, "100": {"cases": {"0": {"cpu_s": 120.0}}}},
    }
    got = {target: met for target, measured, met in scale.evaluate_targets(results)}
    assert got["c <= b, N=3: c = site.yml's whole run"] is True
    assert got["c <= b, N=3: c = all joined in the GCS"] is True
    assert got["c <= b, N=6: c = site.yml's whole run"] is False
    assert got["c <= b, N=6: c = all joined in the GCS"] is True
    assert got["d <= 0.25 c, no raylet restarted, N=3"] is True
    assert got["d <= 0.25 c, no raylet restarted, N=6"] is False
    assert got["e <= 5 s at N=3, nothing left"] is True
    assert got["site.yml controller CPU per node: N=20 <= 1.2 x N=3"] is True
    # 1.2 s per node at 100 against 0.9 at 10: more than 1.2 x.
    assert got["health.yml controller CPU per node: N=100 <= 1.2 x N=10"] is False
    table = scale.render_targets(results)
    assert "| c <= b, N=6: c = site.yml's whole run | c 26.0 s, b 24.6 s | **no** |" in table
    assert "| c <= b, N=6: c = all joined in the GCS | c 20.0 s, b 24.6 s | yes |" in table


def test_targets_not_measured():
    rows = scale.evaluate_targets({"site": {"3": _site(20.0, None, 5.0, 0, 4.0, 2, 9.0)}})
    got = {target: met for target, measured, met in rows}
    assert got["c <= b, N=3: c = site.yml's whole run"] is None  # no peer run
    assert got["c <= b, N=3: c = all joined in the GCS"] is None
    assert got["e <= 5 s at N=3, nothing left"] is False  # fast, but something was left
    assert got["site.yml controller CPU per node: N=20 <= 1.2 x N=3"] is None
    assert "not measured" in scale.render_targets({})


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
