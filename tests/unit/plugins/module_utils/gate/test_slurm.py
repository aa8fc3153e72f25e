"""Slurm hostlists, scontrol/sinfo parsing and the drain decision, on output captured from the
sandbox's real Slurm 22.05 (tests/sandbox/slurm.sh)."""

import pytest

from ansible_collections.raygate.cluster.plugins.module_utils.gate import slurm

# scontrol show node -o, three nodes: draining with a job (ours), draining while allocated, admin-drained.
SHOW_NODE = (
    "NodeName=node1 Arch=x86_64 CoresPerSocket=1  CPUAlloc=1 CPUEfctv=2 CPUTot=2 CPULoad=1.17"
    " AvailableFeatures=(null) ActiveFeatures=(null) Gres=gpu:8 NodeAddr=198.18.0.11 NodeHostName=node1"
    " Version=22.05.8 OS=Linux 6.18.44-fc-v595 #1 SMP PREEMPT_DYNAMIC @0  RealMemory=512 AllocMem=0"
    " FreeMem=22361 Sockets=2 Boards=1 State=MIXED+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A"
    " MCS_label=N/A Partitions=gpu  BootTime=2026-11-23T20:49:23 SlurmdStartTime=2026-11-24T00:18:14"
    " LastBusyTime=2026-11-24T00:18:14 CfgTRES=cpu=2,mem=512M,billing=2 AllocTRES=cpu=1 CapWatts=n/a"
    " CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s"
    " Reason=raygate: xid: Xid 79 on GPU 3 [root@2026-11-24T00:18:20]\n"
    "NodeName=node2 Arch=x86_64 CoresPerSocket=1  CPUAlloc=2 CPUEfctv=2 CPUTot=2 CPULoad=1.17"
    " AvailableFeatures=(null) ActiveFeatures=(null) Gres=gpu:8 NodeAddr=198.18.0.12 NodeHostName=node2"
    " Version=22.05.8 OS=Linux 6.18.44-fc-v595 #1 SMP PREEMPT_DYNAMIC @0  RealMemory=512 AllocMem=0"
    " FreeMem=22361 Sockets=2 Boards=1 State=IDLE ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A"
    " MCS_label=N/A Partitions=gpu  BootTime=2026-11-23T20:49:23 SlurmdStartTime=2026-11-24T00:18:14"
    " LastBusyTime=2026-11-24T00:18:14 CfgTRES=cpu=2,mem=512M,billing=2 AllocTRES= CapWatts=n/a"
    " CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s\n"
    "NodeName=node3 Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=1.17"
    " AvailableFeatures=(null) ActiveFeatures=(null) Gres=gpu:8 NodeAddr=198.18.0.13 NodeHostName=node3"
    " Version=22.05.8 OS=Linux 6.18.44-fc-v595 #1 SMP PREEMPT_DYNAMIC @0  RealMemory=512 AllocMem=0"
    " FreeMem=22359 Sockets=2 Boards=1 State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A"
    " MCS_label=N/A Partitions=gpu  BootTime=2026-11-23T20:49:23 SlurmdStartTime=2026-11-24T00:18:14"
    " LastBusyTime=2026-11-24T00:18:14 CfgTRES=cpu=2,mem=512M,billing=2 AllocTRES= CapWatts=n/a"
    " CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s"
    " Reason=admin: maintenance window [root@2026-11-24T00:18:20]\n"
)
SHOW_JOB = (
    "JobId=2 JobName=wrap UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901758 Nice=0"
    " Account=(null) QOS=(null) JobState=RUNNING Reason=None Dependency=(null) Requeue=1 Restarts=0"
    " BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:00 TimeLimit=UNLIMITED TimeMin=N/A"
    " SubmitTime=2026-11-24T00:18:18 Partition=gpu AllocNode:Sid=localhost:29576 ReqNodeList=(null)"
    " ExcNodeList=(null) NodeList=node[1-2] BatchHost=node1 NumNodes=2 NumCPUs=2 NumTasks=2"
    " CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=2,node=2,billing=2 Socks/Node=* WorkDir=/tmp"
    " StdErr=/dev/null StdIn=/dev/null StdOut=/dev/null Power= TresPerNode=gres:gpu:8 \n"
)
SINFO = "node1|draining|raygate: xid: Xid 79 on GPU 3\nnode2|idle|none\nnode3|drained|admin: maintenance window\n"


