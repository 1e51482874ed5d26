"""``envman matrix update``: find framework releases newer than the matrix on the configured
index (and PyTorch's variant index), read what their wheels pin without downloading them, and
turn that into matrix rows.

Every fact a row states is either derived (the row's ``derived`` table says from which URL and
how) or inherited from the nearest earlier row of the same framework and marked ``unconfirmed``
(arch lists: no index metadata says which SASS a wheel carries). Rows that do not pass
``matrix validate`` or do not render are left out and reported, never written.
"""

from __future__ import annotations

import datetime as _dt
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from envman.errors import EnvmanError, UserError
from envman.matrix.backfill import Gap, find_gaps, pins_from
from envman.matrix.index import (
    Http, IndexFile, IndexFileError, IndexUnreachable, NotFound, WheelMetadata, fetch_project, normalize, project_url,
    read_wheel_metadata,
)
from envman.matrix.model import FrameworkBuild, Matrix
from envman.matrix.wheels import (
    KNOWN_PYTHONS, CudaPins, Pin, WheelTags, cuda_library_lines, cuda_pins, pinned_version, wheel_tags,
)

TORCH_INDEX = "https://download.pytorch.org/whl"

#: framework -> (PyPI project whose releases define "a release", its GPU project)
PROJECTS: dict[str, str] = {
    "torch": "torch",
    "jax": "jax",
    "onnxruntime": "onnxruntime-gpu",
    "tensorflow": "tensorflow",
}
PROGRESS = Callable[[str], None]


@dataclass(frozen=True)
class Settings:
    index: str
    torch_index: str | None  # None: do not read PyTorch's own index
    torch_index_required: bool = False  # the user named it: unreachable is an error
    frameworks: tuple[str, ...] = tuple(PROJECTS)
    since: Mapping[str, Version] = field(default_factory=dict)  # framework -> look above this
    workers: int = 4
    cuda: bool = True  # also read the CUDA releases (cuda-toolkit) and judge the GPU list's age
    #: also derive the patch releases of minors the matrix has that it lacks (tensorflow 2.12.1
    #: beside 2.12.0), and report the Pythons the index serves that a row does not list
    backfill: bool = True


@dataclass(frozen=True)
class NewRow:
    framework: str
    data: dict[str, Any]  # the TOML row, keys in the order of matrices/README.md
    unconfirmed: tuple[str, ...]  # facts inherited, not derived

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.framework, self.data["version"], self.data["variant"])

    @property
    def name(self) -> str:
        cuda = self.data.get("cuda")
        return f"{self.framework}-{self.data['version']}-" + (f"cuda{cuda}" if cuda else "cpu")


@dataclass
class Result:
    new_releases: dict[str, list[str]] = field(default_factory=dict)
    rows: list[NewRow] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "name: why"
    warnings: list[str] = field(default_factory=list)
    unfilled: list[str] = field(default_factory=list)  # CUDA facts the index cannot give (driver, images)
    gaps: list[Gap] = field(default_factory=list)  # Pythons and platforms existing rows lack (envman.matrix.backfill)

    def summary(self, http: Http) -> dict[str, Any]:
        return {
            "new_releases": self.new_releases,
            "unfilled": self.unfilled,
            "new_rows": [r.name + f" ({r.data['variant']})" for r in self.rows],
            "backfilled": [g.line() for g in self.gaps],
            "unconfirmed": {r.name + f" ({r.data['variant']})": list(r.unconfirmed) for r in self.rows if r.unconfirmed},
            "skipped": self.skipped,
            "warnings": self.warnings,
            "requests": http.requests,
            "bytes": http.bytes_read,
        }


def final_version(text: str) -> Version | None:
    try:
        v = Version(text)
    except InvalidVersion:
        return None
    return None if (v.is_prerelease or v.is_devrelease) else v


class _Ctx:
    """Pages and metadata of one run, fetched once each."""

    def __init__(self, http: Http, settings: Settings, matrix: Matrix, progress: PROGRESS) -> None:
        self.http, self.settings, self.matrix, self.progress = http, settings, matrix, progress
        self._pages: dict[tuple[str, str], list[IndexFile]] = {}
        self._meta: dict[str, WheelMetadata] = {}
        self.pool = ThreadPoolExecutor(max_workers=max(1, min(settings.workers, 8)))

    def files(self, project: str, index: str | None = None) -> list[IndexFile]:
        index = index or self.settings.index
        key = (index, project)
        if key not in self._pages:
            self.progress(f"reading {project_url(index, project)}")
            page = fetch_project(self.http, index, project)
            # Only this project's wheels: a page listing another project's file must not turn its
            # version into a release of this one.
            self._pages[key] = [f for f in page.files if f.filename.endswith(".whl") and not f.yanked
                                and normalize(f.filename.partition("-")[0]) == normalize(project)]
        return self._pages[key]

    def page_url(self, project: str, index: str | None = None) -> str:
        return project_url(index or self.settings.index, project)

    def metadata(self, files: Iterable[IndexFile]) -> dict[str, WheelMetadata]:
        files = list(files)
        todo = [f for f in dict.fromkeys(files) if f.url not in self._meta]
        for f in todo:
            self.progress(f"metadata of {f.filename}")
        for f, md in zip(todo, self.pool.map(lambda f: read_wheel_metadata(self.http, f), todo)):
            self._meta[f.url] = md
        return {f.url: self._meta[f.url] for f in files}


# --- wheels of a release ---------------------------------------------------------------------


@dataclass(frozen=True)
class Wheel:
    file: IndexFile
    tags: WheelTags


def wheels(files: Iterable[IndexFile]) -> list[Wheel]:
    out = []
    for f in files:
        t = wheel_tags(f.filename, f.requires_python)
        if t is not None:
            out.append(Wheel(f, t))
    return out


