"""Stack names and the resolver: ``torch-1.0-cuda10`` → one fully pinned ``Stack``.

Grammar (case-insensitive)::

    NAME      := FRAMEWORK "-" VERSION [ "-" TARGET ] [ "-py" X.Y ] [ "-" FLAVOUR ] [ "-" PLATFORM ]
    TARGET    := "cuda" V | "cu" NNN | "cpu"            (cuda12, cuda12.4, cu118, cpu)
    FLAVOUR   := base | runtime | cudnn-runtime | devel | cudnn-devel
    PLATFORM  := arm64 | aarch64 | amd64 | x86_64       (default: linux/amd64, never written)
    FRAMEWORK := torch | pytorch | tensorflow | tf | jax | onnxruntime | ort | onnxruntime-gpu

Partial versions resolve to the newest match: the newest framework release whose version starts
with VERSION, then (without TARGET) the variant ``pip install`` gives by default, else the newest
CUDA matching TARGET. A PLATFORM (or ``--platform``) keeps only the rows with wheels for it and
the base images published for it; the newest such release wins.
"""

from __future__ import annotations

import difflib
import os
import re
from packaging.version import Version
from dataclasses import replace
import json

from envman.errors import EnvmanError, ResolveError
from envman.matrix.model import FLAVOURS_HOLDING, BaseImage, CudaRelease, FrameworkBuild, Matrix, OsInfo, cudnn_fits
from envman.stack.names import (
    DEFAULT_PLATFORM, FLAVOURS, MIN_STANDALONE_PYTHON, PLATFORM_SUFFIX, Stack, StackQuery, nvidia_tag, parse_name,
    spelling_fixes,
)

_STANDALONE_FROM = Version(MIN_STANDALONE_PYTHON)

#: What each flavour contains; a stack may use any flavour that contains what it needs.
def version_matches(partial: str, version: Version) -> bool:
    """``"1.0"`` matches 1.0.0 and 1.0.1; ``"2"`` matches every 2.x; ``"12.4"`` matches 12.4."""
    want = tuple(int(p) for p in partial.split("."))
    return tuple(version.release[: len(want)]) == want or (
        # "1.0.0" asked for, "1.0" stored (zero-padded equality)
        len(want) > len(version.release)
        and tuple(version.release) + (0,) * (len(want) - len(version.release)) == want
    )


# --- lookup tables -----------------------------------------------------------------------------

#: Release prefixes longer than this are matched by a scan instead of the table.
_MAX_PARTS = 6


class _Index:
    """A matrix's rows by what a query selects them on, built once per matrix, so resolving a
    name costs the rows that match it, not the whole matrix (resolving every name is linear in
    the rows, not quadratic)."""

    def __init__(self, matrix: Matrix) -> None:
        self.builds: dict[tuple[str, tuple[int, ...]], list[FrameworkBuild]] = {}
        self.frameworks: dict[str, list[FrameworkBuild]] = {}
        for b in matrix.builds:  # every prefix of each release, and its zero-padded forms
            self.frameworks.setdefault(b.framework, []).append(b)
            release = tuple(b.version.release)
            keys = {release[:k] for k in range(1, len(release) + 1)}
            keys |= {release + (0,) * k for k in range(1, _MAX_PARTS - len(release) + 1)}
            for key in keys:
                self.builds.setdefault((b.framework, key), []).append(b)
        self.images_by_cuda: dict[Version | None, list[BaseImage]] = {}
        self.images_by_ref: dict[str, list[BaseImage]] = {}
        for img in matrix.images:
            self.images_by_cuda.setdefault(img.cuda, []).append(img)
            self.images_by_ref.setdefault(img.ref, []).append(img)
        self.oses: dict[str, OsInfo] = {}
        for o in matrix.oses:
            self.oses.setdefault(o.name, o)  # the first row of a name, as Matrix.os_info
        self.pythons: dict[tuple[str, str], tuple[Version, ...]] = {}  # stack_pythons, by row and platform
        self.cuda: dict[tuple[int, int], CudaRelease] = {}
        for r in matrix.cuda:
            self.cuda.setdefault((r.version.major, r.version.minor), r)  # as Matrix.cuda_release

    def select(self, framework: str, partial: str) -> list[FrameworkBuild]:
        """The rows of ``framework`` whose version matches ``partial`` (:func:`version_matches`), in matrix order."""
        want = tuple(int(p) for p in partial.split("."))
        rows = self.builds.get((framework, want), []) if len(want) <= _MAX_PARTS else self.frameworks.get(framework, [])
        return [b for b in rows if version_matches(partial, b.version)]


