"""Day-2 scenarios on one real 4-node sandbox cluster, in order (each starts from the state the
previous one left): upgrade (no-op, bad version, injected start failure with rollback, the real
upgrade), scale 3 -> 4, remove_node (head refused, worker drained), scale back with --limit, and
a health re-check that evicts a worker with an injected Xid; then one run at a time (the cluster lock):
a second site.yml waits for the first (and one told to wait less stops, naming it), site.yml waits for
a teardown, and the lock of a killed run is taken over by the next; last, upgrades with nodes down (the
rollback above runs with one dead): one worker dead from the start and one going dark mid-run are named
with the version they were left on, and the next site.yml brings them to the cluster's.

Run on its own (`pytest tests/integration/day2`): it owns the sandbox while it runs.
"""

import json
import os
import re
import signal
import subprocess
import threading

import pytest
from conftest import ROOT, SANDBOX, forget_connection, link, needs_root, node, recap, run, scratch_inventory, wait_until

pytestmark = needs_root

PREV = os.environ.get("RAYGATE_PREV_RAY_VERSION", "2.59.0")
NEW = "2.60.0"
NODES = {1: "198.18.0.11", 2: "198.18.0.12", 3: "198.18.0.13", 4: "198.18.0.14"}
HOSTS_3 = """---
ray_cluster:
  children:
    ray_head:
      hosts:
        node1: {ansible_host: 198.18.0.11}
    ray_workers:
      hosts:
        node2: {ansible_host: 198.18.0.12}
        node3: {ansible_host: 198.18.0.13}
"""
HOSTS_4 = (
    HOSTS_3
    + """        node4: {ansible_host: 198.18.0.14}
new:
  hosts:
    node4:
"""
)


@pytest.fixture(scope="module")
def day2(tmp_path_factory):
    """4 sandbox nodes and two inventories sharing one token: 3 nodes, and 4 with node4 'new'."""
    if not any(name.startswith("ray-%s-" % PREV) or name.startswith("ray-%s-" % PREV.replace(".", "_"))
               for name in os.listdir("/srv/raygate/wheelhouse")):  # fmt: skip
        pytest.fail("the wheelhouse lacks Ray %s: run make wheelhouse" % PREV)
    rc, out = run([SANDBOX, "up", "4"], timeout=300)
    assert rc == 0, out
    base = tmp_path_factory.mktemp("day2")
    inventories = {}
    for name, hosts in (("three", HOSTS_3), ("four", HOSTS_4)):
        inventories[name] = scratch_inventory(base / name, base, "day2", hosts=hosts)
    state = {"inv": inventories, "base": base}
    yield state
    # No teardown.yml first: `sandbox.sh down` kills every node's processes with its namespaces, and
    # nothing was asserted of that run (teardown.yml is judged by the tests that run it).
    run([SANDBOX, "down"], timeout=300)


def play(day2, name, *extra, inv="three"):
    return run(
        [
            os.path.join(ROOT, ".venv", "bin", "ansible-playbook"),
            "-i",
            day2["inv"][inv],
            os.path.join(ROOT, name),
            *extra,
        ],
        timeout=1200,
    )


def raylets():
    """{node index: (raylet pid, the venv it runs from)} for the nodes running a raylet."""
    found = {}
    for index in NODES:
        rc, out = node(index, "for p in $(pgrep -x raylet); do echo $p $(readlink -f /proc/$p/exe); done")
        for line in out.split("\n"):
            match = re.match(r"(\d+) (/opt/raygate/ray-[^/]+)/", line.strip())
            if match:
                found[index] = (int(match.group(1)), os.path.basename(match.group(2)))
    return found


def alive_ips():
    """The alive nodes' IPs as the head's state API lists them (with the cluster token)."""
    rc, out = node(
        1,
        'curl -sf --cacert /etc/raygate/tls/ca.crt -H "Authorization: Bearer $(cat /etc/raygate/auth_token)" '
        "'https://198.18.0.11:8265/api/v0/nodes?limit=100&detail=true' || echo FAILED",
    )
    assert "FAILED" not in out, out
    nodes = json.loads(out)["data"]["result"]["result"]
    return sorted(n["node_ip"] for n in nodes if n["state"] == "ALIVE")


def run_summary(day2, playbook):
    """What the last run of PLAYBOOK wrote as its run summary."""
    return json.loads((day2["base"] / "runs" / ("%s.json" % playbook)).read_text())


