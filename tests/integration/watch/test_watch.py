"""The node watcher between runs (issue 30): 3 sandbox nodes under the process supervisor, a real
Slurm (Debian's slurmctld, slurmd, munge) and a real Prometheus (Debian's) on this machine,
scraping the nodes through raygate's firewall.

Shows, in order on one cluster:
- every node's watcher runs; Prometheus, one of raygate_prometheus_sources, scrapes every node's Ray
  metrics and node_exporter (the watcher's textfile) through the firewall, from the file_sd file
  site.yml wrote, with the collection's alert rules loaded;
- with a job running, an Xid 79 injected into both workers' kernel logs at once (more than half of
  the cluster): one worker leaves Ray within one interval (drained with the reason, its raylet
  stopped, no task started there after the drain, drained in Slurm with the raygate reason, the
  textfile says why and the alert fires), the breaker keeps the other in and it says so;
- health.yml names the node the watcher took out;
- the next site.yml keeps the node out while the fault stands and names it in the run summary,
  then brings both back once the scenario is healthy (Slurm resumes them);
- teardown leaves no watcher, state or settings.

Run on its own (`make watch`, part of `make integration`): it owns the sandbox.
"""

import json
import os
import shutil
import subprocess
import time
import urllib.request

import pytest
from conftest import (
    ROOT,
    SANDBOX,
    STATE,
    VENV_BIN,
    needs_root,
    node,
    run,
    scenario,
    scratch_inventory,
    wait_until,
    watch_state,
)

pytestmark = [
    needs_root,
    pytest.mark.skipif(
        not all(shutil.which(b) for b in ("prometheus", "prometheus-node-exporter", "promtool")),
        reason="needs Debian's prometheus and prometheus-node-exporter (make bootstrap)",
    ),
    pytest.mark.skipif(
        not all(os.path.exists("/usr/sbin/" + d) for d in ("slurmctld", "slurmd", "munged")),
        reason="needs Debian's slurmctld, slurmd and munge (make bootstrap)",
    ),
]

SLURM_CONF = os.path.join(STATE, "slurm", "slurm.conf")
NODES = {1: "198.18.0.11", 2: "198.18.0.12", 3: "198.18.0.13"}
XID = {"gpu": {"model": "H100", "faults": [{"type": "xid", "xid": 79, "gpu": 3}]}}
HEALTHY = {"gpu": {"model": "H100"}}
INTERVAL = 15
DEADLINE = 20
PROMETHEUS = "127.0.0.1:19090"
TEXTFILE_DIR = "/var/lib/node_exporter/textfile_collector"
RULES = os.path.join(ROOT, "roles", "raygate", "files", "prometheus", "raygate-alerts.yml")
SETTINGS = f"""raygate_watch: true
raygate_watch_interval: {INTERVAL}
raygate_watch_drain_deadline: {DEADLINE}
raygate_slurm: drain
raygate_slurm_conf: {SLURM_CONF}
raygate_prometheus_sources: [198.18.0.1]
"""
# A one-minute job from the head: a task every half second, spread over the nodes, each printing
# where and when it started as soon as it is done (the test waits for tasks on both workers before
# it injects the fault).
JOB = """import socket, time
import ray
ray.init()
@ray.remote(num_cpus=0.2, scheduling_strategy="SPREAD")
def task():
    start = time.time()
    time.sleep(1)
    return socket.gethostname(), start
def report(refs):
    for ref in refs:
        try:
            host, start = ray.get(ref)
            print("TASK", host, start, flush=True)
        except Exception as exc:
            print("LOST", type(exc).__name__, flush=True)
pending, end = [], time.time() + 60
while time.time() < end:
    pending.append(task.remote())
    done, pending = ray.wait(pending, num_returns=len(pending), timeout=0.5)
    report(done)
report(pending)
"""
RAY_JOB = (
    "RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=/etc/raygate/auth_token RAY_ADDRESS=https://198.18.0.11:8265"
    " timeout -s KILL 120 /opt/raygate/current/bin/ray job %s --verify /etc/raygate/tls/ca.crt %s"
)
SUBMIT = (
    "cd $(mktemp -d) && cat > job.py <<'EOF'\n"
    + JOB
    + "EOF\n"
    + RAY_JOB % ("submit", "--no-wait --submission-id watch-job --working-dir . -- python job.py")
)


