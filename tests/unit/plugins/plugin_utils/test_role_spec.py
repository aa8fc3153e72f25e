"""role_spec: every node's raygate variables checked against the role's argument spec once, on the controller."""

import pytest

from ansible_collections.raygate.cluster.plugins.plugin_utils import role_spec

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def options():
    return role_spec.load_options()


def test_the_spec_is_every_entry_points_options_together(options):
    # main's own, and options only the health gate's and the teardown's entry points list
    wanted = {"raygate_ray_version", "raygate_health_timeout", "raygate_nccl_fabric", "raygate_teardown_purge"}
    assert wanted <= set(options)
    assert options["raygate_health_timeout"]["type"] == "int"


def test_a_valid_inventory_and_a_node_that_sets_nothing_pass(options):
    hostvars = {
        "node1": {"raygate_health_timeout": "30", "raygate_nccl_fabric": "ib", "ansible_host": "198.18.0.11"},
        "node2": {"ansible_host": "198.18.0.12"},
    }
    assert role_spec.check_hosts(options, hostvars, ["node1", "node2"]) == []


def test_a_bad_type_and_a_bad_choice_name_the_variable_the_value_and_the_hosts(options):
    hostvars = {
        "node1": {"raygate_health_timeout": "soon"},
        "node2": {"raygate_health_timeout": "soon", "raygate_nccl_fabric": "ethernet"},
        "node3": {"raygate_health_timeout": 30},
    }
    errors = role_spec.check_hosts(options, hostvars, ["node1", "node2", "node3"])
    assert len(errors) == 2, errors
    timeout = next(e for e in errors if "raygate_health_timeout" in e)
    # the value is named by raygate itself: Ansible's own wording leaves it out on some versions
    assert timeout.startswith('node1, node2: raygate_health_timeout is set to "soon": ')
    assert "ansible-doc -t role" in timeout
    fabric = next(e for e in errors if "raygate_nccl_fabric" in e)
    assert fabric.startswith('node2: raygate_nccl_fabric is set to "ethernet": ') and "efa" in fabric


def test_one_mistake_shared_by_a_thousand_nodes_is_one_message_checked_once(options, monkeypatch):
    hostvars = {"n%d" % i: {"raygate_health_timeout": "soon"} for i in range(1000)}
    calls = []
    validate = role_spec.ArgumentSpecValidator.validate

    def counting(self, parameters, *args, **kwargs):
        calls.append(parameters)
        return validate(self, parameters, *args, **kwargs)

    monkeypatch.setattr(role_spec.ArgumentSpecValidator, "validate", counting)
    errors = role_spec.check_hosts(options, hostvars, list(hostvars))
    assert len(calls) == 1
    assert len(errors) == 1 and errors[0].startswith("n0, n1, n2, n3, n4 and 995 more: ")


def test_two_long_values_alike_in_their_shown_start_are_each_checked(options):
    # A message shows at most 80 characters of a value; the check itself tells the whole values apart.
    start = "x" * 90
    hostvars = {"node1": {"raygate_health_timeout": 30}, "node2": {"raygate_health_timeout": start + "y"}}
    hostvars["node1"]["raygate_nccl_fabric"] = start + "a"
    hostvars["node2"]["raygate_nccl_fabric"] = start + "b"
    errors = role_spec.check_hosts(options, hostvars, ["node1", "node2"])
    fabric = [e for e in errors if "raygate_nccl_fabric is set to" in e]
    # both values are refused, each by its own check, with the shown start cut to one line
    assert len(fabric) == 2 and all("..." in e and len(e.split(": ", 2)[1]) < 120 for e in fabric), fabric
    assert sorted(e.split(": ", 1)[0] for e in fabric) == ["node1", "node2"]


def test_the_options_of_every_role_are_checked(options):
    """An option only a component role reads (the firewall role alone) is checked like the others."""
    assert len(role_spec.spec_files()) >= 9
    assert options["raygate_firewall_state"]["choices"] == ["present", "absent"]
    hostvars = {"node1": {"raygate_firewall_state": "open"}}
    (error,) = role_spec.check_hosts(options, hostvars, ["node1"])
    assert "raygate_firewall_state" in error and "open" in error and "node1" in error
