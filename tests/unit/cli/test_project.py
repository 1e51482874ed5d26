"""Tests of ``envman/cli/project.py``, moved unchanged from the former ``test_runner.py``
(which tested several modules)."""

from __future__ import annotations

import json

import pytest

from envman.project.file import load_project
from envman.stack.resolve import resolve

from tests.unit.run.test_plan import dirs  # noqa: F401 (shared with that file)


def test_cli_project_init_and_ls(tmp_path, monkeypatch, capsys):
    from envman.cli import get_matrix, main
    from envman.stack.resolve import resolve

    (tmp_path / "demo").mkdir()
    monkeypatch.chdir(tmp_path / "demo")
    with pytest.raises(SystemExit) as e:
        main(["project", "init", "--env", "torch-2.4-cuda12"])
    assert e.value.code in (0, None)
    assert (tmp_path / "demo" / "envman.toml").is_file()
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["project", "ls", "--json"])
    rows = json.loads(capsys.readouterr().out)
    pinned = resolve(get_matrix(), "torch-2.4-cuda12").name  # the pinned name, not what was typed
    assert rows == [{"name": "demo", "root": str((tmp_path / "demo").resolve()), "stack": pinned, "error": None}]
    with pytest.raises(SystemExit) as e:
        main(["project", "init", "--env", "torch-2.4-cuda12"])
    assert e.value.code == 2 and "already exists" in capsys.readouterr().err


@pytest.mark.parametrize("has_requirements", [True, False])
def test_project_init_uses_the_folders_requirements_and_pins_the_stack(tmp_path, monkeypatch, capsys, has_requirements):
    """A folder with requirements.txt gets it in the new project file (it was written commented
    out, and the first run failed with ModuleNotFoundError); the stack is stored as the pinned
    name the typed one resolves to."""
    from envman.cli import get_matrix, main
    from envman.stack.resolve import resolve
    from envman.project.file import load_project

    (tmp_path / "demo").mkdir()
    if has_requirements:
        (tmp_path / "demo" / "requirements.txt").write_text("einops==0.8.1\n")
    monkeypatch.chdir(tmp_path / "demo")
    with pytest.raises(SystemExit) as e:
        main(["project", "init", "--env", "torch-2.4-cuda12"])
    assert e.value.code in (0, None)
    p = load_project(tmp_path / "demo")
    assert p.stack == resolve(get_matrix(), "torch-2.4-cuda12").name != "torch-2.4-cuda12"
    assert resolve(get_matrix(), p.stack).name == p.stack
    assert p.requirements == ("einops==0.8.1\n" if has_requirements else "")
    assert ("requirements from requirements.txt" in capsys.readouterr().out) == has_requirements
