"""What a render learns from a wheelhouse file, kept while the file is unchanged.

Rendering a stack with ``--wheelhouse`` hashes every selected wheel's bytes into the render hash
and reads the zip directory of each candidate wheel for its ``Requires-Dist``: for the CPU wheel
of torch (192 MB, 12,000 zip entries) about a quarter of a second of CPU, paid again by every
``envman build`` that the run-plan cache does not answer. Both are kept in ``wheels.json`` in the
user's envman cache folder (:func:`envman.paths.cache_dir`), per real path, with what the file
system says of the file: device, inode, size, modification and change time in nanoseconds. A
file written since has another change time (which ``touch`` cannot set back), so any difference
is a miss and the wheel is read as without this cache. A digest is believed only when the
descriptor's ``fstat`` before and after reading the bytes matches the kept one, so the bytes in
the context are the bytes the digest is of. A file changed less than :data:`SETTLED_NS` ago is
never kept: file times tick in steps of milliseconds, so a second write of the same size within
one step would leave every time as it was (git's "racily clean" entries, handled the same way).

The file is one of the user's own records (:func:`envman.safefile.read_state_json`: a symlink,
another user's file or one that others can write is not believed), mode 0600 in a private
folder, the newest :data:`MAX_ENTRIES` wheels; ``ENVMAN_RUN_CACHE=0`` turns it off, as it does
the other caches.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from pathlib import Path
from typing import Any, Callable

FACTS_FILE = "wheels.json"
CACHE_FORMAT = 1
MAX_ENTRIES = 256
#: A file whose change time is newer than this (nanoseconds before now) is read, never kept.
SETTLED_NS = 2_000_000_000

#: (Requires-Dist lines, Requires-Python) of a wheel.
Requires = tuple[tuple[str, ...], "str | None"]


def _path() -> str:
    from envman.paths import cache_dir

    return os.path.join(cache_dir(), FACTS_FILE)


def _signature(st: os.stat_result) -> list[int]:
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _settled(sig: list[int]) -> bool:
    """Whether a file with this signature last changed long enough ago to be kept."""
    return time.time_ns() - max(sig[3], sig[4]) >= SETTLED_NS


class WheelFacts:
    """The kept facts, read on first use and written back by :meth:`save` when they changed."""

    def __init__(self) -> None:
        self._entries: dict[str, dict[str, Any]] | None = None
        self._where = ""  # the file they were read from (the cache folder may change in a process)
        self._changed = False

    @staticmethod
    def enabled() -> bool:
        from envman.paths import caches_enabled

        return caches_enabled()

    def _all(self) -> dict[str, dict[str, Any]]:
        if self._entries is None or self._where != _path():
            self._entries, self._where, self._changed = {}, _path(), False
            if self.enabled():
                from envman.safefile import read_state_json

                data = read_state_json(_path(), what="wheelhouse cache")
                if isinstance(data, dict) and data.get("format") == CACHE_FORMAT and isinstance(data.get("wheels"), dict):
                    self._entries = {k: v for k, v in data["wheels"].items() if isinstance(v, dict)}
        return self._entries

    def _entry(self, real: str, sig: list[int]) -> dict[str, Any]:
        """The kept entry of ``real`` when it was kept for ``sig``, else a new empty one."""
        entries = self._all()
        entry = entries.get(real)
        if not isinstance(entry, dict) or entry.get("sig") != sig:
            entry = entries[real] = {"sig": sig}
            self._changed = True
        return entry

    def read(self, path: str | os.PathLike[str]) -> tuple[bytes, str]:
        """(the bytes of the wheel at ``path``, their sha256 in hex)."""
        real = os.path.realpath(path)
        fd = os.open(real, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):  # swapped for a FIFO or a device since it was listed
                from envman.errors import RenderError

                raise RenderError(f"wheel {os.path.basename(real)!r} is not a regular file", where=str(path),
                                  fix="keep only wheel files in the wheelhouse")
            before = _signature(st)
            with os.fdopen(os.dup(fd), "rb") as fh:
                data = fh.read()
            after = _signature(os.fstat(fd))
        finally:
            os.close(fd)
        entry = self._entry(real, before) if before == after and _settled(before) else None
        digest = entry.get("sha256") if entry is not None else None
        if not isinstance(digest, str):
            digest = hashlib.sha256(data).hexdigest()
            if entry is not None:
                entry["sha256"] = digest
                self._changed = True
        return data, digest

    def requires(self, path: str | os.PathLike[str], read: Callable[[Any], Requires]) -> Requires:
        """``read(path)`` (a wheel's Requires-Dist and Requires-Python), or what it gave for the
        same file before."""
        real = os.path.realpath(path)
        before = _signature(os.stat(real))
        if not _settled(before):
            return read(path)
        entry = self._entry(real, before)
        kept = entry.get("requires")
        if (isinstance(kept, list) and len(kept) == 2 and isinstance(kept[0], list)
                and all(isinstance(x, str) for x in kept[0]) and (kept[1] is None or isinstance(kept[1], str))):
            return tuple(kept[0]), kept[1]
        value = read(path)
        if _signature(os.stat(real)) == before:
            entry["requires"] = [list(value[0]), value[1]]
            self._changed = True
        return value

    def save(self) -> None:
        """Write the facts back if any changed (the newest :data:`MAX_ENTRIES` wheels)."""
        if not self._changed or not self.enabled():
            return
        from envman.errors import EnvmanError
        from envman.safefile import private_dir
        from envman.state import atomic_write

        entries = self._all()
        kept = dict(list(entries.items())[-MAX_ENTRIES:])
        path = Path(_path())
        try:
            private_dir(path.parent)
            atomic_write(path, json.dumps({"format": CACHE_FORMAT, "wheels": kept}))
            self._changed = False
        except (OSError, EnvmanError):
            pass  # a cache that cannot be written only costs time


#: The facts of this process (a ``render --all`` reads the file once).
FACTS = WheelFacts()
