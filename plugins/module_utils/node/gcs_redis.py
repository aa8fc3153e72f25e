# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The gcs_redis module's options and its run: check the Redis behind Ray's GCS, or purge one cluster's keys.

The Redis exchanges themselves (RESP over a socket, AUTH, PING, SCAN, DEL) are in node/resp.py.
"""

from __future__ import annotations

import socket

from ansible_collections.raygate.cluster.plugins.module_utils.node import resp

# Mirrors the options in plugins/modules/gcs_redis.py's DOCUMENTATION.
ARGUMENT_SPEC = dict(
    address=dict(type="str", required=True),
    username=dict(type="str", default=""),
    password=dict(type="str", required=True, no_log=True),
    state=dict(type="str", choices=["reachable", "purged"], default="reachable"),
    namespace_prefix=dict(type="str"),
    timeout=dict(type="float", default=5),
    tls=dict(type="bool", default=False),
    tls_ca_cert=dict(type="str"),
    tls_cert=dict(type="str"),
    tls_key=dict(type="str", no_log=True),
)
TLS_FILES = ("tls_ca_cert", "tls_cert", "tls_key")


def run(module, connect=None):
    p = module.params
    connect = connect or socket.create_connection
    try:
        host, port = resp.parse_address(p["address"])
    except ValueError as exc:
        module.fail_json(msg="address: %s" % exc)
    address = "%s:%s" % (host, port)
    here = socket.gethostname()
    if p["tls"] or p["address"].startswith("rediss://"):
        missing = [name for name in TLS_FILES if not p[name]]
        if missing:
            module.fail_json(msg="TLS to Redis needs %s" % ", ".join(missing))
        try:
            context = resp.tls_context(p["tls_ca_cert"], p["tls_cert"], p["tls_key"], module.tmpdir)
        except (ValueError, OSError) as exc:
            module.fail_json(msg="tls_ca_cert, tls_cert, tls_key: not a usable CA, certificate and key: %s" % exc)
        connect = resp.tls_connect(context, connect)
        address = "rediss://" + address
    try:
        if p["state"] == "reachable":
            result = resp.check(host, port, p["username"], p["password"], p["timeout"], connect=connect)
            module.exit_json(changed=False, address=address, seconds=result["seconds"])
        if not p["namespace_prefix"]:
            module.fail_json(msg="namespace_prefix is required (and must not be empty) with state=purged")
        with resp.Connection(host, port, p["timeout"], connect) as conn:
            if p["password"]:
                conn.auth(p["username"], p["password"])
            keys = resp.matching_keys(conn, resp.namespace_pattern(p["namespace_prefix"]))
            if keys and not module.check_mode:
                resp.delete_keys(conn, keys)
        module.exit_json(changed=bool(keys), address=address, key_count=len(keys))
    except resp.RedisError as exc:
        module.fail_json(msg=resp.describe(exc, address, here), kind=exc.kind, address=address)
