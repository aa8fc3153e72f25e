# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A small Redis client (RESP2 over a TCP socket, standard library only).

GCS fault tolerance needs two things of the Redis behind the GCS, and nodes have no redis
package: a check from the head that Redis answers with the cluster's password (AUTH, then
PING) before the head starts, and the removal of one cluster's keys at teardown (SCAN, DEL).
Each failure is classified (refused, timeout, unreachable, wrongpass, noauth, auth_error,
protocol, error) so the message can say what failed, not only that something did.
"""

from __future__ import annotations

import os
import socket
import ssl
import time

CRLF = b"\r\n"
MAX_LINE = 64 * 1024


class RedisError(Exception):
    """A failed exchange with Redis; ``kind`` says what failed, ``str()`` the details."""

    def __init__(self, kind, detail):
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


class ReplyError(RedisError):
    """An error reply from Redis (``-WRONGPASS ...``, ``-ERR ...``)."""


def encode(*args):
    """A command as a RESP array of bulk strings."""
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode("utf-8")
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


def parse_address(address, default_port=6379):
    """(host, port) from 'host:port', '[v6]:port', 'redis://host:port', 'rediss://host:port' (TLS,
    which the caller sets up) or a bare host."""
    text = (address or "").strip()
    if "://" in text:
        scheme, text = text.split("://", 1)
        if scheme not in ("redis", "rediss"):
            raise ValueError("%r: the scheme must be redis:// or rediss://" % address)
    if not text:
        raise ValueError("empty Redis address")
    if text.startswith("["):
        host, _sep, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif text.count(":") == 1:
        host, port = text.split(":")
    else:
        host, port = text, ""
    if not host:
        raise ValueError("%r has no host" % address)
    if port == "":
        return host, default_port
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError("%r: the port must be a number in 1..65535" % address)
    return host, int(port)


def _reply_error(text):
    code = text.split(" ", 1)[0]
    kind = {"WRONGPASS": "wrongpass", "NOAUTH": "noauth"}.get(code, "error")
    return ReplyError(kind, text)


class Connection:
    """One socket to Redis; ``command()`` sends a command and returns its decoded reply."""

    def __init__(self, host, port, timeout=5.0, connect=socket.create_connection):
        self.address = "%s:%s" % (host, port)
        try:
            self.sock = connect((host, port), timeout)
        except ConnectionRefusedError as exc:
            raise RedisError("refused", "connection refused (%s)" % exc) from exc
        except socket.timeout as exc:
            raise RedisError("timeout", "no answer to the connection within %ss" % timeout) from exc
        except OSError as exc:
            raise RedisError("unreachable", "cannot connect (%s)" % exc) from exc
        self.sock.settimeout(timeout)
        self.timeout = timeout
        self.buffer = b""
        # Over TLS, a connection lost before the first reply is the server refusing this client's
        # certificate (TLS 1.3 checks it after the client's handshake ends): a reset or an alert.
        self.tls = isinstance(self.sock, ssl.SSLSocket)
        self.replied = False

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _fill(self):
        try:
            chunk = self.sock.recv(65536)
        except socket.timeout as exc:
            raise RedisError("timeout", "no reply within %ss" % self.timeout) from exc
        except OSError as exc:
            raise self._lost(exc) from exc
        if not chunk:
            if self.tls and not self.replied:
                raise self._lost("closed by the server")
            raise RedisError("protocol", "Redis closed the connection")
        self.buffer += chunk

    def _line(self):
        while CRLF not in self.buffer:
            if len(self.buffer) > MAX_LINE:
                raise RedisError("protocol", "a reply line longer than %d bytes: is this Redis?" % MAX_LINE)
            self._fill()
        line, self.buffer = self.buffer.split(CRLF, 1)
        return line

    def _exactly(self, size):
        while len(self.buffer) < size + 2:
            self._fill()
        data, self.buffer = self.buffer[:size], self.buffer[size + 2 :]
        return data

    def read_reply(self):
        line = self._line()
        prefix, rest = line[:1], line[1:].decode("utf-8", "replace")
        if prefix == b"+":
            return rest
        if prefix == b"-":
            raise _reply_error(rest)
        if prefix == b":":
            return int(rest)
        if prefix == b"$":
            size = int(rest)
            return None if size < 0 else self._exactly(size)
        if prefix == b"*":
            size = int(rest)
            return None if size < 0 else [self.read_reply() for _index in range(size)]
        raise RedisError("protocol", "unexpected reply %r: is this Redis?" % line[:40])

    def command(self, *args):
        try:
            self.sock.sendall(encode(*args))
        except socket.timeout as exc:
            raise RedisError("timeout", "could not send within %ss" % self.timeout) from exc
        except OSError as exc:
            raise self._lost(exc) from exc
        reply = self.read_reply()
        self.replied = True
        return reply

    def _lost(self, exc):
        """The error for a connection lost mid-exchange (``exc``: an OSError, ssl's included, or words)."""
        if self.tls and (isinstance(exc, ssl.SSLError) or not self.replied):
            reason = getattr(exc, "reason", None) or exc
            text = "TLS: connection lost before any reply (%s): did Redis refuse this client's certificate?"
            return RedisError("tls", text % reason)
        return RedisError("unreachable", "connection lost (%s)" % exc)

    def auth(self, username, password):
        """AUTH with the password (and the ACL user when given); errors keep Redis's words."""
        args = ["AUTH", username, password] if username else ["AUTH", password]
        try:
            return self.command(*args)
        except ReplyError as exc:
            if exc.kind == "error":
                # e.g. "ERR AUTH <password> called without any password configured": the
                # server has no password, or (Redis < 6) knows no ACL users.
                raise ReplyError("auth_error", exc.detail) from exc
            raise


def check(host, port, username, password, timeout=5.0, connect=socket.create_connection, clock=time.monotonic):
    """AUTH then PING: {'stage', 'seconds'} when Redis answers PONG; raises RedisError (with
    ``stage`` set to connect, auth or ping) when it does not."""
    started = clock()
    stage = "connect"
    try:
        with Connection(host, port, timeout, connect) as conn:
            stage = "auth"
            if password:
                conn.auth(username, password)
            stage = "ping"
            pong = conn.command("PING")
            if pong != "PONG":
                raise RedisError("protocol", "PING answered %r instead of PONG" % (pong,))
    except RedisError as exc:
        exc.stage = stage
        raise
    return {"stage": "ping", "seconds": round(clock() - started, 3)}


def glob_escape(text):
    """``text`` as a literal inside a Redis MATCH pattern."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def namespace_pattern(prefix):
    """The MATCH pattern of every key Ray keeps for namespaces starting with ``prefix``.

    Ray 2.60 keeps each table of a namespace NS in a hash named ``RAY{NS}@{table}``
    (ray/_private/gcs_utils.py, cleanup_redis_storage).
    """
    if not prefix:
        raise ValueError("an empty namespace prefix would match every cluster's keys")
    return "RAY" + glob_escape(prefix) + "*@*"


def matching_keys(conn, pattern, count=500):
    """Every key matching ``pattern``, by SCAN (never KEYS, which blocks a shared Redis)."""
    cursor, keys = b"0", []
    while True:
        reply = conn.command("SCAN", cursor, "MATCH", pattern, "COUNT", count)
        if not isinstance(reply, list) or len(reply) != 2:
            raise RedisError("protocol", "SCAN answered %r" % (reply,))
        cursor, batch = reply
        keys.extend(batch or [])
        if cursor in (b"0", "0"):
            return sorted(set(keys))


def delete_keys(conn, keys, batch=100):
    """DEL ``keys`` in batches; the number Redis removed."""
    removed = 0
    for start in range(0, len(keys), batch):
        removed += conn.command("DEL", *keys[start : start + batch])
    return removed


def tls_context(ca_pem, cert_pem, key_pem, workdir):
    """A client TLS context that trusts ``ca_pem`` only (the server's address checked against its
    certificate) and presents ``cert_pem``/``key_pem``. The key goes through a 0600 file in
    ``workdir`` (ssl loads a chain from files only), removed at once."""
    context = ssl.create_default_context(cadata=ca_pem)
    # Strict X.509 on every Python, as Python 3.13's default is: a certificate the nodes' Python
    # would refuse is refused here too.
    context.verify_flags |= ssl.VERIFY_X509_STRICT
    path = os.path.join(workdir, "redis-client.pem")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(cert_pem.strip() + "\n" + key_pem.strip() + "\n")
        context.load_cert_chain(path)
    finally:
        os.unlink(path)
    return context


def tls_connect(context, connect=socket.create_connection):
    """A ``connect`` for Connection that speaks TLS with ``context`` (``rediss://``)."""

    def connect_tls(address, timeout):
        sock = connect(address, timeout)
        try:
            return context.wrap_socket(sock, server_hostname=address[0])
        except ssl.SSLError as exc:
            sock.close()
            raise RedisError("tls", "TLS handshake failed: %s" % (exc.reason or exc)) from exc
        except OSError:
            sock.close()
            raise

    return connect_tls


def describe(exc, address, host=None):
    """One line naming where the check ran, the address, and what failed."""
    where = " from %s" % host if host else ""
    what = {
        "refused": "the connection was refused: is Redis running and listening on that address?",
        "timeout": "timed out: a firewall drops the packets, or the host is down",
        "unreachable": "cannot reach it",
        "wrongpass": "Redis refused the password (WRONGPASS): the password or user is wrong",
        "noauth": "Redis wants a password and none was given (NOAUTH)",
        "auth_error": "AUTH failed: Redis has no password set, or knows no such user",
        "protocol": "what answered is not a Redis speaking RESP",
        "tls": "the TLS handshake failed: does Redis use a certificate of the cluster CA, and trust it for clients?",
        "error": "Redis answered with an error",
    }.get(exc.kind, exc.kind)
    stage = getattr(exc, "stage", None)
    if exc.kind == "timeout" and stage not in (None, "connect"):
        what = "it accepted the connection but did not reply in time: is it a Redis, and is it overloaded?"
    return "the GCS Redis at %s does not answer%s%s: %s (%s)" % (
        address,
        where,
        " at %s" % stage if stage else "",
        what,
        exc.detail,
    )
