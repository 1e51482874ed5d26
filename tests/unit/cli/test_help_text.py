"""Every command's ``--help`` renders, and says what its source says.

The help is rich markup: a literal ``[build]`` or ``[/PREFIX]`` in a help string would be read as a
style tag, silently dropped or a crash. Each command path's help is rendered wide, and every
option's help text must appear in it as written (rich's escapes removed)."""

from __future__ import annotations

import re

import pytest
import typer.main
from typer.testing import CliRunner

from envman.cli import app


def _paths(cmd, prefix: tuple[str, ...] = ()) -> list:
    out = [(prefix, cmd)]
    if hasattr(cmd, "commands"):  # a group (typer's own click)
        for name, sub in sorted(cmd.commands.items()):
            out += _paths(sub, (*prefix, name))
    return out


ROOT = typer.main.get_command(app)
PATHS = _paths(ROOT)


def _flat(text: str) -> str:
    text = re.sub(r"[│╭╮╰╯─]", " ", text)
    return " ".join(text.split())


def test_the_tree_has_the_commands_users_rely_on():
    names = {" ".join(p) for p, _ in PATHS}
    assert {"run", "build", "push", "pull", "submit", "project init", "matrix update"} <= names


@pytest.mark.parametrize("path", [p for p, _ in PATHS], ids=lambda p: " ".join(p) or "envman")
def test_help_renders_every_option_as_written(path):
    cmd = dict(PATHS)[path]
    r = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "2000", "TERM": "dumb", "NO_COLOR": "1"},
                           terminal_width=2000)
    assert r.exit_code == 0, r.output
    shown = _flat(r.output)
    for param in cmd.params:
        text = getattr(param, "help", None)
        if not text or getattr(param, "hidden", False):
            continue
        expected = _flat(text.replace("\\[", "["))
        assert expected in shown, (param.name, expected)


@pytest.mark.parametrize("path", [p for p, _ in PATHS], ids=lambda p: " ".join(p) or "envman")
def test_help_sent_to_a_pipe_is_not_cut(path):
    """`envman build --help | less` showed `python-build-standa…`: help to a pipe was laid out at
    rich's 80 columns. No line of any command's piped help may be cut short."""
    import os

    from tests.support.cli import run_envman

    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "TERMINAL_WIDTH", "LINES")}
    r = run_envman([*path, "--help"], env={**env, "TERM": "dumb", "NO_COLOR": "1"})
    assert r.returncode == 0, r.stderr
    cut = [line for line in r.stdout.splitlines() if re.search(r"…\s*│?\s*$", line)]  # rich's ellipsis ends a cell
    assert cut == []
