# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What ray_firewall needs of a firewall backend, and what the backends share."""

from __future__ import annotations

import abc

# Named in every message that asks the user to choose another backend.
BACKEND_VAR = "raygate_firewall_backend"


def lines_text(lines):
    return "".join(line + "\n" for line in lines)


class FirewallBackend(abc.ABC):
    """One firewall tool that holds the rule model of ``firewall.build_desired`` for raygate.

    A backend runs its commands through ``step`` (the RayFirewall that chose it), so that every
    backend honours check mode and fails in the same words; ``binary`` is where TOOL is here.
    """

    TOOL = None  # the command the backend drives, looked up on PATH

    def __init__(self, step, binary):
        self.step = step
        self.binary = binary
        self.p = step.p
        self.check = step.check
        self.run = step.run
        self.must = step.must
        self.fail = step.fail
        self.which = step.runner.which

    def unusable(self):
        """Chosen by name, TOOL being installed: why the backend still cannot work here, or None."""
        return None

    def in_use(self):
        """Whether backend=auto takes this backend on this host, TOOL being installed."""
        return True

    @abc.abstractmethod
    def present(self, desired):
        """Make the host hold exactly ``desired`` as raygate's rules; (changed, diff)."""

    @abc.abstractmethod
    def absent(self):
        """Remove everything raygate owns on this backend; (changed, diff)."""

    def result(self):
        """What the backend adds to the module's result."""
        return {}
