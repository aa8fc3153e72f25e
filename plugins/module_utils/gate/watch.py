# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The node watcher (raygate_watch): what one watch run decides, apart from how it runs.

A watch run (roles/watcher/files/raygate_node_watch.py) runs the gate's node checks, then:

- ``findings``: a failing check of severity do-not-allocate takes the node out; a degraded one
  (a warning, or a failure the check itself calls degraded) only reports.
- ``take_out``: before a worker leaves, the fleet's breaker is asked through the head's GCS. Every
  watcher records the nodes it takes out in the GCS's key-value store (namespace ``raygate``), under
  a lock key that only one watcher at a time can create (``internal_kv_put`` without overwrite is
  atomic in the GCS), so watchers firing at the same moment on many nodes are counted one after
  the other. Past the breaker's share within its window the node stays in and the refusal is
  reported. Then Ray's drain (preemption, with the deadline) takes it out with the reason. A
  record older than the window no longer counts: the watcher holding the lock deletes it, so the
  store holds at most the lock and one record per worker taken out within the window (and those
  older ones only until the next take-out anywhere in the cluster).
- ``held_fabric``: the fabric counters' growth a take-out not done was for, kept pending (the
  watcher judges that growth over its own short window, so it cannot read it again as an Xid is).
- ``render_textfile``: the node_exporter textfile of the last verdict.

