"""The roles' public variables and their argument specs must not drift apart."""

import os
import re
import subprocess
import sys

import yaml

# The generator of argument_specs.yml is a development tool: tools/entry_specs.py.
TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tools")
sys.path.insert(0, os.path.abspath(TOOLS))
import entry_specs  # noqa: E402

ROLES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "roles")
ROLE = os.path.join(ROLES, "raygate")


def load(*parts):
    with open(os.path.join(ROLE, *parts)) as fh:
        return yaml.safe_load(fh)


def defaults():
    with open(os.path.join(ROLES, "_common", "defaults", "main.yml")) as fh:
        return yaml.safe_load(fh)


def every_entry():
    """(role, entry, spec) of every entry point of every role."""
    return [(role, entry, spec) for role, specs in entry_specs.load_all().items() for entry, spec in specs.items()]


def test_every_default_is_specified_with_the_same_default():
    values = defaults()
    options = entry_specs.all_options(entry_specs.load_all())
    missing = sorted(set(values) - set(options))
    assert not missing, "defaults without a spec in any entry point: %s" % missing
    for role, entry, spec in every_entry():
        for name, option in spec["options"].items():
            if name in values:
                assert option.get("default") == values[name], "%s %s: %s default differs" % (role, entry, name)
        undocumented = [n for n, o in spec["options"].items() if not o.get("description")]
        assert not undocumented, (role, entry, undocumented)


def test_every_role_but_the_shared_one_has_a_spec():
    assert set(entry_specs.roles()) == set(os.listdir(ROLES)) - {"_common"}


def test_each_entry_point_specifies_exactly_the_options_it_reaches():
    """tools/entry_specs.py computes them from the task files; run it after adding an option."""
    everything = entry_specs.load_all()
    options = entry_specs.all_options(everything)
    for role, specs in everything.items():
        wanted = entry_specs.expected(specs, role, options)
        for entry, spec in specs.items():
            assert list(spec["options"]) == wanted[entry], (role, entry)
        with open(entry_specs.spec_file(role)) as fh:
            assert fh.read() == entry_specs.render(specs, role, everything), (
                "%s differs: run tools/entry_specs.py" % role
            )


