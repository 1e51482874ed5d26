"""The engine contract (tests/support/engine_contract.py) against a real engine: the Docker SDK
engine, and the run path's client over the engine's Unix socket and, without a socket, through
the ``docker`` CLI. Each reader looks at what the SDK engine built, ran and tagged."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

import pytest

from envman.engine.docker import Engine
from envman.engine.facts import DockerFacts
from envman.engine.socket import local_socket
from tests.support.engine_contract import EngineContract

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def base_image(standin) -> str:
    return standin(standin.default)


class _OnRealEngine(EngineContract):
    @pytest.fixture
    def writer(self, docker_engine: Engine) -> Engine:
        return docker_engine

    @pytest.fixture
    def base(self, base_image: str) -> str:
        return base_image

    @pytest.fixture
    def labels(self, test_labels: dict) -> Mapping[str, str]:
        return {**test_labels, "envman.contract": uuid.uuid4().hex}


class TestDockerSdkEngine(_OnRealEngine):
    @pytest.fixture
    def reader(self, docker_engine: Engine) -> Engine:
        return docker_engine


class TestSocketClient(_OnRealEngine):
    @pytest.fixture
    def reader(self) -> DockerFacts:
        sock = local_socket()
        assert sock is not None, "the tests' engine is reached through a Unix socket"
        return DockerFacts(socket=sock, source="test")


class TestDockerCliClient(_OnRealEngine):
    @pytest.fixture
    def reader(self) -> DockerFacts:
        return DockerFacts(socket=None, source="test")