_INDEXES: list[tuple[Matrix, _Index]] = []


def _index(matrix: Matrix) -> _Index:
    """The lookup tables of ``matrix`` (the last few matrices' are kept, by identity)."""
    for m, index in _INDEXES:
        if m is matrix:
            return index
    index = _Index(matrix)
    _INDEXES.insert(0, (matrix, index))
    del _INDEXES[4:]
    return index


# --- resolution ------------------------------------------------------------------------------


def _flavours_for(needed: str) -> list[str]:
    return list(FLAVOURS_HOLDING[needed])


def _python_choice(build: FrameworkBuild, os_info: OsInfo | None, want: Version | None) -> tuple[Version, str] | None:
    """(python, strategy) for a build on an OS, or None if the build can't have ``want`` there: a
    Python the OS does not package comes from python-build-standalone, which starts at
    :data:`~envman.stack.names.MIN_STANDALONE_PYTHON` (Python 3.6 on ubuntu16.04 is no stack)."""
    apt = set(os_info.python_apt) if os_info else set()
    if want is not None:
        if want not in build.python:
            return None
        if want in apt:
            return want, "apt"
        return (want, "standalone") if want >= _STANDALONE_FROM else None
    if os_info and os_info.python_default in build.python:
        return os_info.python_default, "apt"
    on_apt = sorted(apt & set(build.python))
    if on_apt:
        return on_apt[-1], "apt"
    standalone = [p for p in build.python if p >= _STANDALONE_FROM]
    return (max(standalone), "standalone") if standalone else None


def _availability(matrix: Matrix, img: BaseImage, platform: str, *, pinned: bool) -> int | None:
    """How a build can get ``img``: 2 pulled (served today), 1 rebuilt from NVIDIA's recipe (a tag
    NVIDIA deleted, or one not confirmed served), ``None`` neither. A base a row pins by name (a
    custom or mirrored image) is taken as the row says."""
    if img.status == "published" or img.custom or pinned:
        return 2
    if matrix.rebuildable(img, platform):
        return 1
    return None


def _os_rank(name: str) -> tuple[Version]:
    m = re.search(r"([0-9]+(?:\.[0-9]+)*)$", name)
    return (Version(m.group(1)),) if m else (Version("0"),)


