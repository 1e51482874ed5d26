"""Reading files that someone else may have prepared: project files, requirements, user config,
matrices, registries, reports.

Every read goes through :func:`read_file`: the file is opened with ``O_NONBLOCK`` (a FIFO opens at
once instead of waiting for a writer) and checked with ``fstat`` on the opened descriptor, so a
FIFO, a socket, a device such as ``/dev/zero`` or a directory is refused before a byte is read,
and what is checked is what is read (no window between a check and the open). At most ``limit``
bytes are read. With ``inside``, the opened file's real path (symlinks resolved, read back from
the descriptor) must lie inside that directory's real path. :func:`read_text` adds the decoding
rules of a text file: UTF-8 only (a UTF-16 file, NUL bytes or invalid UTF-8 are one clean error
naming the file), an optional UTF-8 byte-order mark dropped.

Every failure is one :class:`~envman.errors.UserError` line (exit 2) naming the file.
Standard library only, and only ``os``, ``stat`` and ``sys`` at import (the TOML parser is loaded
by :func:`parse_toml`): the cached run and build paths read their state through this module.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys

from envman.errors import UserError, counted

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (hot path)
if TYPE_CHECKING:
    from pathlib import Path
    from types import ModuleType

#: Project files, user config, registries: small text files.
SMALL_LIMIT = 1024 * 1024
#: Requirements files, matrix files and reports may be larger.
LARGE_LIMIT = 16 * 1024 * 1024


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def fd_real_path(fd: int, fallback: str) -> str:
    """The real path of an open descriptor (``/proc/self/fd``), else of ``fallback``."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return os.path.realpath(fallback)


def is_within(path: str, root: str) -> bool:
    """Whether the real path ``path`` is ``root`` or inside it (both already real paths)."""
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root + "/") or root == "/"


#: How every file is opened: read-only, without blocking (a FIFO opens at once and reads nothing),
#: never as a controlling terminal, closed in child processes.
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def open_file(path: str | os.PathLike[str], *, what: str = "file", fix: str | None = None, private: bool = False,
              follow: bool) -> tuple[int, os.stat_result]:
    """A descriptor on a regular file and its ``fstat``, opened without blocking (a FIFO never
    hangs, a device is refused before a byte is read); ``FileNotFoundError`` passes through,
    every other problem is a ``UserError``. ``follow=False``: a symlink is refused. ``private``:
    one of the user's own records (:func:`state_problem`)."""
    where = str(path)
    if "\0" in where:
        raise UserError(f"{what} path contains a NUL byte", where=repr(where), fix=fix or "give a real path")
    flags = _OPEN_FLAGS if follow else _OPEN_FLAGS | os.O_NOFOLLOW
    try:
        fd = os.open(where, flags)
    except FileNotFoundError:
        raise
    except NotADirectoryError:
        raise FileNotFoundError(where) from None
    except PermissionError:
        raise UserError(f"cannot read the {what}: permission denied", where=where,
                        fix=fix or "make it readable (chmod a+r) or ask its owner") from None
    except OSError as exc:  # ENXIO (a socket), ELOOP, ENAMETOOLONG, ...
        raise UserError(f"cannot open the {what}: {exc.strerror or exc}", where=where,
                        fix=fix or "give a regular file") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UserError(f"is {_kind(st.st_mode)}, expected a regular {what}", where=where,
                            fix=fix or "give a regular file")
        if private and state_problem(st):
            raise UserError(f"the {what} is {state_problem(st)}, so it is not believed", where=where,
                            fix=fix or "remove it (or chmod go-w it if it is yours)")
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def _read_upto(fd: int, limit: int) -> bytes | None:
    """The bytes of ``fd`` to its end, in reads of at most 64 KiB, or ``None`` once it holds more
    than ``limit`` (whatever size it reported: /proc's files say 0, a file may grow); at most
    ``limit + 1`` bytes are read. ``OSError`` passes through."""
    chunks: list[bytes] = []
    total = 0
    while total <= limit:
        data = os.read(fd, min(1 << 16, limit + 1 - total))
        if not data:
            return b"".join(chunks)
        chunks.append(data)
        total += len(data)
    return None


