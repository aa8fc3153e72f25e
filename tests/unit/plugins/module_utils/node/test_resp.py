"""The RESP client against a fake Redis served in-process on 127.0.0.1 (a thread per connection)."""

import fnmatch
import os
import socket
import socketserver
import ssl
import threading

import pytest

from ansible_collections.raygate.cluster.plugins.module_utils.node import resp

PASSWORD = "s3cret-pw"


def _read_command(rfile):
    """One RESP array of bulk strings, as a list of str; None at end of stream."""
    head = rfile.readline()
    if not head:
        return None
    assert head.startswith(b"*"), head
    args = []
    for _index in range(int(head[1:])):
        size = int(rfile.readline()[1:])
        args.append(rfile.read(size + 2)[:-2].decode())
    return args


class FakeRedis(socketserver.ThreadingTCPServer):
    """Just enough of Redis 7 with requirepass: AUTH, PING, SCAN (MATCH, one key per page), DEL."""

    allow_reuse_address = True
    daemon_threads = True

    def __init__(self, password=PASSWORD, users=None, keys=(), mode="redis"):
        self.password = password
        self.users = users or {"default": password}
        self.keys = set(keys)
        self.mode = mode
        self.seen = []
        super().__init__(("127.0.0.1", 0), Handler)

    @property
    def address(self):
        return self.server_address


class Handler(socketserver.StreamRequestHandler):
    def reply(self, data):
        self.wfile.write(data)

    def handle(self):
        server = self.server
        if server.mode == "silent":
            self.rfile.readline()
            threading.Event().wait(2)
            return
        if server.mode == "http":
            self.rfile.readline()
            self.reply(b"HTTP/1.1 400 Bad Request\r\n\r\n")
            return
        authed = server.password is None
        while True:
            args = _read_command(self.rfile)
            if args is None:
                return
            server.seen.append(args[0].upper())
            name = args[0].upper()
            if name == "AUTH":
                if server.password is None:
                    self.reply(b"-ERR AUTH <password> called without any password configured for the default user.\r\n")
                    continue
                user, pw = (args[1], args[2]) if len(args) == 3 else ("default", args[1])
                if server.users.get(user) == pw:
                    authed = True
                    self.reply(b"+OK\r\n")
                else:
                    self.reply(b"-WRONGPASS invalid username-password pair or user is disabled.\r\n")
            elif not authed:
                self.reply(b"-NOAUTH Authentication required.\r\n")
            elif name == "PING":
                self.reply(b"+PONG\r\n")
            elif name == "SCAN":
                self.scan(args)
            elif name == "DEL":
                removed = [k for k in args[1:] if k in server.keys]
                server.keys.difference_update(removed)
                self.reply(b":%d\r\n" % len(removed))
            else:
                self.reply(b"-ERR unknown command\r\n")

    def scan(self, args):
        # A page of one key at a time: the client must follow the cursor to the end.
        cursor, pattern = int(args[1]), args[args.index("MATCH") + 1]
        ordered = sorted(self.server.keys)
        page = ordered[cursor : cursor + 1]
        page = [k for k in page if fnmatch.fnmatchcase(k, pattern.replace("\\", ""))]
        nxt = cursor + 1 if cursor + 1 < len(ordered) else 0
        body = b"".join(b"$%d\r\n%s\r\n" % (len(k), k.encode()) for k in page)
        cur = str(nxt).encode()
        self.reply(b"*2\r\n$%d\r\n%s\r\n*%d\r\n%s" % (len(cur), cur, len(page), body))


@pytest.fixture
def redis_server(request):
    kwargs = getattr(request, "param", {})
    server = FakeRedis(**kwargs)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_check_authenticates_then_pings(redis_server):
    host, port = redis_server.address
    result = resp.check(host, port, "default", PASSWORD, timeout=2)
    assert result["stage"] == "ping"
    assert redis_server.seen == ["AUTH", "PING"]


def test_wrong_password_is_wrongpass_at_auth(redis_server):
    host, port = redis_server.address
    with pytest.raises(resp.RedisError) as err:
        resp.check(host, port, "", "not-it", timeout=2)
    assert (err.value.kind, err.value.stage) == ("wrongpass", "auth")
    msg = resp.describe(err.value, "%s:%s" % (host, port), "head1")
    assert "from head1" in msg and "127.0.0.1:%d" % port in msg and "WRONGPASS" in msg
    assert "not-it" not in msg


