"""Scenario `systemd`: raygate with the systemd supervisor on nodes that boot systemd as PID 1
(sandbox.sh up 2 --systemd: systemd-nspawn containers in the nodes' network namespaces).
In order, on one 2-node cluster: site.yml enables and starts the units; a re-run restarts
nothing; a raylet killed with SIGKILL is restarted by systemd and its node rejoins; a rebooted
node comes back with its firewall and its Ray node and rejoins, and a re-run still changes
nothing; upgrade.yml switches the units to another Ray version; the node watcher's timer takes a
worker with an Xid out of Ray and systemd does not restart it; teardown disables and removes the
units (the watcher's too) and leaves nothing, twice.

Run on its own (`pytest tests/integration/systemd`): it owns the sandbox while it runs.
"""

import json
import os
import re

import pytest
from conftest import ROOT, SANDBOX, STATE, needs_root, node, run, wait_until
from systemd_nodes import (
    NODES,
    WAIT,
    alive_ips,
    changed_nothing,
    killed_raylet_comes_back,
    nothing_left,
    raylet,
    site_changes_nothing,
    unit,
    units_run_ray,
    up,
    write_inventory,
)

# No skip when systemd-nspawn is missing: `make bootstrap` installs it, and `up --systemd` says so.
pytestmark = needs_root

# The version upgrade.yml switches to (make systemd downloads it into the wheelhouse).
OTHER = os.environ.get("RAYGATE_PREV_RAY_VERSION", "2.59.0")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    up()
    state = {"inv": write_inventory(tmp_path_factory.mktemp("systemd"))}
    yield state
    if os.path.exists(STATE):  # the last test takes the sandbox down itself
        play(state, "teardown.yml")
        run([SANDBOX, "down"], timeout=300)


def play(cluster, name, *extra):
    playbook = os.path.join(ROOT, ".venv", "bin", "ansible-playbook")
    return run([playbook, "-i", cluster["inv"], os.path.join(ROOT, name), *extra], timeout=1200)


def site(cluster):
    """The play function site_changes_nothing takes: playbook NAME (no .yml) on this cluster."""
    return lambda name, *extra: play(cluster, name + ".yml", *extra)


def test_site_enables_and_starts_the_units(cluster):
    rc, out = play(cluster, "site.yml")
    assert rc == 0, out[-4000:]
    units_run_ray()
    assert alive_ips() == sorted(NODES.values())


def test_the_unit_is_sandboxed_better_than_exposed(cluster):
    # systemd's own judgement of the unit (0 safe .. 10 unsafe; 7 and up is EXPOSED or UNSAFE). The
    # score goes to artifacts/security.json for docs/SECURITY.md.
    rc, out = node(1, "systemd-analyze security --no-pager raygate-ray.service")
    found = re.search(r"Overall exposure level for raygate-ray.service: ([0-9.]+) (\w+)", out)
    assert rc == 0 and found, out[-3000:]
    score, verdict = float(found.group(1)), found.group(2)
    rc, version = node(1, "systemctl --version | head -1")
    os.makedirs(os.path.join(ROOT, "artifacts"), exist_ok=True)
    with open(os.path.join(ROOT, "artifacts", "security.json"), "w") as fh:
        figures = {"unit": "raygate-ray.service", "exposure": score, "verdict": verdict, "systemd": version.strip()}
        json.dump(figures, fh)
    assert score < 7.0 and verdict not in ("EXPOSED", "UNSAFE"), out[-3000:]


def test_rerun_restarts_nothing(cluster):
    site_changes_nothing(site(cluster))


def test_killed_raylet_is_restarted_by_systemd_and_rejoins(cluster):
    killed_raylet_comes_back(2)
    assert raylet(1)


def test_killed_head_gcs_heals_under_systemd(cluster):
    # The head's unit restarts the head by itself (a new cluster); one site.yml brings every
    # worker of the dead session back into it, as under the process supervisor.
    old = raylet(1)
    rc, out = node(1, "pkill -KILL -x gcs_server")
    assert rc == 0, out
    wait_until("a new raylet on the head", lambda: (raylet(1) or 0) not in (0, old) and raylet(1), timeout=WAIT)
    rc, out = play(cluster, "site.yml")
    assert rc == 0, out[-4000:]
    wait_until("every node alive in the new cluster", lambda: alive_ips() == sorted(NODES.values()), timeout=WAIT)
    assert all(unit(index)["active"] == "active" for index in NODES)
    site_changes_nothing(site(cluster))


