"""The matrix files of an invocation: the shipped ones, then the user's (``[matrix] files`` of
config.toml, ``ENVMAN_MATRIX``, then ``--matrix``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from envman.config.file import load_matrix_config
from envman.paths import matrices_dir

#: Extra matrix files, os.pathsep-separated (before any --matrix option).
MATRIX_ENV = "ENVMAN_MATRIX"


def user_matrix_paths(extra: Iterable[str | os.PathLike[str]] = ()) -> list[Path]:
    """User files: ``[matrix] files`` of the user config first, then ENVMAN_MATRIX
    (os.pathsep-separated), then --matrix options (a file named twice is loaded once, last)."""
    paths = list(load_matrix_config().files)
    paths += [Path(p) for p in os.environ.get(MATRIX_ENV, "").split(os.pathsep) if p.strip()]
    paths += [Path(p) for p in extra]
    seen: dict[Path, Path] = {}
    for p in paths:  # later wins, as a later file's rows replace an earlier one's
        key = p.expanduser().absolute()
        seen.pop(key, None)
        seen[key] = p
    return list(seen.values())


def matrix_files(extra: Iterable[str | os.PathLike[str]] = (), *, shipped: bool = True) -> list[Path]:
    """Every matrix file of an invocation, in load order: the shipped ones (sorted), then the
    user's (``[matrix] files``, ``ENVMAN_MATRIX``, then ``--matrix``)."""
    return [*(sorted(matrices_dir().glob("*.toml")) if shipped else []), *user_matrix_paths(extra)]


__all__ = ["MATRIX_ENV", "matrix_files", "user_matrix_paths"]
