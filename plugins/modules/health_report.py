#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: health_report
short_description: Decide the health gate and write its reports on the controller
version_added: 0.1.0
description:
  - Takes the check results of M(raygate.cluster.gpu_health) and M(raygate.cluster.nccl_test) for
    every node and decides which nodes are healthy, whether the head is, and whether enough
    nodes remain (RV(ok)).
  - A node's verdict is V(fail) if any of its checks failed, else V(warn) if any warned, else
    V(pass); skipped checks do not count. A node given with O(nodes[].status=skipped) is a
    running member that was not re-checked; its verdict is V(skipped) and it counts as healthy.
    A checked node without any check result fails (check V(checks)).
  - Every failing or warning check carries a C(severity) - V(do-not-allocate) (never give the node
    to a job), V(degraded) (usable, fix it soon) or V(info) - and an C(action), the recommended
    remedy. Checks that come without them get the status's default severity (V(do-not-allocate)
    for a failure, V(degraded) for a warning) and the action of a built-in table keyed by check
    name. A node's C(severity) is the worst of its checks'.
  - B(Fleet view.) The nodes' O(nodes[].fingerprint)s (M(raygate.cluster.gpu_health)'s) are counted
    per field into a table - each distinct value, how many nodes have it and which. A node that
    differs from O(fleet_expect) on a pinned field, or else from the fleet's majority (a value more
    than half of the reporting nodes share), gets a C(fleet_drift) check (source C(health_report))
    whose status is O(fleet_drift). A tie or a mere plurality is no majority, so a fleet of two
    that disagrees, or one split evenly, blames no node; the table marks the field as having no
    majority, and pinning the intended value in O(fleet_expect) resolves it. A field a node could
    not read is shown, not judged.
  - B(Circuit breaker.) After NVSentinel's, which stops cordoning past a share of nodes in a time
    window - when more than O(breaker_threshold) percent of the nodes checked on this run are left
    out by their verdicts, the breaker trips - a common cause (a bad driver or firmware roll-out,
    a fabric-wide outage, a check wrong for this fleet) is likelier than that many broken nodes.
    Then nobody is left out - RV(healthy) lists every node and RV(unhealthy) is empty, so the role
    evicts nobody - RV(breaker_tripped) is true, RV(ok) is false, and RV(message) names the share
    of failed nodes and the likely causes (checks every failed node fails, versions every failed
    node runs and no passing node does). Nodes that did not answer or whose steps failed
    (O(nodes[].status) V(unreachable) or V(failed)) count as checked and failed; running members
    not re-checked (V(skipped)) do not count. With fewer than O(breaker_min_nodes) checked nodes the
    breaker does not judge.
  - Writes into O(dest)/O(run_id)/ the files C(report.json) (everything, with the thresholds as
    carried in the checks, the fleet view, the breaker's state and ISO 8601 UTC times; with
    O(hosts), also C(pairs), what the pair nccl-tests did - planned rounds, rounds and retest
    phases run, and each test's round, hosts, verdict, bus bandwidth and transport - or null when
    none ran), C(report.md) (the decision and the breaker, a summary table with each node's worst
    severity, the fleet's versions, the pair nccl-tests in the order they ran, then one table of
    checks per node with their severity and action),
    C(junit.xml) (one C(testsuite) per node, one C(testcase) with classname
    C(raygate.health.<host>) per check; fail is a failure, warn passes with C(system-out), skip is
    skipped; a failing or warning case carries C(severity) and C(action) in its text and as
    C(properties)) and C(healthy_hosts.txt) (one host per line).
  - Returns one Prometheus textfile per checked node in RV(textfiles) (node_exporter textfile
    collector format) for the role to place on the node. Metrics, all gauges -
    C(raygate_health_node_healthy{host,role}) 1 when the node passed, else 0;
    C(raygate_health_node_severity{host}) its worst severity, 3 do-not-allocate, 2 degraded, 1 info, 0 none;
    C(raygate_health_check_status{host,check,source}) 0 pass, 1 warn, 2 fail, -1 skip;
    C(raygate_health_check_severity{host,check,source,severity,action}) for failing and warning
    checks, the severity as 3, 2 or 1;
    C(raygate_health_check_value{host,check,source}) the measured value, for numeric values only;
    C(raygate_health_fingerprint_info{host,driver,vbios,...}) 1, one label per fingerprint field read;
    C(raygate_health_breaker_tripped{host}) 1 when the breaker tripped on this run;
    C(raygate_health_checked_at_seconds{host}) and C(raygate_health_valid_until_seconds{host}) Unix times.
  - It never fails for an unhealthy cluster (the caller shows RV(summary), then fails on RV(ok));
    it fails on malformed arguments.
  - This is an action plugin; it runs on the controller only. Call it once (C(run_once=true)).
