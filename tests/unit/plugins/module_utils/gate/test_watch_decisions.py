"""The node watcher's decisions (module_utils/gate/watch.py): findings, the log window, the fleet's
breaker through the GCS's key-value store, and the textfile."""

import json

import pytest

from ansible_collections.raygate.cluster.plugins.module_utils.gate import watch


class FakeGcs:
    """The adapter's surface over dicts: a key-value store with put-if-absent, and nodes."""

    def __init__(self, nodes, accept=True):
        self._nodes = nodes
        self.kv = {}
        self.accept = accept
        self.drained = []

    def nodes(self):
        return list(self._nodes)

    def kv_put(self, key, value, overwrite):
        if key in self.kv and not overwrite:
            return False
        added = key not in self.kv
        self.kv[key] = value
        return added

    def kv_get(self, key):
        return self.kv.get(key)

    def kv_keys(self, prefix):
        return [k for k in self.kv if k.startswith(prefix)]

    def kv_del(self, key):
        self.kv.pop(key, None)

    def drain(self, node_id, message, deadline_ms):
        self.drained.append((node_id, message, deadline_ms))
        return (True, "") if self.accept else (False, "the node is the head")


def cluster(n):
    nodes = [{"node_id": "%02x" % i * 4, "ip": "10.0.0.%d" % i, "alive": True, "head": i == 1} for i in range(1, n + 1)]
    return nodes


OPTS = {"window": 3600, "threshold": 50, "min_nodes": 3, "deadline": 30}


def test_findings_split_do_not_allocate_from_degraded():
    result = {
        "checks": [
            {"name": "xid", "status": "fail", "detail": "Xid 79 on GPU 3", "severity": "do-not-allocate"},
            {"name": "thermal_throttle", "status": "fail", "detail": "hot", "severity": "degraded"},
            {"name": "pcie_link", "status": "warn", "detail": "Gen4"},
            {"name": "gpu_count", "status": "pass", "detail": "8"},
        ]
    }
    take, report = watch.findings(result)
    assert take == ["xid: Xid 79 on GPU 3"]
    assert report == ["thermal_throttle: hot", "pcie_link: Gen4"]


def test_a_failure_without_severity_is_do_not_allocate():
    take, report = watch.findings({"checks": [{"name": "ecc", "status": "fail", "detail": "DBE"}]})
    assert take == ["ecc: DBE"] and report == []


def test_log_window_reads_since_the_last_run_with_an_overlap_and_the_gates_window_first():
    assert watch.log_window({}, 1000.0, 86400) == 86400
    assert watch.log_window({"last_run": 700.0}, 1000.0, 86400) == 300 + watch.LOG_OVERLAP_S
    # A clock that went back reads the whole first window again rather than nothing.
    assert watch.log_window({"last_run": 2000.0}, 1000.0, 86400) == 86400
    # A take-out the last run could not do: the gate's window again (0: since boot), so the Xid that
    # called for it is judged again.
    assert watch.log_window({"last_run": 700.0, "pending": ["xid: Xid 79"]}, 1000.0, 86400) == 86400
    assert watch.log_window({"last_run": 700.0, "pending": ["xid: Xid 79"]}, 1000.0, 0) == 0
    assert watch.log_window({"last_run": 700.0, "pending": []}, 1000.0, 0) == 300 + watch.LOG_OVERLAP_S


FLAPS = "link_flaps: mlx5_0:1 down 10 times in the last 2 min (more than 4 fails)"
SYMBOLS = "fabric_errors: mlx5_1:1 symbol_error +900 (450.0/h, max 120/h) in the last 2 min"


def test_fabric_growth_found_now_is_held_with_its_time_and_boot():
    take, held = watch.held_fabric(["xid: Xid 79 on GPU 3", FLAPS], [], 1000.0, 86400, "b1")
    assert take == ["xid: Xid 79 on GPU 3", FLAPS]
    assert held == [{"finding": FLAPS, "at": 1000.0, "boot_id": "b1"}]
    assert watch.held_fabric(["xid: Xid 79 on GPU 3"], [], 1000.0, 86400, "b1") == (["xid: Xid 79 on GPU 3"], [])


