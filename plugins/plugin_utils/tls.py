# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The cluster's TLS material on the controller: a CA made once (or the user's own), and for each
node a key and a certificate with its address in the subject alternative names, re-issued when it
expires within the renewal window, names other addresses, or was signed by another CA.

Ray's mutual TLS (RAY_USE_TLS) uses one certificate per node for its servers and its clients
alike, so each certificate is good for both. Keys are ECDSA P-256: a thousand nodes' keys take
about a second to make, where RSA 2048 takes minutes. Uses the ``cryptography`` library that
ansible-core itself requires: no new dependency on the controller, none on the nodes.
"""

from __future__ import annotations

import datetime
import ipaddress
import os

from ansible_collections.raygate.cluster.plugins.module_utils.files import write_file

try:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
except ImportError as exc:  # ansible-core requires it; a bare sanity import sandbox lacks it
    CRYPTOGRAPHY_ERROR = exc
else:
    CRYPTOGRAPHY_ERROR = None

CA_CERT = "ca.crt"
CA_KEY = "ca.key"
NODES_DIR = "nodes"
ORG = "raygate"


class TlsError(Exception):
    """The TLS material cannot be made or read (a bad CA file, a key that does not match)."""


def _now():
    return datetime.datetime.now(datetime.timezone.utc)


def not_after(cert):
    """The certificate's end of validity, timezone-aware (cryptography before 42 has only the naive one)."""
    value = getattr(cert, "not_valid_after_utc", None)
    if value is None:
        value = cert.not_valid_after.replace(tzinfo=datetime.timezone.utc)
    return value


def fingerprint(cert):
    return cert.fingerprint(hashes.SHA256()).hex()


def _pem_key(key):
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _pem_cert(cert):
    return cert.public_bytes(serialization.Encoding.PEM)


def write_private(path, data, mode):
    """Write ``data`` (PEM bytes) to ``path`` atomically, its mode set before it appears, in a
    directory only its owner may enter."""
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    write_file(path, data.decode("ascii"), mode=mode)


def load_cert(path):
    try:
        with open(path, "rb") as fh:
            return x509.load_pem_x509_certificate(fh.read())
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise TlsError("%s is not a PEM certificate: %s" % (path, exc)) from exc


def load_key(path):
    try:
        with open(path, "rb") as fh:
            return serialization.load_pem_private_key(fh.read(), password=None)
    except FileNotFoundError:
        return None
    except (ValueError, TypeError) as exc:
        raise TlsError("%s is not an unencrypted PEM private key: %s" % (path, exc)) from exc


def _name(common_name):
    return x509.Name(
        [x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORG), x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    )


def _same_key(cert, key):
    pub = serialization.PublicFormat.SubjectPublicKeyInfo
    enc = serialization.Encoding.DER
    return cert.public_key().public_bytes(enc, pub) == key.public_key().public_bytes(enc, pub)


class Ca:
    """A CA's certificate and key."""

    def __init__(self, cert, key, cert_path, made):
        self.cert = cert
        self.key = key
        self.cert_path = cert_path
        self.made = made

    def describe(self):
        return {
            "cert": self.cert_path,
            "fingerprint": fingerprint(self.cert),
            "not_after": not_after(self.cert).isoformat(),
            "created": self.made,
        }


def need_cryptography():
    """Fails with the fix when the controller's Python has no cryptography library."""
    if CRYPTOGRAPHY_ERROR is not None:
        raise TlsError(
            "the Python cryptography library is missing on the controller (%s); install it in the Python that "
            "runs ansible (pip install cryptography), or set raygate_tls: false" % CRYPTOGRAPHY_ERROR
        )