def _pick_image(
    matrix: Matrix, build: FrameworkBuild, flavour: str | None, python: Version | None, platform: str = DEFAULT_PLATFORM,
    cuda_patch: Version | None = None,
) -> tuple[BaseImage, Version, str]:
    """Choose (image, python, strategy) for a build; ranking documented in docs/design.md."""
    needed = matrix.flavour_for(build)
    if flavour is not None:
        allowed = _flavours_for(needed)
        if flavour not in allowed:
            raise ResolveError(
                f"flavour {flavour!r} is too small for {build.name}: it needs {needed}",
                fix=f"use one of {', '.join(allowed)}",
            )
        wanted = [flavour]
    else:
        wanted = [needed]
    candidates: list[BaseImage] = []
    index = _index(matrix)
    if build.base_image:
        candidates = list(index.images_by_ref.get(build.base_image, ()))
        if not candidates:
            raise ResolveError(
                f"{build.name} pins base image {build.base_image!r}, which no [[image]] row describes",
                fix="add an [[image]] row for it to your matrix file (custom = true for a private base)",
            )
        candidates = [i for i in candidates if platform in i.platforms]
    else:
        for img in index.images_by_cuda.get(build.cuda, ()):
            if img.custom:
                continue
            if build.cuda is None:
                if img.cuda is not None:
                    continue
            elif img.cuda != build.cuda or img.flavour not in wanted:
                continue
            if build.os and img.os not in build.os:
                continue
            if platform not in img.platforms:
                continue
            if cuda_patch is not None and img.cuda_patch != cuda_patch:
                continue  # --cuda asked for one update of the release
            if build.system_cudnn and img.flavour.startswith("cudnn") and not cudnn_fits(img.cudnn, build.cudnn):
                continue  # the build loads cuDNN from the image: the majors must agree
            candidates.append(img)
    best: tuple[tuple[int, bool, tuple[Version], Version, str], BaseImage, Version, str] | None = None
    unavailable: list[BaseImage] = []
    no_python: list[BaseImage] = []  # usable bases whose OS cannot give the Python
    for img in candidates:
        rank = _availability(matrix, img, platform, pinned=bool(build.base_image))
        if rank is None:
            unavailable.append(img)  # neither served nor rebuildable: a build on it could never start
            continue
        choice = _python_choice(build, index.oses.get(img.os), python)
        if choice is None:
            no_python.append(img)
            continue
        py, strategy = choice
        key = (
            rank,
            strategy == "apt",
            _os_rank(img.os),
            img.cuda_patch or Version("0"),
            img.ref,
        )
        if best is None or key > best[0]:
            best = (key, img, py, strategy)
    if best is None:
        if python is not None and python not in build.python:
            raise ResolveError(
                f"{build.name} does not support Python {python}",
                fix="choose one of " + ", ".join(str(p) for p in build.python),
            )
        if no_python:
            oses = sorted({i.os for i in no_python})
            packaged = sorted({p for o in oses if index.oses.get(o) for p in index.oses[o].python_apt})
            usable = [p for p in build.python if p in packaged or p >= _STANDALONE_FROM]
            asked = f"Python {python}" if python is not None else "a Python of its"
            raise ResolveError(
                f"no base image of {build.name} can give {asked}: {', '.join(oses)} "
                f"package{'s' if len(oses) == 1 else ''} {', '.join(str(p) for p in packaged) or 'none'} and "
                f"python-build-standalone starts at {MIN_STANDALONE_PYTHON}",
                fix=(f"choose Python {', '.join(str(p) for p in usable)}" if usable else "choose another release")
                + " or another CUDA variant",
            )
        what = f"CUDA {cuda_patch or build.cuda} {wanted[0]}" if build.cuda else "CPU"
        if build.cuda and build.system_cudnn and build.cudnn and wanted[0].startswith("cudnn"):
            what += f" (cuDNN {build.cudnn.split('.')[0]})"
        on = "" if platform == DEFAULT_PLATFORM else f" on {platform}"
        if unavailable:
            raise ResolveError(
                f"no {what} base image{on} in the matrix for {build.name} is served or can be rebuilt from NVIDIA's "
                f"recipe ({', '.join(i.ref for i in unavailable[:3])} {'is' if len(unavailable) == 1 else 'are'} "
                "no longer served and no [[recipe]] rebuilds them)",
                fix="add a [[recipe]] or an [[image]] row (a mirror, a custom base) with --matrix, or pick another "
                    "CUDA variant",
            )
        raise ResolveError(
            f"no {what} base image{on} in the matrix for {build.name}",
            fix="add an [[image]] row (a mirror or a custom base) with --matrix, or pick another CUDA variant",
        )
    _, img, py, strategy = best
    return img, py, strategy


def _select_builds(matrix: Matrix, q: StackQuery) -> list[FrameworkBuild]:
    rows = _index(matrix).select(q.framework, q.version)
    # An exact release wins over longer ones it is a prefix of: "0.9.0" is 0.9.0, not 0.9.0.1.
    asked = tuple(int(p) for p in q.version.split("."))
    exact = [b for b in rows if b.version.release == asked]
    rows = exact or rows
    if q.cpu:
        rows = [b for b in rows if b.cuda is None]
    elif q.cuda is not None:
        rows = [b for b in rows if b.cuda is not None and version_matches(q.cuda, b.cuda)]
    return rows


def _platform(q: StackQuery, platform: str | None) -> str:
    """The platform a query asks for: its name's part, ``--platform``, else linux/amd64."""
    if q.platform and platform and q.platform != platform:
        raise ResolveError(
            f"stack name {q.text!r} names platform {q.platform}, --platform says {platform}",
            fix="give the platform once (in the name or with --platform)",
        )
    return q.platform or platform or DEFAULT_PLATFORM


