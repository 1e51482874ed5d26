"""``envman matrix update``'s backfill of existing rows: the Pythons and platforms the index serves
wheels of every package for that a row does not list, written into the row with the file list
they were read from (``wheel_python_source``, ``platform_source`` or ``source``).

A row is judged only when it installs from the configured index alone (no ``index_url``,
``extra_index_url`` or ``find_links``): another index's files are not read here. Only CPython
wheels say which Pythons a package serves (a pure ``py3-none-any`` wheel says nothing beyond its
Requires-Python), and the row's own framework package must have them, or, for a pure-Python one
(jax), a package its wheel pins exactly (jaxlib, its CUDA plugin: read from the wheel's
Requires-Dist). A platform is added to a CPU row only: a wheel's tags do not say that an aarch64
build carries CUDA (the aarch64 torch and TensorFlow wheels of many releases are CPU builds),
so such a GPU row is reported, not changed. Edits keep the rest of the file as it is: the key
lines of the row are replaced, or added at the end of its main table, and running it again finds
nothing more to add.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import Version

from envman.config import citable_url
from envman.matrix.index import NotFound, normalize
from envman.matrix.model import PLATFORMS
from envman.matrix.wheels import exact_version, wheel_tags

if TYPE_CHECKING:
    from envman.matrix.model import FrameworkBuild, Matrix

#: Pythons older than this are not provisioned by envman: never added to a row.
OLDEST_PYTHON = Version("3.5")

Key = tuple[str, str, str]  # (framework, version, variant)


@dataclass(frozen=True)
class Gap:
    """What the index serves for one row that the row does not list, as the row's new values."""

    framework: str
    version: str
    variant: str
    changes: Mapping[str, Any]  # key -> its full new value in the row
    added: tuple[str, ...]  # "Python 3.11", "platform linux/arm64", "wheel_python torch 3.12"
    sources: tuple[str, ...]  # the file lists read

    @property
    def key(self) -> Key:
        return (self.framework, self.version, self.variant)

    @property
    def name(self) -> str:
        return f"{self.framework} {self.version} {self.variant}"

    def line(self) -> str:
        return f"{self.name}: {', '.join(self.added)} (from {', '.join(self.sources)})"


@dataclass
class Found:
    gaps: list[Gap] = field(default_factory=list)
    unfilled: list[str] = field(default_factory=list)  # what is served but cannot be written, and why


# --- what the index serves ----------------------------------------------------------------------


def _pin(req: str) -> tuple[str, Version] | None:
    try:
        r = Requirement(req)
    except InvalidRequirement:
        return None
    v = exact_version(r.specifier)
    return (normalize(r.name), v) if v is not None else None


def served(files_of: Callable[[str], list[Any]], req: str, platform: str) -> set[str] | None:
    """Pythons (3.5 and newer) with a CPython wheel of ``req``'s pinned version for ``platform``;
    None when the version has no CPython wheel at all (a pure-Python package, or none on the
    index): such a package says nothing of the Pythons."""
    pin = _pin(req)
    if pin is None:
        return None
    name, version = pin
    try:
        files = files_of(name)
    except NotFound:
        return None
    tags = [t for f in files if (t := wheel_tags(f.filename, f.requires_python)) is not None
            and t.version == version and not t.local and f.filename.rsplit("-", 3)[-3].startswith("cp")]
    if not tags:
        return None
    return {p for t in tags if platform in t.platforms or t.any_platform for p in t.pythons if Version(p) >= OLDEST_PYTHON}


def admitted(files_of: Callable[[str], list[Any]], req: str) -> set[str]:
    """Pythons (3.5 and newer) a pure-Python wheel of ``req``'s pinned version installs on (its
    Requires-Python applied)."""
    pin = _pin(req)
    if pin is None:
        return set()
    try:
        files = files_of(pin[0])
    except NotFound:
        return set()
    return {p for f in files if (t := wheel_tags(f.filename, f.requires_python)) is not None and t.version == pin[1]
            and not t.local and t.any_platform for p in t.pythons if Version(p) >= OLDEST_PYTHON}