def firewall_sources(index):
    rc, out = node(index, "nft list table inet raygate 2>/dev/null")
    return set(re.findall(r"198\.18\.0\.\d+", out))


def test_bring_up_on_the_previous_version(day2):
    rc, out = play(day2, "site.yml", "-e", "raygate_ray_version=" + PREV)
    assert rc == 0, out[-4000:]
    running = raylets()
    assert sorted(running) == [1, 2, 3], running
    assert {run_from for pid, run_from in running.values()} == {"ray-%s-py3.11" % PREV}
    assert alive_ips() == [NODES[1], NODES[2], NODES[3]]


def test_upgrade_to_the_running_version_changes_nothing(day2):
    before = raylets()
    rc, out = play(day2, "upgrade.yml", "-e", "raygate_ray_version=" + PREV)
    assert rc == 0, out[-4000:]
    assert "already runs ray-%s" % PREV in out
    assert all(int(r["changed"]) == 0 for r in recap(out).values()), out[-2000:]
    assert raylets() == before


def test_upgrade_to_a_version_that_does_not_exist_fails_before_any_stop(day2):
    before = raylets()
    rc, out = play(day2, "upgrade.yml", "-e", "raygate_ray_version=2.99.0")
    assert rc != 0
    assert "2.99.0" in out and "wheelhouse" in out, out[-3000:]
    assert raylets() == before
    for index in (1, 2, 3):
        rc, listing = node(index, "ls /opt/raygate")
        assert "2.99.0" not in listing


def test_upgrade_with_a_failing_start_rolls_back(day2):
    # Stage the new version beside the old one (no downtime), then break it on node3.
    before = raylets()
    rc, out = play(day2, "upgrade.yml", "-e", "raygate_ray_version=" + NEW, "-e", "raygate_upgrade_switch=false")
    assert rc == 0, out[-4000:]
    assert raylets() == before
    broken = "/opt/raygate/ray-%s-py3.11/bin/ray" % NEW
    rc, out = node(3, "mv %s %s.saved && printf '#!/bin/sh\\necho injected failure >&2\\nexit 3\\n' > %s && chmod +x %s"
                   % (broken, broken, broken, broken))  # fmt: skip
    assert rc == 0, out
    # The rollback works with a node down (issue 44): node2 is dead from the start, as a node that
    # died between runs is (no connection to it left open: the last test keeps that case).
    forget_connection(NODES[2])
    link(2, False)
    try:
        rc, out = play(day2, "upgrade.yml", "-e", "raygate_ray_version=" + NEW)
        assert "rolled back" in out or "runs ray-%s-py3.11 again" % PREV in out, out[-4000:]
        assert "node3" in out[-3000:]
        # A failed upgrade still ends with its run summary (rc 2, result failed), node2 named.
        assert rc == 2, out[-4000:]
        got = run_summary(day2, "upgrade")
        assert got["result"] == "failed", got
        assert "every node in the run runs ray-%s-py3.11 again" % PREV in got["message"], got
        assert got["out"]["node2"]["status"] == "unreachable", got
        running = raylets()
        assert {i: running[i][1] for i in (1, 3)} == {1: "ray-%s-py3.11" % PREV, 3: "ray-%s-py3.11" % PREV}, running
        assert alive_ips() == [NODES[1], NODES[3]]
        for index in (1, 3):
            rc, target = node(index, "readlink /opt/raygate/current")
            assert target.strip().endswith("ray-%s-py3.11" % PREV), (index, target)
    finally:
        link(2, True)
        node(3, "mv %s.saved %s" % (broken, broken))


def test_upgrade_switches_every_node_and_reports_the_downtime(day2):
    rc, out = play(day2, "upgrade.yml", "-e", "raygate_ray_version=" + NEW)
    assert rc == 0, out[-4000:]
    assert re.search(r"Downtime: \d+\.\d s", out), out[-3000:]
    running = raylets()
    assert sorted(running) == [1, 2, 3], running
    assert {run_from for pid, run_from in running.values()} == {"ray-%s-py3.11" % NEW}
    assert alive_ips() == [NODES[1], NODES[2], NODES[3]]


def latest_checks(day2, host):
    """HOST's checks in the newest health report."""
    reports = sorted((day2["base"] / "health").iterdir())
    report = json.loads((reports[-1] / "report.json").read_text())
    return [node for node in report["nodes"] if node["host"] == host][0]["checks"]


