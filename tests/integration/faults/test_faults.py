"""Fault suite: one real 3-node sandbox cluster, one test per fault, in order (each starts from the
cluster the previous one left). Each asserts the outcome: the nodes alive afterwards, the run
summary and health report, the exit status, and what is left behind. The detect and recover
figures go to artifacts/reliability.json for docs/RELIABILITY.md; they are never asserted.

Run on its own (`pytest tests/integration/faults`, `make faults`): it owns the sandbox.
"""

import json
import os
import re
import signal
import subprocess
import time

import pytest
from conftest import (
    ROOT,
    SANDBOX,
    VENV_BIN,
    Capture,
    forget_connection,
    link,
    needs_root,
    node,
    recap,
    run,
    scratch_inventory,
)

from ansible_collections.raygate.cluster.plugins.plugin_utils import tls

pytestmark = needs_root

NODES = {1: "198.18.0.11", 2: "198.18.0.12", 3: "198.18.0.13"}
FIGURES = os.path.join(ROOT, "artifacts", "reliability.json")
# A hang guard, not a timing assertion: a run that outlives it hung.
HANG = 600


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    rc, out = run([SANDBOX, "up", "3"], timeout=300)
    assert rc == 0, out
    base = tmp_path_factory.mktemp("faults")
    inv = scratch_inventory(base / "inventory", base, "faults")
    state = {"inv": inv, "base": base, "figures": []}
    yield state
    link(1, True), link(2, True), link(3, True)
    # No teardown.yml first: `sandbox.sh down` kills every node's processes with its namespaces, and
    # nothing was asserted of that run (teardown.yml is judged by the tests that run it).
    run([SANDBOX, "down"], timeout=300)
    os.makedirs(os.path.dirname(FIGURES), exist_ok=True)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT, check=False
    )
    doc = {"date": time.strftime("%Y-%m-%d"), "commit": commit.stdout.strip(), "faults": state["figures"]}
    with open(FIGURES, "w") as fh:
        json.dump(doc, fh, indent=2)
    with open(FIGURES.replace(".json", ".md"), "w") as fh:
        fh.write(table(doc))


def seconds(value):
    return "%.0f s" % value if isinstance(value, (int, float)) else str(value)


def table(doc):
    """The Markdown table of docs/RELIABILITY.md, from the figures of one run."""
    lines = [
        "Measured by `make faults` on %s at commit %s (3 sandbox nodes, 2 cores)." % (doc["date"], doc["commit"]),
        "",
        "| fault | what raygate does | time to detect | time to recover | what is left |",
        "| --- | --- | --- | --- | --- |",
    ]
    for f in doc["faults"]:
        cells = [f["fault"], f["response"], seconds(f["detect_s"]), seconds(f["recover_s"]), f["left"]]
        lines.append("| %s |" % " | ".join(cells))
    return "\n".join(lines) + "\n"


def playbook_args(cluster, name, *extra):
    return [os.path.join(VENV_BIN, "ansible-playbook"), "-i", cluster["inv"], os.path.join(ROOT, name), *extra]


def playbook_env():
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    env["ANSIBLE_COLLECTIONS_PATH"] = os.path.join(ROOT, ".build", "collections")
    return env


def heal(cluster, *extra):
    """The run that must bring the whole cluster back; returns its seconds."""
    rc, out, took, seen = play(cluster, "site.yml", *extra)
    assert rc == 0, out[-4000:]
    assert wait_alive(sorted(NODES.values()))
    assert summary(cluster, "site")["result"] == "complete"
    return took


def play(cluster, name, *extra, watch=None):
    """Run a playbook; returns (rc, output, seconds, seconds until the first line matching watch)."""
    start = time.monotonic()
    proc = subprocess.Popen(playbook_args(cluster, name, *extra), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=playbook_env(), cwd=ROOT, stdin=subprocess.DEVNULL)  # fmt: skip
    lines, seen = [], None
    for line in proc.stdout:
        lines.append(line)
        if watch and seen is None and re.search(watch, line):
            seen = round(time.monotonic() - start, 1)
        if time.monotonic() - start > HANG:
            proc.kill()
            pytest.fail("%s hung for more than %ss:\n%s" % (name, HANG, "".join(lines)[-4000:]))
    rc = proc.wait()
    return rc, "".join(lines), round(time.monotonic() - start, 1), seen


