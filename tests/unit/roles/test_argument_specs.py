"""The role's public variables and its argument specs must not drift apart."""

import os
import re
import subprocess
import sys

import yaml

# The generator of argument_specs.yml is a development tool: tools/entry_specs.py.
TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tools")
sys.path.insert(0, os.path.abspath(TOOLS))
import entry_specs  # noqa: E402

ROLE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "roles", "raygate")


def load(*parts):
    with open(os.path.join(ROLE, *parts)) as fh:
        return yaml.safe_load(fh)


def test_every_default_is_specified_with_the_same_default():
    defaults = load("defaults", "main.yml")
    specs = load("meta", "argument_specs.yml")["argument_specs"]
    options = entry_specs.all_options(specs)
    missing = sorted(set(defaults) - set(options))
    assert not missing, "defaults without a spec in any entry point: %s" % missing
    for entry, spec in specs.items():
        for name, option in spec["options"].items():
            if name in defaults:
                assert option.get("default") == defaults[name], "%s: %s default differs" % (entry, name)
        undocumented = [n for n, o in spec["options"].items() if not o.get("description")]
        assert not undocumented, (entry, undocumented)


def test_each_entry_point_specifies_exactly_the_options_it_reaches():
    """tools/entry_specs.py computes them from the task files; run it after adding an option."""
    specs = load("meta", "argument_specs.yml")["argument_specs"]
    wanted = entry_specs.expected(specs)
    for entry, spec in specs.items():
        assert list(spec["options"]) == wanted[entry], entry
    with open(entry_specs.SPEC_FILE) as fh:
        assert fh.read() == entry_specs.render(specs), "argument_specs.yml differs: run tools/entry_specs.py"


def test_the_generator_runs_as_a_script_from_anywhere(tmp_path):
    """`python tools/entry_specs.py --check` (what a contributor runs) agrees with the committed file."""
    script = os.path.join(os.path.abspath(TOOLS), "entry_specs.py")
    done = subprocess.run(
        [sys.executable, script, "--check"], cwd=str(tmp_path), capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def test_every_entry_point_a_playbook_imports_has_a_spec():
    specs = load("meta", "argument_specs.yml")["argument_specs"]
    playbooks = os.path.join(ROLE, "..", "..", "playbooks")
    imported = set()
    for name in os.listdir(playbooks):
        with open(os.path.join(playbooks, name)) as fh:
            imported |= set(re.findall(r"tasks_from:\s*([a-z_]+)\.yml", fh.read()))
    assert imported and imported <= set(specs), sorted(imported - set(specs))


def test_the_reach_follows_imports_and_derived_variables():
    # gate.yml imports gate_report.yml and gate_verdict.yml (which includes slurm.yml); the node checks
    # take their options from raygate_gpu_health_args, which names raygate_health_kernel_deny.
    files = entry_specs.task_files("gate.yml")
    assert {"gate_report.yml", "gate_verdict.yml", "slurm.yml"} <= set(files)
    assert "head_early_stop.yml" not in files  # site.yml's own (gate_run.yml)
    reached = entry_specs.reached_names("gate.yml")
    assert {"raygate_health_kernel_deny", "raygate_slurm"} <= reached
    assert "raygate_upgrade_rollback" not in entry_specs.reached_names("validate.yml")


def test_specs_without_default_are_not_in_defaults():
    defaults = load("defaults", "main.yml")
    options = entry_specs.all_options(load("meta", "argument_specs.yml")["argument_specs"])
    for name, option in options.items():
        if "default" not in option:
            assert name not in defaults, name


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
    paths = [os.path.join(ROLE, "tasks", f) for f in os.listdir(os.path.join(ROLE, "tasks"))]
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
    options = set(entry_specs.all_options(load("meta", "argument_specs.yml")["argument_specs"]))
    public = [(f, n) for f, n in _switches() if not n.startswith("_raygate_") and n not in options]
    assert public == [], public
    assert ("site.yml", "_raygate_run_playbook") in _switches()


def _role_imports(node):
    """Every import_role / include_role task of the raygate role in a playbook's plays."""
    if isinstance(node, list):
        for item in node:
            yield from _role_imports(item)
    elif isinstance(node, dict):
        for key in ("ansible.builtin.import_role", "ansible.builtin.include_role"):
            if key in node and node[key].get("name") == "raygate.cluster.raygate":
                yield node[key]
        for key in ("tasks", "block", "rescue", "always", "pre_tasks", "post_tasks"):
            yield from _role_imports(node.get(key))


def test_no_playbook_has_ansible_check_the_spec_on_every_node():
    """validate_inventory checks every node's variables once (plugin_utils/role_spec.py). Ansible's own
    role check is a task per node; it runs for an import whose tasks_from names an entry point of the
    spec (as `main`, the default, does), and not for `tasks_from: <file>.yml`, a name no entry point has."""
    specs = load("meta", "argument_specs.yml")["argument_specs"]
    playbooks = os.path.join(ROLE, "..", "..", "playbooks")
    checked = []
    for name in sorted(os.listdir(playbooks)):
        with open(os.path.join(playbooks, name)) as fh:
            for args in _role_imports(yaml.safe_load(fh)):
                entry = args.get("tasks_from", "main")
                if entry in specs and args.get("rolespec_validate", True) is not False:
                    checked.append((name, entry))
    assert checked == [], "set rolespec_validate: false (validate_inventory checks the spec once): %s" % checked
