""":class:`envman.cli._out.PlainTable` prints exactly what ``rich.table.Table(box=None,
pad_edge=False)`` prints for the same cells: byte for byte, on a terminal (styles) and off it, at
any width (where the table does not fit, it is rich's own layout), for any cell text (wide
characters, markup-like brackets, control characters, empty cells)."""

from __future__ import annotations

import io

from hypothesis import given, settings, strategies as st

from envman.cli._out import PlainTable

CELL = st.lists(st.sampled_from(list("ab -_.[]/:é宽–\x1b\\") + ["[red]", "[/]"]), max_size=8).map("".join)
STYLE = st.sampled_from(["", "red", "yellow", "bold"])


def _printed(renderable, width: int, terminal: bool) -> str:
    from rich.console import Console

    buf = io.StringIO()
    Console(file=buf, width=width, force_terminal=terminal, color_system="standard" if terminal else None,
            highlight=False, soft_wrap=False).print(renderable)
    return buf.getvalue()


@settings(max_examples=200, deadline=None)
@given(data=st.data(), cols=st.integers(1, 5), width=st.integers(8, 140), terminal=st.booleans(),
       overflow=st.sampled_from(["ellipsis", "fold"]))
def test_plain_table_prints_what_the_rich_table_prints(data, cols, width, terminal, overflow):
    headers = data.draw(st.lists(CELL.filter(bool), min_size=cols, max_size=cols))
    rows = data.draw(st.lists(st.lists(st.one_of(CELL, st.tuples(CELL, STYLE)), min_size=cols, max_size=cols),
                              max_size=6))
    t = PlainTable(headers, rows, overflow=overflow)
    assert _printed(t, width, terminal) == _printed(t.rich_table(), width, terminal)


def test_a_fitting_table_is_laid_out_without_the_rich_table(monkeypatch):
    t = PlainTable(["name", "status"], [["torch-2.4", ("ok", "red")], ["jax", "[bold]x[/bold]"]])
    expected = _printed(t.rich_table(), 80, True)
    monkeypatch.setattr(PlainTable, "rich_table", lambda self: (_ for _ in ()).throw(AssertionError("laid out by rich")))
    assert _printed(t, 80, True) == expected
    assert _printed(t, 80, False).splitlines()[2] == "jax        [bold]x[/bold]"  # shown as written


# --------------------------------------------------------------------------- one way to print

import ast as _ast
from pathlib import Path as _Path

_PACKAGE = _Path(__file__).resolve().parents[3] / "envman"


def _prints(path: _Path) -> list[str]:
    """Each call in ``path`` that writes to the terminal itself: print, typer.echo, sys.stdout /
    sys.stderr .write, any ``.print`` (a rich console's), envman.errors.stderr_line."""
    found = []
    for node in _ast.walk(_ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, _ast.Call):
            continue
        f = node.func
        name = (f.id if isinstance(f, _ast.Name) else
                f"{_ast.unparse(f.value)}.{f.attr}" if isinstance(f, _ast.Attribute) else "")
        if name in ("print", "stderr_line", "typer.echo", "sys.stdout.write", "sys.stderr.write") or name.endswith(".print"):
            found.append(f"{path.relative_to(_PACKAGE.parent)}:{node.lineno}: {name}")
    return found


#: Modules outside the CLI that still write to the terminal, and why. The run path (``envman run``,
#: ``exec``, ``shell``, ``notebook``, the run-plan cache) skips the CLI framework for its start-up
#: time, so its commands print from run/; the error boundary prints the one error line; a state file
#: that cannot be trusted is reported where it is read; the Slurm module is being split.
PRINTING_OUTSIDE_THE_CLI = {
    "envman/main.py", "envman/boundary.py", "envman/errors.py", "envman/safefile.py",
    "envman/run/command.py", "envman/run/notebook.py", "envman/run/fastpath.py", "envman/run/envs.py",
    "envman/cluster/slurm.py",
}


def test_domain_modules_return_and_the_cli_prints():
    printing = {p.split(":")[0] for f in _PACKAGE.rglob("*.py")
                if "cli" not in f.relative_to(_PACKAGE).parts[:1] and "app" not in f.relative_to(_PACKAGE).parts[:2]
                for p in _prints(f)}
    assert printing <= PRINTING_OUTSIDE_THE_CLI, sorted(printing - PRINTING_OUTSIDE_THE_CLI)
    assert "envman/project/image.py" not in printing and "envman/cluster/export.py" not in printing


def test_the_cli_prints_through_its_output_helpers_only():
    raw = [p for f in sorted((_PACKAGE / "cli").glob("*.py")) if f.name != "_out.py" for p in _prints(f)
           if not p.endswith(".print")]  # a console of envman.cli._out.console
    assert not raw, raw
