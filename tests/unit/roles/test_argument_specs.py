"""The role's public variables and its argument specs must not drift apart."""

import os

import yaml

ROLE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "roles", "raygate")


def load(*parts):
    with open(os.path.join(ROLE, *parts)) as fh:
        return yaml.safe_load(fh)


def test_every_default_is_specified_with_the_same_default():
    defaults = load("defaults", "main.yml")
    specs = load("meta", "argument_specs.yml")["argument_specs"]
    for entry, spec in specs.items():
        options = spec["options"]
        missing = sorted(set(defaults) - set(options))
        assert not missing, "%s: defaults without a spec: %s" % (entry, missing)
        for name, value in defaults.items():
            assert options[name].get("default") == value, "%s: %s default differs" % (entry, name)
        undocumented = [n for n, o in options.items() if not o.get("description")]
        assert not undocumented, undocumented


def test_specs_without_default_are_not_in_defaults():
    defaults = load("defaults", "main.yml")
    options = load("meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
    for name, option in options.items():
        if "default" not in option:
            assert name not in defaults, name
