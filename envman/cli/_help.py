"""The type column of every command's help: what a value looks like, from public click attributes.

typer's help panels show an option's metavar, else a placeholder made of its click type's name
(``<str>``, ``<int range>``), and a placeholder beside every argument. envman's help shows click's
upper-case type names (TEXT, INTEGER, PATH) for options and nothing beside an argument (its name
is shown). :class:`Command`, the class of every envman command, gives its parameters that look
when it is made; nothing outside envman's own commands is changed.
"""

from __future__ import annotations

import copy
from typing import Any, Iterable

from typer.core import TyperArgument, TyperCommand

#: click type names as the help shows them.
TYPE_LABELS = {"str": "TEXT", "text": "TEXT", "string": "TEXT", "int": "INTEGER", "integer": "INTEGER",
               "float": "NUMBER", "path": "PATH", "bool": "BOOLEAN", "boolean": "BOOLEAN",
               "int range": "INTEGER", "integer range": "INTEGER", "float range": "NUMBER"}


def type_label(type_name: str) -> str:
    """``int range`` -> ``INTEGER``: the upper-case name of a click type, as the help shows it."""
    return TYPE_LABELS.get(type_name.lower(), type_name.upper())


def _no_metavar(t: Any) -> Any:
    """A copy of the click type ``t`` that offers no metavar of its own (a custom type, click's
    documented way to say what a value looks like)."""
    cls = type(t)
    plain = type(f"Plain{cls.__name__}", (cls,), {"get_metavar": lambda self, *a, **kw: ""})
    out = copy.copy(t)
    out.__class__ = plain
    return out


def help_columns(params: Iterable[Any]) -> None:
    """Give each of ``params`` (click parameters of an envman command) the help's type column:
    an option that takes a value and names no metavar shows its type's label; a flag shows
    nothing; an argument shows nothing beside its name (a type that lists choices keeps them),
    and its name, in usage lines too, is written in capitals like every other placeholder
    (``PROJECT``, ``NAMES...``): typer writes an argument without a metavar as its parameter's
    name (``project``, ``{project}``)."""
    for p in params:
        if isinstance(p, TyperArgument):
            if not hasattr(p.type, "choices"):
                p.type = _no_metavar(p.type)
            if not p.metavar and p.name:
                p.metavar = p.name.upper() + ("..." if p.nargs != 1 else "")
        elif p.metavar is None and not getattr(p, "is_flag", False) and not getattr(p, "count", False):
            p.metavar = type_label(str(p.type.name))


