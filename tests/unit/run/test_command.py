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
            return ImageInfo("sha256:stable") if ":latest" in ref else None

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


_PULL_CASES = [  # config.toml (None: no file) → whether a run pulls a missing stack image
    (None, False),
    ("", False),
    ("[registry]\n", False),
    ("[registry]\npull_on_run = true\n", False),  # no default registry to pull from
    ('[registry]\ndefault = "reg.example:5000"\n', False),
    ('[registry]\ndefault = "reg.example:5000"\npull_on_run = false\n', False),
    ('[registry]\ndefault = "reg.example:5000"\npull_on_run = true\n', True),
    ('[registry]\ndefault = "reg.example:5000/team"\npull_on_run = true\nallow_http = false\n', True),
]


@pytest.mark.parametrize(("text", "pulls"), _PULL_CASES)
def test_a_run_pulls_exactly_when_the_config_says_pull_on_run_with_a_default_registry(text, pulls):
    from envman.config import config_path
    from envman.run.command import pull_on_run_fetcher

    if text is not None:
        config_path().parent.mkdir(parents=True, exist_ok=True)
        config_path().write_text(text)
    assert callable(pull_on_run_fetcher()) is pulls


@pytest.mark.parametrize("text", [None, "", "[index]\n", "[registry]\n"])
def test_a_config_without_registry_settings_never_loads_the_registry_code(monkeypatch, text):
    import sys

    from envman.config import config_path
    from envman.run.command import pull_on_run_fetcher

    if text is not None:
        config_path().parent.mkdir(parents=True, exist_ok=True)
        config_path().write_text(text)
    monkeypatch.setitem(sys.modules, "envman.images.remote", None)  # importing it now fails
    assert pull_on_run_fetcher() is None


@pytest.mark.parametrize("text", ["registry = 1\n", '[registry]\npull_on_run = "yes"\n', '[registry]\ndefault = "reg"\n',
                                  "[registry]\nmirror = true\n"])
def test_registry_settings_a_run_cannot_read_are_refused_as_pull_refuses_them(text):
    from envman.images.remote import load_registry_settings
    from envman.config import config_path
    from envman.run.command import pull_on_run_fetcher
    from tests.support.refusal import refusal

    config_path().parent.mkdir(parents=True, exist_ok=True)
    config_path().write_text(text)
    got = refusal(pull_on_run_fetcher)
    assert got[0] == "UserError" and got == refusal(load_registry_settings)
