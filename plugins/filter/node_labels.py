# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.raygate.cluster.plugins.module_utils.node import labels as nl


def health_labels(report, host, checked=True, fingerprint_hash=None):
    """The Ray status labels of ``host`` when it was ``checked`` in this run and the gate's report
    lists it healthy, else {} (not checked now, failed, or no report)."""
    if fingerprint_hash is not None and not isinstance(fingerprint_hash, str):
        raise AnsibleFilterError("health_labels: fingerprint_hash must be a string, not %r" % (fingerprint_hash,))
    return nl.from_report(report, host, bool(checked), fingerprint_hash or None)


class FilterModule:
    def filters(self):
        return {"health_labels": health_labels}
