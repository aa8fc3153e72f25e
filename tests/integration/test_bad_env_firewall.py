"""Bad NCCL environment or firewall input stops site.yml in preflight: no file, no rule written."""

import json
import re

import pytest
from conftest import needs_root, playbook

pytestmark = needs_root


def site(extra_vars):
    return playbook("site.yml", "-e", json.dumps(extra_vars))


@pytest.mark.parametrize(
    "extra, expected",
    [
        pytest.param(
            {"raygate_nccl_env": {"NCCL_IB_HCAS": "=mlx5_0"}},
            ["NCCL_IB_HCAS", "did you mean NCCL_IB_HCA"],
            id="unknown-name",
        ),
        pytest.param(
            {"raygate_nccl_env": {"NCCL_IB_TIMEOUT": "twenty"}},
            ["NCCL_IB_TIMEOUT", "twenty"],
            id="malformed-value",
        ),
        pytest.param(
            {"raygate_nccl_env": {"NCCL_IB_DISABLE": 1}},
            ["NCCL_IB_DISABLE"],
            id="ib-disabled-on-ib",
        ),
        pytest.param(
            {"raygate_nccl_env": {"NCCL_NET": "Socket"}},
            ["NCCL_NET", "Socket"],
            id="socket-while-gdr-required",
        ),
        pytest.param(
            {"raygate_nccl_socket_ifname": "=ens5"},
            ["NCCL_SOCKET_IFNAME", "ens5", "eth0"],
            id="interface-filter-matches-nothing",
        ),
        pytest.param(
            {"raygate_nccl_env": {"NCCL_IB_HCA": "=mlx5_9"}},
            ["NCCL_IB_HCA", "mlx5_9", "mlx5_0:1"],
            id="hca-filter-matches-nothing",
        ),
        pytest.param(
            {"raygate_firewall_sources": ["198.18.0.300/24"]},
            ["198.18.0.300/24"],
            id="cidr-does-not-parse",
        ),
        pytest.param(
            {"raygate_firewall_backend": "firewalld"},
            ["firewalld", "raygate_firewall_backend"],
            id="backend-not-installed",
        ),
    ],
)
def test_bad_input_stops_before_any_change(pristine, extra, expected):
    rc, out = site(extra)
    assert rc != 0, out
    assert re.search(r"fatal: \[node[123]\]", out), out  # the host is named
    for text in expected:
        assert text in out, "%r not in the output:\n%s" % (text, out[-3000:])
    # Preflight's check-mode tasks count predicted changes; the pristine fixture checks that
    # no node really changed: no venv, no /etc/raygate, no nft table or ufw rule of ours.
    before = out.split("fatal: [node")[0]
    assert before.rsplit("TASK [", 1)[-1].split("]")[0] == (
        "raygate.cluster.raygate : Check the install, the port plan, the NCCL environment and the firewall of this node"
    )
    # Stopped in preflight (one read-only call per node): the install's call never ran.
    assert "TASK [raygate.cluster.raygate : Install, NCCL environment and firewall, present" not in out, out
