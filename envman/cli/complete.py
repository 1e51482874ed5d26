"""Shell completion of values (bash, zsh, fish through typer): stack names, project names, GPU
names, flavours.

Completion runs on every Tab, so it stays cheap: project names come from the registry (one small
JSON file); stack and GPU names come from a cache keyed like the run path's stack cache (the
matrix files' paths, sizes and mtimes and envman's version) and are computed from the matrix only
when a matrix file changed. Stack names are offered whole (``torch-2.4.1-cuda12.4-py3.10``) and
partial (``torch-2.4``, ``torch-2.4-cuda12``), with the framework spelled as typed
(``tf-`` completes like ``tensorflow-``).
"""

from __future__ import annotations

import json
from typing import Any

MAX_ITEMS = 400


def _cache_path():
    from envman.paths import state_dir

    return state_dir() / "cache" / "completion.json"


def _partials(version: str) -> list[str]:
    parts = version.split(".")
    return list(dict.fromkeys([".".join(parts[:2]), version])) if len(parts) > 1 else [version]


def names_from_matrix(matrix: Any) -> dict[str, list[str]]:
    """Every stack name a user may type for the matrix's rows, and its GPU names."""
    stacks: set[str] = set()
    for b in matrix.builds:
        fw, version = b.framework, str(b.version)
        suffix = b.name[len(f"{fw}-{version}-"):] if b.name.startswith(f"{fw}-{version}-") else ""
        suffixes = [suffix] if suffix else []
        if b.cuda is not None:
            suffixes.append(f"cuda{b.cuda.release[0]}")
        arm = ["-arm64"] if "linux/arm64" in b.platforms else []
        for v in _partials(version):
            stacks.add(f"{fw}-{v}")
            for s in suffixes:
                for plat in ["", *arm]:
                    stacks.add(f"{fw}-{v}-{s}{plat}")
        for py in b.python:
            for plat in ["", *arm]:
                stacks.add(f"{b.name}-py{py}{plat}")
    gpus = sorted({g.id for g in matrix.gpus} | {g.name for g in matrix.gpus})
    return {"stacks": sorted(stacks), "gpus": gpus}


def cached_names() -> dict[str, list[str]]:
    """:func:`names_from_matrix` of this user's matrix (shipped, config, ``ENVMAN_MATRIX``), cached."""
    from envman.matrix.source import MatrixSource

    source = MatrixSource()
    key = source.fingerprint()
    path = _cache_path()
    from envman.safefile import read_state_json

    try:
        data = read_state_json(path, what="completion cache")
        if key is not None and data.get("key") == key:
            return data["names"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    names = names_from_matrix(source.matrix)
    if key is not None:
        try:
            from envman.state import atomic_write

            atomic_write(path, json.dumps({"key": key, "names": names}))
        except OSError:
            pass
    return names


def _match(candidates: list[str], incomplete: str) -> list[str]:
    low = incomplete.lower()
    return [c for c in candidates if c.lower().startswith(low)][:MAX_ITEMS]


def complete_stack(incomplete: str) -> list[str]:
    """Stack names starting with ``incomplete`` (``tf-2`` → ``tf-2.15``, ...)."""
    try:
        stacks = cached_names()["stacks"]
    except Exception:  # noqa: BLE001 - a broken matrix completes nothing; the command will say why
        return []
    from envman.stack.names import ALIASES

    typed = incomplete.split("-", 1)[0].lower()
    fw = ALIASES.get(typed)
    if fw is not None and fw != typed and "-" in incomplete:  # tf-… completes as typed
        return _match([typed + s[len(fw):] for s in stacks if s.startswith(fw + "-")], incomplete)
    if "-" not in incomplete:  # a framework first
        return sorted(a + "-" for a in ALIASES if a.startswith(incomplete.lower()))
    return _match(stacks, incomplete)


def complete_gpu(incomplete: str) -> list[str]:
    try:
        return _match(cached_names()["gpus"], incomplete)
    except Exception:  # noqa: BLE001
        return []


def complete_project(incomplete: str) -> list[str]:
    try:
        from envman.project.registry import read_registry

        return _match(sorted(read_registry()), incomplete)
    except Exception:  # noqa: BLE001
        return []


def complete_flavour(incomplete: str) -> list[str]:
    from envman.stack.names import FLAVOURS

    return _match(list(FLAVOURS), incomplete)
