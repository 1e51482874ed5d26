"""The ``envman`` console script and the one error boundary of every command.

``envman [--matrix F]... run ...`` goes straight to the run path: a run sits on the user's hot
path (``envman run P -- python train.py`` many times a day), and the typer CLI costs about
100 ms to start. First :func:`envman.run.cache.try_cached_run` (the last identical run's plan,
if nothing it was made from changed), else :func:`envman.run.command.run_cli`. Likewise an
``envman build`` that the last identical one recorded as a no-op prints that result
(:func:`envman.run.cache.try_cached_build`). Everything else, ``envman --help`` (which lists
``run``) included, goes to the typer CLI in :mod:`envman.cli`. Both paths share
:func:`guarded`: an ``EnvmanError`` becomes one line on stderr and its exit code; anything else
is reported in one line as an internal error unless ``ENVMAN_DEBUG=1`` asks for the traceback.

This module imports nothing beyond the standard library's ``os`` and ``sys``.
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


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point."""
    args = list(sys.argv[1:] if argv is None else argv)
    build = run_argv(args, "build")
    if build is not None:  # a no-op build the last identical one recorded: print its result
        from envman.run.cache import try_cached_build

        try_cached_build(*build)
    split = run_argv(args)
    if split is not None and not _asks_help(split[1]):
        matrix, words = split
        options, command = _split_command(words)
        from envman.run.cache import try_cached_run

        try_cached_run(matrix, options, command)  # execs docker when the last identical run's plan holds
        from envman.run.command import run_cli

        sys.exit(guarded(lambda: run_cli(options, command, matrix)))
    for name in ("exec", "shell"):  # the other commands that hand the terminal to docker
        split = run_argv(args, name)
        if split is not None and not _asks_help(split[1]):
            matrix, words = split
            options, command = _split_command(words)
            from envman.run import envs

            if name == "exec":
                sys.exit(guarded(lambda: envs.exec_cli(options, command)))
            sys.exit(guarded(lambda: envs.shell_cli(options, command, matrix)))
    global ARGV
    ARGV = args  # the words as given, for commands that key a cache on them
    from envman.cli import main as cli_main

    cli_main(args)


#: The console script's arguments once the full CLI runs them (``None`` when called otherwise).
ARGV: list[str] | None = None


def _asks_help(words: Sequence[str]) -> bool:
    """``-h``/``--help`` among the options (before ``--``): the full CLI prints the help."""
    options = words[:words.index("--")] if "--" in words else words
    if not any(w in ("-h", "--help") for w in options):
        return False
    from envman.run.command import run_parser, split_bare_command

    options, _ = split_bare_command(run_parser(), options)
    return any(w in ("-h", "--help") for w in options)


def _split_command(words: Sequence[str]) -> tuple[list[str], list[str]]:
    """The words of ``envman run`` before ``--`` (options) and after it (the command)."""
    words = list(words)
    if "--" in words:
        i = words.index("--")
        return words[:i], words[i + 1:]
    return words, []
