"""Fixtures of the security-rule tests: a private home and state folder, and a project whose folder name
and command drive a terminal."""

from __future__ import annotations

import pytest

from envman.project import policy

from tests.support.security_rules import HOSTILE_CMD, HOSTILE_DIR, STACK


@pytest.fixture
def home(tmp_path, monkeypatch):
    h = tmp_path / "home" / "me"
    (h / "data").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "cfg"))
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    policy._CACHE.clear()
    return h


@pytest.fixture
def hostile(home, tmp_path):
    root = tmp_path / HOSTILE_DIR
    root.mkdir()
    (root / "envman.toml").write_text(STACK + HOSTILE_CMD + 'mounts = ["./data:/d"]\n')
    (root / "data").mkdir()
    return root
