"""``envman matrix check-tags``: the registry client against a fake HTTP layer, and the command
against a local registry stand-in (real urllib, real sockets, no internet)."""

import json
import os
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from envman.matrix import tags as T
from envman.errors import UserError
from tests.support.cli import run_envman

ROOT = Path(__file__).resolve().parents[3]


class FakeTransport:
    """Answers from a table: url → status (or an exception to raise); records every request."""

    def __init__(self, answers=None, default=200, headers=None, bodies=None):
        self.answers = answers or {}
        self.default = default
        self.headers = headers or {}
        self.bodies = bodies or {}
        self.requests = []
        self.lock = threading.Lock()

    def __call__(self, method, url, headers, timeout):
        with self.lock:
            self.requests.append((method, url, dict(headers), timeout))
        answer = self.answers.get(url, self.default)
        if isinstance(answer, Exception):
            raise answer
        if callable(answer):
            answer = answer(headers)
        return T.Response(answer, self.headers.get(url, {}), self.bodies.get(url, b""))


def hub(ns, repo, tag):
    return f"{T.HUB_API}/v2/namespaces/{ns}/repositories/{repo}/tags/{tag}"


def test_present_missing_and_verdicts(mini):
    deleted = hub("nvidia", "cuda", "10.0-base-ubuntu18.04")
    gone = hub("nvidia", "cuda", "11.8.0-base-ubuntu22.04")
    fake = FakeTransport({deleted: 404, gone: 404})
    rep = T.check_tags(mini, T.RegistryClient(fake), jobs=2)
    by = {t.ref: t for t in rep.tags}
    assert rep.reachable and rep.api == "hub"
    assert by["nvidia/cuda:12.4.1-base-ubuntu22.04"].registry_status == "present"
    assert by["nvidia/cuda:12.4.1-base-ubuntu22.04"].verdict == "ok"
    assert by["nvidia/cuda:10.0-base-ubuntu18.04"].verdict == "ok"  # deleted in the matrix, 404: agrees
    gone_row = by["nvidia/cuda:11.8.0-base-ubuntu22.04"]
    assert gone_row.verdict == "disappeared" and gone_row.http_status == 404
    assert gone_row.used_by == ["torch-2.4.1-cuda11.8"]
    assert by["nvidia/cuda:10.0-base-ubuntu16.04"].verdict == "reappeared"  # deleted but answers 200
    assert rep.exit_code == 1
    assert rep.summary["disappeared"] == 1
    # library images live in the "library" namespace on Docker Hub
    assert any(url == hub("library", "ubuntu", "22.04") for _, url, _, _ in fake.requests)
    assert len(fake.requests) == len(rep.tags)  # one request per tag


def test_unreachable_registry_marks_everything_unknown_and_asks_once(mini):
    fake = FakeTransport(default=T.TransportError("URLError: [Errno -3] Temporary failure in name resolution"))
    rep = T.check_tags(mini, T.RegistryClient(fake, timeout=0.5))
    assert not rep.reachable and rep.exit_code == T.EXIT_UNREACHABLE == 3
    assert {t.verdict for t in rep.tags} == {"unknown"} and {t.registry_status for t in rep.tags} == {"unknown"}
    assert rep.message.startswith("registry unreachable: https://hub.docker.com: URLError")
    assert len(fake.requests) == 1 and fake.requests[0][3] == 0.5  # no N x timeout when offline


def test_partial_answers_are_unknown_not_guessed(mini):
    first = hub("nvidia", "cuda", "10.0-base-ubuntu18.04")
    limited = hub("nvidia", "cuda", "12.4.1-base-ubuntu22.04")
    flaky = hub("nvidia", "cuda", "11.8.0-base-ubuntu22.04")
    fake = FakeTransport({first: 404, limited: 429, flaky: T.TransportError("timed out")})
    rep = T.check_tags(mini, T.RegistryClient(fake))
    by = {t.ref: t for t in rep.tags}
    assert rep.reachable
    assert by["nvidia/cuda:12.4.1-base-ubuntu22.04"].verdict == "unknown" and "429" in by["nvidia/cuda:12.4.1-base-ubuntu22.04"].detail
    assert by["nvidia/cuda:11.8.0-base-ubuntu22.04"].verdict == "unknown"
    assert rep.exit_code == 3 and "2 without an answer" in rep.message


def test_matrix_status_unknown_with_an_answer_asks_for_an_update():
    assert T.verdict_for("unknown", "present") == "update"
    assert T.verdict_for("unknown", "missing") == "update"
    assert T.verdict_for("published", "unknown") == "unknown"


def test_registry_v2_with_the_bearer_token_dance():
    reg = "https://mirror.example:5000"
    manifest = f"{reg}/v2/nvidia/cuda/manifests/12.4.1-base-ubuntu22.04"
    realm = "https://auth.example/token"
    token_url = f"{realm}?service=mirror&scope=repository%3Anvidia%2Fcuda%3Apull"
    fake = FakeTransport(
        {manifest: lambda h: 200 if h.get("Authorization") == "Bearer t0k" else 401, token_url: 200},
        headers={manifest: {"WWW-Authenticate": f'Bearer realm="{realm}",service="mirror",scope="repository:nvidia/cuda:pull"'}},
        bodies={token_url: json.dumps({"token": "t0k"}).encode()},
    )
    client = T.RegistryClient(fake, registry=reg + "/")
    assert client.exists("nvidia/cuda", "12.4.1-base-ubuntu22.04")[0] == "present"
    methods = [(m, u) for m, u, _, _ in fake.requests]
    assert methods == [("HEAD", manifest), ("GET", token_url), ("HEAD", manifest)]
    assert "manifest.list.v2+json" in fake.requests[0][2]["Accept"]
    # the token is reused for the next tag of the same repository
    client.exists("nvidia/cuda", "12.4.1-base-ubuntu22.04")
    assert len(fake.requests) == 4 and fake.requests[-1][2]["Authorization"] == "Bearer t0k"


