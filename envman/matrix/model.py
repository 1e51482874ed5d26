"""Typed, frozen objects for the compatibility matrix.

The on-disk format (TOML, one file per family under ``matrices/``) is documented in
``matrices/README.md``; ``envman.matrix.load`` turns it into these objects and rejects a
malformed file whole, naming the file, the key and what was expected.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from functools import total_ordering
from typing import TYPE_CHECKING

from packaging.version import Version

#: nvidia/cuda flavours holding (at least) what each flavour holds, smallest first: ``base`` has
#: the driver API only, ``runtime`` adds the CUDA libraries, ``cudnn-*`` cuDNN, ``devel`` nvcc.
FLAVOURS_HOLDING: dict[str, tuple[str, ...]] = {
    "base": ("base", "runtime", "cudnn-runtime", "devel", "cudnn-devel"),
    "runtime": ("runtime", "cudnn-runtime", "devel", "cudnn-devel"),
    "cudnn-runtime": ("cudnn-runtime", "cudnn-devel"),
    "devel": ("devel", "cudnn-devel"),
    "cudnn-devel": ("cudnn-devel",),
}

if TYPE_CHECKING:
    from envman.matrix.gpus import GpuIndex

#: Fact status carried by every row (how well its sources back it). An ``unconfirmed`` fact is
#: never promoted to a hard rule: verdicts that rest on one say so in their reasons.
STATUSES = ("confirmed", "partially confirmed", "unconfirmed")

#: Docker Hub status of a base image tag.
IMAGE_STATUSES = ("published", "deleted", "unknown")

FRAMEWORKS = ("torch", "tensorflow", "jax", "onnxruntime")

#: Platforms (OCI ``os/arch``) a base image is published for or a framework build has wheels for.
PLATFORMS = ("linux/amd64", "linux/arm64")

#: What a row that does not name its platforms means (every row written before arm64 support).
DEFAULT_PLATFORMS = ("linux/amd64",)


@total_ordering
@dataclass(frozen=True)
class Arch:
    """A GPU compute capability, ``major.minor`` (``"8.6"`` is sm_86)."""

    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> "Arch":
        return _parse_arch(str(text)) if cls is Arch else cls._parse(str(text))

    @classmethod
    def _parse(cls, text: str) -> "Arch":
        t = text.strip().lower()
        for prefix in ("sm_", "compute_", "sm"):
            if t.startswith(prefix):
                t = t[len(prefix):]
                if "." not in t and t.isascii() and t.isdigit() and len(t) >= 2:
                    t = f"{t[:-1]}.{t[-1]}"
                break

        # ASCII digits; a minor of one digit (8.10 is no compute capability: sm_810 would be 81.0),
        # a major of 1-20 (GPUs so far: 1.0 to 12.x).
        m = re.fullmatch(r"([0-9]{1,2})\.([0-9])", t)
        if not m or not 1 <= int(m.group(1)) <= 20:
            raise ValueError(f"not a compute capability: {str(text)[:40]!r} (expected like '8.6' or 'sm_86': "
                             "major 1-20, one-digit minor)")
        return cls(int(m.group(1)), int(m.group(2)))

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    def __lt__(self, other: "Arch") -> bool:
        return (self.major, self.minor) < (other.major, other.minor)

    @property
    def sm(self) -> str:
        return f"sm_{self.major}{self.minor}"


@dataclass(frozen=True)
class DriverVersion:
    """An NVIDIA Linux driver version such as ``525.60.13`` (compared numerically)."""

    parts: tuple[int, ...]

    @classmethod
    def parse(cls, text: str) -> "DriverVersion":
        return _parse_driver(str(text)) if cls is DriverVersion else cls._parse(str(text))

    @classmethod
    def _parse(cls, text: str) -> "DriverVersion":
        t = text.strip()
        # ASCII digits only, 1-3 parts, a major version of 1-9999 (NVIDIA's are 3 digits today).
        m = re.fullmatch(r"([0-9]{1,4})(\.[0-9]{1,6}){0,2}", t)
        parts = tuple(int(p) for p in t.split(".")) if m else ()
        if not parts:
            raise ValueError(f"not a driver version: {str(text)[:40]!r} (expected like '535.104.05')")
        return cls(parts)

    @classmethod
    def parse_option(cls, text: str) -> "DriverVersion":
        """:meth:`parse` for a version a user typed (``--driver``): also no driver 0."""
        v = cls.parse(text)
        if v.parts[0] < 1:
            raise ValueError(f"not a driver version: {str(text)[:40]!r} (expected like '535.104.05')")
        return v

    def _key(self) -> tuple[int, ...]:
        return self.parts + (0,) * (3 - len(self.parts))

    def __lt__(self, other: "DriverVersion") -> bool:
        return self._key() < other._key()

    def __le__(self, other: "DriverVersion") -> bool:
        return self._key() <= other._key()

    def __gt__(self, other: "DriverVersion") -> bool:
        return self._key() > other._key()

    def __ge__(self, other: "DriverVersion") -> bool:
        return self._key() >= other._key()

    def __str__(self) -> str:
        # Keep the driver's own zero padding convention (e.g. 535.104.05).
        if len(self.parts) == 3:
            return f"{self.parts[0]}.{self.parts[1]}.{self.parts[2]:02d}"
        return ".".join(str(p) for p in self.parts)


# Verdicts parse the same few architectures and driver versions over and over (every stack on
# every host); the parsed objects are frozen, so one per text is shared. Errors are not kept.
_parse_arch = functools.lru_cache(maxsize=4096)(Arch._parse)
_parse_driver = functools.lru_cache(maxsize=4096)(DriverVersion._parse)


@dataclass(frozen=True)
class CudaRelease:
    """One CUDA toolkit release (``major.minor``)."""

    version: Version
    toolkit_driver: DriverVersion  # minimum Linux x86_64 driver of the GA release
    minor_compat_driver: DriverVersion | None  # floor under minor-version compatibility
    minor_compat_status: str
    sm: tuple[Arch, ...]  # compute capabilities nvcc of this release can target
    cudnn: tuple[str, ...]  # cuDNN versions shipped in nvidia/cuda images of this release
    source: tuple[str, ...]
    status: str
    note: str = ""
    #: (full version, toolkit driver) of each release NVIDIA's driver table lists beyond the GA
    #: (``13.2.1`` = 13.2 Update 1 needs 595.58.03, not the GA's 595.45.04), ascending.
    updates: tuple[tuple[Version, DriverVersion], ...] = ()

    @property
    def key(self) -> str:
        return f"{self.version.major}.{self.version.minor}"

    def toolkit_driver_for(self, patch: Version | None) -> DriverVersion:
        """The toolkit driver of the release ``patch`` (an image's full CUDA version): its own
        update's figure, else that of the latest update before it (a lower bound), else the GA's."""
        known = [d for v, d in self.updates if patch is not None and v <= patch]
        return known[-1] if known else self.toolkit_driver

    def min_driver_for(self, patch: Version | None) -> DriverVersion:
        """:attr:`min_driver` for the release ``patch``."""
        own = self.toolkit_driver_for(patch)
        return own if self.minor_compat_driver is None else min(self.minor_compat_driver, own)

    @property
    def min_driver(self) -> DriverVersion:
        """Lowest driver on which an app built with this release runs at all: the lower of the
        toolkit's own driver and the minor-version-compatibility floor (CUDA 11.0 GA shipped with
        450.51.05, below the 11.x floor of 450.80.02)."""
        if self.minor_compat_driver is None:
            return self.toolkit_driver
        return min(self.minor_compat_driver, self.toolkit_driver)


@dataclass(frozen=True)
class OsInfo:
    """An operating system that base images use (apt-based)."""

    name: str  # as written in nvidia/cuda tags: "ubuntu22.04"
    python_default: Version
    python_apt: tuple[Version, ...]  # Pythons the distro installs as python3.X (default included)
    source: tuple[str, ...]
    status: str
    note: str = ""


@dataclass(frozen=True)
class BaseImage:
    """A base image a stack can be built FROM."""

    repository: str  # "nvidia/cuda", "ubuntu", or a private registry path
    tag: str
    cuda: Version | None  # None for CPU images
    cuda_patch: Version | None  # full patch version of the tag ("12.4.1"), None for CPU
    flavour: str  # one of FLAVOURS; "base" for CPU images
    cudnn: str | None  # cuDNN major carried by the image, if any
    os: str
    status: str  # one of IMAGE_STATUSES
    source: tuple[str, ...]
    custom: bool = False  # a user's own base: naming rules of nvidia/cuda do not apply
    note: str = ""
    platforms: tuple[str, ...] = DEFAULT_PLATFORMS  # platforms of the tag's manifest (one of PLATFORMS each)
    platform_status: str = "confirmed"  # status of the platforms beyond linux/amd64
    platform_source: tuple[str, ...] = ()  # where the platforms beyond linux/amd64 come from

    @property
    def ref(self) -> str:
        return f"{self.repository}:{self.tag}"


@dataclass(frozen=True)
class Download:
    """A file a recipe fetches directly (not through apt), checked against its sha256."""

    url: str
    sha256: str

    @property
    def file(self) -> str:
        return self.url.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class BaseRecipe:
    """How NVIDIA built one ``nvidia/cuda`` tag, to rebuild it where the tag is no longer served.

    A recipe starts either ``from_image`` (the plain OS image: it also sets up NVIDIA's apt
    repositories and key) or on ``parent`` (the recipe of the flavour below: base -> runtime ->
    devel, runtime -> cudnn-runtime, devel -> cudnn-devel)."""

    tag: str
    platform: str
    parent: str | None
    from_image: str | None
    path: str  # the Dockerfile in NVIDIA's repository it was read from
    commit: str  # ... at this commit
    repositories: tuple[str, ...]  # NVIDIA's apt repositories (deb URL /)
    setup_packages: tuple[str, ...]  # what the repository set-up installs first (ca-certificates, ...)
    key_url: str | None
    key_fingerprint: str | None
    replaced_key: str | None  # the key the recipe named before NVIDIA's 2022 rotation
    env: tuple[tuple[str, str], ...]
    labels: tuple[tuple[str, str], ...]
    packages: tuple[str, ...]  # apt packages, ``name`` or ``name=version``
    downloads: tuple[Download, ...]
    hold: tuple[str, ...]
    symlinks: tuple[tuple[str, str], ...]  # (target, link name)
    ld_so_conf: tuple[str, ...]
    omitted: tuple[str, ...]  # instructions of NVIDIA's file not carried over (its own entrypoint, ...)
    os_archive: str | None  # where the OS release's packages are now, when not in its image's sources
    os_archive_status: str
    source: tuple[str, ...]
    status: str
    note: str = ""

    @property
    def ref(self) -> str:
        return f"nvidia/cuda:{self.tag}"


@dataclass(frozen=True)
class FrameworkBuild:
    """One installable framework build: a release x a wheel variant (or the CPU build)."""

    framework: str  # one of FRAMEWORKS
    version: Version
    variant: str  # "cu118", "cpu", "gpu", "cuda12" ... as the project names it
    cuda: Version | None  # CUDA major.minor the build targets; None for CPU builds
    cudnn: str | None  # cuDNN the build was built/tested with
    python: tuple[Version, ...]
    packages: tuple[str, ...]  # pip requirement strings, pinned
    index_url: str | None
    extra_index_url: str | None
    find_links: str | None
    system_cuda: bool  # needs CUDA runtime libraries from the base image
    system_cudnn: bool  # needs cuDNN from the base image
    sass: tuple[Arch, ...]
    ptx: tuple[Arch, ...]
    arch_status: str
    default: bool  # the variant plain ``pip install <framework>==<version>`` gives
    source: tuple[str, ...]
    status: str
    note: str = ""
    os: tuple[str, ...] = ()  # restrict to these OS names (empty: any that fits)
    base_image: str | None = None  # pin an exact base image ref (custom rows)
    platforms: tuple[str, ...] = DEFAULT_PLATFORMS  # platforms its wheels exist for (one of PLATFORMS each)
    platform_status: str = "confirmed"  # status of the platforms beyond linux/amd64
    platform_source: tuple[str, ...] = ()  # where the platforms beyond linux/amd64 come from
    platform_note: str = ""  # what a stack on a platform beyond linux/amd64 should say
    #: Python versions with wheels, per package the row installs (normalised project name); a
    #: package without an entry has no data (``matrix validate`` checks what is there).
    wheel_python: tuple[tuple[str, tuple[Version, ...]], ...] = ()
    wheel_python_source: tuple[str, ...] = ()  # where the wheel_python facts come from
    #: Architectures of the linux/arm64 wheels where they differ from ``sass``/``ptx`` (None: same).
    sass_arm64: tuple[Arch, ...] | None = None
    ptx_arm64: tuple[Arch, ...] | None = None
    released: str | None = None  # ISO date of the release's first upload to the index
    #: Pythons whose free-threaded build (``3.14t``, PEP 703) has wheels of every package the row
    #: installs; each is also in ``python``.
    python_freethreaded: tuple[Version, ...] = ()
    derived: tuple[tuple[str, str], ...] = ()  # fact -> how and from which URL (matrix update)
    #: needs the CUDA compiler tools of the base image (``ptxas``, ``nvvm/libdevice``): XLA in the
    #: jaxlib wheels that link the system CUDA compiles its kernels with them at run time
    system_nvcc: bool = False
    #: what the row installs on linux/arm64 where the project publishes that platform's build under
    #: another name (TensorFlow's CPU wheels: tensorflow-cpu for x86_64, tensorflow for aarch64)
    packages_arm64: tuple[str, ...] | None = None

    def packages_for(self, platform: str) -> tuple[str, ...]:
        """The pinned requirements this build installs on ``platform``."""
        if platform == "linux/arm64" and self.packages_arm64 is not None:
            return self.packages_arm64
        return self.packages
    #: The CUDA libraries the framework's Linux x86_64 wheel pins exactly (its ``Requires-Dist``
    #: lines, ``name==version`` and marker; see :func:`envman.matrix.wheels.cuda_library_lines`):
    #: installed in a layer of their own, before the framework, so stacks with the same pins share it.
    cuda_libs: tuple[str, ...] = ()
    cuda_libs_source: tuple[str, ...] = ()  # the wheel metadata the cuda_libs were read from
    #: sha256 of every Linux x86_64 wheel file of each cuda_libs pin, by name (all or none): the
    #: CUDA-library step installs in pip's hash-checking mode, so a cached or mirrored wheel is
    #: checked against these before use.
    cuda_libs_sha256: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def archs(self, platform: str) -> tuple[tuple[Arch, ...], tuple[Arch, ...]]:
        """(SASS, PTX) of this build's wheels for ``platform``."""
        if platform == "linux/arm64" and self.sass_arm64 is not None:
            return self.sass_arm64, self.ptx_arm64 or ()
        return self.sass, self.ptx

    @property
    def name(self) -> str:
        """Resolvable row name: ``torch-2.7.1-cuda12.8`` / ``torch-2.7.1-cpu``."""
        tail = f"cuda{self.cuda.major}.{self.cuda.minor}" if self.cuda else "cpu"
        return f"{self.framework}-{self.version}-{tail}"

    @property
    def flavour_needed(self) -> str:
        """Smallest nvidia/cuda flavour that works for this build."""
        if self.cuda is None:
            return "base"
        if self.system_nvcc:
            return "cudnn-devel" if self.system_cudnn else "devel"
        if self.system_cudnn:
            return "cudnn-runtime"
        if self.system_cuda:
            return "runtime"
        return "base"


