"""health.yml's validation play asks only for what the gate uses (issue 29, item 5).

The first play of playbooks/health.yml and of playbooks/site.yml, each run alone by ansible-playbook
on the controller (localhost only, no node touched) over an inventory that sets raygate_num_gpus but
neither raygate_num_cpus nor raygate_memory: the gate accepts it, site.yml still refuses it.
"""

import os

import yaml
from role_probe import ROOT, run_playbook

HOSTS = {"head1": "10.0.0.1", "worker1": "10.0.0.2"}


def inventory(**extra):
    node = dict({"raygate_num_gpus": 8}, **extra)
    return {
        "all": {
            "children": {
                "ray_head": {"hosts": {"head1": dict(node, ansible_host=HOSTS["head1"])}},
                "ray_workers": {"hosts": {"worker1": dict(node, ansible_host=HOSTS["worker1"])}},
            }
        }
    }


def validation_play(playbook):
    """The playbook's first play (the controller-only validation), as written in playbooks/."""
    with open(os.path.join(ROOT, "playbooks", playbook)) as fh:
        play = yaml.safe_load(fh)[0]
    assert play["hosts"] == "localhost" and play["connection"] == "local", play
    return play


def run_validation(tmp_path, playbook, inv):
    # role_probe runs TMP/site.yml over TMP/inventory.yml: the one play is written there.
    (tmp_path / "site.yml").write_text(yaml.safe_dump([validation_play(playbook)]))
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inv))
    proc = run_playbook(tmp_path)
    return proc.returncode, proc.stdout + proc.stderr


def test_health_validates_for_the_gate_without_ray_resource_amounts(tmp_path):
    assert validation_play("health.yml")["vars"] == {"_raygate_validate_purpose": "gate"}
    rc, out = run_validation(tmp_path, "health.yml", inventory())
    assert rc == 0, out
    assert "raygate_num_cpus" not in out and "raygate_memory" not in out


def test_health_still_refuses_a_bad_gpu_count_and_a_bad_amount_it_is_given(tmp_path):
    rc, out = run_validation(tmp_path, "health.yml", inventory(raygate_num_gpus="eight", raygate_memory=0))
    assert rc != 0, out
    assert "host head1: raygate_num_gpus='eight' must be an integer >= 0" in out
    assert "host worker1: raygate_memory=0 must be an integer >= 1" in out
    assert "raygate_num_cpus" not in out


def test_site_still_needs_cpu_and_memory_amounts(tmp_path):
    rc, out = run_validation(tmp_path, "site.yml", inventory())
    assert rc != 0, out
    for host in HOSTS:
        assert "host %s: raygate_num_cpus=None must be an integer >= 1" % host in out
        assert "host %s: raygate_memory=None must be an integer >= 1" % host in out
