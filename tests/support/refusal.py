"""What a refusal says, whole: the tests compare every part of an error line, not a fragment."""

from __future__ import annotations

from typing import Any, Callable

from envman.errors import EnvmanError


def refusal(fn: Callable[[], Any]) -> tuple[str, str, str | None, str | None]:
    """``(exception class name, what, where, fix)`` of the :class:`EnvmanError` ``fn`` raises."""
    try:
        fn()
    except EnvmanError as exc:
        return type(exc).__name__, exc.what, exc.where, exc.fix
    raise AssertionError("nothing was refused")
