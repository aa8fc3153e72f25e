"""Make the checkout importable as ansible_collections.raygate.cluster for pytest."""

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(ROOT, ".build", "collections")
LINK = os.path.join(COLLECTIONS, "ansible_collections", "raygate", "cluster")

if not os.path.exists(LINK):
    os.makedirs(os.path.dirname(LINK), exist_ok=True)
    os.symlink("../../../..", LINK)
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)
# Helpers the unit tests share (role_answers.py, real_samples.py), importable from any of their folders.
UNIT_HELPERS = os.path.join(ROOT, "tests", "unit")
if UNIT_HELPERS not in sys.path:
    sys.path.append(UNIT_HELPERS)


def _patch_module_args_before_2_19():
    """ansible-core < 2.19 has no ansible.module_utils.testing.patch_module_args: supply it.

    Before 2.19 a module read its arguments from ``basic._ANSIBLE_ARGS``; the stand-in sets that
    for the duration of the block, so the same unit tests run on every version the collection
    claims (meta/runtime.yml, `make compat`).
    """
    try:
        from ansible.module_utils import testing  # noqa: F401
    except ImportError:
        pass
    else:
        return
    import contextlib
    import json
    import types
    from unittest import mock

    from ansible.module_utils import basic

    @contextlib.contextmanager
    def patch_module_args(args=None):
        payload = json.dumps({"ANSIBLE_MODULE_ARGS": dict(args or {})}).encode("utf-8")
        with mock.patch.object(basic, "_ANSIBLE_ARGS", payload):
            yield

    shim = types.ModuleType("ansible.module_utils.testing")
    shim.patch_module_args = patch_module_args
    sys.modules["ansible.module_utils.testing"] = shim


_patch_module_args_before_2_19()


SHARED_SAMPLES = os.path.join(ROOT, "..", "shared", "samples")


def pytest_terminal_summary(terminalreporter):
    """Say loudly, at the end of every run, what was not tested: sandbox and suite tests skipped
    (not root, no tini, no venv: a plain `pytest tests` as a user), and the real public outputs
    when ../shared/samples is missing; the image tests skipped (no `make image` yet)."""
    _say_skipped(
        terminalreporter,
        _skipped(terminalreporter, ("sandbox", "suite")),
        "SANDBOX AND SUITE TESTS WERE SKIPPED",
        "They were not tested. Run them as root after `make bootstrap` (make integration), or select "
        "the tests that need no sandbox: pytest -m unit.",
    )
    _say_skipped(
        terminalreporter,
        _skipped(terminalreporter, ("image",)),
        "IMAGE TESTS WERE SKIPPED",
        "The Ray node image was not checked. Build it as root (make image), then run make image-check.",
    )
    if os.path.isdir(SHARED_SAMPLES):
        return
    terminalreporter.write_sep("!", "../shared/samples IS MISSING", red=True, bold=True)
    missing = os.path.abspath(SHARED_SAMPLES)
    terminalreporter.write_line(
        "The parser tests over real nvidia-smi, dcgmi, nccl-tests, ibstat, fi_info and kernel-log outputs "
        "were SKIPPED: %s does not exist. Clone next to the shared folder (CI has it)." % missing,
        red=True,
    )


# ---- targets: every test is unit, sandbox, suite or image, by its path (pytest.ini registers them) ----
TESTS = os.path.dirname(os.path.abspath(__file__))
# tests/sandbox files that need no sandbox: they run the simulators on this host, as any user.
SANDBOX_FREE = {"test_sim_gpu.py"}


def target_of(path):
    """'unit', 'sandbox', 'suite' or 'image' for a test file (a path under tests/), else None."""
    parts = os.path.relpath(str(path), TESTS).split(os.sep)
    if parts[0] == "unit":
        return "unit"
    if parts[0] == "image":
        # The image `make image` built (make image-check); not in make test.
        return "image"
    if parts[0] == "sandbox" and len(parts) == 2:
        return "unit" if parts[1] in SANDBOX_FREE else "sandbox"
    if parts[0] == "integration":
        # The top-level files share one sandbox per module; a folder is a scenario suite.
        return "sandbox" if len(parts) == 2 else "suite"
    return None


def pytest_collection_modifyitems(config, items):
    for item in items:
        target = target_of(item.path)
        if target is None:
            raise pytest.UsageError(
                "%s is in no test target: put it under tests/unit, tests/sandbox, tests/integration or tests/image "
                "(tests/conftest.py, target_of)" % item.path
            )
        item.add_marker(getattr(pytest.mark, target))


def _say_skipped(terminalreporter, skipped, title, advice):
    if not skipped:
        return
    terminalreporter.write_sep("!", "%d %s" % (sum(skipped.values()), title), red=True, bold=True)
    for reason, count in sorted(skipped.items(), key=lambda kv: -kv[1]):
        terminalreporter.write_line("%5d skipped: %s" % (count, reason), red=True)
    terminalreporter.write_line(advice, red=True)


def _skipped(terminalreporter, targets):
    """{reason: count} of the tests of ``targets`` (markers) this run skipped."""
    reasons = {}
    for report in terminalreporter.stats.get("skipped", []):
        if not any(target in report.keywords for target in targets):
            continue
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reason = reason[len("Skipped: ") :] if reason.startswith("Skipped: ") else reason
        reasons[reason] = reasons.get(reason, 0) + 1
    return reasons