def _on_platform(rows: list[FrameworkBuild], platform: str, q: StackQuery) -> list[FrameworkBuild]:
    """The rows that have wheels for ``platform``; a one-line error naming what they have if none."""
    kept = [b for b in rows if platform in b.platforms]
    if kept:
        return kept
    newest = max(b.version for b in rows)
    have = sorted({p for b in rows for p in b.platforms})
    target = "CPU" if q.cpu else f"CUDA {q.cuda}" if q.cuda else "any"
    raise ResolveError(
        f"{q.framework} {q.version} has no {platform} build in the matrix ({target} builds up to {newest} "
        f"exist for {', '.join(have)} only)",
        fix=f"build it for {' or '.join(have)}, or pick a release with {platform} wheels (envman matrix ls --platform {platform})",
    )


def resolve(matrix: Matrix, name: str, platform: str | None = None, cuda_patch: Version | None = None) -> Stack:
    """Resolve a stack name to a Stack; ``ResolveError`` lists the closest valid names.

    ``platform`` (``linux/arm64``...) is the ``--platform`` option; a platform part in ``name``
    must agree with it. ``cuda_patch`` (``--cuda 12.4.1``) takes a base image of that update of the
    stack's CUDA release, whose toolkit driver the stack then states. A stack that is not exactly
    what the shipped matrix gives carries its :func:`tag_key`."""
    stack = _resolve(matrix, name, platform, cuda_patch)
    key = tag_key(matrix, stack)
    return replace(stack, tag_key=key) if key else stack


#: The shipped matrix, loaded once per process when a user's matrix is loaded too.
_SHIPPED: dict[tuple[str, ...], Matrix] = {}


def _shipped_matrix() -> Matrix:
    from envman.matrix.load import load_files
    from envman.paths import matrices_dir

    files = tuple(str(f) for f in sorted(matrices_dir().glob("*.toml")))
    if files not in _SHIPPED:
        _SHIPPED[files] = load_files(files)
    return _SHIPPED[files]


def _content(matrix: Matrix, stack: Stack) -> str:
    """What decides a stack's image in ``matrix``: the stack, and the recipes of its base."""
    tag = nvidia_tag(stack)
    chain = matrix.recipe_chain(tag, stack.platform) if tag else None
    return json.dumps(stack.to_json(), sort_keys=True) + "\0" + repr(chain)


def tag_key(matrix: Matrix, stack: Stack) -> str:
    """``""`` when ``stack`` (and its base's recipes) is exactly what envman's shipped matrix gives
    for its name; else the first 12 hex digits of the sha256 of that content. A row of a user's
    matrix that adds a stack or changes one (a shadowed row, another base, OS or recipe) is named
    by its content: two users' rows of one name but different content never share a stable tag."""
    import hashlib

    from envman.paths import matrices_dir

    shipped_dir = os.path.realpath(matrices_dir())
    shipped = [os.path.dirname(os.path.realpath(f)) == shipped_dir for f in matrix.files]
    if not any(shipped) or all(shipped):
        return ""  # the shipped matrix alone, or one that stands in for it (a test's, an old CI matrix)
    content = _content(matrix, stack)
    try:
        plain = _shipped_matrix()
        if _content(plain, _resolve(plain, stack.name, stack.platform)) == content:
            return ""
    except EnvmanError:
        pass  # the shipped matrix has no such stack: the user's own
    return hashlib.sha256(content.encode()).hexdigest()[:12]


