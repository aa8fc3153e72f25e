"""The slurm inventory plugin over scripted scontrol/sinfo answers in the real 22.05 formats."""

import os
import sys

import pytest
import yaml
from ansible import constants as C
from ansible.errors import AnsibleError, AnsibleParserError
from ansible.inventory.data import InventoryData
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.doc_fragments.constructed import ModuleDocFragment
from ansible.template import Templar

from ansible_collections.raygate.cluster.plugins.inventory import slurm as slurm_inventory
from ansible_collections.raygate.cluster.plugins.inventory.slurm import InventoryModule
from ansible_collections.raygate.cluster.plugins.module_utils._runner import CommandRunner

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "module_utils", "gate"))
from test_slurm import SHOW_JOB, SHOW_NODE  # noqa: E402

# The plugin's options as the plugin loader would register them: its DOCUMENTATION plus the
# `constructed` fragment it extends (the loader itself is not set up inside pytest).
OPTIONS = dict(yaml.safe_load(ModuleDocFragment.DOCUMENTATION)["options"])
OPTIONS.update(yaml.safe_load(slurm_inventory.DOCUMENTATION)["options"])


def load(tmp_path, monkeypatch, config, answers, env=None):
    """Parse an inventory file holding ``config`` with scontrol/sinfo answering from ``answers``
    ({argv tuple after the binary: (rc, out, err)}); returns (inventory, commands run)."""
    ran = []

    def fake_run(self, args, **kwargs):
        ran.append((os.path.basename(args[0]),) + tuple(args[1:]))
        assert self.base_env.get("SLURM_CONF") == "/etc/slurm/test.conf"
        return answers[tuple(args[1:])]

    monkeypatch.setattr(CommandRunner, "run", fake_run)
    monkeypatch.setattr(CommandRunner, "which", lambda self, name, extra_dirs=(): "/usr/bin/" + name)
    for key in ("SLURM_JOB_NODELIST", "SLURM_CONF"):
        monkeypatch.delenv(key, raising=False)
    for key, value in (env or {}).items():
        monkeypatch.setenv(key, value)
    path = tmp_path / "slurm.yml"
    path.write_text("plugin: raygate.cluster.slurm\nslurm_conf: /etc/slurm/test.conf\n" + config)
    inventory = InventoryData()
    plugin = InventoryModule()
    # Set by the plugin loader (ansible-core < 2.19 reads _redirected_names when it parses options).
    plugin._load_name = InventoryModule.NAME
    plugin._redirected_names = [InventoryModule.NAME]
    C.config.initialize_plugin_configuration_definitions("inventory", plugin._load_name, OPTIONS)
    loader = DataLoader()
    plugin.templar = Templar(loader=loader)
    assert plugin.verify_file(str(path))
    plugin.parse(inventory, loader, str(path), cache=False)
    return inventory, ran


def groups(inventory):
    return {name: [h.name for h in group.get_hosts()] for name, group in inventory.groups.items()}


NODE = ("-o", "show", "node")


def test_a_jobs_nodes_make_the_cluster_with_addresses(tmp_path, monkeypatch):
    answers = {("-o", "show", "job", "2"): (0, SHOW_JOB, ""), NODE + ("node[1-2]",): (0, SHOW_NODE, "")}
    inventory, ran = load(tmp_path, monkeypatch, "job_id: '2'\n", answers)
    found = groups(inventory)
    assert found["ray_head"] == ["node1"] and found["ray_workers"] == ["node2"]
    assert sorted(found["ray_cluster"]) == ["node1", "node2"]
    node2 = inventory.get_host("node2").vars
    assert node2["ansible_host"] == "198.18.0.12" and node2["raygate_slurm_node_name"] == "node2"
    assert node2["slurm_gres"] == "gpu:8" and node2["slurm_state"] == "IDLE"
    assert ran == [("scontrol", "-o", "show", "job", "2"), ("scontrol",) + NODE + ("node[1-2]",)]


def test_a_job_that_is_not_running_is_refused(tmp_path, monkeypatch):
    pending = SHOW_JOB.replace("JobState=RUNNING", "JobState=PENDING").replace("NodeList=node[1-2]", "NodeList=(null)")
    with pytest.raises(AnsibleError, match="job 2 is PENDING"):
        load(tmp_path, monkeypatch, "job_id: '2'\n", {("-o", "show", "job", "2"): (0, pending, "")})


def test_the_job_nodelist_from_the_environment_is_expanded(tmp_path, monkeypatch):
    answers = {NODE + ("node[2-3]",): (0, SHOW_NODE, "")}
    inventory, ran = load(tmp_path, monkeypatch, "", answers, env={"SLURM_JOB_NODELIST": "node[2-3]"})
    found = groups(inventory)
    assert found["ray_head"] == ["node2"] and found["ray_workers"] == ["node3"]
    assert inventory.get_host("node3").vars["ansible_host"] == "198.18.0.13"


def test_a_partitions_idle_nodes_with_custom_groups_and_no_lookup(tmp_path, monkeypatch):
    sinfo = ("-h", "-N", "-p", "gpu", "-t", "idle,mixed", "-o", "%N")
    config = "partition: gpu\nstates: [idle, mixed]\nlookup_addresses: false\nhead_group: head\nworker_group: rest\n"
    inventory, ran = load(tmp_path, monkeypatch, config, {sinfo: (0, "node2\nnode3\nnode2\n", "")})
    found = groups(inventory)
    assert found["head"] == ["node2"] and found["rest"] == ["node3"]
    assert "ansible_host" not in inventory.get_host("node2").vars
    assert ran == [("sinfo",) + sinfo]


def test_no_source_and_a_bad_hostlist_are_parser_errors(tmp_path, monkeypatch):
    with pytest.raises(AnsibleParserError, match="set job_id, partition or nodelist"):
        load(tmp_path, monkeypatch, "", {})
    with pytest.raises(AnsibleParserError, match="unbalanced"):
        load(tmp_path, monkeypatch, "nodelist: node[1-2\n", {})


def test_scontrol_failing_names_its_message(tmp_path, monkeypatch):
    answers = {("-o", "show", "job", "9"): (1, "", "slurm_load_jobs error: Invalid job id specified\n")}
    with pytest.raises(AnsibleError, match="Invalid job id specified"):
        load(tmp_path, monkeypatch, "job_id: '9'\n", answers)
