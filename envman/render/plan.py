"""The Dockerfile plan: what an image's Dockerfile says, as typed, frozen sections.

A :class:`DockerfilePlan` is built by a pure function (:func:`stack_plan` for a stack image,
:func:`project_plan` for a project image, :func:`notebook_plan` for the notebook layer). Python
computes every pin, flag, path, BuildKit mount and quoted value here, in layer order:

    base -> os_packages -> python -> framework -> nvidia -> pip_packages / project
         -> envman_files -> labels

:mod:`envman.render.layout` then lays the plan out as Dockerfile steps (:mod:`envman.render.steps`
writes each instruction), and the templates (``templates/dockerfiles``, see
:mod:`envman.render.template`) only print those steps.

A section a kind of image does not have is ``None`` (a project image has no ``python`` or
``framework``; a stack image has no ``project``; a CPU stack has no ``nvidia``). Values that land
in LABEL/ENV are quoted for the Dockerfile lexer (:func:`envman.render.quote.dockerfile_quote`),
words in RUN lines for /bin/sh (:func:`envman.render.quote.sh_word`), before they enter a plan.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from packaging.version import Version

from envman import __version__
from envman import labels as L
from envman.errors import RenderError
from envman.probe.app.contract import IMAGE_DIR, PROBE_FILE
from envman.render.quote import dockerfile_quote, mirror_image, sh_word, stack_label_json
from envman.render.steps import BindMount, CacheMount, Mount, SecretMount
from envman.paths import CONTAINER_HOME
from envman.state import stable_ref
from envman.stack.names import APT_PACKAGE_PATTERN, DEFAULT_PLATFORM, PROJECT_NAME_PATTERN, STACK_NAME_PATTERN, Stack

if TYPE_CHECKING:  # the run path builds project plans: it must not import what render_stack needs
    from envman.render.options import RenderOptions
    from envman.render.wheels import Wheel

# --- where things go in the image ------------------------------------------------------------

VENV = "/opt/venv"
VENV_PYTHON = f"{VENV}/bin/python"
ENVMAN_DIR = IMAGE_DIR
WHEELS_DIR = f"{ENVMAN_DIR}/wheels"
PYTHON_DIR = f"{ENVMAN_DIR}/python"  # python-build-standalone installs (strategy "standalone")
PROJECT_DIR = f"{ENVMAN_DIR}/project"  # a project image's requirements and lock
#: A project image's lock (``envman.lock`` as pip reads it) in its build context and in PROJECT_DIR.
LOCK_CONTEXT_FILE = "envman.lock.txt"
CA_DEST = "/usr/local/share/ca-certificates/envman-ca.crt"
SYSTEM_CA = "/etc/ssl/certs/ca-certificates.crt"  # what update-ca-certificates writes (Debian/Ubuntu)
BOOTSTRAP = "/tmp/envman-uv"

#: uv, pinned: it installs python-build-standalone for Pythons the distribution lacks.
UV_VERSION = "0.13.8"

#: Wheels of these projects in a wheelhouse serve the Python layer (the venv's pip upgrade, the
#: uv bootstrap); they are not force-installed into the venv with the others.
TOOL_WHEELS = frozenset({"pip", "uv"})

#: The two Dockerfile dialects: the classic builder's, and BuildKit's (RUN --mount).
BuilderKind = Literal["classic", "buildkit"]
BUILDER_KINDS: tuple[BuilderKind, ...] = ("classic", "buildkit")

# BuildKit only: where the cache mounts, the bind-mounted CA bundle and uv live during a RUN.
#: The requirements file of the CUDA-library step when its pins have hashes (written and removed
#: in that step).
CUDA_LIBS_FILE = "/tmp/envman-cuda-libs.txt"
#: The wheel store (``envman.images.wheelstore``) as the classic builder's CUDA-library step reaches
#: it: envman's build serves this user's stored wheels on its own build network under this host
#: name and port. The name and port are fixed, so the step, and its cache key, is the same in every
#: build; a build that is not served (``docker build`` of a written context) finds no such host
#: and installs from the index.
WHEEL_STORE_HOST = "envman-wheels"
WHEEL_STORE_PORT = 47263
WHEEL_STORE_URL = f"http://{WHEEL_STORE_HOST}:{WHEEL_STORE_PORT}/"
#: A CUDA-library pin as it reaches the step: ``name==version`` and any sha256 hashes.
_CUDA_LIB_RE = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*==[0-9A-Za-z.+!]+(?: --hash=sha256:[0-9a-f]{64})*")
#: The time every file a reproducible step writes is set to (1980-01-01T00:00:00Z, the earliest a zip
#: entry can carry), and the SOURCE_DATE_EPOCH those steps run with: see layout's ``_settled``.
SETTLED_TIME = 315532800
#: Where the Python and CUDA-library steps write (the venv and python-build-standalone live under
#: /opt; pip's and uv's temporary files under /tmp; HOME is /root while building).
SETTLED_DIRS = ("/opt", "/tmp", "/root")
CACHE_ROOT = "/var/cache/envman"
PIP_CACHE = f"{CACHE_ROOT}/pip"
UV_CACHE = f"{CACHE_ROOT}/uv"
APT_ARCHIVES = f"{CACHE_ROOT}/apt"
CA_MOUNT = "/run/envman/ca-bundle.crt"
CA_MERGED = "/tmp/envman-ca.pem"
TOOLS_CACHE = f"{CACHE_ROOT}/tools"
UV_TOOL = f"{TOOLS_CACHE}/uv-{UV_VERSION}"
#: The build secret that carries index credentials: a netrc file, mounted where pip and uv read it.
NETRC_SECRET = "envman-netrc"
NETRC_TARGET = "/root/.netrc"
#: uv installs packages into Pythons from this one up; older ones get pip.
MIN_UV_PYTHON = Version("3.8")

#: The files of a stack's build context that its Dockerfile copies into ``ENVMAN_DIR``.
PROBE_CONTEXT_FILE = f"envman/{PROBE_FILE}"
#: --ca-bundle's copy in a stack's build context.
CA_CONTEXT_FILE = "envman/ca-bundle.crt"
ENVMAN_FILES = ("envman/entrypoint.sh", PROBE_CONTEXT_FILE, "envman/stack.json")
#: The labels a stack image's Dockerfile writes, in order (``envman.render-hash`` follows them,
#: on the last line, once the render hash is known).
STACK_LABELS = (L.MANAGED, L.NAME, L.STACK, L.VERSION)

# --- distribution facts the render needs, per OS name ----------------------------------------


@dataclass(frozen=True)
class OsQuirks:
    """What provisioning Python needs to know about one distribution release."""

    #: apt package that carries distutils for every python3.X of the release. Debian and Ubuntu
    #: split distutils out of the standard library; pip < 22.2 and ensurepip's bundled pip import
    #: it on 3.6-3.9 ("No module named 'distutils.util'"). On 18.04 and 20.04 the one real
    #: package, python3-distutils, ships it for the release's secondary Pythons too; the
    #: python3.X-distutils names are virtual there or exist only in the deadsnakes PPA
    #: (https://github.com/deadsnakes/issues/issues/88, https://github.com/deadsnakes/issues/issues/109,
    #: https://github.com/pypa/pipenv/issues/5060). 16.04's python3.5 still has it built in;
    #: 22.04+ pips no longer need it.
    distutils: str | None = None
    #: pip requirement the distribution's own python3 can run, for the uv bootstrap venv, when
    #: ensurepip's bundled pip is too old to install a manylinux2014 wheel (pip < 19.3).
    bootstrap_pip: str | None = None
    #: Whether apt can fetch https:// sources without apt-transport-https (apt >= 1.5).
    apt_https: bool = True


OS_QUIRKS: dict[str, OsQuirks] = {
    "ubuntu16.04": OsQuirks(bootstrap_pip="pip<21", apt_https=False),
    "ubuntu18.04": OsQuirks(distutils="python3-distutils", bootstrap_pip="pip<22"),
    "ubuntu20.04": OsQuirks(distutils="python3-distutils"),
}

#: Newest pip per Python that still runs on it. The venv's pip is upgraded to this cap (no cap:
#: newest). Old ensurepip pips (8.x on 16.04) do not read Requires-Python, hence explicit caps.
_PIP_CAPS = ((Version("3.5"), "pip<21"), (Version("3.6"), "pip<22"), (Version("3.7"), "pip<24.1"))
MIN_PYTHON = Version("3.5")
MIN_STANDALONE_PYTHON = Version("3.8")


def pip_requirement(python: str) -> str:
    """The pip requirement the venv's pip is upgraded to for interpreter ``python`` (X.Y)."""
    v = Version(python)
    for cap_python, req in _PIP_CAPS:
        if (v.major, v.minor) == (cap_python.major, cap_python.minor):
            return req
    return "pip"


