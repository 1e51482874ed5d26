"""The SDK-free Engine API client of the run path (envman/engine/socket.py): which socket the docker
CLI would use, one HTTP/1.0 request per call, and no answer believed that is not a clean one (a
missing socket, a reply that is not HTTP, a body that is not JSON, a ref that would need escaping)."""

from __future__ import annotations

import json
import os
import socket
import tempfile
import threading

import pytest

import envman.engine.socket as engine_socket
from envman.engine.socket import NoAnswer, api_get, api_request, image_path, object_ids


def test_local_socket_follows_docker_host_and_contexts(tmp_path):
    assert engine_socket.local_socket({"DOCKER_HOST": "unix:///run/user/1000/docker.sock"}) == "/run/user/1000/docker.sock"
    assert engine_socket.local_socket({"DOCKER_HOST": "tcp://10.0.0.5:2376"}) is None
    assert engine_socket.local_socket({"DOCKER_CONTEXT": "remote", "DOCKER_CONFIG": str(tmp_path)}) is None
    assert engine_socket.local_socket({"DOCKER_CONFIG": str(tmp_path)}) == engine_socket.DEFAULT_SOCKET
    (tmp_path / "config.json").write_text(json.dumps({"currentContext": "rootless"}))
    assert engine_socket.local_socket({"DOCKER_CONFIG": str(tmp_path)}) is None
    (tmp_path / "config.json").write_text(json.dumps({"currentContext": "default"}))
    assert engine_socket.local_socket({"DOCKER_CONFIG": str(tmp_path)}) == engine_socket.DEFAULT_SOCKET


