# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Each role entry point's own argument spec: the options its task files can reach.

An entry point's task file reaches other task files (import_tasks and include_tasks in its role,
import_role and include_role with tasks_from in another of the collection's roles), the shared
derived variables (roles/_common/vars/main.yml, each reaching what its value names) and the action
plugins it calls (which read some variables from the task's variables). Every ``raygate_*`` option
named along the way belongs to the entry point's spec, and no other.

`python tools/entry_specs.py` rewrites every role's meta/argument_specs.yml so: in each file, each
option is written out once, with a YAML anchor, in the first entry point that reaches it; the others
refer to it. An option's description is the one any role's spec gives it (the first found); its
default is the one in roles/_common/defaults/main.yml, whatever the file said: the collection states
each default once. tests/unit/roles/test_argument_specs.py checks that the files say what this
computes; `--check` only compares. A development tool: not in the collection's tarball.
"""

import os
import re
import sys

import yaml

ROLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "roles"))
COMMON = os.path.join(ROLES, "_common")
PLUGINS = os.path.abspath(os.path.join(ROLES, "..", "plugins"))
# The entry point of existing playbooks; ROLE is kept for the tools and tests that name it.
ROLE = os.path.join(ROLES, "raygate")
SPEC_FILE = os.path.join(ROLE, "meta", "argument_specs.yml")
NAME = re.compile(r"(?<![A-Za-z0-9_])(raygate_[a-z0-9_]+)\b")
ACTION = re.compile(r"raygate\.cluster\.([a-z_]+):")
# A derived variable built in Python (vars/main.yml: lookup('raygate.cluster.step_args', '<step>')).
STEP_ARGS = re.compile(r"""lookup\(\s*'raygate\.cluster\.step_args',\s*'([a-z_]+)'\s*\)""")
COLLECTIONS = os.path.abspath(os.path.join(PLUGINS, "..", ".build", "collections"))
TASKS_KEYS = ("import_tasks", "include_tasks")
ROLE_KEYS = ("import_role", "include_role")


def _read(path):
    with open(path) as fh:
        return fh.read()


def roles():
    """The roles that have an argument spec, in name order (raygate, the entry point, first)."""
    found = sorted(r for r in os.listdir(ROLES) if os.path.exists(spec_file(r)))
    return sorted(found, key=lambda r: r != "raygate")


def spec_file(role):
    return os.path.join(ROLES, role, "meta", "argument_specs.yml")


def _short(key):
    return key.rsplit(".", 1)[-1]


def _references(node, role):
    """(role, file) of every task file a task list hands over to."""
    if isinstance(node, list):
        for item in node:
            yield from _references(item, role)
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if _short(key) in TASKS_KEYS:
            name = value.get("file") if isinstance(value, dict) else value
            yield role, name
        elif _short(key) in ROLE_KEYS and isinstance(value, dict):
            other = value["name"].rsplit(".", 1)[-1]
            tasks_from = value.get("tasks_from", "main")
            yield other, tasks_from if tasks_from.endswith(".yml") else tasks_from + ".yml"
    for key in ("block", "rescue", "always"):
        yield from _references(node.get(key), role)


def task_files(entry, role="raygate"):
    """The (role, task file) pairs ``entry`` (a file name under ``role``'s tasks/) reaches, itself included."""
    seen, todo = [], [(role, entry)]
    while todo:
        where = todo.pop()
        if where in seen:
            continue
        seen.append(where)
        todo += list(_references(yaml.safe_load(_read(os.path.join(ROLES, where[0], "tasks", where[1]))), where[0]))
    return seen


def step_reads():
    """{step: the variables it reads} of the step_args lookup (plugins/plugin_utils/step_args.py's READS)."""
    if COLLECTIONS not in sys.path:
        sys.path.insert(0, COLLECTIONS)
    from ansible_collections.raygate.cluster.plugins.plugin_utils.step_args import READS  # noqa: PLC0415

    return READS


def derived():
    """roles/_common/vars/main.yml: {name: the raw text of its value}; a step_args lookup reads as the
    names its step reads."""
    reads = step_reads()
    found = {}
    for name, value in yaml.safe_load(_read(os.path.join(COMMON, "vars", "main.yml"))).items():
        text = yaml.safe_dump(value)
        found[name] = text + "".join(" ".join(reads[step]) for step in STEP_ARGS.findall(str(value)))
    return found


def _action_text(action):
    path = os.path.join(PLUGINS, "action", action + ".py")
    return _read(path) if os.path.exists(path) else ""


def reached_names(entry, role="raygate"):
    """Every raygate_* name the entry point's files, derived variables and actions name."""
    text = "".join(_read(os.path.join(ROLES, r, "tasks", f)) for r, f in task_files(entry, role))
    text += "".join(_action_text(a) for a in set(ACTION.findall(text)))
    # A step_args lookup called in a task file reads what its step reads.
    reads = step_reads()
    text += "".join(" " + " ".join(reads[step]) for step in set(STEP_ARGS.findall(text)))
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


def entry_options(entry_file, all_options, role="raygate"):
    reached = reached_names(entry_file, role)
    return [name for name in all_options if name in reached]


def load_specs(role="raygate"):
    return yaml.safe_load(_read(spec_file(role)))["argument_specs"]


def load_all():
    """{role: its entry points' specs} for every role with an argument spec."""
    return {role: load_specs(role) for role in roles()}


def all_options(specs):
    """Every option of every entry point (of one role's specs, or of load_all()'s), each once: in the
    order of defaults/main.yml, then the options without a default by name."""
    groups = specs.values() if all(isinstance(v, dict) and "options" not in v for v in specs.values()) else [specs]
    found = {}
    for group in groups:
        for spec in group.values():
            for name, option in spec["options"].items():
                found.setdefault(name, option)
    order = list(role_defaults())
    names = [n for n in order if n in found] + sorted(n for n in found if n not in order)
    return {name: found[name] for name in names}


def expected(specs, role="raygate", options=None):
    """{entry: [option names]} as the role's files say."""
    options = options if options is not None else all_options(specs)
    return {entry: entry_options(entry + ".yml", options, role) for entry in specs}


def role_defaults():
    """roles/_common/defaults/main.yml: {name: default}, the one place the collection states its defaults."""
    return yaml.safe_load(_read(os.path.join(COMMON, "defaults", "main.yml")))


def with_role_default(option, name, defaults):
    """``option`` with its default taken from ``defaults`` (the role's) where the role has one."""
    if name not in defaults:
        return option
    return dict(option, default=defaults[name])


def render(specs, role="raygate", everything=None):
    """The argument_specs.yml text of ``role`` for ``expected(specs)``: each option defined once
    (anchor), then referred to. ``everything`` (load_all()) gives the descriptions of options this
    role's file does not hold yet."""
    options = all_options(everything if everything is not None else {role: specs})
    defaults = role_defaults()
    wanted = expected(specs, role, options)
    defined = set()
    lines = [
        "---",
        "# Generated from the roles' task files by tools/entry_specs.py: each entry point lists the options",
        "# its task files, derived variables and actions reach; each default is the one in",
        "# roles/_common/defaults/main.yml. Edit an option's definition where it is written out (its first",
        "# entry point), a default in that file; run `python tools/entry_specs.py` after either.",
        "argument_specs:",
    ]
    for entry, spec in specs.items():
        lines.append("  %s:" % entry)
        lines.append("    short_description: %s" % spec["short_description"])
        lines.append("    options:" if wanted[entry] else "    options: {}")
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
    """Rewrite every role's argument_specs.yml; with --check, only say whether each is as written (exit 1 if not)."""
    if argv[1:] not in ([], ["--check"]):
        sys.stderr.write("usage: python tools/entry_specs.py [--check]\n")
        return 2
    everything = load_all()
    texts = {role: render(specs, role, everything) for role, specs in everything.items()}
    if argv[1:] == ["--check"]:
        stale = [spec_file(r) for r, text in texts.items() if _read(spec_file(r)) != text]
        for path in stale:
            sys.stderr.write("%s is not as tools/entry_specs.py writes it: run it\n" % path)
        return 1 if stale else 0
    for role, text in texts.items():
        with open(spec_file(role), "w") as fh:
            fh.write(text)
        sys.stdout.write("wrote %s\n" % spec_file(role))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
