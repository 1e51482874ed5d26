"""A cloned repository as detection reads it: which files, read how.

Nothing in the repository is executed or imported. The walk never follows a symbolic link, stays
below the root, skips what is not the project's own code (version-control folders, virtual
environments, vendored trees) and stops at fixed limits (files seen, depth, bytes per file), so a
hostile or huge repository costs a bounded time. Files are read through ``envman.safefile`` (a
FIFO or a device is never opened for reading; the real path must lie inside the root) and decoded
as UTF-8 with undecodable bytes replaced: detection only reads, and what reaches an image build is
checked again on its own terms.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

#: Folders that hold no code of the project's own.
SKIP_DIRS = frozenset({
    ".git", ".hg", ".svn", "node_modules", "__pycache__", "site-packages", ".venv", "venv", ".tox", ".nox",
    ".eggs", ".mypy_cache", ".pytest_cache", ".ipynb_checkpoints", "third_party", "thirdparty", "3rdparty",
    "third-party", "external", "externals", "vendor", "vendored", "wandb", "mlruns",
})
#: At most this many entries are looked at, this deep.
MAX_ENTRIES = 50_000
MAX_DEPTH = 10
#: Bytes read of a manifest (requirements, conda, setup, Dockerfile) and a README; of a Python
#: file, its first 64 KiB (where its imports are).
MANIFEST_LIMIT = 1024 * 1024
PROSE_LIMIT = 512 * 1024
CODE_LIMIT = 64 * 1024
#: Python (and Lua) files whose imports are counted.
MAX_CODE_FILES = 4000


@dataclass
class Repository:
    """The files of a repository by kind, found by one bounded walk."""

    root: Path
    files: list[str] = field(default_factory=list)  # every regular file seen, relative, "/"-separated
    truncated: bool = False  # the walk stopped at a limit

    @classmethod
    def scan(cls, root: str | os.PathLike[str]) -> "Repository":
        from envman.errors import UserError

        path = Path(root)
        try:
            st = os.stat(path)
        except OSError as exc:
            raise UserError(f"cannot read the repository: {exc.strerror or exc}", where=str(path),
                            fix="give the folder of a cloned repository") from None
        if not stat.S_ISDIR(st.st_mode):
            raise UserError("not a folder", where=str(path), fix="give the folder of a cloned repository")
        repo = cls(path.resolve())
        repo._walk()
        return repo

    def _walk(self) -> None:
        seen = 0
        stack: list[tuple[str, int]] = [("", 0)]
        while stack:
            rel, depth = stack.pop()
            try:
                entries = sorted(os.scandir(self.root / rel if rel else self.root), key=lambda e: e.name)
            except OSError:
                continue
            dirs = []
            for entry in entries:
                seen += 1
                if seen > MAX_ENTRIES:
                    self.truncated = True
                    return
                name = entry.name
                child = f"{rel}/{name}" if rel else name
                try:
                    if entry.is_symlink():
                        if entry.is_file():  # a link to a file inside the root is read (safefile checks where it leads)
                            self.files.append(child)
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        if name not in SKIP_DIRS and not (name.startswith(".") and name not in (".devcontainer",)) \
                                and depth + 1 < MAX_DEPTH:
                            dirs.append((child, depth + 1))
                    elif entry.is_file(follow_symlinks=False):
                        self.files.append(child)
                except OSError:
                    continue
            stack.extend(reversed(dirs))

    @cached_property
    def file_set(self) -> frozenset[str]:
        """:attr:`files` as a set, made once: each of thousands of READMEs asks whether a file is there."""
        return frozenset(self.files)

    def read(self, rel: str, limit: int = MANIFEST_LIMIT) -> str | None:
        """The text of ``rel``, or ``None`` when it cannot be read as text within ``limit`` bytes
        (too large, outside the root, not a regular file, binary)."""
        from envman.errors import UserError
        from envman.safefile import read_file

        try:
            data = read_file(self.root / rel, what="repository file", limit=limit, inside=self.root)
        except (UserError, OSError):
            return None
        return _text(data)

    def head(self, rel: str, size: int = CODE_LIMIT) -> str | None:
        """The first ``size`` bytes of ``rel`` as text (a source file's imports are at its top;
        a long file is read in part, never skipped), or ``None`` when it cannot be read."""
        from envman.errors import UserError
        from envman.safefile import fd_real_path, is_within, open_file

        path = str(self.root / rel)
        try:
            fd, _ = open_file(path, what="repository file", follow=True)
        except (UserError, OSError):
            return None
        try:
            if not is_within(fd_real_path(fd, path), str(self.root)):
                return None
            data = os.read(fd, size)
        except OSError:
            return None
        finally:
            os.close(fd)
        return _text(data)

    def matching(self, pattern: str, *, max_depth: int = 2) -> list[str]:
        """Files whose path (relative, lower-cased) fully matches ``pattern``, at most ``max_depth``
        folders down, shallowest first."""
        rx = re.compile(pattern)
        found = [f for f in self.files if f.count("/") <= max_depth and rx.fullmatch(f.lower())]
        return sorted(found, key=lambda f: (f.count("/"), f))


def _text(data: bytes) -> str | None:
    """A file's bytes as text: UTF-16 with its byte-order mark (what Windows' PowerShell writes for
    ``pip freeze > requirements.txt``, and pip reads), else UTF-8 with undecodable bytes replaced;
    ``None`` for a binary file (NUL bytes in its first 8 KiB)."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", errors="replace")
    if b"\0" in data[:8192]:
        return None
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    return data.decode("utf-8", errors="replace")