def job(command):
    """``ray job <command> watch-job`` on the head, as the play prints the jobs line."""
    return node(1, RAY_JOB % (command, "watch-job"))[1]


def play(cluster, name, *extra):
    return run([os.path.join(VENV_BIN, "ansible-playbook"), "-i", cluster["inv"], os.path.join(ROOT, name), *extra])


def slurm_state(name):
    rc, out = run(["sinfo", "-h", "-n", name, "-o", "%T|%E"], env={"SLURM_CONF": SLURM_CONF}, timeout=60)
    assert rc == 0, out
    return out.strip()


def prometheus(path):
    with urllib.request.urlopen("http://%s%s" % (PROMETHEUS, path), timeout=10) as answer:
        return json.load(answer)["data"]


def query(expr):
    return prometheus("/api/v1/query?query=" + urllib.request.quote(expr))["result"]


def ready(proc, base):
    """True once Prometheus answers /-/ready; fails at once, with its log, if it has exited."""
    if proc.poll() is not None:
        pytest.fail("Prometheus exited (%s): %s" % (proc.returncode, (base / "prometheus.log").read_text()[-2000:]))
    try:
        with urllib.request.urlopen("http://%s/-/ready" % PROMETHEUS, timeout=10) as answer:
            return answer.status == 200
    except OSError:
        return False


def summary(cluster, playbook):
    with open(cluster["base"] / "runs" / ("%s.json" % playbook)) as fh:
        return json.load(fh)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    rc, out = run([SANDBOX, "up", "3"], timeout=300)
    assert rc == 0, out
    rc, out = run([SANDBOX, "slurm", "up"], timeout=300)
    assert rc == 0, out
    base = tmp_path_factory.mktemp("watch")
    settings = SETTINGS + "raygate_prometheus_file_sd: %s/targets.json\n" % base
    inv = scratch_inventory(base / "inventory", base, "watch", settings=settings)
    procs = []
    try:
        # node_exporter in each node, serving the textfiles the gate and the watcher write there.
        for index, address in NODES.items():
            rc, out = node(index, "mkdir -p %s && (setsid prometheus-node-exporter --collector.disable-defaults"
                                  " --collector.textfile --collector.textfile.directory=%s"
                                  " --web.listen-address=%s:9100 >/tmp/node-exporter.log 2>&1 &)"
                                  % (TEXTFILE_DIR, TEXTFILE_DIR, address))  # fmt: skip
            assert rc == 0, out
        cluster = {"inv": inv, "base": base}
        rc, out = play(cluster, "site.yml")
        assert rc == 0, out[-4000:]
        cluster["site_out"] = out
        config = base / "prometheus.yml"
        config.write_text(
            "global: {scrape_interval: 5s, evaluation_interval: 5s}\n"
            "rule_files: [%s]\n"
            "scrape_configs:\n  - job_name: raygate\n    file_sd_configs: [{files: [%s/targets.json]}]\n"
            % (RULES, base)
        )
        log = open(base / "prometheus.log", "wb")  # pylint: disable=consider-using-with
        procs.append(subprocess.Popen(  # pylint: disable=consider-using-with
            ["prometheus", "--config.file=%s" % config, "--storage.tsdb.path=%s" % (base / "tsdb"),
             "--web.listen-address=%s" % PROMETHEUS], stdout=log, stderr=subprocess.STDOUT,
        ))  # fmt: skip
        # Prometheus takes a moment to listen, longer on a busy machine; the first test may find
        # every watcher's state already written, so the fixture waits for it to say it is ready.
        wait_until("Prometheus ready on %s" % PROMETHEUS, lambda: ready(procs[0], base), timeout=120)
        yield cluster
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=30)
        run([SANDBOX, "slurm", "down"], timeout=300)
        run([SANDBOX, "down"], timeout=300)