def test_the_generator_runs_as_a_script_from_anywhere(tmp_path):
    """`python tools/entry_specs.py --check` (what a contributor runs) agrees with the committed file."""
    script = os.path.join(os.path.abspath(TOOLS), "entry_specs.py")
    done = subprocess.run(
        [sys.executable, script, "--check"], cwd=str(tmp_path), capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def test_every_entry_point_a_playbook_imports_has_a_spec():
    everything = entry_specs.load_all()
    playbooks = os.path.join(ROLE, "..", "..", "playbooks")
    imported = set()
    for name in os.listdir(playbooks):
        with open(os.path.join(playbooks, name)) as fh:
            found = re.findall(r"name:\s*raygate\.cluster\.([a-z_]+)\s+tasks_from:\s*([a-z_]+)\.yml", fh.read())
            imported |= set(found)
    assert imported, "no playbook imports an entry point"
    missing = sorted((role, entry) for role, entry in imported if entry not in everything.get(role, {}))
    assert missing == [], missing


def test_the_reach_follows_imports_across_roles_and_derived_variables():
    # gate.yml imports gate_report.yml and gate_verdict.yml (which includes slurm.yml); the node checks
    # take their options from the step_args lookup's gpu_health step, which reads raygate_health_kernel_deny.
    files = entry_specs.task_files("gate.yml", "health_gate")
    assert {
        ("health_gate", "gate_report.yml"),
        ("health_gate", "gate_verdict.yml"),
        ("health_gate", "slurm.yml"),
    } <= set(files)
    assert ("ray_node", "head_early_stop.yml") not in files  # site.yml's own (gate_run.yml)
    reached = entry_specs.reached_names("gate.yml", "health_gate")
    assert {"raygate_health_kernel_deny", "raygate_slurm"} <= reached
    assert "raygate_upgrade_rollback" not in entry_specs.reached_names("validate.yml")
    # main.yml reaches another role's files through import_role / include_role with tasks_from
    site = entry_specs.task_files("main.yml")
    assert {("ray_node", "start.yml"), ("health_gate", "gate_run.yml"), ("ray_node", "head_early_stop.yml")} <= set(
        site
    )
    assert ("_common", "leave_now.yml") in site


def test_specs_without_default_are_not_in_defaults():
    values = defaults()
    options = entry_specs.all_options(entry_specs.load_all())
    for name, option in options.items():
        if "default" not in option:
            assert name not in values, name


HANDS_ON = (
    "hosts",
    "ansible.builtin.import_tasks",
    "ansible.builtin.include_tasks",
    "ansible.builtin.import_role",
    "ansible.builtin.include_role",
)


def _switches():
    """(file, name) of every variable handed to another task file: play vars, and the vars of an
    import_tasks / include_tasks / import_role task."""
    found = []
    paths = [
        os.path.join(ROLES, r, "tasks", f)
        for r in os.listdir(ROLES)
        for f in os.listdir(os.path.join(ROLES, r, "tasks"))
    ]
    playbooks = os.path.join(ROLE, "..", "..", "playbooks")
    paths += [os.path.join(playbooks, f) for f in os.listdir(playbooks)]

    def walk(node, path):
        if isinstance(node, list):
            for item in node:
                walk(item, path)
        elif isinstance(node, dict):
            hands_on = any(k in node for k in HANDS_ON)
            if hands_on and isinstance(node.get("vars"), dict):
                found.extend((os.path.basename(path), name) for name in node["vars"])
            for key in ("tasks", "block", "rescue", "always", "pre_tasks", "post_tasks"):
                walk(node.get(key), path)

    for path in paths:
        with open(path) as fh:
            walk(yaml.safe_load(fh), path)
    return found


def test_internal_switches_carry_the_internal_prefix():
    """What task files and playbooks hand each other is either a documented option or _raygate_*."""
    options = set(entry_specs.all_options(entry_specs.load_all()))
    public = [(f, n) for f, n in _switches() if not n.startswith("_raygate_") and n not in options]
    assert public == [], public
    assert ("site.yml", "_raygate_run_playbook") in _switches()


def _role_imports(node):
    """Every import_role / include_role task of the collection's roles in a playbook's plays."""
    if isinstance(node, list):
        for item in node:
            yield from _role_imports(item)
    elif isinstance(node, dict):
        for key in ("ansible.builtin.import_role", "ansible.builtin.include_role"):
            if key in node and node[key].get("name", "").startswith("raygate.cluster."):
                yield node[key]
        for key in ("tasks", "block", "rescue", "always", "pre_tasks", "post_tasks"):
            yield from _role_imports(node.get(key))


def test_no_playbook_has_ansible_check_the_spec_on_every_node():
    """validate_inventory checks every node's variables once (plugin_utils/role_spec.py). Ansible's own
    role check is a task per node; it runs for an import whose tasks_from names an entry point of the
    spec (as `main`, the default, does), and not for `tasks_from: <file>.yml`, a name no entry point has."""
    everything = entry_specs.load_all()
    playbooks = os.path.join(ROLE, "..", "..", "playbooks")
    checked = []
    for name in sorted(os.listdir(playbooks)):
        with open(os.path.join(playbooks, name)) as fh:
            for args in _role_imports(yaml.safe_load(fh)):
                entry = args.get("tasks_from", "main")
                specs = everything.get(args["name"].rsplit(".", 1)[-1], {})
                if entry in specs and args.get("rolespec_validate", True) is not False:
                    checked.append((name, entry))
    assert checked == [], "set rolespec_validate: false (validate_inventory checks the spec once): %s" % checked