def cudnn_fits(image_major: str | None, needed: str | None) -> bool:
    """Whether an image shipping cuDNN ``image_major`` serves a build that needs system cuDNN
    ``needed`` ("9", "8.1", "7.6.5"): the majors must be equal (cuDNN keeps no ABI across majors)."""
    if needed is None:
        return True
    return image_major == needed.split(".")[0]


@dataclass(frozen=True)
class Gpu:
    """A GPU model with the datasheet figures used for verdicts and the performance probe."""

    id: str
    name: str
    aliases: tuple[str, ...]
    cc: Arch
    memory_gb: float | None
    bandwidth_gb_s: float | None
    fp32_tflops: float | None
    fp16_tflops: float | None  # FP16 tensor, dense
    source: tuple[str, ...]
    status: str
    note: str = ""


@dataclass(frozen=True)
class PublishedTags:
    """Every tag a registry repository ever published (``kind = "tags"``)."""

    repository: str
    tags: frozenset[str]
    source: tuple[str, ...]
    status: str


#: ``served`` of a tag whose deletion NVIDIA's lists do not settle.
SERVED_UNKNOWN = "unknown"


@dataclass(frozen=True)
class TagHistory:
    """When a registry tag was first published and whether the registry still serves it
    (``[[history]]`` of ``kind = "tags"``)."""

    repository: str
    tag: str
    published: str | None  # ISO date of the first publication; None where no source dates it
    served: bool | str  # True, False (deleted) or SERVED_UNKNOWN
    source: tuple[str, ...]
    status: str  # how well the sources back published and served

    @property
    def deleted(self) -> bool:
        return self.served is False


