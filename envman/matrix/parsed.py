"""Parsed matrix files kept between invocations, so a command that needs the matrix does not parse
every shipped TOML file again (~0.25 s for the shipped files; reading a kept parse: a few ms).

A parse is kept in the user's envman cache folder (:func:`envman.paths.cache_dir`), under
``matrix/<key>``, where the key is a sha256 over the file's path and exact bytes, envman's
version, the Python version, the installed ``packaging`` version and the size and mtime of every
module of the installed envman package (an upgraded or edited envman parses afresh). What is kept
is the parser's result, the typed rows of :mod:`envman.matrix.model`, pickled; it is read back by
an unpickler that builds nothing but those row types (the classes :mod:`envman.matrix.model`
defines), ``packaging``'s ``Version`` and builtin containers: any other global, a function or a
module attribute included, is refused and the entry is a miss. The file must be the user's
own, not writable by group or others, a regular file (:func:`envman.safefile.read_state`);
anything in doubt is a miss and the file is parsed as without this cache. Only successful parses
are kept; a file that fails to parse raises the same error every time. The last
:data:`MAX_ENTRIES` parses are kept. ``ENVMAN_PARSE_CACHE=0`` turns this cache off; unlike the
caches of answers about state, it stays on with ``ENVMAN_RUN_CACHE=0`` (see :func:`enabled`).
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import pickle
import sys
from typing import Any, Callable

import packaging

from envman import __version__
from envman.matrix import model

CACHE_FORMAT = 1
MAX_ENTRIES = 32
#: The folder in the cache folder (``envman clean`` removes it).
PARSED_FOLDER = "matrix"
#: Builtin containers a kept parse may name.
ALLOWED_BUILTINS = frozenset({"frozenset", "set", "tuple", "list", "dict"})

_code: list[str] = []


def code_signature() -> str:
    """envman's installed code as it is now: every module's path, size and mtime (computed once)."""
    if not _code:
        package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        parts = []
        for d, dirs, files in os.walk(package):
            dirs[:] = sorted(x for x in dirs if x != "__pycache__")
            for f in sorted(files):
                if f.endswith(".py"):
                    try:
                        st = os.stat(os.path.join(d, f))
                    except OSError:
                        continue
                    parts.append(f"{os.path.relpath(os.path.join(d, f), package)}:{st.st_size}:{st.st_mtime_ns}")
        _code.append(hashlib.sha256("\n".join(parts).encode()).hexdigest())
    return _code[0]


def key(file: str, data: bytes) -> str:
    h = hashlib.sha256(f"envman-matrix:{CACHE_FORMAT}:{__version__}:{sys.version_info[:3]}:{packaging.__version__}:"
                       f"{code_signature()}\0{file}\0".encode("utf-8", "surrogateescape"))
    h.update(data)
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def allowed_globals() -> frozenset[tuple[str, str]]:
    """Every ``(module, name)`` a kept parse may name: each class defined in
    :mod:`envman.matrix.model` (not what it imports), ``packaging.version.Version`` and the
    builtin containers. Nothing callable beyond these constructors, no module object."""
    rows = {("envman.matrix.model", n) for n, o in vars(model).items()
            if isinstance(o, type) and o.__module__ == model.__name__}
    return frozenset(rows | {("packaging.version", "Version")} | {("builtins", n) for n in ALLOWED_BUILTINS})


class _RowsUnpickler(pickle.Unpickler):
    """Builds only the row types, versions and builtin containers (:func:`allowed_globals`)."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in allowed_globals():
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not a matrix row type")


def _folder() -> str:
    from envman.paths import cache_dir

    return os.path.join(cache_dir(), PARSED_FOLDER)


def enabled() -> bool:
    """Whether kept parses are used: unless ``ENVMAN_PARSE_CACHE`` is ``0``, ``false``, ``no`` or
    ``off``. ``ENVMAN_RUN_CACHE=0`` (the full path: no run plan, no no-op answer) leaves this cache
    on: a kept parse is keyed by the file's exact bytes and envman's code, so it is the parse, on
    every path."""
    from envman.paths import caches_enabled

    return caches_enabled(switch="ENVMAN_PARSE_CACHE")


def kept(file: str, data: bytes, parse: Callable[[str, bytes], tuple[str, Any]]) -> tuple[str, Any]:
    """``parse(file, data)``, or the result kept for exactly these bytes, this path and this code."""
    if not enabled():
        return parse(file, data)
    from envman.safefile import read_state

    path = os.path.join(_folder(), key(file, data))
    raw = read_state(path, what="parsed matrix file", warn=False)
    if raw is not None:
        try:
            value = _RowsUnpickler(io.BytesIO(raw)).load()
            if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
                return value
        except Exception:  # noqa: BLE001 - a damaged or foreign entry is a miss
            pass
    value = parse(file, data)
    _store(path, value)
    return value


def _store(path: str, value: tuple[str, Any]) -> None:
    from pathlib import Path

    from envman.errors import EnvmanError
    from envman.safefile import private_dir
    from envman.state import atomic_write

    try:
        folder = private_dir(Path(path).parent)
        atomic_write(Path(path), pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        entries = sorted(folder.iterdir(), key=lambda p: p.stat().st_mtime_ns)
        for old in entries[:-MAX_ENTRIES]:
            old.unlink(missing_ok=True)
    except (OSError, EnvmanError, pickle.PicklingError):
        pass  # a cache that cannot be written only costs time


__all__ = ["ALLOWED_BUILTINS", "allowed_globals", "CACHE_FORMAT", "MAX_ENTRIES", "PARSED_FOLDER", "kept", "key"]
