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
