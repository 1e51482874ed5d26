"""The containers this user's envman started: their IDs, kept in the user's own state.

A run container's labels (``envman.uid``, ``envman.env``, ``envman.project``) are written by
whoever creates the container, so on a shared engine they tell nothing about who started it: a
neighbour can start any image with the labels of your environment. Every ``docker run`` envman
hands over to gets ``--cidfile`` with a new file in ``<state dir>/containers`` (mode 0700): the
engine's CLI, running as you, writes the container's ID there when it creates it. ``envman exec``,
``stop`` and ``ps`` act only on containers whose ID is in one of those files. A file whose
container is not listed is removed once older than :data:`GRACE_S` (a container being created is
not listed yet). ``envman ps``, ``exec`` and ``stop`` sweep the folder each time; a run's hand-off
sweeps it too once it holds more than :data:`SWEEP_AT` files (at most every :data:`SWEEP_EVERY_S`),
so a user who only ever runs does not keep a file of every run forever.

Standard library only, and neither pathlib nor typing: a cached run loads this.
"""

from __future__ import annotations

import os
import stat
import time

from envman.errors import UserError
from envman.paths import state_folder

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (hot path)
if TYPE_CHECKING:
    from typing import Iterable, Sequence

#: How old a file of a container no longer listed must be before it is removed (seconds).
GRACE_S = 3600
#: How many files the folder may hold before a run's hand-off sweeps it (asking the local engine
#: which of this user's run containers still run, as ``envman ps`` does).
SWEEP_AT = 256
#: The least time between two sweeps of a run's hand-off (seconds): a file is removed only once
#: older than :data:`GRACE_S`, so sweeping more often frees little and costs every run of a burst.
SWEEP_EVERY_S = 600
#: The file whose modification time says when a run's hand-off last swept the folder.
_SWEPT = ".swept"
#: The most bytes read from one file (an ID and a line break).
_MAX_BYTES = 256
_HEX = frozenset("0123456789abcdef")


def containers_dir() -> str:
    return os.path.join(state_folder(), "containers")


def _own_folder(path: str) -> str:
    """``path`` made (mode 0700) or found as a directory of this user's, never a symlink."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise UserError("is not a directory of yours", where=path,
                        fix="remove it, or point ENVMAN_STATE_DIR elsewhere")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


def with_cidfile(argv: Sequence[str]) -> list[str]:
    """``argv`` (a ``docker run`` / ``podman [--remote --url URL] run`` command line) with
    ``--cidfile <a new file of this user's>`` after its ``run`` word; unchanged when it has none."""
    out = list(argv)
    at = next((i for i in range(1, len(out)) if out[i] == "run" and out[i - 1] != "--url"), None)
    if at is None:
        return out
    folder = _own_folder(containers_dir())
    _sweep_when_full(folder)
    path = os.path.join(folder, f"{os.urandom(16).hex()}.cid")
    out[at + 1:at + 1] = ["--cidfile", path]
    return out


def _sweep_when_full(folder: str) -> None:
    """:func:`started_ids` over ``folder`` when it holds more than :data:`SWEEP_AT` files and was
    not swept in the last :data:`SWEEP_EVERY_S`, the engine's running run containers of this user
    listed as ``envman ps`` lists them. Nothing when no local engine answers (``envman ps`` sweeps
    then); never an error: a sweep does not stop a run."""
    try:
        if len(os.listdir(folder)) <= SWEEP_AT:
            return
        stamp = os.path.join(folder, _SWEPT)
        try:
            if time.time() - os.lstat(stamp).st_mtime < SWEEP_EVERY_S:
                return
        except FileNotFoundError:
            pass
        from envman import labels as L
        from envman.engine.socket import local_socket, running_ids

        sock = local_socket()
        if sock is None:
            return
        listed = running_ids(sock, [f"{L.ROLE}={L.ROLE_RUN}", f"{L.UID}={os.getuid()}"], timeout=10)
        os.close(os.open(stamp, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
        os.utime(stamp)
        started_ids(listed)
    except Exception:  # noqa: BLE001 - the engine's CLI, run next, says what is wrong with it
        return


def _read_id(path: str) -> tuple[str | None, float]:
    """(the container ID a regular file of this user's holds, or ``None``; its modification time)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None, 0.0
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            return None, st.st_mtime
        text = os.read(fd, _MAX_BYTES).decode("ascii", "replace").strip()
    except OSError:
        return None, 0.0
    finally:
        os.close(fd)
    return (text if len(text) == 64 and set(text) <= _HEX else None), st.st_mtime


def started_ids(listed: Iterable[str] = (), *, now: float | None = None) -> frozenset[str]:
    """The IDs of the containers this user's envman started, as its files say. A file whose ID is
    not among ``listed`` (the containers the engine lists now) is removed once older than
    :data:`GRACE_S`; so is one that holds no ID, or is no regular file of this user's."""
    folder = containers_dir()
    try:
        st = os.lstat(folder)
        names = os.listdir(folder) if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() else []
    except OSError:
        return frozenset()
    present = {c[:12] for c in listed}
    t = time.time() if now is None else now
    out = set()
    for name in names:
        if not name.endswith(".cid"):
            continue
        path = os.path.join(folder, name)
        cid, mtime = _read_id(path)
        if cid is not None and (cid[:12] in present or t - mtime <= GRACE_S):
            out.add(cid)
        elif t - mtime > GRACE_S:
            try:
                os.unlink(path)
            except OSError:
                pass
    return frozenset(out)


def started_here(container_id: str, started: Iterable[str]) -> bool:
    """Whether ``container_id`` (full, or the short form of at least 12 digits an engine may
    list) is one of ``started``."""
    return len(container_id) >= 12 and any(s.startswith(container_id) for s in started)


__all__ = ["GRACE_S", "SWEEP_AT", "SWEEP_EVERY_S", "containers_dir", "started_here", "started_ids", "with_cidfile"]