def test_held_fabric_growth_is_acted_on_while_a_gate_run_would_still_count_it():
    # The watcher's own window no longer shows it; the gate's (a day) does.
    held = [{"finding": FLAPS, "at": 1000.0, "boot_id": "b1"}]
    assert watch.held_fabric([], held, 1000.0 + 86400, 86400, "b1") == ([FLAPS], held)
    assert watch.held_fabric(["xid: Xid 79"], held, 1300.0, 86400, "b1") == (["xid: Xid 79", FLAPS], held)
    # Past the gate's window, or on another boot (the counters start again), it is gone.
    assert watch.held_fabric([], held, 1001.0 + 86400, 86400, "b1") == ([], [])
    assert watch.held_fabric([], held, 1300.0, 86400, "b2") == ([], [])
    # The gate's window 0 counts since boot: held for the whole boot. A boot id not read: kept.
    assert watch.held_fabric([], held, 1e9, 0, "b1") == ([FLAPS], held)
    assert watch.held_fabric([], held, 1300.0, 86400, None) == ([FLAPS], held)
    # A state file edited by hand, or of another version: nothing held from it.
    assert watch.held_fabric([], [{"finding": FLAPS}, "x", {"at": 1.0}], 1300.0, 86400, "b1") == ([], [])


def test_fresh_fabric_growth_replaces_what_was_held_for_its_check_only():
    held = [{"finding": FLAPS, "at": 1000.0, "boot_id": "b1"}, {"finding": SYMBOLS, "at": 1000.0, "boot_id": "b1"}]
    again = "link_flaps: mlx5_0:1 down 12 times in the last 2 min (more than 4 fails)"
    take, kept = watch.held_fabric([again], held, 1300.0, 86400, "b1")
    assert take == [again, SYMBOLS]
    assert kept == [{"finding": again, "at": 1300.0, "boot_id": "b1"}, held[1]]


def test_the_gates_fabric_window_comes_from_its_arguments():
    assert watch.gate_fabric_window({"fabric_window": "600"}) == 600
    assert watch.gate_fabric_window({}) == 86400


def test_breaker_allows_up_to_its_share_and_names_the_nodes_out():
    alive = ["10.0.0.%d" % i for i in range(1, 7)]
    claims = {"10.0.0.5": {"at": 900.0}, "10.0.0.6": {"at": 950.0}}
    ok, detail = watch.breaker(claims, alive, "10.0.0.4", 1000.0, 3600, 50, 3)
    assert ok, detail  # 3 of 6 is 50%: not over
    claims["10.0.0.4"] = {"at": 990.0}
    ok, detail = watch.breaker(claims, alive, "10.0.0.3", 1000.0, 3600, 50, 3)
    assert not ok
    assert "4 of 6" in detail and "10.0.0.4, 10.0.0.5, 10.0.0.6" in detail and "50%" in detail


def test_breaker_forgets_what_left_before_the_window_and_spares_small_clusters():
    alive = ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"]
    old = {"10.0.0.3": {"at": 0.0}, "10.0.0.4": {"at": 10.0}}
    assert watch.breaker(old, alive, "10.0.0.2", 5000.0, 3600, 50, 3)[0]
    # 3 nodes in all (the head, one out, this one): under min_nodes 4, never tripped.
    assert watch.breaker({"10.0.0.2": {"at": 99.0}}, ["10.0.0.1"], "10.0.0.3", 100.0, 3600, 10, 4)[0]
    assert not watch.breaker({"10.0.0.2": {"at": 99.0}}, ["10.0.0.1"], "10.0.0.3", 100.0, 3600, 10, 3)[0]


def test_take_out_claims_drains_and_releases_the_lock():
    gcs = FakeGcs(cluster(4))
    answer = watch.take_out(gcs, "10.0.0.3", ["xid: Xid 79"], OPTS, clock=lambda: 1000.0, sleep=None)
    assert answer["action"] == "drained", answer
    node_id, message, deadline = gcs.drained[0]
    assert node_id == "03030303" and message == "raygate-watch: xid: Xid 79" and deadline == 1030000
    assert watch.LOCK_KEY not in gcs.kv
    assert json.loads(gcs.kv[watch.CLAIM_PREFIX + "10.0.0.3"])["reason"] == message


def test_records_older_than_the_window_are_deleted_so_the_store_stays_bounded():
    # A fleet that replaces its nodes: 500 workers, each taken out once, ten minutes apart. The
    # breaker counts only the last hour's records; the store must not keep the rest for ever.
    gcs = FakeGcs(cluster(501))
    most = 0
    for i in range(2, 502):
        answer = watch.take_out(gcs, "10.0.0.%d" % i, ["xid: x"], OPTS, clock=lambda i=i: i * 600.0, sleep=None)
        assert answer["action"] == "drained", (i, answer)
        most = max(most, len(gcs.kv))
    # The records within the window (3600 s: this one and the six before it), and no lock left.
    assert most == 7 and len(gcs.kv) == 7, sorted(gcs.kv)
    assert sorted(watch.claims(gcs)) == ["10.0.0.%d" % i for i in range(495, 502)]