def with_requires_python(ws: Iterable[Wheel], requires_python: str | None) -> list[Wheel]:
    """``ws`` with the Requires-Python of their METADATA applied where the index page gave none
    (a ``py3`` wheel's tags alone admit every Python 3)."""
    out = []
    for w in ws:
        t = wheel_tags(w.file.filename, w.file.requires_python or requires_python)
        assert t is not None  # the same file name parsed before: only the Requires-Python differs
        out.append(Wheel(w.file, t))
    return out


def releases(ws: Iterable[Wheel]) -> dict[Version, list[Wheel]]:
    out: dict[Version, list[Wheel]] = {}
    for w in ws:
        if w.tags.version.is_prerelease or w.tags.version.is_devrelease:
            continue
        out.setdefault(w.tags.version, []).append(w)
    return out


def representative(ws: Iterable[Wheel], platform: str) -> Wheel | None:
    """The wheel for ``platform`` of the newest regular CPython (or a pure-Python wheel)."""
    cands = [w for w in ws if platform in w.tags.platforms or w.tags.any_platform]
    cands = [w for w in cands if w.tags.pythons] or cands
    if not cands:
        return None
    return max(cands, key=lambda w: (platform in w.tags.platforms, max((Version(p) for p in w.tags.pythons), default=Version("0")), w.file.filename))


def _on_every(ws: Iterable[Wheel], platform: str | Iterable[str], of: Callable[[Wheel], Iterable[str]]) -> set[str]:
    """The union of ``of(wheel)`` over the wheels for ``platform`` (for several platforms: the
    Pythons every one of them has)."""
    ws = list(ws)
    if not isinstance(platform, str):
        sets = [_on_every(ws, p, of) for p in platform]
        return set.intersection(*sets) if sets else set()
    return {py for w in ws if platform in w.tags.platforms or w.tags.any_platform for py in of(w)}


def pythons(ws: Iterable[Wheel], platform: str | Iterable[str]) -> set[str]:
    """Python versions with a wheel for ``platform`` (for every one of several platforms)."""
    return _on_every(ws, platform, lambda w: w.tags.pythons)


def free_threaded(ws: Iterable[Wheel], platform: str | Iterable[str]) -> set[str]:
    """Pythons whose free-threaded build (``cp314t``) has a wheel for ``platform`` (for every one
    of several platforms); a wheel of no ABI (``py3-none``) serves every Python."""
    def no_abi(w: Wheel) -> tuple[str, ...]:
        return w.tags.pythons if w.file.filename.split("-")[-2] == "none" else ()

    return _on_every(ws, platform, lambda w: (*w.tags.free_threaded, *no_abi(w)))


def platforms(ws: Iterable[Wheel]) -> tuple[str, ...]:
    return tuple(sorted({p for w in ws for p in w.tags.platforms}))


def _machine(platform: str) -> str:
    return "aarch64" if platform.endswith("arm64") else "x86_64"


# --- rows ------------------------------------------------------------------------------------


def previous_row(matrix: Matrix, framework: str, version: Version, variant: str, cuda_major: int | None) -> FrameworkBuild | None:
    """Nearest earlier row to inherit from: same variant, else same CUDA major, else any GPU row."""
    rows = [b for b in matrix.builds if b.framework == framework and b.version < version]
    for pick in (
        lambda b: b.variant == variant,
        lambda b: cuda_major is not None and b.cuda is not None and b.cuda.major == cuda_major,
        lambda b: (b.cuda is None) == (cuda_major is None),
    ):
        cands = [b for b in rows if pick(b)]
        if cands:
            return max(cands, key=lambda b: (b.version, b.cuda or Version("0")))
    return None


def _date(upload_time: str | None) -> str | None:
    if not upload_time:
        return None
    try:
        return _dt.datetime.fromisoformat(upload_time.replace("Z", "+00:00")).date().isoformat()
    except ValueError:
        return None


def released(ws: Iterable[Wheel]) -> str | None:
    dates = [d for w in ws if (d := _date(w.file.upload_time))]
    return min(dates) if dates else None


