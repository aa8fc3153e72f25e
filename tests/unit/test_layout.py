"""The layout a newcomer walks (docs/ARCHITECTURE.md), kept by a test instead of by memory.

- plugins/module_utils holds packages by concern (with sub-packages of their own where a concern has parts,
  each with an empty __init__.py); only the common part is a flat file there.
- Controller-only code is in plugins/plugin_utils and no node-side code imports it.
- The common part imports no package, and the packages import each other without a cycle.
- tests/unit/plugins mirrors plugins/: each test file sits in the folder of the code it tests.
- Every module is its documentation plus a main() of a few lines.
- No class over 250 lines and no function over 70 lines anywhere in plugins/.
"""

import ast
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLUGINS = os.path.join(ROOT, "plugins")
MODULE_UTILS = os.path.join(PLUGINS, "module_utils")
PLUGINS_PACKAGE = "ansible_collections.raygate.cluster.plugins"
# The unit tests of plugins/, in folders mirroring it.
TESTS_PLUGINS = os.path.join(ROOT, "tests", "unit", "plugins")
# The common part: command runner, files, waiter, the check-result model, the step runner.
COMMON = {"__init__.py", "_runner.py", "files.py", "waiter.py", "checks.py", "step_runner.py"}
PACKAGES = {"node", "gate", "net"}
DOC_NAMES = {"DOCUMENTATION", "EXAMPLES", "RETURN"}
MODULE_CODE_LINES = 40
CLASS_LINES = 250
FUNCTION_LINES = 70


def python_files(top):
    for base, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in sorted(files):
            if name.endswith(".py"):
                yield os.path.join(base, name)


def rel(path):
    return os.path.relpath(path, PLUGINS)


def parse(path):
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    return text, ast.parse(text, filename=path)


def span(node):
    return node.end_lineno - node.lineno + 1


