"""Hand the terminal to the ``docker`` CLI: ``envman run`` and ``envman exec`` end by exec-ing it.

The environment of a run reaches ``docker`` through an in-memory env file (never an argv), whose
path fills :data:`ENV_FILE_SLOT` in the argv; ``--interactive``/``--tty`` are given as the caller's
own terminal allows (:func:`terminal_flags`, :func:`with_terminal`). Standard library only, and only ``os`` and ``sys``
at import: this is on the hot path of every run.
"""

from __future__ import annotations

import os
import sys
import stat

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (hot path)
if TYPE_CHECKING:
    from typing import Any, Sequence


def which(name: str) -> str | None:
    """``shutil.which`` for a POSIX command name, without importing shutil (hot path)."""
    if os.sep in name:
        return name if os.access(name, os.X_OK) and not os.path.isdir(name) else None
    for d in os.get_exec_path():
        p = os.path.join(d or os.curdir, name)
        if os.access(p, os.X_OK) and not os.path.isdir(p):
            return p
    return None


def terminal_flags(stdin: Any = None, stdout: Any = None) -> tuple[bool, bool]:
    """(tty, interactive): a TTY only when both ends are terminals; stdin is forwarded when it is
    a terminal, a pipe or a file (not /dev/null or closed)."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout

    def isatty(f: Any) -> bool:
        try:
            return f is not None and f.isatty()
        except (ValueError, AttributeError):
            return False

    tty = isatty(stdin) and isatty(stdout)
    interactive = isatty(stdin)
    if not interactive:
        try:
            mode = os.fstat(stdin.fileno()).st_mode
            interactive = stat.S_ISFIFO(mode) or stat.S_ISREG(mode) or stat.S_ISSOCK(mode)
        except (OSError, ValueError, AttributeError):
            interactive = False
    return tty, interactive


def with_terminal(argv: Sequence[str], tty: bool, interactive: bool) -> list[str]:
    """``docker run`` / ``docker exec`` argv with ``--interactive`` / ``--tty`` right after the
    subcommand (the first ``run`` or ``exec``: the words before it are envman's, e.g.
    ``podman --remote --url URL run``)."""
    at = next(i for i, w in enumerate(argv) if w in ("run", "exec")) + 1
    return [*argv[:at], *(["--interactive"] if interactive else []), *(["--tty"] if tty else []), *argv[at:]]


#: Where a run's argv names its env file; :func:`exec_docker` puts the real path there.
ENV_FILE_SLOT = "{envman-env-file}"


def env_file_text(environment: Sequence[tuple[str, str]]) -> bytes:
    """``docker --env-file`` lines (values were checked to hold no line break or NUL)."""
    for k, v in environment:
        if any(c in v for c in "\0\n\r") or "=" in k or not k:
            raise ValueError(f"environment variable {k!r} cannot be written to an env file")
    return "".join(f"{k}={v}\n" for k, v in environment).encode("utf-8")


def env_file_fd(environment: Sequence[tuple[str, str]]) -> int:
    """An inheritable descriptor holding the env file: an anonymous in-memory file (Linux
    ``memfd``), else a pipe. Nothing is written to disk and nothing is left to remove; only the
    user's own processes can open it (``/proc/PID/fd`` is private)."""
    data = env_file_text(environment)
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("envman-env", 0)  # no MFD_CLOEXEC: docker inherits it
        os.write(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
        return fd
    r, w = os.pipe()  # pragma: no cover - non-Linux
    if len(data) > 60000:
        raise ValueError("the environment is too large to pass through a pipe")
    os.write(w, data)
    os.close(w)
    os.set_inheritable(r, True)
    return r


def exec_docker(argv: Sequence[str], environment: Sequence[tuple[str, str]] = ()) -> None:  # pragma: no cover - replaces the process
    """Replace envman with ``docker run``: its exit code, signals and TTY are the user's.
    ``environment`` reaches it through an in-memory env file whose path fills
    :data:`ENV_FILE_SLOT` (the values are on no command line)."""
    from envman.errors import EngineError

    exe = which(argv[0])
    if exe is None:
        raise EngineError("the docker CLI is not installed (envman run hands the terminal to it)",
                          fix="install docker-ce-cli (or your distribution's docker.io / docker-cli package)")
    argv = list(argv)
    if ENV_FILE_SLOT in argv:
        fd = env_file_fd(environment)
        base = "/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd"
        argv[argv.index(ENV_FILE_SLOT)] = f"{base}/{fd}"
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(exe, argv)
