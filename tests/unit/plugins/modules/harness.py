"""Run a module's main() with scripted commands, the way the house style tests modules.

A case lists the module's arguments, check mode, and the exact ordered commands it must run,
each with rc/out/err and an optional filesystem effect. Any command that is not the next
expected one fails the test, and so does an expected command that never ran.
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
        ran.append(args)
        apply_effect(step.get("effect", {}), names)
        return step.get("rc", 0), step.get("out", ""), step.get("err", "")

    monkeypatch.setattr(CommandRunner, "run", fake_run)
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", _exit)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", _fail)
    args = expand(dict(case["args"]), names)
    if case.get("check_mode"):
        args["_ansible_check_mode"] = True
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
    for path in expand(case.get("exists", []), names):
        assert os.path.lexists(path), path
    for path in expand(case.get("absent", []), names):
        assert not os.path.lexists(path), path
    return result
