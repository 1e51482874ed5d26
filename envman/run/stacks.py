"""Stack names resolved on the run path, cached.

Resolving a name needs the matrix; the run path keeps the resolved stack in a small cache keyed
by the matrix files' fingerprint and envman's version, so a warm ``envman run`` loads no matrix.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from envman.stack.names import Stack

if TYPE_CHECKING:

    pass


# --------------------------------------------------------------------------- stacks, cached


def resolve_stack(name: str, matrix_files: Sequence[str | os.PathLike[str]], load: Callable[[], Any]) -> Stack:
    """``resolve(matrix, name)`` through a cache keyed by the matrix files' sizes and mtimes, so a
    run does not parse the whole matrix (~100 ms) to learn what it learnt last time."""
    key = _matrix_fingerprint(matrix_files)
    cache = _cache_file()
    data: dict[str, Any] = {}
    if key is not None:
        try:
            data = json.loads(cache.read_text())
        except (OSError, ValueError):
            data = {}
        if data.get("key") == key and name in data.get("stacks", {}):
            try:
                return Stack.from_json(data["stacks"][name])
            except (TypeError, ValueError):
                pass
    from envman.stack.resolve import resolve

    stack = resolve(load(), name)
    if key is not None:
        if data.get("key") != key:
            data = {"key": key, "stacks": {}}
        data["stacks"][name] = stack.to_json()
        try:
            from envman.state import atomic_write

            atomic_write(cache, json.dumps(data, sort_keys=True))
        except OSError:
            pass  # a cache that cannot be written only costs time
    return stack


def _cache_file() -> Path:
    from envman.paths import state_dir

    return state_dir() / "cache" / "stacks.json"


def _matrix_fingerprint(extra: Sequence[str | os.PathLike[str]]) -> str | None:
    from envman import __version__
    from envman.paths import matrix_files

    parts = [__version__]
    for f in matrix_files(extra):
        try:
            st = os.stat(f)
        except OSError:
            return None  # let the real load report the missing file
        parts.append(f"{os.path.abspath(f)}:{st.st_size}:{st.st_mtime_ns}")
    return "|".join(parts)