def _resolve(matrix: Matrix, name: str, platform: str | None = None, cuda_patch: Version | None = None) -> Stack:
    try:
        q = parse_name(name)
    except ResolveError as exc:
        fixes, seen = [], set()
        for cand in spelling_fixes(name):
            try:
                canonical = _resolve(matrix, cand, platform).name
            except EnvmanError:
                continue
            if canonical not in seen:  # torch- and pytorch- are one suggestion
                seen.add(canonical)
                fixes.append(f"{cand} ({canonical})")
        if not fixes:
            raise
        raise ResolveError(exc.what, where=exc.where, fix=f"did you mean {' or '.join(fixes)}? ({exc.fix})") from None
    rows = _select_builds(matrix, q)
    if not rows:
        raise ResolveError(_no_match(matrix, q), fix=_suggest(matrix, q))
    plat = _platform(q, platform)
    rows = _on_platform(rows, plat, q)
    newest = max(b.version for b in rows)
    rows = [b for b in rows if b.version == newest]
    others: list[FrameworkBuild] = []  # the release's other GPU builds, newest CUDA first
    if q.cuda is None and not q.cpu:
        defaults = [b for b in rows if b.default]
        gpu_rows = [b for b in rows if b.cuda is not None]
        others = sorted((b for b in gpu_rows if b not in defaults), key=lambda b: (b.cuda, b.variant), reverse=True)
        rows = defaults or gpu_rows or rows
    rows.sort(key=lambda b: (b.cuda or Version("0"), b.variant))
    build = rows[-1]
    freethreaded = bool(q.python and q.python.endswith("t"))
    py = Version(q.python.rstrip("t")) if q.python else None
    if freethreaded and py not in build.python_freethreaded:
        have = ", ".join(f"{p}t" for p in build.python_freethreaded)
        raise ResolveError(
            f"{build.name} has no free-threaded Python {py}t wheels" + (f" (it has {have})" if have else ""),
            fix=f"choose py{build.python_freethreaded[-1]}t" if have else f"drop the t (py{py}) for the GIL build",
        )
    if cuda_patch is not None and (build.cuda is None or (build.cuda.major, build.cuda.minor) != (cuda_patch.major, cuda_patch.minor)):
        raise ResolveError(f"{build.name} is {'a CPU build' if build.cuda is None else f'CUDA {build.cuda}'}, not CUDA {cuda_patch}",
                           fix=f"name a stack of CUDA {cuda_patch.major}.{cuda_patch.minor} (e.g. -cuda{cuda_patch.major}.{cuda_patch.minor}) or drop --cuda")
    default: FrameworkBuild | None = None  # the build asked for, when another one gives the Python
    try:
        img, python, strategy = _pick_image(matrix, build, q.flavour, py, plat, cuda_patch)
    except ResolveError:
        # a Python named without a CUDA: another CUDA build of the release whose base gives it
        # (torch-0.4.1-py3.6: CUDA 9.0's base is ubuntu16.04, which has no Python 3.6)
        other = _python_elsewhere(matrix, others, q.flavour, py, plat) if py is not None and cuda_patch is None else None
        if other is None:
            raise
        default, (build, img, python, strategy) = build, other
    stack = make_stack(matrix, build, img, python, strategy, plat)
    if default is not None:
        stack = replace(stack, notes=stack.notes + (f"Python {py}: the CUDA {stack.cuda} build, as the default "
                                                    f"{default.name} has no base image with Python {py}",))
    return _freethreaded(stack) if freethreaded else stack


def _python_elsewhere(matrix: Matrix, builds: list[FrameworkBuild], flavour: str | None, py: Version,
                      platform: str) -> tuple[FrameworkBuild, BaseImage, Version, str] | None:
    """The first of ``builds`` with a base image that gives Python ``py``, with that image."""
    for b in builds:
        try:
            return (b, *_pick_image(matrix, b, flavour, py, platform, None))
        except ResolveError:
            continue
    return None


def _freethreaded(stack: Stack) -> Stack:
    """``stack`` on the free-threaded build of its Python: python-build-standalone's, which uv
    installs (no distribution here packages a free-threaded python3.X with its venv module)."""
    tail = f"-py{stack.python}"
    name = stack.name.replace(tail, tail + "t", 1)
    note = (f"free-threaded CPython {stack.python}t (PEP 703), python-build-standalone installed by uv; "
            "the row lists its wheels for it (python_freethreaded)")
    return replace(stack, name=name, freethreaded=True, python_strategy="standalone", notes=stack.notes + (note,))


