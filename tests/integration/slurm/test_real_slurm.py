"""The health gate over a real Slurm (tests/sandbox/slurm.sh: Debian's slurmctld, slurmd, munge on
3 sandbox nodes). One Slurm cluster for the module, tests in order; each leaves every node idle.

Shows: report mode changes nothing; an injected Xid drains its node with a raygate reason and the
next passing run resumes it; an admin's drain survives passing runs; a node running a job drains
without the job being killed; an unreachable node is drained as unreachable and resumed after;
the inventory plugin lists an allocation's nodes and site.yml over it brings Ray up.

Run on its own (`pytest tests/integration/slurm`, part of `make integration`): it owns the sandbox.
"""

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from conftest import ROOT, SANDBOX, STATE, VENV_BIN, forget_connection, needs_root, node, run, scratch_inventory
from packaging.requirements import Requirement

pytestmark = [
    needs_root,
    pytest.mark.skipif(
        not all(os.path.exists("/usr/sbin/" + d) for d in ("slurmctld", "slurmd", "munged")),
        reason="needs Debian's slurmctld, slurmd and munge (make bootstrap)",
    ),
]

SLURM_CONF = os.path.join(STATE, "slurm", "slurm.conf")
XID = {"gpu": {"model": "H100", "faults": [{"type": "xid", "xid": 79, "gpu": 3}]}}
HEALTHY = {"gpu": {"model": "H100"}}
# Generous bounds for waiting on Slurm (conditions are polled, never assumed after a sleep).
WAIT = 120
# A job runs on a node, which sees the host's /srv, /work and /home but has its own /tmp, /run and
# copy-on-write /etc /opt /usr /var /root: nothing a job reads or runs may come from the checkout,
# which can lie anywhere (CI clones under /tmp). Jobs start in the state dir (sandbox.sh keeps it
# out of those), and the job script's Ansible is a copy there (node_visible_ansible).
JOB_DIR = os.path.join(STATE, "job")
# A job that only sleeps starts in / (slurmstepd cannot chdir into a checkout its node does not see).
SBATCH_SLEEPER = ("sbatch", "--parsable", "--chdir", "/", "-o", "/dev/null")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    rc, out = run([SANDBOX, "up", "3"], timeout=300)
    assert rc == 0, out
    rc, out = run([SANDBOX, "slurm", "up"], timeout=300)
    assert rc == 0, out
    base = tmp_path_factory.mktemp("slurm")
    settings = "raygate_slurm: drain\nraygate_slurm_conf: %s\n" % SLURM_CONF
    inv = scratch_inventory(base / "inventory", base, "slurm", settings=settings)
    yield {"inv": inv, "base": base}
    run(["ip", "netns", "exec", "rg-node2", "ip", "link", "set", "eth0", "up"])
    run([SANDBOX, "slurm", "down"], timeout=300)
    run([SANDBOX, "down"], timeout=300)


