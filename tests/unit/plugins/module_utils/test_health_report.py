"""The health gate's decision and its renderings: JSON, Markdown, JUnit, summary, Prometheus textfiles."""

import json
import re
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.raygate.cluster.plugins.module_utils import health_report as hr
from ansible_collections.raygate.cluster.plugins.module_utils.checks import result

NOW = 1767323045  # 2026-01-02T03:04:05Z
HOSTILE = 'evil|host\n<b>&"x"\\y*z_[a](b)`c`\x00\x1b'


def check(name, status, detail="", value=None, threshold=None, source="gpu_health"):
    return dict(result(name, status, detail, value, threshold), source=source)


def good(source="gpu_health"):
    return [
        check("gpu_count", "pass", "8 GPUs", 8, 8),
        check("ecc_uncorrectable_volatile", "pass", "no uncorrectable errors", 0, 0),
        check("dcgm_diag", "skip", "dcgmi not installed"),
    ]


def node(host, role="worker", checks=None, status="checked", **extra):
    entry = {"host": host, "role": role, "address": "10.0.0.%d" % (len(host) % 250), "status": status}
    entry["checks"] = good() if checks is None else checks
    entry.update(extra)
    return entry


def report(nodes, **kwargs):
    kwargs.setdefault("checked_at", NOW)
    return hr.build_report(nodes, **kwargs)


XID = check("xid", "fail", "Xid 79 on GPU 3 (fallen off the bus)", [79], [])
THERMAL = check("thermal_throttle", "warn", "GPU 1 hw_thermal_slowdown active", 1, 0)


# ---- the decision -----------------------------------------------------------------------


def test_all_healthy_passes_and_keeps_input_order():
    r = report([node("n3", "worker"), node("n1", "head"), node("n2")], min_healthy=3)
    assert r["healthy"] == ["n3", "n1", "n2"]
    assert (r["ok"], r["head_healthy"], r["enough"]) == (True, True, True)
    assert r["unhealthy"] == {} and r["warned"] == {}
    assert r["message"] == "health gate passed: 3 healthy of 3, need 3; head n1 is healthy"
    assert [n["verdict"] for n in r["nodes"]] == ["pass", "pass", "pass"]


def test_unhealthy_head_fails_the_gate_and_is_named_with_its_reasons():
    r = report([node("n1", "head", good() + [XID]), node("n2"), node("n3")])
    assert r["head_healthy"] is False and r["enough"] is True and r["ok"] is False
    assert r["healthy"] == ["n2", "n3"]
    assert r["unhealthy"] == {"n1": ["xid: Xid 79 on GPU 3 (fallen off the bus)"]}
    assert r["message"] == "health gate failed: head n1 is unhealthy (xid: Xid 79 on GPU 3 (fallen off the bus))"


def test_too_few_healthy_nodes_fail_with_the_counts():
    nodes = [node("n1", "head"), node("n2", checks=[XID]), node("n3", checks=[XID])]
    r = report(nodes, min_healthy=2)
    assert r["head_healthy"] is True and r["enough"] is False and r["ok"] is False
    assert r["message"] == "health gate failed: 1 healthy of 3, need 2"
    assert list(r["unhealthy"]) == ["n2", "n3"]


def test_worker_left_out_but_enough_remain_is_ok_and_named():
    r = report([node("n1", "head"), node("n2", checks=[XID]), node("n3")], min_healthy=2)
    assert r["ok"] is True
    assert r["message"].endswith("; left out: n2")


def test_unreachable_and_failed_nodes_are_unhealthy_with_their_error():
    # A pre-allocation gate must list the node that did not answer, not drop it.
    nodes = [
        node("n1", "head"),
        node("n2", status="unreachable", checks=[], error="ssh: connect to host 10.0.0.2 port 22: No route to host"),
        node("n3", status="failed", checks=[], error="Check the install: not enough space"),
        node("n4"),
    ]
    r = report(nodes, min_healthy=2)
    assert r["ok"] is True and r["healthy"] == ["n1", "n4"]
    assert r["unhealthy"] == {
        "n2": ["reachable: ssh: connect to host 10.0.0.2 port 22: No route to host"],
        "n3": ["run: Check the install: not enough space"],
    }
    assert [n["status"] for n in r["nodes"]] == ["checked", "unreachable", "failed", "checked"]
    assert r["message"].endswith("; left out: n2, n3")
    assert "n2" not in hr.render_healthy_hosts(r) and "n2" in hr.render_markdown(r)


