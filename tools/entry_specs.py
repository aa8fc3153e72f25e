# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Each role entry point's own argument spec: the options its task files can reach.

An entry point's task file reaches other task files (import_tasks, include_tasks), the role's
derived variables (vars/main.yml, each reaching what its value names) and the action plugins it
calls (which read some variables from the task's variables). Every ``raygate_*`` option of the
role's full spec named along the way belongs to the entry point's spec, and no other.

`python tools/entry_specs.py` rewrites roles/raygate/meta/argument_specs.yml so: each option is
written out once, with a YAML anchor, in the first entry point that reaches it; the others refer
to it. An option's default is the role's default (defaults/main.yml), whatever the file said: the
role states each default once. tests/unit/roles/test_argument_specs.py checks that the file says
what this computes; `--check` only compares. A development tool: not in the collection's tarball.
"""

import os
import re
import sys

import yaml

ROLE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "roles", "raygate"))
PLUGINS = os.path.abspath(os.path.join(ROLE, "..", "..", "plugins"))
SPEC_FILE = os.path.join(ROLE, "meta", "argument_specs.yml")
NAME = re.compile(r"(?<![A-Za-z0-9_])(raygate_[a-z0-9_]+)\b")
TASK_FILE = re.compile(r"(?:import_tasks|include_tasks):\s*(?:file:\s*)?([A-Za-z0-9_]+\.yml)")
ACTION = re.compile(r"raygate\.cluster\.([a-z_]+):")


def _read(path):
    with open(path) as fh:
        return fh.read()


def task_files(entry):
    """The task files ``entry`` (a file name under tasks/) reaches, itself included."""
    seen, todo = [], [entry]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.append(name)
        todo += TASK_FILE.findall(_read(os.path.join(ROLE, "tasks", name)))
    return seen


def derived():
    """vars/main.yml: {name: the raw text of its value}."""
    return {k: yaml.safe_dump(v) for k, v in yaml.safe_load(_read(os.path.join(ROLE, "vars", "main.yml"))).items()}


def _action_text(action):
    path = os.path.join(PLUGINS, "action", action + ".py")
    return _read(path) if os.path.exists(path) else ""


def reached_names(entry):
    """Every raygate_* name the entry point's files, derived variables and actions name."""
    text = "".join(_read(os.path.join(ROLE, "tasks", f)) for f in task_files(entry))
    text += "".join(_action_text(a) for a in set(ACTION.findall(text)))
    values = derived()
    names, todo = set(), NAME.findall(text)
    while todo:
        name = todo.pop()
        if name in names:
            continue
        names.add(name)
        if name in values:
            todo += NAME.findall(values[name])
    return names


def entry_options(entry_file, all_options):
    reached = reached_names(entry_file)
    return [name for name in all_options if name in reached]


def load_specs():
    return yaml.safe_load(_read(SPEC_FILE))["argument_specs"]


def all_options(specs):
    """Every option of every entry point, each once: in the order of defaults/main.yml, then the
    options without a default by name (one order, however the entry points list them)."""
    found = {}
    for spec in specs.values():
        for name, option in spec["options"].items():
            found.setdefault(name, option)
    order = list(role_defaults())
    names = [n for n in order if n in found] + sorted(n for n in found if n not in order)
    return {name: found[name] for name in names}


def expected(specs):
    """{entry: [option names]} as the role's files say."""
    options = all_options(specs)
    return {entry: entry_options(entry + ".yml", options) for entry in specs}


def role_defaults():
    """defaults/main.yml: {name: default}, the one place the role states its defaults."""
    return yaml.safe_load(_read(os.path.join(ROLE, "defaults", "main.yml")))


def with_role_default(option, name, defaults):
    """``option`` with its default taken from ``defaults`` (the role's) where the role has one."""
    if name not in defaults:
        return option
    return dict(option, default=defaults[name])


def render(specs):
    """The argument_specs.yml text for ``expected(specs)``: each option defined once (anchor), then referred to."""
    options = all_options(specs)
    defaults = role_defaults()
    wanted = expected(specs)
    defined = set()
    lines = [
        "---",
        "# Generated from the role's task files by tools/entry_specs.py: each entry point lists the options",
        "# its task files, derived variables and actions reach; each default is the one in defaults/main.yml.",
        "# Edit an option's definition where it is written out (its first entry point), a default in",
        "# defaults/main.yml; run `python tools/entry_specs.py` after either.",
        "argument_specs:",
    ]
    for entry, spec in specs.items():
        lines.append("  %s:" % entry)
        lines.append("    short_description: %s" % spec["short_description"])
        lines.append("    options:")
        for name in wanted[entry]:
            if name in defined:
                lines.append("      %s: *%s" % (name, name))
                continue
            defined.add(name)
            option = with_role_default(options[name], name, defaults)
            body = yaml.safe_dump({name: option}, sort_keys=False, width=110, default_flow_style=False)
            first, rest = body.split("\n", 1)
            lines.append("      %s &%s" % (first, name))
            lines += ["      " + line if line else line for line in rest.rstrip("\n").split("\n")]
    return "\n".join(lines) + "\n"


def main(argv):
    """Rewrite argument_specs.yml; with --check, only say whether it is as this writes it (exit 1 if not)."""
    text = render(load_specs())
    if argv[1:] == ["--check"]:
        if _read(SPEC_FILE) == text:
            return 0
        sys.stderr.write("%s is not as tools/entry_specs.py writes it: run it\n" % SPEC_FILE)
        return 1
    if argv[1:]:
        sys.stderr.write("usage: python tools/entry_specs.py [--check]\n")
        return 2
    with open(SPEC_FILE, "w") as fh:
        fh.write(text)
    sys.stdout.write("wrote %s\n" % SPEC_FILE)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