class RowBuilder:
    """Collects one row's facts with their provenance."""

    def __init__(self, framework: str, version: Version, variant: str) -> None:
        self.framework, self.version, self.variant = framework, version, variant
        self.data: dict[str, Any] = {"version": str(version), "variant": variant}
        self.derived: dict[str, str] = {}
        self.unconfirmed: list[str] = []
        self.sources: list[str] = []
        self.notes: list[str] = []
        self.wheel_python: dict[str, set[str]] = {}
        self._arm64: tuple[list[str], list[str]] | None = None

    def fact(self, key: str, value: Any, url: str, how: str) -> None:
        self.data[key] = value
        self.derived[key] = f"{how} ({url})"
        if url not in self.sources:
            self.sources.append(url)

    def inherit(self, key: str, value: Any, prev: FrameworkBuild | None, why: str) -> None:
        self.data[key] = value
        self.unconfirmed.append(key)
        self.notes.append(f"{key} {why}" + (f" from {prev.framework}-{prev.version} {prev.variant}" if prev else ""))

    def cuda(self, pins: CudaPins, md: WheelMetadata, prev: FrameworkBuild | None) -> None:
        pin = pins.cuda
        if pin is not None and pin.how != "major":
            self.fact("cuda", pin.value, md.url, pin.describe())
        elif prev is not None and prev.cuda is not None and (pins.cuda_major is None or prev.cuda.major == pins.cuda_major):
            self.inherit("cuda", f"{prev.cuda.major}.{prev.cuda.minor}", prev,
                         ("minor not stated (" + pin.describe() + "); inherited") if pin else "not stated by the wheel; inherited")
        elif pins.cuda_major is not None:
            self.inherit("cuda", f"{pins.cuda_major}.0", None, f"CUDA {pins.cuda_major} minor not stated; lowest assumed")
        if pins.cudnn is not None:
            self.fact("cudnn", pins.cudnn.value, md.url, pins.cudnn.describe())
        elif prev is not None and prev.cudnn and "cuda" in self.data:
            self.inherit("cudnn", prev.cudnn, prev, "not stated by the wheel; inherited")

    def cuda_libs(self, md: WheelMetadata, extras: Iterable[str] = (),
                  files_of: Callable[[str], list[IndexFile]] | None = None) -> None:
        """The CUDA libraries the framework's wheel (``md``, Linux x86_64) pins exactly, with
        ``extras`` asked for: the row's CUDA-library layer; with ``files_of`` (a project's files on
        the framework's index), the sha256 of each pin's wheels too."""
        lines = cuda_library_lines(md.requires_dist, extras, KNOWN_PYTHONS)
        if not lines:
            return
        self.data["cuda_libs"] = list(lines)
        self.data["cuda_libs_source"] = [md.url]
        hashes = pin_hashes(lines, files_of) if files_of is not None else None
        if hashes:
            self.data["cuda_libs_sha256"] = hashes

    def arch(self, prev: FrameworkBuild | None, matrix: Matrix) -> None:
        sass = [str(a) for a in prev.sass] if prev else []
        ptx = [str(a) for a in prev.ptx] if prev else []
        rel = matrix.cuda_release(self.data["cuda"]) if "cuda" in self.data else None
        if rel is not None and rel.sm:  # an inherited list keeps only what this CUDA's nvcc can build
            can = {str(a) for a in rel.sm}
            sass, ptx = [a for a in sass if a in can], [a for a in ptx if a in can]
        self.data["sass"], self.data["ptx"] = sass, ptx
        if prev is not None and prev.sass_arm64 is not None:  # kept only if the row has arm64 wheels
            can_arm = {str(a) for a in rel.sm} if rel is not None and rel.sm else None
            self._arm64 = ([str(a) for a in prev.sass_arm64 if can_arm is None or str(a) in can_arm],
                           [str(a) for a in prev.ptx_arm64 or () if can_arm is None or str(a) in can_arm])
        if "cuda" not in self.data:
            self.data["arch_status"] = "confirmed"  # a CPU build has no GPU code
            return
        self.data["arch_status"] = "unconfirmed"
        self.unconfirmed += ["sass", "ptx"]
        self.notes.append("sass/ptx are not in index metadata; inherited"
                          + (f" from {prev.framework}-{prev.version} {prev.variant}" if prev else " (none known)"))

    def build(self, *, note: str = "") -> NewRow:
        # The columns a derived row can have, in the order of matrices/README.md.
        order = ["version", "variant", "cuda", "cudnn", "python", "python_freethreaded", "packages", "index_url",
                 "system_cuda", "system_cudnn", "sass", "ptx", "arch_status", "default", "platforms", "platform_source",
                 "sass_arm64", "ptx_arm64", "wheel_python_source", "released", "cuda_libs", "cuda_libs_source",
                 "cuda_libs_sha256"]
        if self._arm64 is not None and "linux/arm64" in self.data.get("platforms", ()):
            self.data["sass_arm64"], self.data["ptx_arm64"] = self._arm64
        row = {k: self.data[k] for k in order if k in self.data and self.data[k] not in (None, "", [])
               or k in ("sass", "ptx", "ptx_arm64") and k in self.data}
        status = "confirmed" if not (set(self.unconfirmed) - {"sass", "ptx"}) else "partially confirmed"
        row["source"] = self.sources
        row["status"] = status
        row["note"] = "; ".join([*([note] if note else []), *self.notes]) or "Derived by envman matrix update."
        if self.wheel_python:
            row["wheel_python"] = {k: sorted(v, key=Version) for k, v in self.wheel_python.items()}
        row["derived"] = dict(self.derived)
        return NewRow(self.framework, row, tuple(dict.fromkeys(self.unconfirmed)))


def pin_hashes(lines: Iterable[str], files_of: Callable[[str], list[IndexFile]]) -> dict[str, list[str]] | None:
    """{name: sha256 of every Linux x86_64 or pure wheel of the pinned version} for each pin of
    ``lines``, read from the index's project pages; None when a pin has no such wheel with a sha256
    (or its page cannot be read): pip's hash-checking mode needs every one."""
    from packaging.requirements import Requirement

    from envman.matrix.wheels import exact_version

    out: dict[str, list[str]] = {}
    for line in lines:
        req = Requirement(line)
        name, version = normalize(req.name), exact_version(req.specifier)
        try:
            files = files_of(name)
        except (IndexUnreachable, IndexFileError):
            return None
        found: set[str] = set()
        for f in files:
            tags = wheel_tags(f.filename)
            if tags is None or tags.version != version or not (tags.any_platform or "linux/amd64" in tags.platforms):
                continue
            found.update(h for algo, h in f.hashes if algo == "sha256")
        if not found:
            return None
        out[name] = sorted(found)
    return dict(sorted(out.items()))


def _pythons_fact(b: RowBuilder, pys: set[str], urls: list[str], how: str) -> None:
    b.fact("python", sorted(pys, key=Version), urls[0], how)
    for u in urls[1:]:
        if u not in b.sources:
            b.sources.append(u)


def _variant_for(pins: CudaPins) -> str:
    if pins.cuda is None or pins.cuda.how == "major":
        return "cpu" if pins.cuda_major is None else f"cuda{pins.cuda_major}"
    major, minor = pins.cuda.value.split(".")
    return f"cu{major}{minor}"


# --- per framework -----------------------------------------------------------------------------


def _newer(ctx: _Ctx, framework: str, available: Iterable[Version], *, backfill: bool = False) -> list[Version]:
    """Releases above the matrix's newest (or ``since``); with ``backfill`` also those below it of a
    minor the matrix has a row of (a patch release it lacks), above ``since`` where given."""
    known = [b.version for b in ctx.matrix.builds if b.framework == framework]
    since = ctx.settings.since.get(framework)
    floor = since or (max(known) if known else None)
    have = {(str(b.version)) for b in ctx.matrix.builds if b.framework == framework}
    minors = {v.release[:2] for v in known}

    def wanted(v: Version) -> bool:
        if str(v) in have or v.is_postrelease or v.local:
            # a post release re-publishes its release (tensorflow 2.15.0.post1 mended 2.15.0's
            # and-cuda extra): its name is no stack name; the release's row pins it instead
            return False
        if floor is None or v > floor:
            return True
        return backfill and v.release[:2] in minors and (since is None or v > since)

    return sorted(v for v in available if wanted(v))


