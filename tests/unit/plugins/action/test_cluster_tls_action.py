"""cluster_tls: a CA made once, a certificate per node that names its address, kept on a re-run,
issued again when it nears its end, moves address or belongs to another CA; the user's own CA."""

import datetime
import ipaddress
import os
import stat

import pytest
from action_harness import plugin_for
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from ansible_collections.raygate.cluster.plugins.action import cluster_tls as action
from ansible_collections.raygate.cluster.plugins.plugin_utils import tls

NODES = [{"name": "node1", "ip": "198.18.0.11"}, {"name": "node2", "ip": "198.18.0.12"}]


def run_action(args, check_mode=False):
    plugin = plugin_for(action, "raygate.cluster.cluster_tls", args, check_mode)
    return plugin.run(task_vars={})


def cert_of(path):
    with open(path, "rb") as fh:
        return x509.load_pem_x509_certificate(fh.read())


@pytest.mark.parametrize("check_mode", [False, True])
def test_first_run_makes_the_ca_and_every_node_and_a_rerun_changes_nothing(tmp_path, check_mode):
    res = run_action({"dir": str(tmp_path), "nodes": NODES}, check_mode)
    assert not res.get("failed"), res
    assert res["changed"] is True and res["ca"]["created"] is True and res["issued"] == ["node1", "node2"]
    assert stat.S_IMODE(os.stat(tmp_path / "ca.key").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(tmp_path / "nodes" / "node1.key").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(tmp_path / "nodes").st_mode) == 0o700
    cert = cert_of(tmp_path / "nodes" / "node2.crt")
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("198.18.0.12") in san.get_values_for_type(x509.IPAddress)
    assert "198.18.0.12" in san.get_values_for_type(x509.DNSName)
    assert cert.issuer == cert_of(tmp_path / "ca.crt").subject
    cert.verify_directly_issued_by(cert_of(tmp_path / "ca.crt"))
    assert isinstance(cert.public_key(), ec.EllipticCurvePublicKey)
    # No key material in the result.
    assert "PRIVATE KEY" not in str(res)
    before = (tmp_path / "nodes" / "node1.crt").read_bytes()
    res = run_action({"dir": str(tmp_path), "nodes": NODES})
    assert res["changed"] is False and res["issued"] == [] and res["ca"]["created"] is False
    assert (tmp_path / "nodes" / "node1.crt").read_bytes() == before


def test_a_node_that_moved_gets_a_new_certificate_alone(tmp_path):
    run_action({"dir": str(tmp_path), "nodes": NODES})
    moved = [NODES[0], {"name": "node2", "ip": "198.18.0.22"}]
    res = run_action({"dir": str(tmp_path), "nodes": moved})
    assert res["issued"] == ["node2"]
    assert res["nodes"]["node2"]["reason"] == "its addresses changed (it names 127.0.0.1, 198.18.0.12)"


def test_a_certificate_near_its_end_is_renewed(tmp_path):
    res = run_action({"dir": str(tmp_path), "nodes": NODES, "cert_days": 20, "renew_days": 10})
    assert res["issued"] == ["node1", "node2"]
    # 20 days left, renewed within 30: both are issued again, for another 365 days.
    res = run_action({"dir": str(tmp_path), "nodes": NODES, "renew_days": 30})
    assert res["issued"] == ["node1", "node2"]
    assert "within 30 days" in res["nodes"]["node1"]["reason"]
    end = datetime.datetime.fromisoformat(res["nodes"]["node1"]["not_after"])
    assert end - datetime.datetime.now(datetime.timezone.utc) > datetime.timedelta(days=360)


