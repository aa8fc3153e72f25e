"""The argument specs the action plugins validate with must say what their modules' DOCUMENTATION says."""

import importlib

import pytest
import yaml

from ansible_collections.raygate.cluster.plugins.action import cluster_tls, ray_cluster_info, validate_inventory

COLLECTION = "ansible_collections.raygate.cluster.plugins"


def documented_options(name):
    """The module's options with those of its doc fragments (raygate.cluster.<fragment>[.<VARIANT>])."""
    doc = yaml.safe_load(importlib.import_module("%s.modules.%s" % (COLLECTION, name)).DOCUMENTATION)
    options = {}
    for fragment in doc.get("extends_documentation_fragment") or []:
        namespace, collection, rest = fragment.split(".", 2)
        assert (namespace, collection) == ("raygate", "cluster"), fragment
        module_name, dot, variant = rest.partition(".")
        holder = importlib.import_module("%s.doc_fragments.%s" % (COLLECTION, module_name)).ModuleDocFragment
        options.update(yaml.safe_load(getattr(holder, variant or "DOCUMENTATION")).get("options") or {})
    options.update(doc.get("options") or {})
    return options


def normalise_doc(option):
    return {
        "type": option.get("type", "str"),
        "required": bool(option.get("required", False)),
        "default": option.get("default"),
        "choices": option.get("choices"),
        "elements": option.get("elements"),
        "aliases": option.get("aliases") or [],
        "no_log": False,  # no documented option of these modules is a secret
    }


def normalise_spec(option):
    return {
        "type": option.get("type", "str"),
        "required": bool(option.get("required", False)),
        "default": option.get("default"),
        "choices": option.get("choices"),
        "elements": option.get("elements"),
        "aliases": option.get("aliases") or [],
        "no_log": bool(option.get("no_log", False)),
    }


@pytest.mark.parametrize(
    "name,spec",
    [
        ("ray_cluster_info", ray_cluster_info.ARGUMENT_SPEC),
        ("validate_inventory", validate_inventory.ARGUMENT_SPEC),
        ("cluster_tls", cluster_tls.ARGUMENT_SPEC),
    ],
)
def test_spec_matches_the_documentation(name, spec):
    documented = documented_options(name)
    assert sorted(spec) == sorted(documented)
    for option in spec:
        assert normalise_spec(spec[option]) == normalise_doc(documented[option]), option


def test_the_wait_options_are_the_documented_ones():
    documented = documented_options("ray_cluster_info")
    assert (documented["wait"]["default"], documented["wait_timeout"]["default"]) == (True, 300)
    assert (documented["wait_sleep"]["type"], documented["wait_sleep"]["default"]) == ("float", 1.0)
