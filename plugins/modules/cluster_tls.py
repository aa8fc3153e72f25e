#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: cluster_tls
short_description: Make and keep a Ray cluster's TLS certificates on the controller
version_added: 0.5.0
description:
  - Keeps the material of Ray's mutual TLS (C(RAY_USE_TLS)) for a cluster in O(dir) on the
    controller, as raygate keeps the cluster's auth token - a CA, and a key and certificate for each node.
  - The CA (C(ca.crt), C(ca.key) mode 0600) is made once, unless O(ca_cert) and O(ca_key) name your own.
  - Each node gets C(nodes/<name>.key) (0600) and C(nodes/<name>.crt), an ECDSA P-256 key and a
    certificate for both server and client use, with the node's address (as an IP address and as a
    name), C(127.0.0.1) and C(localhost) in its subject alternative names.
  - A node's certificate is issued again when it expires within O(renew_days), names other addresses
    than the node's, does not match its key, or was signed by another CA. Otherwise nothing changes,
    so a re-run changes nothing.
  - Never returns or prints a key. M(raygate.cluster.ray_node) writes the files on the node.
  - The files are made on the controller in check mode too (they are the controller's, as the token is),
    so a check run predicts the nodes' changes exactly.
  - This is an action plugin; it runs on the controller only.
requirements:
  - the Python C(cryptography) library on the controller (ansible-core requires it)
author:
  - raygate maintainers (@raygate)
extends_documentation_fragment:
  - raygate.cluster.attributes
attributes:
  check_mode:
    support: full
    details: The controller's files are made in check mode too; nothing on a node changes.
  diff_mode:
    support: none
options:
  dir:
    description: The controller's directory for the CA and the nodes' keys and certificates (mode 0700).
    type: path
    required: true
  nodes:
    description: The cluster's nodes, each a dict with C(name) (the inventory name) and C(ip) (its Ray address).
    type: list
    elements: dict
    required: true
  ca_cert:
    description: Your own CA's certificate (PEM) on the controller; with O(ca_key), used instead of raygate's.
    type: path
  ca_key:
    description: Your own CA's unencrypted private key (PEM) on the controller.
    type: path
  ca_days:
    description: Days a CA made by raygate is valid.
    type: int
    default: 3650
  cert_days:
    description: Days a node certificate is valid (never beyond the CA's own end).
    type: int
    default: 365
  renew_days:
    description: A node certificate that expires within this many days is issued again; less than O(cert_days).
    type: int
    default: 30
"""

EXAMPLES = r"""
- name: The cluster's CA and node certificates, kept beside the inventory
  raygate.cluster.cluster_tls:
    dir: "{{ inventory_dir }}/.raygate_tls"
    nodes: "{{ hostvars['localhost']['raygate_validated']['cluster']['nodes'] }}"  # [{name, ip}, ...]
  delegate_to: localhost
  run_once: true

- name: With your own CA
  raygate.cluster.cluster_tls:
    dir: /srv/pki/ray
    ca_cert: /srv/pki/ca.crt
    ca_key: /srv/pki/ca.key
    nodes: [{name: gpu1, ip: 10.0.0.1}, {name: gpu2, ip: 10.0.0.2}]
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
ca:
  description: The CA - its certificate's path, SHA-256 fingerprint and end, and whether this run made it.
  returned: success
  type: dict
  sample: {cert: /inv/.raygate_tls/ca.crt, fingerprint: 3f0c..., not_after: "2036-11-24T13:00:00+00:00", created: false}
nodes:
  description:
    - Per node - the paths of its certificate and key, the certificate's end, and whether (and why)
      this run issued it.
  returned: success
  type: dict
  sample: {node1: {cert: /inv/.raygate_tls/nodes/node1.crt, key: /inv/.raygate_tls/nodes/node1.key,
           not_after: "2027-11-26T13:00:00+00:00", issued: true, reason: no certificate yet}}
issued:
  description: The nodes whose certificate this run issued.
  returned: success
  type: list
  elements: str
  sample: [node1]
"""