def test_a_certificate_without_an_authority_key_identifier_is_issued_again(tmp_path):
    # Python 3.13's default TLS context verifies strictly and refuses such a certificate (found by
    # CI's Debian 13 units): one made by an earlier build is replaced, and the new one has it.
    run_action({"dir": str(tmp_path), "nodes": NODES[:1]})
    ca = tls.ensure_ca(str(tmp_path), 3650)
    cert, key = tls.issue(ca, "node1", ["198.18.0.11"], 365)
    builder = x509.CertificateBuilder().subject_name(cert.subject).issuer_name(cert.issuer)
    builder = builder.public_key(key.public_key()).serial_number(cert.serial_number)
    builder = builder.not_valid_before(cert.not_valid_before_utc).not_valid_after(cert.not_valid_after_utc)
    for ext in cert.extensions:
        if not isinstance(ext.value, x509.AuthorityKeyIdentifier):
            builder = builder.add_extension(ext.value, ext.critical)
    old = builder.sign(ca.key, tls.hashes.SHA256())
    tls.write_private(str(tmp_path / "nodes" / "node1.key"), tls._pem_key(key), 0o600)
    tls.write_private(str(tmp_path / "nodes" / "node1.crt"), tls._pem_cert(old), 0o644)
    res = run_action({"dir": str(tmp_path), "nodes": NODES[:1]})
    assert res["issued"] == ["node1"] and "Authority Key Identifier" in res["nodes"]["node1"]["reason"]
    new = cert_of(tmp_path / "nodes" / "node1.crt")
    assert new.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value.key_identifier == (
        cert_of(tmp_path / "ca.crt").extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value.digest
    )


def test_a_new_ca_reissues_every_node(tmp_path):
    run_action({"dir": str(tmp_path), "nodes": NODES})
    os.unlink(tmp_path / "ca.crt")
    os.unlink(tmp_path / "ca.key")
    res = run_action({"dir": str(tmp_path), "nodes": NODES})
    assert res["ca"]["created"] is True and res["issued"] == ["node1", "node2"]
    assert res["nodes"]["node1"]["reason"] == "signed by another CA"


def test_half_a_ca_fails_and_changes_nothing(tmp_path):
    run_action({"dir": str(tmp_path), "nodes": NODES})
    os.unlink(tmp_path / "ca.key")
    before = (tmp_path / "nodes" / "node1.crt").read_bytes()
    res = run_action({"dir": str(tmp_path), "nodes": NODES})
    assert res["failed"] is True and "has only one of ca.crt and ca.key" in res["msg"]
    assert (tmp_path / "nodes" / "node1.crt").read_bytes() == before


def test_the_users_own_ca_signs_the_nodes(tmp_path):
    own = tls.ensure_ca(str(tmp_path / "pki"), 100, name="site CA")
    args = {
        "dir": str(tmp_path / "ray"),
        "nodes": NODES,
        "ca_cert": own.cert_path,
        "ca_key": str(tmp_path / "pki" / "ca.key"),
    }
    res = run_action(args)
    assert res["issued"] == ["node1", "node2"] and res["ca"]["cert"] == own.cert_path
    assert not (tmp_path / "ray" / "ca.key").exists()
    cert_of(tmp_path / "ray" / "nodes" / "node1.crt").verify_directly_issued_by(own.cert)
    # A node certificate never outlives the CA that signed it.
    assert tls.not_after(cert_of(tmp_path / "ray" / "nodes" / "node1.crt")) <= tls.not_after(own.cert)
    res = run_action(dict(args, ca_key=None))
    assert res["failed"] is True and "give both ca_cert and ca_key" in res["msg"]


@pytest.mark.parametrize(
    "over,needle",
    [
        ({"renew_days": 400}, "renew_days (400) must be 0 or more and less than cert_days (365)"),
        ({"cert_days": 0, "renew_days": 0}, "cert_days must be at least 1"),
        ({"nodes": [{"name": "node1"}]}, "each of nodes needs a name and an ip"),
    ],
)
def test_bad_arguments_fail_before_anything_is_made(tmp_path, over, needle):
    res = run_action(dict({"dir": str(tmp_path / "tls"), "nodes": NODES}, **over))
    assert res["failed"] is True and needle in res["msg"]
    assert not (tmp_path / "tls").exists()


def test_a_controller_without_cryptography_is_told_the_fix(tmp_path, monkeypatch):
    monkeypatch.setattr(tls, "CRYPTOGRAPHY_ERROR", ImportError("No module named 'cryptography'"))
    res = run_action({"dir": str(tmp_path / "tls"), "nodes": NODES})
    assert res["failed"] is True and "pip install cryptography" in res["msg"] and "raygate_tls: false" in res["msg"]
    assert not (tmp_path / "tls").exists()
