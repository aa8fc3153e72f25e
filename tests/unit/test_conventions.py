"""Conventions every plugin keeps, checked here because each of them slipped once.

- Every module's DOCUMENTATION says what it needs on the node (``requirements:``).
- Every module is in the collection's ``ray`` action group (meta/runtime.yml), so
  ``module_defaults`` for ``group/raygate.cluster.ray`` reach it.
- The Makefile's MODULES and FILTERS name every module and every filter, so that `make lint`
  runs ansible-doc on each of them.
"""

import importlib
import os
import re

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLUGINS = os.path.join(ROOT, "plugins")
COLLECTION = "ansible_collections.raygate.cluster.plugins"


def _names(folder, ext):
    path = os.path.join(PLUGINS, folder)
    return sorted(n[: -len(ext)] for n in os.listdir(path) if n.endswith(ext) and not n.startswith("_"))


MODULES = _names("modules", ".py")


def filters_documented():
    """The filters with a documentation file (plugins/filter/<name>.yml)."""
    return _names("filter", ".yml")


def filters_provided():
    """The filters that the FilterModule of each plugins/filter/*.py returns."""
    found = []
    for name in _names("filter", ".py"):
        plugin = importlib.import_module("%s.filter.%s" % (COLLECTION, name))
        found += list(plugin.FilterModule().filters())
    return sorted(found)


def make_variable(name):
    """The words of ``NAME := ...`` in the Makefile (continuation lines included)."""
    with open(os.path.join(ROOT, "Makefile")) as fh:
        text = fh.read()
    match = re.search(r"^%s\s*:?=(.*(?:\\\n.*)*)$" % re.escape(name), text, re.M)
    assert match, "the Makefile has no %s variable" % name
    return match.group(1).replace("\\\n", " ").split()


def test_there_are_modules_and_filters_to_check():
    assert len(MODULES) >= 10 and "health_report" in MODULES, MODULES
    assert "gate_decision" in filters_provided(), filters_provided()


@pytest.mark.parametrize("name", MODULES)
def test_every_module_documents_its_requirements(name):
    doc = yaml.safe_load(importlib.import_module("%s.modules.%s" % (COLLECTION, name)).DOCUMENTATION)
    requirements = doc.get("requirements")
    assert requirements, "plugins/modules/%s.py: DOCUMENTATION has no requirements:" % name
    assert isinstance(requirements, list) and all(isinstance(r, str) and r.strip() for r in requirements), name


def test_every_module_is_in_the_ray_action_group():
    with open(os.path.join(ROOT, "meta", "runtime.yml")) as fh:
        group = yaml.safe_load(fh)["action_groups"]["ray"]
    assert len(group) == len(set(group)), "meta/runtime.yml: a module is listed twice in the ray group"
    missing = sorted(set(MODULES) - set(group))
    unknown = sorted(set(group) - set(MODULES))
    assert not missing, "modules missing from the ray action group in meta/runtime.yml: %s" % missing
    assert not unknown, "the ray action group names modules that do not exist: %s" % unknown


def test_every_filter_is_documented_and_provided():
    """A filter's .yml documentation and its FilterModule entry come together."""
    assert filters_documented() == filters_provided()


def test_the_makefile_names_every_module():
    listed = make_variable("MODULES")
    assert len(listed) == len(set(listed)), listed
    assert sorted(listed) == MODULES, "the Makefile's MODULES: missing %s, unknown %s" % (
        sorted(set(MODULES) - set(listed)),
        sorted(set(listed) - set(MODULES)),
    )


def test_the_makefile_names_every_filter():
    listed = make_variable("FILTERS")
    every = sorted(set(filters_documented()) | set(filters_provided()))
    assert len(listed) == len(set(listed)), listed
    assert sorted(listed) == every, "the Makefile's FILTERS: missing %s, unknown %s" % (
        sorted(set(every) - set(listed)),
        sorted(set(listed) - set(every)),
    )


def test_the_readme_lists_the_ray_action_group():
    """README.md's list of the group's modules (between the action-group:ray markers) is
    meta/runtime.yml's action_groups.ray, in its order, so module_defaults users read the truth."""
    with open(os.path.join(ROOT, "meta", "runtime.yml")) as fh:
        group = yaml.safe_load(fh)["action_groups"]["ray"]
    with open(os.path.join(ROOT, "README.md")) as fh:
        text = fh.read()
    assert "group/raygate.cluster.ray" in text, "README.md does not show module_defaults for group/raygate.cluster.ray"
    match = re.search(r"<!-- action-group:ray -->\n(.*?)<!-- /action-group:ray -->", text, re.S)
    assert match, "README.md has no <!-- action-group:ray --> ... <!-- /action-group:ray --> list"
    lines = [line for line in match.group(1).splitlines() if line.strip()]
    listed = [re.fullmatch(r"- `raygate\.cluster\.([a-z0-9_]+)`", line) for line in lines]
    assert all(listed), "README.md's action group list has lines other than - `raygate.cluster.<module>`: %s" % [
        line for line, m in zip(lines, listed) if not m
    ]
    names = [m.group(1) for m in listed]
    assert names == group, "README.md's action group list %s differs from meta/runtime.yml's %s" % (names, group)


def _make_var(text, name):
    match = re.search(r"^%s \?= (.*)$" % name, text, re.M)
    assert match, "the Makefile sets no %s" % name
    return match.group(1).split()


def _tested_minors():
    """The ansible-core minors that `make compat-all` and `make fast` run the units on:
    COMPAT_VERSIONS (make compat), the one pinned in requirements-dev.txt (.venv: make fast) and
    NEXT_CORE_VERSIONS (compat-next). `make test` takes the two ends of them."""
    with open(os.path.join(ROOT, "Makefile")) as fh:
        make = fh.read()
    with open(os.path.join(ROOT, "requirements-dev.txt")) as fh:
        pinned = re.search(r"^ansible-core==(\d+)\.(\d+)\.", fh.read(), re.M)
    assert pinned, "requirements-dev.txt pins no ansible-core"
    minors = {(int(pinned.group(1)), int(pinned.group(2)))}
    for version in _make_var(make, "COMPAT_VERSIONS") + _make_var(make, "NEXT_CORE_VERSIONS"):
        major, minor = version.split(".")
        minors.add((int(major), int(minor)))
    return sorted(minors)


def test_requires_ansible_claims_the_tested_minors_only():
    """meta/runtime.yml's requires_ansible is exactly the tested minors, with no gap: from the oldest
    (>=X.Y.0) to below the one after the newest (<X.Z.0), and the README's Requirements quote it.
    A new core is one variable away: add it to NEXT_CORE_VERSIONS, and this says what else to change."""
    minors = _tested_minors()
    oldest, newest = minors[0], minors[-1]
    gaps = [(oldest[0], m) for m in range(oldest[1], newest[1] + 1) if (oldest[0], m) not in minors]
    assert oldest[0] == newest[0] and not gaps, "minors tested with a gap: %s (missing %s)" % (minors, gaps)
    claim = ">=%d.%d.0,<%d.%d.0" % (oldest + (newest[0], newest[1] + 1))
    with open(os.path.join(ROOT, "meta", "runtime.yml")) as fh:
        runtime = yaml.safe_load(fh)["requires_ansible"]
    assert runtime == claim, "meta/runtime.yml requires_ansible is %r; the tested minors %s make it %r" % (
        runtime,
        ["%d.%d" % m for m in minors],
        claim,
    )
    with open(os.path.join(ROOT, "README.md")) as fh:
        assert "`%s`" % claim in fh.read(), "README.md's Requirements do not quote requires_ansible %r" % claim
