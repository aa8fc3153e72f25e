"""Scenario `systemd`: raygate with the systemd supervisor on nodes that boot systemd as PID 1
(sandbox.sh up 2 --systemd: systemd-nspawn containers in the nodes' network namespaces).
In order, on one 2-node cluster: site.yml enables and starts the units; a re-run restarts
nothing; a raylet killed with SIGKILL is restarted by systemd and its node rejoins; a rebooted
node comes back with its firewall and its Ray node and rejoins, and a re-run still changes
nothing; upgrade.yml switches the units to another Ray version; teardown disables and removes the
units and leaves nothing, twice.

Run on its own (`pytest tests/integration/systemd`): it owns the sandbox while it runs.
"""

import json
import os

import pytest
from conftest import ROOT, SANDBOX, STATE, needs_root, node, recap, run, wait_until

# No skip when systemd-nspawn is missing: `make bootstrap` installs it, and `up --systemd` says so.
pytestmark = needs_root

NODES = {1: "198.18.0.11", 2: "198.18.0.12"}
UNITS = ("raygate-ray.service", "raygate-firewall.service")
# The version upgrade.yml switches to (make systemd downloads it into the wheelhouse).
OTHER = os.environ.get("RAYGATE_PREV_RAY_VERSION", "2.59.0")
# Generous: the machine is busy (2 cores), and a restart waits RestartSec plus Ray's own start.
WAIT = 240


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    rc, out = run([SANDBOX, "up", "2", "--systemd"], timeout=900)
    assert rc == 0, out
    base = tmp_path_factory.mktemp("systemd")
    inv = base / "inventory"
    (inv / "group_vars" / "all").mkdir(parents=True)
    os.symlink(
        os.path.join(ROOT, "inventories", "sandbox", "group_vars", "ray_cluster"), inv / "group_vars" / "ray_cluster"
    )
    rc, hosts = run([SANDBOX, "inventory"])  # node1 heads, node2 works
    assert rc == 0, hosts
    (inv / "hosts.yml").write_text(hosts)
    (inv / "group_vars" / "all" / "systemd.yml").write_text(
        "raygate_supervisor: systemd\nraygate_auth_token_file: %s/token\nraygate_health_report_dir: %s/health\n"
        "raygate_confirm: false\n" % (base, base)
    )
    state = {"inv": str(inv)}
    yield state
    if os.path.exists(STATE):  # the last test takes the sandbox down itself
        play(state, "teardown.yml")
        run([SANDBOX, "down"], timeout=300)


def play(cluster, name, *extra):
    playbook = os.path.join(ROOT, ".venv", "bin", "ansible-playbook")
    return run([playbook, "-i", cluster["inv"], os.path.join(ROOT, name), *extra], timeout=1200)


def unit(index, name="raygate-ray.service"):
    """The unit's state as systemd in node INDEX sees it."""
    rc, out = node(index, "systemctl show -p ActiveState,UnitFileState,MainPID,NRestarts %s" % name)
    props = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    return {
        "active": props.get("ActiveState"),
        "enabled": props.get("UnitFileState"),
        "main_pid": props.get("MainPID"),
        "restarts": props.get("NRestarts"),
    }


def raylet(index):
    rc, out = node(index, "pgrep -x raylet || true")
    pids = [int(p) for p in out.split()]
    return pids[0] if len(pids) == 1 else None


def alive_ips():
    rc, out = node(
        1,
        'curl -sf -H "Authorization: Bearer $(cat /etc/raygate/auth_token)" '
        "'http://198.18.0.11:8265/api/v0/nodes?limit=100&detail=true' || echo FAILED",
    )
    if "FAILED" in out:
        return None
    nodes = json.loads(out)["data"]["result"]["result"]
    return sorted(n["node_ip"] for n in nodes if n["state"] == "ALIVE")


def test_site_enables_and_starts_the_units(cluster):
    rc, out = play(cluster, "site.yml")
    assert rc == 0, out[-4000:]
    for index in NODES:
        ray = unit(index)
        assert ray["active"] == "active" and ray["enabled"] == "enabled", (index, ray)
        # Enabled for the next boot (this run loaded the rules itself).
        assert unit(index, "raygate-firewall.service")["enabled"] == "enabled", index
        # The raylet runs under the unit: its main process is `ray start --block`.
        rc, cmdline = node(index, "tr '\\0' ' ' </proc/%s/cmdline" % ray["main_pid"])
        assert "start" in cmdline and "--block" in cmdline, cmdline
        assert raylet(index), index
    assert alive_ips() == sorted(NODES.values())


def site_changes_nothing(cluster, *extra):
    """site.yml reports changed=0 on every node, and every unit's main process and raylet stay."""
    before = {index: (unit(index)["main_pid"], raylet(index)) for index in NODES}
    rc, out = play(cluster, "site.yml", *extra)
    assert rc == 0, out[-4000:]
    assert all(int(r["changed"]) == 0 for r in recap(out).values()), out[-3000:]
    assert {index: (unit(index)["main_pid"], raylet(index)) for index in NODES} == before


def test_rerun_restarts_nothing(cluster):
    site_changes_nothing(cluster)


def test_killed_raylet_is_restarted_by_systemd_and_rejoins(cluster):
    old = raylet(2)
    restarts = int(unit(2)["restarts"])
    rc, out = node(2, "kill -KILL %d" % old)
    assert rc == 0, out
    new = wait_until("a new raylet on node2", lambda: (raylet(2) or 0) not in (0, old) and raylet(2), timeout=WAIT)
    assert int(unit(2)["restarts"]) > restarts
    wait_until("node2 alive again", lambda: alive_ips() == sorted(NODES.values()), timeout=WAIT)
    assert raylet(1) and raylet(2) == new


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
    site_changes_nothing(cluster)


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
    site_changes_nothing(cluster)


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
    site_changes_nothing(cluster, "-e", "raygate_ray_version=" + OTHER)


def test_teardown_disables_and_removes_the_units(cluster):
    rc, out = play(cluster, "teardown.yml")
    assert rc == 0, out[-4000:]
    for index in NODES:
        for name in UNITS:
            state = unit(index, name)
            assert state["active"] == "inactive" and state["enabled"] in ("", "not-found"), (index, name, state)
        rc, left = node(
            index,
            "ls /etc/systemd/system/{,*/}raygate-{ray,firewall}.service 2>/dev/null;"
            " pgrep -ax raylet; pgrep -ax gcs_server; pgrep -af '^ray::'; nft list tables | grep raygate;"
            " ls -d /etc/raygate /run/raygate 2>/dev/null; true",
        )
        assert left.strip() == "", (index, left)
    rc, out = play(cluster, "teardown.yml")
    assert rc == 0, out[-4000:]
    assert all(int(r["changed"]) == 0 for r in recap(out).values()), out[-3000:]


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
