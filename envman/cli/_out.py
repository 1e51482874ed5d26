"""Output helpers shared by the command modules."""

from __future__ import annotations

import json
import sys
from typing import Any


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False) + "\n")


def tagged(tag: str, style: str, rest: str = ""):
    """``TAG rest`` with TAG in ``style``: user data in ``rest`` is plain text, never markup."""
    from rich.text import Text

    return Text.assemble((tag, style), rest)


def plain(text: object):
    """A table cell or line of user data: rich prints it as is (``[red]`` stays ``[red]``)."""
    from rich.text import Text

    return Text(str(text))


def console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=False)