@dataclass(frozen=True)
class NgcRelease:
    """One monthly release of one of NVIDIA's NGC framework containers (``kind = "ngc"``):
    ``nvcr.io/nvidia/pytorch:20.12-py3`` carries torch ``1.8.0a0+1606899``, CUDA 11.1.1, Python 3.8."""

    repository: str  # "nvcr.io/nvidia/pytorch"
    release: str  # "20.12"
    tags: tuple[str, ...]  # "20.12-py3"; TensorFlow's "20.12-tf1-py3" and "20.12-tf2-py3" are two rows
    framework: str  # one of FRAMEWORKS
    framework_version: str | None  # as NVIDIA writes it: often a pre-release of NVIDIA's own build
    cuda: Version | None  # the full CUDA version; None where no source gives it
    cudnn: str | None
    python: Version | None
    os: str | None
    min_driver: str | None  # as NVIDIA's table gives it ("455", "455.32")
    source: tuple[str, ...]
    status: str
    note: str = ""

    @property
    def public_release(self) -> Version | None:
        """The public release NVIDIA's build is of: ``1.8.0a0+1606899`` → 1.8.0 (a pre-release of
        it), ``2.3.0+cc6f2c7`` → 2.3.0, ``1.15.5+nv`` → 1.15.5; None where no source gives it."""
        return Version(Version(self.framework_version).base_version) if self.framework_version else None

    def to_json(self) -> dict[str, object]:
        return {"image": f"{self.repository}:{self.tags[0]}", "repository": self.repository, "release": self.release,
                "tags": list(self.tags), "framework": self.framework, "framework_version": self.framework_version,
                "cuda": str(self.cuda) if self.cuda else None, "cudnn": self.cudnn,
                "python": str(self.python) if self.python else None, "os": self.os, "min_driver": self.min_driver,
                "source": list(self.source), "status": self.status, "note": self.note}


