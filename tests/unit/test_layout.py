"""The layout a newcomer walks (docs/ARCHITECTURE.md), kept by a test instead of by memory.

- plugins/module_utils holds packages by concern (with sub-packages of their own where a concern has parts,
  each with an empty __init__.py); only the common part is a flat file there.
- Controller-only code is in plugins/plugin_utils and no node-side code imports it.
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
# The common part: command runner, files, waiter, the check-result model, the step runner.
COMMON = {"__init__.py", "_runner.py", "files.py", "waiter.py", "checks.py", "steps.py", "step_runner.py"}
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