def test_every_watcher_runs_and_prometheus_scrapes_every_node_through_the_firewall(cluster):
    for index in NODES:
        wait_until("node%d's first watch run" % index, lambda i=index: watch_state(i).get("verdict"), timeout=120)
        assert watch_state(index)["verdict"] == "healthy", watch_state(index)
    targets = json.loads((cluster["base"] / "targets.json").read_text())
    jobs = {group["labels"]["job"] for group in targets}
    assert {"raygate-ray", "raygate-node"} <= jobs, targets

    def scraped():
        up = {(r["metric"]["job"], r["metric"]["host"]): r["value"][1] for r in query("up")}
        return (
            up
            if all(up.get((job, "node%d" % i)) == "1" for job in ("raygate-ray", "raygate-node") for i in NODES)
            else None
        )

    wait_until("Prometheus scraping every node's Ray metrics and node_exporter", scraped, timeout=120)
    hosts = {r["metric"]["host"] for r in query("raygate_watch_last_run_seconds")}
    assert hosts == {"node1", "node2", "node3"}, hosts
    assert {r["metric"]["host"] for r in query("raygate_watch_gcs_up == 1")} == {"node1"}
    # The rules shipped with the collection are loaded.
    names = {rule["name"] for group in prometheus("/api/v1/rules")["groups"] for rule in group["rules"]}
    assert "RaygateNodeTakenOut" in names, names


def test_faults_on_both_workers_at_once_take_one_out_of_ray_within_one_interval_while_a_job_runs(cluster):
    rc, out = node(1, SUBMIT)
    assert rc == 0, out[-3000:]
    wait_until("the job running", lambda: "RUNNING" in job("status"), timeout=120)
    # Tasks on both workers first: a watcher may fire at once, and the node it takes out must have
    # run tasks before, to show that none start there after.
    wait_until("the job's tasks on both workers", lambda: all("TASK node%d " % i in job("logs") for i in (2, 3)),
               timeout=120)  # fmt: skip
    # An Xid on both workers at once: more than half of the cluster. Their watchers fire on their own
    # clocks; the breaker lets the first one out and keeps the other in.
    injected = time.time()
    for index in (2, 3):
        scenario(cluster, index, XID)

    def outcome():
        states = {i: watch_state(i) for i in (2, 3)}
        out = [i for i, st in states.items() if st.get("taken_out")]
        kept = [i for i, st in states.items() if (st.get("refused") or {}).get("why") == "breaker"]
        return (out[0], kept[0], states) if len(out) == 1 and len(kept) == 1 else None

    gone, kept, states = wait_until("one worker out, one kept in", outcome, timeout=INTERVAL + DEADLINE + 90)
    cluster.update(out=gone, kept=kept)
    state = states[gone]["taken_out"]
    # Within one interval of the fault (plus the check and the drain's wait for the tasks).
    assert state["at"] - injected <= INTERVAL + 30, (state, injected)
    assert state["check"] == "xid" and "Xid 79" in state["reason"], state
    assert node(gone, "pgrep -x raylet")[0] == 1, "node%d still runs a raylet" % gone
    rc, nodes = node(1, "RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=/etc/raygate/auth_token "
                        "REQUESTS_CA_BUNDLE=/etc/raygate/tls/ca.crt /opt/raygate/current/bin/ray list nodes "
                        "--address https://198.18.0.11:8265 --detail --format json")  # fmt: skip
    assert rc == 0, nodes
    listed = json.loads(nodes[nodes.index("[") :])
    dead = [n for n in listed if n["node_ip"] == NODES[gone] and n["state"] == "DEAD"]
    assert dead and "raygate-watch: xid" in json.dumps(dead), dead
    # The other one stays in, and says why.
    refused = states[kept]["refused"]
    assert "2 of 3 nodes" in refused["detail"] and NODES[gone] in refused["detail"], refused
    assert node(kept, "pgrep -x raylet")[0] == 0, "the breaker should have kept node%d's raylet" % kept
    assert [n["state"] for n in listed if n["node_ip"] == NODES[kept]] == ["ALIVE"], listed
    # Slurm drained the one out, with raygate's reason.
    name = "node%d" % gone
    wait_until("%s drained in Slurm" % name, lambda: "raygate: xid" in slurm_state(name), timeout=60)
    # The job ends as Ray handles a drained node; no task started there after the drain.
    wait_until("the job's end", lambda: any(s in job("status").lower() for s in ("succeeded", "failed")), timeout=180)
    logs = job("logs")
    starts = [(line.split()[1], float(line.split()[2])) for line in logs.splitlines() if line.startswith("TASK ")]
    assert any(host == name for host, _t in starts), logs[-3000:]
    late = [t for host, t in starts if host == name and t > state["at"] + 2]
    assert not late, (state["at"], late)
    rc, text = node(gone, "cat %s/raygate_watch.prom" % TEXTFILE_DIR)
    assert 'raygate_watch_taken_out{check="xid",host="%s"' % name in text, text
    rc, text = node(kept, "cat %s/raygate_watch.prom" % TEXTFILE_DIR)
    assert 'raygate_watch_drain_refused{host="node%d",why="breaker"} 1' % kept in text, text
    wait_until("the alert RaygateNodeTakenOut firing for %s" % name, lambda: [
        a for a in prometheus("/api/v1/alerts")["alerts"]
        if a["labels"]["alertname"] == "RaygateNodeTakenOut" and a["labels"].get("host") == name
        and a["state"] == "firing"], timeout=120)  # fmt: skip