def test_pruning_keeps_what_the_breaker_still_counts():
    gcs = FakeGcs(cluster(4))
    for ip, at in (("10.0.0.2", 100.0), ("10.0.0.4", 3000.0)):
        gcs.kv[watch.CLAIM_PREFIX + ip] = json.dumps({"at": at})
    left = watch.prune(gcs, watch.claims(gcs), 3800.0, 3600)
    assert sorted(left) == ["10.0.0.4"] and sorted(gcs.kv) == [watch.CLAIM_PREFIX + "10.0.0.4"]


def test_watchers_one_after_another_stop_at_the_breakers_share():
    gcs = FakeGcs(cluster(6))
    answers = [
        watch.take_out(gcs, "10.0.0.%d" % i, ["xid: x"], OPTS, clock=lambda: 1000.0, sleep=None) for i in range(2, 7)
    ]
    assert [a["action"] for a in answers] == ["drained", "drained", "drained", "refused", "refused"]
    assert answers[3]["why"] == "breaker" and "4 of 6" in answers[3]["detail"]
    assert len(gcs.drained) == 3


def test_a_held_lock_is_waited_for_then_refused_and_a_stale_one_is_broken():
    gcs = FakeGcs(cluster(4))
    clock = {"t": 1000.0}

    def tick(seconds):
        clock["t"] += seconds

    gcs.kv[watch.LOCK_KEY] = json.dumps({"by": "10.0.0.2", "at": 1000.0})
    answer = watch.take_out(gcs, "10.0.0.3", ["xid: x"], OPTS, clock=lambda: clock["t"], sleep=tick)
    assert answer["action"] == "refused" and answer["why"] == "lock"
    assert not gcs.drained
    gcs.kv[watch.LOCK_KEY] = json.dumps({"by": "10.0.0.2", "at": clock["t"] - watch.LOCK_STALE_S - 1})
    answer = watch.take_out(gcs, "10.0.0.3", ["xid: x"], OPTS, clock=lambda: clock["t"], sleep=tick)
    assert answer["action"] == "drained", answer


def test_a_refused_drain_withdraws_the_claim_and_the_head_is_never_taken():
    gcs = FakeGcs(cluster(4), accept=False)
    answer = watch.take_out(gcs, "10.0.0.3", ["xid: x"], OPTS, clock=lambda: 1000.0, sleep=None)
    assert answer["action"] == "refused" and answer["why"] == "ray"
    assert not gcs.kv_keys(watch.CLAIM_PREFIX)
    assert watch.take_out(gcs, "10.0.0.1", ["xid: x"], OPTS, clock=lambda: 1000.0, sleep=None)["action"] == "none"


@pytest.mark.parametrize("state, present, absent", [
    ({"last_run": 5, "checks": {"xid": "fail"}, "take_out": ["xid: x"],
      "taken_out": {"check": "xid", "reason": 'raygate-watch: xid: "x"'}},
     ['raygate_watch_node_healthy{host="n3"} 0', 'raygate_watch_check_status{check="xid",host="n3"} 2',
      'raygate_watch_taken_out{check="xid",host="n3",reason="raygate-watch: xid: \\"x\\""} 1'],
     ["raygate_watch_drain_refused", "raygate_watch_gcs_up", "raygate_watch_raylet_up"]),
    ({"last_run": 5, "checks": {"xid": "pass"}, "refused": {"why": "breaker"}, "gcs_up": True, "redis_up": False,
      "raylet_up": False},
     ['raygate_watch_node_healthy{host="n3"} 1', 'raygate_watch_drain_refused{host="n3",why="breaker"} 1',
      'raygate_watch_gcs_up{host="n3"} 1', 'raygate_watch_redis_up{host="n3"} 0',
      'raygate_watch_raylet_up{host="n3"} 0'],
     ["raygate_watch_taken_out"]),
])  # fmt: skip
def test_textfile_says_the_verdict_and_what_was_done(state, present, absent):
    text = watch.render_textfile("n3", state)
    for line in present:
        assert line in text.splitlines()
    for name in absent:
        assert name not in text
    assert 'raygate_watch_last_run_seconds{host="n3"} 5' in text