@dataclass(frozen=True)
class Matrix:
    """Everything envman knows; built once per process by ``envman.matrix.load``."""

    cuda: tuple[CudaRelease, ...]
    never_released: tuple[tuple[str, str], ...]  # (version, explanation with source)
    oses: tuple[OsInfo, ...]
    images: tuple[BaseImage, ...]
    builds: tuple[FrameworkBuild, ...]
    gpus: tuple[Gpu, ...]
    files: tuple[str, ...] = field(default=())
    published: tuple[PublishedTags, ...] = field(default=())
    history: tuple[TagHistory, ...] = field(default=())
    gpus_checked: str | None = None  # ISO day the GPU list was last compared with NVIDIA's pages
    recipes: tuple[BaseRecipe, ...] = field(default=())
    ngc: tuple[NgcRelease, ...] = field(default=())

    def ngc_lookup(self, ref: str) -> NgcRelease | None:
        """The NGC release of an image reference (``nvcr.io/nvidia/pytorch:20.12-py3``)."""
        repository, _, tag = ref.strip().rpartition(":")
        return self.ngc_image(repository.lower(), tag) if repository else None

    def ngc_image(self, repository: str, tag: str) -> NgcRelease | None:
        """The NGC release whose image ``repository:tag`` is, or None when the matrix has none."""
        return self._ngc_index.get((repository, tag))

    @functools.cached_property
    def _ngc_index(self) -> dict[tuple[str, str], NgcRelease]:
        return {(r.repository, t): r for r in self.ngc for t in r.tags}

    @functools.cached_property
    def _history_index(self) -> dict[tuple[str, str], TagHistory]:
        return {(h.repository, h.tag): h for h in self.history}  # later files win

    def tag_history(self, repository: str, tag: str) -> TagHistory | None:
        """Published date and served state of ``repository:tag``, or None when the matrix has none."""
        return self._history_index.get((repository, tag))

    def recipe(self, tag: str, platform: str = DEFAULT_PLATFORMS[0]) -> BaseRecipe | None:
        """The recipe that rebuilds ``nvidia/cuda:<tag>`` for ``platform``, if the matrix has one."""
        return self._recipe_index.get((tag, platform))

    @functools.cached_property
    def _recipe_index(self) -> dict[tuple[str, str], BaseRecipe]:
        return {(r.tag, r.platform): r for r in self.recipes}

    def recipe_chain(self, tag: str, platform: str = DEFAULT_PLATFORMS[0]) -> tuple[BaseRecipe, ...] | None:
        """The recipes from the plain OS image up to ``tag`` (``None``: a link is missing or the
        parents loop)."""
        chain: list[BaseRecipe] = []
        seen: set[str] = set()
        cur: str | None = tag
        while cur is not None:
            r = self.recipe(cur, platform)
            if r is None or cur in seen:
                return None
            seen.add(cur)
            chain.append(r)
            cur = r.parent
        return tuple(reversed(chain))

    def rebuildable(self, image: "BaseImage", platform: str = DEFAULT_PLATFORMS[0]) -> bool:
        """Whether ``image`` can be rebuilt from NVIDIA's recipes on ``platform``."""
        return image.repository == "nvidia/cuda" and self.recipe_chain(image.tag, platform) is not None

    def published_tags(self, repository: str) -> frozenset[str] | None:
        """The tags ``repository`` ever published, or None when the matrix has no list for it."""
        lists = [p.tags for p in self.published if p.repository == repository]
        return frozenset().union(*lists) if lists else None

    @functools.cached_property
    def _flavours_by_cuda(self) -> dict[Version | None, frozenset[str]]:
        out: dict[Version | None, set[str]] = {}
        for i in self.images:
            if not i.custom:
                out.setdefault(i.cuda, set()).add(i.flavour)
        return {k: frozenset(v) for k, v in out.items()}

    def flavour_for(self, build: "FrameworkBuild") -> str:
        """The nvidia/cuda flavour a build's stack uses: the smallest it needs, except that where a
        CUDA release has no ``base`` images at all (NVIDIA introduced the flavour with 9.0), a build
        that needs only the driver takes the smallest flavour the release has. A release that lacks
        another flavour is a gap in the image rows, reported as such, not papered over."""
        needed = build.flavour_needed
        have = self._flavours_by_cuda.get(build.cuda, frozenset())
        if needed != "base" or needed in have or build.cuda is None:
            return needed
        return next((f for f in FLAVOURS_HOLDING[needed] if f in have), needed)

    def cuda_release(self, version: Version | str) -> CudaRelease | None:
        v = Version(str(version))
        for r in self.cuda:
            if (r.version.major, r.version.minor) == (v.major, v.minor):
                return r
        return None

    def cuda_update(self, text: str) -> tuple[CudaRelease, Version | None]:
        """The CUDA release and full version ``text`` names: ``12.4.1``, ``12.4 Update 1``/``12.4u1``
        (the N-th update NVIDIA's driver table lists), ``12.4`` (the GA: ``None``), or an nvidia/cuda
        tag of it (``12.4.1-cudnn-runtime-ubuntu22.04``). ``ValueError`` says why not."""
        t = " ".join(text.strip().lower().split())
        m = re.fullmatch(r"([0-9]{1,3})\.([0-9]{1,3})(?:\.([0-9]{1,4}))?(?:-[a-z0-9][a-z0-9.-]{0,80})?", t)
        u = re.fullmatch(r"([0-9]{1,3})\.([0-9]{1,3}) ?(?:u|update ?)([0-9]{1,2})", t)
        if not (m or u):
            raise ValueError(f"{text[:60]!r} names no CUDA version (e.g. 12.4.1, '12.4 Update 1' or an nvidia/cuda tag)")
        major, minor = int((m or u).group(1)), int((m or u).group(2))  # type: ignore[union-attr]
        rel = self.cuda_release(f"{major}.{minor}")
        if rel is None:
            why = next((w for v, w in self.never_released if v == f"{major}.{minor}"), None)
            raise ValueError(f"CUDA {major}.{minor} " + (f"was never released ({why})" if why else "is not a release in the matrix"))
        known = ", ".join(["GA", *(str(v) for v, _ in rel.updates)])
        if u:
            n = int(u.group(3))
            if not 1 <= n <= len(rel.updates):
                raise ValueError(f"CUDA {rel.key} has no Update {n} in the matrix (NVIDIA's driver table lists {known})")
            return rel, rel.updates[n - 1][0]
        assert m is not None
        if m.group(3) is None:
            return rel, None
        patch = Version(f"{major}.{minor}.{int(m.group(3))}")
        if rel.updates and patch > rel.updates[-1][0] or not rel.updates and patch.micro > 0 and not any(
                i.cuda_patch == patch for i in self.images):
            raise ValueError(f"CUDA {patch} is past what the matrix knows of {rel.key} ({known}): "
                             "its toolkit driver is not known")
        return rel, patch

    def os_info(self, name: str) -> OsInfo | None:
        for o in self.oses:
            if o.name == name:
                return o
        return None

    @functools.cached_property
    def gpu_index(self) -> GpuIndex[Gpu]:
        """The GPUs by the names users type and ``nvidia-smi`` prints (``envman.matrix.gpus``)."""
        from envman.matrix.gpus import GpuIndex

        return GpuIndex(self.gpus)

    def gpu(self, query: str) -> Gpu | None:
        """The GPU ``query`` names (``NVIDIA L40S``, ``Tesla V100-SXM2-16GB``, ``4090``), or None
        when it names none or ties between several (``gpu_index.suggestions`` says which)."""
        return self.gpu_index.lookup(query)