def summary(cluster, playbook):
    with open(os.path.join(cluster["base"], "runs", "%s.json" % playbook)) as fh:
        return json.load(fh)


def record(cluster, fault, response, detect, recover, left):
    cluster["figures"].append(
        {"fault": fault, "response": response, "detect_s": detect, "recover_s": recover, "left": left}
    )


def raylets():
    """{node index: raylet pid} for the nodes running a raylet (reachable or not)."""
    found = {}
    for index in NODES:
        rc, out = node(index, "pgrep -x raylet")
        if out.strip().isdigit():
            found[index] = int(out.strip())
    return found


def alive_ips():
    rc, out = node(
        1,
        'curl -sf --cacert /etc/raygate/tls/ca.crt -H "Authorization: Bearer $(cat /etc/raygate/auth_token)" '
        "'https://198.18.0.11:8265/api/v0/nodes?limit=100' || echo FAILED",
    )
    if "FAILED" in out:
        return []
    return sorted(n["node_ip"] for n in json.loads(out)["data"]["result"]["result"] if n["state"] == "ALIVE")


def wait_alive(expected, timeout=180):
    """The head's GCS needs a few seconds to mark a dead node dead: poll, never sleep blindly."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if alive_ips() == expected:
            return True
        time.sleep(1)
    return alive_ips() == expected


def leftovers(index):
    rc, out = node(
        index,
        "pgrep -a -f '[r]aylet|[g]cs_server|[r]ay/dashboard|[l]og_monitor|[m]onitor.py';"
        " ls -d /etc/raygate /run/raygate 2>/dev/null; nft list tables | grep raygate",
    )
    return out.strip()


# Any Ray process: the daemons, the dashboard and its agents, every worker (ray::...).
RAY_PROCESS = "[r]aylet|[g]cs_server|[r]ay/dashboard|[r]ay::|[d]efault_worker|[l]og_monitor"
# What a job may do on a node: print its euid, try raygate's configuration and the firewall.
JOB_POWERS = """import os, subprocess
print("EUID", os.geteuid())
try:
    open("/etc/raygate/job-was-here", "w").close()
    print("ETC WRITTEN")
except PermissionError:
    print("ETC REFUSED")
nft = subprocess.run(["nft", "add", "table", "inet", "job_was_here"], capture_output=True)
print("NFT REFUSED" if nft.returncode != 0 else "NFT CHANGED")
"""


@pytest.mark.security
def test_bring_up(cluster):
    rc, out, took, seen = play(cluster, "site.yml")
    assert rc == 0, out[-4000:]
    assert sorted(raylets()) == [1, 2, 3]
    assert alive_ips() == sorted(NODES.values())
    assert summary(cluster, "site")["result"] == "complete"
    # The command the play prints for jobs works exactly as printed, in a shell on the head.
    printed = re.search(r"Jobs \(in a shell on node1 as root\): (.*?script\.py)", out, re.S)
    assert printed, out[-3000:]
    command = " ".join(printed.group(1).split())
    # --working-dir .: the job's entrypoint runs in a copy of this directory, not in the head's cwd.
    # Over HTTPS (the head's proxy), trusting the cluster CA.
    assert "RAY_ADDRESS=https://198.18.0.11:8265 " in command, command
    assert command.endswith("ray job submit --verify /etc/raygate/tls/ca.crt --working-dir . -- python script.py"), (
        command
    )
    rc, job = node(1, "cd $(mktemp -d) && echo 'print(6 * 7)' > script.py && " + command)
    assert rc == 0 and "42" in job and "succeeded" in job, job[-3000:]
    # Ray never runs as root: every Ray process of every node runs as the service user, and a job
    # is that user, so it can neither write raygate's files nor touch the node's firewall.
    for index in NODES:
        rc, users = node(index, "ps -o user= -p $(pgrep -d, -f '%s')" % RAY_PROCESS)
        assert rc == 0 and set(users.split()) == {"ray"}, (index, users)
    rc, job = node(1, "cd $(mktemp -d) && cat > script.py <<'EOF'\n%sEOF\n%s" % (JOB_POWERS, command))
    assert rc == 0 and "succeeded" in job, job[-3000:]
    assert re.search(r"^EUID [1-9]\d*$", job, re.M), job[-3000:]
    assert "ETC REFUSED" in job and "NFT REFUSED" in job, job[-3000:]
    rc, out = node(1, "ls /etc/raygate/job-was-here; nft list tables")
    assert "job_was_here" not in out, out
    record(cluster, "none: a fresh site.yml on new nodes (install from the wheelhouse included), for scale",
           "-", "-", took, "-")  # fmt: skip


# The jobs line site.yml prints, run on a worker (node2): its HTTP to the head's dashboard crosses the bridge.
JOB_SUBMIT = (
    "RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=/etc/raygate/auth_token RAY_ADDRESS=https://198.18.0.11:8265"
    " timeout -s KILL 300 /opt/raygate/current/bin/ray job submit --verify /etc/raygate/tls/ca.crt"
    " --working-dir . -- python script.py"
)
# A job whose traffic crosses the cluster network: an 8 MiB object to a task pinned on each node (object
# transfers), a named actor (a GCS write), the driver on the head talking to the workers (Ray's gRPC).
CROSS_NODE_JOB = """import socket
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy as On
ray.init()
blob = ray.put(b"x" * (8 << 20))
@ray.remote(num_cpus=0.1)
def where(data):
    return socket.gethostname(), len(data)