def discover(ctx: _Ctx, framework: str, *, backfill: bool | None = None) -> tuple[dict[Version, list[Wheel]], list[Version]]:
    rels = releases(wheels(ctx.files(PROJECTS[framework])))
    return rels, _newer(ctx, framework, rels, backfill=ctx.settings.backfill if backfill is None else backfill)


class _TorchVision:
    """torchvision releases and the torch each one requires (its Requires-Dist)."""

    def __init__(self, ctx: _Ctx, index: str | None = None) -> None:
        self.ctx, self.index = ctx, index
        self.rels = releases(wheels(ctx.files("torchvision", index)))

    def companion(self, torch: Version, local: str | None = None, platform: str = "linux/amd64") -> tuple[Version, list[Wheel], str] | None:
        cands = sorted(self.rels, reverse=True)
        # Only torchvision releases published near this torch are worth a metadata read: the
        # ones whose minor follows torch's by the historical offset are tried first.
        want = [v for v in cands if _tv_series(v) == (torch.major, torch.minor)] or cands[:6]
        reps = {}
        for v in want:
            ws = [w for w in self.rels[v] if (local is None or w.tags.local == local)]
            r = representative(ws, platform)
            if r is not None:
                reps[v] = (r, ws)
        mds = self.ctx.metadata(r.file for r, _ in reps.values())
        for v in sorted(reps, reverse=True):
            r, ws = reps[v]
            md = mds[r.file.url]
            spec = pinned_version(md.requires_dist, "torch")
            # torch is a final release (releases() leaves pre- and dev releases out): contains() needs no prereleases=
            if spec is not None and spec.contains(str(torch)) and _same_series(spec, torch):
                return v, with_requires_python(ws, md.requires_python), md.url
        return None


def _tv_series(v: Version) -> tuple[int, int]:
    """torch major.minor that torchvision ``v`` belongs to (0.15 -> 2.0, 0.16 -> 2.1, ...)."""
    if v.major == 0 and v.minor >= 15:
        return (2, v.minor - 15)
    return (-1, -1)


def _same_series(spec: SpecifierSet, torch: Version) -> bool:
    lows = [Version(s.version.removesuffix(".*")) for s in spec if s.operator in ("==", ">=", "~=", "===")]
    return any((lo.major, lo.minor) == (torch.major, torch.minor) for lo in lows)


def torch_rows(ctx: _Ctx, result: Result) -> None:
    rels, new = discover(ctx, "torch")
    if not new:
        return
    result.new_releases["torch"] = [str(v) for v in new]
    tv = _TorchVision(ctx)
    variant_pages = _torch_variant_wheels(ctx, result, new)
    for v in new:
        ws = [w for w in rels[v] if w.tags.platforms]
        reps = {p: r for p in platforms(ws) if (r := representative(ws, p)) is not None}  # never None: p is a wheel's
        mds = ctx.metadata(r.file for r in reps.values() if r)
        if "linux/amd64" not in reps:
            result.skipped.append(f"torch {v}: no Linux x86_64 wheel on the index")
            continue
        amd = reps["linux/amd64"]
        md = mds[amd.file.url]
        pins = cuda_pins(md.requires_dist)  # as on Linux x86_64, cuda_pins' default machine
        variant = _variant_for(pins)
        row = _torch_row(ctx, result, tv, v, variant, ws, reps, mds, pins, index_url=None, local=None)
        if row is not None:
            result.rows.append(row)
        for local, vws in sorted(variant_pages.get(v, {}).items()):
            if local == variant:
                continue  # the same build as the PyPI default
            vreps = {p: r for p in platforms(vws) if (r := representative(vws, p)) is not None}
            if "linux/amd64" not in vreps:
                continue
            vmds = ctx.metadata(r.file for r in vreps.values() if r)
            vpins = cuda_pins(vmds[vreps["linux/amd64"].file.url].requires_dist)  # as on Linux x86_64
            assert ctx.settings.torch_index is not None
            row = _torch_row(ctx, result, _TorchVision(ctx, f"{ctx.settings.torch_index.rstrip('/')}/{local}"), v, local,
                             vws, vreps, vmds, vpins, index_url=f"{ctx.settings.torch_index.rstrip('/')}/{local}", local=local)
            if row is not None:
                result.rows.append(row)


def _torch_variant_wheels(ctx: _Ctx, result: Result, new: list[Version]) -> dict[Version, dict[str, list[Wheel]]]:
    """``{version: {variant: wheels}}`` from PyTorch's own index (``{base}/torch/``)."""
    base = ctx.settings.torch_index
    if not base:
        return {}
    try:
        files = ctx.files("torch", base)
    except (IndexUnreachable, NotFound) as exc:
        if ctx.settings.torch_index_required:
            raise
        result.warnings.append("PyTorch's variant index was not read, only the PyPI build of each release is derived: "
                               f"{exc.where}: {exc.what} (--torch-index URL names a mirror)")
        return {}
    out: dict[Version, dict[str, list[Wheel]]] = {}
    wanted = set(new)
    for w in wheels(files):
        if w.tags.version in wanted and w.tags.local and w.tags.platforms:
            out.setdefault(w.tags.version, {}).setdefault(w.tags.local, []).append(w)
    return out


