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