def make_stack(
    matrix: Matrix, build: FrameworkBuild, img: BaseImage, python: Version, strategy: str,
    platform: str = DEFAULT_PLATFORM,
) -> Stack:
    cuda_rel = _index(matrix).cuda.get((build.cuda.major, build.cuda.minor)) if build.cuda else None
    notes = []
    if build.note:
        notes.append(build.note)
    if img.status != "published" and not img.custom and matrix.rebuildable(img, platform):
        gone = "was deleted from Docker Hub (end of life)" if img.status == "deleted" else "is not confirmed served"
        notes.append(f"base image {img.ref} {gone}: envman rebuilds it from NVIDIA's recipe (--base pull: "
                     "pull it, e.g. through --registry-mirror)")
    if build.arch_status != "confirmed":
        notes.append(f"architecture list is {build.arch_status} (see the row's note and sources)")
    if platform != DEFAULT_PLATFORM:
        if build.platform_note:
            notes.append(build.platform_note)
        for what, st in ((f"{build.name} wheels", build.platform_status), (f"base image {img.ref}", img.platform_status)):
            if st != "confirmed":
                notes.append(f"{platform} support of {what} is {st}")
    if cuda_rel and cuda_rel.minor_compat_driver and cuda_rel.minor_compat_status != "confirmed":
        notes.append(f"minor-version-compatibility floor {cuda_rel.minor_compat_driver} is {cuda_rel.minor_compat_status}")
    cuda = f"{build.cuda.major}.{build.cuda.minor}" if build.cuda else None
    flavour_default = matrix.flavour_for(build)
    tail = f"cuda{cuda}" if cuda else "cpu"
    name = f"{build.framework}-{build.version}-{tail}-py{python}"
    if img.flavour != flavour_default and cuda:
        name += f"-{img.flavour}"
    name += PLATFORM_SUFFIX[platform]
    sources = build.source + img.source + (cuda_rel.source if cuda_rel else ())
    if platform != DEFAULT_PLATFORM:  # amd64 stacks (their labels, render hashes) stay as before platforms
        sources += build.platform_source + img.platform_source
    sources = tuple(dict.fromkeys(sources))
    status = "confirmed" if all(s == "confirmed" for s in (build.status, cuda_rel.status if cuda_rel else "confirmed")) else "partially confirmed"
    return Stack(
        name=name,
        row=build.name,
        framework=build.framework,
        framework_version=str(build.version),
        variant=build.variant,
        cuda=cuda,
        cudnn=build.cudnn or (img.cudnn if img.cudnn else None),
        python=str(python),
        python_strategy=strategy,
        os=img.os,
        base_image=img.ref,
        base_image_status=img.status,
        base_image_custom=img.custom,
        flavour=img.flavour,
        min_driver=str(cuda_rel.min_driver_for(img.cuda_patch)) if cuda_rel else None,
        toolkit_driver=str(cuda_rel.toolkit_driver_for(img.cuda_patch)) if cuda_rel else None,
        minor_compat=bool(cuda_rel and cuda_rel.minor_compat_driver),
        minor_compat_status=(cuda_rel.minor_compat_status if cuda_rel and cuda_rel.minor_compat_driver else None),
        sass_archs=tuple(str(a) for a in build.archs(platform)[0]),
        ptx_archs=tuple(str(a) for a in build.archs(platform)[1]),
        arch_status=build.arch_status,
        packages=build.packages_for(platform),
        index_url=build.index_url,
        extra_index_url=build.extra_index_url,
        find_links=build.find_links,
        sources=sources,
        status=status,
        notes=tuple(notes),
        platform=platform,
        cuda_libs=stack_cuda_libs(build, str(python), platform),
    )


def stack_cuda_libs(build: FrameworkBuild, python: str, platform: str) -> tuple[str, ...]:
    """The row's CUDA libraries for ``python``, each with the sha256 of its wheels where the row has
    them (``name==version --hash=sha256:...``, a line of a pip requirements file). Read from the
    Linux x86_64 wheel's metadata, they say nothing of another platform's wheels, whose pins may
    differ: those stacks get none."""
    if platform != DEFAULT_PLATFORM or not build.cuda_libs:
        return ()
    from envman.matrix.wheels import cuda_libraries, requirement_extras

    pins = cuda_libraries(build.cuda_libs, requirement_extras(build.packages), python)
    hashes = dict(build.cuda_libs_sha256)
    if not hashes:
        return pins
    return tuple(pin + "".join(f" --hash=sha256:{h}" for h in hashes[pin.split("==")[0]]) for pin in pins)


