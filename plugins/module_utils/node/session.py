# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Whether the Ray session running on a node is a working member of its cluster, or what is left
of one (a head whose GCS crashed, a worker without raylet or that the head no longer lists)."""

from __future__ import annotations

import socket

from ansible_collections.raygate.cluster.plugins.module_utils.node import procs as ray_procs


class Session:
    """Judges the node's Ray processes by its role, its head's GCS address and its ``member`` option."""

    def __init__(self, node):
        self.node = node
        self.p = node.p

    def gcs_answers(self, plan):
        """None when the GCS accepts a connection on its planned address, else the error."""
        try:
            socket.create_connection((self.node.head_ip(), int(plan["gcs"])), timeout=3).close()
            return None
        except OSError as exc:
            return str(exc) or exc.__class__.__name__

    def dead(self, plan, procs, raylet):
        """Why the Ray processes here are no working member, or None when they may be one.

        A head is one only while its raylet and GCS run and the GCS answers: after a crash of
        gcs_server the raylets and helpers live on for a while, then only the orphaned
        log_monitor and monitor are left. A worker is none without a raylet (it died, or a
        drain ended it), or when the head's GCS does not list it alive (member: false)."""
        if not procs:
            return None
        names = ", ".join(sorted({proc["comm"] for proc in procs}))
        if self.p["role"] == "head":
            gcs = ray_procs.find_daemon(procs, "gcs_server")
            error = self.gcs_answers(plan) if gcs and raylet else None
            if gcs and raylet and error is None:
                return None
            why = (
                "no %s runs" % ("raylet" if gcs else "gcs_server")
                if not (gcs and raylet)
                else ("its GCS does not answer on %s:%s (%s)" % (self.node.head_ip(), plan["gcs"], error))
            )
            return "the head is not working: %s; clearing what is left of its session (%s) and starting it again" % (
                why,
                names,
            )
        if not raylet:
            return (
                "no raylet runs on this worker, only leftover Ray processes (%s); stopping them and starting "
                "the node again" % names
            )
        if self.p["member"] is False:
            return (
                "the head's GCS does not list this worker alive with its configuration (raylet pid %s belongs to "
                "another session); stopping it and joining again" % raylet["pid"]
            )
        return None