def test_no_password_given_is_noauth_at_ping(redis_server):
    host, port = redis_server.address
    with pytest.raises(resp.RedisError) as err:
        resp.check(host, port, "", "", timeout=2)
    assert (err.value.kind, err.value.stage) == ("noauth", "ping")


@pytest.mark.parametrize("redis_server", [{"password": None}], indirect=True)
def test_password_for_a_redis_without_one_is_an_auth_error(redis_server):
    host, port = redis_server.address
    with pytest.raises(resp.RedisError) as err:
        resp.check(host, port, "", PASSWORD, timeout=2)
    assert err.value.kind == "auth_error"


@pytest.mark.parametrize("redis_server", [{"users": {"default": "x", "ray": PASSWORD}}], indirect=True)
def test_acl_user_is_sent_with_the_password(redis_server):
    host, port = redis_server.address
    assert resp.check(host, port, "ray", PASSWORD, timeout=2)["stage"] == "ping"
    with pytest.raises(resp.RedisError) as err:
        resp.check(host, port, "", PASSWORD, timeout=2)
    assert err.value.kind == "wrongpass"


def test_refused_connection_is_named():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # Bound and closed without listen(): nothing accepts on that port now.
    with pytest.raises(resp.RedisError) as err:
        resp.check("127.0.0.1", port, "", PASSWORD, timeout=2)
    assert (err.value.kind, err.value.stage) == ("refused", "connect")
    assert "connection was refused" in resp.describe(err.value, "127.0.0.1:%d" % port)


def test_connect_timeout_is_named():
    def never(address, timeout):
        raise socket.timeout("timed out")

    with pytest.raises(resp.RedisError) as err:
        resp.check("198.18.0.99", 6380, "", PASSWORD, timeout=0.1, connect=never)
    assert (err.value.kind, err.value.stage) == ("timeout", "connect")
    assert "firewall" in resp.describe(err.value, "198.18.0.99:6380")


@pytest.mark.parametrize("redis_server", [{"mode": "silent"}], indirect=True)
def test_a_server_that_never_answers_times_out_at_auth(redis_server):
    host, port = redis_server.address
    with pytest.raises(resp.RedisError) as err:
        resp.check(host, port, "", PASSWORD, timeout=0.2)
    assert (err.value.kind, err.value.stage) == ("timeout", "auth")
    assert "did not reply in time" in resp.describe(err.value, "%s:%s" % (host, port))


@pytest.mark.parametrize("redis_server", [{"mode": "http"}], indirect=True)
def test_something_else_than_redis_is_a_protocol_error(redis_server):
    host, port = redis_server.address
    with pytest.raises(resp.RedisError) as err:
        resp.check(host, port, "", PASSWORD, timeout=2)
    assert err.value.kind == "protocol"


CLUSTER_KEYS = [
    "RAYraygate-abc-ray-2.60.0-py3.11@ActorTable",
    "RAYraygate-abc-ray-2.60.0-py3.11@NodeTable",
    "RAYraygate-abc-ray-2.59.0-py3.11@KV",
]
OTHER_KEYS = ["RAYraygate-abd-ray-2.60.0-py3.11@KV", "RAYraygate-abc", "unrelated"]


@pytest.mark.parametrize("redis_server", [{"keys": CLUSTER_KEYS + OTHER_KEYS}], indirect=True)
def test_purge_removes_only_this_clusters_namespaces(redis_server):
    host, port = redis_server.address
    with resp.Connection(host, port, 2) as conn:
        conn.auth("", PASSWORD)
        keys = resp.matching_keys(conn, resp.namespace_pattern("raygate-abc-"))
        assert [k.decode() for k in keys] == sorted(CLUSTER_KEYS)
        assert resp.delete_keys(conn, keys) == 3
    assert redis_server.keys == set(OTHER_KEYS)
    assert "KEYS" not in redis_server.seen


def test_namespace_pattern_escapes_glob_characters_and_refuses_empty():
    assert resp.namespace_pattern("a*b[1]") == "RAYa\\*b\\[1\\]*@*"
    with pytest.raises(ValueError, match="every cluster"):
        resp.namespace_pattern("")


