"""The engine contract (tests/support/engine_contract.py) on the tests' fake engine: no daemon."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

import pytest

from tests.support.engine_contract import EngineContract
from tests.support.fake_engine import FakeEngine
from tests.support.standin import FIXTURE_LABEL

BASE = "envman-test/rootfs:bookworm"


class TestFakeEngine(EngineContract):
    @pytest.fixture
    def writer(self) -> FakeEngine:
        engine = FakeEngine()
        engine.add_image(BASE, labels=FIXTURE_LABEL, created=1_700_000_000)
        return engine

    @pytest.fixture
    def reader(self, writer: FakeEngine) -> FakeEngine:
        return writer

    @pytest.fixture
    def base(self) -> str:
        return BASE

    @pytest.fixture
    def labels(self) -> Mapping[str, str]:
        return {"envman.test": uuid.uuid4().hex}