requirements:
  - runs on the controller; no requirement on the nodes
author:
  - raygate maintainers (@raygate)
extends_documentation_fragment:
  - raygate.cluster.attributes
attributes:
  check_mode:
    support: full
    details:
      - In check mode the decision and RV(files) are returned, nothing is written, and
        C(changed) predicts whether files would be written.
  diff_mode:
    support: none
options:
  nodes:
    description:
      - Every node of the cluster with its check results, as the caller assembled them.
      - Exactly one of O(nodes), O(hosts) and O(merge) is required.
    type: list
    elements: dict
    suboptions:
      host:
        description: Inventory host name.
        type: str
        required: true
      role:
        description: The node's Ray role.
        type: str
        required: true
        choices: [head, worker]
      address:
        description: The node's cluster address (shown in the reports).
        type: str
      status:
        description:
          - V(checked) when the checks ran on this run; V(skipped) for a running member that was
            not re-checked (counted healthy, its O(nodes[].checks) are only recorded).
          - V(unreachable) for a node that did not answer, V(failed) for one where a step failed
            before its checks were done. Either is unhealthy, with one failing check (V(reachable)
            or V(run)) whose detail is O(nodes[].error).
        type: str
        default: checked
        choices: [checked, skipped, unreachable, failed]
      skip_reason:
        description: Why the node was not re-checked.
        type: str
      error:
        description: Why an unreachable or failed node left the run (the last error seen).
        type: str
      checks:
        description:
          - Check results C({name, status, detail, value, threshold}) with an extra C(source)
            key (V(gpu_health), V(nccl_test) or V(nccl_pairs)). One check per name and source.
        type: list
        elements: dict
        default: []
      fingerprint:
        description:
          - The node's versions, as M(raygate.cluster.gpu_health) returns them in C(fingerprint)
            (C(gpu_model), C(gpu_count), C(driver), C(cuda), C(vbios), C(pcie_link), C(hca_firmware),
            C(rdma_stack), C(nccl), C(kernel)); other keys are ignored. Only a V(checked) node's is used.
        type: dict
        version_added: 0.5.0
  merge:
    description:
      - The reports of earlier runs over slices of one fleet (each a C(report.json), or the run's
        directory holding it), to be judged again as one fleet, instead of O(nodes) or O(hosts).
      - For a fleet gated in slices (C(--limit), or AWX job slicing), each slice with the same
        known-good pair partner. A slice's own report judged drift and the breaker over that slice
        only; the merge takes every node's measured checks (sources V(gpu_health), V(nccl_test) and
        V(nccl_pairs)), drops what each report judged itself (C(fleet_drift), C(reachable), C(run),
        C(checks)), and judges drift, the breaker, the head and O(min_healthy) over the whole fleet.
      - A node in several slices (the shared partner) is kept once, with its worst result (fail,
        warn, pass, skipped; between equals the later slice's). The slices must name the same head.
        The pair tests of every slice are kept, each marked with its slice's run id.
      - A file that is not a health report fails the task, naming it.
    type: list
    elements: path
    version_added: 0.5.0
  left_hosts:
    description:
      - Inventory hosts that left the run before the gate (they did not answer, or a step failed
        on them). Each is reported V(unreachable) or V(failed) with the error it left in its O(answers)
        C(out) variable (C({status, task, error})), else in the first failed one of its C(steps); a host
        with neither stopped answering during a step. Hosts already among the nodes (O(nodes), or made
        from O(hosts)) are ignored.
    type: list
    elements: str
    default: []
    version_added: 0.4.0
  pair_tests:
    description:
      - Whether the gate ran nccl-tests between pairs of nodes (C(raygate_health_nccl_pairs)). Only
        used with O(hosts).
    type: bool
    default: true
    version_added: 0.5.0
  hosts:
    description:
      - The play's hosts that ran the role's gate (C(ansible_play_hosts)), instead of O(nodes).
        The action makes each host's node, in this order, from what the gate left in its host
        variables. Requires O(answers).
      - Read through the names in O(answers). The gate's status (V(checked) or V(skipped)) and address
        are required, a host without them fails the task; the skip reason says why a skipped one was not
        re-checked.
      - Its checks are those of the registered results under O(answers) C(gpu_health) (source
        V(gpu_health)) and C(nccl_single) (source V(nccl_test)) and the host's entry of the pair
        result's C(nodes) (C(nccl_pairs)), keyed by its gate address (source V(nccl_pairs)); a
        skipped task adds none. With O(pair_tests), a pair candidate (checked, its C(gpu_health) healthy
        and, when it ran, its C(nccl_single) healthy) without an entry there gets a skipped
        V(nccl_pairs) check saying no other node was there to test the network with.
      - Its fingerprint is its C(gpu_health) result's C(fingerprint).
      - Its role is V(head) for O(head), else V(worker).
      - When O(head) is neither in O(hosts) nor in O(left_hosts) (it is outside this run, for
        example with C(--limit)), it is reported V(skipped) as not re-checked, at O(head_address).
    type: list
    elements: str
    version_added: 0.4.0
  answers:
    description:
      - The names of the variables a node's run leaves, by what they hold; required with O(hosts), and
        for O(left_hosts). The raygate role passes its C(raygate_answers) (C(roles/_common/vars/main.yml)).
      - With O(hosts), C(gate_status), C(gate_address), C(gate_skip_reason), C(gpu_health), C(nccl_single)
        and C(nccl_pairs).
      - For O(left_hosts), C(out) (the host's C({status, task, error})) and C(steps), the registered
        answers of the remote steps as C([variable, step]) pairs in the order they run.
    type: dict
    version_added: 0.5.0
  head:
    description:
      - Inventory host of the Ray head. Defaults to the node whose O(nodes[].role) is V(head).
      - With neither (a fleet without a head, such as the health_gate role alone over nodes that run no Ray), the
        report has no head (RV(head_healthy) is true) and judges the nodes alone.
      - A head that is not in O(nodes) (it left the play before the gate) is unhealthy.
    type: str
  head_address:
    description:
      - With O(hosts), the address of a head outside this run. Defaults to its host variable
        C(raygate_node_ip), else C(ansible_host), else its inventory name.
    type: str
    version_added: 0.4.0
  min_healthy:
    description: The fewest healthy nodes (head included) that make RV(enough) true.
    type: int
    default: 1
  dest:
    description: Directory on the controller for the reports, relative to the current directory.
    type: path
    default: artifacts/health
  valid_for:
    description: Seconds the result stays valid (RV(valid_until) is RV(checked_at) plus this).
    type: int
    default: 86400
  fail_on_warn:
    description: Count a node whose verdict is V(warn) as unhealthy.
    type: bool
    default: false
  run_id:
    description:
      - Name of the report's subdirectory of O(dest) (letters, digits, C(.), C(_), C(-)).
        Defaults to the UTC time as C(YYYYmmddTHHMMSSZ).
    type: str
  write:
    description: Write the report files. V(false) only decides and returns.
    type: bool
    default: true
  fleet_drift:
    description:
      - The status of the C(fleet_drift) check of a node whose versions differ from O(fleet_expect) or
        the fleet's majority - V(warn) (severity V(degraded)), V(fail) (severity V(do-not-allocate), so
        the node is left out) - or V(off) (no C(fleet_drift) check; the fleet table is still made).
    type: str
    default: warn
    choices: [warn, fail, "off"]
    version_added: 0.5.0
  fleet_expect:
    description:
      - Pinned versions, by fingerprint field (C(driver), C(cuda), C(vbios), C(hca_firmware),
        C(rdma_stack), C(nccl), C(kernel), C(gpu_model), C(gpu_count), C(pcie_link)), each one value or
        a list of accepted ones. A value matches exactly or as a prefix ending at a dot (V("550")
        matches V(550.90.07)); a set field (C(vbios), C(hca_firmware), ...) matches when every one of
        the node's values does. A pinned field is judged against the pin, not the majority.
      - An unknown field fails the task.
    type: dict
    default: {}
    version_added: 0.5.0
  breaker_threshold:
    description:
      - The circuit breaker trips when more than this percentage (0 to 100) of the checked nodes fail.
        V(0) turns the breaker off (V(100) never trips either).
    type: int
    default: 50
    version_added: 0.5.0
  breaker_min_nodes:
    description:
      - The fewest checked nodes (unreachable and failed ones included) for the breaker to judge. With
        one or two nodes, a share says nothing about a common cause (one bad node of two is 50 percent),
        so by default a fleet of one or two never trips it. V(1) lets even a lone node trip it.
    type: int
    default: 3
    version_added: 0.5.0
notes:
  - The messages name the raygate role's variables (C(raygate_health_fleet_expect),
    C(raygate_health_breaker_threshold), C(raygate_health_breaker_min_nodes)), which set these options.
