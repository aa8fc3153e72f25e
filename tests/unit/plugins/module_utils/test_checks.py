"""The check-result model: result shape, verdict precedence, numeric comparisons."""

import pytest

from ansible_collections.raygate.cluster.plugins.module_utils import checks


def test_passing_result_has_exactly_the_five_keys():
    r = checks.result("ecc", "pass", "0 uncorrectable", value=0, threshold=0)
    assert r == {"name": "ecc", "status": "pass", "detail": "0 uncorrectable", "value": 0, "threshold": 0}


@pytest.mark.parametrize("status, severity", [("fail", "do-not-allocate"), ("warn", "degraded")])
def test_failing_result_carries_a_default_severity(status, severity):
    r = checks.result("ecc", status, "2 uncorrectable", value=2, threshold=0)
    assert r["severity"] == severity and "action" not in r


def test_result_keeps_given_severity_and_action_only_when_it_fails():
    r = checks.result("xid", "fail", "Xid 79", severity="degraded", action="reset the GPU")
    assert (r["severity"], r["action"]) == ("degraded", "reset the GPU")
    ok = checks.result("xid", "pass", "none", severity="degraded", action="reset the GPU")
    assert "severity" not in ok and "action" not in ok


def test_result_rejects_unknown_severity():
    with pytest.raises(ValueError):
        checks.result("x", "fail", "d", severity="critical")


@pytest.mark.parametrize("status", ["ok", "FAIL", "", None])
def test_result_rejects_unknown_status(status):
    with pytest.raises(ValueError):
        checks.result("x", status, "d")


@pytest.mark.parametrize(
    "statuses, expected",
    [
        ([], "pass"),
        (["skip", "skip"], "pass"),
        (["pass", "skip"], "pass"),
        (["pass", "warn", "skip"], "warn"),
        (["warn", "fail", "pass"], "fail"),
        (["fail"], "fail"),
    ],
)
def test_verdict(statuses, expected):
    assert checks.verdict([checks.result("c%d" % i, s, "") for i, s in enumerate(statuses)]) == expected


@pytest.mark.parametrize(
    "value, threshold, op, status",
    [
        (16, 16, ">=", "pass"),
        (8, 16, ">=", "fail"),
        (0, 0, "<=", "pass"),
        (3, 0, "<=", "fail"),
        (4, 4, "==", "pass"),
        (3, 4, "==", "fail"),
    ],
)
def test_compare(value, threshold, op, status):
    r = checks.compare("pcie_width", value, threshold, op, unit="lanes")
    assert r["status"] == status
    assert r["value"] == value and r["threshold"] == threshold
    assert "lanes" in r["detail"]


def test_compare_severity_and_custom_details():
    bad = checks.compare("temp", 91, 85, "<=", unit="C", detail_bad="too hot", severity="warn")
    assert bad["status"] == "warn" and bad["detail"] == "too hot"
    ok = checks.compare("temp", 40, 85, "<=", detail_ok="cool")
    assert ok["status"] == "pass" and ok["detail"] == "cool"


def test_compare_missing_value_is_skip():
    r = checks.compare("ecc", None, 0, "<=")
    assert r["status"] == "skip" and r["value"] is None


@pytest.mark.parametrize("op, severity", [("<", "fail"), (">=", "pass")])
def test_compare_rejects_bad_op_or_severity(op, severity):
    with pytest.raises(ValueError):
        checks.compare("x", 1, 1, op, severity=severity)


def test_reason_names_the_check_and_its_detail():
    assert checks.reason(checks.result("xid", "fail", "Xid 79 on GPU 2")) == "xid: Xid 79 on GPU 2"
    assert checks.reason(checks.result("xid", "fail", "")) == "xid"
