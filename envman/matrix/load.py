"""Load ``matrices/*.toml`` (and the user's own files) into a frozen ``Matrix``.

A file is parsed and checked whole before anything from it is used: a malformed file raises
``MatrixError`` naming the file, the key and what was expected, and nothing is half-loaded.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any, Callable, Iterable

from packaging.version import Version

from envman.errors import MatrixError
from envman.config import MATRIX_ENV, matrix_files, user_matrix_paths
from envman.stack.names import FLAVOURS, row_name_problems
from envman.matrix.recipes import parse_recipes
from envman.matrix.row import (
    Row, each_row, rows_of, to_arch, to_date, to_driver, to_str, to_str_table, to_update, to_version,
)
from envman.matrix.model import (
    FRAMEWORKS,
    IMAGE_STATUSES,
    STATUSES,
    Arch,
    BaseImage,
    BaseRecipe,
    CudaRelease,
    FrameworkBuild,
    Gpu,
    Matrix,
    NgcRelease,
    OsInfo,
    SERVED_UNKNOWN,
    PublishedTags,
    TagHistory,
)


KINDS = ("cuda", "os", "images", "framework", "gpus", "tags", "recipes", "ngc")


def _sorted_or_none(archs: tuple[Arch, ...] | None) -> tuple[Arch, ...] | None:
    return None if archs is None else tuple(sorted(archs))


# --- per-kind parsers -----------------------------------------------------------------------


def _parse_cuda(doc: dict[str, Any], file: str) -> tuple[list[CudaRelease], list[tuple[str, str]]]:
    out = []
    for r in each_row(doc, "release", file):
        out.append(
            CudaRelease(
                version=r.version("version"),
                toolkit_driver=r.get("toolkit_driver", to_driver, "a driver version like '550.54.14'"),
                minor_compat_driver=r.get(
                    "minor_compat_driver", to_driver, "a driver version like '525.60.13'", default=None
                ),
                minor_compat_status=r.str("minor_compat_status", default="confirmed", choices=STATUSES),
                sm=r.list("sm", to_arch, "compute capabilities like '8.6'"),
                cudnn=r.strs("cudnn"),
                **r.provenance(),
                updates=r.list("updates", to_update, 'tables {cuda = "12.4.1", toolkit_driver = "550.54.15"}'),
            )
        )
    never = []
    for r in each_row(doc, "never_released", file):
        version = r.str("version")
        why = r.str("why")
        src = r.sources()
        r.used.add("status")
        never.append((version, f"{why} ({'; '.join(src)})"))
    return out, never


def _parse_os(doc: dict[str, Any], file: str) -> list[OsInfo]:
    return [
        OsInfo(
            name=r.str("name"),
            python_default=r.version("python_default"),
            python_apt=r.list("python_apt", to_version, "Python versions like '3.10'"),
            **r.provenance(),
        )
        for r in each_row(doc, "os", file)
    ]


def _parse_images(doc: dict[str, Any], file: str) -> list[BaseImage]:
    out = []
    for r in each_row(doc, "image", file):
        patch = r.version("cuda", default=None)
        tag = raw_tag if isinstance(raw_tag := r.data.get("tag"), str) else ""
        if patch is not None and len(patch.release) == 2 and r.data.get("repository") == "nvidia/cuda":
            # cuda = "12.9" with the tag 12.9.1-...: the tag names the update (its toolkit driver too)
            named = re.match(rf"{patch.major}\.{patch.minor}\.([0-9]{{1,4}})-", tag)
            if named:
                patch = Version(f"{patch.major}.{patch.minor}.{int(named.group(1))}")
        out.append(
            BaseImage(
                repository=r.str("repository"),
                tag=r.str("tag"),
                cuda=Version(f"{patch.major}.{patch.minor}") if patch else None,
                cuda_patch=patch,
                # a CPU image (no cuda) has no CUDA flavour to name: it is a plain "base"
                flavour=r.str("flavour", choices=FLAVOURS, default=... if patch else "base"),
                cudnn=r.str("cudnn", default=None),
                os=r.str("os"),
                status=r.str("status", choices=IMAGE_STATUSES),
                source=r.sources(),
                custom=r.bool("custom"),
                note=r.note("note"),
                platforms=r.platforms(),
                platform_status=r.str("platform_status", default="confirmed", choices=STATUSES),
                platform_source=r.citations("platform_source"),
            )
        )
    return out


_SHA256_RE = re.compile(r"[0-9a-f]{64}")


def _sha256_table(v: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    from packaging.utils import canonicalize_name

    if not isinstance(v, dict) or not v:
        raise ValueError("not a table")
    out = []
    for name, hashes in v.items():
        if (not isinstance(name, str) or canonicalize_name(name) != name or not isinstance(hashes, list) or not hashes
                or len(set(hashes)) != len(hashes)
                or not all(isinstance(h, str) and _SHA256_RE.fullmatch(h) for h in hashes)):
            raise ValueError(name)
        out.append((name, tuple(sorted(hashes))))
    return tuple(sorted(out))


def _check_cuda_libs(r: Row, lines: tuple[str, ...], sha256: tuple[tuple[str, tuple[str, ...]], ...] = ()) -> None:
    """Each ``cuda_libs`` line pins one CUDA library to exactly one version (its name and version
    reach an install command), once per name and marker; ``cuda_libs_sha256``, when there, has
    hashes for exactly the names pinned (pip's hash-checking mode needs every one)."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    from envman.matrix.wheels import CUDA_LIBRARY_RE, exact_version

    want = "Requires-Dist lines like 'nvidia-cublas-cu12==12.4.5.8; platform_machine == \"x86_64\"'"
    if len(set(lines)) != len(lines):
        raise r.fail("cuda_libs", f"{want}, each once")
    for line in lines:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            raise r.fail("cuda_libs", want) from None
        if req.url or req.extras or exact_version(req.specifier) is None or not CUDA_LIBRARY_RE.fullmatch(canonicalize_name(req.name)):
            raise r.fail("cuda_libs", f"{want} (an exact pin of an nvidia-*, cuda-toolkit, triton or jax-cuda* "
                                       f"distribution, no extras; not {line!r})")
    if sha256:
        names = {canonicalize_name(Requirement(line).name) for line in lines}
        if {n for n, _ in sha256} != names:
            raise r.fail("cuda_libs_sha256", "hashes for exactly the distributions cuda_libs pins, each of them")


def _parse_framework(doc: dict[str, Any], file: str) -> list[FrameworkBuild]:
    top = Row({"framework": doc.get("framework")}, file, "(top level)")
    # A file of one framework names it once at the top; an overlay written by `matrix update`
    # holds several and names it per row.
    framework = top.str("framework", choices=FRAMEWORKS, default=None)
    out = []
    for i, raw in enumerate(rows_of(doc, "build", file)):
        r = Row(raw, file, f"build[{i}]")
        cuda = r.version("cuda", default=None)
        out.append(
            FrameworkBuild(
                framework=r.str("framework", choices=FRAMEWORKS, default=framework or ...),
                version=r.version("version"),
                variant=r.str("variant"),
                cuda=Version(f"{cuda.major}.{cuda.minor}") if cuda else None,
                cudnn=r.str("cudnn", default=None),
                python=tuple(sorted(r.list("python", to_version, "Python versions like '3.10'", default=...))),
                packages=r.strs("packages", default=...),
                index_url=r.str("index_url", default=None),
                extra_index_url=r.str("extra_index_url", default=None),
                find_links=r.str("find_links", default=None),
                system_cuda=r.bool("system_cuda"),
                system_cudnn=r.bool("system_cudnn"),
                sass=tuple(sorted(r.list("sass", to_arch, "compute capabilities like '8.6'"))),
                ptx=tuple(sorted(r.list("ptx", to_arch, "compute capabilities like '8.6'"))),
                arch_status=r.str("arch_status", default="confirmed", choices=STATUSES),
                default=r.bool("default"),
                **r.provenance(),
                os=r.strs("os"),
                base_image=r.str("base_image", default=None),
                platforms=r.platforms(),
                platform_status=r.str("platform_status", default="confirmed", choices=STATUSES),
                platform_source=r.citations("platform_source"),
                platform_note=r.note("platform_note"),
                wheel_python=r.wheel_python(),
                wheel_python_source=r.citations("wheel_python_source"),
                sass_arm64=_sorted_or_none(r.list("sass_arm64", to_arch, "compute capabilities like '8.6'", default=None)),
                ptx_arm64=_sorted_or_none(r.list("ptx_arm64", to_arch, "compute capabilities like '8.6'", default=None)),
                released=r.get("released", to_date, "a release date like '2026-10-28'", default=None),
                python_freethreaded=tuple(sorted(r.list("python_freethreaded", to_version, "Python versions like '3.14'"))),
                derived=r.get("derived", to_str_table, "a table {fact = \"how (URL)\"}", default=()),
                system_nvcc=r.bool("system_nvcc"),
                packages_arm64=r.strs("packages_arm64", default=None),
                cuda_libs=r.strs("cuda_libs"),
                cuda_libs_source=r.citations("cuda_libs_source"),
                cuda_libs_sha256=r.get("cuda_libs_sha256", _sha256_table,
                                       "a table {name = [\"<64 hex digits>\", ...]} (non-empty lists)", default=()),
            )
        )
        r.done()
        if not out[-1].python:
            raise r.fail("python", "a non-empty list of Python versions")
        _check_cuda_libs(r, out[-1].cuda_libs, out[-1].cuda_libs_sha256)
        if not out[-1].packages:
            raise r.fail("packages", "a non-empty list of pip requirements")
        problems = row_name_problems(out[-1].name, out[-1].variant)
        if problems:  # what cannot be resolved or rendered is never listed, planned or run
            raise MatrixError(f"{r.where} ({out[-1].framework} {out[-1].version}): {problems[0]}", where=file,
                              fix="fix the row (format: matrices/README.md)")
    return out


def _parse_gpus(doc: dict[str, Any], file: str) -> list[Gpu | str]:
    checked = Row({"checked": doc.get("checked")}, file, "(top level)").get(
        "checked", to_date, "the day the list was compared with NVIDIA's CUDA GPUs pages, like '2026-11-26'", default=None)
    return ([checked] if checked else []) + [
        Gpu(
            id=r.str("id"),
            name=r.str("name"),
            aliases=r.strs("aliases"),
            cc=r.get("cc", to_arch, "a compute capability like '8.6'"),
            memory_gb=r.float("memory_gb"),
            bandwidth_gb_s=r.float("bandwidth_gb_s"),
            fp32_tflops=r.float("fp32_tflops"),
            fp16_tflops=r.float("fp16_tflops"),
            **r.provenance(),
        )
        for r in each_row(doc, "gpu", file)
    ]


def _parse_tags(doc: dict[str, Any], file: str) -> list[PublishedTags | TagHistory]:
    out: list[PublishedTags | TagHistory] = []
    for r in each_row(doc, "repository", file):
        tags = r.strs("tags", default=...)
        if not tags:
            raise r.fail("tags", "a non-empty list of tags")
        out.append(PublishedTags(repository=r.str("name"), tags=frozenset(tags), source=r.sources(), status=r.status()))
        r.note("note")
    for r in each_row(doc, "history", file):
        repository, source, status = r.str("repository"), r.sources(), r.status()
        entries = r.list("tags", _history_entry, "tables {tag = \"...\", published = \"YYYY-MM-DD\", served = true|false|\"unknown\"}",
                         default=...)
        if not entries:
            raise r.fail("tags", "a non-empty list of tag histories")
        out.extend(TagHistory(repository, tag, published, served, source, status) for tag, published, served in entries)
    return out


def _history_entry(v: Any) -> tuple[str, str | None, bool | str]:
    """One ``{tag, published, served}`` table of a ``[[history]]`` row."""
    if not isinstance(v, dict) or not set(v) <= {"tag", "published", "served"} or "tag" not in v or "served" not in v:
        raise ValueError
    served = v["served"]
    if not (isinstance(served, bool) or served == SERVED_UNKNOWN):
        raise ValueError
    published = to_date(v["published"]) if "published" in v else None
    return to_str(v["tag"]), published, served
_TOP_KEYS = {
    "cuda": {"release", "never_released"},
    "os": {"os"},
    "images": {"image"},
    "framework": {"framework", "build"},
    "gpus": {"gpu", "checked"},
    "tags": {"repository", "history"},
    "recipes": {"recipe"},
    "ngc": {"release"},
}


#: An NGC repository and a release: ``nvcr.io/nvidia/pytorch``, ``20.12``.
_NGC_REPOSITORY_RE = r"nvcr\.io/nvidia/[a-z0-9][a-z0-9._-]{0,63}"
_NGC_RELEASE_RE = r"[0-9]{2}\.[0-9]{2}"
_NGC_TAG_RE = r"[0-9]{2}\.[0-9]{2}(?:-[a-z0-9.]{1,16}){0,3}"


def _pattern(rx: str, expected: str) -> Callable[[Any], str]:
    def conv(v: Any) -> str:
        if not isinstance(v, str) or not re.fullmatch(rx, v):
            raise ValueError(expected)
        return v

    return conv


def _parse_ngc(doc: dict[str, Any], file: str) -> list[NgcRelease]:
    out = []
    for r in each_row(doc, "release", file):
        repository = r.get("repository", _pattern(_NGC_REPOSITORY_RE, ""), "an NGC repository such as nvcr.io/nvidia/pytorch")
        release = r.get("release", _pattern(_NGC_RELEASE_RE, ""), "a release YY.MM")
        tags = r.list("tags", _pattern(_NGC_TAG_RE, ""), "a non-empty list of tags such as 20.12-py3", default=...)
        if not tags or any(t != release and not t.startswith(release + "-") for t in tags):
            raise r.fail("tags", f"a non-empty list of tags of release {release} ({release}-py3, ...)", tags)
        framework = r.str("framework", choices=FRAMEWORKS)
        fw_version = r.get("framework_version", _framework_version, "a version as NVIDIA writes it, e.g. 1.8.0a0+1606899",
                           default=None)
        cuda = r.version("cuda", default=None)
        cudnn = r.str("cudnn", default=None)
        python = r.version("python", default=None)
        os_name = r.str("os", default=None)
        min_driver = r.get("min_driver", _pattern(r"[0-9]{3}(?:\.[0-9]{1,3}){0,2}", ""), "a driver version such as 455 or 455.32",
                           default=None)
        out.append(NgcRelease(repository, release, tuple(tags), framework, fw_version, cuda, cudnn, python, os_name,
                              min_driver, **r.provenance()))
        r.done()
    return out


def _framework_version(v: Any) -> str:
    if not isinstance(v, str) or len(v) > 64:
        raise ValueError
    Version(v)  # InvalidVersion is a ValueError
    return v


def parse_file(path: Path) -> tuple[str, Any]:
    """Parse one matrix file completely; returns (kind, parsed rows). Raises MatrixError.

    The file is read every time; bytes already parsed under the same path in this process give
    the same (immutable) rows again without a second parse."""
    file = str(path)
    from envman.safefile import LARGE_LIMIT, read_file

    try:
        data = read_file(path, what="matrix file", limit=LARGE_LIMIT)
    except FileNotFoundError:
        raise MatrixError("matrix file not found", where=file, fix="check the path (--matrix, ENVMAN_MATRIX or [matrix] files of config.toml)")
    return _parse_bytes(file, data)


@functools.lru_cache(maxsize=32)
def _parse_bytes(file: str, data: bytes) -> tuple[str, Any]:
    """:func:`parse_file` of ``data`` read from ``file``; rows come back as tuples (shared by
    every caller that read the same bytes, and kept between invocations: :mod:`envman.matrix.parsed`)."""
    from envman.matrix.parsed import kept

    return kept(file, data, _parse_fresh)


def _parse_fresh(file: str, data: bytes) -> tuple[str, Any]:
    from envman.safefile import parse_toml

    doc = parse_toml(data, what="matrix file", where=file, error=MatrixError)
    if doc.get("schema") != 1:
        raise MatrixError(
            f"key schema: expected 1, got {doc.get('schema')!r}", where=file, fix="start the file with `schema = 1`"
        )
    kind = doc.get("kind")
    if kind not in KINDS:
        raise MatrixError(
            f"key kind: expected one of {', '.join(KINDS)}, got {kind!r}",
            where=file,
            fix='add e.g. `kind = "framework"` (format: matrices/README.md)',
        )
    extra = sorted(set(doc) - {"schema", "kind"} - _TOP_KEYS[kind])
    if extra:
        raise MatrixError(f"unknown top-level key {extra[0]} for kind {kind!r}", where=file)
    parser: Callable[[dict[str, Any], str], Any] = {
        "cuda": _parse_cuda,
        "os": _parse_os,
        "images": _parse_images,
        "framework": _parse_framework,
        "gpus": _parse_gpus,
        "tags": _parse_tags,
        "recipes": parse_recipes,
        "ngc": _parse_ngc,
    }[kind]
    rows = parser(doc, file)
    if kind == "cuda":
        return kind, (tuple(rows[0]), tuple(rows[1]))
    return kind, tuple(rows)


def load_matrix(extra: Iterable[str | Path] = (), *, shipped: bool = True) -> Matrix:
    """Load the shipped matrix plus user files. User rows replace shipped rows with the same key."""
    return load_files(matrix_files(extra, shipped=shipped))


def load_files(files: Iterable[str | Path]) -> Matrix:
    """Load exactly ``files``, in order (later rows replace earlier ones with the same key)."""
    paths = [Path(f) for f in files]
    cuda: dict[str, CudaRelease] = {}
    never: dict[str, tuple[str, str]] = {}
    oses: dict[str, OsInfo] = {}
    images: dict[str, BaseImage] = {}
    builds: dict[tuple[str, str, str], FrameworkBuild] = {}
    gpus: dict[str, Gpu] = {}
    gpus_checked: str | None = None
    published: list[PublishedTags] = []
    history: list[TagHistory] = []
    recipes: dict[tuple[str, str], BaseRecipe] = {}
    ngc: dict[tuple[str, str, tuple[str, ...]], NgcRelease] = {}
    parsed = [parse_file(f) for f in paths]  # everything parses before anything is merged
    for kind, rows in parsed:
        if kind == "cuda":
            releases, nev = rows
            for r in releases:
                cuda[r.key] = r
            for v, why in nev:
                never[v] = (v, why)
        elif kind == "os":
            oses.update((o.name, o) for o in rows)
        elif kind == "images":
            images.update((i.ref, i) for i in rows)
        elif kind == "framework":
            builds.update(((b.framework, str(b.version), b.variant), b) for b in rows)
        elif kind == "gpus":
            gpus.update((g.id, g) for g in rows if isinstance(g, Gpu))
            days = [d for d in rows if isinstance(d, str)]
            gpus_checked = max([*days, *([gpus_checked] if gpus_checked else [])], default=None)
        elif kind == "tags":
            published.extend(r for r in rows if isinstance(r, PublishedTags))  # user lists add to the shipped ones
            history.extend(r for r in rows if isinstance(r, TagHistory))
        elif kind == "recipes":
            recipes.update(((r.tag, r.platform), r) for r in rows)
        elif kind == "ngc":
            ngc.update(((r.repository, r.release, r.tags), r) for r in rows)
    return Matrix(
        cuda=tuple(sorted(cuda.values(), key=lambda r: r.version)),
        never_released=tuple(sorted(never.values())),
        oses=tuple(oses.values()),
        images=tuple(images.values()),
        builds=tuple(sorted(builds.values(), key=lambda b: (b.framework, b.version, b.cuda or Version("0"), b.variant))),
        gpus=tuple(gpus.values()),
        files=tuple(str(f) for f in paths),
        published=tuple(published),
        history=tuple(history),
        gpus_checked=gpus_checked,
        recipes=tuple(recipes.values()),
        ngc=tuple(ngc.values()),
    )


_CACHE: dict[tuple[tuple[str, ...]], Matrix] = {}


def get_matrix(extra: Iterable[str | Path] = ()) -> Matrix:
    """Process-wide cached ``load_matrix`` (the CLI loads once per invocation)."""
    key = (tuple(str(p) for p in user_matrix_paths(extra)),)
    if key not in _CACHE:
        _CACHE[key] = load_matrix(extra)
    return _CACHE[key]


__all__ = ["load_matrix", "load_files", "get_matrix", "parse_file"]