@pytest.mark.parametrize(
    "text, names",
    [
        ("node[1-3]", ["node1", "node2", "node3"]),
        ("node[1-2,7],gpu07", ["node1", "node2", "node7", "gpu07"]),
        ("gpu-a[01-03]", ["gpu-a01", "gpu-a02", "gpu-a03"]),
        ("n[1-2]-r[3,5]", ["n1-r3", "n1-r5", "n2-r3", "n2-r5"]),
        ("node[08-11]", ["node08", "node09", "node10", "node11"]),
        ("node1, node1,node2", ["node1", "node2"]),
        ("", []),
    ],
)
def test_expand_hostlist(text, names):
    assert slurm.expand_hostlist(text) == names


@pytest.mark.parametrize("text", ["node[1-3", "node1-3]", "node[3-1]", "node[a-b]"])
def test_expand_hostlist_refuses_malformed(text):
    with pytest.raises(ValueError):
        slurm.expand_hostlist(text)


@pytest.mark.parametrize(
    "names, text",
    [
        (["node1", "node2", "node3"], "node[1-3]"),
        # What `scontrol show hostlist node1,node2,node3,gpu01,gpu02,gpu10` printed.
        (["node1", "node2", "node3", "gpu01", "gpu02", "gpu10"], "node[1-3],gpu[01-02,10]"),
        (["node2"], "node2"),
        (["node1", "node10"], "node[1,10]"),
        (["login", "node1", "node3"], "login,node[1,3]"),
    ],
)
def test_compress_hostlist_round_trips(names, text):
    assert slurm.compress_hostlist(names) == text
    assert slurm.expand_hostlist(text) == names


def test_parse_show_node_reads_state_address_and_reason_without_its_stamp():
    nodes = slurm.parse_show_node(SHOW_NODE)
    assert sorted(nodes) == ["node1", "node2", "node3"]
    one = nodes["node1"]
    assert (one["address"], one["base"], one["flags"]) == ("198.18.0.11", "MIXED", ["DRAIN"])
    assert one["reason"] == "raygate: xid: Xid 79 on GPU 3"
    assert one["partitions"] == ["gpu"] and one["gres"] == "gpu:8" and one["cpus_alloc"] == 1
    assert nodes["node2"]["reason"] == "" and not slurm.out_of_service(nodes["node2"])
    assert nodes["node3"]["reason"] == "admin: maintenance window" and slurm.out_of_service(nodes["node3"])


def test_parse_record_keeps_values_with_equals_and_spaces():
    fields = slurm.parse_record(SHOW_NODE.splitlines()[0], free_reason=True)
    assert fields["CfgTRES"] == "cpu=2,mem=512M,billing=2"
    assert fields["OS"] == "Linux 6.18.44-fc-v595 #1 SMP PREEMPT_DYNAMIC @0"
    assert (fields["ReasonUser"], fields["ReasonTime"]) == ("root", "2026-11-24T00:18:20")


def test_parse_show_job_expands_the_nodelist():
    job = slurm.parse_show_job(SHOW_JOB)
    assert job["JobState"] == "RUNNING" and job["nodes"] == ["node1", "node2"]
    assert job["Reason"] == "None"
    with pytest.raises(ValueError):
        slurm.parse_show_job("slurm_load_jobs error: Invalid job id specified\n")


def test_parse_sinfo_nodes():
    rows = slurm.parse_sinfo_nodes(SINFO)
    assert rows[1] == {"name": "node2", "state": "idle", "reason": ""}
    assert rows[2]["reason"] == "admin: maintenance window"


@pytest.mark.parametrize(
    "state, base, flags",
    [
        ("IDLE", "IDLE", []),
        ("DOWN+DRAIN+NOT_RESPONDING", "DOWN", ["DRAIN", "NOT_RESPONDING"]),
        ("idle*", "IDLE", ["NOT_RESPONDING"]),
        ("ALLOCATED+DRAIN", "ALLOCATED", ["DRAIN"]),
    ],
)
def test_split_state(state, base, flags):
    assert slurm.split_state(state) == (base, flags)


def test_drain_reason_is_prefixed_cut_and_counts_the_rest():
    assert slurm.drain_reason(["xid: Xid 79 on GPU 3"]) == "raygate: xid: Xid 79 on GPU 3"
    long = slurm.drain_reason(["ecc: " + "x" * 200, "xid: Xid 79\non GPU 3"], limit=60)
    assert len(long) == 60 and long.startswith("raygate: ecc: xxx") and long.endswith("... (+1 more)")
    gone = slurm.drain_reason(["reachable: ssh: connect to host 198.18.0.12 port 22: No route to host"])
    assert gone.startswith("raygate: unreachable: ssh: connect to host")
    assert slurm.drain_reason([]) == "raygate: failed the health gate"
    with pytest.raises(ValueError):
        slurm.drain_reason(["x"], limit=10)