def _torch_row(ctx: _Ctx, result: Result, tv: _TorchVision, v: Version, variant: str, ws: list[Wheel],
               reps: Mapping[str, Wheel | None], mds: Mapping[str, WheelMetadata], pins: CudaPins,
               *, index_url: str | None, local: str | None) -> NewRow | None:
    amd = reps["linux/amd64"]
    assert amd is not None
    md = mds[amd.file.url]
    b = RowBuilder("torch", v, variant)
    prev = previous_row(ctx.matrix, "torch", v, variant, pins.cuda_major)
    b.cuda(pins, md, prev)
    b.cuda_libs(md, (), lambda name: ctx.files(name, index_url))
    plats = [p for p, r in reps.items() if r is not None and _same_pins(mds[r.file.url], pins, p)]
    pair = tv.companion(v, local)
    packages = [f"torch=={v}"]
    page = ctx.page_url("torch", index_url and ctx.settings.torch_index)
    if pair is None:
        b.notes.append("no torchvision release requiring this torch was found on the index; torchvision not pinned")
        b.wheel_python["torch"] = pythons(ws, plats)
        b.data["wheel_python_source"] = [page]
        _pythons_fact(b, b.wheel_python["torch"], [page], "CPython tags of the Linux torch wheels")
    else:
        tvv, tvws, tvurl = pair
        packages.append(f"torchvision=={tvv}")
        b.derived["torchvision"] = f"torchvision {tvv} requires torch of this release by Requires-Dist ({tvurl})"
        b.sources.append(tvurl)
        plats = [p for p in plats if p in platforms(tvws)]
        b.wheel_python = {"torch": pythons(ws, plats), "torchvision": pythons(tvws, plats)}
        b.data["wheel_python_source"] = [page, ctx.page_url("torchvision", index_url)]
        _pythons_fact(b, b.wheel_python["torch"] & b.wheel_python["torchvision"], [page],
                      "CPython tags of the Linux torch and torchvision wheels")
    threaded = free_threaded(ws, plats) & set(b.data["python"])
    if pair is not None:
        threaded &= free_threaded(pair[1], plats)
    if threaded:
        b.data["python_freethreaded"] = sorted(threaded, key=Version)
        b.derived["python_freethreaded"] = ("free-threaded CPython tags (cp3XYt; py3-none wheels serve any) of the Linux torch"
                                            + (" and torchvision" if pair is not None else "") + f" wheels ({page})")
    b.data["packages"] = packages
    if index_url:
        b.data["index_url"] = index_url
    b.data["system_cuda"] = False
    b.data["system_cudnn"] = False
    b.arch(prev, ctx.matrix)
    b.data["default"] = index_url is None
    b.data["platforms"] = plats
    b.data["platform_source"] = [r.file.url for p, r in reps.items() if r is not None and p in plats and p != "linux/amd64"]
    b.derived["platforms"] = "platform tags of the torch (and torchvision) wheels whose Requires-Dist pins this CUDA"
    b.data["released"] = released(ws)
    other = [p for p in reps if p not in plats]
    note = "the " + ", ".join(other) + " wheels of this release pin a different CUDA build" if other else ""
    if not b.data["python"]:
        result.skipped.append(f"torch {v} {variant}: no Python version has both torch and torchvision wheels")
        return None
    if index_url is None:
        note = (note + "; " if note else "") + "the build plain `pip install torch==" + str(v) + "` gives on Linux"
    return b.build(note=note)


def _platforms_pinning(ctx: _Ctx, ws: list[Wheel], pins: CudaPins, extras: tuple[str, ...] = ()) -> tuple[list[str], list[str]]:
    """The platforms whose wheel pins the same CUDA as ``pins`` (an arm64 wheel may be a CPU
    build), and the URLs of the non-amd64 wheels that say so."""
    reps = {p: representative(ws, p) for p in platforms(ws)}
    mds = ctx.metadata(r.file for r in reps.values() if r)
    plats = [p for p, r in reps.items() if r is not None and _same_pins(mds[r.file.url], pins, p, extras)]
    return plats, [r.file.url for p, r in reps.items() if r is not None and p in plats and p != "linux/amd64"]


def _same_pins(md: WheelMetadata, pins: CudaPins, platform: str, extras: tuple[str, ...] = ()) -> bool:
    other = cuda_pins(md.requires_dist, extras, machine=_machine(platform))
    return (other.cuda.value if other.cuda else None, other.cuda_major) == (pins.cuda.value if pins.cuda else None, pins.cuda_major)


def jax_rows(ctx: _Ctx, result: Result) -> None:
    rels, new = discover(ctx, "jax")
    if not new:
        return
    result.new_releases["jax"] = [str(v) for v in new]
    jaxlib = releases(wheels(ctx.files("jaxlib")))
    for v in new:
        rep = representative(rels[v], "linux/amd64")
        if rep is None:
            continue
        md = ctx.metadata([rep.file])[rep.file.url]
        for major in _cuda_extras(md.requires_dist):
            plugin = f"jax-cuda{major}-plugin"
            try:
                prels = releases(wheels(ctx.files(plugin)))
            except NotFound:
                result.skipped.append(f"jax {v} cuda{major}: {plugin} is not on the index")
                continue
            pws = [w for w in prels.get(v, []) if w.tags.platforms]
            prep = representative(pws, "linux/amd64")
            if prep is None:
                result.skipped.append(f"jax {v} cuda{major}: no Linux x86_64 {plugin} {v} wheel")
                continue
            pmd = ctx.metadata([prep.file])[prep.file.url]
            pins = cuda_pins(pmd.requires_dist, ["with-cuda"])
            b = RowBuilder("jax", v, f"cuda{major}")
            prev = previous_row(ctx.matrix, "jax", v, f"cuda{major}", major)
            b.cuda(pins, pmd, prev)
            b.cuda_libs(md, [f"cuda{major}"], ctx.files)
            plats = [p for p in platforms(pws) if p in platforms(jaxlib.get(v, []))]
            # jax[cudaNN] installs jax (pure Python), jaxlib and the plugin: the row's one package
            # has wheels for the Pythons all three have.
            pys = pythons(rels[v], plats) & pythons(jaxlib.get(v, []), plats) & pythons(pws, plats)
            b.wheel_python = {"jax": pys}
            b.data["wheel_python_source"] = [ctx.page_url("jax"), ctx.page_url("jaxlib"), ctx.page_url(plugin)]
            _pythons_fact(b, pys, [ctx.page_url(plugin), ctx.page_url("jaxlib")],
                          f"CPython tags of the Linux x86_64 {plugin} and jaxlib wheels, jax's Requires-Python")
            b.data["packages"] = [f"jax[cuda{major}]=={v}"]
            b.data["system_cuda"] = False
            b.data["system_cudnn"] = False
            b.arch(prev, ctx.matrix)
            b.data["default"] = False
            b.data["platforms"] = plats
            b.data["platform_source"] = [w.file.url for p in plats if p != "linux/amd64"
                                         for w in [representative(pws, p)] if w is not None]
            b.derived["platforms"] = f"platform tags of the {plugin} and jaxlib wheels"
            b.data["released"] = released(rels[v])
            if not b.data["python"]:
                result.skipped.append(f"jax {v} cuda{major}: no Python version has plugin and jaxlib wheels")
                continue
            result.rows.append(b.build(note=f"jax[cuda{major}] installs jaxlib, {plugin} and NVIDIA's CUDA wheels; "
                                       "the CUDA/cuDNN columns are the lowest versions the plugin accepts"))


