"""What the systemd scenarios share (test_systemd.py on Debian 12 nodes, test_debian13.py on
Debian 13 ones): the 2-node cluster they bring up, its inventory, and how they look at each node's
units, raylet and membership."""

import json
import os
import shutil

from conftest import ROOT, SANDBOX, node, recap, run, wait_until

NODES = {1: "198.18.0.11", 2: "198.18.0.12"}
UNITS = ("raygate-ray.service", "raygate-firewall.service", "raygate-dashboard-proxy.service", "raygate-watch.timer")
# Generous: the machine is busy (2 cores), and a restart waits RestartSec plus Ray's own start.
WAIT = 240


def up(suite=None):
    """sandbox.sh up 2 --systemd: Debian 12 nodes, or SUITE's (rootfs.sh builds and caches it)."""
    env = {"RAYGATE_ROOTFS_SUITE": suite} if suite else None
    rc, out = run([SANDBOX, "up", str(len(NODES)), "--systemd"], timeout=900, env=env)
    assert rc == 0, out


def write_inventory(base):
    """An inventory for the sandbox's nodes (node1 heads, node2 works) with the systemd supervisor.
    The sandbox's group_vars are copied, not linked: a controller in a chroot reads them too."""
    inv = base / "inventory"
    (inv / "group_vars" / "all").mkdir(parents=True)
    shutil.copytree(
        os.path.join(ROOT, "inventories", "sandbox", "group_vars", "ray_cluster"), inv / "group_vars" / "ray_cluster"
    )
    rc, hosts = run([SANDBOX, "inventory"])
    assert rc == 0, hosts
    (inv / "hosts.yml").write_text(hosts)
    (inv / "group_vars" / "all" / "systemd.yml").write_text(
        "raygate_supervisor: systemd\nraygate_auth_token_file: %s/token\nraygate_health_report_dir: %s/health\n"
        "raygate_confirm: false\n" % (base, base)
    )
    return str(inv)


# Any Ray process: the daemons, the dashboard and its agents, every worker (ray::...).
RAY_PROCESS = "[r]aylet|[g]cs_server|[r]ay/dashboard|[r]ay::|[d]efault_worker|[l]og_monitor"


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
        'curl -sf --cacert /etc/raygate/tls/ca.crt -H "Authorization: Bearer $(cat /etc/raygate/auth_token)" '
        "'https://198.18.0.11:8265/api/v0/nodes?limit=100&detail=true' || echo FAILED",
    )
    if "FAILED" in out:
        return None
    nodes = json.loads(out)["data"]["result"]["result"]
    return sorted(n["node_ip"] for n in nodes if n["state"] == "ALIVE")


def units_run_ray():
    """Each node's unit is active and enabled, its main process is `ray start --block`, a raylet runs."""
    for index in NODES:
        ray = unit(index)
        assert ray["active"] == "active" and ray["enabled"] == "enabled", (index, ray)
        # Enabled for the next boot (this run loaded the rules itself).
        assert unit(index, "raygate-firewall.service")["enabled"] == "enabled", index
        rc, cmdline = node(index, "tr '\\0' ' ' </proc/%s/cmdline" % ray["main_pid"])
        assert "start" in cmdline and "--block" in cmdline, cmdline
        assert raylet(index), index
        # Ray never runs as root: the unit's main process and every Ray process are the service user's.
        rc, users = node(index, "ps -o user= -p %s,$(pgrep -d, -f '%s')" % (ray["main_pid"], RAY_PROCESS))
        assert rc == 0 and set(users.split()) == {"ray"}, (index, users)
    # The head's HTTPS proxy in front of its dashboard: its own unit, enabled, nginx as the service user.
    proxy = unit(1, "raygate-dashboard-proxy.service")
    assert proxy["active"] == "active" and proxy["enabled"] == "enabled", proxy
    rc, users = node(1, "ps -o user= --ppid %s -p %s" % (proxy["main_pid"], proxy["main_pid"]))
    assert rc == 0 and set(users.split()) == {"ray"}, users


def changed_nothing(out):
    """The play's recap lists every node, each with changed=0."""
    hosts = recap(out)
    assert sorted(hosts) == ["node%d" % index for index in NODES], out[-3000:]
    assert all(int(r["changed"]) == 0 for r in hosts.values()), out[-3000:]


def site_changes_nothing(play, *extra):
    """site.yml reports changed=0 on every node, and every unit's main process and raylet stay."""
    before = {index: (unit(index)["main_pid"], raylet(index)) for index in NODES}
    rc, out = play("site", *extra)
    assert rc == 0, out[-4000:]
    changed_nothing(out)
    assert {index: (unit(index)["main_pid"], raylet(index)) for index in NODES} == before


def nothing_left(index):
    """What raygate leaves on node INDEX after teardown (empty when nothing)."""
    rc, left = node(
        index,
        "ls /etc/systemd/system/{,*/}raygate-{ray,firewall,dashboard-proxy,watch}.service"
        " /etc/systemd/system/{,*/}raygate-watch.timer /var/lib/raygate/watch 2>/dev/null;"
        " pgrep -ax raylet; pgrep -ax gcs_server; pgrep -af '^ray::'; nft list tables | grep raygate;"
        " pgrep -af '[n]ginx: master process .*/etc/raygate/';"
        " ls -d /etc/raygate /run/raygate 2>/dev/null; true",
    )
    for name in UNITS:
        state = unit(index, name)
        if state["active"] != "inactive" or state["enabled"] not in ("", "not-found"):
            left += "\n%s: %s" % (name, state)
    return left.strip()


def killed_raylet_comes_back(index):
    """SIGKILL node INDEX's raylet: systemd starts a new one (NRestarts grows) and the node rejoins."""
    old = raylet(index)
    restarts = int(unit(index)["restarts"])
    rc, out = node(index, "kill -KILL %d" % old)
    assert rc == 0, out
    new = wait_until(
        "a new raylet on node%d" % index,
        lambda: (raylet(index) or 0) not in (0, old) and raylet(index),
        timeout=WAIT,
    )
    assert int(unit(index)["restarts"]) > restarts
    wait_until("node%d alive again" % index, lambda: alive_ips() == sorted(NODES.values()), timeout=WAIT)
    assert raylet(index) == new
