# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.raygate.cluster.plugins.module_utils.node.versions import format_table, mismatches


def version_mismatch_table(infos, level="patch", reference=None):
    """A table of the hosts' Ray and Python versions when they differ, else ''."""
    if not isinstance(infos, dict):
        raise AnsibleFilterError("version_mismatch_table expects a dict of host -> {ray, python}")
    missing = sorted(host for host, info in infos.items() if not isinstance(info, dict))
    if missing:
        raise AnsibleFilterError("no version information for host(s) %s" % ", ".join(missing))
    try:
        rows = mismatches(infos, level=level, reference=reference)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from exc
    if not rows:
        return ""
    return "Ray or Python versions differ between nodes; Ray would refuse to join them:\n" + format_table(rows, level)


class FilterModule:
    def filters(self):
        return {"version_mismatch_table": version_mismatch_table}
