"""envman.engine.docker without a daemon: an unreachable engine is one line, the SDK is imported only
when an engine is asked for, and labels stay in envman's namespace."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from envman.engine.docker import Engine
from envman.errors import EngineError, UserError

# --------------------------------------------------------------------------- connection


def test_unreachable_engine_is_one_line(tmp_path: Path) -> None:
    url = f"unix://{tmp_path}/nothing-here.sock"
    with pytest.raises(EngineError) as info:
        Engine.connect(base_url=url, timeout=2)
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith(f"Docker engine not reachable at {url}")
    assert "start dockerd" in text and "DOCKER_HOST" in text


def test_unreachable_engine_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"unix://{tmp_path}/absent.sock"
    monkeypatch.setenv("DOCKER_HOST", url)
    with pytest.raises(EngineError, match="not reachable at unix://"):
        Engine.connect(timeout=2)


def test_importing_engine_does_not_import_docker() -> None:
    code = "import sys, envman.engine.docker; sys.exit(1 if 'docker' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_labels_outside_namespace_are_refused() -> None:
    from envman.labels import with_managed as _with_managed

    assert _with_managed({"envman.project": "p"}) == {"envman.project": "p", "envman.managed": "true"}
    with pytest.raises(UserError, match="outside"):
        _with_managed({"maintainer": "x"})