@ray.remote(num_cpus=0.1)
class Box:
    def ping(self):
        return "pong"
box = Box.options(name="raygate-capture").remote()
print("PING", ray.get(box.ping.remote()))
ids = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
seen = ray.get([where.options(scheduling_strategy=On(i, soft=False)).remote(blob) for i in ids])
print("HOSTS", " ".join(sorted(h for h, n in seen)), "BYTES", sorted(set(n for h, n in seen)))
"""


@pytest.mark.security
def test_no_token_crosses_ray_s_grpc_in_clear(cluster):
    # Mutual TLS (raygate_tls, on by default): a job submitted from a worker, whose driver, tasks,
    # object transfers and actor cross the bridge, leaves no token in clear in Ray's gRPC.
    with open(os.path.join(str(cluster["base"]), "token"), "rb") as fh:
        token = fh.read().strip()
    assert len(token) >= 32
    base = str(cluster["base"])
    with Capture(base + "/grpc.pcap", "tcp and not port 8265") as grpc, Capture(
        base + "/http.pcap", "tcp port 8265"
    ) as http:
        rc, job = node(2, "cd $(mktemp -d) && cat > script.py <<'EOF'\n%sEOF\n%s" % (CROSS_NODE_JOB, JOB_SUBMIT))
    assert rc == 0 and "PING pong" in job and "HOSTS node1 node2 node3 BYTES [8388608]" in job, job[-3000:]
    # The capture saw all of Ray's traffic (no packet dropped): the object went to two other nodes,
    # encrypted (no run of its bytes in clear), and the token never appears.
    assert grpc.dropped == 0 and http.dropped == 0, (grpc.dropped, http.dropped)
    assert len(grpc.data) > 16 << 20, len(grpc.data)
    assert b"x" * 64 not in grpc.data
    assert token not in grpc.data
    # The dashboard and jobs API are HTTPS only (the head's proxy): the submission crossed port 8265,
    # encrypted, with neither the token nor its `Authorization: Bearer` header in clear.
    assert len(http.data) > 1000, len(http.data)
    assert token not in http.data and b"Bearer" not in http.data
    # Plain HTTP to that port gets nginx's refusal; Ray's own dashboard answers on the head's loopback only.
    rc, out = node(2, "curl -s http://198.18.0.11:8265/api/version")
    assert "plain HTTP request was sent to HTTPS port" in out, out
    rc, out = node(1, "ss -Htln 'sport = :8265'")
    assert sorted(line.split()[3] for line in out.splitlines()) == ["127.0.0.1:8265", "198.18.0.11:8265"], out


# A driver on node2 as the service user, with the TLS files given (the node's own or another CA's).
DRIVER = """cd /tmp && runuser -u ray -- env $(grep -v '^#' /etc/raygate/ray.env | grep -v TOKEN | xargs) \\
 RAY_AUTH_TOKEN_PATH=/etc/raygate/auth_token RAY_TLS_CA_CERT=%s RAY_TLS_SERVER_CERT=%s RAY_TLS_SERVER_KEY=%s \\
 timeout -s KILL %d /opt/raygate/current/bin/python -c "
