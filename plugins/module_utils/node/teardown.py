# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""ray_node's states stopped and absent: drain a worker, stop Ray, remove what raygate wrote for
the node, and refuse to call it stopped while anything of Ray's is left."""

from __future__ import annotations

import json
import os

from ansible_collections.raygate.cluster.plugins.module_utils.node import procs as ray_procs

LEFTOVER_KEYS = ("processes", "ports", "gpu_processes", "containers")


def stopped(node, purge_files):
    """Take ``node`` (a node.Node) down, and with ``purge_files`` remove its files too; the module's result."""
    plan = node.plan()
    procs = node.ray_processes()
    unit_active = False
    if node.unit.installed():
        unit_active = not node.module.check_mode and node.unit.supervised_ok()
    removable = node.config.removable(purge_files)
    forget = not purge_files and node.p["status_labels"] == {} and bool(node.labels.carried_status())
    proxy = node.proxy.running() if node.proxy.installed() else False
    container = node.container.on() and node.container.exists()
    changed = bool(procs) or unit_active or proxy or container or bool(removable) or forget
    result = {"changed": changed, "stopped": ray_procs.summarize(procs), "removed": removable}
    result["status_labels_forgotten"] = forget
    raylet = ray_procs.find_daemon(procs, "raylet")
    node.drainer.check_role()
    result["drained"] = False
    if node.module.check_mode:
        result["drained"] = bool(node.p["drain"] and raylet)
        keys = LEFTOVER_KEYS if node.container.on() else LEFTOVER_KEYS[:3]
        return dict(result, leftovers=dict((key, []) for key in keys))
    if node.p["drain"] and raylet:
        result.update(node.drainer.drain(plan, raylet))
        procs = node.ray_processes()
    if procs or unit_active or proxy or container:
        node.stopper.stop(procs)
    if forget:
        node.labels.forget_status()
    unit_removed = node.p["supervisor"] == "systemd" and node.unit_path in removable
    if unit_removed:
        node.unit.disable()
    if node.proxy.unit_path in removable:
        node.proxy.disable()
    for path in removable:
        os.unlink(path)
    node.proxy.forget()
    if purge_files:
        node.config.remove_empty_dirs()
    if unit_removed or node.proxy.unit_path in removable:
        node.unit.daemon_reload()
    left = node.leftovers(plan)
    if any(left.values()):
        node.fail("Ray is not fully stopped on this node: %s" % json.dumps(left), leftovers=left, **result)
    return dict(result, leftovers=left)
