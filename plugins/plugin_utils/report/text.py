# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""How a report's values read as text in every rendering of it (decision.py makes the report)."""

from __future__ import annotations

import json
import re

NEWLINES = re.compile(r"\r\n|\r|\n")
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def value_text(value):
    """A cell's text for a check value or threshold."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def node_reasons(entry):
    if entry["verdict"] == "skipped":
        return ["skipped: %s" % (entry["skip_reason"] or "not re-checked")]
    return entry["reasons"] or entry["warn_reasons"]


def visible(text):
    """``text`` with control characters (a terminal escape, NUL) shown as ``\\xNN`` instead."""
    return _CONTROL.sub(lambda m: "\\x%02x" % ord(m.group(0)), str(text))


def one_line(text):
    return NEWLINES.sub(" ", visible(text))