def test_scale_adds_a_node_without_restarting_the_members(day2):
    before = raylets()
    # node4 joins alone: a member runs the network test with it, as a known-good partner.
    rc, out = play(day2, "scale.yml", "-e", "raygate_health_pair_partner=node2", inv="four")
    assert rc == 0, out[-4000:]
    pairs = [c for c in latest_checks(day2, "node4") if c["source"] == "nccl_pairs"]
    assert pairs and all(c["status"] == "pass" for c in pairs), pairs
    assert any(c["name"] == "nccl_pair_transport" for c in pairs), pairs
    after = raylets()
    assert sorted(after) == [1, 2, 3, 4], after
    assert all(after[i] == before[i] for i in (1, 2, 3)), (before, after)
    assert after[4][1] == "ray-%s-py3.11" % NEW
    assert alive_ips() == sorted(NODES.values())
    for index in (1, 2, 3):
        assert NODES[4] in firewall_sources(index), index


def test_scale_of_a_member_changes_nothing(day2):
    before = raylets()
    rc, out = play(day2, "scale.yml", inv="four")
    assert rc == 0, out[-4000:]
    assert all(int(r["changed"]) == 0 for r in recap(out).values()), out[-3000:]
    assert raylets() == before


def test_remove_node_refuses_the_head(day2):
    before = raylets()
    rc, out = play(day2, "remove_node.yml", "-e", "raygate_remove=node1", inv="four")
    assert rc != 0
    assert "refusing to remove the head node1" in out, out[-3000:]
    assert raylets() == before


def test_remove_node_drains_and_closes_the_firewall(day2):
    before = raylets()
    rc, out = play(day2, "remove_node.yml", "-e", "raygate_remove=node3", inv="four")
    assert rc == 0, out[-4000:]
    assert "drained" in out, out[-3000:]
    after = raylets()
    assert 3 not in after
    assert all(after[i] == before[i] for i in (1, 2, 4)), (before, after)
    assert alive_ips() == [NODES[1], NODES[2], NODES[4]]
    for index in (1, 2, 4):
        assert NODES[3] not in firewall_sources(index), index
    rc, leftover = node(3, "pgrep -a -f 'ray[:/]'; ls /etc/raygate 2>/dev/null; nft list tables")
    assert "raygate" not in leftover and "ray::" not in leftover, leftover


def test_scale_with_limit_refuses_a_node_on_another_version(day2):
    # Only node3 is in the run: the version it would join with is checked against the head itself.
    before = raylets()
    rc, out = play(day2, "scale.yml", "--limit", "node3", "-e", "raygate_ray_version=" + PREV, inv="four")
    assert rc != 0
    assert "node3 would join with Ray %s, but the cluster runs Ray %s" % (PREV, NEW) in out, out[-3000:]
    assert raylets() == before
    rc, leftover = node(3, "ls /etc/raygate 2>/dev/null; nft list tables")
    assert "raygate" not in leftover, leftover


def test_scale_with_limit_brings_a_node_back(day2):
    before = raylets()
    rc, out = play(day2, "scale.yml", "--limit", "node3", inv="four")
    assert rc == 0, out[-4000:]
    after = raylets()
    assert all(after[i] == before[i] for i in (1, 2, 4)), (before, after)
    assert 3 in after
    assert alive_ips() == sorted(NODES.values())
    # The members outside the run (--limit) admit node3 again.
    for index in (1, 2, 4):
        assert NODES[3] in firewall_sources(index), index
    # Added, not merely restarted: its NCCL environment (removed with it) is back.
    rc, env = node(3, "cat /etc/raygate/nccl.env")
    assert rc == 0 and "NCCL_" in env, env
    # Alone and without a partner: the report says its network went untested.
    skipped = [c for c in latest_checks(day2, "node3") if c["source"] == "nccl_pairs"]
    assert [c["status"] for c in skipped] == ["skip"], skipped
    assert "raygate_health_pair_partner" in skipped[0]["detail"]


def test_recheck_evicts_a_worker_with_an_xid(day2):
    scenario = day2["base"] / "xid.json"
    scenario.write_text(
        json.dumps({"gpu": {"model": "H100", "count": 8, "faults": [{"type": "xid", "xid": 79, "gpu": 3}]}})
    )
    rc, out = run([SANDBOX, "scenario", "4", str(scenario)], timeout=120)
    assert rc == 0, out
    before = raylets()
    rc, out = play(day2, "health.yml", "-e", "raygate_evict_unhealthy=true", inv="four")
    assert rc == 0, out[-4000:]
    after = raylets()
    assert 4 not in after
    assert all(after[i] == before[i] for i in (1, 2, 3)), (before, after)
    assert alive_ips() == [NODES[1], NODES[2], NODES[3]]
    reports = sorted((day2["base"] / "health").iterdir())
    evicted = json.loads((reports[-1] / "evicted.json").read_text())
    assert evicted["evicted"] == ["node4"]
    assert any("Xid 79" in reason for reason in evicted["reasons"]["node4"]), evicted