def read_file(path: str | os.PathLike[str], *, what: str = "file", limit: int = SMALL_LIMIT,
              inside: str | os.PathLike[str] | None = None, fix: str | None = None, private: bool = False,
              follow: bool = False) -> bytes:
    """The bytes of a regular file, at most ``limit`` of them; ``FileNotFoundError`` passes
    through (callers word it for their case), every other problem is a ``UserError``.
    ``private``: the file is one of the user's own records (:func:`state_problem`), so one that
    another user owns or can write is refused too, and so is a symlink unless ``follow``: then
    the file it leads to is held to the same rule (a config kept in a dotfiles folder)."""
    where = str(path)
    fd, st = open_file(where, what=what, fix=fix, private=private, follow=follow or not private)
    try:
        if inside is not None:
            real = fd_real_path(fd, where)
            root = os.path.realpath(inside)
            if not is_within(real, root):
                raise UserError(f"the {what} resolves to {real}, outside {root}", where=where,
                                fix=fix or f"keep the file inside {root} (no symlinks or .. leading out)")
        if st.st_size > limit:
            raise UserError(f"the {what} is {st.st_size} bytes, more than the {limit} accepted", where=where,
                            fix=fix or "give a smaller file")
        try:
            data = _read_upto(fd, limit)
        except OSError as exc:
            raise UserError(f"cannot read the {what}: {exc.strerror or exc}", where=where,
                            fix=fix or "check the file") from None
        if data is None:
            raise UserError(f"the {what} is more than {limit} bytes", where=where, fix=fix or "give a smaller file")
        return data
    finally:
        os.close(fd)


#: State files envman keeps for the user (run and render caches, pins, trust, push records, job
#: records, cached reports): at most this many bytes are believed.
STATE_LIMIT = 16 * 1024 * 1024


def state_problem(st: os.stat_result) -> str | None:
    """Why a state file with this ``lstat``/``fstat`` result cannot be believed, or ``None``:
    it must be a regular file owned by the user this process acts as (its effective uid) that
    neither its group nor others can write (anyone who can write it could plant a cached
    ``docker run`` line or a trust record)."""
    if not stat.S_ISREG(st.st_mode):
        return _kind(st.st_mode) if not stat.S_ISLNK(st.st_mode) else "a symbolic link"
    if st.st_uid != os.geteuid():
        return f"owned by uid {st.st_uid}, not by you"
    if st.st_mode & 0o022:
        return "writable by its group or by others"
    return None


def read_state(path: str | os.PathLike[str], *, what: str = "state file", limit: int = STATE_LIMIT,
               warn: bool = True) -> bytes | None:
    """The bytes of one of envman's own state files, or ``None`` when it is missing or cannot be
    believed (:func:`state_problem`: a symlink, a FIFO, a device, someone else's, writable by
    others, larger than ``limit``, unreadable). Opened with ``O_NOFOLLOW | O_NONBLOCK`` and
    checked on the descriptor, so a FIFO never hangs and ``/dev/zero`` is never read. A file that
    exists but is not believed is named in one warning line on stderr (``warn``); the caller then
    acts as if it were absent, and its next write replaces it."""
    where = os.fspath(path)
    flags = _OPEN_FLAGS | os.O_NOFOLLOW

    def ignored(why: str) -> None:
        if warn:
            sys.stderr.write(f"envman: warning: ignoring the {what} {where}: {why} (remove it; envman writes a new one)\n")

    try:
        fd = os.open(where, flags)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:  # ELOOP: a symlink (O_NOFOLLOW); EACCES; ENXIO: a socket
        try:
            why = state_problem(os.lstat(where)) or (exc.strerror or str(exc))
        except OSError:
            why = exc.strerror or str(exc)
        ignored(why)
        return None
    except ValueError:  # a NUL byte in the path
        return None
    try:
        st = os.fstat(fd)
        problem = state_problem(st)
        if problem:
            ignored(problem)
            return None
        if st.st_size > limit:
            ignored(f"{st.st_size} bytes, more than the {limit} accepted")
            return None
        try:
            data = _read_upto(fd, limit)
        except OSError as exc:
            ignored(exc.strerror or str(exc))
            return None
        if data is None:
            ignored(f"more than the {limit} bytes accepted")
        return data
    finally:
        os.close(fd)