def pinned_by(requires_dist: Iterable[str], req: str) -> list[str]:
    """The exact pins (``name==version``, no local version) that installing ``req`` with its extras
    pulls in on Linux, from the Requires-Dist of its wheel. A line whose marker depends on the
    Python version is left out (it holds for some Pythons only)."""
    try:
        extras = sorted(Requirement(req).extras)
    except InvalidRequirement:
        return []
    out: list[str] = []
    for line in requires_dist:
        try:
            dep = Requirement(line)
        except InvalidRequirement:
            continue
        v = exact_version(dep.specifier)
        if v is None or v.local:
            continue
        if dep.marker is not None:
            if "python_" in str(dep.marker):
                continue
            envs = [{"extra": e, "platform_system": "Linux", "sys_platform": "linux", "os_name": "posix"} for e in (*extras, "")]
            try:
                if not any(dep.marker.evaluate(env) for env in envs):
                    continue
            except Exception:
                continue
        out.append(f"{normalize(dep.name)}=={v}")
    return list(dict.fromkeys(out))


def _on(files_of: Callable[[str], list[Any]], reqs: Iterable[str], platform: str,
        pins_of: Callable[[str], list[str]] | None = None) -> tuple[set[str] | None, dict[str, set[str]]]:
    """(Pythons every package with CPython wheels serves on ``platform``, per package); None when
    neither the first package (the framework's own) nor, for a pure-Python one, a package its wheel
    pins exactly (``pins_of``: jax pins jaxlib and its CUDA plugin) has CPython wheels."""
    reqs = list(reqs)
    own = [*reqs[:1], *(pins_of(reqs[0]) if pins_of is not None and reqs and served(files_of, reqs[0], platform) is None else ())]
    own_names = {p[0] for r in own if (p := _pin(r)) is not None}
    per: dict[str, set[str]] = {}
    common: set[str] | None = None
    for req in [*own, *reqs[1:]]:
        pys = served(files_of, req, platform)
        if pys is None:
            continue  # a pure-Python package does not narrow the Pythons
        pin = _pin(req)
        assert pin is not None  # served() gave Pythons: the requirement pins a version
        per[pin[0]] = pys
        common = pys if common is None else common & pys
    if not own_names & set(per):
        return None, per
    return common, per


def _sorted(pys: Iterable[str]) -> list[str]:
    return sorted(set(pys), key=Version)


def with_citations(existing: Iterable[str], urls: Iterable[str], how: str) -> list[str] | None:
    """``existing`` with a line for each URL none of its lines names yet, each as a row may cite it
    (:func:`envman.config.citable_url`); None when nothing is new."""
    out = list(existing)
    new = [u for u in dict.fromkeys(map(citable_url, urls)) if not any(line.split(" ")[0] == u for line in out)]
    return [*out, *(f"{u} ({how})" for u in new)] if new else None


def row_gap(b: "FrameworkBuild", files_of: Callable[[str], list[Any]], page_url: Callable[[str], str],
            pins_of: Callable[[str], list[str]] | None = None) -> tuple[Gap | None, list[str]]:
    """The gap of one row (None when the index serves nothing it lacks) and the platforms the index
    serves for it that cannot be written (a GPU row's)."""
    listed = {str(p) for p in b.python}
    changes: dict[str, Any] = {}
    added: list[str] = []
    urls: list[str] = []
    unfilled: list[str] = []

    def read(plat: str) -> tuple[set[str] | None, dict[str, set[str]]]:
        reqs = b.packages_for(plat)
        common, per = _on(files_of, reqs, plat, pins_of)
        for name in per:
            if page_url(name) not in urls:
                urls.append(page_url(name))
        return common, per

    # Pythons: on every platform the row lists
    commons: list[set[str] | None] = []
    pers: list[dict[str, set[str]]] = []
    for plat in b.platforms:
        c, per = read(plat)
        commons.append(c)
        pers.append(per)
    every = set.intersection(*[c for c in commons if c is not None]) if commons and all(c is not None for c in commons) else set()
    more = every - listed
    if more:
        changes["python"] = _sorted(listed | more)
        added.append("Python " + ", ".join(_sorted(more)))
    if b.wheel_python:
        table = {name: [str(p) for p in pys] for name, pys in b.wheel_python}
        grown = False
        for name, pys in table.items():
            if not pys:  # a pure-Python package: every Python
                continue
            sets = [per[name] for per in pers if name in per]  # the platforms that install it
            if sets:
                extra = set.intersection(*sets) - set(pys)
            else:  # a pure-Python wheel listed by Python: the added ones its Requires-Python admits
                req = next((r for r in b.packages if (q := _pin(r)) is not None and q[0] == name), None)
                extra = (more & admitted(files_of, req)) - set(pys) if req is not None else set()
            if extra:
                table[name] = _sorted([*pys, *extra])
                added.append(f"wheel_python {name} " + ", ".join(_sorted(extra)))
                grown = True
        if grown or more:
            changes["wheel_python"] = table
    # platforms the row lacks where every package serves every Python the row lists
    wanted = set(changes.get("python", listed))
    for plat in PLATFORMS:
        if plat in b.platforms:
            continue
        c, _ = _on(files_of, b.packages_for(plat), plat, pins_of)
        if c is None or not wanted <= c:
            continue
        if b.cuda is not None:
            unfilled.append(plat)
            continue
        for req in b.packages_for(plat):
            pin = _pin(req)
            if pin is not None and page_url(pin[0]) not in urls:
                urls.append(page_url(pin[0]))
        changes["platforms"] = [p for p in PLATFORMS if p in b.platforms or p == plat or p in changes.get("platforms", ())]
        added.append(f"platform {plat}")
    if not changes:
        return None, unfilled
    how = f"envman matrix update: CPython tags of the Linux wheels of {b.framework} {b.version}'s packages"
    if "platforms" in changes:
        src = with_citations(b.platform_source, urls, how)
        if src is not None:
            changes["platform_source"] = src
    if "wheel_python" in changes:
        src = with_citations(b.wheel_python_source, urls, how)
        if src is not None:
            changes["wheel_python_source"] = src
    elif "python" in changes:
        src = with_citations(b.source, urls, how)
        if src is not None:
            changes["source"] = src
    return Gap(b.framework, str(b.version), b.variant, changes, tuple(added), tuple(urls)), unfilled