def _cuda_extras(lines: Iterable[str]) -> list[int]:
    """The CUDA majors of the ``cudaNN`` extras ``Requires-Dist`` ``lines`` name (``extra ==
    "cuda13"``), ascending; other extras (``cuda``, ``cuda12-local``, ``tpu``) name none."""
    import re

    extras = (e for line in lines for e in re.findall(r"extra\s*==\s*[\"']([^\"']+)[\"']", line))
    return sorted({int(m.group(1)) for e in extras if (m := re.fullmatch(r"cuda([0-9]+)", e))})


def _wheel_columns(ctx: _Ctx, b: RowBuilder, ws: list[Wheel], pins: CudaPins, extras: tuple[str, ...], dist: str,
                   package: str, *, system_cuda: bool, prev: FrameworkBuild | None) -> None:
    """The columns a row derived from one distribution's wheels fills the same way for every
    framework that states its CUDA in a Requires-Dist extra (onnxruntime-gpu, tensorflow):
    platforms, Pythons, the package, system CUDA/cuDNN, architectures, default, release date."""
    plats, b.data["platform_source"] = _platforms_pinning(ctx, ws, pins, extras)
    b.wheel_python = {dist: pythons(ws, plats)}
    b.data["wheel_python_source"] = [ctx.page_url(dist)]
    _pythons_fact(b, b.wheel_python[dist], [ctx.page_url(dist)], "CPython tags of the Linux wheels")
    b.data["packages"] = [package]
    b.data["system_cuda"] = system_cuda
    b.data["system_cudnn"] = system_cuda
    b.arch(prev, ctx.matrix)
    b.data["default"] = True
    b.data["platforms"] = plats
    b.derived["platforms"] = "platform tags of the wheels whose Requires-Dist states this CUDA"
    b.data["released"] = released(ws)


def ort_rows(ctx: _Ctx, result: Result) -> None:
    rels, new = discover(ctx, "onnxruntime")
    if not new:
        return
    result.new_releases["onnxruntime"] = [str(v) for v in new]
    for v in new:
        ws = [w for w in rels[v] if w.tags.platforms]
        rep = representative(ws, "linux/amd64")
        if rep is None:
            result.skipped.append(f"onnxruntime {v}: no Linux x86_64 onnxruntime-gpu wheel")
            continue
        md = ctx.metadata([rep.file])[rep.file.url]
        pins = cuda_pins(md.requires_dist, ["cuda", "cudnn"])
        major = pins.cuda_major
        prev = previous_row(ctx.matrix, "onnxruntime", v, f"cuda{major}" if major else "cuda12", major)
        if major is None and prev is not None and prev.cuda is not None:
            major = prev.cuda.major
        if major is None:  # no CUDA pin, major or earlier GPU row: RowBuilder.cuda would state none
            result.skipped.append(f"onnxruntime {v}: its wheels state no CUDA and no earlier row gives one")
            continue
        b = RowBuilder("onnxruntime", v, f"cuda{major}")
        b.cuda(pins, md, prev)  # states a CUDA: pinned, inherited from prev, or the major's lowest
        # ORT loads libcudart/libcudnn from the system unless its [cuda,cudnn] extras are installed
        # and preloaded; the matrix installs the plain package, so the base image provides them.
        _wheel_columns(ctx, b, ws, pins, ("cuda", "cudnn"), "onnxruntime-gpu", f"onnxruntime-gpu=={v}",
                       system_cuda=True, prev=prev)
        result.rows.append(b.build(note="onnxruntime-gpu on PyPI; the cuda/cudnn extras' Requires-Dist state the CUDA and cuDNN majors"))


def tf_rows(ctx: _Ctx, result: Result) -> None:
    rels, new = discover(ctx, "tensorflow")
    if not new:
        return
    result.new_releases["tensorflow"] = [str(v) for v in new]
    for v in new:
        ws = [w for w in rels[v] if w.tags.platforms]
        rep = representative(ws, "linux/amd64")
        if rep is None:
            continue
        md = ctx.metadata([rep.file])[rep.file.url]
        pins = cuda_pins(md.requires_dist, ["and-cuda"])
        if pins.cuda is None and pins.cuda_major is None:  # tensorflow[and-cuda] would install no CUDA
            result.skipped.append(f"tensorflow {v}: the wheel's [and-cuda] extra states no CUDA")
            continue
        prev = previous_row(ctx.matrix, "tensorflow", v, "gpu", pins.cuda_major)
        b = RowBuilder("tensorflow", v, "gpu")
        b.cuda(pins, md, prev)
        b.cuda_libs(md, ["and-cuda"], ctx.files)
        _wheel_columns(ctx, b, ws, pins, ("and-cuda",), "tensorflow", f"tensorflow[and-cuda]=={v}",
                       system_cuda=False, prev=prev)
        result.rows.append(b.build(note="tensorflow[and-cuda] pulls NVIDIA's CUDA wheels; cuda/cudnn are the lowest versions it accepts"))


DERIVERS: dict[str, Callable[[_Ctx, Result], None]] = {
    "torch": torch_rows, "jax": jax_rows, "onnxruntime": ort_rows, "tensorflow": tf_rows,
}