def nvidia_require_cuda(stack: Stack) -> tuple[str, str]:
    """(``NVIDIA_REQUIRE_CUDA`` value, why) for a GPU stack.

    The NVIDIA container runtime refuses to start a container whose constraint the host
    driver does not meet. ``cuda>=X.Y`` compares against the CUDA version the driver supports.
    With minor-version compatibility (CUDA 11+), an application built with X.Y runs on any
    driver of the X family from its floor up, even one that reports an older X.Z: ``cuda>=X.Y``
    would refuse drivers that work, so the constraint is on the driver itself
    (``driver>=min_driver``, a key of the runtime's NVIDIA_REQUIRE_* constraint syntax:
    https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html).
    The base image's own value (``cuda>=X.Y brand=...``) is replaced, so the image states one rule.
    """
    if stack.cuda is None:
        raise RenderError("a CPU stack has no NVIDIA_REQUIRE_CUDA", where=stack.name)
    if stack.minor_compat:
        if not stack.min_driver:
            raise RenderError(
                "stack has minor-version compatibility but no min_driver",
                where=f"{stack.name}: min_driver",
                fix="set the CUDA release's minor_compat_driver in the matrix",
            )
        return (
            f"driver>={stack.min_driver}",
            f"driver>={stack.min_driver}: CUDA {stack.cuda} runs on drivers down to the minor-version-"
            f"compatibility floor {stack.min_driver}, which cuda>={stack.cuda} would refuse.",
        )
    return (
        f"cuda>={stack.cuda}",
        f"cuda>={stack.cuda}: no minor-version compatibility for CUDA {stack.cuda}, so the driver must support it.",
    )


