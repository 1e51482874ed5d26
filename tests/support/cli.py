"""``envman ARGS`` in a process of its own, without paying for a new interpreter each time.

:func:`run_envman` answers like ``subprocess.run([sys.executable, "-m", "envman", *args],
capture_output=True, text=True, env=..., cwd=..., input=..., timeout=...)``: a
``CompletedProcess`` with the exit status and what the command wrote to its stdout and stderr.
The command runs in a child forked from the test process, with envman's modules already imported
and the shipped matrix files already parsed: the child gets the given environment (exactly, as
``subprocess`` does), working directory, argv and standard streams (regular files, never a
terminal), calls the console script's :func:`envman.main.main`, and exits with its status. What the
command changes in its process (environment, working directory, module state, caches) dies with
the child, as it would with a new interpreter.

An environment that changes what is read at interpreter start or import time (``PYTHON*``,
``LC_*``, typer's and rich's switches) gets a new interpreter, ``python -m envman``. What needs a
fresh interpreter by nature (start-up time, which modules an import pulls in, hash seeds) or the
real entry point is tested with ``subprocess`` itself.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Mapping, Sequence
from typing import IO

ENTRY = [sys.executable, "-m", "envman"]


def run_envman(args: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | os.PathLike[str] | None = None,
               input: str | None = None, timeout: float | None = 120,
               merge_stderr: bool = False) -> subprocess.CompletedProcess[str]:
    """Run ``envman *args`` in a forked child; ``CompletedProcess(ENTRY + args, code, out, err)``.

    ``env`` replaces the environment (``None``: the test's own), ``cwd`` the working directory,
    ``input`` is the command's stdin (``None``: an empty file). ``subprocess.TimeoutExpired``
    after ``timeout`` seconds, the child killed. ``merge_stderr``: stderr goes where stdout goes,
    both line-buffered, as a terminal shows them (``2>&1``); the result's stderr is then empty."""
    argv = [str(a) for a in args]
    env = dict(os.environ if env is None else env)
    if _read_at_start(env) != _read_at_start(os.environ):  # only a new interpreter reads them
        if merge_stderr:
            return subprocess.run(ENTRY + argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  env={**env, "PYTHONUNBUFFERED": "1"}, cwd=cwd, input=input or "", timeout=timeout)
        return subprocess.run(ENTRY + argv, capture_output=True, text=True, env=env, cwd=cwd, input=input or "",
                              timeout=timeout)
    _warm()
    with tempfile.TemporaryFile() as stdin, tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        stdin.write((input or "").encode())
        stdin.seek(0)
        pid = os.fork()
        if pid == 0:  # the child: never returns into the test
            _child(argv, env, cwd, (stdin, stdout, stdout if merge_stderr else stderr), line_buffered=merge_stderr)
        code = _wait(pid, timeout, argv)
        return subprocess.CompletedProcess(ENTRY + argv, code, _text(stdout), _text(stderr))


#: Variables read when the interpreter starts or a module is imported (typer and rich read some at
#: import): a command given other values than this process has runs in a new interpreter.
START_VARIABLES = ("LANG", "TERMINAL_WIDTH", "FORCE_COLOR", "PY_COLORS", "GITHUB_ACTIONS")
START_PREFIXES = ("PYTHON", "LC_", "TYPER_", "_TYPER_")


def _read_at_start(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k in START_VARIABLES or k.startswith(START_PREFIXES)}


_WARM: list[bool] = []


#: A program of the package that runs in a project image when it is run, never imported.
CLOSURE_CHECK = "envman.project.lockcheck"


def _warm() -> None:
    """Import envman's modules (and what they import) and parse the shipped matrix once, in the
    test process, so each child starts with both: with no bytecode written (PYTHONDONTWRITEBYTECODE)
    an import compiles the module again in every child. The parse is reused only for the same
    bytes; the in-image probe's own package, the lock's closure check (a program run in the image)
    and ``envman.__main__`` (it runs the CLI) are left out."""
    if _WARM:
        return
    import importlib
    import pkgutil

    import envman
    import envman.cli
    from envman.matrix.load import load_matrix

    for mod in pkgutil.walk_packages(envman.__path__, "envman."):
        if mod.name not in ("envman.__main__", CLOSURE_CHECK) and not mod.name.startswith("envman.probe.app"):
            importlib.import_module(mod.name)
    # what commands import when they run: typer's parameter conversion (pydantic), rich's tables
    # and emoji, NVML, the Docker SDK, the templates' jinja2
    for name in ("typer._adapters", "typer._click.decorators", "rich.console", "rich.table", "rich.live",
                 "rich.progress", "rich._emoji_codes", "pynvml", "docker", "jinja2"):
        try:
            importlib.import_module(name)
        except ModuleNotFoundError:  # typer before 0.29 has no pydantic adapters, before 0.17 no vendored click
            pass
    from rich.cells import cell_len

    cell_len("\u00e9")  # loads rich's table of character widths
    root = envman.cli._command()
    for name in root.list_commands(None):  # the console script builds each command when it runs it
        root.get_command(None, name)
    load_matrix()
    _WARM.append(True)


def _child(argv: list[str], env: dict[str, str], cwd: str | os.PathLike[str] | None,
           streams: tuple[IO[bytes], IO[bytes], IO[bytes]], line_buffered: bool = False) -> None:
    code = 1
    try:
        for fd, stream in enumerate(streams):
            os.dup2(stream.fileno(), fd)
        sys.stdin = sys.__stdin__ = open(0, encoding="utf-8", closefd=False)
        sys.stdout = sys.__stdout__ = open(1, "w", encoding="utf-8", closefd=False, buffering=1 if line_buffered else -1)
        sys.stderr = sys.__stderr__ = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.environ.clear()
        os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        sys.argv = [ENTRY[-1], *argv]
        from envman.main import main

        try:
            main(argv)
            code = 0
        except SystemExit as exc:  # what the interpreter does with it
            if exc.code is None:
                code = 0
            elif isinstance(exc.code, int):
                code = exc.code
            else:
                print(exc.code, file=sys.stderr)
                code = 1
    except KeyboardInterrupt:
        traceback.print_exc()
        code = 130
    except BaseException:  # an uncaught exception: the traceback and status 1, as python prints it
        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code & 0xFF)


def _wait(pid: int, timeout: float | None, argv: list[str]) -> int:
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # no pidfd here: poll
        fd = None
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)  # -N when signal N ended it, as subprocess
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                raise subprocess.TimeoutExpired(ENTRY + argv, timeout or 0)
            if fd is not None:
                select.select([fd], [], [], left)
            else:
                time.sleep(0.005)
    finally:
        if fd is not None:
            os.close(fd)


def _text(stream: IO[bytes]) -> str:
    """What ``text=True`` gives: UTF-8 with universal newlines."""
    stream.seek(0)
    return stream.read().decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


__all__ = ["ENTRY", "run_envman"]