def test_unreachable_node_ignores_check_results_and_needs_no_error():
    r = report([node("n1", "head"), node("n2", status="unreachable")])
    assert r["unhealthy"]["n2"] == ["reachable: no error was recorded"]


def test_head_unhealthy_and_too_few_names_both():
    r = report([node("n1", "head", [XID]), node("n2")], min_healthy=2)
    assert r["message"].startswith("health gate failed: head n1 is unhealthy (xid: ")
    assert r["message"].endswith("; 1 healthy of 2, need 2")


def test_warn_is_healthy_unless_fail_on_warn():
    nodes = [node("n1", "head"), node("n2", checks=good() + [THERMAL])]
    lenient = report(nodes, min_healthy=2)
    assert lenient["ok"] is True and lenient["healthy"] == ["n1", "n2"]
    assert lenient["warned"] == {"n2": ["thermal_throttle: GPU 1 hw_thermal_slowdown active"]}
    assert lenient["nodes"][1]["verdict"] == "warn" and lenient["nodes"][1]["reasons"] == []
    strict = report(nodes, min_healthy=2, fail_on_warn=True)
    assert strict["ok"] is False and strict["healthy"] == ["n1"]
    assert strict["unhealthy"] == {"n2": ["thermal_throttle: GPU 1 hw_thermal_slowdown active"]}
    assert strict["nodes"][1]["verdict"] == "warn" and strict["nodes"][1]["healthy"] is False


def test_fail_on_warn_adds_warnings_after_failures():
    r = report([node("n1", "head"), node("n2", checks=[THERMAL, XID])], fail_on_warn=True)
    assert r["unhealthy"]["n2"] == [
        "xid: Xid 79 on GPU 3 (fallen off the bus)",
        "thermal_throttle: GPU 1 hw_thermal_slowdown active",
    ]


def test_skipped_nodes_count_as_healthy_and_keep_their_place():
    nodes = [
        node("n1", "head", status="skipped", skip_reason="running member", checks=[XID]),
        node("n2", checks=[XID]),
        node("n3", status="skipped", checks=[]),
    ]
    r = report(nodes, min_healthy=2)
    assert r["healthy"] == ["n1", "n3"]
    assert r["ok"] is True and r["head_healthy"] is True
    assert [n["verdict"] for n in r["nodes"]] == ["skipped", "fail", "skipped"]
    assert r["nodes"][0]["checks"] == [XID]  # recorded, not judged


def test_head_missing_from_the_nodes_is_unhealthy_not_an_error():
    r = report([node("w1"), node("w2")], head="h1")
    assert (r["head"], r["head_healthy"], r["enough"], r["ok"]) == ("h1", False, True, False)
    assert r["healthy"] == ["w1", "w2"] and r["unhealthy"] == {}
    assert r["message"] == (
        "health gate failed: head h1 is not among the nodes (it failed or was unreachable before the gate)"
    )


def test_checked_node_without_checks_fails():
    r = report([node("n1", "head"), node("n2", checks=[])])
    assert r["unhealthy"] == {"n2": ["checks: no check results were given for this node"]}
    assert r["nodes"][1]["checks"][0]["source"] == "health_report"


def test_all_skipped_checks_pass():
    r = report([node("n1", "head", [check("dcgm_diag", "skip", "not installed")])])
    assert r["nodes"][0]["verdict"] == "pass" and r["ok"] is True


def test_head_defaults_to_the_head_role_and_must_agree():
    assert report([node("a"), node("b", "head")])["head"] == "b"
    assert report([node("a"), node("b")], head="a")["head"] == "a"
    with pytest.raises(ValueError, match="node b has role head"):
        report([node("a"), node("b", "head")], head="a")
    with pytest.raises(ValueError, match="no head"):
        report([node("a"), node("b")])
    with pytest.raises(ValueError, match="more than one node has role head"):
        report([node("a", "head"), node("b", "head")])


