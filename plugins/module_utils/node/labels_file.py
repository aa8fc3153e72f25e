# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A Ray node's labels file (``ray start --labels-file``): the labels and status labels it is to
carry, checked as Ray checks them, the status labels it was last started with, and forgetting them.
The syntax and the file's format are labels.py's."""

from __future__ import annotations

import os

from ansible_collections.raygate.cluster.plugins.module_utils.files import read_text, write_file
from ansible_collections.raygate.cluster.plugins.module_utils.node import labels as nl


class LabelsFile:
    """The node's ``labels`` and ``status_labels`` options and its labels file at ``node.labels_path``."""

    def __init__(self, node):
        self.node = node
        self.p = node.p

    def checked(self):
        """The configured labels and the given status labels (None: not given), checked as Ray
        checks them; fails before anything changes."""
        try:
            labels = nl.check(self.p["labels"], "labels")
            status = self.p["status_labels"]
            if status is not None:
                status = nl.check(status, "status_labels", reserved_ok=False)
                nl.merge(labels, status)
        except ValueError as exc:
            self.node.fail("%s; nothing was changed" % exc)
        return labels, status

    def carried_status(self):
        """The status labels the node was last started with, as its labels file says."""
        return nl.status_from_file(read_text(self.node.labels_path))

    def write(self, labels, status_keys):
        """Written only when Ray (re)starts: the file is then what the running node carries."""
        labels = self.p["labels"] if labels is None else labels
        if labels:
            write_file(self.node.labels_path, nl.render_file(labels, status_keys))
        elif os.path.lexists(self.node.labels_path):
            # Not passed to Ray: a stale file would claim status labels the node does not carry.
            os.unlink(self.node.labels_path)

    def forget_status(self):
        """Drop the status labels from the labels file, so the next start without status_labels
        starts without them. The file stays (empty, maybe): a systemd unit passes it at boot."""
        labels, status = nl.parse_file(read_text(self.node.labels_path))
        write_file(self.node.labels_path, nl.render_file({k: v for k, v in labels.items() if k not in status}, []))
