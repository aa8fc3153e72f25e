"""The health gate's decision and its renderings: JSON, Markdown, JUnit, summary, Prometheus textfiles."""

import json
import re
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.raygate.cluster.plugins.module_utils.checks import result
from ansible_collections.raygate.cluster.plugins.module_utils.gate import textfile
from ansible_collections.raygate.cluster.plugins.plugin_utils import remedies
from ansible_collections.raygate.cluster.plugins.plugin_utils.report import (
    decision,
    healthy_hosts,
    json_file,
    junit,
    markdown,
    prometheus,
    summary,
)
from ansible_collections.raygate.cluster.plugins.plugin_utils.report import files as report_files

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
    return decision.build_report(nodes, **kwargs)


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
    # Half the nodes fail: not more than the breaker's 50 %, so the gate decides as usual.
    nodes = [node("n1", "head"), node("n2", checks=[XID]), node("n3", checks=[XID]), node("n4")]
    r = report(nodes, min_healthy=3)
    assert r["head_healthy"] is True and r["enough"] is False and r["ok"] is False
    assert r["breaker_tripped"] is False
    assert r["message"] == "health gate failed: 2 healthy of 4, need 3"
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
    assert "n2" not in healthy_hosts.render_healthy_hosts(r) and "n2" in markdown.render_markdown(r)


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
    recorded = r["nodes"][0]["checks"]  # recorded, not judged
    assert [(c["name"], c["status"], c["detail"]) for c in recorded] == [("xid", "fail", XID["detail"])]


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
    with pytest.raises(ValueError, match="more than one node has role head"):
        report([node("a", "head"), node("b", "head")])


def test_a_fleet_without_a_head_is_judged_by_its_nodes_alone():
    """The health_gate role alone over nodes that run no Ray: no head, none to fail the gate."""
    bad = node("b", "worker", [check("xid", "fail", "Xid 79")])
    r = report([node("a"), bad, node("c")], min_healthy=2)
    assert (r["head"], r["head_healthy"], r["ok"]) == (None, True, True)
    assert r["healthy"] == ["a", "c"] and list(r["unhealthy"]) == ["b"]
    assert "head" not in r["message"] and r["message"].startswith("health gate passed: 2 healthy of 3")
    short = report([node("a"), bad], min_healthy=2)
    assert short["ok"] is False and short["message"] == "health gate failed: 1 healthy of 2, need 2"


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
    assert json.loads(json_file.render_json(r)) == r


# ---- Markdown ---------------------------------------------------------------------------


def md_action(name, status="fail"):
    """A default action as report.md writes it in a cell."""
    return markdown.md_escape(remedies.default_action(name, status))


def _cells(line):
    """Split a Markdown table row on its unescaped pipes."""
    assert line.startswith("| ") and line.endswith(" |")
    return [c.strip() for c in re.split(r"(?<!\\)\|", line[1:-1])]


def test_markdown_summary_table_then_one_table_per_node():
    r = report([node("n1", "head"), node("n2", checks=good() + [XID])])
    md = markdown.render_markdown(r)
    lines = md.splitlines()
    start = lines.index("| host | role | verdict | severity | healthy | reasons |")
    assert _cells(lines[start + 2]) == ["n1", "head", "pass", "", "yes", ""]
    assert _cells(lines[start + 3]) == [
        "n2",
        "worker",
        "fail",
        "do-not-allocate",
        "no",
        r"xid: Xid 79 on GPU 3 (fallen off the bus)",
    ]
    assert md.count("| check | status | severity | value | threshold | detail | action |") == 2
    assert "| gpu\\_count |" not in md  # intraword underscores stay readable
    assert "| ecc_uncorrectable_volatile | pass |  | 0 | 0 | no uncorrectable errors |  |" in md
    xid_row = [line for line in lines if line.startswith("| xid | fail |")][0]
    assert _cells(xid_row)[:6] == [
        "xid",
        "fail",
        "do-not-allocate",
        r"\[79\]",
        r"\[\]",
        "Xid 79 on GPU 3 (fallen off the bus)",
    ]
    assert _cells(xid_row)[6] == md_action("xid")