def _by_host(entries):
    return {e["host"]: e for e in entries}


def test_decide_drains_a_failing_idle_node_and_a_busy_one_without_downing_it():
    undrained = SHOW_NODE.replace("State=MIXED+DRAIN", "State=MIXED").replace("Reason=raygate", "X=y")
    nodes = slurm.parse_show_node(undrained)
    out = _by_host(slurm.decide([], {"node1": ["xid: Xid 79"], "node2": ["ecc: 1 uncorrectable"]}, nodes))
    assert out["node1"]["action"] == "drain" and "running jobs finish" in out["node1"]["note"]
    assert out["node1"]["args"] == ["update", "NodeName=node1", "State=DRAIN", "Reason=raygate: xid: Xid 79"]
    assert out["node2"]["action"] == "drain" and out["node2"]["note"] == "drained"


def test_decide_never_touches_a_node_drained_for_another_reason():
    nodes = slurm.parse_show_node(SHOW_NODE)
    out = _by_host(slurm.decide(["node3"], {}, nodes))
    assert out["node3"]["action"] == "none" and "admin: maintenance window" in out["node3"]["note"]
    out = _by_host(slurm.decide([], {"node3": ["xid: Xid 79"]}, nodes))
    assert out["node3"]["action"] == "none" and out["node3"]["note"].startswith("left alone")


def test_decide_resumes_only_its_own_and_redrains_only_on_a_new_reason():
    nodes = slurm.parse_show_node(SHOW_NODE)
    out = _by_host(slurm.decide(["node1", "node2"], {}, nodes))
    assert out["node1"]["action"] == "resume" and out["node1"]["args"] == ["update", "NodeName=node1", "State=RESUME"]
    assert out["node2"] == dict(out["node2"], action="none", note="in service", args=None)
    same = _by_host(slurm.decide([], {"node1": ["xid: Xid 79 on GPU 3"]}, nodes))
    assert same["node1"]["action"] == "none" and same["node1"]["note"] == "already drained by raygate"
    new = _by_host(slurm.decide([], {"node1": ["ecc: 2 uncorrectable"]}, nodes))
    assert new["node1"]["action"] == "drain" and new["node1"]["new_reason"] == "raygate: ecc: 2 uncorrectable"


def test_decide_with_the_breaker_tripped_drains_and_resumes_nothing():
    """A tripped breaker lists every node as healthy: resuming would undrain nodes that failed."""
    nodes = slurm.parse_show_node(SHOW_NODE)
    out = _by_host(slurm.decide(["node1"], {"node2": ["xid: Xid 79"]}, nodes, breaker_tripped=True))
    assert out["node2"]["action"] == "none" and "circuit breaker" in out["node2"]["note"]
    assert out["node1"]["action"] == "none" and "circuit breaker" in out["node1"]["note"]
    assert slurm.decide(["node1"], {}, nodes)[0]["action"] == "resume"


def test_decide_maps_hosts_to_slurm_names_and_skips_what_it_does_not_know():
    nodes = slurm.parse_show_node(SHOW_NODE)
    out = _by_host(
        slurm.decide(["gpu-a", "stranger"], {}, nodes, names={"gpu-a": "node1"}, skipped=["node3"]),
    )
    assert out["gpu-a"]["node"] == "node1" and out["gpu-a"]["action"] == "resume"
    assert out["stranger"]["action"] == "none" and "not a Slurm node" in out["stranger"]["note"]
    assert out["node3"]["action"] == "none" and "not re-checked" in out["node3"]["note"]


def test_summary_lines_say_what_happened_or_would():
    nodes = slurm.parse_show_node(SHOW_NODE)
    entries = slurm.decide(["node1"], {"node2": ["xid: Xid 79"]}, nodes)
    assert slurm.summary_lines(entries, "report") == [
        "slurm node2: would drain (raygate: xid: Xid 79)",
        "slurm node1: would resume (resumed (raygate had drained it))",
    ]
    assert slurm.summary_lines(entries, "drain")[0] == "slurm node2: drained (raygate: xid: Xid 79)"
