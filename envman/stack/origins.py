"""Which user matrix files a stack name was resolved with, so that a name that no longer resolves
(its file is no longer loaded: ``ENVMAN_MATRIX`` unset, ``--matrix`` left out) can say which file
it came from.

``$ENVMAN_STATE_DIR/matrix-origins.json`` maps a stack name as written (``torch-0.0.1-cuda11.8``)
to the stack it resolved to and the user matrix files loaded then. It is written only when a name
resolves with user files loaded and the record changes; shipped files are never recorded.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Sequence

ORIGINS_FILE = "matrix-origins.json"
MAX_NAMES = 256


def _path() -> Path:
    from envman.paths import state_dir

    return state_dir() / ORIGINS_FILE


def _load() -> dict[str, dict[str, Any]]:
    from envman.state import read_json_object

    return read_json_object(_path())


def record(query: str, stack_name: str, extra: Sequence[str | os.PathLike[str]] = ()) -> None:
    """Remember the user matrix files ``query`` resolved with (nothing when there are none)."""
    from envman.config import user_matrix_paths

    files = [str(p.expanduser().absolute()) for p in user_matrix_paths(extra)]
    if not files:
        return
    data = _load()
    entry = {"stack": stack_name, "files": files}
    if data.get(query) == entry:
        return
    data.pop(query, None)
    data[query] = entry
    while len(data) > MAX_NAMES:
        data.pop(next(iter(data)))
    try:
        from envman.state import atomic_write

        atomic_write(_path(), json.dumps(data, indent=1, sort_keys=False))
    except OSError:
        pass  # a hint that cannot be kept only costs the hint


def missing_files_hint(query: str, extra: Sequence[str | os.PathLike[str]] = ()) -> str | None:
    """Why ``query`` may no longer resolve: the recorded user matrix files not loaded now."""
    from envman.config import user_matrix_paths

    entry = _load().get(query)
    if not isinstance(entry, dict) or not isinstance(entry.get("files"), list):
        return None
    loaded = {str(p.expanduser().absolute()) for p in user_matrix_paths(extra)}
    gone = [f for f in entry["files"] if isinstance(f, str) and f not in loaded]
    if not gone:
        return None
    return (f"{query} resolved to {entry.get('stack')} with the matrix file{'s' if len(gone) > 1 else ''} "
            f"{', '.join(gone)}, not loaded now: add it to [matrix] files in config.toml, set ENVMAN_MATRIX, "
            "or pass --matrix")
