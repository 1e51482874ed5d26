"""envman speaks to its command-line framework through typer's public API only: no module
imports ``click`` (typer vendors its own since 0.26, and the installed one need not match) nor a
private module of typer (``typer._click``, ``typer._...``). Usage errors are typer's public
``TyperException`` with the usage exit code (``envman.cli._usage_error``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[3] / "envman"


def framework_imports(source: str) -> list[str]:
    """The imports of ``source`` that cross the boundary: ``click`` (and its modules), or a private
    module or name of typer, however imported (at the top, in a function, under TYPE_CHECKING)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "click" or (parts[0] == "typer" and any(p.startswith("_") for p in parts[1:])):
                out.append(f"line {node.lineno}: {name}")
                break
    return out


@pytest.mark.parametrize("source, expected", [
    ("import click", ["line 1: click"]),
    ("from click.exceptions import UsageError", ["line 1: click.exceptions"]),
    ("import typer._click.exceptions", ["line 1: typer._click.exceptions"]),
    ("from typer._click.exceptions import UsageError", ["line 1: typer._click.exceptions"]),
    ("from typer import _click", ["line 1: typer._click"]),
    ("def f():\n    from typer._completion_shared import x", ["line 2: typer._completion_shared"]),
    ("import typer\nfrom typer.main import get_command\nimport clickhouse", []),
    ("from . import click", []),
])
def test_the_rule_on_each_kind_of_import(source: str, expected: list[str]) -> None:
    assert framework_imports(source) == expected


def test_no_module_imports_click_or_typers_private_modules() -> None:
    found = [f"{p.relative_to(PACKAGE.parent)}: {hit}" for p in sorted(PACKAGE.rglob("*.py"))
             for hit in framework_imports(p.read_text(encoding="utf-8"))]
    assert not found


def test_typers_usage_errors_are_its_public_exception_with_exit_code_2() -> None:
    import typer

    from envman.cli import _usage_error

    assert issubclass(typer.BadParameter, typer.TyperException)
    assert _usage_error(typer.BadParameter("x"))
    assert not _usage_error(typer.TyperException("x"))  # exit 1: not a usage error
