"""The pure parts of bench/bringup.py: counting, statistics, the table, the targets, the doc merge."""

import os
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import bringup  # noqa: E402


@pytest.mark.parametrize(
    ("tool", "argv", "host"),
    [
        (
            "ssh",
            ["-C", "-o", "ControlMaster=auto", "-o", 'User="root"', "198.18.0.11", "/bin/sh -c 'x'"],
            "198.18.0.11",
        ),
        ("ssh", ["-i", "/k", "-p", "22", "root@198.18.0.12", "true"], "198.18.0.12"),
        ("ssh", ["-tt", "-vvv", "198.18.0.13"], "198.18.0.13"),
        ("sftp", ["-b", "-", "-C", "-o", "Port=22", "[198.18.0.14]"], "198.18.0.14"),
        ("scp", ["-o", "X=1", "/tmp/a", "[198.18.0.15]:/tmp/b"], "198.18.0.15"),
        ("scp", ["/tmp/a", "root@198.18.0.16:/tmp/b"], "198.18.0.16"),
        ("ssh", ["-o", "X=1"], ""),
    ],
)
def test_ssh_host(tool, argv, host):
    assert bringup.ssh_host(tool, argv) == host


def test_count_ssh_log_groups_by_host_and_tool():
    text = "\n".join([
        "ssh\t-o\tControlMaster=auto\t198.18.0.11\t/bin/sh -c 'a'",
        "ssh\t-o\tControlMaster=auto\t198.18.0.11\t/bin/sh -c 'b'",
        "sftp\t-b\t-\t-C\t[198.18.0.12]",
        "ssh\t-O\tcheck\t198.18.0.12",
        "",
    ])  # fmt: skip
    counts = bringup.count_ssh_log(text)
    assert counts == {"198.18.0.11": {"ssh": 2, "sftp": 0, "scp": 0}, "198.18.0.12": {"ssh": 1, "sftp": 1, "scp": 0}}


def test_count_accepted_counts_sshd_connections_only():
    log = (
        "Server listening on 0.0.0.0 port 22.\n"
        "Accepted publickey for root from 198.18.0.1 port 50000 ssh2: ED25519 SHA256:x\n"
        "Received disconnect from 198.18.0.1 port 50000:11: disconnected by user\n"
        "Accepted publickey for root from 198.18.0.1 port 50002 ssh2: ED25519 SHA256:y\n"
    )
    assert bringup.count_accepted(log) == 2
    assert bringup.count_accepted("") == 0


def test_summary_and_format():
    stat = bringup.summary([3.0, None, 1.0, 2.0])
    assert stat == {"median": 2.0, "min": 1.0, "max": 3.0, "n": 3}
    assert bringup.fmt(stat) == "2.0 (1.0-3.0)"
    assert bringup.fmt(bringup.summary([4.0])) == "4.0"
    assert bringup.summary([None]) is None
    assert bringup.fmt(None) == "n/a"
    assert bringup.ratio(stat, None) is None
    assert bringup.ratio(stat, bringup.summary([4.0])) == 0.5


def test_per_host_counts_joins_tasks_ssh_and_connections():
    tasks = {"hosts": {"node1": {"tasks": 29, "changed": 4}, "localhost": {"tasks": 1}}}
    ssh = {"198.18.0.11": {"ssh": 10, "sftp": 1, "scp": 0}}
    rows = bringup.per_host_counts(
        tasks, ssh, {"node1": 1, "node2": 0}, {"node1": "198.18.0.11", "node2": "198.18.0.12"}
    )
    assert rows["node1"] == {"tasks": 29, "changed": 4, "ssh_commands": 11, "tcp_connections": 1}
    assert rows["node2"] == {"tasks": 0, "changed": 0, "ssh_commands": 0, "tcp_connections": 0}


