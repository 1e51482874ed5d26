"""Tests of ``envman/run/grammar.py``, moved unchanged from the former ``test_daily_use.py``
(which tested several modules)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from envman.run import grammar
from tests.unit.run.test_envs import envman_helper  # noqa: F401 (shared with that file)


@pytest.mark.parametrize("words, options, command", [
    (["alpha", "python", "-V"], ["alpha"], ["python", "-V"]),
    (["--stack", "s", "alpha", "python", "-V"], ["--stack", "s", "alpha"], ["python", "-V"]),
    (["--stack=s", "alpha", "ls", "--stack"], ["--stack=s", "alpha"], ["ls", "--stack"]),
    (["-p8888", "alpha", "ls"], ["-p8888", "alpha"], ["ls"]),
    (["alpha", "--no-gpu", "-e", "A=1", "sh", "-c", "x"], ["alpha", "--no-gpu", "-e", "A=1"], ["sh", "-c", "x"]),
    (["alpha", "--gpus", "all"], ["alpha", "--gpus", "all"], []),
    (["--no-gpu"], ["--no-gpu"], []),
    (["-d", "--name", "bg", "alpha"], ["-d", "--name", "bg", "alpha"], []),
])
def test_bare_command_starts_at_the_second_positional(words, options, command):
    assert grammar.split(grammar.RUN, words) == (options, command)


@pytest.mark.parametrize("cmd", [["run"], ["exec"], ["shell"], ["build"], ["ps"], ["stop"], ["matrix", "ls"], ["doctor"]])
def test_help_has_no_type_placeholders_and_run_looks_like_the_rest(cmd):
    p = envman_helper(*cmd, "--help")
    assert p.returncode == 0, p.stderr
    assert "╭─ Options" in p.stdout and not re.search(r"<(bool|str|int|list\[|Path|path)", p.stdout), p.stdout


def test_help_after_the_command_belongs_to_the_command(tmp_path):
    # `envman run P CMD --help` is CMD's --help: envman goes on to the run (and fails here: no project)
    p = envman_helper("run", "nosuchproject", "python", "--help", cwd=tmp_path,
                env={"ENVMAN_CONFIG_DIR": str(tmp_path), "ENVMAN_STATE_DIR": str(tmp_path)})
    assert p.returncode == 2 and "Usage" not in p.stdout and "nosuchproject" in p.stderr, (p.stdout, p.stderr)


def test_two_commands_and_shell_arguments_are_one_line_errors(tmp_path):
    env = {"ENVMAN_CONFIG_DIR": str(tmp_path), "ENVMAN_STATE_DIR": str(tmp_path)}
    p = envman_helper("run", "x", "true", "--", "false", cwd=tmp_path, env=env)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "once" in p.stderr
    p = envman_helper("shell", "x", "ls", cwd=tmp_path, env=env)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "takes no command" in p.stderr
    p = envman_helper("run", "--name", "no good", "x", cwd=tmp_path, env=env)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--name" in p.stderr