import ray, socket
ray.init(address='198.18.0.11:6379', logging_level='WARNING')
print('JOINED', ray.get(ray.remote(lambda: socket.gethostname()).remote()))
" 2>&1 | grep -v '^  File\\|^/'
"""
GCS_REFUSALS = "grep -c CERTIFICATE_VERIFY_FAILED /tmp/ray/session_latest/logs/gcs_server.err"


@pytest.mark.security
def test_a_client_with_a_certificate_of_another_ca_is_refused(cluster):
    own = ("/etc/raygate/tls/ca.crt", "/etc/raygate/tls/node.crt", "/etc/raygate/tls/node.key")
    rc, out = node(2, DRIVER % (own + (90,)))
    assert "JOINED node2" in out, out[-3000:]
    # The same client with a key and certificate from another CA (trusting the cluster's CA, so it is
    # the GCS that must refuse it): the handshake fails on the head, and it never joins.
    other = tls.ensure_ca(os.path.join(str(cluster["base"]), "other-ca"), 30, name="another CA")
    cert, key = tls.issue(other, "node2", [NODES[2]], 30)
    files = {"/tmp/other/node.crt": tls._pem_cert(cert), "/tmp/other/node.key": tls._pem_key(key)}
    write = "mkdir -p /tmp/other && " + " && ".join(
        "printf '%%s' '%s' > %s" % (pem.decode(), path) for path, pem in files.items()
    )
    rc, out = node(2, write + " && chown -R ray /tmp/other")
    assert rc == 0, out
    before = int(node(1, GCS_REFUSALS)[1].strip() or 0)
    rc, out = node(2, DRIVER % ("/etc/raygate/tls/ca.crt", "/tmp/other/node.crt", "/tmp/other/node.key", 20))
    assert "JOINED" not in out and "Failed to connect to GCS" in out, out[-3000:]
    assert int(node(1, GCS_REFUSALS)[1].strip() or 0) > before


def cluster_info(cluster, **args):
    """raygate.cluster.ray_cluster_info ad hoc on the head, through the suite's inventory."""
    args = json.dumps(dict(dashboard_url="http://127.0.0.1:8265", **args))  # Ray's own, behind the proxy
    return run([os.path.join(VENV_BIN, "ansible"), "-i", cluster["inv"], "node1", "-m",
                "raygate.cluster.ray_cluster_info", "-a", args], timeout=300)  # fmt: skip


def test_wait_names_the_hosts_that_never_joined(cluster):
    # The join wait on the running cluster: progress lines while waiting, and on timeout the hosts
    # that never joined by name (a host that never starts Ray is the fault here).
    expected = [{"name": "node%d" % i, "ip": ip} for i, ip in sorted(NODES.items())]
    expected.append({"name": "ghost", "ip": "198.18.0.99"})
    rc, out = cluster_info(cluster, expected=expected, wait_nodes=4, wait_gpus=32, wait_timeout=6, wait_sleep=1)
    assert rc != 0
    assert "timed out after 6s: 3/4 nodes, 24/32 GPUs alive; never joined: ghost" in out, out[-3000:]
    assert "[node1] waiting for the cluster" in out  # progress, not a wall of retries
    assert "FAILED - RETRYING" not in out
    rc, out = cluster_info(cluster, expected=expected[:3], wait_nodes=3, wait_gpus=24, wait_timeout=60)
    assert rc == 0, out
    assert "alive_nodes: 3" in out and "missing: []" in out
    rc, out = cluster_info(cluster, auth_token_file="/nonexistent")
    assert rc != 0 and "token file /nonexistent is missing" in out