def results_for(c3, a3, c6=None, a6=None, d3=5.0, e3=4.0, b3=20.0, restarted=0, left=0):
    def one(c, a, d, e, b):
        samples = {k: [] for k in bringup.STEPS}
        samples.update(c=[c], a=[a], d=[d], e=[e], b=[b])
        return {"samples": samples, "stats": {k: bringup.summary(v) for k, v in samples.items()},
                "d_restarted": [restarted], "e_left": [left], "b_left": [29]}  # fmt: skip

    out = {"3": one(c3, a3, d3, e3, b3)}
    if c6 is not None:
        out["6"] = one(c6, a6, d3, e3, b3)
    return out


def test_targets_met_and_missed():
    met = dict((t, ok) for t, measured, ok in bringup.evaluate_targets(results_for(18.0, 10.0, 22.0, 12.0)))
    assert met == {
        "c <= b (all joined), N=3": True,
        "c - a <= 10 s at N=3": True,
        "(c - a) at N=6 <= 1.3 x (c - a) at N=3": True,
        "d <= 0.25 x c, no Ray process restarted": False,  # 5.0 > 0.25 * 18
        "e <= 5 s at N=3, nothing left": True,
    }
    slow = results_for(30.0, 10.0, 45.0, 12.0, restarted=1)
    missed = dict((t, ok) for t, measured, ok in bringup.evaluate_targets(slow))
    assert missed["c <= b (all joined), N=3"] is False
    assert missed["c - a <= 10 s at N=3"] is False
    assert missed["(c - a) at N=6 <= 1.3 x (c - a) at N=3"] is False
    assert missed["d <= 0.25 x c, no Ray process restarted"] is False  # a restart fails it whatever the time


def test_table_has_a_row_per_step_and_the_ratios():
    table = bringup.render_table(results_for(18.0, 10.0, 22.0, 12.0))
    lines = table.splitlines()
    assert lines[0] == "| seconds, median (min-max) | N=3 | N=6 |"
    assert any(line.startswith("| ratio c/a | 1.80 | 1.83 |") for line in lines)
    assert any("`ray down`" in line and "max 29" in line for line in lines)
    assert len(lines) == 2 + len(bringup.STEPS) + 3 + 3


def test_merge_doc_keeps_text_outside_the_markers():
    block = bringup.MARK_BEGIN + "\nnew numbers\n" + bringup.MARK_END
    doc = "# Benchmarks\n\nanalysis before\n\n" + bringup.MARK_BEGIN + "\nold\n" + bringup.MARK_END + "\n\nafter\n"
    merged = bringup.merge_doc(doc, block)
    assert "analysis before" in merged and "after" in merged and "new numbers" in merged and "old" not in merged
    fresh = bringup.merge_doc("", block)
    assert fresh.startswith("# Benchmarks") and "new numbers" in fresh


@pytest.mark.parametrize(
    ("items", "size", "want"),
    [
        (range(5), 2, [[0, 1], [2, 3], [4]]),
        (range(5), 5, [[0, 1, 2, 3, 4]]),
        (range(5), 0, [[0, 1, 2, 3, 4]]),
        ([], 3, []),
    ],
)
def test_batches_start_the_floor_workers_as_site_yml_throttles_them(items, size, want):
    assert bringup.batches(items, size) == want


def test_node_addresses_follow_the_sandbox_plan_past_the_first_256():
    # sandbox.sh node_ip: node i at the (10+i)th address of 198.18.0.0, so 240 nodes stay in
    # 198.18.0.0/24 and 1,000 light nodes fit 198.18.0.0/22.
    assert [bringup.node_ip(i) for i in (1, 240, 245, 246, 1000)] == [
        "198.18.0.11",
        "198.18.0.250",
        "198.18.0.255",
        "198.18.1.0",
        "198.18.3.242",
    ]
    script = os.path.join(os.path.dirname(__file__), "..", "..", "sandbox", "node-init.sh")
    with open(script) as fh:
        assert 'echo "198.18.$(((10 + j) / 256)).$(((10 + j) % 256)) node${j}"' in fh.read()
