"""What a wheel says about itself: Python versions and platforms from its file name's tags, and
the CUDA and cuDNN it pins from its ``Requires-Dist`` lines.

Every style of CUDA requirement in use is understood:

- ``nvidia-cuda-runtime-cu12==12.8.90`` (per-major suffixed NVIDIA wheels, CUDA 11/12 era);
- ``nvidia-cuda-runtime==13.0.96`` / ``nvidia-cuda-runtime~=13.0`` (unsuffixed, CUDA 13 era);
- ``cuda-toolkit[cudart,...]==13.2.2`` (NVIDIA's meta package, torch >= 2.12);
- ``nvidia-cudnn-cu12==9.10.2.21`` / ``nvidia-cudnn-cu13~=9.0`` for cuDNN;
- ``jax-cuda12-plugin[with-cuda]`` / ``jax-cuda13-plugin`` (the CUDA major of a JAX extra);
- bounds instead of pins (``>=12.1.105``, ``<13,>=12.5.82``, ``~=12.0``): the lower bound, and how
  exact it is, are kept apart so a row can say "pinned" or "at least".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

if TYPE_CHECKING:
    from envman.matrix.index import IndexFile

#: Python minors envman knows of: the candidates for ``py3`` and ``abi3`` wheels, filtered by the
#: wheel's Requires-Python.
KNOWN_PYTHONS = tuple(f"3.{m}" for m in range(6, 16))

PLATFORMS = {"x86_64": "linux/amd64", "aarch64": "linux/arm64"}

_LINUX_TAG = re.compile(r"^(?:many)?linux(?:1|2010|2014|_\d+_\d+)?_(x86_64|aarch64)$")
_CP_TAG = re.compile(r"^cp(\d)(\d+)$")


@dataclass(frozen=True)
class WheelTags:
    """What a wheel's file name says."""

    name: str
    version: Version
    local: str | None  # "cu128" of "2.7.1+cu128"
    pythons: tuple[str, ...]  # "3.12"... (regular CPython builds)
    free_threaded: tuple[str, ...]  # "3.13" for cp313t
    platforms: tuple[str, ...]  # "linux/amd64", "linux/arm64"; () for non-Linux wheels
    any_platform: bool  # a pure-Python wheel ("any")


def wheel_tags(filename: str, requires_python: str | None = None) -> WheelTags | None:
    """Parse a wheel file name; ``None`` when it is not a valid wheel name."""
    try:
        name, version, _build, tags = parse_wheel_filename(filename)
    except (InvalidWheelFilename, InvalidVersion):
        return None
    pythons: set[str] = set()
    threaded: set[str] = set()
    platforms: set[str] = set()
    any_platform = False
    spec = _specifier(requires_python)
    for t in tags:
        if t.platform == "any":
            any_platform = True
        m = _LINUX_TAG.match(t.platform)
        if m:
            platforms.add(PLATFORMS[m.group(1)])
        cp = _CP_TAG.match(t.interpreter)
        if cp:
            py = f"{cp.group(1)}.{cp.group(2)}"
            if t.abi == "abi3":  # stable ABI: this Python and every later one
                pythons.update(p for p in KNOWN_PYTHONS if Version(p) >= Version(py) and _allowed(p, spec))
            elif t.abi.endswith("t"):
                threaded.add(py)
            else:
                pythons.add(py)
        elif t.interpreter in ("py3", "py30") or (t.interpreter.startswith("py3") and t.abi == "none"):
            pythons.update(p for p in KNOWN_PYTHONS if _allowed(p, spec))
    return WheelTags(
        name=str(name), version=Version(str(version).split("+")[0]), local=version.local,
        pythons=_sorted(pythons), free_threaded=_sorted(threaded), platforms=tuple(sorted(platforms)),
        any_platform=any_platform,
    )


def _specifier(text: str | None) -> SpecifierSet | None:
    if not text:
        return None
    try:
        return SpecifierSet(text)
    except Exception:
        return None


def _allowed(py: str, spec: SpecifierSet | None) -> bool:
    # A Requires-Python of ">=3.10,!=3.14.1" must still admit 3.14: test the minor's .0 and a
    # late patch, as pip would find some 3.14.x it accepts.
    return spec is None or any(spec.contains(f"{py}.{p}", prereleases=True) for p in (0, 99))


def _sorted(pys: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(set(pys), key=Version))


