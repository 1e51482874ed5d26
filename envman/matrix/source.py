"""The compatibility matrix of one invocation, as one object.

:class:`MatrixSource` holds what decides which matrix a command sees: the shipped files, then the
user's (``[matrix] files`` of config.toml, ``ENVMAN_MATRIX``, ``--matrix`` options, combined by
:func:`envman.config.user_matrix_paths`). The matrix is parsed at most once, and only when a
command needs it; a stack name is resolved once per invocation, through a small on-disk cache
keyed by the matrix files' sizes and mtimes, so a warm ``envman run`` parses no matrix at all.

This module imports only the standard library and :mod:`envman.stack.names` at load time.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from envman.stack.names import Stack
from envman import __version__

if TYPE_CHECKING:
    from envman.matrix.model import Matrix


@dataclass(frozen=True, eq=False)
class MatrixSource:
    """The matrix of one invocation: ``extra`` are the ``--matrix`` files as given (loaded after
    the shipped files and the user's configured ones)."""

    extra: tuple[str, ...] = ()
    _stacks: dict[str, Stack] = field(default_factory=dict, init=False, repr=False)

    @classmethod
    def of(cls, extra: Iterable[str | os.PathLike[str]] = ()) -> MatrixSource:
        return cls(tuple(str(p) for p in extra))

    def adding(self, extra: Iterable[str | os.PathLike[str]]) -> MatrixSource:
        """This source with more ``--matrix`` files after its own (a fresh, unloaded source)."""
        more = tuple(str(p) for p in extra)
        return self if not more else MatrixSource(self.extra + more)

    @cached_property
    def user_files(self) -> tuple[Path, ...]:
        """The user's files, in load order: ``[matrix] files``, ``ENVMAN_MATRIX``, ``--matrix``."""
        from envman.config import user_matrix_paths

        return tuple(user_matrix_paths(self.extra))

    @cached_property
    def shipped_files(self) -> tuple[Path, ...]:
        """The files shipped with envman (``matrices/*.toml``), sorted."""
        from envman.paths import matrices_dir

        return tuple(sorted(matrices_dir().glob("*.toml")))

    @cached_property
    def files(self) -> tuple[Path, ...]:
        """Every file, in load order: :attr:`shipped_files`, then :attr:`user_files`."""
        return (*self.shipped_files, *self.user_files)

    @cached_property
    def matrix(self) -> Matrix:
        """The loaded matrix (parsed on first use; a bad file raises ``MatrixError``)."""
        from envman.matrix.load import get_matrix

        return get_matrix(self.extra)

    def resolve(self, name: str) -> Stack:
        """``resolve(matrix, name)``, once per name, through the on-disk stack cache; a name that
        resolves with user files loaded is recorded for :meth:`missing_files_hint`."""
        if name not in self._stacks:
            self._stacks[name] = resolve_cached(name, self.fingerprint(), lambda: self.matrix)
            from envman.stack.origins import record

            record(name, self._stacks[name].name, self.extra)
        return self._stacks[name]

    def fingerprint(self) -> str | None:
        """envman's version and every file's path, size and mtime (``None``: a file is missing,
        so nothing may be cached and the real load reports it)."""
        parts = [__version__]
        for f in self.files:
            try:
                st = os.stat(f)
            except OSError:
                return None
            parts.append(f"{os.path.abspath(f)}:{st.st_size}:{st.st_mtime_ns}")
        return "|".join(parts)

    def missing_files_hint(self, query: str) -> str | None:
        """Why ``query`` may no longer resolve: the user files it resolved with, not loaded now."""
        from envman.stack.origins import missing_files_hint

        return missing_files_hint(query, self.extra)


def resolve_cached(name: str, key: str | None, load: Callable[[], Any]) -> Stack:
    """``resolve(load(), name)`` through a cache kept under ``key`` (the matrix files'
    fingerprint), so a run does not parse the whole matrix (~100 ms) to learn what it learnt
    last time. ``key=None`` resolves without the cache."""
    cache = _cache_file()
    data: dict[str, Any] = {}
    if key is not None:
        from envman.safefile import read_state_json

        found = read_state_json(cache, what="stack cache")
        if isinstance(found, dict):
            data = found
        stacks = data.get("stacks")
        if data.get("key") == key and isinstance(stacks, dict) and name in stacks:
            try:
                return Stack.from_json(stacks[name])
            except (TypeError, ValueError, KeyError, AttributeError):
                pass
    from envman.stack.resolve import resolve

    stack = resolve(load(), name)
    if key is not None:
        if data.get("key") != key or not isinstance(data.get("stacks"), dict):
            data = {"key": key, "stacks": {}}
        data["stacks"][name] = {**stack.to_json(), "tag_key": stack.tag_key}  # the key is not in the stack's JSON
        try:
            from envman.state import atomic_write

            atomic_write(cache, json.dumps(data, sort_keys=True))
        except OSError:
            pass  # a cache that cannot be written only costs time
    return stack


def _cache_file() -> Path:
    from envman.paths import state_dir

    return state_dir() / "cache" / "stacks.json"


__all__ = ["MatrixSource", "resolve_cached"]