# --- CUDA releases and the GPU list ------------------------------------------------------------

#: The PyPI project whose releases are CUDA's (``cuda-toolkit 13.4.2`` is CUDA 13.4.2).
CUDA_PROJECT = "cuda-toolkit"
#: Days after which the GPU list, compared with NVIDIA's CUDA GPUs pages on its ``checked`` date, is stale.
GPU_LIST_MAX_AGE = 180


def cuda_versions(ctx: _Ctx) -> dict[Version, str | None]:
    """CUDA releases on the index (``X.Y.Z``; a fourth part is a repackaging) -> first upload day."""
    out: dict[Version, str | None] = {}
    for f in ctx.files(CUDA_PROJECT):
        v = final_version(f.filename.split("-")[1])  # ctx.files: wheels named cuda_toolkit-VERSION-...
        if v is None or len(v.release) < 3:
            continue
        v = Version(".".join(str(p) for p in v.release[:3]))
        day = _date(f.upload_time)
        seen = out.get(v)
        if v not in out or (day and (seen is None or day < seen)):
            out[v] = day
    return out


def cuda_report(matrix: Matrix, versions: Mapping[Version, str | None]) -> tuple[list[str], list[str]]:
    """(CUDA releases the matrix lacks, what the matrix cannot fill for the releases it has): a
    release's own toolkit driver (each update has one: NVIDIA's table, not the index) and nvidia/cuda
    images of it. Nothing is guessed; every line says where the fact would come from."""
    new: list[str] = []
    unfilled: list[str] = []
    for v in sorted(versions):
        rel = matrix.cuda_release(v)
        when = f" (released {versions[v]})" if versions[v] else ""
        if rel is None:
            new.append(str(v))
            unfilled.append(f"CUDA {v}{when}: no [[release]] {v.major}.{v.minor} in cuda.toml: its toolkit driver "
                            "(NVIDIA's release notes, Table 3), nvcc's compute capabilities and images are not known")
            continue
        ga = v.micro == 0 or (not any(u <= v for u, _ in rel.updates) and v == min(x for x in versions if (x.major, x.minor) == (v.major, v.minor)))
        if not ga and v not in {u for u, _ in rel.updates}:
            unfilled.append(f"CUDA {v}{when}: no toolkit driver recorded for this update (updates of cuda.toml "
                            f"{rel.key}); stacks on its images use {rel.toolkit_driver_for(v)}, a lower bound")
        newest = v == max(x for x in versions if (x.major, x.minor) == (v.major, v.minor))
        if newest and not any(i.cuda_patch == v and not i.custom for i in matrix.images):  # rows carry the newest patch
            unfilled.append(f"CUDA {v}{when}: no nvidia/cuda image row (images.toml) of this release, the newest of {rel.key}")
    return new, unfilled


def gpu_list_age(matrix: Matrix, today: _dt.date | None = None) -> tuple[int | None, list[str]]:
    """(days since the GPU list was compared with NVIDIA's pages, why it is stale): stale when that
    is over :data:`GPU_LIST_MAX_AGE` days ago or not recorded, or when the newest CUDA release
    targets a compute capability above every GPU of the list (a new GPU generation it lacks)."""
    today = today or _dt.date.today()
    why: list[str] = []
    age = None
    if matrix.gpus_checked is None:
        why.append("the GPU list records no date it was compared with NVIDIA's CUDA GPUs pages (checked)")
    else:
        age = (today - _dt.date.fromisoformat(matrix.gpus_checked)).days
        if age > GPU_LIST_MAX_AGE:
            why.append(f"the GPU list was compared with NVIDIA's CUDA GPUs pages {age} days ago ({matrix.gpus_checked})")
    top = max((g.cc for g in matrix.gpus), default=None)
    newest = max(matrix.cuda, key=lambda r: r.version, default=None)
    missing = sorted(a for a in newest.sm if top is None or a > top) if newest else []
    if missing and newest:
        why.append(f"CUDA {newest.key} targets compute capability {', '.join(str(a) for a in missing)}, "
                   f"above every GPU of the list (the newest: {top})")
    return age, why


def find_updates(http: Http, settings: Settings, matrix: Matrix, progress: PROGRESS = lambda s: None) -> Result:
    """Derive rows for every release newer than ``matrix`` (nothing is written here)."""
    ctx = _Ctx(http, settings, matrix, progress)
    result = Result()
    try:
        if settings.cuda:
            new, result.unfilled = _cuda_lines(ctx, result.warnings)
            if new:
                result.new_releases["cuda"] = new
        for fw in settings.frameworks:
            DERIVERS[fw](ctx, result)
        if settings.backfill:
            pins_of = pins_from(ctx.files, lambda f: ctx.metadata([f])[f.url].requires_dist)
            found = find_gaps(matrix, settings.frameworks, ctx.files, ctx.page_url, pins_of)
            result.gaps, result.unfilled = found.gaps, result.unfilled + found.unfilled
    except IndexFileError as exc:
        raise EnvmanError(exc.what, where=exc.where, fix="; ".join([*filter(None, [exc.fix]), "nothing was written"])) from None
    finally:
        ctx.pool.shutdown(wait=False, cancel_futures=True)
    return result


def _cuda_lines(ctx: _Ctx, warnings: list[str]) -> tuple[list[str], list[str]]:
    try:
        return cuda_report(ctx.matrix, cuda_versions(ctx))
    except NotFound:
        warnings.append(f"the index has no {CUDA_PROJECT} project: CUDA releases were not checked")
        return [], []


def check_only(http: Http, settings: Settings, matrix: Matrix, progress: PROGRESS = lambda s: None) -> dict[str, list[str]]:
    """Releases on the index newer than ``matrix`` per framework (no metadata reads); with
    ``settings.cuda`` also CUDA releases the matrix lacks and why the GPU list is stale."""
    ctx = _Ctx(http, settings, matrix, progress)
    try:
        out: dict[str, list[str]] = {}
        if settings.cuda:
            new, _ = _cuda_lines(ctx, [])
            if new:
                out["cuda"] = new
            _, stale = gpu_list_age(matrix)
            if stale:
                out["gpus"] = stale
        for fw in settings.frameworks:
            _, releases = discover(ctx, fw, backfill=False)  # --check: releases newer than the matrix only
            if releases:
                out[fw] = [str(v) for v in releases]
        return out
    finally:
        ctx.pool.shutdown(wait=False, cancel_futures=True)


