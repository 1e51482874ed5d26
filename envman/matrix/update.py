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
from typing import Any, Callable, Iterable, Mapping

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version
import re

from envman.config import citable_url
from envman.errors import UserError
from envman.matrix.backfill import Gap
from envman.matrix.index import (
    Http, IndexFile, IndexUnreachable, NotFound, WheelMetadata, fetch_project, normalize, project_url,
    read_wheel_metadata,
)
from envman.matrix.model import FrameworkBuild, Matrix
from envman.matrix.newrow import NewRow, RowBuilder, pin_hashes, previous_row
from envman.matrix.wheels import (
    CudaPins, Pin, Wheel, cuda_pins, free_threaded, pinned_version, platforms, pythons, releases, representative, wheels,
    with_requires_python,
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


class IndexReader:
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


def _machine(platform: str) -> str:
    return "aarch64" if platform.endswith("arm64") else "x86_64"


# --- rows ------------------------------------------------------------------------------------


def upload_day(upload_time: str | None) -> str | None:
    if not upload_time:
        return None
    try:
        return _dt.datetime.fromisoformat(upload_time.replace("Z", "+00:00")).date().isoformat()
    except ValueError:
        return None


def released(ws: Iterable[Wheel]) -> str | None:
    dates = [d for w in ws if (d := upload_day(w.file.upload_time))]
    return min(dates) if dates else None


def _pythons_fact(b: RowBuilder, pys: set[str], urls: list[str], how: str) -> None:
    b.fact("python", sorted(pys, key=Version), urls[0], how)
    for u in map(citable_url, urls[1:]):
        if u not in b.sources:
            b.sources.append(u)


def _variant_for(pins: CudaPins) -> str:
    if pins.cuda is None or pins.cuda.how == "major":
        return "cpu" if pins.cuda_major is None else f"cuda{pins.cuda_major}"
    major, minor = pins.cuda.value.split(".")
    return f"cu{major}{minor}"


# --- per framework -----------------------------------------------------------------------------


def _newer(ctx: IndexReader, framework: str, available: Iterable[Version], *, backfill: bool = False) -> list[Version]:
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


def discover(ctx: IndexReader, framework: str, *, backfill: bool | None = None) -> tuple[dict[Version, list[Wheel]], list[Version]]:
    rels = releases(wheels(ctx.files(PROJECTS[framework])))
    return rels, _newer(ctx, framework, rels, backfill=ctx.settings.backfill if backfill is None else backfill)


class _TorchVision:
    """torchvision releases and the torch each one requires (its Requires-Dist)."""

    def __init__(self, ctx: IndexReader, index: str | None = None) -> None:
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


def torch_rows(ctx: IndexReader, result: Result) -> None:
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


def _torch_variant_wheels(ctx: IndexReader, result: Result, new: list[Version]) -> dict[Version, dict[str, list[Wheel]]]:
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


def _torch_row(ctx: IndexReader, result: Result, tv: _TorchVision, v: Version, variant: str, ws: list[Wheel],
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


def _platforms_pinning(ctx: IndexReader, ws: list[Wheel], pins: CudaPins, extras: tuple[str, ...] = ()) -> tuple[list[str], list[str]]:
    """The platforms whose wheel pins the same CUDA as ``pins`` (an arm64 wheel may be a CPU
    build), and the URLs of the non-amd64 wheels that say so."""
    reps = {p: representative(ws, p) for p in platforms(ws)}
    mds = ctx.metadata(r.file for r in reps.values() if r)
    plats = [p for p, r in reps.items() if r is not None and _same_pins(mds[r.file.url], pins, p, extras)]
    return plats, [r.file.url for p, r in reps.items() if r is not None and p in plats and p != "linux/amd64"]


def _same_pins(md: WheelMetadata, pins: CudaPins, platform: str, extras: tuple[str, ...] = ()) -> bool:
    other = cuda_pins(md.requires_dist, extras, machine=_machine(platform))
    return (other.cuda.value if other.cuda else None, other.cuda_major) == (pins.cuda.value if pins.cuda else None, pins.cuda_major)


def jax_rows(ctx: IndexReader, result: Result) -> None:
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
    extras = (e for line in lines for e in re.findall(r"extra\s*==\s*[\"']([^\"']+)[\"']", line))
    return sorted({int(m.group(1)) for e in extras if (m := re.fullmatch(r"cuda([0-9]+)", e))})


def _wheel_columns(ctx: IndexReader, b: RowBuilder, ws: list[Wheel], pins: CudaPins, extras: tuple[str, ...], dist: str,
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


def ort_rows(ctx: IndexReader, result: Result) -> None:
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


def tf_rows(ctx: IndexReader, result: Result) -> None:
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


DERIVERS: dict[str, Callable[[IndexReader, Result], None]] = {
    "torch": torch_rows, "jax": jax_rows, "onnxruntime": ort_rows, "tensorflow": tf_rows,
}




__all__ = ["Settings", "NewRow", "Result", "TORCH_INDEX", "UserError", "Pin", "RowBuilder", "pin_hashes", "previous_row",
           "Wheel", "wheels", "with_requires_python", "releases", "representative", "pythons", "free_threaded",
           "platforms"]
