"""The Dockerfile plan's sections: typed, frozen records of what an image's Dockerfile says.

:mod:`envman.render.plan` (a stack image) and :mod:`envman.render.layerplan` (a project image, the
notebook layer) fill them; :mod:`envman.render.layout` lays them out as steps. Values hold argument
lists (tuples of words) and LABEL/ENV values as they are: the layout quotes them where the
Dockerfile is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from envman.render.imagepaths import BOOTSTRAP, UV_VERSION, VENV, VENV_PYTHON, BuilderKind
from envman.render.steps import BuildMount




@dataclass(frozen=True)
class BuilderOptions:
    """What differs between the two builders' Dockerfiles, for the steps that run pip."""

    kind: BuilderKind
    #: pip's cache options: ``--no-cache-dir`` (classic), or a cache mount's directory (BuildKit).
    pip_cache: tuple[str, ...]
    #: BuildKit with --ca-bundle, or a layer with one: the bundle merged with the system store into
    #: :data:`CA_MERGED` at the start of each pip/uv step and removed at its end (classic stack
    #: images: none, the system store has it).
    ca_source: str | None = None
    #: Variables exported for each such step (name, value as it is): the merged bundle for pip
    #: and uv, a layer's indexes.
    step_env: tuple[tuple[str, str], ...] = ()

    @property
    def buildkit(self) -> bool:
        return self.kind == "buildkit"

    @property
    def step_setup(self) -> bool:
        """Whether each pip/uv step starts by merging the CA bundle or exporting variables."""
        return self.ca_source is not None or bool(self.step_env)


@dataclass(frozen=True)
class BaseImage:
    """The ``FROM`` line."""

    image: str  # as the matrix names it (a stack) or the stack image id (a project)
    from_image: str  # what FROM names: ``image`` through the registry mirror, if one is set
    platform: str | None = None  # ``--platform`` for a platform other than the default
    rebuilt: bool = False  # ``from_image`` is ``image`` rebuilt from NVIDIA's recipe (envman.render.base)


@dataclass(frozen=True)
class NetworkOptions:
    """The image's trust store and package indexes (--ca-bundle, --pip-index, ...)."""

    #: classic builder with --ca-bundle: where the bundle is copied before the OS packages step.
    ca_copy_dest: str | None = None
    ca_env: tuple[tuple[str, str], ...] = ()  # (name, value) for ENV
    pip_env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class OsPackages:
    """One apt step: update, install ``packages``, clean up."""

    apt_get: tuple[str, ...]  # ``apt-get`` and its options
    packages: tuple[str, ...]  # sorted, validated package names (``name`` or ``name=version``)
    #: Variables of the install command (a project image sets DEBIAN_FRONTEND there; a stack image
    #: has it as a build ARG).
    install_env: tuple[tuple[str, str], ...] = ()
    mirror: str | None = None  # --apt-mirror: rewrite the sources' URIs first
    hide_nvidia_sources: bool = False  # set NVIDIA's apt sources aside while apt-get runs
    update_ca_certificates: bool = False  # add the copied CA bundle to the system store
    clean_lists: bool = True  # remove apt's lists (they are a cache mount on BuildKit)
    home: str | None = None  # a HOME made usable by any uid, with /etc/passwd and /etc/group
    mounts: tuple[BuildMount, ...] = ()  # BuildKit: apt's caches, the CA bundle


@dataclass(frozen=True)
class Wheelhouse:
    """--wheelhouse: the wheels of the build context the stack's pins select."""

    files: tuple[str, ...]
    dir: str
    #: When the classic builder copies them into the image: before the Python step (--offline:
    #: its pip steps install from them), or after it; ``None`` on BuildKit (bind-mounted).
    copy: Literal["before-python", "after-python"] | None


@dataclass(frozen=True)
class Python:
    """The interpreter and the venv every later pip step uses."""

    version: str  # X.Y, or X.Yt for a free-threaded build (strategy "standalone")
    strategy: Literal["apt", "standalone"]
    os: str
    mounts: tuple[BuildMount, ...]  # BuildKit: the caches, the CA bundle, the wheelhouse, the index secret
    pip_upgrade: tuple[str, ...] | None  # the venv pip's upgrade arguments; None: keep the bundled pip
    pip_note: str  # why the bundled pip stays ("" when it does not)
    venv: str = VENV
    venv_python: str = VENV_PYTHON
    # strategy "standalone": a bootstrap venv with uv installs python-build-standalone.
    bootstrap: str = BOOTSTRAP
    bootstrap_python: str = f"{BOOTSTRAP}/bin/python"
    bootstrap_pip: str | None = None  # the bootstrap venv's pip requirement, when it needs a newer one
    bootstrap_flags: tuple[str, ...] = ()  # pip's options in the bootstrap venv (the wheelhouse, offline)
    uv_requirement: str = f"uv=={UV_VERSION}"
    uv_env: tuple[tuple[str, str], ...] = ()  # the variables ``uv python`` runs with

    @property
    def exe(self) -> str:
        """The distribution's ``pythonX.Y`` (strategy "apt")."""
        return f"python{self.version}"


