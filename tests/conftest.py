"""Make the checkout importable as ansible_collections.raygate.cluster for pytest."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(ROOT, ".build", "collections")
LINK = os.path.join(COLLECTIONS, "ansible_collections", "raygate", "cluster")

if not os.path.exists(LINK):
    os.makedirs(os.path.dirname(LINK), exist_ok=True)
    os.symlink("../../../..", LINK)
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)


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
    """Say loudly, at the end of every run, when the real public outputs were not there to test."""
    if os.path.isdir(SHARED_SAMPLES):
        return
    terminalreporter.write_sep("!", "../shared/samples IS MISSING", red=True, bold=True)
    missing = os.path.abspath(SHARED_SAMPLES)
    terminalreporter.write_line(
        "The parser tests over real nvidia-smi, dcgmi, nccl-tests, ibstat, fi_info and kernel-log outputs "
        "were SKIPPED: %s does not exist. Clone next to the shared folder (CI has it)." % missing,
        red=True,
    )