def ensure_ca(directory, days, name="raygate cluster CA"):
    """The CA in ``directory`` (ca.crt, ca.key 0600), made when it is not there."""
    need_cryptography()
    cert_path, key_path = os.path.join(directory, CA_CERT), os.path.join(directory, CA_KEY)
    cert, key = load_cert(cert_path), load_key(key_path)
    if cert is not None and key is not None:
        if not _same_key(cert, key):
            raise TlsError(
                "%s and %s do not belong together (the key does not match the certificate)" % (cert_path, key_path)
            )
        return Ca(cert, key, cert_path, False)
    if cert is not None or key is not None:
        raise TlsError(
            "%s has only one of ca.crt and ca.key: restore the other, or remove both to make a new CA "
            "(every node then gets a new certificate)" % directory
        )
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name(
        [x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORG), x509.NameAttribute(NameOID.COMMON_NAME, name)]
    )
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                key_encipherment=False, data_encipherment=False, key_agreement=False,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    write_private(key_path, _pem_key(key), 0o600)
    write_private(cert_path, _pem_cert(cert), 0o644)
    return Ca(cert, key, cert_path, True)


def user_ca(cert_path, key_path):
    """The user's own CA (bring your own): both files must be there and belong together."""
    need_cryptography()
    cert, key = load_cert(cert_path), load_key(key_path)
    if cert is None or key is None:
        raise TlsError("the CA given (%s, %s) is missing on the controller" % (cert_path, key_path))
    if not _same_key(cert, key):
        raise TlsError("the CA key %s does not match its certificate %s" % (key_path, cert_path))
    return Ca(cert, key, cert_path, False)


def san_of(cert):
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set(), set()
    return set(str(ip) for ip in ext.get_values_for_type(x509.IPAddress)), set(ext.get_values_for_type(x509.DNSName))


def renewal_reason(cert, key, ca, ips, renew_days):
    """Why the node's certificate must be issued again (None when it is good)."""
    if cert is None or key is None:
        return "no certificate yet"
    if not _same_key(cert, key):
        return "the key does not match the certificate"
    if cert.issuer != ca.cert.subject:
        return "signed by another CA"
    verify = getattr(cert, "verify_directly_issued_by", None)  # cryptography 40 and later
    if verify is not None:
        try:
            verify(ca.cert)
        except Exception:  # any failure to verify means: not this CA's (a new CA of the same name)
            return "signed by another CA"
    if not _has_authority_key_id(cert):
        return "it has no Authority Key Identifier, which strict verification (Python 3.13) requires"
    have_ips, have_names = san_of(cert)
    if not set(ips) <= have_ips or not set(ips) <= have_names:
        return "its addresses changed (it names %s)" % (", ".join(sorted(have_ips)) or "none")
    left = not_after(cert) - _now()
    if left < datetime.timedelta(days=renew_days):
        return "it expires on %s, within %d days" % (not_after(cert).date().isoformat(), renew_days)
    return None


def issue(ca, name, ips, days):
    """A new key and a certificate for node ``name`` at ``ips`` (also localhost): (cert, key)."""
    key = ec.generate_private_key(ec.SECP256R1())
    # Ray's clients check the server's address against the certificate: each address as an IP
    # entry and as a name (Ray's own test certificates carry it as a name), and loopback.
    alt = [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips] + [x509.DNSName(ip) for ip in ips]
    alt += [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("127.0.0.1"), x509.DNSName("localhost")]
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(min(now + datetime.timedelta(days=days), not_after(ca.cert)))
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
        # Key identifiers: OpenSSL's strict verification (Python 3.13's default context) refuses a
        # certificate without the Authority Key Identifier ("Missing Authority Key Identifier").
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(ca.key, hashes.SHA256())
    )  # fmt: skip
    return cert, key


def _has_authority_key_id(cert):
    try:
        cert.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier)
    except x509.ExtensionNotFound:
        return False
    return True


def ensure_node(directory, ca, name, ips, days, renew_days):
    """The node's certificate and key in ``directory``/nodes, issued again when renewal_reason
    says so; returns what the result says of it (``issued``: this run made it, and why)."""
    base = os.path.join(directory, NODES_DIR, name)
    cert_path, key_path = base + ".crt", base + ".key"
    cert, key = load_cert(cert_path), load_key(key_path)
    reason = renewal_reason(cert, key, ca, ips, renew_days)
    if reason is not None:
        cert, key = issue(ca, name, ips, days)
        write_private(key_path, _pem_key(key), 0o600)
        write_private(cert_path, _pem_cert(cert), 0o644)
    return {
        "cert": cert_path,
        "key": key_path,
        "not_after": not_after(cert).isoformat(),
        "issued": reason is not None,
        "reason": reason,
    }
