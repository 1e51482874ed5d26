"""The command modules' one way to print: every line the CLI shows goes through here.

* :func:`console`: rich output for people (tables, styled verdicts), user data escaped.
* :func:`emit_line` / :func:`emit_text`: a plain line, or text as it is (a Dockerfile, a batch
  script, YAML, Markdown) on stdout, or a line on stderr; flushed, as each is written.
* :func:`emit_json`: a document for programs (``--json``).

Domain modules return their results (or report through a callback) and never print.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Iterable, Sequence


def emit_json(data: Any) -> None:
    emit_text(json.dumps(data, indent=2, sort_keys=False) + "\n")


def emit_text(text: str, *, err: bool = False) -> None:
    """``text`` as it is (no newline added) on stdout, or on stderr with ``err``."""
    stream = sys.stderr if err else sys.stdout
    stream.write(text)
    stream.flush()


def emit_line(line: str, *, err: bool = False) -> None:
    """One line (a newline added) on stdout, or on stderr with ``err``. The caller has escaped
    user data in it (:func:`envman.errors.printable`) where a terminal must not obey it."""
    emit_text(line + "\n", err=err)


def local_time(seconds: object, fmt: str) -> str:
    """``seconds`` (a Unix time from a state file or the engine) as local time in ``fmt``, or ``-``
    when it is no time this platform can show: NaN, infinite, or before year 1 or after 9999 in
    the local time zone (an image whose config has no creation time says year 1)."""
    import datetime

    if isinstance(seconds, bool):
        return "-"
    try:
        return datetime.datetime.fromtimestamp(float(seconds)).strftime(fmt)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError, OSError):
        return "-"


def tagged(tag: str, style: str, rest: str = ""):
    """``TAG rest`` with TAG in ``style``: user data in ``rest`` is plain text, never markup,
    and its control characters are shown escaped (:func:`envman.errors.printable`)."""
    from rich.text import Text

    from envman.errors import printable

    return Text.assemble((printable(tag), style), printable(rest))


def plain(text: object, style: str = ""):
    """A table cell or line of user data: rich prints it as is (``[red]`` stays ``[red]``), a
    control character (ESC, CR, a line break, a bidi override) as a visible escape."""
    from rich.text import Text

    from envman.errors import printable

    return Text(printable(text), style=style)


def scrub(obj: Any) -> Any:
    """What :func:`console` prints: a string or a ``Text`` with its control characters escaped
    (styles kept); anything else (a table, whose cells come from :func:`plain`) as it is."""
    from rich.text import Text

    from envman.errors import printable

    if isinstance(obj, str):
        return printable(obj)
    if isinstance(obj, Text):
        if printable(obj.plain) == obj.plain:
            return obj
        bounds = sorted({0, len(obj.plain), *(x for sp in obj.spans for x in (sp.start, sp.end))})
        out = Text(style=obj.style, end=obj.end, justify=obj.justify, no_wrap=obj.no_wrap, overflow=obj.overflow)
        for a, b in zip(bounds, bounds[1:]):
            part = obj[a:b]
            styles = [sp.style for sp in part.spans if sp.start == 0 and sp.end == len(part.plain)]
            out.append(Text(printable(part.plain), style=" ".join(str(x) for x in styles)))
        return out
    return obj


def console(stderr: bool = False):
    """A rich console for the command modules: whatever string or ``Text`` it prints is shown,
    never obeyed (:func:`scrub`): file and state data cannot move the cursor, erase a line or
    reverse the text of a trust prompt or a listing."""
    from rich.console import Console

    class _Console(Console):
        def print(self, *objects: Any, **kw: Any) -> None:
            super().print(*(scrub(o) for o in objects), **kw)

    return _Console(stderr=stderr, highlight=False, soft_wrap=False)


class PlainTable:
    """A table of plain cells, printed as ``rich.table.Table(*headers, box=None, pad_edge=False)``
    prints it, without rich's layout of every cell when the table fits the width.

    A cell is a string (shown as written, never markup; :func:`envman.errors.printable` applies)
    or ``(string, style)``. When the widest cell of each column fits the console, rich gives
    every column its widest cell's width; this lays the rows out so, cell by cell in the same
    segments (hundreds of rows in a few milliseconds instead of a tenth of a second). When
    it does not fit, the rich table itself wraps and folds the cells."""

    def __init__(self, headers: Sequence[str], rows: Iterable[Sequence[Any]], overflow: str = "ellipsis") -> None:
        from envman.errors import printable

        def cell(c: Any) -> tuple[str, str]:
            text, style = c if isinstance(c, tuple) else (c, "")
            return printable(text), style

        self.headers = [printable(h) for h in headers]
        self.rows = [[cell(c) for c in r] for r in rows]
        self.overflow = overflow

    def rich_table(self) -> Any:
        """The same table as a ``rich.table.Table``."""
        from rich.table import Table
        from rich.text import Text

        t = Table(box=None, pad_edge=False)
        for h in self.headers:
            t.add_column(Text(h), overflow=self.overflow)  # type: ignore[arg-type]
        for r in self.rows:
            t.add_row(*(Text(text, style=style) for text, style in r))
        return t

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich.cells import cell_len
        from rich.segment import Segment

        widths = [cell_len(h) for h in self.headers]
        for r in self.rows:
            for i, (text, _) in enumerate(r):
                if "\n" in text:
                    widths = []  # a line break in a cell: rich's own layout
                    break
                widths[i] = max(widths[i], cell_len(text))
            if not widths:
                break
        if not widths or sum(widths) + 2 * (len(widths) - 1) > options.max_width:
            yield from console.render(self.rich_table(), options)
            return
        head = console.get_style("table.header")
        last = len(widths) - 1
        for i, (h, w) in enumerate(zip(self.headers, widths)):
            yield Segment(h + " " * (w - cell_len(h)), head)
            if i < last:
                yield Segment(" ", head)
                yield Segment(" ", head)
        yield Segment.line()
        for r in self.rows:
            for i, ((text, style), w) in enumerate(zip(r, widths)):
                yield Segment(text + " " * (w - cell_len(text)), console.get_style(style) if style else None)
                if i < last:
                    yield Segment("  ")
            yield Segment.line()
