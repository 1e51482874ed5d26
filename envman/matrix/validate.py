"""Cross-consistency of a loaded matrix (``envman matrix validate``).

Schema errors are caught at load time; this module checks the relations between rows: every
framework build points at a CUDA release that exists and has a base image, every nvidia/cuda tag
follows the naming rules of its era, arch lists are possible for the CUDA release, and so on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from packaging.utils import canonicalize_name
from packaging.version import Version

from envman.matrix.model import DEFAULT_PLATFORMS, BaseImage, cudnn_fits, CudaRelease, FrameworkBuild, Matrix

#: How a check reports a problem: ``add(where, what)``.
Add = Callable[[str, str], None]

#: A pinned requirement as the Dockerfile takes it, matched whole (``re.match`` with ``$`` also took
#: a trailing line break, which render refuses): :mod:`envman.render.dockerfile` renders only these.
PINNED_REQUIREMENT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(\[[a-z0-9,_-]+\])?==[A-Za-z0-9.+!_-]+")
#: The row's URLs, checked as render checks them (:func:`envman.config.check_url`).
ROW_URL_KEYS = ("index_url", "extra_index_url", "find_links")


@dataclass(frozen=True)
class Problem:
    where: str
    what: str

    def __str__(self) -> str:
        from envman.errors import clip

        return f"{clip(self.where, 120)}: {clip(self.what)}"


def cudnn_token(cuda: Version, cudnn_major: str | None) -> str | None:
    """The cuDNN token nvidia/cuda tags use for this CUDA release (None: no cuDNN in the tag)."""
    if cuda >= Version("12.4"):
        return "cudnn"
    if cudnn_major is None:
        return None
    return f"cudnn{cudnn_major}"


def expected_tag(img: BaseImage) -> str | None:
    """The tag the naming rules of its era give for an nvidia/cuda image row (None: unknowable,
    as for a cuDNN image whose cuDNN major is missing before tags dropped it)."""
    if img.cuda_patch is None:
        return None
    v = img.cuda_patch
    # X.Y tags up to 11.0, X.Y.Z from 11.1; 11.0 was published both ways (11.0-*, 11.0.3-*), so a
    # row that gives 11.0's full patch version names the X.Y.Z tag.
    legacy = (v.major, v.minor) < (11, 0) or ((v.major, v.minor) == (11, 0) and len(v.release) == 2)
    # A row of the X.Y.Z era that gives only X.Y names no update: the loader takes it from a tag of
    # that release (cuda = "12.9" with 12.9.1-...), so a tag left here names another release.
    version = f"{v.major}.{v.minor}" if legacy else f"{v.major}.{v.minor}." + (str(v.micro) if len(v.release) > 2 else "N")
    flavour = img.flavour.replace("cudnn-", "")
    token = None
    if img.flavour.startswith("cudnn"):
        token = cudnn_token(Version(f"{v.major}.{v.minor}"), img.cudnn)
        if token is None:
            return None
    parts = [version] + ([token] if token else []) + [flavour, img.os]
    return "-".join(parts)


def allowed_cudnn_majors(cuda: Version) -> set[str]:
    """The cuDNN majors NVIDIA shipped in nvidia/cuda images of a CUDA release (its tag lists)."""
    if cuda < Version("9.0"):  # 8.0-cudnn5-*, -cudnn6-*, -cudnn7-*
        return {"5", "6", "7"}
    if cuda < Version("10.1"):
        return {"7"}
    if cuda < Version("11.0"):
        return {"7", "8"}
    if cuda < Version("12.3"):
        return {"8"}
    return {"9"}


def _published_hint(img: BaseImage, published: frozenset[str]) -> str:
    """``: the published tag(s) ...`` for the same CUDA release, flavour and OS, if any."""
    _, _, rest = img.tag.partition("-")
    v = img.cuda_patch
    prefix = f"{v.major}.{v.minor}" if v else ""
    same = sorted(
        (t for t in published if t.endswith("-" + rest) and (t.split("-")[0] + ".").startswith(prefix + ".")),
        key=lambda t: Version(t.split("-")[0]),
    )
    return f" (published for this release, flavour and OS: {', '.join(same)})" if same else ""


def _check_cudnn(matrix: Matrix, b: FrameworkBuild, rel: CudaRelease, add: Add) -> None:
    """A build that takes cuDNN from the base image needs an image shipping that cuDNN major, and
    (where it names one) at least that minor."""
    where = f"{b.framework} {b.version} {b.variant}"
    if b.cudnn is None:
        add(where, "needs system cuDNN (system_cudnn) but does not say which (cudnn)")
        return
    major, _, rest = b.cudnn.partition(".")
    pinned = [i for i in matrix.images if b.base_image and i.ref == b.base_image]
    for img in pinned:
        if not cudnn_fits(img.cudnn, b.cudnn):
            shipped = f"cuDNN {img.cudnn}" if img.cudnn else "no cuDNN"
            add(where, f"needs system cuDNN {b.cudnn}, but its base image {img.ref} ships {shipped}")
    images = [i for i in matrix.images if not i.custom and i.cuda == b.cuda and i.flavour.startswith("cudnn")]
    if b.base_image is None and images and not any(cudnn_fits(i.cudnn, b.cudnn) for i in images):
        shipped = ", ".join(sorted({f"cuDNN {i.cudnn}" for i in images}))
        add(where, f"needs system cuDNN {b.cudnn}, but the cudnn images of CUDA {b.cuda} ship {shipped}")
        return
    minor = rest.split(".")[0]
    same_major = [v for v in rel.cudnn if v.split(".")[0] == major]
    if minor.isascii() and minor.isdigit() and same_major:
        newest = max(same_major, key=lambda v: Version(v))
        if Version(newest).release[:2] < (int(major), int(minor)):
            add(where, f"needs system cuDNN {b.cudnn}, but the images of CUDA {rel.key} ship cuDNN {newest}")


def _requirement_name(req: str) -> str:
    """``torchvision==0.16.0`` / ``jax[cuda12]==0.4.30`` → the PEP 503 name (``torchvision``, ``jax``)."""
    return canonicalize_name(re.split(r"[\[=<>~!]", req, maxsplit=1)[0])


def _check_wheel_python(b: FrameworkBuild, add: Add) -> None:
    """Every Python a row claims must have a wheel of every package it installs (where the row
    records the packages' wheel Pythons; a row that records some must record all)."""
    if not b.wheel_python:
        return
    where = f"{b.framework} {b.version} {b.variant}"
    known = dict(b.wheel_python)
    if not b.wheel_python_source:
        add(where, "wheel_python needs a wheel_python_source")
    for req in dict.fromkeys((*b.packages, *(b.packages_arm64 or ()))):
        name = _requirement_name(req)
        if name not in known:
            add(where, f"wheel_python has no entry for {name}, which the row installs")
            continue
        if not known[name]:  # a pure-Python wheel installs on every Python
            continue
        missing = [p for p in b.python if p not in known[name]]
        if missing:
            have = ", ".join(str(p) for p in known[name])
            add(where, f"claims Python {', '.join(str(p) for p in missing)}, but {req} has no wheel for it (wheels: {have})")
    extra = sorted(set(known) - {_requirement_name(r) for r in (*b.packages, *(b.packages_arm64 or ()))})
    if extra:
        add(where, f"wheel_python lists {', '.join(extra)}, which the row does not install")


def _check_updates(r: CudaRelease, add: Add) -> None:
    """A release's updates are its own (same major.minor), in ascending order, each needing no
    older a driver than the GA and the update before it."""
    where = f"cuda {r.key}"
    prev_v, prev_d = None, r.toolkit_driver
    for v, d in r.updates:
        if (v.major, v.minor) != (r.version.major, r.version.minor):
            add(where, f"update {v} is not a release of CUDA {r.key}")
        if prev_v is not None and v <= prev_v:
            add(where, f"update {v} is listed after {prev_v}: list updates once each, in ascending order")
        if d < prev_d:
            add(where, f"update {v} needs driver {d}, older than the {prev_d} of the release before it")
        prev_v, prev_d = v, max(d, prev_d)


def _check_renderable_names(b: FrameworkBuild, where: str, add: Add) -> None:
    """What validation accepts must resolve and render (:func:`envman.stack.names.row_name_problems`;
    the loader refuses a file with such a row, so this catches rows made in code)."""
    from envman.stack.names import row_name_problems

    for problem in row_name_problems(b.name, b.variant):
        add(where, problem)


def _check_history(matrix: Matrix, add: Add) -> None:
    """Every tag history names a published tag, dates it no later than today, and every published
    tag of a repository that has histories has one (published when, served now or deleted)."""
    import datetime

    today = datetime.date.today().isoformat()
    for h in matrix.history:
        where = f"tag {h.repository}:{h.tag}"
        published = matrix.published_tags(h.repository)
        if published is None or h.tag not in published:
            add(where, "has a history but is not in the repository's published tags (kind = \"tags\")")
        if h.published is not None and h.published > today:
            add(where, f"published {h.published} lies in the future")
    for repo in sorted({h.repository for h in matrix.history}):
        missing = sorted((matrix.published_tags(repo) or frozenset()) - {h.tag for h in matrix.history if h.repository == repo})
        if missing:
            shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            add(f"tags {repo}", f"{len(missing)} published tags have no history (published, served): {shown}")


def _check_recipes(matrix: Matrix, add: Add) -> None:
    """Base recipes: each rebuilds a tag NVIDIA published, on a chain that reaches the plain OS
    image; its packages agree with the image row's CUDA and cuDNN; every row whose base is not
    served can rebuild it (the resolver never picks a base that is neither)."""
    from envman.errors import EnvmanError
    from envman.stack.resolve import resolve_row

    published = matrix.published_tags("nvidia/cuda")
    images = {(i.tag, p): i for i in matrix.images if i.repository == "nvidia/cuda" for p in i.platforms}
    for r in matrix.recipes:
        where = f"recipe nvidia/cuda:{r.tag} ({r.platform})"
        if published is not None and r.tag not in published:
            add(where, "rebuilds a tag NVIDIA never published (kind = \"tags\")")
        chain = matrix.recipe_chain(r.tag, r.platform)
        if chain is None:
            add(where, f"its parent chain is broken: no recipe for {r.parent!r} on {r.platform}, or the parents loop")
            continue
        img = images.get((r.tag, r.platform))
        if img is None or img.cuda is None:
            continue
        env = dict(kv for link in chain for kv in link.env)
        full = env.get("CUDA_VERSION", "")
        if not full.startswith(f"{img.cuda.major}.{img.cuda.minor}."):
            add(where, f"CUDA_VERSION {full!r} is not a CUDA {img.cuda.major}.{img.cuda.minor} release (the image row says {img.cuda_patch})")
        dashed = f"-{img.cuda.major}-{img.cuda.minor}"
        cudart = [p for link in chain for p in link.packages if p.startswith("cuda-cudart" + dashed)]
        if not cudart:
            add(where, f"installs no cuda-cudart{dashed} package: not a CUDA {img.cuda.major}.{img.cuda.minor} base")
        cudnn = [p for link in chain for p in link.packages if re.match(r"libcudnn[0-9]", p)]
        if img.cudnn is not None:
            want = f"libcudnn{img.cudnn}"
            if not any(p.split("=")[0] in (want, f"{want}-dev") and f"+cuda{img.cuda.major}.{img.cuda.minor}" in p
                       for p in cudnn):
                add(where, f"installs no {want}=...+cuda{img.cuda.major}.{img.cuda.minor}: not the cuDNN {img.cudnn} its tag names")
        elif cudnn:
            add(where, f"installs {cudnn[0]} but its tag names no cuDNN")
        for d in r.downloads:
            if not any(p.split("=")[0] == d.file.split("_")[0] for link in chain for p in link.packages):
                add(where, f"downloads {d.file} but installs no package of that name with apt (the pin it serves)")
    for b in matrix.builds:
        for plat in b.platforms:
            try:
                resolve_row(matrix, b, plat)
            except EnvmanError as exc:
                if "can be rebuilt from NVIDIA's recipe" in exc.what:
                    add(f"{b.framework} {b.version} {b.variant}", f"on {plat}: {exc.what}")


def validate(matrix: Matrix) -> list[Problem]:
    problems: list[Problem] = []

    def add(where: str, what: str) -> None:
        problems.append(Problem(where, what))

    cuda_keys = {r.key for r in matrix.cuda}
    never = {v for v, _ in matrix.never_released}
    for r in matrix.cuda:
        if r.key in never:
            add(f"cuda {r.key}", "listed both as a release and as never released")
        if r.version >= Version("11.0") and r.minor_compat_driver is None:
            add(f"cuda {r.key}", "CUDA >= 11 has minor-version compatibility: minor_compat_driver is missing")
        if r.version < Version("11.0") and r.minor_compat_driver is not None:
            add(f"cuda {r.key}", "CUDA < 11 has no minor-version compatibility: remove minor_compat_driver")
        if not r.sm:
            add(f"cuda {r.key}", "sm (compute capabilities nvcc targets) is empty")
        _check_updates(r, add)
    prev = None
    for r in matrix.cuda:  # sorted by version
        if prev and r.toolkit_driver < prev.toolkit_driver:
            add(f"cuda {r.key}", f"toolkit_driver {r.toolkit_driver} is older than CUDA {prev.key}'s {prev.toolkit_driver}")
        prev = r

    os_names = {o.name for o in matrix.oses}
    for o in matrix.oses:
        if o.python_default not in o.python_apt:
            add(f"os {o.name}", "python_default must be listed in python_apt")

    seen_refs: set[str] = set()
    for img in matrix.images:
        where = f"image {img.ref}"
        if img.ref in seen_refs:
            add(where, "duplicate image row")
        seen_refs.add(img.ref)
        if img.os not in os_names:
            add(where, f"os {img.os!r} is not in the os matrix")
        if img.platforms != DEFAULT_PLATFORMS and not img.custom and not img.platform_source:
            add(where, "platforms beyond linux/amd64 need a platform_source")
        if img.custom:
            continue
        if img.cuda is None:
            continue
        if f"{img.cuda.major}.{img.cuda.minor}" not in cuda_keys:
            add(where, f"CUDA {img.cuda} is not a release in the matrix")
        if img.repository != "nvidia/cuda":
            add(where, "non-custom CUDA images must come from nvidia/cuda (mark a private base custom = true)")
        want = expected_tag(img)
        if want is not None and want != img.tag:
            add(where, f"tag does not follow the naming rules of its era: expected {want!r}")
        published = matrix.published_tags(img.repository)
        if published is not None and img.tag not in published:
            add(where, "NVIDIA never published this tag" + _published_hint(img, published))
        hist = matrix.tag_history(img.repository, img.tag)
        if hist is not None and isinstance(hist.served, bool):
            want_status = "published" if hist.served else "deleted"
            if img.status != want_status:
                said = "still serves" if hist.served else "no longer serves"
                add(where, f"status is {img.status!r}, but the tag history says the registry {said} it: "
                           f"set status = {want_status!r}")
        if img.flavour.startswith("cudnn"):
            if img.cudnn is None:
                add(where, "a cudnn flavour needs cudnn (the major version)")
            elif img.cudnn not in allowed_cudnn_majors(img.cuda):
                add(where, f"cuDNN {img.cudnn} was not shipped in nvidia/cuda images of CUDA {img.cuda}")
        elif img.cudnn is not None:
            add(where, "cudnn is set but the flavour has no cuDNN")

    _check_history(matrix, add)
    _check_recipes(matrix, add)

    builds_seen: set[tuple[str, Version, str]] = set()
    for b in matrix.builds:
        where = f"{b.framework} {b.version} {b.variant}"
        key = (b.framework, b.version, b.variant)
        if key in builds_seen:
            add(where, "duplicate build row")
        builds_seen.add(key)
        _check_renderable_names(b, where, add)
        if b.platforms != DEFAULT_PLATFORMS and not b.platform_source:
            add(where, "platforms beyond linux/amd64 need a platform_source")
        for req in (*b.packages, *(b.packages_arm64 or ())):
            if not PINNED_REQUIREMENT_RE.fullmatch(req):
                add(where, f"package {req!r} is not a pinned requirement (name==version)")
        if b.packages_arm64 is not None and "linux/arm64" not in b.platforms:
            add(where, "packages_arm64 given but linux/arm64 is not in platforms")
        if b.packages_arm64 is not None and not b.packages_arm64:
            add(where, "packages_arm64 is empty: omit it to install packages on linux/arm64 too")
        for url_key in ROW_URL_KEYS:
            url = getattr(b, url_key)
            if url is not None:
                from envman.config import Invalid, check_url

                try:
                    check_url(url, what=url_key)
                except Invalid as exc:
                    add(where, exc.what)
        _check_wheel_python(b, add)
        if b.cuda_libs and not b.cuda_libs_source:
            add(where, "cuda_libs needs a cuda_libs_source (the wheel whose metadata pins them)")
        if b.cuda_libs and b.cuda is None:
            add(where, "a CPU row has cuda_libs")
        for p in b.python_freethreaded:
            if p not in b.python:
                add(where, f"claims free-threaded Python {p}t but not Python {p} (python)")
            if p < Version("3.13"):
                add(where, f"claims free-threaded Python {p}t, but CPython has free-threaded builds from 3.13 on")
        if b.cuda is None:
            if b.sass or b.ptx:
                add(where, "a CPU build cannot carry GPU architectures")
            if b.system_cuda or b.system_cudnn or b.system_nvcc:
                add(where, "a CPU build cannot need system CUDA/cuDNN")
            continue
        if b.system_nvcc and not b.system_cuda:
            add(where, "needs the CUDA compiler tools of its base image (system_nvcc) but not its CUDA (system_cuda)")
        rel = matrix.cuda_release(b.cuda)
        if rel is None:
            add(where, f"CUDA {b.cuda} is not a release in the matrix")
            continue
        if not b.sass and not b.ptx:
            add(where, "a CUDA build must list its architectures (sass and/or ptx)")
        toolkit_sm = set(rel.sm)
        arm = b.sass_arm64 or ()
        for a in (*b.sass, *arm):
            if toolkit_sm and a not in toolkit_sm:
                add(where, f"SASS {a.sm} cannot be built by CUDA {rel.key} (nvcc targets {', '.join(str(x) for x in rel.sm)})")
        for a in (*b.ptx, *(b.ptx_arm64 or ())):
            if toolkit_sm and a not in toolkit_sm:
                add(where, f"PTX compute_{a.major}{a.minor} cannot be built by CUDA {rel.key}")
        if (b.sass_arm64 is not None or b.ptx_arm64 is not None) and "linux/arm64" not in b.platforms:
            add(where, "sass_arm64/ptx_arm64 given but linux/arm64 is not in platforms")
        for os_name in b.os:
            if os_name not in os_names:
                add(where, f"os {os_name!r} is not in the os matrix")
        if b.system_cudnn:
            _check_cudnn(matrix, b, rel, add)
        if b.base_image is None:
            need = matrix.flavour_for(b)
            images = [i for i in matrix.images if i.cuda == b.cuda and not i.custom and i.flavour == need]
            if not images:
                add(where, f"no {need} base image for CUDA {b.cuda} in the image matrix")
            for plat in b.platforms:
                if images and not any(plat in i.platforms for i in images):
                    add(where, f"no {need} base image for CUDA {b.cuda} on {plat} (the row lists {plat})")
    for fw in sorted({b.framework for b in matrix.builds}):
        for v in sorted({b.version for b in matrix.builds if b.framework == fw}):
            defaults = [b for b in matrix.builds if b.framework == fw and b.version == v and b.default]
            if len(defaults) > 1:
                add(f"{fw} {v}", "more than one variant marked default")

    ids: set[str] = set()
    for g in matrix.gpus:
        if g.id in ids:
            add(f"gpu {g.id}", "duplicate id")
        ids.add(g.id)
    _check_gpu_names(matrix, add)
    _check_ngc(matrix, add)
    return problems


def _check_ngc(matrix: Matrix, add: Add) -> None:
    """NGC releases: each tag names one release (no two rows claim it), a CUDA the matrix knows,
    and a row marked confirmed gives every figure of NVIDIA's contents list: framework version,
    CUDA, cuDNN, Python and Ubuntu (a row a source gives only some of is partially confirmed)."""
    seen: dict[tuple[str, str], str] = {}
    for r in matrix.ngc:
        where = f"ngc {r.repository}:{r.release}"
        for t in r.tags:
            if (r.repository, t) in seen:
                other = seen[(r.repository, t)]
                add(where, f"tag {t} is listed by another row of this release" if other == r.release
                    else f"tag {t} is also release {other}'s")
            seen[(r.repository, t)] = r.release
        if r.cuda is not None and matrix.cuda_release(r.cuda) is None:
            add(where, f"CUDA {r.cuda} is not a release of the matrix's CUDA table")
        missing = [k for k, v in (("framework_version", r.framework_version), ("cuda", r.cuda), ("cudnn", r.cudnn),
                                  ("python", r.python), ("os", r.os)) if v is None]
        if r.status == "confirmed" and missing:
            add(where, f"confirmed, but gives no {', '.join(missing)}: mark it partially confirmed or add the figures")


def _check_gpu_names(matrix: Matrix, add: Add) -> None:
    """Each GPU answers to its own name: no two GPUs have names, ids or aliases that read the same
    once case, spacing and brand words are set aside (``envman.matrix.gpus.tokens``)."""
    from envman.matrix.gpus import tokens

    owner: dict[frozenset[str], str] = {}
    for g in matrix.gpus:
        for n in dict.fromkeys((g.name, g.id, *g.aliases)):
            key = frozenset(tokens(n))
            if not key:
                add(f"gpu {g.id}", f"name {n!r} has no word that identifies a GPU")
            elif owner.setdefault(key, g.id) != g.id:
                add(f"gpu {g.id}", f"{n!r} reads the same as a name of gpu {owner[key]}: one of them can never be found")