seealso:
  - name: NVSentinel circuit breaker
    description: The fault-quarantine breaker raygate's follows.
    link: https://docs.nvidia.com/nvsentinel/components/circuit-breaker.html
"""

EXAMPLES = r"""
- name: Decide the health gate and write the reports
  raygate.cluster.health_report:
    head: node1
    min_healthy: 2
    nodes:
      - host: node1
        role: head
        address: 10.0.0.1
        checks: "{{ hostvars['node1'].raygate_gpu_health.checks | map('combine', {'source': 'gpu_health'}) }}"
      - host: node2
        role: worker
        address: 10.0.0.2
        status: skipped
        skip_reason: running member, checked yesterday
  run_once: true
  register: raygate_health

- name: Decide the gate from what the role's gate steps registered on each host
  raygate.cluster.health_report:
    hosts: "{{ ansible_play_hosts }}"
    head: "{{ raygate_head_host }}"
    head_address: "{{ raygate_head_address }}"
    left_hosts: "{{ ansible_play_hosts_all | difference(ansible_play_hosts) }}"
    answers: "{{ raygate_answers }}"
  delegate_to: localhost
  run_once: true
  register: raygate_health

- name: Show the summary
  ansible.builtin.debug:
    msg: "{{ raygate_health.summary }}"
  run_once: true

