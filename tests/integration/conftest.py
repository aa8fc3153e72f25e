"""Fixtures that run the real playbooks against sandbox nodes (root only)."""

import json
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SANDBOX = os.path.join(ROOT, "tests", "sandbox", "sandbox.sh")
VENV_BIN = os.path.join(ROOT, ".venv", "bin")
STATE = os.environ.get("RAYGATE_SANDBOX_DIR", "/srv/raygate/sandbox")

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("tini") or not os.path.exists(os.path.join(VENV_BIN, "ansible-playbook")),
    reason="needs root, tini and the project venv (make bootstrap)",
)


def run(args, timeout=900, env=None):
    merged = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    merged["ANSIBLE_COLLECTIONS_PATH"] = os.path.join(ROOT, ".build", "collections")
    merged["PATH"] = VENV_BIN + os.pathsep + merged.get("PATH", "")
    merged.update(env or {})
    proc = subprocess.run(
        args,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=merged,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    return proc.returncode, proc.stdout + proc.stderr


def playbook(name, *extra, inventory=None):
    inventory = inventory or os.path.join(ROOT, "inventories", "sandbox")
    return run([os.path.join(VENV_BIN, "ansible-playbook"), "-i", inventory, os.path.join(ROOT, name), *extra])


def recap(out):
    """{host: {"ok": "3", "changed": "0", ...}} from a playbook's PLAY RECAP."""
    return {
        m.group(1): dict(re.findall(r"(\w+)=(\d+)", m.group(2))) for m in re.finditer(r"^(node\d) +: (.*)$", out, re.M)
    }


def node(index, command):
    """Run a shell command inside a sandbox node; returns (rc, output)."""
    return run([SANDBOX, "exec", str(index), "bash", "-c", command], timeout=120)


def link(index, up):
    """Take a sandbox node's only link down (it goes dark: SSH and Ray traffic alike) or back up."""
    return run(["ip", "netns", "exec", "rg-node%d" % index, "ip", "link", "set", "eth0", "up" if up else "down"])


def forget_connection(address, user="root"):
    """End this controller's persisted SSH connection to ADDRESS (the ControlPersist master the last
    run left, ansible.cfg), so that the next run reaches the node with a new one: a node dead before
    a run starts, as one that died between runs is met. Over a master that outlived the node, the
    run waits first for the keepalives (ServerAliveInterval x ServerAliveCountMax), then for a new
    connection: the fault suite's unreachable worker and the day-2 suite's dark node mid-run keep
    that path. Nothing to do when there is no master."""
    from ansible.plugins.connection.ssh import Connection

    base = os.path.expanduser("~/.ansible/cp")
    for port in (None, 22):  # ansible names the master by the port as the inventory gives it (none: None)
        path = Connection._create_control_path(address, port, user) % {"directory": base}
        if os.path.exists(path):
            run(["ssh", "-O", "exit", "-o", "ControlPath=%s" % path, address], timeout=30)


@pytest.fixture(scope="session")
def sandbox3():
    rc, out = run([SANDBOX, "up", "3"], timeout=180)
    assert rc == 0, out
    yield 3
    run([SANDBOX, "down"], timeout=180)


@pytest.fixture()
def pristine(sandbox3):
    """Asserts, after the test, that no node was changed by the (failing) play."""
    yield
    for index in range(1, sandbox3 + 1):
        rc, out = node(
            index,
            "ls -d /opt/raygate /etc/raygate /run/raygate /etc/nccl.conf 2>/dev/null; pgrep -a -x raylet;"
            " nft list tables | grep raygate; ufw show added | grep raygate",
        )
        assert out.strip() == "", "node%d was changed: %s" % (index, out)


@pytest.fixture()
def inventory_copy(tmp_path):
    """A writable copy of the sandbox inventory, for host_vars a test adds."""
    dest = tmp_path / "inventory"
    shutil.copytree(os.path.join(ROOT, "inventories", "sandbox"), dest)
    return dest


def scratch_inventory(inv, base, name, hosts=None, prefix="", settings=""):
    """A scratch inventory at ``inv`` (a pathlib.Path) whose runs write under ``base``: the
    sandbox's ``ray_cluster`` group_vars (linked), hosts.yml (``hosts`` as text, else a link to the
    sandbox's) and group_vars/all/<name>.yml: the auth token and the TLS material in ``base`` (one
    cluster's, whichever of its inventories runs), the health reports and
    run summaries in ``base``/<prefix>health and <prefix>runs, no confirmation prompt, then
    ``settings`` (YAML lines). Returns its path as a string."""
    (inv / "group_vars" / "all").mkdir(parents=True)
    os.symlink(
        os.path.join(ROOT, "inventories", "sandbox", "group_vars", "ray_cluster"), inv / "group_vars" / "ray_cluster"
    )
    if hosts is None:
        os.symlink(os.path.join(ROOT, "inventories", "sandbox", "hosts.yml"), inv / "hosts.yml")
    else:
        (inv / "hosts.yml").write_text(hosts)
    (inv / "group_vars" / "all" / ("%s.yml" % name)).write_text(
        f"raygate_auth_token_file: {base}/token\nraygate_tls_dir: {base}/tls\n"
        f"raygate_health_report_dir: {base}/{prefix}health\n"
        f"raygate_run_summary_dir: {base}/{prefix}runs\nraygate_confirm: false\n{settings}"
    )
    return str(inv)


def wait_until(what, check, timeout=300):
    """Poll CHECK (returns a true value when done) every second; fail naming WHAT and the last value."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(1)
    pytest.fail("%s: not within %ss (last: %r)" % (what, timeout, last))


def scenario(cluster, index, doc):
    """Drive node ``index``'s simulated GPUs and fabric by the scenario ``doc`` (written under cluster["base"])."""
    path = cluster["base"] / ("node%d.json" % index)
    path.write_text(json.dumps(doc))
    rc, out = run([SANDBOX, "scenario", str(index), str(path)])
    assert rc == 0, out


def watch_state(index):
    """The node watcher's state file on node ``index`` ({} while there is none)."""
    rc, out = node(index, "cat /var/lib/raygate/watch/state.json")
    return json.loads(out) if rc == 0 and out.strip().startswith("{") else {}


class Capture:
    """tcpdump (from Debian's packages) while the block runs: on the sandbox bridge, or on
    ``interface`` inside node netns ``netns``; ``data`` is the capture file's bytes afterwards and
    ``dropped`` the packets the kernel dropped (None when tcpdump did not say)."""

    def __init__(self, path, expression, interface="rgbr0", netns=None):
        self.path, self.expression, self.data = path, expression, b""
        self.prefix = ["ip", "netns", "exec", netns] if netns else []
        self.interface = interface

    def __enter__(self):
        self.err = open(self.path + ".err", "w+")
        # A 64 MiB buffer: a capture that drops packets cannot show that a secret is absent.
        cmd = self.prefix + ["tcpdump", "-i", self.interface, "-B", "65536", "-U", "-s", "0", "-w", self.path]
        self.proc = subprocess.Popen(cmd + [self.expression], stdout=subprocess.DEVNULL, stderr=self.err)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.proc.poll() is None:
            self.err.seek(0)
            if "listening on" in self.err.read():
                return self
            time.sleep(0.2)
        raise AssertionError("tcpdump did not start: %s" % open(self.path + ".err").read())

    def __exit__(self, *exc):
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=60)
        self.err.seek(0)
        said = self.err.read()
        self.err.close()
        dropped = re.search(r"(\d+) packets? dropped by kernel", said)
        self.dropped = int(dropped.group(1)) if dropped else None
        with open(self.path, "rb") as fh:
            self.data = fh.read()
