"""The console script (envman/main.py): --version without the CLI, run/exec/shell straight to the
run path (its --help left to the full CLI), everything else to the typer CLI, every failure one
line through the one error boundary."""

from __future__ import annotations

import subprocess
import sys

import pytest

from envman import __version__
from envman.main import main


def test_version_is_printed_without_loading_the_cli():
    code = ("import sys; from envman.main import main\n"
            "try:\n    main(['--version'])\nexcept SystemExit as e:\n"
            "    print('cli' if 'envman.cli' in sys.modules else 'no cli', e.code)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out == f"envman {__version__}\nno cli 0\n"


def test_an_unknown_command_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "c"))
    with pytest.raises(SystemExit) as e:
        main(["no-such-command"])
    out, err = capsys.readouterr()
    assert e.value.code == 2 and out == "" and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("command", ["run", "exec", "shell"])
def test_the_run_commands_help_comes_from_the_full_cli(tmp_path, monkeypatch, capsys, command):
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "c"))
    with pytest.raises(SystemExit) as e:
        main([command, "--help"])
    out, _ = capsys.readouterr()
    assert (e.value.code or 0) == 0 and f"envman {command}" in out and "--" in out


def test_a_run_of_a_project_that_does_not_exist_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "s"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        main(["run", "no-such-project-[x]", "--", "true"])
    out, err = capsys.readouterr()
    assert e.value.code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "Traceback" not in err