@dataclass(frozen=True)
class UvInstaller:
    """BuildKit, Python 3.8+: uv installs the framework, fetched once into a cache mount."""

    version: str
    requirement: str  # for pip
    tool: str  # where the fetched uv lives (a cache mount)
    cache: str
    fetch_flags: tuple[str, ...]  # pip options for fetching uv (the wheelhouse, offline)
    args: tuple[str, ...]  # ``uv pip install`` arguments: options, then the pins


@dataclass(frozen=True)
class Framework:
    """The matrix row's pinned packages (and the wheelhouse's wheels, installed first)."""

    title: str
    mounts: tuple[BuildMount, ...]  # BuildKit: the caches, the CA bundle, the wheelhouse, the index secret
    pip_args: tuple[str, ...]  # ``pip install`` arguments: index options, then the pins
    wheel_paths: tuple[str, ...]  # the wheelhouse's wheels (none: empty)
    installer: Literal["pip", "uv"] = "pip"
    uv: UvInstaller | None = None


@dataclass(frozen=True)
class CudaLibs:
    """The CUDA libraries the framework pins exactly, installed before it in a layer of their own:
    the same pins, index options and Python give the same step, so stacks share the layer."""

    title: str  # what pins them (``torch 2.5.1 (cu124)``)
    requirements: tuple[str, ...]  # ``name==version`` and its hashes, sorted (Stack.cuda_libs)
    mounts: tuple[BuildMount, ...]  # BuildKit: pip's cache, the CA bundle, the wheelhouse, the index secret
    #: ``pip install`` arguments: options, index options, then the pins, or ``-r FILE`` when the
    #: pins have hashes (pip takes ``--hash`` in a requirements file only).
    pip_args: tuple[str, ...]
    #: With hashes: where the step writes ``requirements``, one per line.
    requirements_file: str | None = None
    #: Classic builder, hashed pins: the arguments of a first ``pip install`` that takes the pins
    #: from the wheel store alone (:data:`WHEEL_STORE_URL`, no index, no retries); ``pip_args``
    #: follow when it cannot. Unquoted words.
    store_args: tuple[str, ...] = ()


@dataclass(frozen=True)
class Nvidia:
    """What the NVIDIA container runtime reads (GPU stacks only)."""

    env: tuple[tuple[str, str], ...]  # (name, value) for ENV
    note: str  # why NVIDIA_REQUIRE_CUDA says what it says


@dataclass(frozen=True)
class Requirements:
    """A project's requirements layer: copy the files, install, check."""

    copy: tuple[str, ...]  # context files
    dest: str  # where COPY puts them
    python: str
    pip_options: tuple[str, ...]
    install: tuple[str, ...]  # what follows ``pip install <pip_options>``
    check: tuple[str, ...] | None = None  # a command run after the install (the lock's closure check)


@dataclass(frozen=True)
class PipPackages:
    """Packages pip installs on top of an image, with no files copied (the notebook layer)."""

    python: str
    pip_options: tuple[str, ...]
    requirements: tuple[str, ...]  # validated requirement specifiers


@dataclass(frozen=True)
class Project:
    """The project's own layers on its stack image (project images only)."""

    name: str
    stack: str
    requirements: Requirements | None


@dataclass(frozen=True)
class EnvmanFiles:
    """envman's own files in a stack image, and how the image starts."""

    files: tuple[str, ...]  # context files copied into ``dir``
    dir: str
    home: str
    entrypoint: str
    cmd: str


@dataclass(frozen=True)
class Label:
    name: str
    value: str  # as it is (checked: a Dockerfile LABEL can carry it)


@dataclass(frozen=True)
class DockerfilePlan:
    """Everything a Dockerfile says, by section; ``template`` names the one that lays it out."""

    template: Literal["Dockerfile.j2", "project.Dockerfile.j2"]  # project.Dockerfile.j2: any layer on an envman image
    title: tuple[str, ...]  # the comment lines at the top
    builder: BuilderOptions
    base: BaseImage
    os_packages: OsPackages | None
    network: NetworkOptions | None = None  # a project image uses the stack image's settings
    wheelhouse: Wheelhouse | None = None
    python: Python | None = None
    framework: Framework | None = None
    cuda_libs: CudaLibs | None = None
    nvidia: Nvidia | None = None
    project: Project | None = None
    pip_packages: PipPackages | None = None
    envman_files: EnvmanFiles | None = None
    labels: tuple[Label, ...] = ()


__all__ = [
    "BaseImage",
    "BuilderOptions",
    "CudaLibs",
    "DockerfilePlan",
    "EnvmanFiles",
    "Framework",
    "Label",
    "NetworkOptions",
    "Nvidia",
    "OsPackages",
    "PipPackages",
    "Project",
    "Python",
    "Requirements",
    "UvInstaller",
    "Wheelhouse",
]
