"""An index URL's ``user:token@`` goes to that host as an Authorization header, never to a host
it redirects to, and no message of the index client shows the token (a real HTTP server on
127.0.0.1)."""

from __future__ import annotations

import base64
import http.server
import threading

import pytest

from envman.errors import EnvmanError
from envman.matrix.index import Http

TOKEN = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"


class Handler(http.server.BaseHTTPRequestHandler):
    seen: list[tuple[str, str | None]] = []

    def do_GET(self):  # noqa: N802 - http.server's name
        Handler.seen.append((self.path, self.headers.get("Authorization")))
        if self.path == "/simple/torch/":
            want = "Basic " + base64.b64encode(f"u:{TOKEN}".encode()).decode()
            code = 200 if self.headers.get("Authorization") == want else 401
            self.send_response(code)
            self.end_headers()
            self.wfile.write(b"ok")
        elif self.path == "/moved/":
            self.send_response(302)
            self.send_header("Location", f"http://localhost:{self.server.server_port}/files/x")
            self.end_headers()
        else:
            self.send_response(404)
            self.end_headers()

    def log_message(self, *a):
        pass


@pytest.fixture
def server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    Handler.seen.clear()
    yield srv.server_port
    srv.shutdown()
    srv.server_close()


def test_the_credentials_of_an_index_url_are_sent_as_a_header(server):
    resp = Http(retries=0).get(f"http://u:{TOKEN}@127.0.0.1:{server}/simple/torch/")
    assert resp.status == 200 and resp.body == b"ok"
    assert TOKEN not in resp.url


def test_a_redirect_to_another_host_does_not_carry_them(server):
    with pytest.raises(EnvmanError):
        Http(retries=0).get(f"http://u:{TOKEN}@127.0.0.1:{server}/moved/")
    assert Handler.seen[0][1] is not None and Handler.seen[-1] == ("/files/x", None)


@pytest.mark.parametrize("path", ["/nothing/", "/moved/"])
def test_no_error_shows_the_token(server, path):
    with pytest.raises(EnvmanError) as e:
        Http(retries=0).get(f"http://u:{TOKEN}@127.0.0.1:{server}{path}")
    assert TOKEN not in e.value.line() and TOKEN not in str(e.value)


def test_an_unreachable_index_does_not_show_the_token():
    with pytest.raises(EnvmanError) as e:
        Http(retries=0, timeout=2).get(f"https://u:{TOKEN}@127.0.0.1:9/simple/torch/")
    assert TOKEN not in e.value.line() and "***@" in e.value.line()