__all__ = ["Settings", "NewRow", "Result", "find_updates", "check_only", "cuda_report", "gpu_list_age", "TORCH_INDEX",
           "UserError", "Pin"]


# --- checking and writing ----------------------------------------------------------------------


def _row_wheres(row: NewRow) -> set[str]:
    fw, version, variant = row.key
    return {f"{fw} {version} {variant}", f"{fw} {version}"}


def check_rows(rows: list[NewRow], files: list[Path], candidates: Mapping[Path, str],
               render: Callable[[Any], object]) -> tuple[list[NewRow], list[str]]:
    """The rows that load, validate, resolve and render with ``files`` (the matrix files of the
    target set-up, where ``candidates`` replace or add files); the others with why. ``render``
    renders a resolved stack (the caller passes envman's renderer: the matrix sits below it)."""
    import tempfile

    from envman.errors import EnvmanError as _E
    from envman.stack.resolve import resolve_row
    from envman.matrix.load import load_files
    from envman.matrix.validate import validate

    with tempfile.TemporaryDirectory(prefix="envman-update-") as tmp:
        paths = []
        for i, f in enumerate([*files, *(c for c in candidates if c not in files)]):
            if f in candidates:
                t = Path(tmp) / f"{i}-{f.name}"
                t.write_text(candidates[f], encoding="utf-8")
                paths.append(t)
            else:
                paths.append(f)
        m = load_files(paths)
    bad: dict[tuple[str, str, str], str] = {}
    problems = validate(m)
    by_key = {(b.framework, str(b.version), b.variant): b for b in m.builds}
    for row in rows:
        mine = [p.what for p in problems if p.where in _row_wheres(row)]
        if mine:
            bad[row.key] = mine[0]
            continue
        b = by_key.get(row.key)
        if b is None:
            bad[row.key] = "not loaded"
            continue
        try:
            render(resolve_row(m, b))
        except _E as exc:
            bad[row.key] = exc.line()
    return [r for r in rows if r.key not in bad], [f"{r.name} ({r.data['variant']}): {bad[r.key]}" for r in rows if r.key in bad]


def plan_overlay(rows: list[NewRow], output: Path) -> dict[Path, str]:
    from envman.matrix.write import overlay_text, read_overlay

    existing = read_overlay(output)
    new_keys = {r.key for r in rows}
    kept = [(d["framework"], {k: v for k, v in d.items() if k != "framework"}) for d in existing
            if (d.get("framework"), str(d.get("version")), d.get("variant")) not in new_keys]
    return {output: overlay_text([*kept, *((r.framework, r.data) for r in rows)])}


def plan_shipped(rows: list[NewRow], directory: Path) -> dict[Path, str]:
    from envman.safefile import LARGE_LIMIT, read_text
    from envman.matrix.write import build_toml

    out: dict[Path, str] = {}
    for fw in sorted({r.framework for r in rows}):
        path = directory / f"{fw}.toml"
        try:
            text = read_text(path, what="shipped matrix file", limit=LARGE_LIMIT)
        except FileNotFoundError:
            raise UserError("the shipped matrix file is missing", where=str(path),
                            fix="run --write from a source checkout; nothing was written") from None
        if not text.endswith("\n"):
            text += "\n"
        out[path] = text + "".join("\n" + build_toml(r.data) for r in rows if r.framework == fw)
    return out


def settle(rows: list[NewRow], files: list[Path], plan: Callable[[list[NewRow]], dict[Path, str]],
           render: Callable[[Any], object]) -> tuple[list[NewRow], list[str], dict[Path, str]]:
    """Drop rows that fail the checks until the rest pass together; returns (rows, skipped, files)."""
    skipped: list[str] = []
    for _ in range(4):
        if not rows:
            return rows, skipped, {}
        candidates = plan(rows)
        ok, bad = check_rows(rows, files, candidates, render)
        skipped += bad
        if len(ok) == len(rows):
            return rows, skipped, candidates
        rows = ok
    raise EnvmanError("the derived rows do not settle into a valid matrix", where="envman matrix update",
                      fix="run `envman matrix validate`; nothing was written")


def settle_gaps(gaps: list[Gap], files: list[Path], planned: Mapping[Path, str], render: Callable[[Any], object], *,
                overlay: Callable[[list[NewRow]], dict[Path, str]] | None = None) -> tuple[list[Gap], list[str], dict[Path, str]]:
    """The backfill gaps (envman.matrix.backfill) whose edited rows load, validate and render with
    the rest (the others, with why), and the files to write: ``planned`` (the new rows' files) with
    the rows edited in place where they are, or, with ``overlay`` (``-o FILE``: it plans the
    overlay from extra rows), the whole edited rows added to the overlay."""
    from envman.matrix.backfill import edited_files, patched_rows, row_sources

    sources = row_sources(files)
    skipped = [f"{g.name}: its row is in no matrix file read" for g in gaps if g.key not in sources]
    gaps = [g for g in gaps if g.key in sources]
    for _ in range(4):
        if not gaps:
            break
        cands = (overlay([NewRow(fw, row, ()) for fw, row in patched_rows(gaps, sources)]) if overlay is not None
                 else edited_files(gaps, sources, planned))
        stand_ins = [NewRow(g.framework, {"version": g.version, "variant": g.variant}, ()) for g in gaps]
        ok, bad = check_rows(stand_ins, files, cands, render)
        skipped += [f"backfill of {line}" for line in bad]
        if len(ok) == len(gaps):
            return gaps, skipped, cands
        keep = {r.key for r in ok}
        gaps = [g for g in gaps if g.key in keep]
    return [], skipped, dict(planned)
