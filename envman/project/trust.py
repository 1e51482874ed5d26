"""Trust in project files, per user: ``envman project trust|untrust|trusted``.

Modelled on direnv's ``allow`` (a record of the file's path and the hash of its content, kept
in the user's own directory: any edit needs a new ``allow``), git's ``safe.directory`` (a file
found by walking up must be yours, in a directory only you can change) and VS Code's Workspace
Trust (an untrusted folder still opens, in a restricted mode).

The record is ``trust.json`` in envman's config directory: ``{"schema": 1, "files": {REAL PATH:
{"sha256": HEX, "trusted": ISO TIME}}}``, mode 0600 in a 0700 directory, written atomically
under a lock. A record that is not the user's own file, or that others can write, is ignored
(everything is then untrusted) rather than believed.

What a file asks for and whether that needs trust is decided below (:func:`trust_asks`,
:func:`require_trust`), from the parsed file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, TypeVar

from envman.errors import EnvmanError, UserError, clip_list, printable
from envman.paths import config_dir
import shlex

from envman.project.file import ProjectConfig, default_shm_size, mount_text, shm_bytes, unsafe_reason

TRUST_FILE = "trust.json"
_T = TypeVar("_T")


def trust_path() -> Path:
    return config_dir() / TRUST_FILE


def _read(path: Path) -> dict[str, dict[str, Any]]:
    """The records in ``path``; nothing when it is missing or cannot be believed (someone else's
    file, writable by others, a symlink, a FIFO: :func:`envman.safefile.read_state`)."""
    from envman.safefile import read_state_json

    doc = read_state_json(path, what="trust record")
    files = doc.get("files") if isinstance(doc, dict) and doc.get("schema") == 1 else None
    if not isinstance(files, dict):
        return {}
    return {k: v for k, v in files.items() if isinstance(k, str) and isinstance(v, dict) and isinstance(v.get("sha256"), str)}


def _roots(real_path: str, entry: dict[str, Any]) -> list[str]:
    """The directories ``entry`` trusts its file to be used from (a record without any: the
    file's own directory)."""
    roots = entry.get("roots")
    if isinstance(roots, list) and all(isinstance(r, str) for r in roots):
        return roots
    return [os.path.dirname(real_path)]


def _owner(real_path: str) -> int | None:
    try:
        return os.stat(real_path).st_uid
    except OSError:
        return None


def owner_changed(real_path: str, entry: dict[str, Any]) -> bool:
    """Whether the file at ``real_path`` is no longer owned by whoever owned it when ``entry``
    trusted it: a folder you deleted in a shared place and someone else made again, with the same
    file in it, is theirs. A record from before owners were kept holds only for a file of yours.
    A file that is not there is not changed (there is nothing to run)."""
    owner = _owner(real_path)
    if owner is None:  # no file there now: nothing to run, nothing to decide
        return False
    uid = entry.get("uid")
    if isinstance(uid, int) and not isinstance(uid, bool):
        return owner != uid
    return owner != os.getuid()


def trusted_entry(real_path: str, sha256: str, root: str | os.PathLike[str] | None = None,
                  path: Path | None = None) -> dict[str, Any] | None:
    """The record that trusts the file at ``real_path`` with content ``sha256`` used as the
    project file of the directory ``root`` (default: the file's own directory), or ``None``.
    Trust is bound to all three and to the file's owner: a symlink elsewhere to a trusted file is
    not trusted, nor the same file made again by someone else (:func:`owner_changed`)."""
    entry = _read(path or trust_path()).get(real_path)
    if entry is None or entry.get("sha256") != sha256:
        return None
    where = os.path.realpath(root) if root is not None else os.path.dirname(real_path)
    if where not in _roots(real_path, entry) or owner_changed(real_path, entry):
        return None
    return entry


def records(path: Path | None = None) -> dict[str, dict[str, Any]]:
    """Every trusted file: real path → {"sha256", "trusted"}."""
    return dict(sorted(_read(path or trust_path()).items()))


def is_trusted(real_path: str, sha256: str, path: Path | None = None, *,
               root: str | os.PathLike[str] | None = None) -> bool:
    return trusted_entry(real_path, sha256, root, path) is not None


def project_trusted(project: ProjectConfig) -> bool:
    """Whether ``project``'s file is trusted as it is now, as the project file of its directory
    (what gates the user config's environment and mounts: :func:`envman.project.settings.merge_settings`)."""
    return trusted_entry(project.real_file, project.digest, project.root) is not None


#: How long ``project trust`` / ``untrust`` wait for another envman process writing the record.
LOCK_TIMEOUT = 60.0


def _update(change: Callable[[dict[str, dict[str, Any]]], _T], path: Path | None = None) -> _T:
    """Apply ``change`` to the records under the record's lock and write them back (mode 0600);
    ``change``'s answer is returned. A lock held past :data:`LOCK_TIMEOUT` is one error line."""
    from filelock import FileLock, Timeout

    from envman.safefile import private_dir
    from envman.state import atomic_write

    file = path or trust_path()
    private_dir(file.parent)
    lock = FileLock(str(file.with_name(file.name + ".lock")))
    try:
        lock.acquire(timeout=LOCK_TIMEOUT)
    except Timeout:
        raise EnvmanError(f"another envman process has held the trust record's lock for {LOCK_TIMEOUT:.0f} s",
                          where=lock.lock_file, fix="wait for it to finish, or remove the lock file if no envman "
                          "process is running") from None
    try:
        files = _read(file)
        answer = change(files)
        doc = {"schema": 1, "files": dict(sorted(files.items()))}
        atomic_write(file, json.dumps(doc, indent=2) + "\n")  # 0600, atomic_write's default
        return answer
    finally:
        lock.release()


def trust(real_path: str, sha256: str, path: Path | None = None, *,
          root: str | os.PathLike[str] | None = None) -> None:
    """Record the file at ``real_path`` with content hash ``sha256`` as trusted when used from
    the directory ``root`` (default: its own directory). Other directories trusted for the same
    content stay trusted; a new content forgets them."""
    import datetime as _dt

    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    where = os.path.realpath(root) if root is not None else os.path.dirname(real_path)

    owner = _owner(real_path)

    def change(files: dict[str, dict[str, Any]]) -> None:
        old = files.get(real_path)
        same = old is not None and old.get("sha256") == sha256 and not owner_changed(real_path, old)
        roots = set(_roots(real_path, old)) if old is not None and same else set()
        files[real_path] = {"sha256": sha256, "trusted": now, "roots": sorted(roots | {where}), "uid": owner}

    _update(change, path)


def untrust(real_path: str, path: Path | None = None) -> bool:
    """Forget a file; ``False`` when it was not trusted."""

    def change(files: dict[str, dict[str, Any]]) -> bool:
        return files.pop(real_path, None) is not None

    return _update(change, path)


# --------------------------------------------------------------------------- what needs trust

#: Keys an untrusted project file may use: choosing and building the stack (inside a container,
#: with no host path but the project, no port, no variable and no command of the file's), and
#: asking for less than the defaults (``gpus = "none"``, a ``shm_size`` no larger than the default).
UNTRUSTED_KEYS = ("name", "stack", "requirements", "apt")


def trust_asks(project: ProjectConfig) -> list[str]:
    """What ``project``'s file asks for beyond :data:`UNTRUSTED_KEYS`, one phrase per kind (the
    environment by names only, never values); empty when the file needs no trust."""
    asks = []
    root = os.path.realpath(project.root)
    outside = [m for m in project.mounts if not _inside(m.source, root)]
    inside = [m for m in project.mounts if _inside(m.source, root)]
    if outside:
        asks.append("mounts outside the project: " + clip_list([mount_text(m) for m in outside]))
    if inside:
        asks.append("mounts: " + clip_list([mount_text(m) for m in inside]))
    if project.ports:
        asks.append("ports (127.0.0.1): " + clip_list([f"{p.host}:{p.container}" for p in project.ports]))
    if project.environment:
        asks.append("environment: " + clip_list([k for k, _ in project.environment]))
    if project.command:
        # Shown whole (a command is read to be trusted; a long one is one long line), every
        # control character escaped, so "curl …|sh\x1b[2K\rpython train.py" shows the curl.
        asks.append("command: " + printable(shlex.join(project.command)))
    if project.gpus is not None:  # "none" asks for less than the default: no trust needed
        asks.append(f"gpus: {project.gpus}")
    if project.shm_size is not None and shm_bytes(project.shm_size) > shm_bytes(default_shm_size()):
        asks.append(f"shm_size: {project.shm_size} (more than the default {default_shm_size()})")
    return asks


def _inside(path: str, root: str) -> bool:
    from envman.safefile import is_within

    return is_within(os.path.realpath(path), root)


def require_trust(project: ProjectConfig) -> None:
    """Refuse ``project`` unless its file is trusted as it is now, or asks for nothing that needs
    trust and is the user's own (:func:`unsafe_reason`). One line lists every ask and the command
    that trusts the file."""
    record = records().get(project.real_file)
    if trusted_entry(project.real_file, project.digest, project.root) is not None:
        return
    asks = trust_asks(project)
    foreign = unsafe_reason(project.file)
    if not asks and not foreign:
        return
    what = "; ".join(asks) if asks else "nothing beyond a stack"
    if record is None:
        state = "new to you"
    elif record.get("sha256") == project.digest and owner_changed(project.real_file, record):
        state = "its owner is not the one it had when you trusted it"
    elif record.get("sha256") == project.digest:
        state = f"trusted only as the project file of {', '.join(_roots(project.real_file, record))}"
    else:
        state = "changed since you trusted it"
    why = f"it is not trusted ({state}; {foreign}) and asks for {what}" if foreign else \
        f"it is not trusted ({state}) and asks for {what}"
    raise UserError(why, where=str(project.file),
                    fix=f"read it, then trust it: envman project trust {shlex.quote(str(project.file))}")


