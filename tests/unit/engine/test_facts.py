"""Tests of ``envman/engine/facts.py``, moved unchanged from the former ``test_runner.py``
(which tested several modules)."""

from __future__ import annotations

import json
import subprocess

import pytest

from envman.errors import EngineError
from envman.engine.api import ImageInfo
from envman.engine.facts import DockerFacts

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


class NetworkSocket:
    """An engine socket that answers the network requests with ``status`` and ``body``."""

    def __init__(self, tmp_path, status, body):
        import threading

        from tests.support.socket_engine import SocketEngine

        class Srv(SocketEngine):
            def answer_request(self, method, path, payload):
                self.seen = (method, path, payload)
                return status, body

        self.path = str(tmp_path / "e.sock")
        self.srv = Srv(self.path)
        threading.Thread(target=self.srv.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()

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
    sock = NetworkSocket(tmp_path, status, body)
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
