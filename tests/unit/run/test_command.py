"""Tests of ``envman/run/command.py``, moved unchanged from the former ``test_runner.py``
(which tested several modules)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from envman.engine.api import ImageInfo

from tests.support.fake_engine import FakeEngine

from tests.unit.run.test_plan import dirs, write_report  # noqa: F401 (shared with that file)


def test_cli_run_dry_run_splits_at_double_dash(tmp_path, monkeypatch, capsys):
    import envman.run.command as runner
    from envman.cli import main

    class AnyStable(FakeEngine):  # the stack's canonical name depends on the shipped matrix too
        def inspect_image(self, ref):
            return ImageInfo("sha256:stable") if ref.endswith(":latest") else None

    write_report("sha256:stable")
    monkeypatch.setattr(runner, "docker_facts", lambda: AnyStable())
    proj = tmp_path / "p"
    proj.mkdir()
    (proj / "envman.toml").write_text('name = "p"\nstack = "torch-2.4-cpu"\n')
    monkeypatch.chdir(proj)
    matrix = [a for f in sorted((Path(__file__).parents[2] / "data").glob("mini*.toml")) for a in ("--matrix", str(f))]
    with pytest.raises(SystemExit) as e:
        main([*matrix, "run", "--dry-run", "--json", "-p", "8888", "--", "python", "--version", "--gpus", "x"])
    assert e.value.code in (0, None)
    out = json.loads(capsys.readouterr().out)
    assert out["argv"][-4:] == ["python", "--version", "--gpus", "x"]  # after `--`: the command, untouched
    assert out["plan"]["gpus"] is None  # a CPU stack asks for no GPU by default
    assert "127.0.0.1:8888:8888" in out["argv"] and out["plan"]["uid"] == os.getuid()


def test_cli_malformed_project_file_is_exit_2(tmp_path, monkeypatch, capsys):
    from envman.cli import main

    (tmp_path / "envman.toml").write_text('stack = "torch-2.4"\nshm_size = "huge"\n')
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        main(["run", "--", "true"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1
    assert err.startswith(f"envman: error: {tmp_path / 'envman.toml'}: key shm_size: expected")