def test_markdown_escapes_hostile_strings_to_one_cell():
    r = report([node("n1", "head", [check("bad|name", "fail", HOSTILE, HOSTILE, "a|b")]), node(HOSTILE)])
    md = markdown.render_markdown(r)
    # Each table row has as many cells as its header: escaping never splits or merges one.
    table = None
    for line in md.splitlines():
        if not line.startswith("| "):
            table = None
        elif table is None:
            table = len(_cells(line))
        else:
            assert len(_cells(line)) == table, line
    assert "<b>" not in md and "\n<b>" not in md
    assert r'evil\|host<br>\<b\>\&"x"\\y\*z\_\[a\](b)\`c\`\\x00\\x1b' in md
    assert "\x00" not in md and "\x1b" not in md


def test_skipped_node_markdown_names_the_reason():
    r = report([node("n1", "head"), node("n2", status="skipped", skip_reason="running member", checks=[])])
    md = markdown.render_markdown(r)
    assert "| n2 | worker | skipped |  | yes | skipped: running member |" in md
    assert "Not re-checked: running member" in md


# ---- JUnit ------------------------------------------------------------------------------


def test_junit_parses_and_counts_match():
    nodes = [
        node("n1", "head", good() + [THERMAL]),
        node("n2", checks=good() + [XID, check("nvlink", "fail", "GPU 2 link 0 inactive", 17, 18)]),
        node("n3", status="skipped", skip_reason="not re-checked", checks=[]),
    ]
    root = ET.fromstring(junit.render_junit(report(nodes)))
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
    assert props == {"role": "head", "verdict": "warn", "severity": "degraded", "address": "10.0.0.2"}


def test_junit_escapes_hostile_strings():
    r = report([node("n1", "head", [check(HOSTILE, "fail", HOSTILE, HOSTILE)]), node(HOSTILE, status="skipped")])
    text = junit.render_junit(r)
    root = ET.fromstring(text)  # control characters removed or it would not parse
    case = root.find("testsuite/testcase")
    assert case.get("name") == 'evil|host\n<b>&"x"\\y*z_[a](b)`c`\\x00\\x1b'
    assert case.find("failure").get("message") == case.get("name")
    assert root.findall("testsuite")[1].get("name") == case.get("name")


# ---- summary and healthy hosts ----------------------------------------------------------


def test_summary_is_a_fixed_width_table_then_the_message():
    r = report([node("n1", "head"), node("node-long-name", checks=[XID])])
    lines = summary.render_summary(r)
    assert lines[-1] == r["message"]
    header, first, second = lines[:3]
    assert header.split() == ["HOST", "ROLE", "VERDICT", "SEVERITY", "HEALTHY", "REASONS"]
    column = header.index("VERDICT")
    assert first[column:].startswith("pass") and second[column:].startswith("fail")
    column = header.index("SEVERITY")
    assert first[column:].startswith("- ") and second[column:].startswith("do-not-allocate ")
    assert second.endswith("xid: Xid 79 on GPU 3 (fallen off the bus)")
    assert first == first.rstrip()


def test_summary_keeps_one_line_per_node_for_hostile_hosts():
    lines = summary.render_summary(report([node("n1", "head"), node(HOSTILE)]))
    assert len(lines) == 4 and all("\n" not in line for line in lines)
    assert lines[2].startswith('evil|host <b>&"x"\\y*z_[a](b)`c`\\x00\\x1b  worker')


def test_healthy_hosts_one_per_line_in_order():
    r = report([node("b", "head"), node("a", checks=[XID]), node("c")])
    assert healthy_hosts.render_healthy_hosts(r) == "b\nc\n"


