import os
import shutil
import subprocess

import pytest
import yaml
from harness import load_cases, run_case

from ansible_collections.raygate.cluster.plugins.module_utils import files
from ansible_collections.raygate.cluster.plugins.module_utils.net.firewall_backends import nftables
from ansible_collections.raygate.cluster.plugins.modules import ray_firewall

PATH = os.path.join(os.path.dirname(__file__), "ray_firewall.yml")
CASES = load_cases(PATH)
with open(PATH) as fh:
    BY_ID = {case["id"]: case for case in yaml.safe_load(fh)}


@pytest.mark.parametrize("case", CASES)
def test_ray_firewall(case, tmp_path, monkeypatch):
    # The boot cases run as if systemd were the init system here.
    monkeypatch.setattr(files, "systemd_booted", lambda: True)
    # `after`: the state a previous run left (files on this node) comes from really running that case first.
    if "after" in case:
        run_case(BY_ID[case["after"]], ray_firewall.main, tmp_path, monkeypatch)
    run_case(case, ray_firewall.main, tmp_path, monkeypatch)


def test_boot_unit_loads_the_saved_rules_after_debians_nftables():
    unit = nftables.render_boot_unit("/usr/sbin/nft", "/etc/raygate/firewall.nft", "raygate")
    assert "ExecStart=/usr/sbin/nft -f /etc/raygate/firewall.nft\n" in unit
    # Debian's nftables.service may `flush ruleset`: ours must come after it, and before the network.
    assert "After=local-fs.target nftables.service\n" in unit
    assert "Before=network-pre.target shutdown.target\n" in unit
    assert "Type=oneshot\n" in unit and "RemainAfterExit=yes\n" in unit
    assert "WantedBy=sysinit.target\n" in unit


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze is not installed")
def test_boot_unit_passes_systemd_analyze_verify(tmp_path):
    path = tmp_path / "raygate-firewall.service"
    path.write_text(nftables.render_boot_unit(shutil.which("true"), "/etc/raygate/firewall.nft", "raygate"))
    proc = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(path)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "raygate-firewall.service" not in proc.stderr, proc.stderr