@pytest.fixture
def engine():
    """A Unix socket that answers each connection with the next canned reply, keeping the requests."""
    folder = tempfile.mkdtemp(prefix="envman-sock-", dir="/tmp")  # a socket path has at most 107 bytes
    path = os.path.join(folder, "e.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(8)
    replies: list[bytes] = []
    requests: list[bytes] = []

    def serve():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                head, _, body = data.partition(b"\r\n\r\n")
                length = next((int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")), 0)
                while len(body) < length:
                    body += conn.recv(65536)
                requests.append(head + b"\r\n\r\n" + body)
                conn.sendall(replies.pop(0) if replies else b"")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield path, replies, requests
    server.close()
    os.unlink(path)
    os.rmdir(folder)


def _http(status: int, body: object | None) -> bytes:
    text = b"" if body is None else json.dumps(body).encode()
    return f"HTTP/1.0 {status} X\r\nContent-Type: application/json\r\n\r\n".encode() + text


def test_a_get_is_one_http_1_0_request_and_its_json_answer(engine):
    path, replies, requests = engine
    replies.append(_http(200, {"Id": "sha256:1"}))
    assert api_get(path, "/images/x:1/json") == (200, {"Id": "sha256:1"})
    assert requests[0].startswith(b"GET /images/x:1/json HTTP/1.0\r\n")


def test_a_request_with_a_body_sends_it_as_json_with_its_length(engine):
    path, replies, requests = engine
    replies.append(_http(201, None))
    assert api_request(path, "POST", "/networks/create", {"Name": "n"}) == (201, None)
    assert requests[0].endswith(b'\r\n\r\n{"Name": "n"}') and b"Content-Length: 13\r\n" in requests[0]


@pytest.mark.parametrize("reply", [b"", b"garbage", b"SSH-2.0-OpenSSH\r\n\r\n", b"HTTP/1.0 200 OK\r\n\r\n{not json"])
def test_a_reply_that_is_not_a_clean_answer_is_no_answer(engine, reply):
    path, replies, _ = engine
    replies.append(reply)
    with pytest.raises(NoAnswer):
        api_get(path, "/info")


def test_no_socket_or_a_missing_one_is_no_answer(tmp_path):
    with pytest.raises(NoAnswer):
        api_get(None, "/info")
    with pytest.raises(NoAnswer):
        api_get(str(tmp_path / "none.sock"), "/info")


@pytest.mark.parametrize("ref", ["", "a b", "a?x=1", "a#b", "x/../../containers/json", "é"])
def test_a_ref_that_would_need_escaping_is_never_put_in_a_path(ref):
    if ".." in ref:  # only characters of refs: the engine itself refuses such a name
        assert image_path(ref) == f"/images/{ref}/json"
        return
    with pytest.raises(NoAnswer):
        image_path(ref)


def test_ids_are_read_404_is_none_and_anything_else_is_doubt(engine):
    path, replies, requests = engine
    replies += [_http(200, {"Id": "sha256:a"}), _http(404, {"message": "no such image"}), _http(500, {}),
                _http(200, {"Id": 5})]
    assert object_ids(path, ["x:1"]) == ["sha256:a"]
    assert object_ids(path, ["x:2"]) == [None]
    for _ in range(2):
        with pytest.raises(NoAnswer):
            object_ids(path, ["x:3"])
    with pytest.raises(NoAnswer):
        object_ids(path, networks=["a/b"])  # a network name has no slash
    assert [r.split(b" ")[1] for r in requests] == [b"/images/x:1/json", b"/images/x:2/json", b"/images/x:3/json",
                                                     b"/images/x:3/json"]


@pytest.fixture
def gathering_engine():
    """A Unix socket that answers nothing until ``want`` requests have arrived, each on its own
    connection, then answers them last first: only a client that sends every request before it
    reads any answer gets its answers (a client that waits for each in turn times out)."""
    folder = tempfile.mkdtemp(prefix="envman-sock-", dir="/tmp")
    path = os.path.join(folder, "e.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(8)
    state: dict = {"want": 0, "answers": {}}

    def serve():
        waiting = []
        while len(waiting) < state["want"]:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            waiting.append((conn, data.split(b" ")[1].decode()))
        for conn, asked in reversed(waiting):
            status, body = state["answers"][asked]
            conn.sendall(_http(status, body))
            conn.close()

    yield path, state, lambda: threading.Thread(target=serve, daemon=True).start()
    server.close()
    os.unlink(path)
    os.rmdir(folder)


#: An image, an image the engine does not have, a network.
THREE_ANSWERS = {"/images/a:1/json": (200, {"Id": "sha256:a"}), "/images/b:1/json": (404, {"message": "no"}),
                 "/networks/n1": (200, {"Id": "net1"})}


def test_many_gets_are_all_sent_before_any_answer_is_read_and_come_back_in_order(gathering_engine):
    path, state, start = gathering_engine
    state["want"] = 3
    state["answers"] = THREE_ANSWERS
    start()
    got = engine_socket.api_get_many(path, ["/images/a:1/json", "/images/b:1/json", "/networks/n1"], timeout=5)
    assert got == [(200, {"Id": "sha256:a"}), (404, {"message": "no"}), (200, {"Id": "net1"})]


def test_object_ids_ask_images_then_networks_at_once(gathering_engine):
    path, state, start = gathering_engine
    state["want"] = 3
    state["answers"] = THREE_ANSWERS
    start()
    assert engine_socket.object_ids(path, ["a:1", "b:1"], ["n1"], ) == ["sha256:a", None, "net1"]


def test_a_sequential_client_would_wait_on_the_gathering_engine(gathering_engine):
    """The fixture's own check: asked one at a time, the first answer never comes."""
    path, state, start = gathering_engine
    state["want"] = 2
    state["answers"] = {"/images/a:1/json": (200, {"Id": "sha256:a"})}
    start()
    with pytest.raises(NoAnswer):
        api_get(path, "/images/a:1/json", timeout=0.5)


def test_object_ids_with_nothing_to_ask_ask_nothing():
    assert engine_socket.object_ids(None) == []
    assert engine_socket.api_get_many(None, []) == []


@pytest.mark.parametrize("images, networks", [(["bad ref"], []), ([], ["a/b"]), ([""], []), ([], [""])])
def test_object_ids_refuse_names_that_would_need_escaping_before_sending_anything(images, networks):
    with pytest.raises(NoAnswer):
        engine_socket.object_ids("/nonexistent.sock", images, networks)


def test_many_gets_without_a_socket_have_no_answer(tmp_path):
    with pytest.raises(NoAnswer):
        engine_socket.api_get_many(None, ["/images/a/json"])
    with pytest.raises(NoAnswer):
        engine_socket.api_get_many(str(tmp_path / "none.sock"), ["/images/a/json"])


def test_one_bad_answer_among_many_is_no_answer(engine):
    path, replies, requests = engine
    replies.extend([_http(200, {"Id": "sha256:1"}), b"garbage"])
    with pytest.raises(NoAnswer):
        engine_socket.object_ids(path, ["a:1", "b:1"])
