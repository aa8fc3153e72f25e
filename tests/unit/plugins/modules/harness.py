"""Run a module's main() with scripted commands, the way the house style tests modules.

A case lists the module's arguments, check mode, and the exact ordered commands it must run,
each with rc/out/err and an optional filesystem effect. Any command that is not the next
expected one fails the test, and so does an expected command that never ran.

Optional keys (a case without them runs exactly as before):
- ``which``: {binary name: path or null}; CommandRunner.which answers from this map only
  (names not listed are not installed), so a case does not depend on the test machine.
- ``diff_mode: true``: run the module in diff mode.
- per command, ``data``: the exact stdin the command must get; ``data_contains``: substrings of it.
- per command, ``check``: a callable given the command's arguments and keyword arguments while it
  "runs" (for what exists only then, such as a temporary file the command is pointed at).
- ``expect_contains``: {dotted.key: [substrings]}: each substring is in that result value.
- ``warnings_contain``: substrings each found in one of the module's warnings;
  ``no_warnings: true``: the module warned about nothing.
Values are expanded with str.format, so a literal brace is written ``{{`` or ``}}``.
"""

import json
import os

import pytest
import yaml
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.raygate.cluster.plugins.module_utils._runner import CommandRunner


class ModuleExit(Exception):
    def __init__(self, result):
        super().__init__(json.dumps(result, default=str))
        self.result = result


def _exit(self, **kwargs):
    kwargs.setdefault("changed", False)
    raise ModuleExit(kwargs)


def _fail(self, msg, **kwargs):
    kwargs.update(failed=True, msg=msg)
    raise ModuleExit(kwargs)


def expand(value, names):
    if isinstance(value, str):
        return value.format(**names)
    if isinstance(value, list):
        return [expand(v, names) for v in value]
    if isinstance(value, dict):
        return {k: expand(v, names) for k, v in value.items()}
    return value


def apply_effect(effect, names):
    for path in effect.get("mkdir", []):
        os.makedirs(expand(path, names), exist_ok=True)
    for link, target in effect.get("symlink", {}).items():
        os.symlink(expand(target, names), expand(link, names))
    for path, content in effect.get("write", {}).items():
        with open(expand(path, names), "w") as fh:
            fh.write(expand(content, names))


def fake_which(installed):
    """CommandRunner.which answering from ``installed`` ({name or full path: path or None}) the way
    the real one searches: the name (on PATH), then the name in each of ``extra_dirs``."""

    def which(self, name, extra_dirs=()):
        for key in [name] + [os.path.join(d, name) for d in extra_dirs]:
            if installed.get(key):
                return installed[key]
        return None

    return which


def fake_venv(tmp_path):
    """An installed-looking virtualenv under TMP_PATH/venv (its `ray` an empty script); that `ray`'s path."""
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "ray").write_text("#!/bin/sh\n")
    (venv / "ray").chmod(0o755)
    return str(venv / "ray")


def load_cases(path):
    with open(path) as fh:
        cases = yaml.safe_load(fh)
    return [pytest.param(case, id=case["id"]) for case in cases]


def run_case(case, main, tmp_path, monkeypatch):
    names = {"tmp": str(tmp_path)}
    names.update({k: expand(v, names) for k, v in case.get("names", {}).items()})
    apply_effect(case.get("setup", {}), names)
    expected = [expand(c, names) for c in case.get("commands", [])]
    ran = []

    def fake_run(self, args, **kwargs):
        args = [str(a) for a in args]
        assert expected, "unexpected command %s (no more expected)" % args
        step = expected.pop(0)
        assert args == step["cmd"], "command %d differs" % len(ran)
        if "data" in step:
            assert kwargs.get("data") == step["data"], "stdin of command %d differs" % len(ran)
        for needle in step.get("data_contains", []):
            assert needle in (kwargs.get("data") or ""), "stdin of command %d lacks %r" % (len(ran), needle)
        if "check" in step:
            step["check"](args, kwargs)
        ran.append(args)
        apply_effect(step.get("effect", {}), names)
        return step.get("rc", 0), step.get("out", ""), step.get("err", "")

    monkeypatch.setattr(CommandRunner, "run", fake_run)
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", _exit)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", _fail)
    if "which" in case:
        installed = expand(case["which"], names)
        monkeypatch.setattr(CommandRunner, "which", fake_which(installed))
    warnings = []
    if "warnings_contain" in case or "no_warnings" in case:
        monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, warning, **kw: warnings.append(warning))
    args = expand(dict(case["args"]), names)
    if case.get("check_mode"):
        args["_ansible_check_mode"] = True
    if case.get("diff_mode"):
        args["_ansible_diff"] = True
    with patch_module_args(args), pytest.raises(ModuleExit) as exc:
        main()
    result = exc.value.result
    assert expected == [], "expected commands never ran: %s" % expected
    want = expand(case.get("expect", {}), names)
    for key, value in want.items():
        if key == "msg_contains":
            for needle in value if isinstance(value, list) else [value]:
                assert needle in result.get("msg", ""), result
        else:
            assert result.get(key) == value, "%s: %r != %r" % (key, result.get(key), value)
    for dotted, needles in expand(case.get("expect_contains", {}), names).items():
        value = result
        for part in dotted.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        for needle in needles if isinstance(needles, list) else [needles]:
            assert needle in str(value), "%s lacks %r: %r" % (dotted, needle, value)
    for needle in expand(case.get("warnings_contain", []), names):
        assert any(needle in w for w in warnings), "no warning contains %r: %r" % (needle, warnings)
    if case.get("no_warnings"):
        assert warnings == [], warnings
    for path in expand(case.get("exists", []), names):
        assert os.path.lexists(path), path
    for path in expand(case.get("absent", []), names):
        assert not os.path.lexists(path), path
    return result
