"""Output helpers shared by the command modules."""

from __future__ import annotations

import json
import sys
from typing import Any


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False) + "\n")


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
        def print(self, *objects: Any, **kw: Any) -> None:  # type: ignore[override]
            super().print(*(scrub(o) for o in objects), **kw)

    return _Console(stderr=stderr, highlight=False, soft_wrap=False)
