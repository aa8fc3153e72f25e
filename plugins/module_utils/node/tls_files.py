# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Ray's mutual TLS on a node (the ``tls`` options): the CA certificate, the node's certificate and
key in ``tls_dir``, the environment that turns TLS on for every Ray process, and whether the
running node still uses the material it is given (a renewed certificate restarts it)."""

from __future__ import annotations

import hashlib
import os

from ansible_collections.raygate.cluster.plugins.module_utils.files import read_text, write_file

CA_FILE = "ca.crt"
CERT_FILE = "node.crt"
KEY_FILE = "node.key"


class TlsFiles:
    """The node's ``tls``, ``tls_dir``, ``tls_ca_cert``, ``tls_cert`` and ``tls_key`` options; fails
    through the node."""

    def __init__(self, node):
        self.node = node
        self.p = node.p

    @property
    def ca_path(self):
        return os.path.join(self.p["tls_dir"], CA_FILE)

    @property
    def cert_path(self):
        return os.path.join(self.p["tls_dir"], CERT_FILE)

    @property
    def key_path(self):
        return os.path.join(self.p["tls_dir"], KEY_FILE)

    def given(self):
        return {
            self.ca_path: self.p["tls_ca_cert"],
            self.cert_path: self.p["tls_cert"],
            self.key_path: self.p["tls_key"],
        }

    def check(self, check_mode):
        """Fails before anything changes on material given in part, or none given and none on the node."""
        if not self.p["tls"]:
            return
        given = [value is not None for value in self.given().values()]
        if any(given) and not all(given):
            self.node.fail("tls: give tls_ca_cert, tls_cert and tls_key together (or none: the files in tls_dir)")
        for value in self.given().values():
            if value is not None and "-----BEGIN " not in value:
                self.node.fail("tls: tls_ca_cert, tls_cert and tls_key must be PEM text (-----BEGIN ...)")
        if not any(given) and not check_mode:
            missing = [path for path in self.given() if not os.path.exists(path)]
            if missing:
                self.node.fail(
                    "tls is on but %s missing on this node and no material was given; give tls_ca_cert, tls_cert "
                    "and tls_key (the role makes them with raygate.cluster.cluster_tls)" % ", ".join(missing)
                )

    def env(self):
        """What turns on Ray's TLS for every process of the node (nothing when off)."""
        if not self.p["tls"]:
            return {}
        return {
            "RAY_USE_TLS": "1",
            "RAY_TLS_SERVER_CERT": self.cert_path,
            "RAY_TLS_SERVER_KEY": self.key_path,
            "RAY_TLS_CA_CERT": self.ca_path,
        }

    def write(self, check_mode):
        """Write the given material (the key readable by the service user's group; never diffed);
        True when it changed."""
        if not self.p["tls"] or self.p["tls_cert"] is None:
            return False
        gid = self.node.run_as.secret_gid()
        changed = False
        for path, text, mode, group in (
            (self.ca_path, self.p["tls_ca_cert"], 0o644, None),
            (self.cert_path, self.p["tls_cert"], 0o644, None),
            (self.key_path, self.p["tls_key"], 0o600 if gid is None else 0o640, gid),
        ):
            changed = write_file(path, _pem(text), mode=mode, check_mode=check_mode, gid=group)[0] or changed
        return changed

    def renewed(self):
        """True when the node is given another CA or certificate than the files Ray started with: a
        renewal (or a new CA), which only a restart of the node's Ray puts to use."""
        if not self.p["tls"] or self.p["tls_cert"] is None:
            return False
        current = (read_text(self.ca_path), read_text(self.cert_path))
        if current[1] is None:
            return False  # no material yet: a first start, judged by the configuration
        return current != (_pem(self.p["tls_ca_cert"]), _pem(self.p["tls_cert"]))

    def digest(self):
        """The CA's and certificate's hash, for the result (None when TLS is off or nothing is there)."""
        if not self.p["tls"]:
            return None
        ca = self.p["tls_ca_cert"] if self.p["tls_ca_cert"] is not None else read_text(self.ca_path)
        cert = self.p["tls_cert"] if self.p["tls_cert"] is not None else read_text(self.cert_path)
        if ca is None or cert is None:
            return None
        return hashlib.sha256((_pem(ca) + _pem(cert)).encode()).hexdigest()[:16]

    def removable(self):
        return [path for path in self.given() if os.path.lexists(path)]

    def remove_empty_dir(self):
        try:
            os.rmdir(self.p["tls_dir"])
        except OSError:
            pass  # absent, or holds files raygate did not write: leave it


def _pem(text):
    return text.strip() + "\n"
