"""Rules of the command line (``envman/cli/``), checked on the syntax tree of every module.

* **It only speaks.** Every function in ``envman/cli/`` (each command, and each helper
beside it) parses flags, calls the domain and prints what it returns, in at most
:data:`MAX_BODY` lines of body (its docstring not counted). A longer one is making a decision
the domain should make, or printing what a helper should print. No exceptions are listed.
* **Typer's public API is its boundary.** envman speaks to its command-line framework through typer's public API only: no module
imports ``click`` (typer vendors its own since 0.26, and the installed one need not match) nor a
private module of typer (``typer._click``, ``typer._...``). Usage errors are typer's public
``TyperException`` with the usage exit code (``envman.cli.usage_error``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[3] / "envman"
CLI = PACKAGE / "cli"
MAX_BODY = 40


def body_lines(func: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the first statement after the docstring to the end of the last one."""
    body = func.body
    if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return (body[-1].end_lineno or body[-1].lineno) - body[0].lineno + 1


def long_functions(source: str, limit: int = MAX_BODY) -> list[tuple[str, int]]:
    """(name, body lines) of each function of ``source``, nested or in a class, over ``limit``."""
    return [(node.name, body_lines(node)) for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and body_lines(node) > limit]


def _function(lines: int, docstring: bool = True) -> str:
    doc = '    """Say what it does."""\n' if docstring else ""
    return "def f(x):\n" + doc + "".join(f"    x += {i}\n" for i in range(lines))


@pytest.mark.parametrize("lines, docstring, over", [
    (MAX_BODY, True, []), (MAX_BODY + 1, True, [("f", MAX_BODY + 1)]),
    (MAX_BODY, False, []), (MAX_BODY + 1, False, [("f", MAX_BODY + 1)]),
])
def test_the_count_is_the_body_without_the_docstring(lines: int, docstring: bool, over: list) -> None:
    assert long_functions(_function(lines, docstring)) == over


def test_a_nested_function_and_a_method_count_too() -> None:
    inner = "\n".join("    " + line for line in _function(MAX_BODY + 1).splitlines())
    assert long_functions("def outer():\n" + inner + "\n    return f\n") == [("outer", MAX_BODY + 4), ("f", MAX_BODY + 1)]
    method = "\n".join("    " + line for line in _function(MAX_BODY + 1).splitlines())
    assert long_functions("class C:\n" + method + "\n") == [("f", MAX_BODY + 1)]


def test_a_multi_line_statement_counts_every_line() -> None:
    src = "def f():\n    x = [\n" + "".join(f"        {i},\n" for i in range(MAX_BODY)) + "    ]\n"
    assert long_functions(src) == [("f", MAX_BODY + 2)]


def test_every_function_of_the_cli_is_short() -> None:
    found = [f"{p.name}: {name} has {n} lines of body (at most {MAX_BODY})"
             for p in sorted(CLI.rglob("*.py")) for name, n in long_functions(p.read_text(encoding="utf-8"))]
    assert not found


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

    from envman.cli import usage_error

    assert issubclass(typer.BadParameter, typer.TyperException)
    assert usage_error(typer.BadParameter("x"))
    assert not usage_error(typer.TyperException("x"))  # exit 1: not a usage error
