"""Build contexts as deterministic tarballs: the one function that packs files for an engine.

The bytes depend on names, contents and modes only, so identical inputs give identical tars and
the engine's cache keys (and render hashes computed over the same files) stay stable. Standard
library only.
"""

from __future__ import annotations

import io
import os
import posixpath
import stat
import tarfile
from collections.abc import Mapping
from pathlib import Path
from typing import Union

from envman.errors import UserError

# A build context file: its bytes (mode 0644) or its bytes and a mode.
ContextFile = Union[bytes, tuple[bytes, int]]


def deterministic_tar(files: Mapping[str, ContextFile]) -> bytes:
    """An uncompressed tar of ``files`` whose bytes depend on names, contents and modes only.

    Names are sorted, parents get explicit directory entries (0755), owners are 0:0 with empty
    user/group names and every mtime is 0, so identical inputs give identical bytes and the
    engine's cache keys stay stable. Names must be relative and must not
    climb out of the context.
    """
    entries: dict[str, tuple[bytes, int]] = {}
    for raw_name, value in files.items():
        name = _context_name(raw_name)
        data, mode = (value, 0o644) if isinstance(value, (bytes, bytearray)) else value
        if not isinstance(data, (bytes, bytearray)):
            raise TypeError(f"build context file {raw_name!r}: expected bytes, got {type(data).__name__}")
        if name in entries:
            raise UserError(f"build context: {raw_name!r} given twice")
        entries[name] = (bytes(data), stat.S_IMODE(mode))

    dirs: set[str] = set()
    for name in entries:
        parent = posixpath.dirname(name)
        while parent:
            dirs.add(parent)
            parent = posixpath.dirname(parent)
    clash = dirs & entries.keys()
    if clash:
        raise UserError(f"build context: {sorted(clash)[0]!r} is both a file and a directory")

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(dirs | entries.keys()):
            info = tarfile.TarInfo(name)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            if name in dirs:
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                tar.addfile(info)
            else:
                data, mode = entries[name]
                info.mode = mode
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def files_from_dir(root: str | os.PathLike[str]) -> dict[str, tuple[bytes, int]]:
    """Read a folder into :func:`deterministic_tar` input.

    Only content and the executable bit survive (0755 or 0644): mtimes, owners and other mode
    bits of the checkout do not leak into the context. Symlinks are refused rather than
    followed out of the folder.
    """
    base = Path(root)
    out: dict[str, tuple[bytes, int]] = {}
    for path in sorted(base.rglob("*")):
        rel = path.relative_to(base).as_posix()
        if path.is_symlink():
            raise UserError(f"build context: {rel} is a symlink", where=str(base))
        if path.is_file():
            executable = path.stat().st_mode & 0o111
            out[rel] = (path.read_bytes(), 0o755 if executable else 0o644)
    return out


def _context_name(name: str) -> str:
    norm = posixpath.normpath(name.replace("\\", "/"))
    if not name or norm.startswith("/") or norm == "." or norm == ".." or norm.startswith("../"):
        raise UserError(f"build context: {name!r} is not a relative path inside the context")
    return norm
