"""Which wheels of a wheelhouse a stack's image gets.

A wheelhouse may serve many rows (``envman ci run --wheelhouse DIR``): a row gets only the wheels
its pins select, never another framework's. The roots are the row's pinned packages (plus the
pip and uv wheels its Python layer asks for); every selected wheel's ``Requires-Dist`` (read
from the wheel's ``*.dist-info/METADATA``, markers evaluated for the row's Python and platform,
the extras asked for honoured) adds what it needs that the wheelhouse holds. Per project the
highest version that fits the row (Python and platform tags, Requires-Python) and satisfies every
requirement seen is taken, as pip would. What the wheelhouse lacks is left to the index.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from envman.errors import RenderError
from envman.matrix.index import IndexFileError, parse_metadata
from envman.matrix.wheels import PLATFORMS, active_requirements, wheel_tags

#: OCI platform -> the ``platform_machine`` a marker sees.
MACHINES = {platform: machine for machine, platform in PLATFORMS.items()}

#: At most this many METADATA bytes are read from a wheel.
MAX_METADATA_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class Wheel:
    """One ``*.whl`` of a wheelhouse, as its file name says."""

    filename: str
    project: str  # canonical name
    version: Version


@dataclass(frozen=True)
class Target:
    """What a wheel must fit: the row's Python minor and OCI platform."""

    python: str
    platform: str

    @property
    def machine(self) -> str:
        return MACHINES.get(self.platform, "x86_64")


@dataclass(frozen=True)
class _Needs:
    """The requirements seen so far for one project."""

    specifier: SpecifierSet
    extras: frozenset[str]


def fits(wheel: Wheel, target: Target, requires_python: str | None = None) -> bool:
    """Whether ``wheel``'s tags (and Requires-Python) admit the target's Python and platform."""
    tags = wheel_tags(wheel.filename, requires_python)
    if tags is None:
        return False
    return target.python in tags.pythons and (tags.any_platform or target.platform in tags.platforms)


def requires_dist(path: Path) -> tuple[tuple[str, ...], str | None]:
    """(Requires-Dist lines, Requires-Python) of the wheel at ``path``, read from its zip."""
    where = f"--wheelhouse {path.parent}"
    try:
        with zipfile.ZipFile(path) as zf:
            names = [n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
            if len(names) != 1:
                raise RenderError(f"wheel {path.name!r} has no single *.dist-info/METADATA", where=where,
                                  fix="pip download the wheel again (a real wheel has one)")
            if zf.getinfo(names[0]).file_size > MAX_METADATA_BYTES:
                raise RenderError(f"wheel {path.name!r} has a METADATA larger than 4 MiB", where=where,
                                  fix="pip download the wheel again")
            text = zf.read(names[0])
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise RenderError(f"wheel {path.name!r} is not a readable zip ({exc})", where=where,
                          fix="pip download the wheel again, or remove it from the wheelhouse") from None
    try:
        meta = parse_metadata(text, str(path), "wheelhouse")
    except IndexFileError as exc:
        raise RenderError(f"wheel {path.name!r}: {exc.what}", where=where, fix="pip download the wheel again") from None
    return meta.requires_dist, meta.requires_python


def _requirements(lines: Iterable[str], extras: Iterable[str], target: Target) -> list[Requirement]:
    return active_requirements(lines, extras, machine=target.machine, python=target.python)


def _merge(needs: dict[str, _Needs], reqs: Iterable[Requirement]) -> bool:
    """Add ``reqs`` to ``needs``; whether anything changed."""
    changed = False
    for req in reqs:
        name = canonicalize_name(req.name)
        old = needs.get(name)
        new = _Needs(
            SpecifierSet(str(req.specifier)) if old is None else old.specifier & req.specifier,
            frozenset(req.extras) | (old.extras if old else frozenset()),
        )
        if new != old:
            needs[name] = new
            changed = True
    return changed


def select_wheels(wheels: list[Wheel], directory: Path, roots: Iterable[str], target: Target) -> list[Wheel]:
    """The wheels of ``wheels`` (found in ``directory``) that requirement strings ``roots``
    select for ``target``, with everything they require that the wheelhouse holds; in the
    wheelhouse's order."""
    by_project: dict[str, list[Wheel]] = {}
    for w in wheels:
        by_project.setdefault(w.project, []).append(w)
    meta: dict[str, tuple[tuple[str, ...], str | None]] = {}

    def metadata(w: Wheel) -> tuple[tuple[str, ...], str | None]:
        if w.filename not in meta:
            from envman.render.wheelfacts import FACTS

            meta[w.filename] = FACTS.requires(directory / w.filename, requires_dist)
        return meta[w.filename]

    def best(project: str, need: _Needs) -> Wheel | None:
        fitting = [w for w in by_project.get(project, [])
                   if need.specifier.contains(w.version, prereleases=True) and fits(w, target)]
        fitting = [w for w in fitting if fits(w, target, metadata(w)[1])]
        return max(fitting, key=lambda w: w.version, default=None)

    needs: dict[str, _Needs] = {}
    parsed = []
    for line in roots:
        try:
            parsed.append(Requirement(line))
        except InvalidRequirement:
            continue
    _merge(needs, [r for r in parsed if r.marker is None or r.marker.evaluate(
        {"python_version": target.python, "platform_machine": target.machine, "sys_platform": "linux"})])
    chosen: dict[str, Wheel] = {}
    changed = True
    while changed:
        chosen = {}
        for project, need in list(needs.items()):
            found = best(project, need)
            if found is not None:
                chosen[project] = found
        changed = False
        for project, w in chosen.items():
            changed |= _merge(needs, _requirements(metadata(w)[0], needs[project].extras, target))
    picked = {w.filename for w in chosen.values()}
    return [w for w in wheels if w.filename in picked]


__all__ = ["MACHINES", "Target", "Wheel", "fits", "requires_dist", "select_wheels"]