class Command(TyperCommand):
    """Every envman command: typer's, with the help's type column of :func:`help_columns`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        help_columns(self.params)


# --------------------------------------------------------------------------- the root's help

#: typer's help styles (typer.rich_utils; pinned typer < 0.29): the root's help is drawn in them.
_STYLES = {"option": "bold cyan", "switch": "bold green", "negative_option": "bold magenta",
           "negative_switch": "bold red", "types": "bold yellow", "types_sep": "dim", "usage": "yellow"}


def _highlighters() -> tuple[Any, Any, Any]:
    from rich.highlighter import RegexHighlighter

    class Option(RegexHighlighter):
        highlights = [r"(^|\W)(?P<switch>\-\w+)(?![a-zA-Z0-9])", r"(^|\W)(?P<option>\-\-[\w\-]+)(?![a-zA-Z0-9])",
                      r"(?P<types>\<[^\>]+\>)", r"(?P<usage>Usage: )"]

    class Negative(RegexHighlighter):
        highlights = [r"(^|\W)(?P<negative_switch>\-\w+)(?![a-zA-Z0-9])",
                      r"(^|\W)(?P<negative_option>\-\-[\w\-]+)(?![a-zA-Z0-9])"]

    class Types(RegexHighlighter):
        highlights = [r"^(?P<types_sep>(\[|<))", r"(?P<types_sep>\|)", r"(?P<types_sep>(\]|>))(\.\.\.)?$"]

    return Option(), Negative(), Types()


def _plain_help(param: Any) -> bool:
    """A parameter whose help row is its names, a metavar and its help text, and nothing typer
    adds (a default, an environment variable, a required mark, a range)."""
    from typer.core import TyperOption

    if not isinstance(param, TyperOption) or param.required or param.count or param.envvar is not None:
        return False
    if "\b" in (param.help or "") or isinstance(param.show_default, str):
        return False
    if param.is_flag:  # typer names the default of a flag only when it has an opposite (--pull/--no-pull)
        return not param.secondary_opts and param.default in (False, None)
    return param.metavar is not None and (param.show_default is False or param.default is None)


def print_root_help(group: Any, ctx: Any, commands: list[Any]) -> bool:
    """Print the help of the root command (``envman --help``) as typer's help formatter prints
    it, drawn with rich's console, table and panel only: typer's formatter module also imports
    rich's Markdown renderer and traceback module (markdown-it, pygments, attrs), about a third of
    the help's start-up, for what this help does not use. ``False`` (nothing printed) where the
    help holds anything beyond names, metavars, help texts and commands; typer's formatter prints
    it then."""
    import inspect

    params = [p for p in group.get_params(ctx) if not getattr(p, "hidden", False)]
    if getattr(group, "rich_markup_mode", None) != "rich" or group.epilog or group.deprecated \
            or ctx.auto_envvar_prefix is not None or ctx.show_default \
            or not all(_plain_help(p) for p in params) or any(c.deprecated for c in commands):
        return False
    from rich.align import Align
    from rich.console import group as render_group
    from rich.padding import Padding
    from rich.text import Text

    highlight, negative, types = _highlighters()
    console = _help_console(highlight)

    def text(markup: str) -> Any:
        return highlight(Text.from_markup(markup, style=""))

    paragraphs = inspect.cleandoc(group.help or "").partition("\f")[0].split("\n\n")
    if len(paragraphs) > 1 or paragraphs[0].startswith("\b"):
        return False  # pragma: no cover - the root's help is one paragraph
    first = paragraphs
    console.print(Padding(highlight(group.get_usage(ctx)), 1), style="bold")
    if group.help:
        @render_group()
        def body() -> Any:
            yield text(first[0].replace("\n", " ").strip())

        console.print(Padding(Align(body(), pad=False), (0, 1, 1, 1)))
    _print_options(console, params, text, highlight, negative, types)
    _print_commands(console, [c for c in commands if not c.hidden], text)
    return True


def _help_console(highlight: Any) -> Any:
    """The console typer's help formatter would print on (its width and colour settings)."""
    import os

    from rich.console import Console
    from rich.theme import Theme

    width = os.environ.get("TERMINAL_WIDTH")
    force = True if os.environ.get("GITHUB_ACTIONS") or os.environ.get("FORCE_COLOR") or os.environ.get("PY_COLORS") else None
    if os.environ.get("_TYPER_FORCE_DISABLE_TERMINAL"):
        force = False
    return Console(theme=Theme(_STYLES), highlighter=highlight, color_system="auto", force_terminal=force,
                   width=int(width) if width else None)


def _table() -> Any:
    from rich.table import Table

    return Table(highlight=True, show_header=False, expand=True, box=None, show_lines=False, leading=0,
                 border_style=None, row_styles=None, pad_edge=False, padding=(0, 1))


def _print_options(console: Any, params: list[Any], text: Any, highlight: Any, negative: Any, types: Any) -> None:
    """The Options panel: long and short names, their negatives, the metavar and the help."""
    from rich.columns import Columns
    from rich.panel import Panel
    from rich.text import Text

    rows = []
    for p in params:
        longs = [o for o in p.opts if "--" in o]
        shorts = [o for o in p.opts if "--" not in o]
        kind = Text(style="bold yellow", overflow="fold")
        if not p.is_flag and not p.count and "bool" not in p.metavar.lower():
            kind.append(p.metavar)
        help_text = "\n".join(x.replace("\n", " ").strip() for x in (p.help or "").split("\n\n")).strip()
        rows.append([highlight(",".join(longs)), highlight(",".join(shorts)),
                     negative(",".join(o for o in p.secondary_opts if "--" in o)),
                     negative(",".join(o for o in p.secondary_opts if "--" not in o)),
                     types(kind), Columns([text(help_text)] if help_text else [])])
    if rows:
        table = _table()
        for row in rows:
            table.add_row(*row)
        console.print(Panel(table, border_style="dim", title="Options", title_align="left"))


def _print_commands(console: Any, shown: list[Any], text: Any) -> None:
    """The Commands panel: each shown command's name and the first paragraph of its help."""
    import inspect

    from rich.panel import Panel
    from rich.text import Text

    if not shown:
        return
    table = _table()
    table.highlight = False
    table.add_column(style="bold cyan", no_wrap=True, width=max(len(c.name or "") for c in shown))
    table.add_column("Description", justify="left", no_wrap=False, ratio=10)
    for c in shown:
        first_paragraph = inspect.cleandoc(c.short_help or c.help or "").split("\n\n")[0]
        table.add_row(Text(c.name or ""), text(first_paragraph.replace("\b\n", "").strip()))
    console.print(Panel(table, border_style="dim", title="Commands", title_align="left"))
