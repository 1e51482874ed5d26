"""The wheel store's HTTP server (envman/engine/wheelserver.py): a find-links page of exactly the
build's wheels with their sha256, each wheel served whole, nothing else (no other file, no path
outside the store), and the server gone when the block ends."""

from __future__ import annotations

import hashlib
import time
import urllib.error
import urllib.request

import pytest

from envman.engine.wheelserver import ServedFile, serve


@pytest.fixture
def wheels(tmp_path):
    out = []
    for name, body in (("b-1.0-py3-none-any.whl", b"B" * 3_000_000), ("a<x>-1.0-py3-none-any.whl", b"A")):
        p = tmp_path / name.replace("<", "_").replace(">", "_")
        p.write_bytes(body)
        out.append(ServedFile(name, hashlib.sha256(body).hexdigest(), p))
    (tmp_path / "secret.txt").write_text("not a wheel")
    return out


def _get(base: str, path: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(base + path, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, b""


def test_the_page_lists_every_wheel_with_its_hash_escaped_and_sorted(wheels):
    with serve("127.0.0.1", wheels, port=0) as server:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        status, page = _get(base, "/")
    text = page.decode()
    assert status == 200
    assert text.index("a&lt;x&gt;-1.0") < text.index("b-1.0")  # sorted, and the name escaped
    for w in wheels:
        assert f"#sha256={w.sha256}" in text
    assert "<x>" not in text


def test_a_wheel_is_served_whole_and_recorded(wheels):
    with serve("127.0.0.1", wheels, port=0) as server:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        status, body = _get(base, "/b-1.0-py3-none-any.whl")
        assert status == 200 and hashlib.sha256(body).hexdigest() == wheels[0].sha256
        assert _get(base, "/a%3Cx%3E-1.0-py3-none-any.whl")[0] == 200  # a quoted name is unquoted first
        deadline = time.monotonic() + 10  # recorded once the answer is written: wait for the handler
        while len(server.served) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.served == ["b-1.0-py3-none-any.whl", "a<x>-1.0-py3-none-any.whl"]


@pytest.mark.parametrize("path", ["/secret.txt", "/../secret.txt", "/%2e%2e/secret.txt", "/b-1.0-py3-none-any.whl/",
                                  "/nope.whl", "/b-1.0-py3-none-any.whl%00"])
def test_nothing_but_the_listed_wheels_is_served(wheels, path):
    with serve("127.0.0.1", wheels, port=0) as server:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        assert _get(base, path)[0] == 404
        assert server.served == []


def test_the_server_is_gone_when_the_block_ends(wheels):
    with serve("127.0.0.1", wheels, port=0) as server:
        port = server.server_address[1]
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2)
