"""The ``envman`` console script and the one error boundary of every command.

``envman [--matrix F]... run ...`` (and ``exec``, ``shell``) goes straight to the run path, its
words read with their grammar (:mod:`envman.run.grammar`): a run sits on the user's hot
path (``envman run P -- python train.py`` many times a day), and the typer CLI costs about
100 ms to start. First :func:`envman.run.fastpath.try_cached_run` (the last identical run's plan,
if nothing it was made from changed), else :func:`envman.run.command.run_cli`. Likewise an
``envman build`` that the last identical one recorded as a no-op prints that result
(:func:`envman.run.fastpath.try_cached_build`). Everything else, ``envman --help`` (which lists
``run``) included, goes to the typer CLI in :mod:`envman.cli`; a bare ``envman --version`` prints
the version without it. Both paths share the one error
boundary, :func:`envman.boundary.guarded`.

This module imports nothing beyond the standard library's ``os`` and ``sys`` and
:mod:`envman.boundary`.
"""

from __future__ import annotations

import sys

from envman.boundary import guarded, run_argv

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (hot path)
if TYPE_CHECKING:
    from typing import Sequence


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point."""
    if argv is None and "_ENVMAN_COMPLETE" in _environ():
        _complete()  # a Tab: value completions are answered without the CLI framework
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--version"]:  # what the CLI prints, without loading it
        from envman import __version__

        sys.stdout.write(f"envman {__version__}\n")
        sys.exit(0)
    build = run_argv(args, "build")
    if build is not None:  # a no-op build the last identical one recorded: print its result
        from envman.run.fastpath import try_cached_build

        try_cached_build(*build)
    for name in ("run", "exec", "shell"):  # the commands that hand the terminal to docker
        split = run_argv(args, name)
        if split is not None:
            _run_without_cli(name, *split)  # returns only for --help: the full CLI prints it
            break
    from envman.cli import main as cli_main

    cli_main(args, invocation=tuple(args))


def _cached_run_environment(project_file: str, args: Sequence[str]) -> Sequence[tuple[str, str]]:
    """A cached run's environment, worked out again by the full path's rules (loaded only for a
    cached run that has one)."""
    from envman.run.command import cached_run_environment

    return cached_run_environment(project_file, args)


def _environ():
    import os

    return os.environ


def _complete() -> None:
    """Answer the shell's completion request for a value (a project, a stack, a GPU) and exit;
    return for anything else (the CLI framework completes command and option names)."""
    try:
        from envman.run.complete import fast_complete

        got = fast_complete(_environ())
    except Exception:  # noqa: BLE001 - completion never fails loudly: the CLI's own path answers
        return
    if got is not None:
        out, code = got
        if out:
            sys.stdout.write(out + "\n")
        sys.stdout.flush()
        sys.exit(code)


def _run_without_cli(name: str, matrix: list[str], words: list[str]) -> None:
    """``envman run``/``exec``/``shell`` read with their grammar (:mod:`envman.run.grammar`),
    without the CLI framework; exits, except for ``--help``."""
    from envman.run import grammar

    if grammar.asks_help(grammar.GRAMMARS[name], words):
        return
    options, command = grammar.split_dashdash(words)
    if name == "run":
        from envman.run.fastpath import try_cached_run

        # execs docker when the last identical run's plan holds
        try_cached_run(matrix, options, command, environment_of=_cached_run_environment)
        from envman.matrix.source import MatrixSource
        from envman.run.command import run_cli

        sys.exit(guarded(lambda: run_cli(options, command, MatrixSource.of(matrix))))
    if name == "exec":
        from envman.run.envs import exec_cli

        sys.exit(guarded(lambda: exec_cli(options, command)))
    from envman.matrix.source import MatrixSource
    from envman.run.command import shell_cli

    sys.exit(guarded(lambda: shell_cli(options, command, MatrixSource.of(matrix))))
