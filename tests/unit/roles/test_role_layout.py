"""The roles' layout (issue 42): one role per component, each usable alone, none a heap.

- No role holds more than 12 task files.
- Every role but the shared one (_common) has its own argument spec, README, tasks/main.yml (what
  it does alone) and depends on _common, which holds the defaults and derived values they all read.
- No role reads another role's registered variables by name: data goes over as role arguments
  (a hand-over's vars) or under the documented names of roles/_common/vars/main.yml's
  raygate_answers (the contract the controller's plugins read too).
- Logic lives in Python, not in vars/: at most 30 Jinja expressions in all roles' vars/.
"""

import os
import re

import pytest
import yaml

pytestmark = pytest.mark.unit

ROLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "roles"))
COMMON = "_common"
MAX_TASK_FILES = 12


def roles():
    return sorted(os.listdir(ROLES))


def task_files(role):
    return sorted(os.listdir(os.path.join(ROLES, role, "tasks")))


def load(*parts):
    with open(os.path.join(ROLES, *parts)) as fh:
        return yaml.safe_load(fh)


def tasks(node):
    """Every task of a task list, blocks' tasks included."""
    if isinstance(node, list):
        for item in node:
            yield from tasks(item)
    elif isinstance(node, dict):
        yield node
        for key in ("block", "rescue", "always"):
            yield from tasks(node.get(key))


def registered():
    """{registered variable: the roles whose task files register it}."""
    found = {}
    for role in roles():
        for name in task_files(role):
            for task in tasks(load(role, "tasks", name)):
                if "register" in task:
                    found.setdefault(task["register"], set()).add(role)
    return found


def documented():
    """The registered names the shared role documents as the contract (raygate_answers)."""
    answers = load(COMMON, "vars", "main.yml")["raygate_answers"]
    names = {v for k, v in answers.items() if k != "steps"}
    return names | {name for name, _step in answers["steps"]}


def reads(task):
    """The text of a task a variable can be read from: all of it but the names set_fact sets."""
    task = dict(task)
    for key in ("block", "rescue", "always"):
        task.pop(key, None)
    for key in ("ansible.builtin.set_fact", "set_fact"):
        if isinstance(task.get(key), dict):
            task[key] = list(task[key].values())
    return yaml.safe_dump(task)


def test_the_components_and_the_shared_role_exist():
    assert {COMMON, "raygate", "ray_install", "ray_node", "nccl_env", "firewall", "health_gate", "watcher"} <= set(
        roles()
    )


@pytest.mark.parametrize("role", roles())
def test_no_role_holds_more_than_12_task_files(role):
    assert len(task_files(role)) <= MAX_TASK_FILES, task_files(role)


@pytest.mark.parametrize("role", [r for r in roles() if r != COMMON])
def test_each_role_is_usable_alone(role):
    for part in ("README.md", os.path.join("meta", "argument_specs.yml"), os.path.join("tasks", "main.yml")):
        assert os.path.exists(os.path.join(ROLES, role, part)), "%s has no %s" % (role, part)
    specs = load(role, "meta", "argument_specs.yml")["argument_specs"]
    assert "main" in specs, "%s: its spec has no main entry point" % role
    dependencies = load(role, "meta", "main.yml")["dependencies"]
    assert {"role": "raygate.cluster._common"} in dependencies, role


def test_only_the_shared_role_holds_defaults_and_derived_values():
    for role in roles():
        for part in ("defaults", "vars"):
            assert role == COMMON or not os.path.exists(os.path.join(ROLES, role, part)), (role, part)


def test_no_role_reads_another_roles_registered_variables():
    owners = registered()
    contract = documented()
    found = []
    for role in roles():
        for name in task_files(role):
            for task in tasks(load(role, "tasks", name)):
                text = reads(task)
                for variable, by in owners.items():
                    if role in by or variable in contract:
                        continue
                    if re.search(r"(?<![A-Za-z0-9_])%s(?![A-Za-z0-9_])" % variable, text):
                        found.append((role, name, variable, sorted(by)))
    assert found == [], "pass it as a role argument, or document it in raygate_answers: %s" % found


def test_the_check_finds_a_read_of_another_roles_registered_variable():
    """The rule above is not vacuous: the firewall role registers raygate_firewall_call, and a task
    that read it from another role would be found (reads() keeps a condition's text)."""
    assert "firewall" in registered()["raygate_firewall_call"]
    assert "raygate_firewall_call" in reads({"name": "x", "when": "raygate_firewall_call is changed"})
    assert "raygate_x" not in reads({"ansible.builtin.set_fact": {"raygate_x": 1}})


def test_at_most_30_jinja_expressions_in_all_roles_vars():
    count = 0
    for role in roles():
        folder = os.path.join(ROLES, role, "vars")
        for name in os.listdir(folder) if os.path.isdir(folder) else []:
            with open(os.path.join(folder, name)) as fh:
                count += fh.read().count("{{")
    assert count <= 30, "%d Jinja expressions in roles' vars/: move the logic into Python (filters, lookups)" % count


def test_lint_renders_the_documentation_of_every_role():
    """make lint runs ansible-doc -t role for each name in the Makefile's ROLES: every role but _common."""
    with open(os.path.join(ROLES, "..", "Makefile")) as fh:
        (line,) = [x for x in fh if x.startswith("ROLES := ")]
    assert sorted(line.split(":=")[1].split()) == [r for r in roles() if r != COMMON]
