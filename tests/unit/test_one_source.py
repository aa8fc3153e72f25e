"""Each fact once: a default has one source, and every other place that states it is pinned to it here.

The circuit breaker's settings (threshold, min_nodes) come from plugins/plugin_utils/breaker.py
for the code: the health_report action's argument spec and build_report() take them from there.
The role states its defaults once, in roles/raygate/defaults/main.yml: tools/entry_specs.py writes
them into meta/argument_specs.yml. What only documentation can say (the health_report module's
DOCUMENTATION, the role's argument specs) may repeat a value for its reader, as long as a test
here fails when it drifts from the source.
"""

import copy
import inspect
import os
import sys

import pytest
import yaml

from ansible_collections.raygate.cluster.plugins.action import health_report as action
from ansible_collections.raygate.cluster.plugins.modules import health_report as module
from ansible_collections.raygate.cluster.plugins.plugin_utils import breaker, step_args
from ansible_collections.raygate.cluster.plugins.plugin_utils.report import decision

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import entry_specs  # noqa: E402

# The breaker's settings: module option, role variable, the constant in breaker.py.
BREAKER = [
    ("breaker_threshold", "raygate_health_breaker_threshold", "DEFAULT_THRESHOLD"),
    ("breaker_min_nodes", "raygate_health_breaker_min_nodes", "DEFAULT_MIN_NODES"),
]
# Module options whose role variable defaults to something else on purpose (none today).
ROLE_DIFFERS = {}


def load(*parts):
    with open(os.path.join(ROOT, *parts)) as fh:
        return yaml.safe_load(fh)


def documented():
    return yaml.safe_load(module.DOCUMENTATION)["options"]


def role_specs():
    return load("roles", "raygate", "meta", "argument_specs.yml")["argument_specs"]


def passed_through():
    """{module option: role variable} for the health_report options the role sets from one variable
    as it is, or through int or bool (plugin_utils/step_args.py's HEALTH_REPORT_THROUGH, which
    roles/health_gate/tasks/gate_report.yml's health_report call takes through the step_args lookup)."""
    with open(os.path.join(ROOT, "roles", "health_gate", "tasks", "gate_report.yml")) as fh:
        (call,) = [t for t in yaml.safe_load(fh) if "raygate.cluster.health_report" in t.get("module_defaults", {})]
    value = call["module_defaults"]["raygate.cluster.health_report"]
    assert "'health_report'" in value, value
    return {option: variable for option, (variable, _convert) in step_args.HEALTH_REPORT_THROUGH.items()}


@pytest.mark.parametrize("option,variable,constant", BREAKER)
def test_the_breaker_defaults_come_from_breaker_py(option, variable, constant):
    value = getattr(breaker, constant)
    assert action.ARGUMENT_SPEC[option]["default"] == value
    assert inspect.signature(decision.build_report).parameters[option].default == value
    short = option.replace("breaker_", "")
    assert inspect.signature(breaker.judge).parameters[short].default == value
    assert documented()[option]["default"] == value, "the module's DOCUMENTATION of %s" % option
    assert load("roles", "_common", "defaults", "main.yml")[variable] == value, "defaults/main.yml: %s" % variable
    for entry, spec in role_specs().items():
        if variable in spec["options"]:
            assert spec["options"][variable]["default"] == value, "argument_specs.yml %s: %s" % (entry, variable)


def test_the_documented_off_switch_is_breaker_off():
    """Both docs say V(0) turns the breaker off: breaker.OFF."""
    off = "V(%d)" % breaker.OFF
    assert off in " ".join(documented()["breaker_threshold"]["description"])
    name = "raygate_health_breaker_threshold"
    role_spec = [s["options"][name] for s in role_specs().values() if name in s["options"]]
    assert role_spec and all(off in " ".join(spec["description"]) for spec in role_spec)


def test_the_role_passes_the_breaker_settings_through_as_they_are():
    through = passed_through()
    for option, variable, _constant in BREAKER:
        assert through[option] == variable


def test_build_report_defaults_are_the_documented_ones():
    """build_report() (the unit tests', the action always passes them all) defaults as the module does
    (None stands for an empty mapping there)."""
    options = documented()
    for name, parameter in inspect.signature(decision.build_report).parameters.items():
        if name in options and parameter.default not in (inspect.Parameter.empty, None):
            assert parameter.default == options[name].get("default"), name


def test_the_role_defaults_the_module_options_it_passes_through_as_the_module_does():
    """A role variable that only forwards a health_report option starts where the option does."""
    options = documented()
    defaults = load("roles", "_common", "defaults", "main.yml")
    through = passed_through()
    assert len(through) >= 8, through
    for option, variable in sorted(through.items()):
        if option in ROLE_DIFFERS or variable not in defaults or "default" not in options[option]:
            continue
        assert defaults[variable] == options[option]["default"], "%s (defaults/main.yml) vs %s" % (variable, option)


def test_argument_specs_take_every_default_from_the_role_defaults():
    """tools/entry_specs.py writes defaults/main.yml's value, whatever the spec file said."""
    specs = entry_specs.load_specs()
    drifted = copy.deepcopy(specs)
    for spec in drifted.values():
        for option in spec["options"].values():
            if "default" in option:
                option["default"] = "drifted"
    assert entry_specs.render(drifted) == entry_specs.render(specs)
