# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The files of a health report's directory, each the rendering of one file beside this one."""

from __future__ import annotations

from ansible_collections.raygate.cluster.plugins.plugin_utils.report.healthy_hosts import render_healthy_hosts
from ansible_collections.raygate.cluster.plugins.plugin_utils.report.json_file import render_json
from ansible_collections.raygate.cluster.plugins.plugin_utils.report.junit import render_junit
from ansible_collections.raygate.cluster.plugins.plugin_utils.report.markdown import render_markdown

FILES = (
    ("json", "report.json"),
    ("markdown", "report.md"),
    ("junit", "junit.xml"),
    ("healthy_hosts", "healthy_hosts.txt"),
)


def render_files(report):
    """``{key: (file name, content)}`` for the files written into the report directory."""
    content = {
        "json": render_json(report),
        "markdown": render_markdown(report),
        "junit": render_junit(report),
        "healthy_hosts": render_healthy_hosts(report),
    }
    return {key: (name, content[key]) for key, name in FILES}
