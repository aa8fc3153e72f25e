"""The firewall backend seam: RayFirewall drives whatever backend the registry names, so a new
backend is its own file plus one registry entry."""

import pytest
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.raygate.cluster.plugins.module_utils.net import firewall_step
from ansible_collections.raygate.cluster.plugins.module_utils.net.firewall_backends import registry
from ansible_collections.raygate.cluster.plugins.module_utils.net.firewall_backends.base import FirewallBackend

WORKER_PORTS = ["8076", "8077", "8266", "8267", "8268", "8269", "10002-10999"]


class Failed(Exception):
    pass


class Module:
    """What RayFirewall needs of AnsibleModule."""

    def __init__(self, params, check_mode):
        self.params = params
        self.check_mode = check_mode
        self._diff = True

    def fail_json(self, msg, **kwargs):
        raise Failed(msg)


class Runner:
    """A host where only ``installed`` ({tool: path}) exists; the step itself must run no command."""

    def __init__(self, installed):
        self.installed = installed

    def which(self, name, extra_dirs=()):
        return self.installed.get(name)

    def run(self, args, data=None):
        raise AssertionError("the step ran %s itself instead of leaving it to the backend" % args)


class Fake(FirewallBackend):
    TOOL = "fakefw"
    calls = []
    problem = None

    def present(self, desired):
        self.calls.append(("present", self.binary, self.check, [e["port"] for e in desired["ports"]]))
        return True, {"before": "", "after": "fake rules\n"}

    def absent(self):
        self.calls.append(("absent", self.binary, self.check, None))
        return False, {"before": "", "after": ""}

    def unusable(self):
        return self.problem

    def result(self):
        return {"fake_zone": "here"}


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setitem(registry.BACKENDS, "fake", Fake)
    monkeypatch.setattr(Fake, "calls", [])
    return Fake


def apply(state="present", check_mode=False, installed=(("fakefw", "/opt/fakefw"),)):
    args = {"state": state, "sources": ["198.18.0.0/24"]}
    checked = ArgumentSpecValidator(firewall_step.ARGUMENT_SPEC).validate(args)
    assert not checked.error_messages, checked.error_messages
    params = dict(checked.validated_parameters, backend="fake")
    step = firewall_step.RayFirewall(Module(params, check_mode), Runner(dict(installed)))
    return step.apply()


def test_a_registered_backend_applies_the_rules(fake):
    result = apply()
    assert fake.calls == [("present", "/opt/fakefw", False, WORKER_PORTS)]
    assert result["backend"] == "fake" and result["changed"] is True
    assert result["fake_zone"] == "here"
    assert result["diff"] == {"before": "", "after": "fake rules\n"}
    assert [r["port"] for r in result["rules"]] == WORKER_PORTS


def test_a_registered_backend_removes_the_rules(fake):
    result = apply(state="absent")
    assert fake.calls == [("absent", "/opt/fakefw", False, None)]
    assert result["backend"] == "fake" and result["changed"] is False
    assert result["ports"] == [] and result["rules"] == []


def test_a_registered_backend_gets_check_mode(fake):
    apply(check_mode=True)
    assert fake.calls == [("present", "/opt/fakefw", True, WORKER_PORTS)]


def test_a_registered_backend_without_its_tool_fails_naming_it(fake):
    with pytest.raises(Failed, match="backend fake was requested but fakefw is not installed on this host"):
        apply(installed={})
    assert fake.calls == []


def test_a_registered_backend_that_cannot_work_here_fails_with_its_reason(fake, monkeypatch):
    monkeypatch.setattr(Fake, "problem", "the fake firewall is switched off")
    with pytest.raises(Failed, match="the fake firewall is switched off"):
        apply()
    assert fake.calls == []


def test_every_registered_backend_implements_the_interface():
    for name, backend in registry.BACKENDS.items():
        assert issubclass(backend, FirewallBackend) and backend.TOOL, name
    assert set(registry.AUTO_ORDER) <= set(registry.BACKENDS)
    assert firewall_step.ARGUMENT_SPEC["backend"]["choices"] == ["auto"] + list(registry.BACKENDS)