# --- the plan's sections ---------------------------------------------------------------------


@dataclass(frozen=True)
class BuilderOptions:
    """What differs between the two builders' Dockerfiles, for the steps that run pip."""

    kind: BuilderKind
    #: pip's cache option: ``--no-cache-dir`` (classic), or a cache mount's directory (BuildKit).
    pip_cache: str
    #: BuildKit with --ca-bundle: the commands that merge the mounted bundle into one file for pip
    #: and uv at the start of a step, and remove it at the end (classic: none, the system store has it).
    ca_prelude: str | None = None
    ca_cleanup: str | None = None

    @property
    def buildkit(self) -> bool:
        return self.kind == "buildkit"


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
    ca_env: tuple[str, ...] = ()  # ``NAME="value"`` for ENV, quoted
    pip_env: tuple[str, ...] = ()


@dataclass(frozen=True)
class OsPackages:
    """One apt step: update, install ``packages``, clean up."""

    apt_get: str  # ``apt-get`` with its options
    packages: tuple[str, ...]  # sorted, validated package names (``name`` or ``name=version``)
    #: Prefix of the install command (a project image sets DEBIAN_FRONTEND there; a stack image
    #: has it as a build ARG).
    install_env: str = ""
    mirror: str | None = None  # --apt-mirror: rewrite the sources' URIs first
    hide_nvidia_sources: bool = False  # set NVIDIA's apt sources aside while apt-get runs
    update_ca_certificates: bool = False  # add the copied CA bundle to the system store
    clean_lists: bool = True  # remove apt's lists (they are a cache mount on BuildKit)
    home: str | None = None  # a HOME made usable by any uid, with /etc/passwd and /etc/group
    mounts: tuple[Mount, ...] = ()  # BuildKit: apt's caches, the CA bundle


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
    mounts: tuple[Mount, ...]  # BuildKit: the caches, the CA bundle, the wheelhouse, the index secret
    pip_upgrade: str | None  # the venv pip's upgrade arguments; None: keep the bundled pip
    pip_note: str  # why the bundled pip stays ("" when it does not)
    venv: str = VENV
    venv_python: str = VENV_PYTHON
    # strategy "standalone": a bootstrap venv with uv installs python-build-standalone.
    bootstrap: str = BOOTSTRAP
    bootstrap_python: str = f"{BOOTSTRAP}/bin/python"
    bootstrap_pip: str | None = None
    bootstrap_flags: str = ""
    uv_requirement: str = sh_word(f"uv=={UV_VERSION}")
    uv_env: str = ""

    @property
    def exe(self) -> str:
        """The distribution's ``pythonX.Y`` (strategy "apt")."""
        return f"python{self.version}"


@dataclass(frozen=True)
class UvInstaller:
    """BuildKit, Python 3.8+: uv installs the framework, fetched once into a cache mount."""

    version: str
    requirement: str  # for pip, quoted
    tool: str  # where the fetched uv lives (a cache mount)
    cache: str
    fetch_flags: str  # pip options for fetching uv (the wheelhouse, offline)
    args: str  # ``uv pip install`` arguments: options, then the pins


@dataclass(frozen=True)
class Framework:
    """The matrix row's pinned packages (and the wheelhouse's wheels, installed first)."""

    title: str
    mounts: tuple[Mount, ...]  # BuildKit: the caches, the CA bundle, the wheelhouse, the index secret
    pip_args: str  # ``pip install`` arguments: index options, then the pins (quoted)
    wheel_paths: str  # the wheelhouse's wheels, quoted, space-separated ("" when none)
    installer: Literal["pip", "uv"] = "pip"
    uv: UvInstaller | None = None


@dataclass(frozen=True)
class CudaLibs:
    """The CUDA libraries the framework pins exactly, installed before it in a layer of their own:
    the same pins, index options and Python give the same step, so stacks share the layer."""

    title: str  # what pins them (``torch 2.5.1 (cu124)``)
    requirements: tuple[str, ...]  # ``name==version`` and its hashes, sorted (Stack.cuda_libs)
    mounts: tuple[Mount, ...]  # BuildKit: pip's cache, the CA bundle, the wheelhouse, the index secret
    #: ``pip install`` arguments: options, index options, then the pins (quoted), or ``-r FILE``
    #: when the pins have hashes (pip takes ``--hash`` in a requirements file only).
    pip_args: str
    #: With hashes: the requirements file's lines (quoted for printf) and where the step writes it.
    hashed_lines: tuple[str, ...] = ()
    requirements_file: str | None = None
    #: Classic builder, hashed pins: the arguments of a first ``pip install`` that takes the pins
    #: from the wheel store alone (:data:`WHEEL_STORE_URL`, no index, no retries); ``pip_args``
    #: follow when it cannot. Unquoted words.
    store_args: tuple[str, ...] = ()


@dataclass(frozen=True)
class Nvidia:
    """What the NVIDIA container runtime reads (GPU stacks only)."""

    env: tuple[str, ...]  # ``NAME="value"`` for ENV, quoted
    note: str  # why NVIDIA_REQUIRE_CUDA says what it says