# -- one run at a time (issue 44): the cluster lock on the head -------------------------------------
LOCK = "/var/lib/raygate/cluster.lock"


class Background:
    """A playbook run in the background, in a session of its own (so that it can be stopped,
    continued or killed whole), its output collected line by line."""

    def __init__(self, day2, name, *extra, inv="three"):
        args = [
            os.path.join(ROOT, ".venv", "bin", "ansible-playbook"),
            "-i",
            day2["inv"][inv],
            os.path.join(ROOT, name),
        ]
        env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
        env["ANSIBLE_COLLECTIONS_PATH"] = os.path.join(ROOT, ".build", "collections")
        self.proc = subprocess.Popen([*args, *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env=env, cwd=ROOT, stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        self.lines = []
        self.reader = threading.Thread(target=lambda: self.lines.extend(self.proc.stdout), daemon=True)
        self.reader.start()

    @property
    def out(self):
        return "".join(self.lines)

    def signal(self, sig):
        os.killpg(self.proc.pid, sig)

    def finish(self, timeout=1200):
        rc = self.proc.wait(timeout=timeout)
        self.reader.join(timeout=60)
        return rc, self.out


def flat(out):
    """OUT on one line: Ansible may wrap a warning."""
    return " ".join(out.split())


def lock_holder():
    rc, out = node(1, "cat %s 2>/dev/null || true" % LOCK)
    return json.loads(out) if out.strip().startswith("{") else None


def holding(run, playbook):
    """Whether RUN holds the cluster lock, under its own process id."""
    holder = lock_holder()
    return bool(holder and holder["pid"] == run.proc.pid and holder["playbook"] == playbook)


def stopped_holder(day2, name, playbook):
    """A run of NAME that has taken the lock, stopped (SIGSTOP) there: it holds the lock until continued."""
    first = Background(day2, name)
    wait_until("%s holds the cluster lock" % name, lambda: holding(first, playbook) or first.proc.poll() is not None)
    assert first.proc.poll() is None, first.out[-3000:]
    first.signal(signal.SIGSTOP)
    return first


def waits_behind(day2, holder, name):
    """Start NAME while HOLDER (stopped) holds the lock; once NAME says it waits, let HOLDER go on.
    Both must end well: returns NAME's (rc, output)."""
    try:
        waiter = Background(day2, name)
        wait_until("%s waits for the cluster lock" % name, lambda: "waiting for the cluster lock" in waiter.out)
    finally:
        holder.signal(signal.SIGCONT)
    rc, out = holder.finish()
    assert rc == 0, out[-4000:]
    rc, out = waiter.finish()
    assert rc == 0, out[-4000:]
    return rc, out


def test_a_second_site_run_waits_for_the_first_then_changes_nothing(day2):
    before = raylets()
    first = stopped_holder(day2, "site.yml", "site")
    try:
        # Waiting less than the holder holds: refused, naming the holder, nothing changed.
        rc, out = play(day2, "site.yml", "-e", "raygate_cluster_lock_wait=5")
        assert rc == 2, out[-4000:]
        held = r"the cluster lock is held by site\.yml run by \S+ on \S+ \(pid %d\)" % first.proc.pid
        assert re.search(held, flat(out)), out[-3000:]
        assert "changed nothing" in flat(out) and "that run is still going" in flat(out)
        assert raylets() == before
        # Its own summary says so (the previous run's would otherwise stay in place), naming the holder.
        summary = run_summary(day2, "site")
        assert summary["result"] == "busy" and re.search(held, summary["message"]), summary
        assert {e["status"] for e in summary["out"].values()} == {"busy"}, summary
    except BaseException:
        first.signal(signal.SIGCONT)
        raise
    # With the default wait it waits for the first run.
    rc, out = waits_behind(day2, first, "site.yml")
    assert all(r["changed"] == "0" for r in recap(out).values()), recap(out)
    assert raylets() == before
    assert lock_holder() is None


def test_site_during_teardown_waits_and_brings_the_whole_cluster_up(day2):
    down = stopped_holder(day2, "teardown.yml", "teardown")
    waits_behind(day2, down, "site.yml")
    # Nothing half-up: the teardown ended before site.yml began, which brought every node up.
    assert sorted(raylets()) == [1, 2, 3]
    assert alive_ips() == [NODES[1], NODES[2], NODES[3]]
    assert lock_holder() is None


def test_the_lock_of_a_killed_run_is_taken_over_by_the_next(day2):
    before = raylets()
    killed = Background(day2, "site.yml")
    wait_until("site.yml holds the cluster lock", lambda: holding(killed, "site") or killed.proc.poll() is not None)
    killed.signal(signal.SIGKILL)
    killed.finish()
    # ansible-core's workers run in sessions of their own: end the killed run's, which would wait
    # forever on the pipe to their dead parent.
    run(["pkill", "-9", "-f", "ansible-playbook -i %s " % day2["inv"]["three"]])
    assert lock_holder()["pid"] == killed.proc.pid  # left behind
    # Its process is gone from this controller: taken over at once, whatever raygate_cluster_lock_stale.
    rc, out = play(day2, "site.yml")
    assert rc == 0, out[-4000:]
    taken = r"took over the cluster lock of site\.yml run by \S+ on \S+ \(pid %d\)" % killed.proc.pid
    assert re.search(taken, flat(out)), out[-4000:]
    assert all(r["changed"] == "0" for r in recap(out).values()), recap(out)
    assert raylets() == before
    assert lock_holder() is None


# -- an upgrade with nodes down (issue 44): one worker dead from the start, one going dark mid-run ----
HEALTHY = {"gpu": {"model": "H100", "count": 8}}


def test_upgrade_with_a_dead_and_a_dark_worker_upgrades_the_others_and_names_them(day2):
    # node4 (taken out by the re-check above, on the new version) is dead from the start; node3
    # goes dark once the workers have stopped. The run goes back to the previous version: the
    # wheelhouse has two, and the switch is the same either way. node4 died between runs (no SSH
    # connection to it left open); node3 goes dark under the run's live one (the keepalives' case).
    forget_connection(NODES[4])
    link(4, False)
    upgrade = None
    try:
        upgrade = Background(day2, "upgrade.yml", "-e", "raygate_ray_version=" + PREV, inv="four")
        wait_until("upgrade.yml stops node3's worker",
                   lambda: upgrade.proc.poll() is not None or 3 not in raylets(), timeout=900)  # fmt: skip
        assert upgrade.proc.poll() is None, upgrade.out[-4000:]
        link(3, False)
        rc, out = upgrade.finish()
        assert rc == 0, out[-4000:]
        got = run_summary(day2, "upgrade")
        assert got["result"] == "degraded" and got["in"] == ["node1", "node2"], got
        assert got["out"]["node3"]["status"] == "unreachable" and got["out"]["node4"]["status"] == "unreachable", got
        # Named with the version each was left on (node4's was never read: it did not answer).
        assert got["left_on"] == {"node3": "ray-%s-py3.11" % NEW, "node4": None}, got
        assert "node3 on ray-%s-py3.11" % NEW in flat(got["message"]), got["message"]
        running = raylets()
        assert {i: running[i][1] for i in (1, 2)} == {1: "ray-%s-py3.11" % PREV, 2: "ray-%s-py3.11" % PREV}, running
        assert alive_ips() == [NODES[1], NODES[2]]
    finally:
        if upgrade is not None and upgrade.proc.poll() is None:
            upgrade.signal(signal.SIGKILL)
        link(3, True)
        link(4, True)


def test_the_next_site_run_brings_the_nodes_left_behind_to_the_new_version(day2):
    path = day2["base"] / "healthy.json"
    path.write_text(json.dumps(HEALTHY))
    rc, out = run([SANDBOX, "scenario", "4", str(path)], timeout=120)
    assert rc == 0, out
    before = raylets()
    rc, out = play(day2, "site.yml", "-e", "raygate_ray_version=" + PREV, inv="four")
    assert rc == 0, out[-4000:]
    assert run_summary(day2, "site")["result"] == "complete"
    after = raylets()
    assert sorted(after) == [1, 2, 3, 4], after
    assert {i: after[i] for i in (1, 2)} == {i: before[i] for i in (1, 2)}, "an upgraded node restarted"
    assert {run_from for pid, run_from in after.values()} == {"ray-%s-py3.11" % PREV}
    assert alive_ips() == sorted(NODES.values())
