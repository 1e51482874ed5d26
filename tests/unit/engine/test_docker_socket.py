"""The Engine on a Unix socket: pinged and read over the socket, the Docker SDK imported only when
something else is asked (a build path that finds its image cached never loads it)."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from envman.engine.docker import Engine
from envman.errors import EngineError
from tests.support.socket_engine import SocketEngine

VERSION = {"Version": "20.10.24", "ApiVersion": "1.41", "Components": [{"Name": "Engine", "Version": "20.10.24"}]}
INFO = {"ServerVersion": "20.10.24", "Runtimes": {"runc": {}}, "DefaultRuntime": "runc", "SecurityOptions": []}
IMAGE = {"Id": "sha256:" + "a" * 64, "RepoTags": ["envman/s:latest"], "Config": {"Labels": {"envman.managed": "true"}},
         "RootFS": {"Layers": ["sha256:" + "b" * 64]}, "Size": 10, "Created": "2026-11-28T00:00:00Z"}


class _Engine(SocketEngine):
    def headers(self, path):  # as Docker 20.10 sends them
        return {"Api-Version": "1.41"} if path.endswith("/_ping") else {}

    def answer(self, path):
        if path.endswith("/_ping"):
            return 200, "OK"
        if path.endswith("/version"):
            return 200, VERSION
        if path.endswith("/info"):
            return 200, INFO
        if path == "/images/envman/s:latest/json":
            return 200, IMAGE
        return 404, {"message": "No such image"}


@pytest.fixture
def engine_socket(tmp_path):
    path = str(tmp_path / "engine.sock")
    srv = _Engine(path)
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    yield path, srv
    srv.shutdown()
    srv.server_close()


def test_reads_go_over_the_socket_and_the_sdk_is_never_loaded(engine_socket):
    path, _ = engine_socket
    code = (
        "import sys\nfrom envman.engine.docker import Engine\n"
        f"e = Engine.connect(base_url='unix://{path}', timeout=5)\n"
        "img = e.inspect_image('envman/s:latest')\n"
        "assert img is not None and img.id == 'sha256:' + 'a' * 64 and img.labels['envman.managed'] == 'true'\n"
        "assert e.inspect_image('envman/none:latest') is None\n"
        "info = e.info()\n"
        "assert info.api_version == '1.41' and e.kind().kind == 'docker'\n"
        "e.close()\n"
        "sys.exit(3 if 'docker' in sys.modules else 0)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr


def test_the_socket_is_pinged_and_the_kind_asked_without_the_slow_version(engine_socket):
    """connect pings; kind() and info() ask /_ping and /info once, together; /version (Docker
    asks containerd and runc for theirs) is never asked of an engine whose ping names its API."""
    path, srv = engine_socket
    e = Engine.connect(base_url=f"unix://{path}", timeout=5)
    info = e.info()
    assert (e.kind().kind, e.kind().api_version, info.server_version) == ("docker", "1.41", "20.10.24")
    assert sorted(srv.requests) == ["/_ping", "/_ping", "/info"] and e._client is None


def test_an_engine_whose_ping_names_no_api_is_asked_its_version(tmp_path):
    class Quiet(_Engine):
        def headers(self, path):
            return {}

    path = str(tmp_path / "engine.sock")
    srv = Quiet(path)
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    try:
        e = Engine.connect(base_url=f"unix://{path}", timeout=5)
        assert e._client is None and e.kind().api_version == "1.41"
        assert srv.requests.count("/version") == 2 and not any(r.startswith("/v1.") for r in srv.requests)
    finally:
        srv.shutdown()
        srv.server_close()


def test_the_socket_is_asked_once_per_read(engine_socket):
    path, srv = engine_socket
    e = Engine.connect(base_url=f"unix://{path}", timeout=5)
    srv.requests.clear()
    e.inspect_image("envman/s:latest")
    assert srv.requests == ["/images/envman/s:latest/json"]


def test_a_ref_the_socket_path_cannot_carry_goes_to_the_sdk(engine_socket):
    path, srv = engine_socket
    e = Engine.connect(base_url=f"unix://{path}", timeout=5)
    srv.requests.clear()
    assert e._client is None
    assert e.inspect_image("bad ref?x=1") is None  # the fake engine has no such image
    # asked through the SDK (connected now), never on a socket path built from the ref
    assert e._client is not None and "/v1.41/_ping" in srv.requests
    assert not any(r.startswith("/images/bad") for r in srv.requests), srv.requests
    assert any(r.startswith("/v1.41/images/bad") for r in srv.requests), srv.requests


def test_a_socket_that_is_not_an_engine_is_not_believed(tmp_path):
    class NotEngine(SocketEngine):
        def answer(self, path):
            return 200, {"hello": "world"}  # no ApiVersion

    path = str(tmp_path / "x.sock")
    srv = NotEngine(path)
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    try:
        with pytest.raises(EngineError, match="not reachable"):
            Engine.connect(base_url=f"unix://{path}", timeout=2)
    finally:
        srv.shutdown()
        srv.server_close()