def test_render_files_names():
    files = report_files.render_files(report([node("a", "head")]))
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
    text = prometheus.render_textfiles(r)["n1"]
    samples, families = parse_prom(text)
    assert (
        families
        == sorted(families)
        == [
            "raygate_health_breaker_tripped",
            "raygate_health_check_severity",
            "raygate_health_check_status",
            "raygate_health_check_value",
            "raygate_health_checked_at_seconds",
            "raygate_health_node_healthy",
            "raygate_health_node_severity",
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
    samples, families = parse_prom(prometheus.render_textfiles(r)[HOSTILE])
    healthy = [k for k in samples if k[0] == "raygate_health_node_healthy"]
    assert healthy == [("raygate_health_node_healthy", (("host", textfile.prom_label(HOSTILE)), ("role", "worker")))]
    assert ("check", 'x\\"\\\\\\ny') in [k[1][0] for k in samples if k[0] == "raygate_health_check_value"]
    assert textfile.prom_label('a"b\\c\nd') == 'a\\"b\\\\c\\nd'


def test_textfiles_only_for_checked_nodes_and_special_floats():
    values = {"a": float("nan"), "b": float("inf"), "c": "12.4"}
    checks = [check(name, "pass", "", value) for name, value in values.items()]
    r = report([node("n1", "head", checks), node("n2", status="skipped")])
    files = prometheus.render_textfiles(r)
    assert list(files) == ["n1"]
    assert 'raygate_health_check_value{check="a",host="n1",source="gpu_health"} NaN' in files["n1"]
    assert 'raygate_health_check_value{check="b",host="n1",source="gpu_health"} +Inf' in files["n1"]
    assert 'check="c",host="n1",source="gpu_health"} 0' in files["n1"]  # status only: "12.4" is text
    assert 'raygate_health_check_value{check="c"' not in files["n1"]


# ---- severity and action in every format -------------------------------------------------

# A check that brings its own severity and action (as the Xid catalogue does) keeps them.
OWN = dict(
    result("xid", "warn", "Xid 13 on GPU 0", [13], [], severity="info", action="restart the application"),
    source="gpu_health",
)


def test_every_failing_or_warning_check_carries_a_severity_and_an_action():
    r = report([node("n1", "head", good() + [XID, THERMAL]), node("n2", checks=[OWN])], breaker_threshold=0)
    checks = {(n["host"], c["name"]): c for n in r["nodes"] for c in n["checks"]}
    xid = checks[("n1", "xid")]
    assert (xid["severity"], xid["action"]) == ("do-not-allocate", remedies.default_action("xid"))
    thermal = checks[("n1", "thermal_throttle")]
    assert (thermal["severity"], thermal["action"]) == ("degraded", remedies.default_action("thermal_throttle", "warn"))
    assert (checks[("n2", "xid")]["severity"], checks[("n2", "xid")]["action"]) == ("info", "restart the application")
    for key in (("n1", "gpu_count"), ("n1", "dcgm_diag")):
        assert "severity" not in checks[key] and "action" not in checks[key]
    assert [n["severity"] for n in r["nodes"]] == ["do-not-allocate", "info"]
    assert r["severities"] == {"n1": "do-not-allocate", "n2": "info"}


def test_made_checks_of_nodes_that_left_carry_an_action_too():
    r = report([node("n1", "head"), node("n2", status="unreachable", error="no route")])
    made = r["nodes"][1]["checks"][0]
    assert (made["name"], made["severity"], made["action"]) == (
        "reachable",
        "do-not-allocate",
        remedies.default_action("reachable"),
    )


def test_a_severity_on_a_passing_check_is_dropped():
    passing = dict(check("gpu_count", "pass", "8 GPUs", 8, 8), severity="degraded", action="nothing")
    r = report([node("n1", "head", [passing])])
    assert "severity" not in r["nodes"][0]["checks"][0] and r["nodes"][0]["severity"] is None


def test_junit_cases_carry_severity_and_action_in_text_and_properties():
    root = ET.fromstring(junit.render_junit(report([node("n1", "head", good() + [XID, OWN | {"name": "sxid"}])])))
    failure = root.find("testsuite/testcase[@name='xid']/failure")
    assert "severity: do-not-allocate" in failure.text and "action: look the Xid up" in failure.text
    props = {p.get("name"): p.get("value") for p in root.find("testsuite/testcase[@name='xid']/properties")}
    assert props == {"severity": "do-not-allocate", "action": remedies.default_action("xid")}
    warn = root.find("testsuite/testcase[@name='sxid']")
    assert "severity: info\naction: restart the application" in warn.find("system-out").text
    assert root.find("testsuite/testcase[@name='gpu_count']/properties") is None
    suite = {p.get("name"): p.get("value") for p in root.find("testsuite/properties")}
    assert suite["severity"] == "do-not-allocate"


def test_textfile_has_check_and_node_severity_with_the_action():
    r = report([node("n1", "head", good() + [XID, THERMAL])])
    text = prometheus.render_textfiles(r)["n1"]
    samples, _families = parse_prom(text)
    base = (("check", "xid"), ("host", "n1"))
    key = ("raygate_health_check_severity", base + (("action", textfile.prom_label(remedies.default_action("xid"))),))
    severity = {k: v for k, v in samples.items() if k[0] == "raygate_health_check_severity"}
    assert len(severity) == 2
    by_check = {dict(k[1])["check"]: (dict(k[1])["severity"], v) for k, v in severity.items()}
    assert by_check == {"xid": ("do-not-allocate", 3), "thermal_throttle": ("degraded", 2)}
    assert key[0] in text
    assert samples[("raygate_health_node_severity", (("host", "n1"),))] == 3
    assert samples[("raygate_health_breaker_tripped", (("host", "n1"),))] == 0


def test_summary_shows_each_nodes_worst_severity():
    lines = summary.render_summary(report([node("n1", "head", good() + [THERMAL]), node("n2", checks=[XID])]))
    column = lines[0].index("SEVERITY")
    assert lines[1][column:].startswith("degraded ") and lines[2][column:].startswith("do-not-allocate ")


# ---- the fleet view ---------------------------------------------------------------------------

FP = {
    "gpu_model": ["NVIDIA H100 80GB HBM3"],
    "gpu_count": 8,
    "driver": "550.90.07",
    "cuda": "12.4",
    "vbios": ["96.00.74.00.0D"],
    "pcie_link": ["x16/x16"],
    "hca_firmware": ["28.39.1002"],
    "rdma_stack": None,
    "nccl": ["2.21.5"],
    "kernel": "6.1.0-18-amd64",
}


def fleet_nodes(*drifts):
    """A head and workers n2.. with FP, each changed by one dict of ``drifts`` (None: no fingerprint)."""
    out = [node("n1", "head", fingerprint=dict(FP))]
    for i, change in enumerate(drifts):
        out.append(node("n%d" % (i + 2), fingerprint=None if change is None else dict(FP, **change)))
    return out


def drift_of(r, host):
    return [c for c in [n for n in r["nodes"] if n["host"] == host][0]["checks"] if c["name"] == "fleet_drift"]


def test_a_drifting_node_warns_by_default_and_the_others_pass():
    r = report(fleet_nodes({}, {"vbios": ["96.00.74.00.0D", "96.00.99.00.01"]}, {}))
    [drift] = drift_of(r, "n3")
    assert (drift["status"], drift["severity"], drift["source"]) == ("warn", "degraded", "health_report")
    assert drift["detail"] == "vbios 96.00.74.00.0D, 96.00.99.00.01, the fleet runs 96.00.74.00.0D (3 of 4 nodes)"
    assert drift["action"].startswith("flash VBIOS 96.00.74.00.0D")
    assert [drift_of(r, h)[0]["status"] for h in ("n1", "n2", "n4")] == ["pass", "pass", "pass"]
    assert r["ok"] is True and r["warned"]["n3"] == ["fleet_drift: " + drift["detail"]]
    assert r["fleet"]["drift"] == {
        "n3": [
            {
                "field": "vbios",
                "value": "96.00.74.00.0D, 96.00.99.00.01",
                "expected": "96.00.74.00.0D",
                "reference": "majority",
                "count": 3,
                "reporting": 4,
            }
        ]
    }


def test_fleet_drift_fail_leaves_the_node_out_and_off_makes_no_check():
    nodes = fleet_nodes({}, {"driver": "535.161.08"}, {})
    strict = report(nodes, fleet_drift="fail")
    assert strict["unhealthy"] == {"n3": ["fleet_drift: driver 535.161.08, the fleet runs 550.90.07 (3 of 4 nodes)"]}
    off = report(nodes, fleet_drift="off")
    assert [drift_of(off, n["host"]) for n in off["nodes"]] == [[], [], [], []]
    assert off["fleet"]["fields"]["driver"]["majority"] == "550.90.07"


def test_nodes_without_a_fingerprint_are_outside_the_fleet_view():
    r = report(fleet_nodes({}, None, {"driver": "535.161.08"}, None))
    assert r["fleet"]["nodes"] == 3
    assert drift_of(r, "n3") == [] and drift_of(r, "n5") == []
    assert drift_of(r, "n4")[0]["status"] == "warn"


def test_a_two_node_fleet_that_disagrees_blames_nobody():
    r = report(fleet_nodes({"driver": "535.161.08"}), fleet_drift="fail")
    assert r["ok"] is True and r["unhealthy"] == {}
    assert r["fleet"]["fields"]["driver"]["split"] is True
    assert "no majority to compare with for driver" in drift_of(r, "n2")[0]["detail"]


def test_pinned_versions_come_through_build_report():
    nodes = fleet_nodes({}, {})
    r = report(nodes, fleet_expect={"driver": "560"}, fleet_drift="fail", breaker_threshold=0)
    assert sorted(r["unhealthy"]) == ["n1", "n2", "n3"]
    # A pin the whole fleet misses is what the breaker is for: a wrong pin, not three bad nodes.
    tripped = report(nodes, fleet_expect={"driver": "560"}, fleet_drift="fail")
    assert tripped["breaker_tripped"] is True and tripped["unhealthy"] == {}
    assert "all 3 failing nodes fail fleet_drift" in tripped["message"]
    with pytest.raises(ValueError, match="not a fingerprint field"):
        report(fleet_nodes({}), fleet_expect={"bios": "1"})
    with pytest.raises(ValueError, match="fleet_drift must be one of"):
        report(fleet_nodes({}), fleet_drift="maybe")


def test_markdown_fleet_table_lists_each_value_with_its_nodes():
    r = report(fleet_nodes({}, {"driver": "535.161.08"}, {}))
    md = markdown.render_markdown(r)
    lines = md.splitlines()
    start = lines.index("| field | value | nodes | hosts | note |")
    rows = [_cells(line) for line in lines[start + 2 :] if line.startswith("| ")]
    rows = rows[: [i for i, row in enumerate(rows) if row[0] == "check"][0]]
    assert ["driver", "550.90.07", "3", "n1, n2, n4", "majority"] in rows
    assert ["driver", "535.161.08", "1", "n3", "differs from the majority"] in rows
    assert ["rdma_stack", "(not read)", "4", "n1, n2, n3, n4", "not read"] in rows
    assert "4 nodes reported their versions; fleet drift: warn." in md


def test_markdown_fleet_table_marks_pins_splits_and_cuts_long_host_lists():
    many = [{}] * 24
    r = report(fleet_nodes(*many), fleet_expect={"vbios": "96.00.99"})
    md = markdown.render_markdown(r)
    assert "| vbios | 96.00.74.00.0D | 25 |" in md and "differs from the pin |" in md
    assert "n19, n20 and 5 more |" in md
    split = markdown.render_markdown(report(fleet_nodes({"driver": "535.161.08"})))
    assert "| driver | 535.161.08 | 1 | n2 | no majority |" in split


def test_summary_lists_the_fields_the_fleet_disagrees_on():
    r = report(fleet_nodes({}, {}, {}, {"driver": "535.161.08"}))
    lines = summary.render_summary(r)
    assert "fleet driver: 550.90.07 on 4 nodes; 535.161.08 on n5" in lines
    assert lines[-1] == r["message"]


def test_textfile_fingerprint_info_has_one_label_per_field_read():
    r = report(fleet_nodes({}))
    samples, _families = parse_prom(prometheus.render_textfiles(r)["n2"])
    [labels] = [dict(k[1]) for k in samples if k[0] == "raygate_health_fingerprint_info"]
    assert labels == {
        "host": "n2",
        "gpu_model": "NVIDIA H100 80GB HBM3",
        "gpu_count": "8",
        "driver": "550.90.07",
        "cuda": "12.4",
        "vbios": "96.00.74.00.0D",
        "pcie_link": "x16/x16",
        "hca_firmware": "28.39.1002",
        "nccl": "2.21.5",
        "kernel": "6.1.0-18-amd64",
    }


# ---- the circuit breaker --------------------------------------------------------------------


def test_breaker_trips_leaves_nobody_out_and_stops():
    nodes = [node("n1", "head"), node("n2", checks=[XID]), node("n3", checks=[XID]), node("n4", checks=[XID])]
    r = report(nodes)
    assert (r["breaker_tripped"], r["ok"]) == (True, False)
    assert r["healthy"] == ["n1", "n2", "n3", "n4"] and r["unhealthy"] == {}
    assert healthy_hosts.render_healthy_hosts(r) == "n1\nn2\nn3\nn4\n"
    # The verdicts stay true to the checks.
    assert [n["healthy"] for n in r["nodes"]] == [True, False, False, False]
    assert r["breaker"]["failed_hosts"] == ["n2", "n3", "n4"]
    assert r["message"].startswith(
        "health gate stopped: circuit breaker tripped: 3 of 4 checked nodes failed (75%), more than"
        " raygate_health_breaker_threshold 50%; nobody was left out or evicted. Likely: all 3 failing nodes fail xid"
    )
    md = markdown.render_markdown(r)
    assert "- circuit breaker: **TRIPPED**: 3 of 4 checked nodes failed (75%)" in md
    assert "  - likely: all 3 failing nodes fail xid" in md
    for text in prometheus.render_textfiles(r).values():
        assert "raygate_health_breaker_tripped{" in text and text.count("} 1\n") >= 1
    samples, _families = parse_prom(prometheus.render_textfiles(r)["n2"])
    assert samples[("raygate_health_breaker_tripped", (("host", "n2"),))] == 1


def test_a_tripped_breaker_still_names_an_unhealthy_head():
    nodes = [node("n1", "head", checks=[XID]), node("n2", checks=[XID]), node("n3", checks=[XID]), node("n4")]
    r = report(nodes)
    assert (r["breaker_tripped"], r["ok"], r["head_healthy"]) == (True, False, False)
    assert r["message"].startswith("health gate stopped: circuit breaker tripped: 3 of 4")
    assert "; head n1 is unhealthy (xid: " in r["message"]
    assert "is unhealthy" not in report([node("n1", "head")] + nodes[1:])["message"]


def test_breaker_counts_unreachable_nodes_and_ignores_skipped_members():
    nodes = [
        node("n1", "head"),
        node("n2", status="unreachable", error="no route"),
        node("n3", status="unreachable", error="no route"),
        node("n4", status="skipped", checks=[]),
        node("n5", status="skipped", checks=[]),
    ]
    r = report(nodes)
    assert (r["breaker"]["checked"], r["breaker"]["failed"], r["breaker_tripped"]) == (3, 2, True)
    assert "all 2 failing nodes fail reachable" in r["message"]


def test_breaker_not_tripped_shows_its_counts_and_the_gate_decides_as_before():
    r = report([node("n1", "head"), node("n2", checks=[XID]), node("n3"), node("n4")])
    assert r["breaker_tripped"] is False and r["unhealthy"] == {"n2": [decision.reason(r["nodes"][1]["checks"][0])]}
    assert "- circuit breaker: 1 of 4 checked nodes failed (25%), not more than" in markdown.render_markdown(r)


def test_breaker_override_and_small_fleets():
    three_bad = [node("n1", "head"), node("n2", checks=[XID]), node("n3", checks=[XID]), node("n4", checks=[XID])]
    off = report(three_bad, breaker_threshold=0)
    assert off["breaker_tripped"] is False and sorted(off["unhealthy"]) == ["n2", "n3", "n4"]
    assert report(three_bad, breaker_threshold=75)["breaker_tripped"] is False
    pair = [node("n1", "head", [XID]), node("n2", checks=[XID])]
    assert report(pair)["breaker_tripped"] is False
    assert report(pair)["message"].startswith("health gate failed: head n1 is unhealthy")
    lone = [node("n1", "head", [XID])]
    assert report(lone)["breaker_tripped"] is False
    assert report(lone, breaker_min_nodes=1)["breaker_tripped"] is True
    with pytest.raises(ValueError, match="breaker_threshold"):
        report(lone, breaker_threshold=101)


def test_breaker_names_the_version_the_failing_nodes_share():
    nodes = fleet_nodes({"driver": "560.35.03"}, {"driver": "560.35.03"}, {"driver": "560.35.03"})
    for entry in nodes[1:]:
        entry["checks"] = good() + [check("nccl_busbw", "fail", "120 GB/s", 120.0, 460.0, "nccl_test")]
    r = report(nodes, fleet_expect={"driver": "560.35.03"})
    assert r["breaker_tripped"] is True
    assert "every failing node runs driver 560.35.03, which no passing node does" in r["message"]
