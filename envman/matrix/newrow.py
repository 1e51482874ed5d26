"""A row ``envman matrix update`` derives: its facts, each with how and from which URL it was read
(:class:`RowBuilder`), or inherited from the nearest earlier row and marked ``unconfirmed``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

from packaging.version import Version
from packaging.requirements import Requirement

from envman.config import citable_url
from envman.matrix.index import IndexFile, IndexFileError, IndexUnreachable, WheelMetadata, normalize
from envman.matrix.model import FrameworkBuild, Matrix
from envman.matrix.wheels import KNOWN_PYTHONS, CudaPins, cuda_library_lines, wheel_tags
from envman.matrix.wheels import exact_version


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
        url = citable_url(url)
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
        self.data["cuda_libs_source"] = [citable_url(md.url)]
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