def test_health_yml_names_the_node_the_watcher_took_out(cluster):
    # Both workers still fail (the one kept in too): the gate's own breaker trips (rc 2, nobody left
    # out); the run still names the node the watcher took out, in its output and its summary.
    rc, out = play(cluster, "health.yml")
    assert rc == 2 and "circuit breaker tripped" in out, out[-4000:]
    name = "node%d" % cluster["out"]
    assert "The watcher took %s out of Ray at" % name in out, out[-4000:]
    assert name in summary(cluster, "health")["watched_out"], summary(cluster, "health")


def test_the_next_site_keeps_it_out_then_brings_both_back(cluster):
    gone = cluster["out"]
    rc, out = play(cluster, "site.yml")
    assert rc == 0, out[-4000:]
    result = summary(cluster, "site")
    name = "node%d" % gone
    assert result["result"] == "degraded" and name in result["out"], result
    assert name in result["watched_out"] and "still out" in result["message"], result
    assert node(gone, "pgrep -x raylet")[0] == 1
    for index in (2, 3):
        scenario(cluster, index, HEALTHY)
    rc, out = play(cluster, "site.yml")
    assert rc == 0, out[-4000:]
    assert summary(cluster, "site")["result"] == "complete", summary(cluster, "site")
    assert node(gone, "pgrep -x raylet")[0] == 0
    wait_until("%s back in Slurm" % name, lambda: slurm_state(name).startswith("idle"), timeout=60)

    # The watcher sees the raylet it had stopped running again, and forgets it took the node out.
    def forgotten():
        state = watch_state(gone)
        return state.get("verdict") == "healthy" and state.get("taken_out") is None

    wait_until("%s's watcher forgetting" % name, forgotten, timeout=INTERVAL + 60)


# What the watcher would leave: its daemon, settings, state, textfile, pid file and the node-check bundle.
LEFT = (
    "pgrep -f [r]aygate_node_watch.py; ls -d /etc/raygate/watch.json /var/lib/raygate/watch"
    " /run/raygate/raygate-watch.pid %s/raygate_watch.prom"
    % TEXTFILE_DIR
    + " /opt/raygate/node-check /etc/raygate/node-check.json 2>/dev/null"
)


def test_teardown_leaves_no_watcher(cluster):
    rc, out = play(cluster, "teardown.yml")
    assert rc == 0, out[-4000:]
    for index in NODES:
        rc, out = node(index, LEFT)
        assert out.strip() == "", (index, out)