# --- Requires-Dist -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pin:
    """One derived version fact: ``value`` (``"12.8"``, ``"9"``), how exact it is, and the
    requirement line it came from."""

    value: str
    how: str  # "pinned" (==), "at least" (lower bound), "major" (only the major is fixed)
    requirement: str

    def describe(self) -> str:
        return f"{self.how} by Requires-Dist '{self.requirement}'"


@dataclass(frozen=True)
class CudaPins:
    cuda: Pin | None
    cudnn: Pin | None
    cuda_major: int | None  # from a -cuNN suffix or a plugin name even when no version is given


_SUFFIX = re.compile(r"-cu(\d+)$")
_CUDA_RUNTIME = re.compile(r"^nvidia-cuda-runtime(?:-cu(\d+))?$")
_CUDA_OTHER = re.compile(r"^nvidia-cuda-(?:nvrtc|nvcc|cupti)(?:-cu(\d+))?$")
_CUDNN = re.compile(r"^nvidia-cudnn(?:-cu(\d+))?$")
_JAX_PLUGIN = re.compile(r"^jax-cuda(\d+)-(?:plugin|pjrt)$")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def active_requirements(lines: Iterable[str], extras: Iterable[str] = (), *, machine: str = "x86_64",
                        python: str = "3.12") -> list[Requirement]:
    """The requirements that apply on Linux ``machine`` with ``extras`` selected (markers
    evaluated as pip would); unparsable lines are skipped."""
    env = {"sys_platform": "linux", "platform_system": "Linux", "os_name": "posix", "platform_machine": machine,
           "python_version": python, "python_full_version": f"{python}.0", "implementation_name": "cpython",
           "platform_python_implementation": "CPython"}
    wanted = ["", *extras]
    out = []
    for line in lines:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is None or any(req.marker.evaluate({**env, "extra": e}) for e in wanted):
            out.append(req)
    return out


def _lower_bound(spec: SpecifierSet) -> tuple[Version, str] | None:
    """The lowest version ``spec`` admits, and how exact: ``==`` pinned, ``~=X.0`` major only."""
    best: tuple[Version, str] | None = None
    for s in spec:
        v = s.version.rstrip(".*")
        try:
            ver = Version(v)
        except InvalidVersion:
            continue
        if s.operator in ("==", "==="):
            return ver, "pinned" if not s.version.endswith(".*") else "major" if len(ver.release) == 1 else "at least"
        if s.operator == "~=":
            how = "major" if len(ver.release) == 2 and ver.release[1] == 0 else "at least"
        elif s.operator in (">=", ">"):
            how = "at least"
        else:
            continue
        if best is None or ver > best[0]:
            best = (ver, how)
    return best


def _pin(req: Requirement, *, full: bool = False) -> Pin | None:
    """The requirement's lower bound: ``major.minor`` (CUDA), or the whole version as written
    (``full``: cuDNN, whose builds are told apart by all four parts), or the major alone."""
    lb = _lower_bound(req.specifier)
    if lb is None:
        return None
    ver, how = lb
    rel = ver.release + (0,)
    value = f"{rel[0]}" if how == "major" else ver.base_version if full else f"{rel[0]}.{rel[1]}"
    return Pin(value, how, str(req))


def cuda_pins(lines: Iterable[str], extras: Iterable[str] = (), *, machine: str = "x86_64") -> CudaPins:
    """CUDA and cuDNN that ``Requires-Dist`` ``lines`` pin on Linux ``machine`` with ``extras``."""
    reqs = active_requirements(lines, extras, machine=machine)
    runtime: Pin | None = None
    toolkit: Pin | None = None
    other: Pin | None = None
    cudnn: Pin | None = None
    major: int | None = None
    for req in reqs:
        name = _norm(req.name)
        suffix = _SUFFIX.search(name)
        if suffix and name.startswith("nvidia-"):
            major = major or int(suffix.group(1))
        plugin = _JAX_PLUGIN.match(name)
        if plugin:
            major = major or int(plugin.group(1))
        if name == "cuda-toolkit":
            toolkit = toolkit or _pin(req)
        elif _CUDA_RUNTIME.match(name):
            runtime = runtime or _pin(req)
        elif _CUDA_OTHER.match(name):
            other = other or _pin(req)
        elif _CUDNN.match(name):
            p = _pin(req, full=True)
            if p is not None and p.how == "at least" and _only_major_range(req.specifier):
                p = Pin(p.value.split(".")[0], "major", p.requirement)
            cudnn = cudnn or p
    cuda = toolkit or runtime or other
    if cuda is not None:
        major = int(cuda.value.split(".")[0])
    return CudaPins(cuda=cuda, cudnn=cudnn, cuda_major=major)