@pytest.mark.security
def test_a_certificate_near_its_end_is_renewed_restarting_that_node_alone(cluster):
    # node3's certificate ends in 5 days (under raygate_tls_renew_days, 30): one site.yml issues it
    # again on the controller, writes it on node3 and restarts node3's Ray alone.
    tls_dir = os.path.join(str(cluster["base"]), "tls")  # raygate_tls_dir (scratch_inventory)
    ca = tls.ensure_ca(tls_dir, 3650)
    cert, key = tls.issue(ca, "node3", [NODES[3]], 5)
    tls.write_private(os.path.join(tls_dir, "nodes", "node3.key"), tls._pem_key(key), 0o600)
    tls.write_private(os.path.join(tls_dir, "nodes", "node3.crt"), tls._pem_cert(cert), 0o644)
    before = raylets()
    rc, out, took, seen = play(cluster, "site.yml")
    assert rc == 0, out[-4000:]
    after = raylets()
    assert after[1] == before[1] and after[2] == before[2] and after[3] != before[3], (before, after)
    assert "TLS certificate or CA was renewed" in out
    with open(os.path.join(tls_dir, "nodes", "node3.crt")) as fh:
        renewed = fh.read()
    assert tls.not_after(tls.load_cert(os.path.join(tls_dir, "nodes", "node3.crt"))) > tls.not_after(cert)
    assert node(3, "cat /etc/raygate/tls/node.crt")[1].strip() == renewed.strip()
    assert wait_alive(sorted(NODES.values()))
    rc, out, took, seen = play(cluster, "site.yml")
    assert rc == 0 and all(int(r["changed"]) == 0 for r in recap(out).values()), out[-3000:]


def test_unreachable_worker_is_left_out_and_named(cluster):
    before = raylets()
    link(3, False)
    try:
        rc, out, took, detect = play(cluster, "site.yml", watch=r"fatal: \[node3\]: UNREACHABLE")
        assert rc == 0, out[-4000:]
        got = summary(cluster, "site")
        assert got["result"] == "degraded" and got["in"] == ["node1", "node2"], got
        assert got["out"]["node3"]["status"] == "unreachable" and got["out"]["node3"]["task"] == "preflight"
        assert "198.18.0.13" in got["out"]["node3"]["error"]
        assert {i: before[i] for i in (1, 2)} == {i: raylets()[i] for i in (1, 2)}, "a healthy node restarted"

        # The pre-allocation gate: the node that did not answer is in the report, as unhealthy.
        rc, out, took, seen = play(cluster, "health.yml")
        assert rc == 0, out[-4000:]
        reports = sorted(os.listdir(os.path.join(cluster["base"], "health")))
        report_dir = os.path.join(cluster["base"], "health", reports[-1])
        with open(os.path.join(report_dir, "report.json")) as fh:
            report = json.load(fh)
        entry = [n for n in report["nodes"] if n["host"] == "node3"][0]
        assert entry["status"] == "unreachable" and entry["healthy"] is False, entry
        assert entry["checks"][0]["name"] == "reachable" and "198.18.0.13" in entry["checks"][0]["detail"]
        with open(os.path.join(report_dir, "healthy_hosts.txt")) as fh:
            assert fh.read().split() == ["node1", "node2"]
        assert summary(cluster, "health")["out"]["node3"]["status"] == "unreachable"
        # The dead node stays dead until its head has given it up, as one that was down for long
        # would be. Brought back sooner, the head's health check may still give up on it just
        # after the healing run found it alive (a race of the test's making: on a fast machine the
        # two runs above take about as long as the head's health check allows a silent node).
        assert wait_alive([NODES[1], NODES[2]]), "the head still lists node3 alive: %s" % alive_ips()
    finally:
        link(3, True)
    recover = heal(cluster)
    record(cluster, "worker unreachable (dead) at the start of site.yml / health.yml",
           "left out as `unreachable` with the SSH error; cluster built on the rest; in the health report as unhealthy",
           detect, recover, "nothing")  # fmt: skip


def test_head_gcs_crash_heals_in_one_run(cluster):
    before = raylets()
    rc, out = node(1, "pkill -9 -x gcs_server")
    assert rc == 0, out
    rc, out, recover, seen = play(cluster, "site.yml")
    assert rc == 0, out[-4000:]
    assert "the head is not working" in out
    assert wait_alive(sorted(NODES.values()))
    after = raylets()
    assert sorted(after) == [1, 2, 3] and all(after[i] != before[i] for i in after), (before, after)
    assert summary(cluster, "site")["result"] == "complete"
    rc, out = node(1, "pgrep -c -f '[l]og_monitor'")
    assert out.strip() == "1", "the dead session's log_monitor was left: %s" % out
    record(cluster, "head's `gcs_server` killed (kill -9)",
           "next site.yml finds the GCS dead, clears the dead session, starts the head; old workers rejoin",
           "next run (preflight)", recover, "nothing (the dead session's log_monitor and monitor go)")  # fmt: skip


