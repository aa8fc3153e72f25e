#!/usr/bin/python
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: nccl_test
short_description: Run nccl-tests on one node or on pairs of nodes and judge the result
version_added: 0.3.0
description:
  - With O(mode=single), runs C(all_reduce_perf) (or another nccl-tests binary) across the GPUs
    of this node, or judges an existing log given in O(log_path), and returns the checks
    C(nccl_busbw), C(nccl_wrong), C(nccl_completed), C(nccl_transport) and C(nccl_fabric_errors).
  - C(nccl_fabric_errors) reads this node's RDMA port error counters (under O(sysfs_root)) before and
    after the test. A counter that grew while the test ran blames its port - the device and port are
    named with the growth. Any growth of a counter counted in errors fails or warns as its class
    says (see O(fabric_error_thresholds)); counters judged as a rate per hour are judged by their
    rate over the test, counted as at least an hour, so a few symbol errors do not fail a short test.
    A single-node test moves no data over the RDMA ports, so there it catches errors that arise on
    an idle link (a bad cable or transceiver still counts symbol errors and link-downs).
  - With O(mode=pairs), run once on a launcher, tests the nodes of O(hosts) two at a time with
    C(mpirun), one rank per GPU. Round 1 pairs neighbours, round 2 shifts the ring by one, so
    every node is tested within two rounds and meets a second partner (with an odd count, all
    but the first and the last); the pairs of a round run at the same time. A node that passed with
    anyone is good; a node that failed with a good node is the culprit. A node whose failures
    are all with nodes not proven good is retested against a good node (one from
    O(known_good) when given). When no pair passed at all, pairs of nodes never tested
    together are tried first, to find a good node. O(max_retest_phases) bounds these extra
    phases; a node still unexplained fails with C(could not isolate).
  - Every test runs with C(NCCL_DEBUG=INFO) (and C(NCCL_DEBUG_SUBSYS=INIT,NET) unless set), so
    the transport NCCL chose is checked, for example that every network channel uses
    GPUDirect RDMA (C(via NET/IB/0/GDRDMA)) and that NCCL did not fall back to TCP sockets.
  - A failing test makes the node unhealthy in the result; it does not fail the task. A
    missing binary or C(mpirun) is reported the same way. Only bad arguments fail the task.
requirements:
  - the nccl-tests program O(binary) (V(all_reduce_perf) by default), built against NCCL, on E(PATH) or in
    C(/opt/nccl-tests/build) of every node tested; not needed to judge a log given in O(log_path)
  - with O(mode=pairs), an Open MPI style launcher (O(mpirun)) on the node the module runs on, able to start
    ranks on every node of O(hosts), and nccl-tests built with MPI support
author: raygate maintainers (@raygate)
extends_documentation_fragment:
  - raygate.cluster.attributes
attributes:
  check_mode:
    support: full
    details:
      - Runs the test in check mode too; it changes nothing.
  diff_mode:
    support: none
    details:
      - Changes nothing, so there is nothing to show.