@pytest.mark.parametrize(
    "nodes, kwargs, match",
    [
        ([], {}, "non-empty"),
        ([{"role": "head"}], {}, "needs a host"),
        ([node("a", "head"), node("a")], {}, "listed twice"),
        ([node("a", "boss")], {}, "role 'boss'"),
        ([node("a", "head", status="maybe")], {}, "status 'maybe'"),
        ([node("a", "head", checks=[{"name": "x", "status": "pass"}])], {}, "lacks source"),
        ([node("a", "head", checks=[check("x", "pass", source="ssh")])], {}, "source 'ssh'"),
        ([node("a", "head", checks=[dict(check("x", "pass"), status="ok")])], {}, "status 'ok'"),
        ([node("a", "head", checks=["x"])], {}, "must be a dict"),
        ([node("a", "head", checks=[check("x", "pass"), check("x", "fail")])], {}, "more than once"),
        ([node("a", "head")], {"min_healthy": 0}, "min_healthy"),
        ([node("a", "head")], {"valid_for": 0}, "valid_for"),
        ([node("a", "head")], {"run_id": "../up"}, "run_id"),
        ([node("a", "head")], {"run_id": ".."}, "run_id"),
        ([node("a", "head")], {"run_id": "a/b"}, "run_id"),
    ],
)
def test_bad_input_is_refused(nodes, kwargs, match):
    with pytest.raises(ValueError, match=match):
        report(nodes, **kwargs)


def test_same_check_name_from_two_sources_is_allowed():
    checks = [check("x", "pass", source="gpu_health"), check("x", "pass", source="nccl_test")]
    assert report([node("a", "head", checks)])["ok"] is True


def test_times_run_id_and_thresholds():
    nodes = [
        node("n1", "head", [check("nccl_busbw", "pass", "480 GB/s", 480.5, 460.0, "nccl_test")]),
        node("n2", checks=[check("nccl_busbw", "pass", "440 GB/s", 440.0, 431.0, "nccl_test")]),
        node("n3", checks=[check("nccl_busbw", "pass", "470 GB/s", 470.0, 460.0, "nccl_test")]),
    ]
    r = report(nodes, valid_for=3600)
    assert r["run_id"] == "20260102T030405Z"
    assert (r["checked_at"], r["valid_until"]) == ("2026-01-02T03:04:05Z", "2026-01-02T04:04:05Z")
    assert (r["checked_at_epoch"], r["valid_until_epoch"]) == (NOW, NOW + 3600)
    assert r["thresholds"] == {"nccl_busbw": [460.0, 431.0]}
    assert report(nodes, run_id="nightly-7")["run_id"] == "nightly-7"


def test_report_json_round_trips():
    r = report([node("n1", "head", good() + [XID, THERMAL]), node(HOSTILE)])
    assert json.loads(hr.render_json(r)) == r


# ---- Markdown ---------------------------------------------------------------------------


def _cells(line):
    """Split a Markdown table row on its unescaped pipes."""
    assert line.startswith("| ") and line.endswith(" |")
    return [c.strip() for c in re.split(r"(?<!\\)\|", line[1:-1])]


def test_markdown_summary_table_then_one_table_per_node():
    r = report([node("n1", "head"), node("n2", checks=good() + [XID])])
    md = hr.render_markdown(r)
    lines = md.splitlines()
    start = lines.index("| host | role | verdict | healthy | reasons |")
    assert _cells(lines[start + 2]) == ["n1", "head", "pass", "yes", ""]
    assert _cells(lines[start + 3]) == ["n2", "worker", "fail", "no", r"xid: Xid 79 on GPU 3 (fallen off the bus)"]
    assert md.count("| check | status | value | threshold | detail |") == 2
    assert "| gpu\\_count |" not in md  # intraword underscores stay readable
    assert "| ecc_uncorrectable_volatile | pass | 0 | 0 | no uncorrectable errors |" in md
    assert "| xid | fail | \\[79\\] | \\[\\] | Xid 79 on GPU 3 (fallen off the bus) |" in md


def test_markdown_escapes_hostile_strings_to_one_cell():
    r = report([node("n1", "head", [check("bad|name", "fail", HOSTILE, HOSTILE, "a|b")]), node(HOSTILE)])
    md = hr.render_markdown(r)
    rows = [line for line in md.splitlines() if line.startswith("| ")]
    widths = {len(_cells(row)) for row in rows if not row.startswith("| ---")}
    assert widths == {5}
    assert "<b>" not in md and "\n<b>" not in md
    assert r'evil\|host<br>\<b\>\&"x"\\y\*z\_\[a\](b)\`c\`\\x00\\x1b' in md
    assert "\x00" not in md and "\x1b" not in md


