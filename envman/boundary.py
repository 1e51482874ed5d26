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


def _unprefixed(line: str) -> str:
    """``line`` without a leading ``envman: `` of its own (a message relayed from a build step or
    a tool says it), so that the printed line says it once."""
    while line.startswith("envman: "):
        line = line[len("envman: "):]
    return line


def guarded(fn: Callable[[], int | None]) -> int:
    """Run ``fn`` inside the CLI's error contract; its exit code (``None`` is 0)."""
    from envman.errors import EnvmanError, stderr_line

    try:
        return fn() or 0
    except EnvmanError as exc:
        tail = getattr(exc, "log_tail", "")
        if tail:  # a failed build: what and why first, then its step, its error lines and the known fix
            from envman.images.failure import reason_of, summarize, without_script

            why = summarize(exc.what, tail, getattr(exc, "step", None))
            reason = f"{reason_of(why.error_class)}: " if why.error_class else ""
            stderr_line(f"envman: error: {reason}{without_script(_unprefixed(exc.line()))}")
            for line in why.after(exc.fix).lines():
                stderr_line(line)
            return exc.exit_code
        stderr_line(f"envman: error: {_unprefixed(exc.line())}")
        return exc.exit_code
    except KeyboardInterrupt:
        stderr_line("envman: interrupted")
        return 130
    except RecursionError:  # a parser (TOML, JSON) fed a document nested thousands deep
        stderr_line("envman: error: an input file is nested too deeply to read — flatten it (a few levels of tables suffice)")
        return 2
    except OSError as exc:
        import errno

        if exc.errno in _FULL:  # the disk, not the input: the operation failed (exit 1)
            name = str(exc.filename if exc.filename is not None else "")[:200]
            stderr_line(f"envman: error: {name + ': ' if name else ''}{exc.strerror or errno.errorcode.get(exc.errno or 0, exc)}"
                        " — free some space (or fix the file system) and try again")
            return 1
        if _engine_failure(exc):
            return _engine_line(exc)
        if exc.filename is None and not isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError)):
            return _internal(exc)
        name = str(exc.filename if exc.filename is not None else "")[:200]
        stderr_line(f"envman: error: {name + ': ' if name else ''}{exc.strerror or exc} — check the path and try again")
        return 2
    except ValueError as exc:
        if "null byte" in str(exc) or "null character" in str(exc):
            stderr_line("envman: error: an argument contains a NUL byte — remove it")
            return 2
        if "integer string conversion" in str(exc) or "Exceeds the limit" in str(exc):
            stderr_line("envman: error: a number in the input has thousands of digits — give a shorter value")
            return 2
        return _internal(exc)
    except Exception as exc:  # a bug: say so in one line unless asked for the traceback
        if _engine_failure(exc):
            return _engine_line(exc)
        return _internal(exc)


#: errno values that say the disk is full or cannot be written (ENOSPC, EDQUOT, EROFS, EIO).
_FULL = (28, 122, 30, 5)
#: The HTTP stacks the engine client talks through: an exception of theirs that reaches the
#: boundary is a connection to the engine that broke (the engine stopped or restarted in the
#: middle of a build, a pull or a run), not a bug of envman's.
_ENGINE_MODULES = ("urllib3.", "requests.", "docker.errors", "http.client")


def _engine_failure(exc: BaseException) -> bool:
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if any(k.__module__ == m.rstrip(".") or k.__module__.startswith(m) for k in type(cur).__mro__
               for m in _ENGINE_MODULES):
            return True
        cur = cur.__cause__ or cur.__context__
    return False


def _engine_line(exc: BaseException) -> int:
    from envman.errors import stderr_line

    text = " ".join(str(exc).split())[:200]
    stderr_line(f"envman: error: the container engine connection broke ({type(exc).__name__}: {text}) — "
         "check that the engine runs (docker info) and retry; nothing was promoted")
    return 1


def _internal(exc: BaseException) -> int:
    from envman.errors import stderr_line

    if os.environ.get("ENVMAN_DEBUG"):
        raise exc
    text = " ".join(str(exc).split())[:300]
    stderr_line(f"envman: internal error: {type(exc).__name__}: {text} "
         "(rerun with ENVMAN_DEBUG=1 for the traceback and report it)")
    return 70
