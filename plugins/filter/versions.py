# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.raygate.cluster.plugins.module_utils.node.versions import format_table, mismatches


def _rows(name, infos, level, reference):
    if not isinstance(infos, dict):
        raise AnsibleFilterError("%s expects a dict of host -> {ray, python}" % name)
    missing = sorted(host for host, info in infos.items() if not isinstance(info, dict))
    if missing:
        raise AnsibleFilterError("no version information for host(s) %s" % ", ".join(missing))
    try:
        return mismatches(infos, level=level, reference=reference)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def version_mismatch_table(infos, level="patch", reference=None):
    """A table of the hosts' Ray and Python versions (and container images) when they differ, else ''."""
    rows = _rows("version_mismatch_table", infos, level, reference)
    if not rows:
        return ""
    differ = {what for row in rows for what in row["differs"]}
    heads = ["Ray or Python versions differ between nodes; Ray would refuse to join them"] if differ - {"image"} else []
    if "image" in differ:
        heads.append("the nodes' container images differ (their digests): pin one image for every node")
    return "%s:\n%s" % ("; ".join(heads), format_table(rows, level))


def version_mismatch_hosts(infos, level="patch", reference=None):
    """The hosts whose Ray or Python version (or image) differs from the reference's (the table's rows with a
    difference, in its order), else []: the nodes that leave the run, computed once as data."""
    return [row["host"] for row in _rows("version_mismatch_hosts", infos, level, reference) if row["differs"]]


class FilterModule:
    def filters(self):
        return {"version_mismatch_table": version_mismatch_table, "version_mismatch_hosts": version_mismatch_hosts}