- name: Fail when the gate failed
  ansible.builtin.fail:
    msg: "{{ raygate_health.message }}"
  when: not raygate_health.ok
  run_once: true

- name: Decide the gate, pinning the fleet's driver and failing nodes that drift from it
  raygate.cluster.health_report:
    hosts: "{{ ansible_play_hosts }}"
    head: "{{ raygate_head_host }}"
    fleet_drift: fail
    fleet_expect:
      driver: "550.90"
      vbios: 96.00.74.00.0D
    # Stop, evicting nobody, when more than a third of the nodes fail at once.
    breaker_threshold: 33
  delegate_to: localhost
  run_once: true
  register: raygate_health

- name: Stop instead of evicting when the circuit breaker tripped
  ansible.builtin.fail:
    msg: "{{ raygate_health.message }}"
  when: raygate_health.breaker_tripped
  run_once: true

- name: One fleet report from two slices' runs (health_merge.yml does this)
  raygate.cluster.health_report:
    merge:
      - artifacts/health/20261126T101500Z-slice1
      - artifacts/health/20261126T102000Z-slice2
    dest: artifacts/health
  delegate_to: localhost
  run_once: true
  register: raygate_fleet_health
"""

RETURN = r"""
slices:
  description:
    - With O(merge), the slices merged - each one's run id, report file, time and node count.
  returned: with O(merge)
  type: list
  elements: dict
  sample: [{run_id: 20261126T101500Z-slice1, report: artifacts/health/20261126T101500Z-slice1/report.json, nodes: 4}]
  version_added: 0.5.0
healthy:
  description:
    - Healthy hosts (skipped nodes included), in the order of O(nodes) or O(hosts).
    - When the circuit breaker tripped, every host (nobody is left out).
  returned: always
  type: list
  elements: str
  sample: [node1, node2]
unhealthy:
  description:
    - "Unhealthy hosts with their reasons, each as C(check: detail): the hosts the gate leaves out."
    - Empty when the circuit breaker tripped (RV(breaker.failed_hosts) names the failed ones).
  returned: always
  type: dict
  sample: {node3: ["xid: Xid 79 on GPU 3"]}
warned:
  description: Every checked host with warnings, whatever its verdict, with the warning reasons.
  returned: always
  type: dict
  sample: {node2: ["thermal_throttle: GPU 1 hw_thermal_slowdown active"]}
head_healthy:
  description: Whether the head is healthy.
  returned: always
  type: bool
  sample: true
enough:
  description: Whether at least O(min_healthy) nodes are healthy.
  returned: always
  type: bool
  sample: true
ok:
  description: RV(head_healthy) and RV(enough), and the circuit breaker did not trip.
  returned: always
  type: bool
  sample: true
message:
  description: The decision in one line (names the head and its reasons, or the counts).
  returned: always
  type: str
  sample: "health gate failed: 1 healthy of 3, need 2"
severities:
  description: Each host with a failing or warning check, with the worst severity among them.
  returned: always
  type: dict
  sample: {node3: do-not-allocate, node2: degraded}
  version_added: 0.5.0