@dataclass(frozen=True)
class Requirements:
    """A project's requirements layer: copy the files, install, check."""

    copy: tuple[str, ...]  # context files
    dest: str  # where COPY puts them
    python: str
    pip_options: str
    install: str  # what follows ``pip install <pip_options>``
    check: str | None = None  # a command run after the install (the lock's closure check)


@dataclass(frozen=True)
class PipPackages:
    """Packages pip installs on top of an image, with no files copied (the notebook layer)."""

    python: str
    pip_options: str
    requirements: tuple[str, ...]  # quoted for /bin/sh


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
    value: str  # quoted for the Dockerfile lexer

    @property
    def text(self) -> str:
        return f"{self.name}={self.value}"


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


# --- a stack image -----------------------------------------------------------------------------


def _title(stack: Stack) -> str:
    return f"{stack.framework} {stack.framework_version} ({stack.variant})"


def _has_wheel(wheels: list[Wheel], project: str, spec: str) -> bool:
    from packaging.specifiers import SpecifierSet

    ss = SpecifierSet(spec)
    return any(w.project == project and ss.contains(w.version, prereleases=True) for w in wheels)


def framework_sources(stack: Stack, options: RenderOptions) -> tuple[str | None, str | None, str | None]:
    """(index_url, extra_index_url, find_links) of the framework, after --framework-index."""
    index, extra, links = stack.index_url, stack.extra_index_url, stack.find_links
    if options.framework_index:
        if index:
            index = options.framework_index
        elif extra:
            extra = options.framework_index
        elif links:
            links = options.framework_index
    return index, extra, links


def pip_flags(stack: Stack, options: RenderOptions, wheels: list[Wheel]) -> list[str]:
    """pip's index options for the framework's pins (unquoted words)."""
    if options.offline:
        return ["--no-index", "--find-links", WHEELS_DIR]
    index, extra, links = framework_sources(stack, options)
    flags: list[str] = []
    extras: list[str] = []
    if index:
        flags += ["--index-url", index]
        # The framework index replaces PyPI (its own instructions say so); dependencies it lacks
        # still come from your PyPI replacement when you gave one.
        if options.pip_index:
            extras.append(options.pip_index)
    elif options.pip_index:
        flags += ["--index-url", options.pip_index]
    if extra:
        extras.append(extra)
    if options.pip_extra_index:
        extras.append(options.pip_extra_index)
    for x in dict.fromkeys(extras):
        flags += ["--extra-index-url", x]
    for fl in ([links] if links else []) + ([WHEELS_DIR] if wheels else []):
        flags += ["--find-links", fl]
    return flags


def _words(words: list[str]) -> str:
    """Shell words, each followed by a space."""
    return "".join(sh_word(w) + " " for w in words)


def _mounts(options: RenderOptions, *, wheels: bool, secret: bool) -> tuple[Mount, ...]:
    """The ``RUN --mount`` flags of one BuildKit pip/uv step: the caches, then what it reads."""
    mounts: list[Mount] = [CacheMount("envman-pip", PIP_CACHE), CacheMount("envman-uv", UV_CACHE),
                           CacheMount("envman-tools", TOOLS_CACHE)]
    if wheels:
        mounts.append(BindMount("wheels", WHEELS_DIR))
    if options.ca_bundle is not None:
        mounts.append(BindMount(CA_CONTEXT_FILE, CA_MOUNT))
    if secret:
        mounts.append(SecretMount(NETRC_SECRET, NETRC_TARGET))
    return tuple(mounts)


def builder_options(options: RenderOptions, builder: BuilderKind) -> BuilderOptions:
    if builder != "buildkit":
        return BuilderOptions("classic", "--no-cache-dir")
    if options.ca_bundle is None:
        return BuilderOptions("buildkit", f"--cache-dir {PIP_CACHE}")
    return BuilderOptions(
        "buildkit", f"--cache-dir {PIP_CACHE}",
        ca_prelude=(f"{{ cat {SYSTEM_CA} 2>/dev/null || true; cat {CA_MOUNT}; }} > {CA_MERGED}; "
                    f"export PIP_CERT={CA_MERGED} REQUESTS_CA_BUNDLE={CA_MERGED} SSL_CERT_FILE={CA_MERGED}"),
        ca_cleanup=f"rm -f {CA_MERGED}",
    )


def base_image(stack: Stack, options: RenderOptions, rebuilt_ref: str | None = None) -> BaseImage:
    """The FROM line: the matrix's base (through the registry mirror), or ``rebuilt_ref``, the
    image envman rebuilds it as from NVIDIA's recipe."""
    return BaseImage(
        image=stack.base_image,
        from_image=rebuilt_ref or mirror_image(stack.base_image, options.registry_mirror),
        platform=None if stack.platform == DEFAULT_PLATFORM else stack.platform,
        rebuilt=rebuilt_ref is not None,
    )


