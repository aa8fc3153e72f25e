# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The one place ray_firewall's backend option becomes a backend: every backend by name, and the
order in which backend=auto tries them."""

from __future__ import annotations

from ansible_collections.raygate.cluster.plugins.module_utils.net.firewall_backends import firewalld, nftables, ufw
from ansible_collections.raygate.cluster.plugins.module_utils.net.firewall_backends.base import BACKEND_VAR

BACKENDS = {
    "nftables": nftables.Nftables,
    "firewalld": firewalld.Firewalld,
    "ufw": ufw.Ufw,
}
# auto uses a firewall the host already runs (firewalld running, ufw active) rather than adding
# a table beside it; nft alone is the fallback.
AUTO_ORDER = ("firewalld", "ufw", "nftables")


def requested(step, name):
    """The backend named ``name``, after checking its tool is installed and that it can work here."""
    tool = BACKENDS[name].TOOL
    binary = step.runner.which(tool)
    if not binary:
        step.fail(
            "backend %s was requested but %s is not installed on this host; install it or set backend "
            "(the role variable %s) to auto or another backend" % (name, tool, BACKEND_VAR)
        )
    backend = BACKENDS[name](step, binary)
    problem = backend.unusable()
    if problem:
        step.fail(problem)
    return backend


def auto(step):
    """(name, backend): the first of AUTO_ORDER installed and in use here."""
    for name in AUTO_ORDER:
        binary = step.runner.which(BACKENDS[name].TOOL)
        if binary:
            backend = BACKENDS[name](step, binary)
            if backend.in_use():
                return name, backend
    step.fail(
        "no supported firewall on this host: firewalld is not running, ufw is not active and nft is not "
        "installed; install nftables, or set backend (the role variable %s)" % BACKEND_VAR
    )


def choose(step):
    """(name, backend) for ``step.p["backend"]``: the one named there, or auto's choice."""
    name = step.p["backend"]
    if name == "auto":
        return auto(step)
    return name, requested(step, name)
