# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""report.json: the health report (decision.py) as it is."""

from __future__ import annotations

import json


def render_json(report):
    return json.dumps(report, indent=2, sort_keys=False) + "\n"