def test_encode_is_resp_bulk_strings():
    assert resp.encode("AUTH", "pw") == b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n"
    assert resp.encode("DEL", b"k\r\n") == b"*2\r\n$3\r\nDEL\r\n$3\r\nk\r\n\r\n"


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("10.0.0.1:6380", ("10.0.0.1", 6380)),
        ("redis://redis.example.com:7000", ("redis.example.com", 7000)),
        ("[fd00::1]:6380", ("fd00::1", 6380)),
        ("10.0.0.1", ("10.0.0.1", 6379)),
        ("rediss://10.0.0.1:6380", ("10.0.0.1", 6380)),
    ],
)
def test_parse_address(address, expected):
    assert resp.parse_address(address) == expected


@pytest.mark.parametrize(
    ("address", "words"), [("http://h:1", "redis:// or rediss://"), ("h:99999", "1..65535"), ("", "empty")]
)
def test_parse_address_refuses(address, words):
    with pytest.raises(ValueError, match=words):
        resp.parse_address(address)


# ---- TLS (rediss://), as raygate's managed Redis speaks it: certificates of the cluster CA both ways
@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    tls = pytest.importorskip("ansible_collections.raygate.cluster.plugins.plugin_utils.tls")
    base = tmp_path_factory.mktemp("pki")

    def pem(cert, key):
        return tls._pem_cert(cert).decode(), tls._pem_key(key).decode()

    ca = tls.ensure_ca(str(base / "ca"), 30)
    other = tls.ensure_ca(str(base / "other"), 30, name="another CA")
    with open(str(base / "ca" / "ca.crt")) as fh:
        ca_pem = fh.read()
    return {
        "dir": base,
        "ca": ca_pem,
        "server": pem(*tls.issue(ca, "redis", ["127.0.0.1"], 30)),
        "client": pem(*tls.issue(ca, "head", ["127.0.0.1"], 30)),
        "stranger": pem(*tls.issue(other, "head", ["127.0.0.1"], 30)),
    }


class TlsRedis(FakeRedis):
    """FakeRedis behind TLS that requires a client certificate of ``ca`` (tls-auth-clients yes)."""

    def __init__(self, ca, cert, key, workdir, **kwargs):
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cadata=ca)
        self.context.verify_mode = ssl.CERT_REQUIRED
        path = os.path.join(str(workdir), "server.pem")
        with open(path, "w") as fh:
            fh.write(cert + key)
        self.context.load_cert_chain(path)
        super().__init__(**kwargs)

    def get_request(self):
        sock, address = super().get_request()
        sock.settimeout(2)
        try:
            return self.context.wrap_socket(sock, server_side=True), address
        except (ssl.SSLError, OSError):
            sock.close()
            raise


@pytest.fixture
def tls_server(pki):
    server = TlsRedis(pki["ca"], *pki["server"], workdir=pki["dir"])
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def tls_check(server, ca, cert_key, workdir):
    host, port = server.address
    connect = resp.tls_connect(resp.tls_context(ca, cert_key[0], cert_key[1], str(workdir)))
    return resp.check(host, port, "default", PASSWORD, timeout=2, connect=connect)


def test_over_tls_with_the_cluster_ca_both_ways_it_authenticates_then_pings(tls_server, pki, tmp_path):
    assert tls_check(tls_server, pki["ca"], pki["client"], tmp_path)["stage"] == "ping"
    assert tls_server.seen == ["AUTH", "PING"]
    assert os.listdir(str(tmp_path)) == []  # the key's file is gone


def test_a_client_certificate_of_another_ca_is_refused_by_the_server(tls_server, pki, tmp_path):
    with pytest.raises(resp.RedisError) as err:
        tls_check(tls_server, pki["ca"], pki["stranger"], tmp_path)
    assert err.value.kind == "tls" and tls_server.seen == [], (err.value.kind, err.value.detail)


def test_a_server_of_another_ca_is_not_trusted(tls_server, pki, tmp_path):
    with open(str(pki["dir"] / "other" / "ca.crt")) as fh:
        other_ca = fh.read()
    with pytest.raises(resp.RedisError) as err:
        tls_check(tls_server, other_ca, pki["client"], tmp_path)
    assert err.value.kind == "tls" and "CERTIFICATE_VERIFY_FAILED" in err.value.detail
    assert "TLS handshake failed" in resp.describe(err.value, "rediss://127.0.0.1:6380")
