"""Unit tests for the step_args lookup (plugins/lookup/step_args.py): it templates each variable a
step reads in the task's context (ansible-core 2.16 hands them over untemplated), reads Ansible's own
as they are, reads a controller file only where the step needs it, and turns errors into Ansible's."""

import pytest
from ansible import template as ansible_template
from ansible.errors import AnsibleError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.raygate.cluster.plugins.lookup.step_args import LookupModule
from ansible_collections.raygate.cluster.plugins.plugin_utils import step_args as sa

# 2.19+ templates only trusted strings (vars files are); 2.16 all of them.
trust = getattr(ansible_template, "trust_as_template", lambda value: value)


def run(step, variables):
    variables = dict(variables)
    templar = Templar(loader=DataLoader(), variables=variables)
    return LookupModule(loader=templar._loader, templar=templar).run([step], variables=variables)[0]


def test_each_variable_is_templated_in_the_tasks_context():
    variables = {
        "raygate_supervisor": trust("{{ _sup }}"),
        "_sup": "systemd",
        "raygate_node_check_dir": "/opt/check",
        "raygate_watch_state_dir": trust("{{ '/var/lib/' ~ 'raygate' }}"),
        "raygate_watch_textfile": "",
    }
    assert run("watch_query", variables) == {
        "state": "query",
        "supervisor": "systemd",
        "script": "/opt/check/raygate_node_watch.py",
        "state_dir": "/var/lib/raygate",
        "textfile": "",
    }


@pytest.mark.parametrize("run_tags,expected", [(["all"], True), (["health"], False)])
def test_ansibles_own_variables_are_read_as_they_are(run_tags, expected):
    variables = {"ansible_run_tags": run_tags, "ansible_skip_tags": [], "raygate_nccl_manage": trust("{{ 1 == 1 }}")}
    variables["raygate_firewall_manage"] = False
    assert run("configure", variables)["env"] is expected


def test_an_unknown_step_is_an_ansible_error():
    with pytest.raises(AnsibleError, match="no step 'nope'"):
        run("nope", {})


def test_a_start_with_tls_reads_the_files_through_the_file_lookup(tmp_path, monkeypatch):
    (tmp_path / "ca.crt").write_text("CA\n")
    (tmp_path / "h1.crt").write_text("CERT\n")
    calls = []

    def node_args(v, read):
        calls.append((read(str(tmp_path / "ca.crt")), read(str(tmp_path / "h1.crt"))))
        return {}

    monkeypatch.setitem(sa.STEPS, "ray_node", node_args)
    run("ray_node", {})
    assert calls == [("CA", "CERT")]