def test_skipped_node_markdown_names_the_reason():
    r = report([node("n1", "head"), node("n2", status="skipped", skip_reason="running member", checks=[])])
    md = hr.render_markdown(r)
    assert "| n2 | worker | skipped | yes | skipped: running member |" in md
    assert "Not re-checked: running member" in md


# ---- JUnit ------------------------------------------------------------------------------


def test_junit_parses_and_counts_match():
    nodes = [
        node("n1", "head", good() + [THERMAL]),
        node("n2", checks=good() + [XID, check("nvlink", "fail", "GPU 2 link 0 inactive", 17, 18)]),
        node("n3", status="skipped", skip_reason="not re-checked", checks=[]),
    ]
    root = ET.fromstring(hr.render_junit(report(nodes)))
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("skipped"), root.get("errors")) == ("10", "2", "3", "0")
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["n1", "n2", "n3"]
    assert [(s.get("tests"), s.get("failures"), s.get("skipped")) for s in suites] == [
        ("4", "0", "1"),
        ("5", "2", "1"),
        ("1", "0", "1"),
    ]
    n1 = {c.get("name"): c for c in suites[0].findall("testcase")}
    assert {c.get("classname") for c in n1.values()} == {"raygate.health.n1"}
    assert n1["thermal_throttle"].find("failure") is None
    assert "hw_thermal_slowdown" in n1["thermal_throttle"].find("system-out").text
    assert n1["dcgm_diag"].find("skipped").get("message") == "dcgmi not installed"
    failure = suites[1].find("testcase[@name='xid']/failure")
    assert failure.get("message") == "Xid 79 on GPU 3 (fallen off the bus)"
    assert "threshold: []" in failure.text and "source: gpu_health" in failure.text
    assert suites[2].find("testcase[@name='node']/skipped").get("message") == "not re-checked"
    props = {p.get("name"): p.get("value") for p in suites[0].find("properties")}
    assert props == {"role": "head", "verdict": "warn", "address": "10.0.0.2"}


def test_junit_escapes_hostile_strings():
    r = report([node("n1", "head", [check(HOSTILE, "fail", HOSTILE, HOSTILE)]), node(HOSTILE, status="skipped")])
    text = hr.render_junit(r)
    root = ET.fromstring(text)  # control characters removed or it would not parse
    case = root.find("testsuite/testcase")
    assert case.get("name") == 'evil|host\n<b>&"x"\\y*z_[a](b)`c`\\x00\\x1b'
    assert case.find("failure").get("message") == case.get("name")
    assert root.findall("testsuite")[1].get("name") == case.get("name")


# ---- summary and healthy hosts ----------------------------------------------------------


def test_summary_is_a_fixed_width_table_then_the_message():
    r = report([node("n1", "head"), node("node-long-name", checks=[XID])])
    lines = hr.render_summary(r)
    assert lines[-1] == r["message"]
    header, first, second = lines[:3]
    assert header.split() == ["HOST", "ROLE", "VERDICT", "HEALTHY", "REASONS"]
    column = header.index("VERDICT")
    assert first[column:].startswith("pass") and second[column:].startswith("fail")
    assert second.endswith("xid: Xid 79 on GPU 3 (fallen off the bus)")
    assert first == first.rstrip()


def test_summary_keeps_one_line_per_node_for_hostile_hosts():
    lines = hr.render_summary(report([node("n1", "head"), node(HOSTILE)]))
    assert len(lines) == 4 and all("\n" not in line for line in lines)
    assert lines[2].startswith('evil|host <b>&"x"\\y*z_[a](b)`c`\\x00\\x1b  worker')


def test_healthy_hosts_one_per_line_in_order():
    r = report([node("b", "head"), node("a", checks=[XID]), node("c")])
    assert hr.render_healthy_hosts(r) == "b\nc\n"


def test_render_files_names():
    files = hr.render_files(report([node("a", "head")]))
    assert {k: v[0] for k, v in files.items()} == {
        "json": "report.json",
        "markdown": "report.md",
        "junit": "junit.xml",
        "healthy_hosts": "healthy_hosts.txt",
    }