def _only_major_range(spec: SpecifierSet) -> bool:
    """``>=9.0,<10`` fixes only the major (the .0 floor says nothing about the build)."""
    lows = [s for s in spec if s.operator in (">=", "~=")]
    return bool(lows) and all(Version(s.version).release[1:2] in ((0,), ()) for s in lows)


def pinned_version(lines: Iterable[str], project: str, extras: Iterable[str] = ()) -> SpecifierSet | None:
    """The specifier a package's ``Requires-Dist`` puts on ``project`` (torchvision on torch)."""
    for req in active_requirements(lines, extras):
        if _norm(req.name) == _norm(project):
            return req.specifier
    return None


# --- the CUDA libraries a framework pins -------------------------------------------------------

#: Distributions that carry a framework's CUDA libraries (or, for JAX, its CUDA plugin): NVIDIA's
#: per-library wheels (suffixed or not), NVIDIA's ``cuda-toolkit`` meta package, triton (torch's
#: compiler, which bundles ptxas and libdevice) and the JAX CUDA plugin and PJRT.
CUDA_LIBRARY_RE = re.compile(r"nvidia-[a-z0-9]+(?:-[a-z0-9]+)*|cuda-toolkit|triton|pytorch-triton|jax-cuda\d+-(?:plugin|pjrt)")


def exact_version(spec: SpecifierSet) -> Version | None:
    """The one version ``spec`` admits when it pins exactly one: ``==X`` (no wildcard), ``===X``,
    or ``>=X,<=X`` (how JAX pins its plugin); else None."""
    eq: set[Version] = set()
    low: Version | None = None
    high: Version | None = None
    try:
        for s in spec:
            if s.operator in ("==", "===") and not s.version.endswith(".*"):
                eq.add(Version(s.version))
            elif s.operator == ">=":
                low = Version(s.version)
            elif s.operator == "<=":
                high = Version(s.version)
            else:
                return None
    except InvalidVersion:
        return None
    if low is not None or high is not None:
        if low is None or low != high:
            return None
        eq.add(low)
    return next(iter(eq)) if len(eq) == 1 else None


def cuda_library_lines(lines: Iterable[str], extras: Iterable[str], pythons: Iterable[str],
                       *, machine: str = "x86_64") -> tuple[str, ...]:
    """The ``Requires-Dist`` ``lines`` that pin a CUDA library (:data:`CUDA_LIBRARY_RE`) to exactly
    one version and apply on Linux ``machine`` with ``extras`` for at least one of ``pythons``,
    each as ``name==version`` and its marker (extras dropped: the libraries are installed without
    their dependencies). In the metadata's order, each once."""
    extras, pythons = list(extras), list(pythons)
    out: dict[str, None] = {}
    for line in lines:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        name = _norm(req.name)
        version = exact_version(req.specifier)
        if version is None or not CUDA_LIBRARY_RE.fullmatch(name):
            continue
        if not any(active_requirements([line], extras, machine=machine, python=p) for p in pythons):
            continue
        out[f"{name}=={version}" + (f"; {req.marker}" if req.marker is not None else "")] = None
    return tuple(out)


def cuda_libraries(lines: Iterable[str], extras: Iterable[str], python: str, *, machine: str = "x86_64") -> tuple[str, ...]:
    """What a matrix row's ``cuda_libs`` ``lines`` install for ``python`` on Linux ``machine`` with
    ``extras``: ``name==version`` each, sorted by name, each name once (the first line that applies
    wins). Sorted so that the same pins always give the same install step."""
    seen: dict[str, str] = {}
    for req in active_requirements(lines, extras, machine=machine, python=python):
        version = exact_version(req.specifier)
        name = _norm(req.name)
        if version is not None and CUDA_LIBRARY_RE.fullmatch(name) and name not in seen:
            seen[name] = f"{name}=={version}"
    return tuple(seen[n] for n in sorted(seen))


def requirement_extras(requirements: Iterable[str]) -> tuple[str, ...]:
    """Every extra that ``requirements`` (a row's pinned packages) ask for, sorted."""
    out: set[str] = set()
    for line in requirements:
        try:
            out.update(Requirement(line).extras)
        except InvalidRequirement:
            continue
    return tuple(sorted(out))


# --- wheels on an index page (envman matrix update) ---------------------------------------------


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
