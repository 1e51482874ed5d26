"""envman's names and files: image tags, and the state directory's reports, logs and locks.

Light on purpose (standard library only, nothing imported that a command does not use): the
hot path of ``envman run`` reads a stack's stable tag and its smoke report from here without
loading the build pipeline.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
import re
import stat
import time

from envman.paths import state_dir

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (hot path)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from typing import Protocol

    class Stack(Protocol):  # envman.stack.names.Stack, as far as a tag needs it (no import of that layer)
        @property
        def name(self) -> str: ...
        @property
        def tag_key(self) -> str: ...

REPO_PREFIX = "envman/"
STABLE_TAG = "latest"
#: The repository of the bases envman rebuilds from NVIDIA's recipes (``envman.render.base``).
BASE_REPOSITORY = "envman/base"


def repository(stack_name: str) -> str:
    """``envman/<stack>``: the repository of a stack's images."""
    return REPO_PREFIX + stack_name.lower()


def candidate_ref(stack_name: str, render_hash: str) -> str:
    """The content-addressed candidate tag of a build."""
    return f"{repository(stack_name)}:{render_hash[:16]}"


def is_stable_tag(ref: str) -> bool:
    """Whether an image reference carries a stable tag: ``latest`` (a shipped stack's) or
    ``latest-<12 hex digits>`` (a stack of a user's matrix, named by its content)."""
    name = ref.rsplit("/", 1)[-1]
    tag = name.rsplit(":", 1)[1] if ":" in name else ""
    return tag == STABLE_TAG or re.fullmatch(STABLE_TAG + r"-[0-9a-f]{12}", tag) is not None


def stable_ref(stack: Stack | str) -> str:
    """The tag that moves only when a smoke test allows it: ``latest`` for a stack as envman's
    shipped matrix gives it, ``latest-<content key>`` for one a user's matrix changed or added
    (:attr:`envman.stack.names.Stack.tag_key`). A bare name is a shipped stack's."""
    if isinstance(stack, str):
        return f"{repository(stack)}:{STABLE_TAG}"
    return f"{repository(stack.name)}:{STABLE_TAG}" + (f"-{stack.tag_key}" if stack.tag_key else "")


# --- state files (atomic writes) ---------------------------------------------------------------


def atomic_write(path: Path, data: str | bytes, *, mode: int = 0o600) -> None:
    """Write ``path`` so that a reader (or a crash) never sees it half-written. ``mode``: the
    file's permissions (0600, private, by default; project files others read are 0644)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep_stale_temps(path)
    how = "wb" if isinstance(data, bytes) else "w"
    fd, tmp = _new_temp(path)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, how) as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _new_temp(path: Path) -> tuple[int, str]:
    """A new private file ``.<name>.<random>.tmp`` beside ``path``, opened for writing: made
    with ``O_EXCL`` and ``O_NOFOLLOW`` (never one that exists, never through a link planted
    under its name), mode 0600, as ``tempfile.mkstemp`` makes them, without importing
    ``tempfile`` and ``random`` on every run's path."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = os.path.join(path.parent, f".{path.name}.{os.urandom(8).hex()}.tmp")
        try:
            return os.open(tmp, flags, 0o600), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")


#: How long a temporary file of :func:`atomic_write` must have been left untouched to be taken
#: for the leftover of a killed write (a write in progress is far younger).
STALE_TEMP_SECONDS = 600


def sweep_stale_temps(path: Path, *, older_than: float = STALE_TEMP_SECONDS) -> list[Path]:
    """Remove what writes of ``path`` killed between creating and renaming their temporary file
    (``kill -9``, a power cut) left beside it: ``.<name>.*.tmp`` files that are regular files of
    this user, untouched for ``older_than`` seconds; another user's file, a symlink or a fresh one
    is left alone. Returns what was removed."""
    prefix, now = f".{path.name}.", time.time()
    removed: list[Path] = []
    try:
        entries = list(os.scandir(path.parent))
    except OSError:
        return removed
    for entry in entries:
        if not (entry.name.startswith(prefix) and entry.name.endswith(".tmp")):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and now - st.st_mtime > older_than:
                os.unlink(entry.path)
                removed.append(Path(entry.path))
        except OSError:
            continue  # gone meanwhile, or not ours to remove
    return removed


def safe_name(name: str) -> str:
    """``name`` as a file name: anything but letters, digits and ``._-`` becomes ``_``."""
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)


def logs_dir() -> Path:
    return state_dir() / "logs"


def reports_dir() -> Path:
    return state_dir() / "reports"


def locks_dir() -> Path:
    return state_dir() / "locks"


def report_path(image_id: str) -> Path:
    return reports_dir() / f"{safe_name(image_id.replace('sha256:', ''))}.json"


def save_report_json(image_id: str, report: Mapping[str, Any]) -> Path:
    """Cache a smoke report for an image id (this user's copy; the image's labels are the truth)."""
    path = report_path(image_id)
    atomic_write(path, json.dumps(report, indent=2, sort_keys=True))
    return path


def read_json_object(path: Path) -> dict:
    """A JSON object kept in a state file; ``{}`` when the file is missing, unreadable, not JSON
    or not an object."""
    from envman.safefile import read_state_json

    data = read_state_json(path, what=f"state file {path.name}")
    return data if isinstance(data, dict) else {}


def load_report(image_id: str) -> dict | None:
    """The smoke report kept for an image id, or ``None``."""
    from envman.safefile import read_state_json

    data = read_state_json(report_path(image_id), what="cached smoke report")
    return data if isinstance(data, dict) else None