def stack_pythons(matrix: Matrix, build: FrameworkBuild, platform: str = DEFAULT_PLATFORM) -> tuple[Version, ...]:
    """The Pythons of ``build`` (its wheels' ``python``) that one of its base images can give
    on ``platform``: the OS packages it, or python-build-standalone has it. The stacks of this row
    are exactly these; its other wheels' Pythons resolve to nothing."""
    index = _index(matrix)
    key = (build.name, platform)
    if key not in index.pythons:
        have = []
        for p in build.python:
            try:
                _pick_image(matrix, build, None, p, platform)
            except ResolveError:
                continue
            have.append(p)
        index.pythons[key] = tuple(have)
    return index.pythons[key]


def resolve_row(matrix: Matrix, build: FrameworkBuild, platform: str = DEFAULT_PLATFORM) -> Stack:
    """The default stack of one matrix row on ``platform`` (used by ``--all`` commands and tests)."""
    if platform not in build.platforms:
        raise ResolveError(
            f"{build.name} has no {platform} build (it has {', '.join(build.platforms)})",
            fix="choose a row with wheels for that platform (envman matrix ls --platform ...)",
        )

    img, python, strategy = _pick_image(matrix, build, None, None, platform)
    stack = make_stack(matrix, build, img, python, strategy, platform)
    key = tag_key(matrix, stack)
    return replace(stack, tag_key=key) if key else stack


# --- errors that help ------------------------------------------------------------------------


def _no_match(matrix: Matrix, q: StackQuery) -> str:
    if q.cuda:
        for v, why in matrix.never_released:
            if version_matches(v, Version(q.cuda)) and Version(q.cuda).release[:2] == Version(v).release[:2]:
                return f"CUDA {v} was never released: {why}"
    fw_rows = [b for b in matrix.builds if b.framework == q.framework]
    if not any(version_matches(q.version, b.version) for b in fw_rows):
        known = sorted({b.version for b in fw_rows})
        span = f" (the matrix has {known[0]} to {known[-1]})" if known else ""
        return f"no {q.framework} release matches {q.version!r}{span}"
    target = "CPU build" if q.cpu else f"CUDA {q.cuda} build"
    return f"{q.framework} {q.version} has no {target} in the matrix"


def _suggest(matrix: Matrix, q: StackQuery, n: int = 5) -> str:
    names = sorted({b.name for b in matrix.builds})
    same = [b for b in matrix.builds if b.framework == q.framework and version_matches(q.version, b.version)]
    fw = [b for b in matrix.builds if b.framework == q.framework]
    if not same and fw and Version(q.version) > max(b.version for b in fw):
        newest = max(b.version for b in fw)  # a release newer than the matrix: offer the newest
        pool = [b for b in fw if b.version == newest]
        want = Version(q.cuda) if q.cuda else None
        fits = [b for b in pool if (b.cuda is None) == q.cpu
                and (want is None or b.cuda is None or b.cuda.major == want.major)]
        # a name that resolves: the asked CUDA where the newest release has a build of it, else its
        # major; the CPU build only where there is one
        cuda = None
        if want is not None and fits:
            cuda = str(want) if any(b.cuda is not None and version_matches(str(want), b.cuda) for b in fits) else str(want.major)
        short = f"{q.framework}-{newest}" + ("-cpu" if q.cpu and fits else f"-cuda{cuda}" if cuda else "")
        return (f"the newest {q.framework} release in the matrix is {newest}: {short} ("
                + ", ".join(sorted(b.name for b in (fits or pool))[:n])
                + "); newer releases: envman matrix update")
    if same:
        newest = max(b.version for b in same)
        close = sorted({b.name for b in same if b.version == newest})
    else:
        cpu = "cpu" if q.cpu else f"cuda{q.cuda}" if q.cuda else ""
        close = difflib.get_close_matches(f"{q.framework}-{q.version}-{cpu}".rstrip("-"), names, n=n, cutoff=0.5)
    if not close:
        close = [n_ for n_ in names if n_.startswith(q.framework + "-")][-n:]
    if not close:
        return f"the matrix has no {q.framework} builds (all: envman matrix ls; add rows with --matrix FILE)"
    return "closest valid names: " + ", ".join(close[:n]) + " (all: envman matrix ls)"
