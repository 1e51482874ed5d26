"""What a refusal says, as a tuple a test compares whole."""

from __future__ import annotations

from collections.abc import Callable

from envman.errors import UserError


def refusal(fn: Callable[[], object]) -> tuple[str, str | None, str | None]:
    """``(what, where, fix)`` of the :class:`UserError` that ``fn()`` raises; fails when it raises none."""
    try:
        fn()
    except UserError as exc:
        return (exc.what, exc.where, exc.fix)
    raise AssertionError("no UserError was raised")
