# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""healthy_hosts.txt: the hosts that passed the health gate (decision.py), one a line."""

from __future__ import annotations


def render_healthy_hosts(report):
    return "".join(host + "\n" for host in report["healthy"])