def imported_modules(tree):
    """The plugins/ files a parsed file imports, as paths under plugins/ ('module_utils/node/resp.py';
    a package as its '__init__.py'), from every import statement, also those inside functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [(node.module, alias.name) for alias in node.names]
        else:
            continue
        for module, name in names:
            if not module.startswith(PLUGINS_PACKAGE + "."):
                continue
            parts = module[len(PLUGINS_PACKAGE) + 1 :].split(".")
            # `from package import name`: name is a module or a package when one is there by that name.
            for candidate in ([parts + [name]] if name else []) + [parts]:
                base = os.path.join(PLUGINS, *candidate)
                if os.path.isfile(base + ".py"):
                    found.add("/".join(candidate) + ".py")
                    break
                if os.path.isfile(os.path.join(base, "__init__.py")):
                    found.add("/".join(candidate) + "/__init__.py")
                    break
    return found


def package_imports(tree):
    """The module_utils packages (node, gate, net) that a parsed file imports."""
    found = set()
    for target in imported_modules(tree):
        parts = target.split("/")
        if parts[0] == "module_utils" and len(parts) > 2 and parts[1] in PACKAGES:
            found.add(parts[1])
    return found


def test_module_utils_is_packages_by_concern_and_a_small_common_part():
    entries = set(os.listdir(MODULE_UTILS)) - {"__pycache__"}
    flat = sorted(e for e in entries if e.endswith(".py") and e not in COMMON)
    assert not flat, "flat files in plugins/module_utils beyond the common part: %s" % flat
    folders = {e for e in entries if os.path.isdir(os.path.join(MODULE_UTILS, e))}
    assert folders == PACKAGES, "module_utils packages: %s (docs/ARCHITECTURE.md names %s)" % (folders, PACKAGES)
    # A concern may group a part of itself in a sub-package (net/firewall_backends): a package all the same.
    for package in PACKAGES:
        for base, dirs, _files in os.walk(os.path.join(MODULE_UTILS, package)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            init = os.path.join(base, "__init__.py")
            assert os.path.isfile(init) and os.path.getsize(init) == 0, init


@pytest.mark.parametrize("path", list(python_files(MODULE_UTILS)), ids=rel)
def test_node_side_code_never_imports_controller_code(path):
    # A module runs on a node with raygate's module_utils only: plugin_utils never travels there.
    text, _tree = parse(path)
    assert not re.search(r"\bplugin_utils\b", text), path


def test_the_common_part_imports_no_package():
    # The common part is what every package may use: importing one of them would tie all to it.
    offenders = {}
    for name in sorted(os.listdir(MODULE_UTILS)):
        if name.endswith(".py"):
            packages = package_imports(parse(os.path.join(MODULE_UTILS, name))[1])
            if packages:
                offenders[name] = sorted(packages)
    assert not offenders, "common files of plugins/module_utils importing a package: %s" % offenders


def test_the_packages_import_each_other_without_a_cycle():
    uses = {package: set() for package in PACKAGES}
    for package in PACKAGES:
        for path in python_files(os.path.join(MODULE_UTILS, package)):
            uses[package] |= package_imports(parse(path)[1]) - {package}
    # Take out, again and again, the packages that use no package left: a cycle is what remains.
    left = dict(uses)
    while True:
        free = [package for package, used in left.items() if not used & set(left)]
        if not free:
            break
        for package in free:
            del left[package]
    assert not left, "module_utils packages in an import cycle, or importing one: %s" % {
        package: sorted(used & set(left)) for package, used in sorted(left.items())
    }


def test_the_unit_test_folders_mirror_plugins():
    folders = set()
    for base, dirs, _files in os.walk(TESTS_PLUGINS):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        folders |= {os.path.relpath(os.path.join(base, d), TESTS_PLUGINS) for d in dirs}
    strays = sorted(f for f in folders if not os.path.isdir(os.path.join(PLUGINS, f)))
    assert not strays, "folders of tests/unit/plugins with no plugins/ folder of that name: %s" % strays
    loose = sorted(n for n in os.listdir(TESTS_PLUGINS) if n.endswith(".py"))
    assert not loose, "files in tests/unit/plugins itself, outside the folder of their code: %s" % loose


def home_of(code):
    """The tests/unit/plugins folder of a plugins/ file: its own folder, or the nearest one above it
    that has a test folder (plugin_utils/report/'s tests are in plugin_utils/)."""
    folder = os.path.dirname(code)
    while folder and not os.path.isdir(os.path.join(TESTS_PLUGINS, folder)):
        folder = os.path.dirname(folder)
    return folder


def misplaced(path):
    """Why a test file is not in the folder of the code it tests, or None.

    The code it tests: the module its name says (test_resp.py, resp.py) among those it imports, else
    any code it imports. Node-side code's tests import no controller code: a test that does tests
    plugin_utils (or is in the wrong folder), whatever else it imports.
    """
    folder = os.path.relpath(os.path.dirname(path), TESTS_PLUGINS).replace(os.sep, "/")
    imported = imported_modules(parse(path)[1])
    if not imported:
        return "imports no plugins/ code"
    if folder.split("/", maxsplit=1)[0] == "module_utils":
        controller = sorted(m for m in imported if m.startswith("plugin_utils/"))
        if controller:
            return "a test of node-side code imports controller code %s: tests of it go in plugin_utils/" % controller
    subject = os.path.basename(path)[len("test_") : -len(".py")]
    named = {m for m in imported if os.path.basename(m) == subject + ".py"}
    homes = {home_of(m) for m in (named or imported)}
    if folder not in homes:
        return "tests %s: it goes in %s" % (sorted(named or imported), " or ".join(sorted(homes)))
    return None


def test_each_unit_test_sits_in_the_folder_of_the_code_it_tests():
    tests = [path for path in python_files(TESTS_PLUGINS) if os.path.basename(path).startswith("test_")]
    assert tests
    wrong = ["%s: %s" % (os.path.relpath(p, TESTS_PLUGINS), misplaced(p)) for p in tests if misplaced(p)]
    assert not wrong, "misplaced in tests/unit/plugins:\n" + "\n".join(wrong)


@pytest.mark.parametrize("path", list(python_files(os.path.join(PLUGINS, "modules"))), ids=os.path.basename)
def test_every_module_is_docs_and_a_few_lines_of_main(path):
    text, tree = parse(path)
    docs = sum(
        span(node)
        for node in tree.body
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) in DOC_NAMES for t in node.targets)
    )
    code = len(text.splitlines()) - docs
    assert code <= MODULE_CODE_LINES, "%s has %d lines besides its documentation (at most %d)" % (
        path,
        code,
        MODULE_CODE_LINES,
    )
    # A module whose work is an action plugin (health_report, run_summary, ...) is documentation only.
    mains = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main"]
    assert len(mains) <= 1, "%s: one main() at most" % path


@pytest.mark.parametrize("path", list(python_files(PLUGINS)), ids=rel)
def test_no_class_or_function_too_long_to_read(path):
    _text, tree = parse(path)
    too_long = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and span(node) > CLASS_LINES:
            too_long.append("class %s: %d lines (at most %d)" % (node.name, span(node), CLASS_LINES))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and span(node) > FUNCTION_LINES:
            too_long.append("def %s: %d lines (at most %d)" % (node.name, span(node), FUNCTION_LINES))
    assert not too_long, "%s: %s" % (path, "; ".join(too_long))
