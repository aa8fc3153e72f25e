# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    # Mirrors WAIT_ARGSPEC in module_utils/waiter.py.
    DOCUMENTATION = r"""
options:
  wait:
    description:
      - Whether to wait for the condition this module describes.
    type: bool
    default: true
  wait_timeout:
    description:
      - How many seconds to wait before failing. Measured on a monotonic clock.
    type: int
    default: 300
  wait_sleep:
    description:
      - Seconds between two polls.
    type: float
    default: 1.0
"""