def test_rebooted_node_comes_back_firewalled_and_rejoins(cluster):
    head_before = raylet(1)
    rc, out = run([SANDBOX, "reboot", "2"], timeout=600)
    assert rc == 0, out
    wait_until("the unit active after the reboot", lambda: unit(2)["active"] == "active", timeout=WAIT)
    wait_until("a raylet on node2 after the reboot", lambda: raylet(2), timeout=WAIT)
    # The boot unit loaded the saved rules before Ray started: the node is never unguarded.
    assert unit(2, "raygate-firewall.service")["active"] == "active"
    rc, rules = node(2, "nft list table inet raygate")
    assert rc == 0 and NODES[1] in rules, rules
    wait_until("node2 alive after the reboot", lambda: alive_ips() == sorted(NODES.values()), timeout=WAIT)
    assert raylet(1) == head_before
    # The state raygate keeps in /run is gone with the reboot; the unit remembers what was started.
    site_changes_nothing(site(cluster))


def test_upgrade_switches_the_units_to_the_other_version(cluster):
    # Any other pinned version goes through the same switch: here the previous one (make day2's).
    rc, out = play(cluster, "upgrade.yml", "-e", "raygate_ray_version=" + OTHER)
    assert rc == 0, out[-4000:]
    for index in NODES:
        assert unit(index)["active"] == "active", index
        rc, exe = node(index, "readlink -f /proc/$(pgrep -x raylet)/exe")
        assert "/ray-%s-" % OTHER in exe, (index, exe)
    wait_until("both nodes alive on Ray %s" % OTHER, lambda: alive_ips() == sorted(NODES.values()), timeout=WAIT)
    # The units start `current`: a re-run on the new pin restarts nothing.
    site_changes_nothing(site(cluster), "-e", "raygate_ray_version=" + OTHER)


def test_the_watcher_s_timer_takes_a_worker_out_and_systemd_does_not_bring_it_back(cluster):
    # raygate_watch under systemd: a oneshot service on a timer. An Xid on the worker takes it out
    # of Ray within one interval; the Ray unit (Restart=always) is stopped, not restarted.
    watch = ("-e", "raygate_ray_version=" + OTHER, "-e", "raygate_watch=true", "-e", "raygate_watch_interval=10",
             "-e", "raygate_watch_drain_deadline=10")  # fmt: skip
    rc, out = play(cluster, "site.yml", *watch)
    assert rc == 0, out[-4000:]
    for index in NODES:
        timer = unit(index, "raygate-watch.timer")
        assert timer["active"] == "active" and timer["enabled"] == "enabled", (index, timer)
    fault = os.path.join(STATE, "watch-xid.json")
    with open(fault, "w") as fh:
        json.dump({"gpu": {"model": "H100", "faults": [{"type": "xid", "xid": 79, "gpu": 3}]}}, fh)
    rc, out = run([SANDBOX, "scenario", "2", fault])
    assert rc == 0, out

    def state():
        rc, text = node(2, "cat /var/lib/raygate/watch/state.json")
        return json.loads(text) if rc == 0 and text.startswith("{") else {}

    taken = wait_until("node2 taken out by its watcher", lambda: state().get("taken_out"), timeout=WAIT)
    assert "Xid 79" in taken["reason"], taken
    assert unit(2)["active"] in ("inactive", "failed"), unit(2)
    # Its next run (the timer goes on) finds the node still out, and systemd has not restarted Ray.
    wait_until("node2's next watch run", lambda: state().get("last_run", 0) > taken["at"] + 1, timeout=WAIT)
    assert unit(2)["active"] in ("inactive", "failed") and not raylet(2), unit(2)
    wait_until("node2 gone from the cluster", lambda: alive_ips() == [NODES[1]], timeout=WAIT)
    rc, journal = node(2, "journalctl -u raygate-watch.service --no-pager -o cat | grep -c 'taken out of Ray'")
    assert rc == 0 and int(journal.strip()) >= 1, journal


def test_teardown_disables_and_removes_the_units(cluster):
    rc, out = play(cluster, "teardown.yml")
    assert rc == 0, out[-4000:]
    for index in NODES:
        assert nothing_left(index) == "", index
    rc, out = play(cluster, "teardown.yml")
    assert rc == 0, out[-4000:]
    changed_nothing(out)


def test_sandbox_down_leaves_no_container_behind(cluster):
    rc, out = run([SANDBOX, "down"], timeout=300)
    assert rc == 0, out
    left = [path for path in ("/run/netns/rg-node1", "/run/netns/rg-node2", STATE) if os.path.exists(path)]
    left += [
        root
        for root in ("/sys/fs/cgroup/raygate", "/sys/fs/cgroup/systemd/raygate", "/sys/fs/cgroup/unified/raygate")
        if os.path.exists(root)
    ]
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/mountinfo" % pid) as fh:
                mounts = fh.read()
        except OSError:
            continue  # gone meanwhile
        if "rg-node1-root" in mounts or "rg-node2-root" in mounts:
            left.append("process %s still sees a node's root" % pid)
    assert left == []