def test_worker_raylet_crash_restarts_only_that_worker(cluster):
    before = raylets()
    rc, out = node(3, "pkill -9 -x raylet")
    assert rc == 0, out
    rc, out, recover, seen = play(cluster, "site.yml")
    assert rc == 0, out[-4000:]
    after = raylets()
    assert after[1] == before[1] and after[2] == before[2] and after[3] != before[3], (before, after)
    assert wait_alive(sorted(NODES.values()))
    record(cluster, "worker's raylet killed (kill -9)", "next site.yml restarts that worker only",
           "next run (preflight)", recover, "nothing")  # fmt: skip


def interrupted(cluster, sig, ready):
    """Start site.yml, send ``sig`` once ``ready()`` holds (polled), wait for the exit."""
    proc = subprocess.Popen(playbook_args(cluster, "site.yml"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=playbook_env(), cwd=ROOT, stdin=subprocess.DEVNULL,
                            start_new_session=sig == signal.SIGKILL)  # fmt: skip
    deadline = time.monotonic() + 300
    while not ready() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert proc.poll() is None, "site.yml ended before the point to interrupt it"
    if sig == signal.SIGKILL:
        os.killpg(proc.pid, signal.SIGKILL)
    else:
        proc.send_signal(sig)
    proc.wait(timeout=120)
    if sig == signal.SIGKILL:
        # ansible-core's workers run in sessions of their own: end the killed run's, which would wait
        # forever on the pipe to their dead parent (as the day-2 suite's killed run does).
        run(["pkill", "-9", "-f", " ".join(playbook_args(cluster, "site.yml")[:3]) + " "])


def starting(index):
    """True once `ray start` runs on the node (its log is being written, or Ray processes exist)."""
    return lambda: node(index, "pgrep -f '[b]in/ray start' || pgrep -x gcs_server || pgrep -x raylet")[1].strip() != ""


# SIGKILL (no handler runs, the whole process group gone) during the head's background start: the
# hardest of the four pairings of SIGINT/SIGKILL and head/workers, which the suite ran until
# 2026-11-27. The next run judges the nodes, not the signal; the others cost CI about 4.5 minutes
# on a slow machine and reached no code path this one misses.
@pytest.mark.parametrize("sig,where", [(signal.SIGKILL, "head")], ids=["sigkill-head"])
def test_interrupted_run_converges_on_the_next(cluster, sig, where):
    rc, out, took, seen = play(cluster, "teardown.yml")
    assert rc == 0, out[-4000:]
    interrupted(cluster, sig, starting(1 if where == "head" else 3))
    recover = heal(cluster)
    rc, out, took, seen = play(cluster, "site.yml")
    assert rc == 0 and all(v.get("changed") == "0" for v in recap(out).values()), out[-3000:]
    record(cluster, "ansible-playbook %s during the %s start" % (sig.name, where),
           "next site.yml judges the half-started nodes and converges", "next run", recover, "nothing")  # fmt: skip


def test_full_disk_during_install_fails_that_node_only(cluster):
    rc, out, took, seen = play(cluster, "teardown.yml", "--limit", "node3", "-e", "raygate_teardown_purge=true")
    assert rc == 0, out[-4000:]
    rc, out = node(3, "mkdir -p /opt/raygate && mount -t tmpfs -o size=48m tmpfs /opt/raygate")
    assert rc == 0, out
    try:
        rc, out, took, detect = play(cluster, "site.yml", watch=r"not enough space")
        assert rc == 0, out[-4000:]
        got = summary(cluster, "site")
        assert got["result"] == "degraded" and list(got["out"]) == ["node3"], got
        error = got["out"]["node3"]["error"]
        assert "node3" in error and "/opt/raygate" in error and "MiB free" in error and "needed" in error, error
        rc, listing = node(3, "ls -A /opt/raygate")
        assert listing.strip() == "", "a half-built virtualenv was left: %s" % listing
    finally:
        node(3, "umount /opt/raygate")
    recover = heal(cluster)
    record(cluster, "`/opt/raygate` full on one node during the install (48 MiB tmpfs)",
           "that node fails with host, path, free and needed MiB; no virtualenv left; the rest come up",
           detect, recover, "nothing (no half-built virtualenv, no `current`)")  # fmt: skip


def test_changed_auth_token_is_refused_then_rotated(cluster):
    before = raylets()
    token = "0123456789abcdef" * 4
    rc, out, took, detect = play(cluster, "site.yml", "-e", "raygate_auth_token=" + token, watch=r"another auth token")
    assert rc == 2, out[-4000:]
    assert "raygate_rotate_token=true" in out and token not in out
    assert summary(cluster, "site")["result"] == "no_cluster"
    assert raylets() == before
    rc, on_node = node(2, "cat /etc/raygate/auth_token")
    assert on_node.strip() != token
    # The operator puts the new token in the inventory's token file and rotates: the cluster and
    # the inventory then agree, for the tests after this one.
    token_file = os.path.join(cluster["base"], "token")
    with open(token_file, "w") as fh:
        fh.write(token + "\n")
    rc, out, recover, seen = play(cluster, "site.yml", "-e", "raygate_rotate_token=true")
    assert rc == 0, out[-4000:]
    assert token not in out
    after = raylets()
    assert all(after[i] != before[i] for i in NODES), (before, after)
    for index in NODES:
        assert node(index, "cat /etc/raygate/auth_token")[1].strip() == token
    assert wait_alive(sorted(NODES.values()))
    record(cluster, "the inventory holds another auth token than the running cluster",
           "preflight refuses before any change; `-e raygate_rotate_token=true` restarts every node on the new one",
           detect, recover, "nothing changed when refused")  # fmt: skip


def test_unreachable_head_stops_the_run_with_one_message(cluster):
    before = raylets()
    # Dead before the run, as a head that died between runs: no SSH connection to it is left open.
    # (test_unreachable_worker_is_left_out_and_named meets its dead node over the last run's
    # persisted connection: the keepalives bound that wait.)
    forget_connection(NODES[1])
    link(1, False)
    try:
        rc, out, took, detect = play(cluster, "site.yml", watch=r"fatal: \[node1\]: UNREACHABLE")
        assert rc == 2, out[-4000:]
        got = summary(cluster, "site")
        assert got["result"] == "no_cluster" and got["message"].startswith("site: no cluster: node1 unreachable"), got
        assert {i: raylets().get(i) for i in (2, 3)} == {i: before[i] for i in (2, 3)}
    finally:
        link(1, True)
    recover = heal(cluster)
    record(cluster, "head unreachable at the start of site.yml (no SSH connection to it left open)",
           "the run stops: rc 2, `no_cluster`, the head's error",
           detect, recover, "nothing touched")  # fmt: skip


def test_teardown_with_a_node_down_finishes_on_the_next_run(cluster):
    forget_connection(NODES[3])  # dead before the run, as in test_unreachable_head_stops_the_run_with_one_message
    link(3, False)
    try:
        rc, out, took, detect = play(cluster, "teardown.yml", watch=r"fatal: \[node3\]: UNREACHABLE")
        assert rc == 2, out[-4000:]
        got = summary(cluster, "teardown")
        assert got["result"] == "incomplete" and list(got["out"]) == ["node3"], got
        assert leftovers(1) == "" and leftovers(2) == ""
    finally:
        link(3, True)
    rc, out, recover, seen = play(cluster, "teardown.yml")
    assert rc == 0, out[-4000:]
    assert summary(cluster, "teardown")["result"] == "complete"
    assert all(leftovers(i) == "" for i in NODES), [leftovers(i) for i in NODES]
    rc, out, took, seen = play(cluster, "teardown.yml")
    assert rc == 0 and all(v.get("changed") == "0" for v in recap(out).values()), out[-3000:]
    record(cluster, "a worker unreachable during teardown.yml (no SSH connection to it left open)",
           "the others are cleaned; rc 2, `incomplete` naming it; the next teardown finishes", detect, recover,
           "nothing after the second teardown")  # fmt: skip