options:
  mode:
    description:
      - V(single) tests the GPUs of this node; V(pairs) tests O(hosts) two at a time from this
        node with C(mpirun).
    type: str
    choices: [single, pairs]
    default: single
  log_path:
    description:
      - Judge this existing nccl-tests output (with or without NCCL INFO lines) instead of
        running a test. Only with O(mode=single).
    type: path
  binary:
    description:
      - The nccl-tests program. A name is looked up on E(PATH), then in
        C(/opt/nccl-tests/build); a path is used as is (with O(mode=pairs) it must exist on
        every node).
    type: str
    default: all_reduce_perf
  gpus:
    description:
      - GPUs per node. Required to run a test (not with O(log_path)).
      - O(mode=single) runs one process with C(-g) O(gpus); O(mode=pairs) runs 2 x O(gpus)
        ranks with C(-g 1).
    type: int
  min_bytes:
    description: Smallest message size (C(-b)); nccl-tests accepts K, M and G suffixes.
    type: str
    default: "8"
  max_bytes:
    description: Largest message size (C(-e)). The busbw check reads the largest size.
    type: str
    default: 16G
  step_factor:
    description: Multiplication factor between sizes (C(-f)).
    type: int
    default: 2
  iters:
    description: Timed iterations per size (C(-n)).
    type: int
    default: 20
  warmup_iters:
    description: Warm-up iterations per size (C(-w)).
    type: int
    default: 5
  check:
    description: Validate the results (C(-c)); V(0) turns the C(#wrong) column off.
    type: int
    default: 1
  extra_args:
    description: More arguments for the nccl-tests program, appended last.
    type: list
    elements: str
    default: []
  env:
    description:
      - Environment of the test (passed on with C(mpirun -x) in O(mode=pairs)). Applied over
        O(env_file). C(NCCL_DEBUG) is always C(INFO).
    type: dict
    default: {}
  env_file:
    description:
      - C(KEY=VALUE) file read first, for example the C(/etc/raygate/nccl.env) that
        M(raygate.cluster.nccl_env) writes. The task fails when it does not exist, unless
        O(env_file_optional) is set.
    type: path
  env_file_optional:
    description:
      - Run without O(env_file) when it does not exist (with a warning), for example on nodes
        the health gate checks before raygate ever configured them.
    type: bool
    default: false
  min_busbw:
    description:
      - Lowest acceptable bus bandwidth in GB/s at the largest size.
      - Default, from public figures, by GPU model, fabric and scope (C(single_node) for
        O(mode=single), C(2_node) for O(mode=pairs)), applied only when the run matches the
        figure's GPU count and reaches its size (16G). Without one the check is skipped and its
        detail says so.
    type: float
  gpu_model:
    description:
      - GPU model for the default O(min_busbw), for example V(H100) or V(H200). Default, the
        model named in the test's device list.
    type: str
  fabric:
    description:
      - The fabric between nodes, for the default O(min_busbw) and O(require_transport).
      - V(auto) reads the network NCCL used from the log. V(none) means no RDMA is expected, and
        O(require_transport) then defaults to V(any).
    type: str
    choices: [auto, efa, ib, roce, none]
    default: auto
  require_transport:
    description:
      - V(GDRDMA) fails unless every network channel uses GPUDirect RDMA; V(no_socket) fails
        only on a fallback to TCP sockets; V(any) accepts any transport.
      - Default, V(GDRDMA), or V(any) with O(fabric=none).
      - A single node has no network channels, and passes unless NCCL logged a socket one.
    type: str
    choices: [GDRDMA, no_socket, any]
  hosts:
    description: With O(mode=pairs), the addresses of the nodes to test (at least two, distinct).
    type: list
    elements: str
    default: []
  mpirun:
    description: The MPI launcher (Open MPI flags), a name looked up on E(PATH) or a path.
    type: str
    default: mpirun
  mpirun_args:
    description: More C(mpirun) arguments, placed before the C(-x) exports.
    type: list
    elements: str
    default: []
  known_good:
    description:
      - Nodes already proven good (for example healthy members of the running cluster); they
        are the partners of retests and need not be in O(hosts).
    type: list
    elements: str
    default: []
  parallel:
    description:
      - Run the pairs of one round at the same time (they share no node), as the rounds are meant;
        retests that share a good node run one after another. V(false) runs every test in turn.
    type: bool
    default: true
  max_retest_phases:
    description:
      - With O(mode=pairs), how many phases of retests may follow the two rounds. One phase
        settles every node once a good node is known; finding one when no pair passed may
        take more.
    type: int
    default: 2
  sysfs_root:
    version_added: 0.5.0
    description:
      - Root under which C(sys/class/infiniband) is read for C(nccl_fabric_errors) (a simulated tree in
        the sandbox). Only with O(mode=single), when a test runs.
    type: path
    default: /
  fabric_error_thresholds:
    version_added: 0.5.0
    description:
      - The same per-counter limits as M(raygate.cluster.gpu_health)'s option of that name. Here a
        counter counted in errors breaches on any growth during the test; one judged as a rate per
        hour breaches above its rate; V(null) reads a counter without judging it.
    type: dict
    default: {}
  timeout:
    description: Seconds one test may run.
    type: int
    default: 600
notes:
  - O(mode=pairs) runs the tests one after the other. A node is judged from its best
    evidence, a passing test or the one with a good partner; RV(tests) and RV(retests) hold
    every test.
  - The result never holds the whole log; RV(log_tail) has its last 40 lines when the test
    failed.
  - O(mode=pairs) does not read port counters; the gate's single-node test and
    M(raygate.cluster.gpu_health)'s C(fabric_errors) and C(link_flaps) judge each node's own ports.
seealso:
  - module: raygate.cluster.nccl_env
"""

EXAMPLES = r"""
- name: All-reduce across the 8 GPUs of each node
  raygate.cluster.nccl_test:
    gpus: 8
    env_file: /etc/raygate/nccl.env
  register: nccl

- name: Judge a log written elsewhere
  raygate.cluster.nccl_test:
    log_path: /var/log/nccl/all_reduce.log
    min_busbw: 400

- name: Test the nodes two by two from the first one and name the bad ones
  raygate.cluster.nccl_test:
    mode: pairs
    hosts: "{{ groups['ray_cluster'] | map('extract', hostvars, 'ansible_host') | list }}"
    gpus: 8
    fabric: ib
    env_file: /etc/raygate/nccl.env
    mpirun_args: [--mca, btl_tcp_if_include, eth0]
  run_once: true
  register: pairs
"""

RETURN = r"""
checks:
  description: The checks of the node (O(mode=single)).
  returned: mode single
  type: list
  elements: dict
  sample:
    - {name: nccl_busbw, status: pass, detail: "busbw 481.20 GB/s at 17179869184 bytes >= 460.00 GB/s",
       value: 481.2, threshold: 460.0}
    - {name: nccl_wrong, status: pass, detail: no wrong values, value: 0, threshold: 0}
    - {name: nccl_completed, status: pass, detail: 32 sizes measured, value: 0, threshold: 0}
    - {name: nccl_transport, status: pass, detail: no NET channels (single node), value: null, threshold: null}
    - {name: nccl_fabric_errors, status: fail, value: 1, threshold: 0, severity: do-not-allocate,
       detail: "mlx5_3:1 link_downed +1 (max 4) during the 1 min test",
       action: "reseat or replace the cable/transceiver of mlx5_3 port 1, then clear its counters (perfquery -R)"}
verdict:
  description: V(fail) if a check failed, else V(warn) if one warned, else V(pass).
  returned: mode single
  type: str
  sample: pass
healthy:
  description: RV(verdict) is not V(fail).
  returned: mode single
  type: bool
  sample: true
busbw:
  description: Best bus bandwidth (GB/s) at the largest size.
  returned: mode single
  type: float
  sample: 481.2
avg_busbw:
  description: The C(Avg bus bandwidth) nccl-tests printed, over all sizes.
  returned: mode single
  type: float
  sample: 171.4
max_size:
  description: The largest size measured, in bytes.
  returned: mode single
  type: int
  sample: 17179869184
transports:
  description: The distinct transports of the NCCL channels (network device numbers left out).
  returned: mode single
  type: list
  elements: str
  sample: [P2P/CUMEM/read]
network:
  description: The network NCCL chose (C(Using network X)), null when it logged none.
  returned: mode single
  type: str
  sample: IB
fabric:
  description:
    - The fabric used to choose defaults, O(fabric) or what the log shows (V(efa), V(ib), V(roce),
      V(socket) for TCP; null when it shows no network).
    - With O(mode=pairs) and O(fabric=auto), every distinct one of the tests, comma-separated.
  returned: always
  type: str
  sample: ib
gpu_model:
  description: The GPU model used to choose the default threshold.
  returned: mode single
  type: str
  sample: H100
command:
  description: The command run (null when judging O(log_path)).
  returned: mode single
  type: str
  sample: /opt/nccl-tests/build/all_reduce_perf -b 8 -e 16G -f 2 -g 8 -n 20 -w 5 -c 1
source:
  description: V(run) or V(log).
  returned: mode single
  type: str
  sample: run
log_tail:
  description: The last 40 lines of the output, when the verdict is V(fail).
  returned: mode single, when failing
  type: list
  elements: str
  sample: ["node1: Test NCCL failure common.cu:1005 'remote process exited or there was a network error'"]
checked_at:
  description: When the checks were made (seconds since the epoch).
  returned: always
  type: float
  sample: 1763719201.52
nodes:
  description:
    - Per node of O(hosts) (O(mode=pairs)), its pair checks C(nccl_pair_busbw),
      C(nccl_pair_wrong), C(nccl_pair_completed), C(nccl_pair_transport) from its best test,
      and C(nccl_pair_isolation) with the reasoning.
  returned: mode pairs
  type: dict
  sample:
    10.0.0.3:
      healthy: false
      verdict: fail
      partners: [10.0.0.4, 10.0.0.2]
      checks:
        - {name: nccl_pair_busbw, status: fail, value: 2.1, threshold: 300.0,
           detail: "with 10.0.0.2: busbw 2.10 GB/s at 17179869184 bytes is below 300.00 GB/s"}
        - {name: nccl_pair_isolation, status: fail, value: bad, threshold: null,
           detail: "failed with 10.0.0.2, which is proven good"}
rounds:
  description: The pairs of each round.
  returned: mode pairs
  type: list
  elements: list
  sample: [[[10.0.0.1, 10.0.0.2], [10.0.0.3, 10.0.0.4]], [[10.0.0.2, 10.0.0.3], [10.0.0.4, 10.0.0.1]]]
tests:
  description: Each test of the rounds, with its checks (named C(nccl_pair_*)) and the command.
  returned: mode pairs
  type: list
  elements: dict
  sample:
    - hosts: [10.0.0.1, 10.0.0.2]
      round: 1
      verdict: pass
      busbw: 371.5
      transport: NET/IB/GDRDMA
      checks: []
      command: mpirun --allow-run-as-root -np 16 -H 10.0.0.1:8,10.0.0.2:8 -x NCCL_DEBUG ...
retests:
  description: The tests run after the rounds, in the same form as RV(tests) (C(round) is the phase, from 3).
  returned: mode pairs
  type: list
  elements: dict
  sample: []
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.raygate.cluster.plugins.module_utils.gate import nccl_runner


def main():
    module = AnsibleModule(
        argument_spec=nccl_runner.ARGUMENT_SPEC,
        supports_check_mode=True,
    )
    nccl_runner.run(module)


if __name__ == "__main__":
    main()
