"""gcs_redis as a module: its answers and its failures, over a scripted socket."""

import socket

import pytest
from harness import run_case

from ansible_collections.raygate.cluster.plugins.modules import gcs_redis

SECRET = "pw-0123456789"


class ScriptedSocket:
    """Replies with ``replies`` in order, one per command sent; records what was sent."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.sent = []

    def settimeout(self, timeout):
        pass

    def sendall(self, data):
        self.sent.append(data)

    def recv(self, size):
        return self.replies.pop(0) if self.replies else b""

    def close(self):
        pass


def scripted(monkeypatch, replies, connected=None):
    sock = ScriptedSocket(replies)

    def connect(address, timeout):
        if connected is not None:
            connected.append(address)
        return sock

    monkeypatch.setattr(socket, "create_connection", connect)
    return sock


def test_reachable_sends_auth_then_ping_and_changes_nothing(tmp_path, monkeypatch):
    seen = []
    sock = scripted(monkeypatch, [b"+OK\r\n", b"+PONG\r\n"], seen)
    args = {"address": "198.18.0.11:6380", "username": "default", "password": SECRET}
    result = run_case({"args": args, "expect": {"changed": False, "address": "198.18.0.11:6380"}},
                      gcs_redis.main, tmp_path, monkeypatch)  # fmt: skip
    assert seen == [("198.18.0.11", 6380)]
    assert sock.sent[0].startswith(b"*3\r\n$4\r\nAUTH\r\n$7\r\ndefault\r\n")
    assert b"PING" in sock.sent[1]
    assert SECRET not in str(result)


def test_wrong_password_fails_naming_host_address_and_wrongpass(tmp_path, monkeypatch):
    scripted(monkeypatch, [b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"])
    monkeypatch.setattr(socket, "gethostname", lambda: "head1")
    args = {"address": "198.18.0.11:6380", "password": SECRET}
    expect = {"failed": True, "kind": "wrongpass", "msg_contains": "198.18.0.11:6380"}
    result = run_case({"args": args, "expect": expect}, gcs_redis.main, tmp_path, monkeypatch)
    assert "from head1" in result["msg"] and "WRONGPASS" in result["msg"]
    assert SECRET not in str(result)


def test_refused_fails_as_refused(tmp_path, monkeypatch):
    def refuse(address, timeout):
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr(socket, "create_connection", refuse)
    args = {"address": "198.18.0.11:6380", "password": SECRET}
    expect = {"failed": True, "kind": "refused", "msg_contains": "connection was refused"}
    run_case({"args": args, "expect": expect}, gcs_redis.main, tmp_path, monkeypatch)


def scan_reply(cursor, keys):
    body = b"".join(b"$%d\r\n%s\r\n" % (len(k), k) for k in keys)
    return b"*2\r\n$%d\r\n%s\r\n*%d\r\n%s" % (len(cursor), cursor, len(keys), body)


KEYS = [b"RAYraygate-abc-ray-2.60.0-py3.11@NodeTable", b"RAYraygate-abc-ray-2.60.0-py3.11@KV"]


def test_purged_deletes_the_matching_keys(tmp_path, monkeypatch):
    sock = scripted(monkeypatch, [b"+OK\r\n", scan_reply(b"7", KEYS[:1]), scan_reply(b"0", KEYS[1:]), b":2\r\n"])
    args = {"address": "redis:6379", "password": SECRET, "state": "purged", "namespace_prefix": "raygate-abc-"}
    run_case({"args": args, "expect": {"changed": True, "key_count": 2}}, gcs_redis.main, tmp_path, monkeypatch)
    assert b"MATCH\r\n$18\r\nRAYraygate-abc-*@*" in sock.sent[1]
    assert sock.sent[3].startswith(b"*3\r\n$3\r\nDEL\r\n")


def test_purged_in_check_mode_counts_and_deletes_nothing(tmp_path, monkeypatch):
    sock = scripted(monkeypatch, [b"+OK\r\n", scan_reply(b"0", KEYS)])
    args = {"address": "redis:6379", "password": SECRET, "state": "purged", "namespace_prefix": "raygate-abc-"}
    run_case({"args": args, "check_mode": True, "expect": {"changed": True, "key_count": 2}}, gcs_redis.main, tmp_path,
             monkeypatch)  # fmt: skip
    assert not any(b"DEL" in data for data in sock.sent)


@pytest.mark.parametrize("prefix", [None, ""])
def test_purged_refuses_an_empty_prefix(tmp_path, monkeypatch, prefix):
    scripted(monkeypatch, [])
    args = {"address": "redis:6379", "password": SECRET, "state": "purged", "namespace_prefix": prefix}
    expect = {"failed": True, "msg_contains": "namespace_prefix is required"}
    run_case({"args": args, "expect": expect}, gcs_redis.main, tmp_path, monkeypatch)
