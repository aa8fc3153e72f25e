# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Each node's raygate variables checked against the role's argument spec, once, on the controller.

Ansible's own role argument validation runs as a task on every host, where a 1,000-node run paid
about 0.2 s of controller CPU per node for it (a worker per node, the whole spec sent back in each
result). The values a node can differ in are those its inventory and the extra variables set (the
role's defaults are the spec's own), so checking those once, here, finds the same mistakes for
every playbook before any host is contacted.
"""

from __future__ import annotations

import json
import os

import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

# The roles' specs inside the collection (the tarball ships roles/ beside plugins/): every option of
# every role, each written out in at least one of them (tools/entry_specs.py).
ROLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "roles")


def spec_files():
    """The argument_specs.yml of each of the collection's roles that has one."""
    names = sorted(os.listdir(ROLES)) if os.path.isdir(ROLES) else []
    paths = [os.path.join(ROLES, name, "meta", "argument_specs.yml") for name in names]
    return [path for path in paths if os.path.exists(path)]


FIX = "see `ansible-doc -t role raygate.cluster.raygate` for each variable's type and choices"
# At most this many hosts are named for one message (the rest are counted).
NAMED_HOSTS = 5


def load_options(paths=None):
    """Every option of every entry point of the roles' specs, each once: {name: its spec}."""
    options = {}
    for path in spec_files() if paths is None else paths:
        with open(path) as fh:
            specs = (yaml.load(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}).get(
                "argument_specs"
            ) or {}
        for entry in specs.values():
            for name, option in ((entry or {}).get("options") or {}).items():
                options.setdefault(name, option)
    return options


def _text(value):
    """The value as the inventory wrote it (JSON): what tells two values apart."""
    return json.dumps(value, sort_keys=True, default=repr)


def _shown(text):
    """A value's text, short enough for one line of a message."""
    return text if len(text) <= 80 else text[:77] + "..."


def _hosts(hosts):
    named = ", ".join(hosts[:NAMED_HOSTS])
    more = len(hosts) - NAMED_HOSTS
    return named + (" and %d more" % more if more > 0 else "")


def check_hosts(options, hostvars, hosts):
    """Errors for the raygate variables ``hosts`` set (``hostvars``: host -> its variables, a mapping
    that holds only what the inventory and the extra variables set) that ``options`` refuses. One
    message per distinct mistake, naming its hosts, the variable and the value it was set to.

    Each variable is checked on its own, so a message always belongs to one variable and one value
    (Ansible's own wording names the value on some versions only), and each distinct value of a
    variable is checked once however many nodes share it."""
    validators = {}
    seen = {}
    by_message = {}
    for host in dict.fromkeys(hosts):
        hv = hostvars[host]
        for name in options:
            if name not in hv:
                continue
            value = hv[name]
            # Keyed by the whole value: two long values alike in their shown start are both checked.
            key = (name, _text(value))
            if key not in seen:
                if name not in validators:
                    validators[name] = ArgumentSpecValidator({name: options[name]})
                found = validators[name].validate({name: value}).error_messages
                seen[key] = ["%s is set to %s: %s" % (name, _shown(key[1]), message) for message in found]
            for message in seen[key]:
                by_message.setdefault(message, []).append(host)
    return ["%s: %s; %s" % (_hosts(where), message, FIX) for message, where in by_message.items()]