def network_options(options: RenderOptions, builder: BuilderKind) -> NetworkOptions:
    ca_env: tuple[str, ...] = ()
    if options.ca_bundle and builder != "buildkit":
        quoted = dockerfile_quote(SYSTEM_CA)
        ca_env = (*(f"{k}={quoted}" for k in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")),
                  f"UV_NATIVE_TLS={dockerfile_quote('1')}")
    pip_env = []
    if options.pip_index:
        pip_env.append(f"PIP_INDEX_URL={dockerfile_quote(options.pip_index, what='--pip-index')}")
    if options.pip_extra_index:
        pip_env.append(f"PIP_EXTRA_INDEX_URL={dockerfile_quote(options.pip_extra_index, what='--pip-extra-index')}")
    return NetworkOptions(
        ca_copy_dest=CA_DEST if options.ca_bundle is not None and builder != "buildkit" else None,
        ca_env=ca_env,
        pip_env=tuple(pip_env),
    )


def os_packages(stack: Stack, options: RenderOptions, builder: BuilderKind) -> OsPackages:
    """The stack's apt step: the Python the strategy needs, ca-certificates, and a HOME for any uid."""
    quirks = OS_QUIRKS.get(stack.os, OsQuirks())
    python = stack.python
    if options.apt_mirror and options.apt_mirror.startswith("https:") and not quirks.apt_https:
        raise RenderError(
            f"apt on {stack.os} cannot fetch https:// sources without apt-transport-https",
            where="--apt-mirror",
            fix="give the mirror's http:// URL (apt verifies packages by signature either way)",
        )
    packages = {"ca-certificates"}
    if stack.python_strategy == "standalone":
        if Version(python) < MIN_STANDALONE_PYTHON:
            raise RenderError(
                f"{stack.os} has no Python {python} and python-build-standalone starts at {MIN_STANDALONE_PYTHON}",
                where=f"stack {stack.row!r}",
                fix="choose a Python the OS packages, or a base image whose OS has it",
            )
        packages |= {"python3", "python3-venv"}
    else:
        packages |= {f"python{python}", f"python{python}-venv"}
    if quirks.distutils:  # for the venv's pip, or for the uv bootstrap venv's
        packages.add(quirks.distutils)

    ca = options.ca_bundle is not None
    mounts: tuple[Mount, ...] = ()
    if builder == "buildkit":
        mounts = (CacheMount(f"envman-apt-lists-{stack.os}", "/var/lib/apt/lists", "locked"),
                  CacheMount(f"envman-apt-archives-{stack.os}", APT_ARCHIVES, "locked"),
                  *([BindMount(CA_CONTEXT_FILE, CA_MOUNT)] if ca else []))
        apt_get = f"apt-get -o Dir::Cache::Archives={APT_ARCHIVES}/ -o APT::Keep-Downloaded-Packages=true"
        if ca:
            apt_get += f" -o Acquire::https::CAInfo={CA_MOUNT}"
    else:
        apt_get = f"apt-get -o Acquire::https::CAInfo={CA_DEST}" if options.ca_bundle else "apt-get"
    return OsPackages(
        apt_get=apt_get,
        packages=tuple(sorted(packages)),
        mirror=options.apt_mirror,
        hide_nvidia_sources=stack.cuda is not None,
        update_ca_certificates=ca and builder != "buildkit",
        clean_lists=builder != "buildkit",
        home=CONTAINER_HOME,
        mounts=mounts,
    )


def wheelhouse(options: RenderOptions, wheels: list[Wheel], builder: BuilderKind) -> Wheelhouse | None:
    if not wheels:
        return None
    copy: Literal["before-python", "after-python"] | None = None
    if builder != "buildkit":
        copy = "before-python" if options.offline else "after-python"
    return Wheelhouse(tuple(w.filename for w in wheels), WHEELS_DIR, copy)


def python_step(stack: Stack, options: RenderOptions, wheels: list[Wheel], builder: BuilderKind,
                secret: bool) -> Python:
    """The venv at :data:`VENV`: from the distribution's Python, or python-build-standalone via uv."""
    quirks = OS_QUIRKS.get(stack.os, OsQuirks())
    python = stack.python
    standalone = stack.python_strategy == "standalone"
    offline_flags = f"--no-index --find-links {WHEELS_DIR} " if options.offline else ""
    pip_req = pip_requirement(python)
    upgrade = f"--upgrade {sh_word(pip_req)}"
    pip_upgrade: str | None = upgrade
    pip_note = ""
    if options.offline:
        spec = pip_req[3:] or ">=0"
        if _has_wheel(wheels, "pip", spec):
            pip_upgrade = offline_flags + upgrade
        else:
            pip_upgrade = None
            pip_note = f"offline and no {pip_req} wheel in the wheelhouse: the interpreter's bundled pip stays"

    bootstrap_pip = None
    uv_env = ""
    if standalone:
        bootstrap_pip = sh_word(quirks.bootstrap_pip) if quirks.bootstrap_pip else None
        if options.offline:
            missing = []
            if not _has_wheel(wheels, "uv", f"=={UV_VERSION}"):
                missing.append(f"uv=={UV_VERSION}")
            if quirks.bootstrap_pip and not _has_wheel(wheels, "pip", quirks.bootstrap_pip[3:]):
                missing.append(quirks.bootstrap_pip)
            if missing:
                raise RenderError(
                    f"--offline with a standalone Python needs {' and '.join(missing)} in the wheelhouse",
                    where="--wheelhouse",
                    fix="pip download " + " ".join(shlex.quote(m) for m in missing) + " --no-deps --only-binary=:all: -d WHEELHOUSE",
                )
            if not options.python_install_mirror:
                raise RenderError(
                    f"--offline with a standalone Python {python} needs a python-build-standalone mirror",
                    where="--python-mirror",
                    fix="mirror the python-build-standalone release assets on your network and pass --python-mirror URL",
                )
        uv_cache = UV_CACHE if builder == "buildkit" else "/tmp/envman-uv-cache"
        assigns = [f"UV_PYTHON_INSTALL_DIR={PYTHON_DIR}", f"UV_CACHE_DIR={uv_cache}"]
        if options.python_install_mirror:
            assigns.append(f"UV_PYTHON_INSTALL_MIRROR={sh_word(options.python_install_mirror)}")
        uv_env = " ".join(assigns)

    mounts: tuple[Mount, ...] = ()
    if builder == "buildkit":
        mounts = _mounts(options, wheels=bool(wheels) and options.offline, secret=secret and not options.offline)
    return Python(stack.interpreter, "standalone" if standalone else "apt", stack.os, mounts, pip_upgrade, pip_note,
                  bootstrap_pip=bootstrap_pip, bootstrap_flags=offline_flags, uv_env=uv_env)


def framework(stack: Stack, options: RenderOptions, wheels: list[Wheel], builder: BuilderKind,
              secret: bool) -> Framework:
    """The matrix row's pins, after the wheelhouse's wheels; uv installs them on BuildKit from 3.8."""
    flags = pip_flags(stack, options, wheels)
    packages = " ".join(sh_word(p) for p in stack.packages)
    wheel_paths = " ".join(sh_word(f"{WHEELS_DIR}/{w.filename}") for w in wheels if w.project not in TOOL_WHEELS)
    if builder != "buildkit":
        return Framework(_title(stack), (), _words(flags) + packages, wheel_paths)
    mounts = _mounts(options, wheels=bool(wheels), secret=secret and not options.offline)
    if Version(stack.python) < MIN_UV_PYTHON:
        return Framework(_title(stack), mounts, _words(flags) + packages, wheel_paths)
    offline_flags = f"--no-index --find-links {WHEELS_DIR} " if options.offline else ""
    uv = UvInstaller(
        version=UV_VERSION,
        requirement=sh_word(f"uv=={UV_VERSION}"),
        tool=UV_TOOL,
        cache=UV_CACHE,
        fetch_flags=offline_flags or (f"--find-links {WHEELS_DIR} " if any(w.project == "uv" for w in wheels) else ""),
        args="--index-strategy unsafe-best-match " + _words(flags) + packages,
    )
    return Framework(_title(stack), mounts, _words(flags) + packages, wheel_paths, installer="uv", uv=uv)


def cuda_libs(stack: Stack, options: RenderOptions, wheels: list[Wheel], builder: BuilderKind,
              secret: bool) -> CudaLibs | None:
    """The stack's CUDA-library layer, when its row pins CUDA libraries. pip installs exactly the
    pins (no dependencies, wheels only, no bytecode), through the framework's index options, so
    the layer holds the same files wherever and whenever it is built."""
    if not stack.cuda_libs:
        return None
    for line in stack.cuda_libs:
        if not _CUDA_LIB_RE.fullmatch(line):
            raise RenderError(f"CUDA library pin {line!r} is not name==version with sha256 hashes", where=stack.name,
                              fix="fix the row's cuda_libs and cuda_libs_sha256 (envman matrix validate)")
    hashed = [" --hash=" in line for line in stack.cuda_libs]
    if any(hashed) and not all(hashed):
        raise RenderError("some CUDA library pins have hashes and some do not", where=stack.name,
                          fix="give cuda_libs_sha256 for every pin of the row, or for none")
    mounts: tuple[Mount, ...] = ()
    if builder == "buildkit":
        mounts = tuple(m for m in _mounts(options, wheels=bool(wheels), secret=secret and not options.offline)
                       if not isinstance(m, CacheMount) or m.target == PIP_CACHE)
    head = "--no-deps --only-binary=:all: --no-compile " + _words(pip_flags(stack, options, wheels))
    if not any(hashed):
        return CudaLibs(_title(stack), stack.cuda_libs, mounts, head + " ".join(sh_word(r) for r in stack.cuda_libs))
    store: tuple[str, ...] = ()
    if builder == "classic" and not options.offline:
        # BuildKit keeps downloads in its pip cache mount; the classic builder has none. No retries
        # and a short timeout: a build nobody serves (or a host whose firewall drops the build
        # network's traffic to it) goes on to the index at once, or after at most 10 s
        store = ("--require-hashes", "--no-deps", "--only-binary=:all:", "--no-compile", "--no-index", "--retries", "0",
                 "--timeout", "10", "--find-links", WHEEL_STORE_URL, "--trusted-host", WHEEL_STORE_HOST,  # plain HTTP: the hashes are what is trusted
                 "-r", CUDA_LIBS_FILE)
    return CudaLibs(_title(stack), stack.cuda_libs, mounts, f"--require-hashes {head}-r {CUDA_LIBS_FILE}",
                    hashed_lines=tuple(sh_word(r) for r in stack.cuda_libs), requirements_file=CUDA_LIBS_FILE,
                    store_args=store)


def nvidia(stack: Stack) -> Nvidia | None:
    if stack.cuda is None:
        return None
    require, note = nvidia_require_cuda(stack)
    return Nvidia(
        env=(f"NVIDIA_VISIBLE_DEVICES={dockerfile_quote('all')}",
             f"NVIDIA_DRIVER_CAPABILITIES={dockerfile_quote('compute,utility')}",
             f"NVIDIA_REQUIRE_CUDA={dockerfile_quote(require)}"),
        note=note,
    )


def stack_labels(stack: Stack) -> tuple[Label, ...]:
    """The :data:`STACK_LABELS` of a stack image, with their quoted values."""
    values = {
        L.MANAGED: dockerfile_quote(L.TRUE),
        L.NAME: dockerfile_quote(stack.name, what="stack name"),
        L.STACK: dockerfile_quote(stack_label_json(stack), what="stack JSON"),
        L.VERSION: dockerfile_quote(__version__, what="envman version"),
    }
    return tuple(Label(name, values[name]) for name in STACK_LABELS)


def envman_files() -> EnvmanFiles:
    return EnvmanFiles(files=ENVMAN_FILES, dir=ENVMAN_DIR, home=CONTAINER_HOME, entrypoint=f"{ENVMAN_DIR}/entrypoint.sh",
                       cmd="python")


def stack_plan(stack: Stack, options: RenderOptions, wheels: list[Wheel], builder: BuilderKind = "classic",
               secret: bool = False, rebuilt_base: str | None = None) -> DockerfilePlan:
    """The plan of ``stack``'s image (``stack`` checked by ``check_stack``, ``wheels`` selected
    from the wheelhouse); ``secret``: index credentials travel as the build secret
    :data:`NETRC_SECRET` (BuildKit); ``rebuilt_base``: the image that stands for the stack's
    base, rebuilt from NVIDIA's recipe."""
    target = f"CUDA {stack.cuda}" if stack.cuda else "CPU"
    summary = (
        f"{_title(stack)}, {target}, Python {stack.python} ({stack.python_strategy}), {stack.os}, "
        f"{stack.flavour} flavour; matrix row {stack.row}"
    )
    return DockerfilePlan(
        template="Dockerfile.j2",
        title=(f"Generated by envman {__version__}; do not edit: envman render {stack.name}", summary),
        builder=builder_options(options, builder),
        base=base_image(stack, options, rebuilt_base),
        os_packages=os_packages(stack, options, builder),
        network=network_options(options, builder),
        wheelhouse=wheelhouse(options, wheels, builder),
        python=python_step(stack, options, wheels, builder, secret),
        framework=framework(stack, options, wheels, builder, secret),
        cuda_libs=cuda_libs(stack, options, wheels, builder, secret),
        nvidia=nvidia(stack),
        envman_files=envman_files(),
        labels=stack_labels(stack),
    )


# --- a project image ---------------------------------------------------------------------------

# What may reach a project image's Dockerfile. The project file's parser checks the same; these
# are checked again here, whole (a ``$`` in ``re.match`` also accepts a trailing newline).
_PROJECT_NAME_RE = re.compile(PROJECT_NAME_PATTERN)
_STACK_NAME_RE = re.compile(STACK_NAME_PATTERN)
_APT_RE = re.compile(APT_PACKAGE_PATTERN)
_IMAGE_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9:._-]{0,127}")


