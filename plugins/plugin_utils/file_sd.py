# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Prometheus file_sd target groups for a raygate cluster (controller only, pure).

One group per target kind and node, so that each carries its node's labels: Ray's metrics
exporter on every node (job raygate-ray), the head's autoscaler and dashboard metric ports (job
raygate-ray-head) and node_exporter on every node (job raygate-node), which serves the health
gate's textfile and the node watcher's. The ``job`` label of a target group overrides the scrape
config's job name, so one file_sd scrape job gives all three jobs.
"""

from __future__ import annotations

JOB_RAY = "raygate-ray"
JOB_HEAD = "raygate-ray-head"
JOB_NODE = "raygate-node"
HEAD_PORTS = ("dashboard_metric", "autoscaler_metric")


class FileSdError(ValueError):
    """Input that cannot become targets; the message names the value."""


def _port(plan, name):
    value = (plan or {}).get(name)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise FileSdError("the port plan's %s is %r, not a port: pass the cluster's whole plan" % (name, value))
    return value


def target(address, port):
    """host:port as Prometheus wants it, an IPv6 address in brackets."""
    address = str(address)
    if ":" in address and not address.startswith("["):
        address = "[%s]" % address
    return "%s:%d" % (address, port)


def _node_exporter_port(value):
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535:
        raise FileSdError("node_exporter_port: %r is not a port (0 for none)" % (value,))
    return value


def file_sd_targets(nodes, head, plan, cluster, node_exporter_port=9100):
    """The file_sd list for ``nodes`` ([{'name', 'ip'}], inventory order) whose head is the node
    named ``head``. ``plan``: the cluster's port plan; ``cluster``: the raygate_cluster label."""
    exporter = _node_exporter_port(node_exporter_port)
    names = [node.get("name") for node in nodes]
    if head not in names:
        raise FileSdError("the head %r is not one of the nodes (%s)" % (head, ", ".join(map(str, names))))
    metrics = _port(plan, "metrics_export")
    head_ports = [_port(plan, name) for name in HEAD_PORTS]
    ray, head_groups, node_groups = [], [], []
    for node in nodes:
        address = node.get("ip")
        if not address:
            raise FileSdError("node %r has no address" % (node.get("name"),))
        role = "head" if node["name"] == head else "worker"
        labels = {"raygate_cluster": str(cluster), "host": str(node["name"]), "role": role}
        ray.append({"targets": [target(address, metrics)], "labels": dict(labels, job=JOB_RAY)})
        if role == "head":
            head_groups.append(
                {"targets": [target(address, p) for p in head_ports], "labels": dict(labels, job=JOB_HEAD)}
            )
        if exporter:
            node_groups.append({"targets": [target(address, exporter)], "labels": dict(labels, job=JOB_NODE)})
    return ray + head_groups + node_groups
