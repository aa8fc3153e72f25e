# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Run a module's implementation (``ARGUMENT_SPEC`` and ``run(module)``) as a step inside another module.

The step implementations (install_step, node_step, env_step, firewall_step, watch_step, and the gate's
gpu_health_step and nccl_runner) were written against AnsibleModule: they read ``params`` and
``check_mode`` and end with ``exit_json`` or ``fail_json``. ``StepModule`` offers them that surface,
but ends the step with an exception the caller catches instead of ending the process, so one module
call can run several of them.

This file imports no step: a module that runs steps imports only the ones it runs, so its payload
carries only their code. node_steps's steps are in node/steps.py, gate_node_checks's in gate/node_checks.py.
"""

from __future__ import annotations

import copy
import traceback

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.errors import UnsupportedError

# The relations AnsibleModule accepts besides the spec, under the names a step exposes them.
CONSTRAINTS = (
    ("mutually_exclusive", "MUTUALLY_EXCLUSIVE"),
    ("required_together", "REQUIRED_TOGETHER"),
    ("required_one_of", "REQUIRED_ONE_OF"),
    ("required_if", "REQUIRED_IF"),
    ("required_by", "REQUIRED_BY"),
)


class StepEnd(BaseException):
    """How a step ends. A BaseException, like the SystemExit that AnsibleModule's exit_json and
    fail_json raise, so an ``except Exception`` inside a step cannot swallow the step's end."""


class StepExit(StepEnd):
    """The step called exit_json: ``result`` is what the module would have returned."""

    def __init__(self, result):
        super().__init__(result)
        self.result = result


class StepFailed(StepEnd):
    """The step failed: ``step`` (its name), ``msg`` and the other keys it gave fail_json (``kwargs``)."""

    def __init__(self, step, msg, **kwargs):
        super().__init__(step, msg)
        self.step = step
        self.msg = msg
        self.kwargs = kwargs

    def __str__(self):
        return "%s: %s" % (self.step, self.msg)

    @property
    def result(self):
        """The failed step's result, shaped as the module's own failure would be."""
        return dict(self.kwargs, failed=True, msg=self.msg)


class StepModule:
    """The part of AnsibleModule a step implementation uses, for a step run inside ``parent``."""

    def __init__(self, parent, name, params, check_mode):
        self.parent = parent
        self.name = name
        self.params = params
        self.check_mode = check_mode
        self._diff = parent._diff

    def warn(self, warning):
        self.parent.warn("%s: %s" % (self.name, warning))

    def exit_json(self, **kwargs):
        kwargs.setdefault("changed", False)
        raise StepExit(kwargs)

    def fail_json(self, msg, **kwargs):
        raise StepFailed(self.name, msg, **kwargs)


def step_result(answer, name):
    """A step's own answer, from either shape a task registers it in: a node_steps call (the step's
    answer under ``step_results``) or the step's own module (the answer itself). No answer (the task
    never ran) reads as a skipped one, so ``is skipped`` holds for it."""
    if not isinstance(answer, dict):
        return {"skipped": True}
    steps = answer.get("step_results")
    if isinstance(steps, dict) and name in steps:
        return steps[name]
    return answer


def no_log_values(spec, params):
    """The text of every value ``params`` holds for a ``no_log`` option of ``spec`` (suboptions too).

    AnsibleModule masks these in everything it returns; a step's parent must learn them itself.
    """
    found = set()
    for key, option in spec.items():
        value = (params or {}).get(key)
        if value is None:
            continue
        if option.get("no_log"):
            if isinstance(value, (list, tuple, set)):
                found.update(str(v) for v in value if v not in (None, ""))
            elif isinstance(value, dict):
                found.update(str(v) for v in value.values() if v not in (None, ""))
            elif value != "":
                found.add(str(value))
        sub = option.get("options")
        if sub:
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, dict):
                    found.update(no_log_values(sub, item))
    return found


def validate(parent_module, name, impl, args):
    """``args`` checked against ``impl.ARGUMENT_SPEC`` (defaults applied, types coerced).

    The spec's no_log values join ``parent_module.no_log_values``, so the parent's result and
    its messages mask them. Raises StepFailed naming the step and every problem.
    """
    spec = copy.deepcopy(impl.ARGUMENT_SPEC)  # defaults are handed out by reference: keep the spec's own
    relations = {key: getattr(impl, attr) for key, attr in CONSTRAINTS if getattr(impl, attr, None)}
    checked = ArgumentSpecValidator(spec, **relations).validate(args or {})
    parent_module.no_log_values.update(no_log_values(spec, checked.validated_parameters))
    problems = []
    for error in checked.errors.errors:
        if isinstance(error, UnsupportedError):
            problems.append("unsupported parameters: %s" % error.error_message)
        else:
            problems.append(error.error_message)
    if problems:
        raise StepFailed(name, "invalid options: " + "; ".join(problems))
    return checked.validated_parameters


def run_step(parent_module, name, impl, args, check_mode):
    """Run ``impl.run`` on the validated ``args`` and return the step's result dict.

    Raises StepFailed when the options are invalid, when the step fails, or when it raises
    an unexpected exception (then with the traceback under ``exception``).
    """
    params = validate(parent_module, name, impl, args)
    module = StepModule(parent_module, name, params, check_mode)
    try:
        impl.run(module)
    except StepExit as done:
        return done.result
    except StepFailed:
        raise
    except Exception as exc:
        raise StepFailed(name, "%s: %s" % (type(exc).__name__, exc), exception=traceback.format_exc()) from exc
    raise StepFailed(name, "the step returned without a result")


def step_diffs(name, result):
    """The step's diff(s) as a list, each with a header naming the step where it has none."""
    diff = result.get("diff")
    if not diff:
        return []
    diffs = []
    for item in diff if isinstance(diff, list) else [diff]:
        item = dict(item)
        item.setdefault("before_header", name)
        item.setdefault("after_header", name)
        diffs.append(item)
    return diffs
