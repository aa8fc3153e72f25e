import http.server
import io
import json
import ssl
import threading

import pytest
from harness import run_case

from ansible_collections.raygate.cluster.plugins.module_utils.node import cluster
from ansible_collections.raygate.cluster.plugins.modules import ray_cluster_info
from ansible_collections.raygate.cluster.plugins.plugin_utils import tls

NODES = {
    "data": {
        "result": {
            "result": [
                {"node_id": "a1", "node_ip": "198.18.0.11", "state": "ALIVE", "is_head_node": True,
                 "resources_total": {"CPU": 2.0, "GPU": 8.0}},
            ]
        }
    }
}  # fmt: skip


def fake_head(monkeypatch, answers):
    """open_url answering each path from ANSWERS (a dict, or an exception to raise); records headers."""
    seen = []

    def open_url(url, headers=None, **kwargs):
        path = url.split("8265", 1)[1]
        seen.append((path, dict(headers or {})))
        answer = answers.get(path.split("?")[0])
        if isinstance(answer, Exception) or answer is None:
            raise answer or OSError("connection refused")
        return io.BytesIO(json.dumps(answer).encode())

    monkeypatch.setattr(cluster, "open_url", open_url)
    return seen


@pytest.fixture()
def token(tmp_path):
    path = tmp_path / "token"
    path.write_text("tok-123\n")
    return str(path)


def test_reports_the_version_the_head_runs(tmp_path, monkeypatch, token):
    seen = fake_head(monkeypatch, {"/api/v0/nodes": NODES, "/api/version": {"version": "4", "ray_version": "2.60.0"}})
    case = {"args": {"dashboard_url": "http://198.18.0.11:8265", "auth_token_file": token},
            "expect": {"reachable": True, "alive_nodes": 1, "ray_version": "2.60.0", "changed": False}}  # fmt: skip
    run_case(case, ray_cluster_info.main, tmp_path, monkeypatch)
    assert [path for path, headers in seen] == ["/api/v0/nodes?limit=10000&detail=true", "/api/version"]
    assert all(headers["Authorization"] == "Bearer tok-123" for path, headers in seen)


def test_a_head_without_a_version_answer_gives_none(tmp_path, monkeypatch, token):
    fake_head(monkeypatch, {"/api/v0/nodes": NODES, "/api/version": OSError("404 Not Found")})
    case = {"args": {"dashboard_url": "http://198.18.0.11:8265", "auth_token_file": token},
            "expect": {"reachable": True, "ray_version": None}}  # fmt: skip
    run_case(case, ray_cluster_info.main, tmp_path, monkeypatch)


def test_an_unreachable_head_is_not_asked_for_its_version(tmp_path, monkeypatch, token):
    seen = fake_head(monkeypatch, {})
    case = {"args": {"dashboard_url": "http://198.18.0.11:8265", "auth_token_file": token}, "check_mode": True,
            "expect": {"reachable": False, "ray_version": None}}  # fmt: skip
    run_case(case, ray_cluster_info.main, tmp_path, monkeypatch)
    assert [path for path, headers in seen] == ["/api/v0/nodes?limit=10000&detail=true"]


def test_the_module_answers_once_and_leaves_the_waiting_to_the_action(tmp_path, monkeypatch, token):
    # wait is on and the target is not met: the module still asks once and reports, without failing
    # (the action plugin does the waiting and the timeout).
    seen = fake_head(monkeypatch, {"/api/v0/nodes": NODES, "/api/version": {"ray_version": "2.60.0"}})
    case = {"args": {"dashboard_url": "http://198.18.0.11:8265", "auth_token_file": token, "wait": True,
                     "wait_nodes": 3, "wait_gpus": 24, "wait_timeout": 1, "wait_sleep": 0.01},
            "expect": {"complete": False, "alive_nodes": 1, "elapsed": 0.0,
                       "targets": {"nodes": 3, "gpus": 24.0}}}  # fmt: skip
    run_case(case, ray_cluster_info.main, tmp_path, monkeypatch)
    assert [path for path, headers in seen] == ["/api/v0/nodes?limit=10000&detail=true", "/api/version"]


def test_an_unreachable_head_fails_with_reachable_false_so_the_action_polls_again(tmp_path, monkeypatch, token):
    fake_head(monkeypatch, {})
    case = {"args": {"dashboard_url": "http://198.18.0.11:8265", "auth_token_file": token, "wait_nodes": 1},
            "expect": {"failed": True, "reachable": False, "complete": False},
            "expect_contains": {"msg": ["did not answer"]}}  # fmt: skip
    run_case(case, ray_cluster_info.main, tmp_path, monkeypatch)


class _StateApi(http.server.BaseHTTPRequestHandler):
    """The head's state API behind TLS: answers the nodes, and records each Authorization it gets."""

    tokens = []

    def do_GET(self):  # noqa: N802 (the http.server name)
        _StateApi.tokens.append(self.headers.get("Authorization"))
        body = json.dumps(NODES if self.path.startswith("/api/v0/nodes") else {"ray_version": "2.60.0"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture()
def https_head(tmp_path):
    """An HTTPS state API on 127.0.0.1, its certificate from a CA of the test's own (as the proxy's is)."""
    ca = tls.ensure_ca(str(tmp_path / "ca"), 2)
    cert, key = tls.issue(ca, "head", ["127.0.0.1"], 2)
    (tmp_path / "head.pem").write_bytes(tls._pem_cert(cert) + tls._pem_key(key))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(tmp_path / "head.pem"))
    server = http.server.HTTPServer(("127.0.0.1", 0), _StateApi)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _StateApi.tokens = []
    yield "https://127.0.0.1:%d" % server.server_address[1], str(tmp_path / "ca" / "ca.crt")
    server.shutdown()
    server.server_close()


def test_an_https_dashboard_is_asked_only_once_its_certificate_chains_to_the_ca(
    tmp_path, monkeypatch, token, https_head
):
    url, ca_path = https_head
    case = {"args": {"dashboard_url": url, "auth_token_file": token, "ca_path": ca_path},
            "expect": {"reachable": True, "alive_nodes": 1, "ray_version": "2.60.0"}}  # fmt: skip
    run_case(case, ray_cluster_info.main, tmp_path, monkeypatch)
    assert _StateApi.tokens == ["Bearer tok-123", "Bearer tok-123"]


def test_an_https_dashboard_that_no_trusted_ca_vouches_for_never_gets_the_token(
    tmp_path, monkeypatch, token, https_head
):
    url, _ca_path = https_head
    # No ca_path: the system's CAs, which never signed the test's own CA.
    case = {"args": {"dashboard_url": url, "auth_token_file": token},
            "expect": {"failed": True, "msg_contains": ["did not answer", "CERTIFICATE_VERIFY_FAILED"]}}  # fmt: skip
    run_case(case, ray_cluster_info.main, tmp_path, monkeypatch)
    assert _StateApi.tokens == []
