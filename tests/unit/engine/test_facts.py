"""Tests of ``envman/engine/facts.py``, moved unchanged from the former ``test_runner.py``
(which tested several modules)."""

from __future__ import annotations

import json
import subprocess

import pytest

from envman.errors import EngineError
from envman.engine.api import ImageInfo
from envman.engine.facts import DockerFacts
from envman.engine.select import EngineKind

from tests.unit.run.test_plan import dirs  # noqa: F401 (shared with that file)


def cli_runner(results):
    calls = []

    def run(args):
        calls.append(args)
        rc, out, err = results[args[0]]
        return subprocess.CompletedProcess(["docker", *args], rc, out, err)

    run.calls = calls
    return run


def test_docker_cli_inspect_and_info():
    d = DockerFacts(runner=cli_runner({
        "image": (0, json.dumps({"Id": "sha256:abc"}) + "\n", ""),
        "info": (0, json.dumps({"ServerVersion": "27.3.1", "Runtimes": {"runc": {}, "nvidia": {}}, "CDISpecDirs": ["/etc/cdi"]}), ""),
    }))
    assert d.inspect_image("envman/x:latest") == ImageInfo("sha256:abc")
    info = d.info()
    assert info.nvidia_runtime and info.runtimes == ("nvidia", "runc") and info.cdi_spec_dirs == ("/etc/cdi",)


def test_docker_cli_missing_image_and_unreachable_engine():
    d = DockerFacts(runner=cli_runner({"image": (1, "", "Error response from daemon: No such image: envman/x:latest\n")}))
    assert d.inspect_image("envman/x:latest") is None
    down = DockerFacts(runner=cli_runner({
        "image": (1, "", "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?\n"),
        "info": (1, json.dumps({"ServerErrors": ["Cannot connect to the Docker daemon"]}), ""),
    }))
    with pytest.raises(EngineError, match="Docker engine not reachable: Cannot connect"):
        down.inspect_image("envman/x:latest")
    with pytest.raises(EngineError, match="not reachable"):
        down.info()


# --------------------------------------------------------------------------- networks


