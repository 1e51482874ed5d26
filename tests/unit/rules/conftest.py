"""Fixtures of the security-rule tests: a private home and state folder, and a project whose folder name
and command drive a terminal."""

from __future__ import annotations

import pytest

from tests.support.security_rules import HOSTILE_CMD, HOSTILE_DIR, STACK, private_home


@pytest.fixture
def home(tmp_path, monkeypatch):
    return private_home(tmp_path, monkeypatch)


@pytest.fixture
def hostile(home, tmp_path):
    root = tmp_path / HOSTILE_DIR
    root.mkdir()
    (root / "envman.toml").write_text(STACK + HOSTILE_CMD + 'mounts = ["./data:/d"]\n')
    (root / "data").mkdir()
    return root