``gcs`` is an adapter with ``nodes()``, ``kv_put(key, value, overwrite)`` (True when it added the
key), ``kv_get``, ``kv_keys(prefix)``, ``kv_del`` and ``drain(node_id, message, deadline_ms)``;
``RayGcs`` is the real one, built inside the Ray virtualenv. Stdlib only otherwise.
"""

from __future__ import annotations

import json
import time

from ansible_collections.raygate.cluster.plugins.module_utils.gate.gpu_checks import FABRIC_WINDOW_DEFAULT
from ansible_collections.raygate.cluster.plugins.module_utils.gate.textfile import render
from ansible_collections.raygate.cluster.plugins.module_utils.gate.textfile import sample as _sample

NAMESPACE = "raygate"
LOCK_KEY = "raygate-watch:lock"
CLAIM_PREFIX = "raygate-watch:out:"
# A lock older than this was left by a watcher that died holding it.
LOCK_STALE_S = 60
LOCK_WAIT_S = 30
# Kernel log lines are read again over this much of the previous interval, so a line written
# while the last run read the log is not missed (seeing one twice changes nothing).
LOG_OVERLAP_S = 120
DO_NOT_ALLOCATE = "do-not-allocate"
REASON_PREFIX = "raygate-watch: "
# gpu_health's checks of the fabric counters' growth.
FABRIC_CHECKS = ("fabric_errors", "link_flaps")


def findings(result):
    """``(take_out, report)``: the failing checks of severity do-not-allocate, and the rest that
    failed or warned (degraded or info), each as ``name: detail``."""
    take_out, report = [], []
    for check in result.get("checks") or []:
        if check.get("status") not in ("fail", "warn"):
            continue
        text = "%s: %s" % (check["name"], check.get("detail") or "")
        severity = check.get("severity") or (DO_NOT_ALLOCATE if check["status"] == "fail" else "degraded")
        if check["status"] == "fail" and severity == DO_NOT_ALLOCATE:
            take_out.append(text)
        else:
            report.append(text)
    return take_out, report


def log_window(state, now, first_window):
    """Seconds of kernel log this run reads: since the last run, with an overlap; the gate's own
    window (``first_window``, 0 for since boot) on the first run, and while the last run left a
    take-out ``pending`` (refused, deferred, or not judged), so that what called for it is judged
    again for as long as a gate run would still see it."""
    last = state.get("last_run")
    if not isinstance(last, (int, float)) or last > now or state.get("pending"):
        return int(first_window)
    return int(now - last) + LOG_OVERLAP_S


def gate_fabric_window(params):
    """The gate's own fabric window in the checks' arguments (gpu_health's default when they name none)."""
    return int(params.get("fabric_window", FABRIC_WINDOW_DEFAULT))


def _check_name(finding):
    return finding.split(":", 1)[0]


def _still_counted(held, now, window, boot_id):
    """Whether a gate run would still count the growth behind ``held`` (``{finding, at, boot_id}``):
    within ``window`` s of the last run that found it (0: the whole boot), on the same boot."""
    at = held.get("at")
    if not isinstance(at, (int, float)) or not isinstance(held.get("finding"), str):
        return False
    if boot_id and held.get("boot_id") and held["boot_id"] != boot_id:
        return False
    return not window or now - at <= window


def held_fabric(take, held, now, window, boot_id):
    """``(take, held)``: this run's do-not-allocate findings plus the fabric counters' growth that a
    take-out not done left pending (``held``, the last run's ``[{finding, at, boot_id}]``), and what
    of the fabric's to keep pending now.

    The watcher judges counter growth over two of its intervals, so a run or two after a refused
    take-out the growth is out of its sight (or seen over too long a span to fail), where a gate run
    (``window``: raygate_health_fabric_window) still counts it. A finding of this run replaces the
    held one of its check; a held one is kept while a gate run would still count it, as an Xid stays
    pending while the gate's kernel log window holds it.
    """
    fresh = [{"finding": f, "at": now, "boot_id": boot_id} for f in take if _check_name(f) in FABRIC_CHECKS]
    found = set(_check_name(f["finding"]) for f in fresh)
    kept = [
        h
        for h in held or []
        if isinstance(h, dict) and _still_counted(h, now, window, boot_id) and _check_name(h["finding"]) not in found
    ]
    return take + [h["finding"] for h in kept], fresh + kept


def breaker(claims, alive, me, now, window, threshold, min_nodes):
    """``(allowed, detail)``: whether taking ``me`` out keeps the nodes taken out within ``window``
    seconds at or under ``threshold`` percent of the cluster. ``claims`` maps a node address to
    its record (``at``); ``alive`` lists the addresses the GCS has alive. A cluster smaller than
    ``min_nodes`` never trips it, as the gate's breaker."""
    recent = sorted(ip for ip, claim in claims.items() if ip != me and now - float(claim.get("at", 0)) <= window)
    size = len(set(alive) | set(recent) | {me})
    after = len(recent) + 1
    share = "%d of %d nodes" % (after, size)
    if size < min_nodes:
        return True, "%s (a cluster under %d nodes never trips the breaker)" % (share, min_nodes)
    if after * 100 > threshold * size:
        taken = ", ".join(recent) if recent else "none"
        return False, (
            "the breaker holds: taking this node out would make %s out within %d s, over "
            "raygate_health_breaker_threshold (%d%%); already out: %s" % (share, window, threshold, taken)
        )
    return True, "%s out within %d s (raygate_health_breaker_threshold %d%%)" % (share, window, threshold)


def _load(text):
    try:
        value = json.loads(text) if text else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def acquire(gcs, me, clock=time.time, sleep=time.sleep, wait=LOCK_WAIT_S):
    """Take the watchers' lock in the GCS; False when another watcher held it for ``wait`` s."""
    deadline = clock() + wait
    while True:
        now = clock()
        if gcs.kv_put(LOCK_KEY, json.dumps({"by": me, "at": now}), False):
            return True
        held = _load(gcs.kv_get(LOCK_KEY)) or {}
        if now - float(held.get("at", 0)) > LOCK_STALE_S:
            gcs.kv_del(LOCK_KEY)
            continue
        if now >= deadline:
            return False
        sleep(0.5)


def claims(gcs):
    """``{address: record}`` of the nodes the watchers took out (every record, old ones too)."""
    found = {}
    for key in gcs.kv_keys(CLAIM_PREFIX):
        record = _load(gcs.kv_get(key))
        if record is not None:
            found[key[len(CLAIM_PREFIX) :]] = record
    return found


def prune(gcs, found, now, window):
    """Delete the records in ``found`` (``claims``) older than ``window`` seconds, which the
    breaker no longer counts; returns what is left. Only under the lock: two watchers never
    delete a record that the other is writing."""
    left = {}
    for ip, record in found.items():
        if now - float(record.get("at", 0)) > window:
            gcs.kv_del(CLAIM_PREFIX + ip)
        else:
            left[ip] = record
    return left


def _mine(nodes, me):
    for node in nodes:
        if node["alive"] and node["ip"] == me and not node["head"]:
            return node
    return None


def take_out(gcs, me, checks, opts, clock=time.time, sleep=time.sleep):
    """Take this worker (address ``me``) out of Ray for ``checks`` (do-not-allocate findings),
    unless the breaker holds. ``opts``: window, threshold, min_nodes (the breaker's), deadline (s).
    Returns ``{"action": "drained" | "refused" | "none", "detail": ...}``."""
    nodes = gcs.nodes()
    node = _mine(nodes, me)
    if node is None:
        return {"action": "none", "detail": "this node is not alive in the cluster (already out)"}
    message = (REASON_PREFIX + "; ".join(checks))[:1000]
    if not acquire(gcs, me, clock, sleep):
        return {"action": "refused", "why": "lock", "detail": "another watcher held the lock for %d s" % LOCK_WAIT_S}
    try:
        now = clock()
        alive = [n["ip"] for n in nodes if n["alive"]]
        found = prune(gcs, claims(gcs), now, opts["window"])
        allowed, detail = breaker(found, alive, me, now, opts["window"], opts["threshold"], opts["min_nodes"])
        if not allowed:
            return {"action": "refused", "why": "breaker", "detail": detail}
        record = {"at": now, "node_id": node["node_id"], "reason": message}
        gcs.kv_put(CLAIM_PREFIX + me, json.dumps(record), True)
    finally:
        gcs.kv_del(LOCK_KEY)
    accepted, why = gcs.drain(node["node_id"], message, int((now + opts["deadline"]) * 1000))
    if not accepted:
        gcs.kv_del(CLAIM_PREFIX + me)
        return {"action": "refused", "why": "ray", "detail": "Ray refused the drain: %s" % why}
    return {"action": "drained", "detail": detail, "node_id": node["node_id"], "reason": message, "at": now}


class RayGcs:
    """The adapter over Ray's own GCS client; built only inside the Ray virtualenv, with the
    node's Ray environment (token, TLS) in os.environ."""

    def __init__(self, address, timeout=30):
        # Ray is only importable in its virtualenv, where the watcher runs this part.
        from ray._raylet import GcsClient  # pylint: disable=import-error,import-outside-toplevel
        from ray.core.generated import autoscaler_pb2, gcs_pb2  # pylint: disable=import-error,import-outside-toplevel

        self.client = GcsClient(address=address)
        self.timeout = timeout
        self.alive = gcs_pb2.GcsNodeInfo.GcsNodeState.Value("ALIVE")
        self.reason = autoscaler_pb2.DrainNodeReason.Value("DRAIN_NODE_REASON_PREEMPTION")

    def nodes(self):
        infos = self.client.get_all_node_info(timeout=self.timeout).values()
        return [
            {
                "node_id": info.node_id.hex(),
                "ip": info.node_manager_address,
                "alive": info.state == self.alive,
                "head": bool(info.is_head_node),
            }
            for info in infos
        ]

    def kv_put(self, key, value, overwrite):
        added = self.client.internal_kv_put(key.encode(), value.encode(), overwrite, NAMESPACE.encode())
        return added == 1

    def kv_get(self, key):
        value = self.client.internal_kv_get(key.encode(), NAMESPACE.encode())
        return value.decode() if value is not None else None

    def kv_keys(self, prefix):
        return [k.decode() for k in self.client.internal_kv_keys(prefix.encode(), NAMESPACE.encode())]

    def kv_del(self, key):
        self.client.internal_kv_del(key.encode(), False, NAMESPACE.encode())

    def drain(self, node_id, message, deadline_ms):
        accepted, why = self.client.drain_node(node_id, self.reason, message, deadline_ms)
        return bool(accepted), why


STATUS_CODES = {"pass": 0, "warn": 1, "fail": 2}
TEXTFILE_METRICS = (
    ("raygate_watch_last_run_seconds", "Unix time of the raygate watcher's last verdict on this node."),
    ("raygate_watch_node_healthy", "1 when the raygate watcher's last run found no do-not-allocate check, else 0."),
    ("raygate_watch_check_status", "Result of one check in the raygate watcher's last run: 0 pass, 1 warn, 2 fail."),
    ("raygate_watch_taken_out", "1 while the raygate watcher has this node out of Ray (check and reason as labels)."),
    ("raygate_watch_drain_refused", "1 when the raygate watcher found this node bad but did not take it out (why)."),
    ("raygate_watch_raylet_up", "1 when a raylet ran here at the raygate watcher's last run (0 after a take-out too)."),
    ("raygate_watch_gcs_up", "1 when the head's GCS port answered the raygate watcher (head only)."),
    ("raygate_watch_redis_up", "1 when the managed Redis answered the raygate watcher (head with raygate's Redis)."),
)


def render_textfile(host, state):
    """The node_exporter textfile of the watcher's last run on ``host``."""
    samples = {name: [] for name, _help in TEXTFILE_METRICS}
    samples["raygate_watch_last_run_seconds"].append(
        _sample("raygate_watch_last_run_seconds", {"host": host}, int(state.get("last_run") or 0))
    )
    healthy = 0 if state.get("take_out") or state.get("error") else 1
    samples["raygate_watch_node_healthy"].append(_sample("raygate_watch_node_healthy", {"host": host}, healthy))
    for name, status in sorted((state.get("checks") or {}).items()):
        if status in STATUS_CODES:
            labels = {"host": host, "check": name}
            samples["raygate_watch_check_status"].append(
                _sample("raygate_watch_check_status", labels, STATUS_CODES[status])
            )
    out = state.get("taken_out")
    if out:
        labels = {"host": host, "check": out.get("check", ""), "reason": out.get("reason", "")[:200]}
        samples["raygate_watch_taken_out"].append(_sample("raygate_watch_taken_out", labels, 1))
    refused = state.get("refused")
    if refused:
        labels = {"host": host, "why": refused.get("why", "")}
        samples["raygate_watch_drain_refused"].append(_sample("raygate_watch_drain_refused", labels, 1))
    for key in ("raylet_up", "gcs_up", "redis_up"):
        if state.get(key) is not None:
            name = "raygate_watch_" + key
            samples[name].append(_sample(name, {"host": host}, int(bool(state[key]))))
    return render(TEXTFILE_METRICS, samples, sort=False)