class EngineSocket:
    """An engine socket on a thread: ``respond(method, path, payload)`` gives each reply's
    (status, JSON body), ``headers[path]`` its extra headers; ``srv.requests`` keeps each path
    asked and ``srv.seen`` the last request."""

    def __init__(self, tmp_path, respond, headers=None):
        import threading

        from tests.support.socket_engine import SocketEngine

        class Srv(SocketEngine):
            def answer_request(self, method, path, payload):
                self.seen = (method, path, payload)
                return respond(method, path, payload)

            def headers(self, path):
                return (headers or {}).get(path, {})

        self.path = str(tmp_path / "e.sock")
        self.srv = Srv(self.path)
        threading.Thread(target=self.srv.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()

    @classmethod
    def answering(cls, tmp_path, answers, headers=None):
        """One that answers ``answers[path]`` (404 for any other path)."""
        return cls(tmp_path, lambda method, path, payload: answers.get(path, (404, {"message": "no"})), headers)

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


LABELS = {"envman.managed": "true", "envman.role": "network"}


@pytest.mark.parametrize("status,body,want", [
    (201, {"Id": "abc", "Warning": ""}, "abc"),
    (409, {"message": "network with name n already exists"}, None),
    (500, {"message": "could not find an available, non-overlapping IPv4 address pool"}, "error"),
    (403, {"message": "operation not permitted"}, "error"),
])
def test_create_network_on_the_socket(tmp_path, status, body, want):
    sock = EngineSocket(tmp_path, lambda method, path, payload: (status, body))
    try:
        facts = DockerFacts(socket=sock.path, runner=lambda a: pytest.fail(f"the CLI ran: {a}"))
        if want == "error":
            with pytest.raises(EngineError) as e:
                facts.create_network("n", LABELS)
            assert str(e.value).count("\n") == 0 and body["message"] in str(e.value)
        else:
            assert facts.create_network("n", LABELS) == want
        assert sock.srv.seen == ("POST", "/networks/create",
                                 {"Name": "n", "Driver": "bridge", "CheckDuplicate": True, "Labels": LABELS})
    finally:
        sock.close()


@pytest.mark.parametrize("rc,err,want", [(0, "", "abc"), (1, "Error response from daemon: network with name n already exists", None),
                                         (1, "Error response from daemon: permission denied", "error")])
def test_create_network_through_the_cli(rc, err, want):
    run = cli_runner({"network": (rc, "abc\n" if rc == 0 else "", err)})
    facts = DockerFacts(socket=None, runner=run)
    if want == "error":
        with pytest.raises(EngineError, match="permission denied"):
            facts.create_network("n", LABELS)
    else:
        assert facts.create_network("n", LABELS) == want
    assert run.calls == [["network", "create", "--driver", "bridge", "--label", "envman.managed=true",
                          "--label", "envman.role=network", "n"]]


def test_inspect_and_remove_network_through_the_cli():
    doc = {"Id": "abc", "Name": "n", "Driver": "bridge", "Labels": LABELS, "Containers": {"c1": {}},
           "Created": "2026-11-26T08:00:00Z"}
    facts = DockerFacts(socket=None, runner=cli_runner({"network": (0, json.dumps([doc]), "")}))
    info = facts.inspect_network("n")
    assert (info.id, info.driver, dict(info.labels), info.containers) == ("abc", "bridge", LABELS, 1)
    assert info.created == __import__("calendar").timegm((2026, 11, 26, 8, 0, 0))
    assert facts.remove_network("n") is True
    facts = DockerFacts(socket=None, runner=cli_runner({"network": (1, "", "Error: No such network: n")}))
    assert facts.inspect_network("n") is None and facts.remove_network("n") is False


DOCKER_VERSION = {"Version": "20.10.24", "ApiVersion": "1.41", "Components": [{"Name": "Engine", "Version": "20.10.24"}]}
DOCKER_INFO = {"ServerVersion": "20.10.24", "Runtimes": {"runc": {}, "nvidia": {}}, "SecurityOptions": ["name=seccomp"]}
#: /_ping's headers as Docker 20.10 and Podman 4.3 send them (read from the real engines here).
DOCKER_PING = {"Api-Version": "1.41", "Docker-Experimental": "false", "Ostype": "linux",
               "Server": "Docker/20.10.24+dfsg1 (linux)"}
PODMAN_PING = {"Api-Version": "1.41", "Libpod-Api-Version": "4.3.1", "Libpod-Buildah-Version": "1.28.2",
               "Server": "Libpod/4.3.1 (linux)"}


def test_kind_and_info_ask_ping_and_info_once_and_never_the_slow_version(tmp_path):
    sock = EngineSocket.answering(tmp_path, {"/_ping": (200, "OK"), "/version": (200, DOCKER_VERSION), "/info": (200, DOCKER_INFO)},
                        {"/_ping": DOCKER_PING})
    try:
        facts = DockerFacts(socket=sock.path, runner=lambda a: pytest.fail(f"the CLI ran: {a}"))
        info = facts.info()
        kind = facts.kind()
        assert (kind.kind, kind.version, kind.api_version, kind.rootless) == ("docker", "20.10.24", "1.41", False)
        assert info.kind == "docker" and "nvidia" in info.runtimes
        assert sorted(sock.srv.requests) == ["/_ping", "/info"]  # one of each, for both answers
    finally:
        sock.close()


def test_a_ping_naming_libpod_is_podman_with_its_release(tmp_path):
    libpod = {"host": {"security": {"rootless": True}}}
    sock = EngineSocket.answering(tmp_path, {"/_ping": (200, "OK"), "/info": (200, DOCKER_INFO), "/v4.0.0/libpod/info": (200, libpod)},
                        {"/_ping": PODMAN_PING})
    try:
        kind = DockerFacts(socket=sock.path, runner=lambda a: pytest.fail(f"the CLI ran: {a}")).kind()
        assert (kind.kind, kind.version, kind.api_version, kind.rootless) == ("podman", "4.3.1", "1.41", True)
        assert "/version" not in sock.srv.requests
    finally:
        sock.close()


def test_a_ping_without_an_api_version_leaves_it_to_version(tmp_path):
    """An engine whose /_ping names no API version: /version decides, as before."""
    sock = EngineSocket.answering(tmp_path, {"/_ping": (200, "OK"), "/version": (200, DOCKER_VERSION), "/info": (200, DOCKER_INFO)})
    try:
        kind = DockerFacts(socket=sock.path, runner=lambda a: pytest.fail(f"the CLI ran: {a}")).kind()
        assert (kind.kind, kind.api_version) == ("docker", "1.41")
        assert sorted(sock.srv.requests) == ["/_ping", "/info", "/version"]
    finally:
        sock.close()


def test_an_info_without_a_clean_answer_is_asked_again_then_the_cli_answers(tmp_path):
    """/info answering 500 beside a clean ping: the kind still comes from the ping, and info()
    asks the socket once more, then the CLI."""
    sock = EngineSocket.answering(tmp_path, {"/_ping": (200, "OK"), "/info": (500, {"message": "busy"})}, {"/_ping": DOCKER_PING})
    ran = []

    def cli(args):
        ran.append(args)
        return subprocess.CompletedProcess(args, 0, json.dumps(DOCKER_INFO), "")

    try:
        facts = DockerFacts(socket=sock.path, runner=cli)
        assert facts.info().server_version == "20.10.24"
        assert facts.kind().kind == "docker"
        assert sock.srv.requests.count("/info") == 2 and sock.srv.requests.count("/_ping") == 1
        assert ran == [["info", "--format", "{{json .}}"]]
    finally:
        sock.close()


def test_without_a_clean_ping_and_info_the_version_alone_decides(tmp_path):
    """/_ping and /info asked together with no clean answer between them: /version is asked
    alone and decides; no version at all is Docker (the default)."""
    podman = {"Version": "5.0.0", "ApiVersion": "1.41", "Components": [{"Name": "Podman Engine"}]}
    sock = EngineSocket.answering(tmp_path, {"/_ping": (500, "down"), "/info": (500, {"message": "busy"}), "/version": (200, podman),
                                             "/v4.0.0/libpod/info": (200, {"host": {"security": {"rootless": True}}})})
    try:
        kind = DockerFacts(socket=sock.path, runner=lambda a: pytest.fail(f"the CLI ran: {a}")).kind()
        assert (kind.kind, kind.version, kind.rootless) == ("podman", "5.0.0", True)
        assert sorted(sock.srv.requests) == ["/_ping", "/info", "/v4.0.0/libpod/info", "/version"]
    finally:
        sock.close()
    silent = DockerFacts(socket=str(tmp_path / "none.sock"), runner=lambda a: pytest.fail(f"the CLI ran: {a}"))
    assert silent.kind() == EngineKind("docker", "", False)


@pytest.mark.parametrize("headers, want", [
    ({}, None),
    ({"api-version": " "}, None),
    ({"api-version": "1.41"}, {"ApiVersion": "1.41"}),
    ({"api-version": "1.41", "libpod-api-version": "4.3.1"},
     {"Version": "4.3.1", "ApiVersion": "1.41", "Components": [{"Name": "Podman Engine", "Version": "4.3.1"}]}),
    ({"libpod-api-version": "4.3.1"}, None),  # no Docker API version: /version decides
])
def test_version_from_ping(headers, want):
    from envman.engine.select import version_from_ping

    assert version_from_ping(headers) == want