def node_visible_ansible(dest):
    """ansible-core, the collection and ansible.cfg copied under DEST, which every node sees.

    What a real user keeps on a shared file system for the job script. The checkout's own .venv
    cannot serve: a node may not see the checkout, and a venv only works at the path it was made at
    (its scripts name their interpreter by path). So: a new venv at DEST/venv holding ansible-core
    and its dependencies copied from this interpreter's site-packages (same Python, same files),
    the entry points the job runs, and the collection's own files in DEST/collections.
    Returns the environment for sbatch (PATH, ANSIBLE_CONFIG, ANSIBLE_COLLECTIONS_PATH).
    """
    venv = os.path.join(dest, "venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, capture_output=True)
    site = subprocess.run(
        [os.path.join(venv, "bin", "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    todo, seen = ["ansible-core"], set()
    while todo:
        dist = importlib.metadata.distribution(todo.pop())
        name = dist.metadata["Name"].lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        for req in (Requirement(r) for r in dist.requires or ()):
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
        for path in dist.files or ():
            if path.parts[0] == ".." or "__pycache__" in path.parts:
                continue  # the venv's scripts (written below) and bytecode
            target = os.path.join(site, *path.parts)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy2(dist.locate_file(path), target)
    core = importlib.metadata.distribution("ansible-core")
    for entry in core.entry_points.select(group="console_scripts"):
        if entry.name in ("ansible", "ansible-playbook", "ansible-inventory"):
            target = os.path.join(venv, "bin", entry.name)
            with open(target, "w") as fh:
                fh.write("#!%s/bin/python\nimport sys\nfrom %s import %s\nsys.exit(%s())\n"
                         % (venv, entry.module, entry.attr, entry.attr))  # fmt: skip
            os.chmod(target, 0o755)
    collection = os.path.join(dest, "collections", "ansible_collections", "raygate", "cluster")
    os.makedirs(collection)
    shutil.copy2(os.path.join(ROOT, "galaxy.yml"), collection)
    for part in ("meta", "plugins", "playbooks", "roles"):
        shutil.copytree(
            os.path.join(ROOT, part), os.path.join(collection, part), ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy2(os.path.join(ROOT, "ansible.cfg"), dest)
    host_path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != VENV_BIN]
    return {
        "PATH": os.pathsep.join([os.path.join(venv, "bin"), *host_path]),
        "ANSIBLE_CONFIG": os.path.join(dest, "ansible.cfg"),
        "ANSIBLE_COLLECTIONS_PATH": os.path.join(dest, "collections"),
    }


def slurm_cmd(*args):
    rc, out = run(list(args), env={"SLURM_CONF": SLURM_CONF}, timeout=60)
    assert rc == 0, "%s: %s" % (" ".join(args), out)
    return out


def states():
    """{node: (state, reason)} as sinfo shows them (reason '' for none), less the ``*`` flag.

    ``*`` is Slurm's own "not responding": slurmctld sets it when one message to a node's slurmd
    goes unanswered (on this busy 2-core machine, a job's end can do it) and clears it at the next
    ping it answers, every SlurmdTimeout/3 (100 s here). raygate never sets or clears it, and the
    tests judge what raygate did: the state and its reason. (A node that stays unanswered goes DOWN,
    which this keeps.)
    """
    out = slurm_cmd("sinfo", "-h", "-N", "-o", "%N|%T|%E")
    rows = (line.split("|", 2) for line in out.splitlines() if line.strip())
    return {name: (state.rstrip("*"), "" if reason == "none" else reason) for name, state, reason in rows}


def health(cluster, *extra):
    rc, out = run([os.path.join(VENV_BIN, "ansible-playbook"), "-i", cluster["inv"], os.path.join(ROOT, "health.yml"),
                   *extra], timeout=900)  # fmt: skip
    return rc, out


def slurm_report(cluster):
    """slurm.json of the latest health report."""
    reports = sorted((cluster["base"] / "health").iterdir())
    with open(reports[-1] / "slurm.json") as fh:
        return json.load(fh)


def scenario(index, doc, tmp_path):
    path = tmp_path / ("node%d.json" % index)
    path.write_text(json.dumps(doc))
    rc, out = run([SANDBOX, "scenario", str(index), str(path)])
    assert rc == 0, out


def wait_for(predicate, what):
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    pytest.fail("no %s within %ss" % (what, WAIT))


def all_idle():
    return all(state == "idle" and not reason for state, reason in states().values())


def test_slurm_is_up_with_gpus_as_gres(cluster):
    out = slurm_cmd("sinfo", "-h", "-N", "-o", "%N %P %T %G")
    assert out.split("\n")[:3] == ["node1 gpu* idle gpu:8", "node2 gpu* idle gpu:8", "node3 gpu* idle gpu:8"]


def test_report_mode_changes_nothing(cluster, tmp_path):
    scenario(2, XID, tmp_path)
    before = states()
    rc, out = health(cluster, "-e", "raygate_slurm=report")
    assert rc == 0, out[-3000:]
    assert "slurm node2: would drain (raygate: xid: Xid 79" in out
    assert states() == before and all_idle()
    report = slurm_report(cluster)
    assert report["mode"] == "report" and report["drained"] == ["node2"]
    assert report["commands"][0].startswith("scontrol update NodeName=node2 State=DRAIN 'Reason=raygate: xid: Xid 79")


def test_check_mode_changes_nothing_either(cluster):
    rc, out = health(cluster, "--check")
    assert rc == 0, out[-3000:]
    assert "slurm node2: would drain" in out and all_idle()


def test_injected_xid_drains_its_node_with_a_raygate_reason(cluster):
    rc, out = health(cluster)
    assert rc == 0, out[-3000:]
    state, reason = states()["node2"]
    assert state == "drained" and reason.startswith("raygate: xid: Xid 79"), (state, reason)
    assert len(reason) <= 80
    assert states()["node1"] == states()["node3"] == ("idle", "")
    assert slurm_report(cluster)["drained"] == ["node2"]


def test_the_next_passing_run_resumes_it(cluster, tmp_path):
    scenario(2, HEALTHY, tmp_path)
    rc, out = health(cluster)
    assert rc == 0, out[-3000:]
    assert "slurm node2: resumed" in out
    assert states()["node2"] == ("idle", "")
    assert slurm_report(cluster)["resumed"] == ["node2"]


def test_an_admin_drain_stays_through_passing_runs(cluster):
    slurm_cmd("scontrol", "update", "NodeName=node3", "State=DRAIN", "Reason=admin: swap PSU")
    for attempt in ("first", "second"):
        rc, out = health(cluster)
        assert rc == 0, "%s run: %s" % (attempt, out[-3000:])
        assert states()["node3"] == ("drained", "admin: swap PSU")
        assert "slurm node3: left alone: IDLE+DRAIN for another reason (admin: swap PSU)" in out
        assert slurm_report(cluster)["left_alone"] == {"node3": "admin: swap PSU"}
    slurm_cmd("scontrol", "update", "NodeName=node3", "State=RESUME")
    assert wait_for(all_idle, "idle cluster after the admin's resume")


def test_a_node_running_a_job_drains_and_the_job_keeps_running(cluster, tmp_path):
    job = slurm_cmd(*SBATCH_SLEEPER, "-w", "node3", "--wrap", "sleep 600").strip()
    wait_for(lambda: slurm_cmd("squeue", "-h", "-j", job, "-o", "%T").strip() == "RUNNING", "running job")
    scenario(3, XID, tmp_path)
    rc, out = health(cluster)
    assert rc == 0, out[-3000:]
    state, reason = states()["node3"]
    assert state == "draining" and reason.startswith("raygate: xid:"), (state, reason)
    assert "running jobs finish first" in out
    # Drained, not downed: Slurm still runs the job and its process lives on in the node.
    assert slurm_cmd("squeue", "-h", "-j", job, "-o", "%T").strip() == "RUNNING"
    rc, ps = node(3, "pgrep -f 'sleep 600'")
    assert rc == 0 and ps.strip(), ps
    slurm_cmd("scancel", job)
    wait_for(lambda: states()["node3"][0] == "drained", "node3 drained once its job ended")
    scenario(3, HEALTHY, tmp_path)
    rc, out = health(cluster)
    assert rc == 0 and states()["node3"] == ("idle", ""), out[-3000:]


def test_an_unreachable_node_is_drained_as_unreachable_then_resumed(cluster):
    # Dead before the run, as a node that died between runs: no SSH connection to it is left open
    # (the fault and day-2 suites meet dead nodes over a persisted one too).
    forget_connection("198.18.0.12")
    rc, out = run(["ip", "netns", "exec", "rg-node2", "ip", "link", "set", "eth0", "down"])
    assert rc == 0, out
    rc, out = health(cluster)
    # The run reports the node it lost (rc 2 from the summary is not asked here: node1 still heads).
    state, reason = states()["node2"]
    assert state == "drained" and reason.startswith("raygate: unreachable:"), (state, reason, out[-3000:])
    rc, out = run(["ip", "netns", "exec", "rg-node2", "ip", "link", "set", "eth0", "up"])
    assert rc == 0, out
    rc, out = health(cluster)
    assert rc == 0, out[-3000:]
    assert states()["node2"] == ("idle", "")


def test_node_check_runs_locally_and_as_slurms_health_check_program(cluster, tmp_path):
    rc, out = health(cluster, "-e", "raygate_node_check=true", "-e", "raygate_slurm=off")
    assert rc == 0, out[-3000:]
    rc, out = node(2, "raygate-node-check")
    assert rc == 0 and "node2: healthy in" in out, out
    scenario(2, XID, tmp_path)
    rc, out = node(2, "raygate-node-check")
    assert rc == 1 and "node2: UNHEALTHY" in out and "fail: xid: Xid 79" in out, out
    assert states()["node2"] == ("idle", "")  # bare, it only answers: a Prolog's failure drains
    with open(SLURM_CONF) as fh:
        conf = fh.read()
    hook = "HealthCheckProgram=/usr/local/sbin/raygate-node-check-slurm\nHealthCheckInterval=5\n"
    try:
        with open(SLURM_CONF, "a") as fh:
            fh.write(hook)
        slurm_cmd("scontrol", "reconfigure")
        wait_for(lambda: states()["node2"][1].startswith("raygate: xid: Xid 79"), "node2 drained by its health check")
        assert states()["node1"] == states()["node3"] == ("idle", "")
        scenario(2, HEALTHY, tmp_path)
        wait_for(lambda: states()["node2"] == ("idle", ""), "node2 resumed by its health check")
    finally:
        with open(SLURM_CONF, "w") as fh:
            fh.write(conf)
        slurm_cmd("scontrol", "reconfigure")


def test_inventory_plugin_lists_an_allocation_and_site_brings_ray_up_over_it(cluster):
    job = slurm_cmd(*SBATCH_SLEEPER, "-N", "3", "--wrap", "sleep 600").strip()
    wait_for(lambda: slurm_cmd("squeue", "-h", "-j", job, "-o", "%T").strip() == "RUNNING", "running allocation")
    inv = cluster["base"] / "allocation"
    (inv / "group_vars").mkdir(parents=True)
    os.symlink(
        os.path.join(ROOT, "inventories", "sandbox", "group_vars", "ray_cluster"), inv / "group_vars" / "ray_cluster"
    )
    os.symlink(os.path.join(cluster["inv"], "group_vars", "all"), inv / "group_vars" / "all")
    (inv / "slurm.yml").write_text("plugin: raygate.cluster.slurm\njob_id: '%s'\nslurm_conf: %s\n" % (job, SLURM_CONF))
    rc, out = run([os.path.join(VENV_BIN, "ansible-inventory"), "-i", str(inv), "--list"])
    assert rc == 0, out
    listed = json.loads(out[out.index("{") :])
    assert listed["ray_head"]["hosts"] == ["node1"] and listed["ray_workers"]["hosts"] == ["node2", "node3"]
    address = listed["_meta"]["hostvars"]["node3"]["ansible_host"]
    # ansible-inventory marks values from an inventory plugin as unsafe in its JSON.
    assert (address.get("__ansible_unsafe") if isinstance(address, dict) else address) == "198.18.0.13"
    play = [os.path.join(VENV_BIN, "ansible-playbook"), "-i", str(inv)]
    try:
        rc, out = run(play + [os.path.join(ROOT, "site.yml")], timeout=900)
        assert rc == 0, out[-4000:]
        # site.yml's gate acted in Slurm too (raygate_slurm: drain in group_vars/all): all in service.
        for index in (1, 2, 3):
            assert "slurm node%d: in service" % index in out, out[-4000:]
        with open(cluster["base"] / "runs" / "site.json") as fh:
            assert json.load(fh)["result"] == "complete"
        rc, status = node(1, "pgrep -x raylet && pgrep -f gcs_server")
        assert rc == 0, status
        for index in (2, 3):
            rc, status = node(index, "pgrep -x raylet")
            assert rc == 0, "node%d has no raylet" % index
    finally:
        rc, out = run(play + [os.path.join(ROOT, "teardown.yml")], timeout=900)
        slurm_cmd("scancel", job)
    assert rc == 0, out[-4000:]
    for index in (1, 2, 3):
        assert node(index, "pgrep -x raylet")[0] == 1, "node%d still runs a raylet" % index


def test_the_job_script_brings_ray_up_for_its_command_and_down_after(cluster):
    # What the job reads and runs must be where the batch host (node1) sees it, whatever the
    # checkout's path: /srv is shared, /tmp is not. So its group_vars and its Ansible are copies
    # in the state dir, and it starts there (sbatch's default, the submitter's cwd, is the checkout).
    base = JOB_DIR
    group_vars = os.path.join(base, "group_vars")
    os.makedirs(os.path.join(group_vars, "all"))
    shutil.copytree(
        os.path.join(ROOT, "inventories", "sandbox", "group_vars", "ray_cluster"),
        os.path.join(group_vars, "ray_cluster"),
    )
    with open(os.path.join(group_vars, "all", "job.yml"), "w") as fh:
        fh.write("raygate_health_report_dir: %s/health\nraygate_run_summary_dir: %s/runs\n" % (base, base))
    env = node_visible_ansible(os.path.join(base, "ansible"))
    playbook = os.path.join(base, "ansible", "venv", "bin", "ansible-playbook")
    rc, out = node(1, "cd / && PATH=%s ansible-playbook --version" % env["PATH"])
    assert rc == 0, "node1, the batch host, cannot run %s: %s" % (playbook, out)
    payload = 'pgrep -x raylet && test -s "$RAY_AUTH_TOKEN_PATH" && echo ray-up-at=$RAY_ADDRESS'
    env.update(SLURM_CONF=SLURM_CONF, RAYGATE_GROUP_VARS=group_vars)
    rc, out = run(
        ["sbatch", "--parsable", "-N", "3", "--chdir", base, "-o", os.path.join(base, "job-%j.out"),
         os.path.join(ROOT, "docs", "slurm", "raygate-job.sbatch"), "bash", "-c", payload],
        env=env,
    )  # fmt: skip
    assert rc == 0, out
    job = out.strip().splitlines()[-1]
    wait_long = time.monotonic() + 900
    while slurm_cmd("squeue", "-h", "-j", job, "-o", "%T").strip():
        assert time.monotonic() < wait_long, "job %s still runs after 900 s" % job
        time.sleep(2)
    with open(os.path.join(base, "job-%s.out" % job)) as fh:
        log = fh.read()
    assert "ray-up-at=198.18.0.11:6379" in log, log[-4000:]
    assert "PLAY RECAP" in log and log.count("PLAY RECAP") >= 2, log[-4000:]
    with open(os.path.join(base, "runs", "teardown.json")) as fh:
        assert json.load(fh)["result"] == "complete"
    for index in (1, 2, 3):
        assert node(index, "pgrep -x raylet")[0] == 1, "node%d still runs a raylet" % index


def test_down_leaves_no_slurm_daemon(cluster):
    rc, out = run([SANDBOX, "slurm", "down"], timeout=300)
    assert rc == 0, out
    for name in ("slurmctld", "slurmd", "slurmstepd", "munged"):
        left = subprocess.run(["pgrep", "-a", "-x", name], capture_output=True, text=True, check=False)
        assert left.returncode == 1 and left.stdout == "", "%s left: %s" % (name, left.stdout + left.stderr)
    assert not os.path.exists(os.path.join(STATE, "slurm")) and not os.path.exists("/run/raygate-munge")
