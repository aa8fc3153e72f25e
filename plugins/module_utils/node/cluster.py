# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""ray_cluster_info's options and its run (one look at the head's state API), and the pure functions
over Ray's state API answer (``GET /api/v0/nodes``) that the module and the action plugin share."""

from __future__ import annotations

import json

from ansible.module_utils.urls import open_url

from ansible_collections.raygate.cluster.plugins.module_utils.files import read_text
from ansible_collections.raygate.cluster.plugins.module_utils.waiter import WAIT_ARGSPEC

# The options of ray_cluster_info, one spec for both halves: the action plugin validates the task's
# arguments with it on the controller and does the waiting (wait, wait_timeout, wait_sleep); the
# module validates the same arguments with it on the host and answers once per call.
# Mirrors the module's DOCUMENTATION (and the wait doc fragment, WAIT_ARGSPEC).
ARGUMENT_SPEC = dict(
    dashboard_url=dict(type="str", required=True),
    auth=dict(type="bool", default=True),
    auth_token_file=dict(type="path", default="/etc/raygate/auth_token", no_log=False),
    expected=dict(type="list", elements="dict", default=[]),
    wait_nodes=dict(type="int", default=0),
    wait_gpus=dict(type="float", default=0),
    request_timeout=dict(type="int", default=10),
    ca_path=dict(type="path"),
    **WAIT_ARGSPEC,
)


def wants_wait(params):
    """Whether validated ``params`` ask for a wait: ``wait`` on and a node or GPU target above 0."""
    return bool(params["wait"]) and (params["wait_nodes"] > 0 or params["wait_gpus"] > 0)


def node_rows(payload):
    """The node dicts inside the state API envelope (``data.result.result``)."""
    if not isinstance(payload, dict):
        return []
    data = payload.get("data", payload)
    result = data.get("result", data) if isinstance(data, dict) else data
    rows = result.get("result", []) if isinstance(result, dict) else result
    return rows if isinstance(rows, list) else []


def normalize(row):
    resources = row.get("resources_total") or {}
    return {
        "node_id": row.get("node_id"),
        "ip": row.get("node_ip"),
        "name": row.get("node_name"),
        "is_head": bool(row.get("is_head_node")),
        "state": row.get("state"),
        "resources": resources,
        "labels": row.get("labels") or {},
    }


def summarize(payload, expected=(), wait_nodes=0, wait_gpus=0):
    """What the cluster looks like now, and whether the wait targets are met."""
    nodes = [normalize(r) for r in node_rows(payload)]
    alive = sorted((n for n in nodes if n["state"] == "ALIVE"), key=lambda n: (not n["is_head"], n["ip"] or ""))
    alive_ips = {n["ip"] for n in alive}
    gpus = sum(float(n["resources"].get("GPU", 0)) for n in alive)
    cpus = sum(float(n["resources"].get("CPU", 0)) for n in alive)
    missing = [str(e.get("name") or e.get("ip")) for e in expected if str(e.get("ip")) not in alive_ips]
    complete = payload is not None and len(alive) >= wait_nodes and gpus >= float(wait_gpus or 0)
    if expected and wait_nodes:
        complete = complete and not missing
    return {
        "reachable": payload is not None,
        "nodes": alive,
        "alive_gpus": {str(n["ip"]): float(n["resources"].get("GPU", 0)) for n in alive},
        "alive_nodes": len(alive),
        "total_gpus": gpus,
        "total_cpus": cpus,
        "missing": missing,
        "complete": complete,
        "targets": {"nodes": wait_nodes, "gpus": wait_gpus},
    }


def is_member(summary, address, gpus=0):
    """Whether the node at ``address`` is a working member in ``summary`` (what summarize() answered):
    alive in the head's list with the ``gpus`` it should offer. One look-up in ``alive_gpus``, so every
    node of a large cluster can judge itself against the same answer."""
    if not isinstance(summary, dict) or not summary.get("reachable"):
        return False
    offered = (summary.get("alive_gpus") or {}).get(str(address))
    return offered is not None and float(offered) == float(gpus or 0)


def _num(value):
    return int(value) if float(value).is_integer() else value


def waiting_message(summary):
    """One line: how far the cluster got, and who is missing."""
    targets = summary.get("targets", {})
    if not summary.get("reachable"):
        return "the head's state API does not answer yet"
    text = "%s/%s nodes, %s/%s GPUs alive" % (
        summary["alive_nodes"],
        targets.get("nodes", "?"),
        _num(summary["total_gpus"]),
        _num(targets.get("gpus", 0)),
    )
    if summary.get("missing"):
        text += "; never joined: %s" % ", ".join(summary["missing"])
    return text


def request_headers(module):
    p = module.params
    headers = {"Accept": "application/json"}
    if p["auth"]:
        token = (read_text(p["auth_token_file"]) or "").strip()
        if not token:
            module.fail_json(msg="auth is on but the token file %s is missing or empty" % p["auth_token_file"])
        headers["Authorization"] = "Bearer %s" % token
    return headers


def get_json(module, path):
    p = module.params
    url = p["dashboard_url"].rstrip("/") + path
    # https: the server's certificate is checked (against ca_path, else the system's CAs) before the
    # token is sent; http (Ray's own dashboard on the head's loopback) has nothing to check.
    resp = open_url(
        url, headers=request_headers(module), timeout=p["request_timeout"], validate_certs=True, ca_path=p["ca_path"]
    )
    return json.loads(resp.read())


def running_version(module):
    """The head's Ray version (its jobs API /api/version answers ray_version), or None."""
    try:
        version = get_json(module, "/api/version").get("ray_version")
    except Exception:  # an older Ray, or the head went away: the caller decides without it
        return None
    return version if isinstance(version, str) and version else None


def query(module):
    """One look at the cluster: its summary, with the request's error (None when it answered)."""
    p = module.params
    try:
        payload = get_json(module, "/api/v0/nodes?limit=10000&detail=true")
        error = None
    except Exception as exc:  # unreachable while the head starts: report, the caller decides
        payload, error = None, str(exc)
    summary = summarize(payload, p["expected"], p["wait_nodes"], p["wait_gpus"])
    summary["error"] = error
    return summary


def run(module):
    """The module's one answer. The action plugin, with the same spec, does all waiting: wait,
    wait_timeout and wait_sleep are accepted here but mean something only to the action."""
    p = module.params
    summary = query(module)
    error = summary.pop("error")
    result = dict(summary, changed=False, elapsed=0.0)
    result["ray_version"] = running_version(module) if summary["reachable"] else None
    # Unreachable fails (with reachable=false, so the action keeps polling a head that is starting).
    if not summary["reachable"] and not module.check_mode:
        module.fail_json(msg="the Ray state API at %s did not answer: %s" % (p["dashboard_url"], error), **result)
    module.exit_json(**result)
