# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Draining a Ray worker before it stops (the ``drain`` option): ``ray drain-node``, then the wait
for its raylet to end."""

from __future__ import annotations

import time

from ansible_collections.raygate.cluster.plugins.module_utils.waiter import wait_for


class Drain:
    """The node's ``drain`` and ``drain_timeout`` options; runs, fails and warns through the node."""

    def __init__(self, node):
        self.node = node
        self.p = node.p

    def check_role(self):
        """Fails on a drain of the head."""
        if self.p["drain"] and self.p["role"] == "head":
            self.node.fail("drain is for workers: the head holds the GCS, and stopping it stops the whole cluster")

    def drain(self, plan, raylet):
        """Ask the GCS to drain this worker (``ray drain-node``, preemption with a deadline of
        drain_timeout), then wait for its raylet to exit: Ray ends a drained raylet once its tasks
        are done. A Ray without drain-node is stopped undrained, with a warning; a refused drain
        fails before anything stops."""
        node = self.node
        node_id = raylet["flags"].get("node_id")
        if not node_id:
            node.warnings.append("the raylet (pid %s) shows no node id; stopped without draining" % raylet["pid"])
            return {"drained": False}
        env = dict(node.config.file_env(), **node.config.env(plan))
        args = [
            node.ray, "drain-node", "--address", "%s:%s" % (node.head_ip(), plan["gcs"]),
            "--node-id", node_id, "--reason", "DRAIN_NODE_REASON_PREEMPTION",
            "--reason-message", "raygate: node %s leaves the cluster" % self.p["node_ip"],
            "--deadline-remaining-seconds", str(self.p["drain_timeout"]),
        ]  # fmt: skip
        started = time.monotonic()
        rc, out, err = node.run(node.container.cli(args), env=env, timeout=120)
        if rc != 0:
            text = (err or out).strip()
            if "No such command" in text:
                node.warnings.append("the installed Ray has no drain-node; stopped without draining")
                return {"drained": False}
            node.fail(
                "Ray refused to drain this node (%s); nothing was stopped. Set drain: false to stop it "
                "without draining" % text[-600:]
            )

        def raylet_gone():
            alive = {p["pid"] for p in node.ray_processes()}
            return raylet["pid"] not in alive, None

        done = wait_for(raylet_gone, timeout=self.p["drain_timeout"], interval=0.2)[0]
        if not done:
            node.warnings.append(
                "the node still ran tasks after drain_timeout (%ss); stopping it anyway" % self.p["drain_timeout"]
            )
        return {"drained": True, "drain_seconds": round(time.monotonic() - started, 1), "drain_timed_out": not done}
