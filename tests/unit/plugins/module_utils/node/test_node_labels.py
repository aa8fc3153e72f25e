"""Ray node labels: the syntax Ray 2.60 checks, the labels file, the health labels and the selector a job writes.

The syntax cases are those Ray's own ``ray._private.label_utils`` accepts and refuses (checked
against Ray 2.60 by hand; Ray is not installed where these tests run).
"""

import pytest
import yaml

from ansible_collections.raygate.cluster.plugins.module_utils.node import labels as nl


@pytest.mark.parametrize(
    "key", ["rack", "a", "a.b", "a_b", "raygate.io/health", "ray.io/accelerator-type", "x/y", "a_b/c", "A" * 63]
)
def test_keys_ray_accepts(key):
    assert nl.key_error(key) is None


@pytest.mark.parametrize(
    "key, needle",
    [
        ("-a", "name '-a'"),
        ("a-", "name 'a-'"),
        ("A" * 64, "name"),
        ("raygate.io/", "name ''"),
        ("a/b/c", "prefix 'a/b'"),
        ("h\u00e9llo", "name"),
        ("rack\n", "name"),
        # Refused here although Ray 2.60's prefix pattern lets them through: empty parts.
        ("/c", "prefix ''"),
        ("a..b/c", "prefix 'a..b'"),
        (".".join(["a" * 60] * 5) + "/c", "253"),
        (7, "string"),
    ],
)
def test_keys_refused_say_why(key, needle):
    assert needle in nl.key_error(key)


@pytest.mark.parametrize("value", ["", "pass", "2026-07-29", "1785283200", "a.b", "a_b", "x" * 63])
def test_values_ray_accepts(value):
    assert nl.value_error(value) is None


@pytest.mark.parametrize("value", ["not ok", "-x", "x-", "x" * 64, "in(a)", "pass\n"])
def test_values_ray_refuses(value):
    assert repr(value) in nl.value_error(value)


def test_check_turns_integers_to_text_and_names_every_bad_label():
    assert nl.check({"n": 3, "s": "x"}, "labels") == {"n": "3", "s": "x"}
    with pytest.raises(ValueError) as err:
        nl.check({"ok": "x", "bad key": "x", "flag": True, "ratio": 0.5}, "status_labels")
    message = str(err.value)
    assert message.startswith("invalid Ray node label in status_labels: ")
    assert all(k in message for k in ("bad key", "flag", "ratio")) and "ok:" not in message


def test_check_refuses_rays_prefix_only_when_asked():
    assert nl.check({"ray.io/accelerator-type": "H100"}, "labels") == {"ray.io/accelerator-type": "H100"}
    with pytest.raises(ValueError, match="ray.io/ is Ray's own"):
        nl.check({"ray.io/accelerator-type": "H100"}, "status_labels", reserved_ok=False)


def test_merge_refuses_a_status_label_that_replaces_a_configured_one():
    assert nl.merge({"rack": "r1"}, {nl.HEALTH: "pass"}) == {"rack": "r1", nl.HEALTH: "pass"}
    with pytest.raises(ValueError, match="rack in both labels and status_labels"):
        nl.merge({"rack": "r1"}, {"rack": "r2"})


def test_labels_file_is_yaml_for_ray_and_remembers_the_status_keys():
    labels = {"rack": "r1", nl.HEALTH: "pass", nl.CHECKED_AT: "1785283200"}
    text = nl.render_file(labels, [nl.HEALTH, nl.CHECKED_AT])
    assert yaml.safe_load(text) == labels  # what Ray's parse_node_labels_from_yaml_file reads
    assert nl.status_from_file(text) == {nl.HEALTH: "pass", nl.CHECKED_AT: "1785283200"}
    assert nl.status_from_file(nl.render_file({"rack": "r1"}, [])) == {}


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        '{"rack": "r1"}\n',  # written before status labels were
        "rack: r1\n",
        "# raygate-status-labels: [oops\n{}\n",
        '# raygate-status-labels: ["a"]\n[]\n',
    ],
)
def test_a_labels_file_raygate_did_not_write_gives_no_status_labels(text):
    assert nl.status_from_file(text) == {}


def test_health_labels_carry_the_verdict_the_time_and_the_date_in_utc():
    # 2026-07-29 23:30 UTC: already the 30th east of Greenwich, still the 29th here.
    labels = nl.health("pass", 1785367800.7, "d88dcaf0b538")
    assert labels == {
        "raygate.io/health": "pass",
        "raygate.io/checked-at": "1785367800",
        "raygate.io/checked-date": "2026-07-29",
        "raygate.io/fingerprint": "d88dcaf0b538",
    }
    assert nl.check(labels, "status_labels", reserved_ok=False) == labels
    assert nl.FINGERPRINT not in nl.health("warn", 0)


def report(**over):
    """What raygate.cluster.health_report returns, as far as the labels need it."""
    out = {"checked_at": 1785283200, "healthy": ["w0", "w1"], "warned": {}, "breaker_tripped": False}
    out.update(over)
    return out


def test_from_report_labels_a_node_checked_now_that_passed():
    labels = nl.from_report(report(), "w1", True, "abc")
    assert labels == {
        nl.HEALTH: "pass",
        nl.CHECKED_AT: "1785283200",
        nl.CHECKED_DATE: "2026-07-29",
        nl.FINGERPRINT: "abc",
    }
    assert nl.from_report(report(warned={"w1": ["thermal: hot"]}), "w1", True)[nl.HEALTH] == "warn"


@pytest.mark.parametrize(
    "gate, host, checked",
    [
        (report(), "w0", False),  # a running member the gate did not check again: it keeps what it has
        (report(), "w9", True),  # failed: not healthy
        (report(breaker_tripped=True), "w1", True),  # everybody is "healthy" then, and the run stops
        ({"skipped": True}, "w1", True),  # the report task did not run
        (None, "w1", True),
    ],
)
def test_from_report_gives_nothing_without_a_pass_in_this_run(gate, host, checked):
    assert nl.from_report(gate, host, checked) == {}


def test_the_selector_for_checked_today_or_yesterday():
    now = 1785369600 + 3600  # 2026-07-30 01:00 UTC
    assert nl.recent_dates(now) == ["2026-07-30", "2026-07-29"]
    # Ray 2.60 keeps a space after the comma as part of the value: none is written.
    assert nl.in_selector(nl.recent_dates(now)) == "in(2026-07-30,2026-07-29)"


def test_parse_file_reads_a_file_from_before_status_labels():
    assert nl.parse_file('{\n  "rack": "r1"\n}\n') == ({"rack": "r1"}, {})
    text = nl.render_file({"rack": "r1", nl.HEALTH: "pass"}, [nl.HEALTH, "gone"])
    assert nl.parse_file(text) == ({"rack": "r1", nl.HEALTH: "pass"}, {nl.HEALTH: "pass"})
