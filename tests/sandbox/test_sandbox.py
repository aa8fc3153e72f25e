"""The namespace-node sandbox keeps its promises: isolation while up, no trace after down.

Needs root, `ip` and `unshare`; skipped otherwise. Replaces any sandbox that is already up
(the bridge, netns names and IPs are machine-wide), and leaves none behind.
"""

import os
import subprocess
import uuid

import pytest
import yaml
from sandbox_run import STATE, needs_sandbox, sandbox

NODES = 2

pytestmark = needs_sandbox


def in_node(index, script, check=True):
    """Run a shell script inside node INDEX (nsenter) and return its stdout."""
    return sandbox("exec", str(index), "bash", "-c", script, check=check).stdout


def over_ssh(index, script):
    return sandbox("ssh", str(index), script).stdout


def sandbox_processes():
    """Live (non-zombie) processes whose command line names the state dir: tini, sshd."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if STATE in cmdline and state != "Z":
            found.append(f"{pid}: {cmdline}")
    return found


def leftovers():
    """Everything `down` promises to remove, as a list of human-readable findings."""
    netns = os.listdir("/run/netns") if os.path.isdir("/run/netns") else []
    found = [f"netns {n}" for n in netns if n.startswith("rg-node")]
    found += [f"link {n}" for n in os.listdir("/sys/class/net") if n == "rgbr0" or n.startswith("rgv")]
    if os.path.exists(STATE):
        found.append(f"state dir {STATE}")
    with open("/proc/self/mountinfo") as f:
        found += [f"mount {line.split()[4]}" for line in f if line.split()[4].startswith(STATE)]
    found += [f"process {p}" for p in sandbox_processes()]
    return found


@pytest.fixture(scope="module")
def nodes():
    sandbox("up", str(NODES))
    yield NODES
    sandbox("down")


def test_status_lists_every_node_reachable(nodes):
    lines = sandbox("status").stdout.splitlines()
    assert len(lines) == nodes
    for i, line in enumerate(lines, start=1):
        name, ip, pid, reachable = line.split()
        assert (name, ip, reachable) == (f"node{i}", f"198.18.0.{10 + i}", "yes")
        assert int(pid) > 1


def test_ssh_login_sees_own_hostname_and_pid_namespace(nodes):
    out = over_ssh(2, "hostname; cat /proc/1/comm; ps -e --no-headers | wc -l; echo $PATH").split()
    hostname, init, count, path = out
    assert hostname == "node2"
    assert init == "tini"
    # tini, sshd listener, sshd session, bash, ps, wc: nothing from the host or other nodes.
    assert int(count) < 12
    assert path.startswith("/usr/bin:")


def test_system_dirs_are_copy_on_write_per_node(nodes):
    name = f"rg-sandbox-test-{uuid.uuid4().hex}"
    for d in ("/etc", "/opt", "/usr", "/var", "/root"):
        over_ssh(2, f"touch {d}/{name}")
        assert in_node(2, f"test -e {d}/{name} && echo here").strip() == "here"
        assert not os.path.exists(f"{d}/{name}"), f"{d} write leaked to the host"
        assert in_node(1, f"test -e {d}/{name} || echo absent").strip() == "absent", f"{d} write leaked to node1"
        assert os.path.exists(f"{STATE}/node2/upper{d}/{name}")


def test_private_tmpfs_and_shared_srv(nodes):
    out = in_node(1, "findmnt -no FSTYPE /tmp; findmnt -no FSTYPE /run; stat -f -c '%b %S' /dev/shm")
    tmp_fs, run_fs, shm = out.splitlines()
    assert (tmp_fs, run_fs) == ("tmpfs", "tmpfs")
    blocks, size = map(int, shm.split())
    assert blocks * size >= 2 * 1024**3
    name = f"rg-sandbox-test-{uuid.uuid4().hex}"
    in_node(1, f"touch /tmp/{name} /dev/shm/{name}")
    assert in_node(2, f"ls /tmp/{name} /dev/shm/{name} 2>/dev/null | wc -l").strip() == "0"
    assert not os.path.exists(f"/tmp/{name}") and not os.path.exists(f"/dev/shm/{name}")
    # /srv is the host's: the state dir (and the wheelhouse next to it) is seen at the same path.
    with open(f"{STATE}/id_ed25519.pub") as f:
        assert in_node(2, f"cat {STATE}/id_ed25519.pub") == f.read()


def test_processes_are_invisible_across_nodes(nodes):
    marker = str(1_000_000 + uuid.uuid4().int % 1_000_000)
    in_node(2, f"setsid sleep {marker} </dev/null >/dev/null 2>&1 &")
    assert marker in in_node(2, "ps -e -o args")
    assert marker not in in_node(1, "ps -e -o args")
    in_node(2, f"pkill -x -f 'sleep {marker}'")


def test_nodes_share_a_bridge_with_own_netns(nodes):
    assert in_node(1, "ip -o -4 addr show dev eth0").split()[3] == "198.18.0.11/24"
    assert "default via 198.18.0.1" in in_node(1, "ip route")
    assert in_node(1, "exec 3<>/dev/tcp/198.18.0.12/22; head -c 4 <&3") == "SSH-"
    result = subprocess.run(
        ["ip", "netns", "exec", "rg-node1", "nft", "list", "ruleset"], capture_output=True, check=False
    )
    assert result.returncode == 0, result.stderr
    # sysfs is the node's: only lo and eth0.
    assert sorted(in_node(2, "ls /sys/class/net").split()) == ["eth0", "lo"]


def test_exec_passes_exit_code(nodes):
    assert sandbox("exec", "1", "sh", "-c", "exit 7", check=False).returncode == 7


def test_inventory_lists_nodes(nodes):
    cluster = yaml.safe_load(sandbox("inventory").stdout)["ray_cluster"]
    groups = cluster["children"]
    hosts = {**groups["ray_head"]["hosts"], **groups["ray_workers"]["hosts"]}
    assert list(groups["ray_head"]["hosts"]) == ["node1"]
    assert hosts == {f"node{i}": {"ansible_host": f"198.18.0.{10 + i}"} for i in range(1, nodes + 1)}
    assert cluster["vars"]["ansible_ssh_private_key_file"] == f"{STATE}/id_ed25519"


def test_down_leaves_nothing_and_is_idempotent(nodes):
    sandbox("down")
    assert leftovers() == []
    sandbox("down")
    assert sandbox("status", check=False).returncode != 0
