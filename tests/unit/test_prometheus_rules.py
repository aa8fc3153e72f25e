"""The collection's Prometheus alert rules (roles/raygate/files/prometheus/raygate-alerts.yml) pass
their promtool tests (tests/prometheus/raygate-alerts.test.yml): each alert fires when it should and
stays quiet when it should not.

promtool comes with Debian's prometheus package (the Makefile's APT_PACKAGES). Without it the test
fails in CI (CI=true), where a skip would hide that the rules were never tested, and skips elsewhere.
"""

import os
import shutil
import subprocess

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RULES = os.path.join(ROOT, "roles", "raygate", "files", "prometheus", "raygate-alerts.yml")
TESTS = os.path.join(ROOT, "tests", "prometheus", "raygate-alerts.test.yml")
ALERTS = [
    "RaygateHeadDown",
    "RaygateRedisDown",
    "RaygateNodeTakenOut",
    "RaygateDrainRefused",
    "RaygateHealthStale",
    "RaygateWatchSilent",
    "RaygateObjectSpillGrowing",
]


def promtool():
    found = shutil.which("promtool")
    if found:
        return found
    message = "promtool is not installed (apt-get install prometheus; make bootstrap does)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail("CI=true but " + message + ": the alert rules were NOT tested")
    pytest.skip(message)


def _load(path):
    with open(path) as fh:
        return yaml.safe_load(fh)


def test_the_rule_file_has_the_raygate_group_and_its_alerts():
    (group,) = _load(RULES)["groups"]
    assert group["name"] == "raygate"
    assert [rule["alert"] for rule in group["rules"]] == ALERTS


def test_every_alert_is_tested_firing_and_quiet():
    fired, quiet = set(), set()
    for case in _load(TESTS)["tests"]:
        for check in case["alert_rule_test"]:
            (fired if check["exp_alerts"] else quiet).add(check["alertname"])
    assert sorted(fired) == sorted(ALERTS) and sorted(quiet) == sorted(ALERTS)


def test_promtool_check_rules():
    args = [promtool(), "check", "rules", RULES]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS: %d rules found" % len(ALERTS) in proc.stdout


def test_promtool_test_rules():
    # Run from the test file's directory: its rule_files path is relative to it.
    proc = subprocess.run(
        [promtool(), "test", "rules", os.path.basename(TESTS)],
        cwd=os.path.dirname(TESTS),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout
