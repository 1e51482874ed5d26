"""The one error boundary of every command, and the split of ``envman [--matrix F]... COMMAND``.

Shared by the console script (:mod:`envman.main`) and the typer CLI (:mod:`envman.cli`):
:func:`guarded` turns an ``EnvmanError`` into one line on stderr and its exit code; anything
else is reported in one line as an internal error unless ``ENVMAN_DEBUG=1`` asks for the
traceback.

This module imports nothing beyond the standard library's ``os`` and ``sys``: the run path
loads it on every ``envman run``.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (hot path)
if TYPE_CHECKING:
    from typing import Callable, Sequence


def run_argv(argv: Sequence[str], command: str = "run") -> tuple[list[str], list[str]] | None:
    """``(matrix files, words after COMMAND)`` when ``argv`` is ``envman ... COMMAND ...``, else
    ``None``.

    Only the root option (``--matrix F``, ``-m F``, ``--matrix=F``) may stand before the
    command; any other form is left to the full CLI, which handles every command as well.
    """
    args = list(argv)
    matrix: list[str] = []
    while args:
        if args[0] in ("--matrix", "-m") and len(args) >= 2:
            matrix.append(args[1])
            args = args[2:]
        elif args[0].startswith("--matrix="):
            matrix.append(args[0].split("=", 1)[1])
            args = args[1:]
        else:
            break
    if not args or args[0] != command:
        return None
    return matrix, args[1:]


def _err(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def guarded(fn: Callable[[], int | None]) -> int:
    """Run ``fn`` inside the CLI's error contract; its exit code (``None`` is 0)."""
    from envman.errors import EnvmanError

    try:
        return fn() or 0
    except EnvmanError as exc:
        _err(f"envman: error: {exc.line()}")
        return exc.exit_code
    except KeyboardInterrupt:
        _err("envman: interrupted")
        return 130
    except OSError as exc:  # a path given by the user: too long, a directory, no permission, ...
        if exc.filename is None and not isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError)):
            return _internal(exc)
        name = str(exc.filename if exc.filename is not None else "")[:200]
        _err(f"envman: error: {name + ': ' if name else ''}{exc.strerror or exc} — check the path and try again")
        return 2
    except ValueError as exc:
        if "null byte" in str(exc) or "null character" in str(exc):
            _err("envman: error: an argument contains a NUL byte — remove it")
            return 2
        return _internal(exc)
    except Exception as exc:  # a bug: say so in one line unless asked for the traceback
        return _internal(exc)


def _internal(exc: BaseException) -> int:
    if os.environ.get("ENVMAN_DEBUG"):
        raise exc
    text = " ".join(str(exc).split())[:300]
    _err(f"envman: internal error: {type(exc).__name__}: {text} "
         "(rerun with ENVMAN_DEBUG=1 for the traceback and report it)")
    return 70
