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
    nothing; an argument shows nothing beside its name (a type that lists choices keeps them)."""
    for p in params:
        if isinstance(p, TyperArgument):
            if not hasattr(p.type, "choices"):
                p.type = _no_metavar(p.type)
        elif p.metavar is None and not getattr(p, "is_flag", False) and not getattr(p, "count", False):
            p.metavar = type_label(str(p.type.name))


class Command(TyperCommand):
    """Every envman command: typer's, with the help's type column of :func:`help_columns`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        help_columns(self.params)
