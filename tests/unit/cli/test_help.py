"""The root's help (``envman --help``) is printed by :func:`envman.cli._help.print_root_help`
exactly as typer's help formatter prints it, byte for byte, at any width, on a terminal (styles)
and off it, with colours off; and without loading what that formatter alone needs (rich's
Markdown renderer and traceback module)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

#: The root group's help, from typer's formatter ("typer") or envman's ("envman").
SCRIPT = """
import sys
import typer, typer.core
from envman.cli import _command
root = _command()
ctx = typer.Context(root, info_name="envman")
root._listing = True  # the listing the root help shows (stand-ins of every command)
if sys.argv[1] == "typer":
    typer.core.TyperGroup.format_help(root, ctx, None)
else:
    from envman.cli._help import print_root_help
    listed = [root.get_command(ctx, n) for n in root.list_commands(ctx)]
    assert print_root_help(root, ctx, [c for c in listed if c is not None])
"""

BASE_ENV = {k: v for k, v in os.environ.items()
            if k not in ("COLUMNS", "LINES", "TERMINAL_WIDTH", "FORCE_COLOR", "NO_COLOR", "PY_COLORS", "TERM",
                         "COLORTERM", "GITHUB_ACTIONS", "_TYPER_FORCE_DISABLE_TERMINAL")}


@pytest.mark.parametrize("env", [
    {"COLUMNS": "120"}, {"COLUMNS": "40"}, {"COLUMNS": "250"},
    {"COLUMNS": "100", "FORCE_COLOR": "1"}, {"COLUMNS": "80", "FORCE_COLOR": "1", "TERM": "xterm-256color"},
    {"COLUMNS": "90", "FORCE_COLOR": "1", "COLORTERM": "truecolor"}, {"TERMINAL_WIDTH": "70", "PY_COLORS": "1"},
    {"COLUMNS": "100", "FORCE_COLOR": "1", "NO_COLOR": "1"}, {"GITHUB_ACTIONS": "true", "COLUMNS": "160"},
], ids=lambda e: " ".join(f"{k}={v}" for k, v in e.items()))
def test_the_root_help_is_what_typers_formatter_prints(env):
    def printed(which: str) -> str:
        r = subprocess.run([sys.executable, "-c", SCRIPT, which], env={**BASE_ENV, **env}, capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        return r.stdout

    assert printed("envman") == printed("typer")


def test_the_root_help_loads_no_markdown_renderer_nor_traceback_module():
    code = ("import sys\nfrom envman.main import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "sys.stderr.write(' '.join(sorted(sys.modules)))")
    r = subprocess.run([sys.executable, "-c", code], env={**BASE_ENV, "COLUMNS": "120"}, capture_output=True,
                       text=True, timeout=120)
    loaded = set(r.stderr.split())
    assert "Commands" in r.stdout and "envman" in loaded
    assert loaded & {"rich.markdown", "rich.traceback", "typer.rich_utils", "markdown_it", "pygments"} == set()