def pins_from(files_of: Callable[[str], list[Any]], requires_of: Callable[[Any], Iterable[str]]) -> Callable[[str], list[str]]:
    """``pins_of`` for :func:`find_gaps`: the exact pins of a requirement's pure-Python wheel
    (``requires_of`` reads a file's Requires-Dist; each wheel once)."""
    seen: dict[str, list[str]] = {}

    def pins_of(req: str) -> list[str]:
        if req in seen:
            return seen[req]
        pin = _pin(req)
        out: list[str] = []
        if pin is not None:
            try:
                files = files_of(pin[0])
            except NotFound:
                files = []
            pure = [f for f in files if (t := wheel_tags(f.filename)) is not None and t.version == pin[1]
                    and not t.local and t.any_platform]
            if pure:
                out = pinned_by(requires_of(pure[0]), req)
        seen[req] = out
        return out

    return pins_of


def find_gaps(matrix: "Matrix", frameworks: Iterable[str], files_of: Callable[[str], list[Any]],
              page_url: Callable[[str], str], pins_of: Callable[[str], list[str]] | None = None) -> Found:
    """The gaps of every row of ``frameworks`` that installs from the configured index alone
    (``pins_of``: what a pure-Python framework wheel pins, see :func:`pins_from`)."""
    fws = set(frameworks)
    found = Found()
    gpu_rows: dict[tuple[str, str], list[str]] = {}  # (framework, platform) -> "version variant"
    for b in matrix.builds:
        if b.framework not in fws or b.index_url or b.extra_index_url or b.find_links:
            continue
        gap, platforms = row_gap(b, files_of, page_url, pins_of)
        for plat in platforms:
            gpu_rows.setdefault((b.framework, plat), []).append(f"{b.version} {b.variant}")
        if gap is not None:
            found.gaps.append(gap)
    for (fw, plat), rows in gpu_rows.items():
        found.unfilled.append(f"{fw} {', '.join(rows)}: the index serves {plat} wheels of every package for the "
                              f"row's Pythons; not added: a wheel's tags do not say that its {plat} build carries CUDA")
    return found


# --- writing: a row's lines in a matrix file ---------------------------------------------------

_KEY_LINE = re.compile(r"^([A-Za-z0-9_-]+)\s*=")
_FW_LINE = re.compile(r"^framework\s*=")


def _toml() -> Any:
    from envman.safefile import toml_module

    return toml_module()