def read_state_json(path: str | os.PathLike[str], *, what: str = "state file", limit: int = STATE_LIMIT,
                    warn: bool = True) -> object:
    """:func:`read_state`, parsed as JSON; ``None`` when absent, not believed or not JSON."""
    data = read_state(path, what=what, limit=limit, warn=warn)
    if data is None:
        return None
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None


def decode_text(data: bytes, *, what: str, where: str, fix: str | None = None) -> str:
    """UTF-8 text (a leading UTF-8 BOM dropped); anything else is one ``UserError`` line."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise UserError(f"the {what} is UTF-16, expected UTF-8 text", where=where,
                        fix=fix or "save it as UTF-8 (iconv -f UTF-16 -t UTF-8)")
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if b"\0" in data:
        raise UserError(f"the {what} contains NUL bytes (binary, or not UTF-8)", where=where,
                        fix=fix or "give a UTF-8 text file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"the {what} is not UTF-8 (invalid byte at offset {exc.start})", where=where,
                        fix=fix or "save it as UTF-8") from None


def read_text(path: str | os.PathLike[str], *, what: str = "file", limit: int = SMALL_LIMIT,
              inside: str | os.PathLike[str] | None = None, fix: str | None = None, private: bool = False) -> str:
    """:func:`read_file`, then :func:`decode_text`."""
    return decode_text(read_file(path, what=what, limit=limit, inside=inside, fix=fix, private=private), what=what,
                       where=str(path), fix=fix)


def load_toml(path: str | os.PathLike[str], *, what: str, limit: int = SMALL_LIMIT,
              error: type[UserError] = UserError) -> tuple[dict, bytes]:
    """Parse a TOML file read with :func:`read_text`: (document, the exact bytes parsed), so a
    caller can hash what it validated. ``FileNotFoundError`` passes through."""
    data = read_file(path, what=what, limit=limit)
    return parse_toml(data, what=what, where=str(path), error=error), data


def toml_module() -> "ModuleType":
    """The standard library's ``tomllib`` (``tomli`` before Python 3.11), imported on first use."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    return tomllib


def parse_toml(data: bytes, *, what: str, where: str, error: type[UserError] = UserError) -> dict:
    """The TOML document in ``data`` (read from ``where``, with :func:`read_file`); a decoding or
    syntax problem is one ``error`` line naming ``where``."""
    text = decode_text(data, what=what, where=where)
    tomllib = toml_module()
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"not valid TOML ({exc})", where=where, fix="fix the syntax (https://toml.io)") from None
    except RecursionError:
        raise error("not valid TOML (nested too deeply)", where=where, fix="fix the syntax") from None
    except ValueError as exc:  # an integer longer than Python converts (sys.get_int_max_str_digits)
        limit = getattr(sys, "get_int_max_str_digits", lambda: 4300)()
        # the first number longer than the limit (one of exactly the limit converts: it is not it)
        long = next((m for m in re.finditer(r"[0-9][0-9_]*", text) if len(m.group().replace("_", "")) > limit), None)
        if long is None:
            raise
        line = text[:long.start()].count("\n") + 1
        raise error(f"line {line}: a number of {counted(len(long.group().replace('_', '')), 'digit')}, more than {limit}",
                    where=where, fix="give a shorter value") from exc


def private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) with mode 0700 for the last component; refuse one that is a
    symlink or owned by someone else (a planted directory would see everything written there)."""
    try:
        path.mkdir(parents=True, mode=0o700)
    except FileExistsError:  # already there (a directory, or anything else: refused below)
        pass
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise UserError("is not a directory of yours", where=str(path),
                        fix="remove it, or point ENVMAN_CONFIG_DIR / ENVMAN_STATE_DIR elsewhere")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path
