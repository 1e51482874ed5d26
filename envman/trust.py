"""Trust in project files, per user: ``envman project trust|untrust|trusted``.

Modelled on direnv's ``allow`` (a record of the file's path and the hash of its content, kept
in the user's own directory: any edit needs a new ``allow``), git's ``safe.directory`` (a file
found by walking up must be yours, in a directory only you can change) and VS Code's Workspace
Trust (an untrusted folder still opens, in a restricted mode).

The record is ``trust.json`` in envman's config directory: ``{"schema": 1, "files": {REAL PATH:
{"sha256": HEX, "trusted": ISO TIME}}}``, mode 0600 in a 0700 directory, written atomically
under a lock. A record that is not the user's own file, or that others can write, is ignored
(everything is then untrusted) rather than believed.

What a file asks for and whether that needs trust is decided in :mod:`envman.project`
(:func:`~envman.project.trust_asks`); this module only keeps the record.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

from .errors import UserError
from .paths import config_dir

TRUST_FILE = "trust.json"


def trust_path() -> Path:
    return config_dir() / TRUST_FILE


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read(path: Path) -> dict[str, dict[str, Any]]:
    from .safefile import read_file

    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return {}
    except OSError:
        return {}
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        return {}  # not ours, or writable by others: believe nothing in it
    try:
        doc = json.loads(read_file(path, what="trust record").decode("utf-8"))
    except (FileNotFoundError, UnicodeDecodeError, ValueError, UserError):
        return {}
    files = doc.get("files") if isinstance(doc, dict) and doc.get("schema") == 1 else None
    if not isinstance(files, dict):
        return {}
    return {k: v for k, v in files.items() if isinstance(k, str) and isinstance(v, dict) and isinstance(v.get("sha256"), str)}


def records(path: Path | None = None) -> dict[str, dict[str, Any]]:
    """Every trusted file: real path → {"sha256", "trusted"}."""
    return dict(sorted(_read(path or trust_path()).items()))


def is_trusted(real_path: str, sha256: str, path: Path | None = None) -> bool:
    entry = _read(path or trust_path()).get(real_path)
    return entry is not None and entry.get("sha256") == sha256


def _update(change, path: Path | None = None) -> None:
    from filelock import FileLock

    from .safefile import private_dir
    from .state import atomic_write

    file = path or trust_path()
    private_dir(file.parent)
    with FileLock(str(file.with_name(file.name + ".lock")), timeout=60):
        files = _read(file)
        change(files)
        doc = {"schema": 1, "files": dict(sorted(files.items()))}
        atomic_write(file, json.dumps(doc, indent=2) + "\n", mode=0o600)


def trust(real_path: str, sha256: str, path: Path | None = None) -> None:
    """Record the file at ``real_path`` with content hash ``sha256`` as trusted."""
    import datetime as _dt

    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    def change(files: dict[str, dict[str, Any]]) -> None:
        files[real_path] = {"sha256": sha256, "trusted": now}

    _update(change, path)


def untrust(real_path: str, path: Path | None = None) -> bool:
    """Forget a file; ``False`` when it was not trusted."""
    removed: list[str] = []

    def change(files: dict[str, dict[str, Any]]) -> None:
        if files.pop(real_path, None) is not None:
            removed.append(real_path)

    _update(change, path)
    return bool(removed)