# ---- Prometheus textfiles ---------------------------------------------------------------

LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)\{(?P<labels>%s(?:,%s)*)\} (?P<value>\S+)$" % (LABEL, LABEL))
COMMENT = re.compile(r"^# (?P<kind>HELP|TYPE) (?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*) (?P<text>.+)$")


def parse_prom(text):
    """{(name, labels-tuple): value} and the family order; fails on any line that is not valid."""
    assert text.endswith("\n")
    samples, families, typed = {}, [], set()
    for line in text[:-1].split("\n"):
        comment = COMMENT.match(line)
        if comment:
            if comment.group("kind") == "HELP":
                families.append(comment.group("name"))
            else:
                assert comment.group("text") == "gauge"
                typed.add(comment.group("name"))
            continue
        sample = SAMPLE.match(line)
        assert sample, "not a valid sample line: %r" % line
        assert sample.group("name") == families[-1]
        labels = tuple(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"', sample.group("labels")))
        assert list(labels) == sorted(labels, key=lambda kv: kv[0])
        key = (sample.group("name"), labels)
        assert key not in samples
        samples[key] = float(sample.group("value"))
    assert typed == set(families)
    return samples, families


def test_textfile_parses_and_encodes_statuses():
    checks = good() + [XID, THERMAL, check("persistence_mode", "pass", "on", True, True)]
    r = report([node("n1", "head", checks)], valid_for=60)
    text = hr.render_textfiles(r)["n1"]
    samples, families = parse_prom(text)
    assert (
        families
        == sorted(families)
        == [
            "raygate_health_check_status",
            "raygate_health_check_value",
            "raygate_health_checked_at_seconds",
            "raygate_health_node_healthy",
            "raygate_health_valid_until_seconds",
        ]
    )

    def status(name):
        return samples[("raygate_health_check_status", (("check", name), ("host", "n1"), ("source", "gpu_health")))]

    assert [status(n) for n in ("gpu_count", "thermal_throttle", "xid", "dcgm_diag")] == [0, 1, 2, -1]
    values = {k[1][0][1]: v for k, v in samples.items() if k[0] == "raygate_health_check_value"}
    assert values == {"gpu_count": 8, "ecc_uncorrectable_volatile": 0, "thermal_throttle": 1, "persistence_mode": 1}
    assert samples[("raygate_health_node_healthy", (("host", "n1"), ("role", "head")))] == 0
    assert samples[("raygate_health_checked_at_seconds", (("host", "n1"),))] == NOW
    assert samples[("raygate_health_valid_until_seconds", (("host", "n1"),))] == NOW + 60
    assert "0 pass, 1 warn, 2 fail, -1 skip" in text
    for family in families:
        block = [line for line in text.splitlines() if line.startswith(family + "{")]
        assert block == sorted(block)


def test_textfile_escapes_hostile_label_values():
    r = report([node("n1", "head"), node(HOSTILE, checks=[check('x"\\\ny', "pass", "", 1.5, 1)])])
    samples, families = parse_prom(hr.render_textfiles(r)[HOSTILE])
    healthy = [k for k in samples if k[0] == "raygate_health_node_healthy"]
    assert healthy == [("raygate_health_node_healthy", (("host", hr.prom_label(HOSTILE)), ("role", "worker")))]
    assert ("check", 'x\\"\\\\\\ny') in [k[1][0] for k in samples if k[0] == "raygate_health_check_value"]
    assert hr.prom_label('a"b\\c\nd') == 'a\\"b\\\\c\\nd'


def test_textfiles_only_for_checked_nodes_and_special_floats():
    values = {"a": float("nan"), "b": float("inf"), "c": "12.4"}
    checks = [check(name, "pass", "", value) for name, value in values.items()]
    r = report([node("n1", "head", checks), node("n2", status="skipped")])
    files = hr.render_textfiles(r)
    assert list(files) == ["n1"]
    assert 'raygate_health_check_value{check="a",host="n1",source="gpu_health"} NaN' in files["n1"]
    assert 'raygate_health_check_value{check="b",host="n1",source="gpu_health"} +Inf' in files["n1"]
    assert 'check="c",host="n1",source="gpu_health"} 0' in files["n1"]  # status only: "12.4" is text
    assert 'raygate_health_check_value{check="c"' not in files["n1"]
