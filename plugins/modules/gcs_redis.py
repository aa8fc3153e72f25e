#!/usr/bin/python
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: gcs_redis
short_description: Check the Redis behind Ray's GCS, or remove one cluster's keys from it
version_added: 0.5.0
description:
  - With O(state=reachable), connects to the Redis that backs the GCS (GCS fault tolerance),
    authenticates with the cluster's password and sends PING. Nothing changes. It fails naming
    the host it ran on, the address, the stage (connect, auth, ping) and what failed (refused,
    timeout, WRONGPASS, NOAUTH, not Redis).
  - With O(state=purged), removes every key Ray keeps for the storage namespaces that start
    with O(namespace_prefix) (Ray names them C(RAY<namespace>@<table>)), found with SCAN, never
    KEYS. Other clusters' keys in the same Redis are left alone.
  - Speaks RESP with the Python standard library, so the node needs no Redis client - over a plain
    socket, or over TLS with O(tls) (or a C(rediss://) O(address)), trusting O(tls_ca_cert) only,
    checking the address against the server's certificate and presenting O(tls_cert) (for a Redis
    with C(tls-auth-clients yes), as raygate's managed one).
requirements:
  - a Redis server (RESP2, plain or TLS) that the host the module runs on reaches at O(address)
  - the password (and with O(username) the ACL user) Ray's GCS uses, allowed C(AUTH) and C(PING), and for
    O(state=purged) C(SCAN) and C(DEL)
  - nothing else on the node; the Python standard library speaks RESP, no Redis client is needed
author:
  - raygate maintainers (@raygate)
extends_documentation_fragment:
  - raygate.cluster.attributes
attributes:
  check_mode:
    support: full
    details: O(state=reachable) never changes anything; O(state=purged) counts the keys it would remove.
  diff_mode:
    support: none
options:
  address:
    description: The Redis address, C(host:port), C([v6]:port) or C(redis://host:port).
    type: str
    required: true
  username:
    description: The Redis ACL user; empty authenticates with the password alone (the C(default) user).
    type: str
    default: ""
  password:
    description: The Redis password; never shown in output or logs. Empty sends no AUTH.
    type: str
    required: true
  state:
    description: V(reachable) checks; V(purged) removes the cluster's keys.
    type: str
    choices: [reachable, purged]
    default: reachable
  namespace_prefix:
    description:
      - With O(state=purged), the start of the storage namespaces (C(RAY_external_storage_namespace))
        whose keys are removed. Required then, and never empty.
    type: str
  timeout:
    description: Seconds for the connection and for each reply.
    type: float
    default: 5
  tls:
    description:
      - Speak TLS to Redis (also when O(address) starts with C(rediss://)). Needs O(tls_ca_cert),
        O(tls_cert) and O(tls_key); a failed handshake fails with kind C(tls).
    type: bool
    default: false
    version_added: 0.5.0
  tls_ca_cert:
    description: The CA certificate (PEM text) the server's certificate must chain to; no other is trusted.
    type: str
    version_added: 0.5.0
  tls_cert:
    description: The client certificate (PEM text) presented to Redis.
    type: str
    version_added: 0.5.0
  tls_key:
    description:
      - The client certificate's private key (PEM text); never shown in output or logs. It is written
        to a 0600 file in the module's temporary directory for the handshake, and removed at once.
    type: str
    version_added: 0.5.0
seealso:
  - module: raygate.cluster.ray_node
"""

EXAMPLES = r"""
- name: Check from the head that the GCS Redis answers with the password
  raygate.cluster.gcs_redis:
    address: 10.0.0.1:6380
    username: default
    password: "{{ raygate_gcs_redis_password }}"

- name: Remove this cluster's GCS tables from a shared Redis
  raygate.cluster.gcs_redis:
    address: redis.example.com:6379
    password: "{{ vault_redis_password }}"
    state: purged
    namespace_prefix: raygate-0a1b2c3d4e5f
"""

RETURN = r"""
address:
  description: The address as host and port.
  returned: always
  type: str
  sample: 10.0.0.1:6380
seconds:
  description: How long the check took, connection included.
  returned: when O(state=reachable)
  type: float
  sample: 0.004
key_count:
  description: How many keys matched the namespace prefix (removed, or in check mode to be removed).
  returned: when O(state=purged)
  type: int
  sample: 9
kind:
  description: What failed (refused, timeout, unreachable, tls, wrongpass, noauth, auth_error, protocol, error).
  returned: on failure
  type: str
  sample: wrongpass
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.raygate.cluster.plugins.module_utils.node import gcs_redis as gcs_redis_step


def main():
    module = AnsibleModule(
        argument_spec=gcs_redis_step.ARGUMENT_SPEC,
        supports_check_mode=True,
    )
    gcs_redis_step.run(module)


if __name__ == "__main__":
    main()