breaker_tripped:
  description: Whether the circuit breaker tripped; the play should then stop instead of evicting.
  returned: always
  type: bool
  sample: false
  version_added: 0.5.0
breaker:
  description: The circuit breaker's state.
  returned: always
  type: dict
  version_added: 0.5.0
  contains:
    tripped:
      description: Same as RV(breaker_tripped).
      type: bool
      returned: always
      sample: true
    threshold:
      description: O(breaker_threshold).
      type: int
      returned: always
      sample: 50
    min_nodes:
      description: O(breaker_min_nodes).
      type: int
      returned: always
      sample: 3
    checked:
      description: Nodes checked on this run (unreachable and failed ones included, skipped ones not).
      type: int
      returned: always
      sample: 4
    failed:
      description: How many of them failed (their verdict leaves them out).
      type: int
      returned: always
      sample: 3
    share:
      description: RV(breaker.failed) as a percentage of RV(breaker.checked), one decimal.
      type: float
      returned: always
      sample: 75.0
    failed_hosts:
      description: The failed hosts.
      type: list
      elements: str
      returned: always
      sample: [node2, node3, node4]
    causes:
      description: The likely causes, most specific first (empty unless it tripped).
      type: list
      elements: str
      returned: always
      sample:
        - "all 3 failing nodes fail nccl_pair_transport: a fabric-wide outage (switch, subnet manager, RDMA stack)"
    detail:
      description: The counts and the decision in words.
      type: str
      returned: always
      sample: "3 of 4 checked nodes failed (75%), more than raygate_health_breaker_threshold 50%"
fleet:
  description: The fleet view.
  returned: always
  type: dict
  version_added: 0.5.0
  contains:
    nodes:
      description: How many nodes reported a fingerprint.
      type: int
      returned: always
      sample: 4
    mode:
      description: O(fleet_drift).
      type: str
      returned: always
      sample: warn
    fields:
      description:
        - "Per fingerprint field: C(values) (each C({value, count, hosts}), most common first, a null
          value - not read - last), C(majority) (the value more than half of the reporting nodes share,
          or null), C(expected) (the pinned values, or null) and C(split) (several values, no pin and
          no majority)."
      type: dict
      returned: always
      sample:
        driver:
          values:
            - {value: 550.90.07, count: 3, hosts: [node1, node2, node3]}
            - {value: 535.161.08, count: 1, hosts: [node4]}
          majority: 550.90.07
          expected: null
          split: false
    drift:
      description: "Each drifting host with its differences: C({field, value, expected, reference}) (reference
        V(pinned) or V(majority))."
      type: dict
      returned: always
      sample:
        node4:
          - {field: driver, value: 535.161.08, expected: 550.90.07, reference: majority, count: 3, reporting: 4}
run_id:
  description: The report's subdirectory name.
  returned: always
  type: str
  sample: 20260102T030405Z
report_dir:
  description: Absolute path of the report directory on the controller.
  returned: always
  type: str
  sample: /home/me/raygate/artifacts/health/20260102T030405Z
files:
  description: Absolute paths of the report files (where they are, or would be in check mode).
  returned: always
  type: dict
  contains:
    json:
      description: report.json
      type: str
      returned: always
      sample: /home/me/raygate/artifacts/health/20260102T030405Z/report.json
    markdown:
      description: report.md
      type: str
      returned: always
      sample: /home/me/raygate/artifacts/health/20260102T030405Z/report.md
    junit:
      description: junit.xml
      type: str
      returned: always
      sample: /home/me/raygate/artifacts/health/20260102T030405Z/junit.xml
    healthy_hosts:
      description: healthy_hosts.txt
      type: str
      returned: always
      sample: /home/me/raygate/artifacts/health/20260102T030405Z/healthy_hosts.txt
written:
  description: Whether the files were written on this run.
  returned: always
  type: bool
  sample: true
summary:
  description: A fixed-width table (host, role, verdict, healthy, reasons) for the play output, then RV(message).
  returned: always
  type: list
  elements: str
  sample: ["HOST   ROLE    VERDICT  HEALTHY  REASONS", "node1  head    pass     yes", "health gate passed: ..."]
textfiles:
  description: Prometheus textfile content per checked host (skipped hosts keep their previous one).
  returned: always
  type: dict
  sample: {node1: "# HELP raygate_health_check_status ...\n"}
checked_at:
  description: Unix time of this run.
  returned: always
  type: int
  sample: 1767323045
valid_until:
  description: Unix time after which the result is stale.
  returned: always
  type: int
  sample: 1767409445
"""