@pytest.mark.parametrize("body", [b"[]", b'"t0k"', b"3", b"null", b'{"token": 5}', b'{"token": ["t0k"]}',
                                  b'{"access_token": {"t": 1}}'])
def test_a_token_answer_that_is_not_an_object_with_a_string_token_is_no_token(body):
    """The token endpoint's JSON is read only as an object whose token is a string: anything else
    (an array, a number, a token that is not text) leaves the tag unknown (401), never a crash and
    never a header made of it."""
    reg = "https://mirror.example:5000"
    manifest = f"{reg}/v2/nvidia/cuda/manifests/12.4.1-base-ubuntu22.04"
    realm = "https://auth.example/token"
    token_url = f"{realm}?service=mirror&scope=repository%3Anvidia%2Fcuda%3Apull"
    fake = FakeTransport(
        {manifest: 401, token_url: 200},
        headers={manifest: {"WWW-Authenticate": f'Bearer realm="{realm}",service="mirror"'}},
        bodies={token_url: body},
    )
    status, code, _ = T.RegistryClient(fake, registry=reg).exists("nvidia/cuda", "12.4.1-base-ubuntu22.04")
    assert (status, code) == ("unknown", 401)
    assert [(m, u) for m, u, _, _ in fake.requests] == [("HEAD", manifest), ("GET", token_url)]


def test_registry_host_in_the_repository_is_asked_directly():
    assert T.split_repository("ghcr.io/acme/cuda") == ("ghcr.io", "acme/cuda")
    assert T.split_repository("localhost/x") == ("localhost", "x")
    assert T.split_repository("ubuntu") == (None, "library/ubuntu")
    assert T.split_repository("nvidia/cuda") == (None, "nvidia/cuda")
    fake = FakeTransport(default=404)
    T.RegistryClient(fake).exists("ghcr.io/acme/cuda", "1.0")
    assert fake.requests[0][:2] == ("HEAD", "https://ghcr.io/v2/acme/cuda/manifests/1.0")


def test_credentials_come_from_the_environment_only():
    c = T.make_client("https://m.example", env={T.TOKEN_ENV: "abc"}, transport=FakeTransport())
    assert c.token == "abc" and c.registry == "https://m.example"
    c = T.make_client(None, env={T.USER_ENV: "u", T.PASSWORD_ENV: "p"}, transport=FakeTransport())
    assert c.credentials == ("u", "p") and c.registry is None
    with pytest.raises(UserError):
        T.make_client("mirror.example", env={})


# --- the command, against a local registry stand-in -------------------------------------------------


class Registry(BaseHTTPRequestHandler):
    """A tiny registry v2: every nvidia/cuda tag exists except ones containing "10.0", behind a
    token; every other repository is empty."""

    def log_message(self, *a):
        pass

    def do_GET(self):
        if self.path.startswith("/token"):
            body = json.dumps({"token": "local"}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(404)
        self.end_headers()

    def do_HEAD(self):
        if self.headers.get("Authorization") != "Bearer local":
            self.send_response(401)
            host = self.headers.get("Host")
            self.send_header("WWW-Authenticate", f'Bearer realm="http://{host}/token",service="local"')
            self.end_headers()
            return
        present = self.path.startswith("/v2/nvidia/cuda/manifests/") and "10.0" not in self.path
        self.send_response(200 if present else 404)
        self.end_headers()


@pytest.fixture
def local_registry():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Registry)
    t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def envman(*args):
    env = {k: v for k, v in os.environ.items() if k not in ("ENVMAN_MATRIX", T.TOKEN_ENV)}
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    return run_envman(args, env=env, cwd=ROOT)


@pytest.mark.skipif(not (ROOT / "matrices" / "images.toml").exists(), reason="shipped matrix files are not present")
def test_cli_check_tags_against_a_local_registry(local_registry):
    p = envman("matrix", "check-tags", "--registry", local_registry, "--json")
    out = json.loads(p.stdout)
    assert out["api"] == "v2" and out["reachable"] and out["registry"] == local_registry
    by = {t["ref"]: t for t in out["tags"]}
    cuda = [t for t in out["tags"] if t["repository"] == "nvidia/cuda"]
    assert cuda and all(t["registry_status"] == ("missing" if "10.0" in t["tag"] else "present") for t in cuda)
    # the ubuntu CPU bases are not in this registry: the ones the matrix calls published disappeared
    assert by["ubuntu:22.04"]["verdict"] == "disappeared"
    assert p.returncode == 1
    human = envman("matrix", "check-tags", "--registry", local_registry)
    assert human.returncode == 1 and "disappeared ubuntu:22.04" in human.stdout


def test_cli_check_tags_unreachable_is_one_line_and_exit_3():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = envman("matrix", "check-tags", "--registry", f"http://127.0.0.1:{port}", "--timeout", "2")
    assert p.returncode == 3, (p.stdout, p.stderr)
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("envman: error: registry unreachable: http://127.0.0.1:")
    j = envman("matrix", "check-tags", "--registry", f"http://127.0.0.1:{port}", "--json", "--timeout", "2")
    assert j.returncode == 3 and json.loads(j.stdout)["reachable"] is False
    assert {t["verdict"] for t in json.loads(j.stdout)["tags"]} == {"unknown"}