def _checked(value: str, pattern: re.Pattern[str], what: str, where: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise RenderError(f"{what} {value!r} cannot go into a Dockerfile", where=where,
                          fix="fix the project file (envman project validate names what it accepts)")
    return value


def project_requirements(locked: bool, report_path: str) -> Requirements:
    """The requirements layer: with a lock, exactly its pins with their hashes, then the check that
    the lock names nothing the requirements do not need; without, a resolve that leaves pip's
    install report at ``report_path`` for the next lock."""
    options = "--no-cache-dir --disable-pip-version-check"
    if locked:
        return Requirements(
            copy=("requirements.txt", LOCK_CONTEXT_FILE, "lockcheck.py"),
            dest=f"{PROJECT_DIR}/",
            python=VENV_PYTHON,
            pip_options=options,
            install=f"--require-hashes -r {PROJECT_DIR}/{LOCK_CONTEXT_FILE}",
            check=f"{VENV_PYTHON} {PROJECT_DIR}/lockcheck.py {PROJECT_DIR}/requirements.txt {PROJECT_DIR}/{LOCK_CONTEXT_FILE}",
        )
    return Requirements(
        copy=("requirements.txt",),
        dest=f"{PROJECT_DIR}/requirements.txt",
        python=VENV_PYTHON,
        pip_options=options,
        install=f"--report {report_path} -r {PROJECT_DIR}/requirements.txt",
    )


#: The network options a layer on an envman image (a project image, the notebook layer) has no use
#: for: it is built FROM a local image id (no registry is asked), installs no framework and no
#: Python, and resolves its requirements through an index (no wheelhouse).
LAYER_UNUSED_OPTIONS = frozenset({"registry_mirror", "framework_index", "python_install_mirror", "wheelhouse", "offline"})


@dataclass(frozen=True)
class LayerNetwork:
    """How a layer's RUN steps reach the network (--ca-bundle, --pip-index, --pip-extra-index,
    --apt-mirror), for the classic builder: the bundle is copied in and merged with the system
    store at the start of each step; the indexes are exported for that step only."""

    builder: BuilderOptions
    network: NetworkOptions | None
    apt_get: str
    apt_mirror: str | None


def layer_network(options: RenderOptions | None) -> LayerNetwork:
    """A layer's network settings from ``options`` (``None``: none). An index URL that carries
    credentials is left out: the classic builder would keep it in the image's history, and a
    secret never goes into a layer; pip then uses the stack image's own index settings."""
    plain = LayerNetwork(BuilderOptions("classic", "--no-cache-dir"), None, "apt-get", None)
    if options is None:
        return plain
    secret = options.credentials()
    prelude: list[str] = []
    exports: list[str] = []
    if options.ca_bundle is not None:
        prelude.append(f"{{ cat {SYSTEM_CA} 2>/dev/null || true; cat {CA_MOUNT}; }} > {CA_MERGED}")
        exports += [f"{k}={CA_MERGED}" for k in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")]
    for key, var in (("pip_index", "PIP_INDEX_URL"), ("pip_extra_index", "PIP_EXTRA_INDEX_URL")):
        value = getattr(options, key)
        if value and key not in secret:
            exports.append(f"{var}={sh_word(value)}")
    if exports:
        prelude.append("export " + " ".join(exports))
    ca = options.ca_bundle is not None
    if not prelude and not options.apt_mirror:
        return plain
    return LayerNetwork(
        builder=BuilderOptions("classic", "--no-cache-dir", ca_prelude="; ".join(prelude) if prelude else None,
                               ca_cleanup=f"rm -f {CA_MERGED}" if ca else None),
        network=NetworkOptions(ca_copy_dest=CA_MOUNT) if ca else None,
        apt_get=f"apt-get -o Acquire::https::CAInfo={CA_MERGED}" if ca else "apt-get",
        apt_mirror=options.apt_mirror,
    )


def project_plan(name: str, stack_name: str, base_image_id: str, *, apt: tuple[str, ...] = (),
                 requirements: bool = False, locked: bool = False, report_path: str, where: str,
                 network: RenderOptions | None = None) -> DockerfilePlan:
    """The plan of a project's image on its stack's promoted image, pinned by id (a tag moving
    during a build cannot mix two bases): its ``apt`` packages, then its requirements when it has
    any (``locked``: installed from a matching ``envman.lock``). ``where`` names the project file
    in errors. The project layer (``envman.project.image``) passes its config's values in;
    ``network``: the mirrors, CA bundle and indexes its steps reach the network through."""
    name = _checked(name, _PROJECT_NAME_RE, "project name", where)
    stack_name = _checked(stack_name, _STACK_NAME_RE, "stack name", where)
    base_image_id = _checked(base_image_id, _IMAGE_ID_RE, "base image id", where)
    packages = tuple(_checked(p, _APT_RE, "apt package", f"{where}: apt") for p in apt)
    net = layer_network(network)
    return DockerfilePlan(
        template="project.Dockerfile.j2",
        title=(f"envman project image for {name}: stack {stack_name} ({stable_ref(stack_name)}). Generated.",),
        builder=net.builder,
        base=BaseImage(image=base_image_id, from_image=base_image_id),
        os_packages=OsPackages(apt_get=net.apt_get, packages=packages, mirror=net.apt_mirror,
                               install_env="DEBIAN_FRONTEND=noninteractive ") if packages else None,
        network=net.network,
        project=Project(name, stack_name, project_requirements(locked, report_path) if requirements else None),
    )


_PIP_REQUIREMENT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._\[\],<>=!~ -]{0,199}")


def notebook_plan(base_image_id: str, requirement: str, network: RenderOptions | None = None) -> DockerfilePlan:
    """The notebook layer (``envman notebook``): ``requirement`` (JupyterLab) pip-installed into
    the venv of the image a project runs on, pinned by id, through ``network``'s CA bundle and
    indexes."""
    base_image_id = _checked(base_image_id, _IMAGE_ID_RE, "base image id", "envman notebook")
    requirement = _checked(requirement, _PIP_REQUIREMENT_RE, "requirement", "envman notebook")
    net = layer_network(network)
    return DockerfilePlan(
        template="project.Dockerfile.j2",
        title=("envman notebook layer: JupyterLab on top of the project's image. Generated.",),
        builder=net.builder,
        base=BaseImage(image=base_image_id, from_image=base_image_id),
        os_packages=None,
        network=net.network,
        pip_packages=PipPackages(VENV_PYTHON, "--no-cache-dir --disable-pip-version-check", (f'"{requirement}"',)),
    )


__all__ = [
    "BUILDER_KINDS",
    "BaseImage",
    "BuilderKind",
    "BuilderOptions",
    "DockerfilePlan",
    "EnvmanFiles",
    "Framework",
    "LAYER_UNUSED_OPTIONS",
    "Label",
    "LayerNetwork",
    "NetworkOptions",
    "Nvidia",
    "OsPackages",
    "PipPackages",
    "Project",
    "Python",
    "Requirements",
    "UvInstaller",
    "Wheelhouse",
    "layer_network",
    "notebook_plan",
    "nvidia_require_cuda",
    "pip_requirement",
    "project_plan",
    "stack_plan",
]
