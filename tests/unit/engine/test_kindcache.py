"""The engine's kind kept per socket (envman/engine/kindcache.py): asked once per socket file,
asked again when the socket is made anew or the link points elsewhere, never kept when the answer
was not the engine's, never believed from a file that is not the user's own."""

from __future__ import annotations

import json
import os
import socket

import pytest

from envman.engine import kindcache
from envman.engine.select import EngineKind


class Engine:
    def __init__(self, sock, kind):
        self.socket = sock
        self._kind = kind
        self.asked = 0

    def kind(self):
        self.asked += 1
        return self._kind


ROOTLESS = EngineKind("docker", "20.10.24", True, "1.41")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(folder))
    monkeypatch.delenv(kindcache.SWITCH, raising=False)
    return folder


def _socket(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    return s


def test_the_kind_is_asked_once_per_socket_and_kept_privately(tmp_path, cache):
    s = _socket(tmp_path / "d.sock")
    try:
        first, second = Engine(str(tmp_path / "d.sock"), ROOTLESS), Engine(str(tmp_path / "d.sock"), None)
        assert kindcache.kind_for_run(first) == ROOTLESS and first.asked == 1
        assert kindcache.kind_for_run(second) == ROOTLESS and second.asked == 0
        f = cache / kindcache.KINDS_FILE
        assert oct(f.stat().st_mode & 0o777) == "0o600"
    finally:
        s.close()


def test_a_socket_made_anew_is_asked_again(tmp_path, cache):
    path = tmp_path / "d.sock"
    s = _socket(path)
    kindcache.kind_for_run(Engine(str(path), ROOTLESS))
    s.close()
    path.unlink()
    s = _socket(path)  # the daemon restarted: a new socket file under the same name
    try:
        podman = EngineKind("podman", "4.3.1", False, "1.41")
        again = Engine(str(path), podman)
        assert kindcache.kind_for_run(again) == podman and again.asked == 1
    finally:
        s.close()


def test_a_link_pointed_at_another_socket_is_asked_again(tmp_path, cache):
    a, b = _socket(tmp_path / "a.sock"), _socket(tmp_path / "b.sock")
    link = tmp_path / "docker.sock"
    try:
        link.symlink_to(tmp_path / "a.sock")
        kindcache.kind_for_run(Engine(str(link), ROOTLESS))
        link.unlink()
        link.symlink_to(tmp_path / "b.sock")
        podman = EngineKind("podman", "4.3.1", True, "1.41")
        again = Engine(str(link), podman)
        assert kindcache.kind_for_run(again) == podman and again.asked == 1
    finally:
        a.close()
        b.close()


def test_the_default_kind_of_an_engine_that_did_not_answer_is_never_kept(tmp_path, cache):
    s = _socket(tmp_path / "d.sock")
    try:
        kindcache.kind_for_run(Engine(str(tmp_path / "d.sock"), EngineKind("docker", "", False)))
        assert not (cache / kindcache.KINDS_FILE).exists()
    finally:
        s.close()


def test_no_socket_or_the_switch_off_asks_every_time(tmp_path, cache, monkeypatch):
    e = Engine(None, ROOTLESS)
    kindcache.kind_for_run(e)
    kindcache.kind_for_run(e)
    assert e.asked == 2 and not cache.exists()
    s = _socket(tmp_path / "d.sock")
    try:
        monkeypatch.setenv(kindcache.SWITCH, "0")
        e = Engine(str(tmp_path / "d.sock"), ROOTLESS)
        kindcache.kind_for_run(e)
        kindcache.kind_for_run(e)
        assert e.asked == 2 and not cache.exists()
    finally:
        s.close()


def test_a_missing_socket_is_asked_and_nothing_kept(tmp_path, cache):
    e = Engine(str(tmp_path / "gone.sock"), ROOTLESS)
    assert kindcache.kind_for_run(e) == ROOTLESS and e.asked == 1
    assert not (cache / kindcache.KINDS_FILE).exists()


@pytest.mark.parametrize("kind", [
    ["docker", "20.10", "yes", "1.41"],  # rootless not a boolean
    ["dockerd", "20.10", False, "1.41"],  # no engine of envman's
    ["docker", 20, False, "1.41"],
    ["docker", "20.10", False],
    "docker",
])
def test_a_kept_entry_of_the_wrong_shape_is_a_miss(tmp_path, cache, kind):
    s = _socket(tmp_path / "d.sock")
    try:
        path = str(tmp_path / "d.sock")
        cache.mkdir(mode=0o700)
        f = cache / kindcache.KINDS_FILE
        f.write_text(json.dumps({"format": kindcache.CACHE_FORMAT,
                                 "sockets": {path: {"id": kindcache.socket_identity(path), "kind": kind}}}))
        f.chmod(0o600)
        e = Engine(path, ROOTLESS)
        assert kindcache.kind_for_run(e) == ROOTLESS and e.asked == 1
    finally:
        s.close()


def test_a_file_others_may_write_is_not_believed(tmp_path, cache):
    s = _socket(tmp_path / "d.sock")
    try:
        path = str(tmp_path / "d.sock")
        cache.mkdir(mode=0o700)
        f = cache / kindcache.KINDS_FILE
        planted = EngineKind("docker", "20.10.24", False, "1.41")  # says rootful where the engine is rootless
        f.write_text(json.dumps({"format": kindcache.CACHE_FORMAT, "sockets": {path: {
            "id": kindcache.socket_identity(path), "kind": ["docker", "20.10.24", False, "1.41"]}}}))
        f.chmod(0o666)
        e = Engine(path, ROOTLESS)
        assert kindcache.kind_for_run(e) == ROOTLESS != planted and e.asked == 1
    finally:
        s.close()


def test_only_the_last_sockets_are_kept(tmp_path, cache, monkeypatch):
    monkeypatch.setattr(kindcache, "MAX_SOCKETS", 2)
    socks = [_socket(tmp_path / f"{i}.sock") for i in range(3)]
    try:
        for i in range(3):
            kindcache.kind_for_run(Engine(str(tmp_path / f"{i}.sock"), ROOTLESS))
        kept = json.loads((cache / kindcache.KINDS_FILE).read_text())["sockets"]
        assert sorted(kept) == [str(tmp_path / "1.sock"), str(tmp_path / "2.sock")]
    finally:
        for s in socks:
            s.close()


def test_an_unwritable_cache_folder_still_answers(tmp_path, monkeypatch):
    s = _socket(tmp_path / "d.sock")
    try:
        blocker = tmp_path / "file"
        blocker.write_text("")
        monkeypatch.setenv("ENVMAN_CACHE_DIR", str(blocker / "cache"))  # under a file: cannot be made
        e = Engine(str(tmp_path / "d.sock"), ROOTLESS)
        assert kindcache.kind_for_run(e) == ROOTLESS
    finally:
        s.close()
    assert os.path.isfile(blocker)