def _statements(lines: list[str], start: int, end: int) -> list[tuple[str, int, int]]:
    """(key, first line, line after) of each ``key = value`` of lines[start:end]; a value may span
    lines (an array written over several)."""
    out = []
    i = start
    while i < end:
        m = _KEY_LINE.match(lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while True:
            try:
                _toml().loads("".join(lines[i:j]))
                break
            except Exception:
                if j >= end:
                    break
                j += 1
        out.append((m.group(1), i, j))
        i = j
    return out


def _value(lines: list[str], first: int, after: int) -> Any:
    try:
        return next(iter(_toml().loads("".join(lines[first:after])).values()))
    except Exception:
        return None


def _blocks(lines: list[str]) -> list[tuple[int, int, int]]:
    """(``[[build]]`` line, end of its main table, end of the block) of each row."""
    heads = [i for i, line in enumerate(lines) if line.strip() == "[[build]]"]
    out = []
    for h in heads:
        end = next((i for i in range(h + 1, len(lines)) if lines[i].startswith("[") and not lines[i].startswith("[build.")),
                   len(lines))
        main = next((i for i in range(h + 1, end) if lines[i].startswith("[build.")), end)
        out.append((h, main, end))
    return out


def _file_framework(lines: list[str]) -> str | None:
    for line in lines:
        if line.startswith("["):
            return None
        if _FW_LINE.match(line):
            v = _value([line], 0, 1)
            return v if isinstance(v, str) else None
    return None


def find_row(text: str, key: Key) -> tuple[int, int, int] | None:
    lines = text.splitlines(keepends=True)
    top = _file_framework(lines)
    for h, main, end in _blocks(lines):
        vals = {m.group(1): _value(lines, i, i + 1) for i in range(h + 1, main)
                if (m := _KEY_LINE.match(lines[i])) and m.group(1) in ("framework", "version", "variant")}
        if (vals.get("framework", top), vals.get("version"), vals.get("variant")) == key:
            return h, main, end
    return None


def edit_row(text: str, key: Key, changes: Mapping[str, Any]) -> str:
    """``text`` with the row ``key``'s ``changes`` set: each key's statement (or sub-table
    ``[build.key]``) replaced, or a statement added at the end of the row's main table. Raises
    KeyError when the file has no such row."""
    from envman.matrix.write import toml_key, toml_value

    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    for k, v in changes.items():
        where = find_row("".join(lines), key)
        if where is None:
            raise KeyError(key)
        h, main, end = where
        new = f"{toml_key(k)} = {toml_value(v)}\n"
        stmt = next(((a, b) for name, a, b in _statements(lines, h + 1, main) if name == k), None)
        sub = next((i for i in range(main, end) if lines[i].strip() == f"[build.{toml_key(k)}]"), None)
        if stmt is not None:
            lines[stmt[0]:stmt[1]] = [new]
        elif sub is not None:
            stop = next((i for i in range(sub + 1, end) if lines[i].startswith("[")), end)
            while stop > sub + 1 and not lines[stop - 1].strip():
                stop -= 1
            body = [f"{toml_key(sk)} = {toml_value(sv)}\n" for sk, sv in v.items()] if isinstance(v, Mapping) else []
            lines[sub:stop] = [f"[build.{toml_key(k)}]\n", *body] if body else [new]
        else:
            at = main
            while at > h + 1 and not lines[at - 1].strip():
                at -= 1
            lines[at:at] = [new]
    return "".join(lines)


def row_sources(files: Iterable[Path]) -> dict[Key, tuple[Path, dict[str, Any]]]:
    """Each row's key -> (the last file that states it, the row as that file writes it)."""
    from envman.safefile import LARGE_LIMIT, load_toml

    out: dict[Key, tuple[Path, dict[str, Any]]] = {}
    for path in files:
        try:
            doc, _ = load_toml(path, what="matrix file", limit=LARGE_LIMIT)
        except FileNotFoundError:
            continue
        top = doc.get("framework")
        for row in doc.get("build", []) if isinstance(doc.get("build"), list) else []:
            if not isinstance(row, dict):
                continue
            fw = row.get("framework", top)
            if isinstance(fw, str):
                out[(fw, str(row.get("version")), str(row.get("variant")))] = (path, row)
    return out


# --- the files an edit writes ---------------------------------------------------------------------


def edited_files(gaps: Iterable[Gap], sources: Mapping[Key, tuple[Path, dict[str, Any]]], base: Mapping[Path, str],
                 read: Callable[[Path], str] | None = None) -> dict[Path, str]:
    """``base`` (files already planned) with each gap's row edited in place in the file that states
    it (read with ``read`` when ``base`` lacks it)."""
    out = dict(base)
    for g in gaps:
        path = sources[g.key][0]
        out[path] = edit_row(out[path] if path in out else (read or _read)(path), g.key, g.changes)
    return out


def _read(path: Path) -> str:
    from envman.safefile import LARGE_LIMIT, read_text

    return read_text(path, what="matrix file", limit=LARGE_LIMIT)


def patched_rows(gaps: Iterable[Gap], sources: Mapping[Key, tuple[Path, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """Each gap's whole row with its changes, as an overlay states it (it replaces the row)."""
    out = []
    for g in gaps:
        row = {k: v for k, v in sources[g.key][1].items() if k != "framework"}
        row.update(g.changes)
        out.append((g.framework, row))
    return out
