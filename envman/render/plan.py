"""The Dockerfile plan: what an image's Dockerfile says, as typed, frozen sections.

A :class:`DockerfilePlan` is built by a pure function (:func:`stack_plan` for a stack image,
:func:`envman.render.layerplan.project_plan` for a project image and the notebook layer). Python
computes every pin, flag, path, BuildKit mount and quoted value here, in layer order:

    base -> os_packages -> python -> framework -> nvidia -> pip_packages / project
         -> envman_files -> labels

:mod:`envman.render.layout` then lays the plan out as Dockerfile steps (:mod:`envman.render.steps`
writes each instruction), and the templates (``templates/dockerfiles``, see
:mod:`envman.render.template`) only print those steps.

A section a kind of image does not have is ``None`` (a project image has no ``python`` or
``framework``; a stack image has no ``project``; a CPU stack has no ``nvidia``). Values that land
hold what a command is given as argument lists (tuples of words) and LABEL/ENV values as they are
(checked here, :func:`envman.render.quote.check_dockerfile_value`): the layout quotes them where the
Dockerfile is written, for the Dockerfile lexer (:func:`envman.render.quote.dockerfile_quote`) or
for /bin/sh (:func:`envman.render.quote.sh_word`).
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
from envman.render.imagepaths import (
    APT_ARCHIVES, CA_CONTEXT_FILE, CA_DEST, CA_MOUNT, CA_STEP_ENV, CUDA_LIBS_FILE, ENVMAN_DIR, ENVMAN_FILES,
    MIN_UV_PYTHON, NETRC_SECRET, NETRC_TARGET, NO_PIP_CACHE, PIP_CACHE, PYTHON_DIR, STACK_LABELS, SYSTEM_CA,
    TOOL_WHEELS, TOOLS_CACHE, UV_CACHE, UV_TOOL, UV_VERSION, WHEEL_STORE_HOST, WHEEL_STORE_URL, WHEELS_DIR,
    BuilderKind,
)
from envman.render.quote import check_dockerfile_value, mirror_image, stack_label_json
from envman.render.sections import (
    BaseImage, BuilderOptions, CudaLibs, DockerfilePlan, EnvmanFiles, Framework, Label, NetworkOptions, Nvidia,
    OsPackages, Python, UvInstaller, Wheelhouse,
)
from envman.render.steps import BindMount, CacheMount, BuildMount, SecretMount
from envman.paths import CONTAINER_HOME
from envman.stack.names import DEFAULT_PLATFORM, MIN_STANDALONE_PYTHON as STANDALONE_FROM, Stack

if TYPE_CHECKING:  # the run path builds project plans: it must not import what render_stack needs
    from envman.render.options import RenderOptions
    from envman.render.wheels import Wheel

#: A CUDA-library pin as it reaches the step: ``name==version`` and any sha256 hashes.
_CUDA_LIB_RE = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*==[0-9A-Za-z.+!]+(?: --hash=sha256:[0-9a-f]{64})*")

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
MIN_STANDALONE_PYTHON = Version(STANDALONE_FROM)


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


def _mounts(options: RenderOptions, *, wheels: bool, secret: bool) -> tuple[BuildMount, ...]:
    """The ``RUN --mount`` flags of one BuildKit pip/uv step: the caches, then what it reads."""
    mounts: list[BuildMount] = [CacheMount("envman-pip", PIP_CACHE), CacheMount("envman-uv", UV_CACHE),
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
        return BuilderOptions("classic", NO_PIP_CACHE)
    if options.ca_bundle is None:
        return BuilderOptions("buildkit", ("--cache-dir", PIP_CACHE))
    return BuilderOptions("buildkit", ("--cache-dir", PIP_CACHE), ca_source=CA_MOUNT, step_env=CA_STEP_ENV)


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
    ca_env: tuple[tuple[str, str], ...] = ()
    if options.ca_bundle and builder != "buildkit":
        ca_env = (*((k, SYSTEM_CA) for k in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")), ("UV_NATIVE_TLS", "1"))
    pip_env = []
    if options.pip_index:
        pip_env.append(("PIP_INDEX_URL", check_dockerfile_value(options.pip_index, what="--pip-index")))
    if options.pip_extra_index:
        pip_env.append(("PIP_EXTRA_INDEX_URL", check_dockerfile_value(options.pip_extra_index, what="--pip-extra-index")))
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
    mounts: tuple[BuildMount, ...] = ()
    if builder == "buildkit":
        mounts = (CacheMount(f"envman-apt-lists-{stack.os}", "/var/lib/apt/lists", "locked"),
                  CacheMount(f"envman-apt-archives-{stack.os}", APT_ARCHIVES, "locked"),
                  *([BindMount(CA_CONTEXT_FILE, CA_MOUNT)] if ca else []))
        apt_get: tuple[str, ...] = ("apt-get", "-o", f"Dir::Cache::Archives={APT_ARCHIVES}/", "-o", "APT::Keep-Downloaded-Packages=true")
        if ca:
            apt_get += ("-o", f"Acquire::https::CAInfo={CA_MOUNT}")
    else:
        apt_get = ("apt-get", "-o", f"Acquire::https::CAInfo={CA_DEST}") if options.ca_bundle else ("apt-get",)
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


#: pip's options when it installs from the wheelhouse alone (--offline).
OFFLINE_FLAGS = ("--no-index", "--find-links", WHEELS_DIR)


def python_step(stack: Stack, options: RenderOptions, wheels: list[Wheel], builder: BuilderKind,
                secret: bool) -> Python:
    """The venv at :data:`VENV`: from the distribution's Python, or python-build-standalone via uv."""
    quirks = OS_QUIRKS.get(stack.os, OsQuirks())
    python = stack.python
    standalone = stack.python_strategy == "standalone"
    offline_flags = OFFLINE_FLAGS if options.offline else ()
    pip_req = pip_requirement(python)
    upgrade = ("--upgrade", pip_req)
    pip_upgrade: tuple[str, ...] | None = upgrade
    pip_note = ""
    if options.offline:
        spec = pip_req[3:] or ">=0"
        if _has_wheel(wheels, "pip", spec):
            pip_upgrade = offline_flags + upgrade
        else:
            pip_upgrade = None
            pip_note = f"offline and no {pip_req} wheel in the wheelhouse: the interpreter's bundled pip stays"

    bootstrap_pip = None
    uv_env: tuple[tuple[str, str], ...] = ()
    if standalone:
        bootstrap_pip = quirks.bootstrap_pip
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
        uv_env = (("UV_PYTHON_INSTALL_DIR", PYTHON_DIR), ("UV_CACHE_DIR", uv_cache))
        if options.python_install_mirror:
            uv_env += (("UV_PYTHON_INSTALL_MIRROR", options.python_install_mirror),)

    mounts: tuple[BuildMount, ...] = ()
    if builder == "buildkit":
        mounts = _mounts(options, wheels=bool(wheels) and options.offline, secret=secret and not options.offline)
    return Python(stack.interpreter, "standalone" if standalone else "apt", stack.os, mounts, pip_upgrade, pip_note,
                  bootstrap_pip=bootstrap_pip, bootstrap_flags=offline_flags, uv_env=uv_env)


def framework(stack: Stack, options: RenderOptions, wheels: list[Wheel], builder: BuilderKind,
              secret: bool) -> Framework:
    """The matrix row's pins, after the wheelhouse's wheels; uv installs them on BuildKit from 3.8."""
    pip_args = (*pip_flags(stack, options, wheels), *stack.packages)
    wheel_paths = tuple(f"{WHEELS_DIR}/{w.filename}" for w in wheels if w.project not in TOOL_WHEELS)
    if builder != "buildkit":
        return Framework(_title(stack), (), pip_args, wheel_paths)
    mounts = _mounts(options, wheels=bool(wheels), secret=secret and not options.offline)
    if Version(stack.python) < Version(MIN_UV_PYTHON):
        return Framework(_title(stack), mounts, pip_args, wheel_paths)
    uv = UvInstaller(
        version=UV_VERSION,
        requirement=f"uv=={UV_VERSION}",
        tool=UV_TOOL,
        cache=UV_CACHE,
        fetch_flags=OFFLINE_FLAGS if options.offline else
        (("--find-links", WHEELS_DIR) if any(w.project == "uv" for w in wheels) else ()),
        args=("--index-strategy", "unsafe-best-match", *pip_args),
    )
    return Framework(_title(stack), mounts, pip_args, wheel_paths, installer="uv", uv=uv)


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
    mounts: tuple[BuildMount, ...] = ()
    if builder == "buildkit":
        mounts = tuple(m for m in _mounts(options, wheels=bool(wheels), secret=secret and not options.offline)
                       if not isinstance(m, CacheMount) or m.target == PIP_CACHE)
    head = ("--no-deps", "--only-binary=:all:", "--no-compile", *pip_flags(stack, options, wheels))
    if not any(hashed):
        return CudaLibs(_title(stack), stack.cuda_libs, mounts, (*head, *stack.cuda_libs))
    store: tuple[str, ...] = ()
    if builder == "classic" and not options.offline:
        # BuildKit keeps downloads in its pip cache mount; the classic builder has none. No retries
        # and a short timeout: a build nobody serves (or a host whose firewall drops the build
        # network's traffic to it) goes on to the index at once, or after at most 10 s
        store = ("--require-hashes", "--no-deps", "--only-binary=:all:", "--no-compile", "--no-index", "--retries", "0",
                 "--timeout", "10", "--find-links", WHEEL_STORE_URL, "--trusted-host", WHEEL_STORE_HOST,  # plain HTTP: the hashes are what is trusted
                 "-r", CUDA_LIBS_FILE)
    return CudaLibs(_title(stack), stack.cuda_libs, mounts, ("--require-hashes", *head, "-r", CUDA_LIBS_FILE),
                    requirements_file=CUDA_LIBS_FILE, store_args=store)


def nvidia(stack: Stack) -> Nvidia | None:
    if stack.cuda is None:
        return None
    require, note = nvidia_require_cuda(stack)
    return Nvidia(
        env=(("NVIDIA_VISIBLE_DEVICES", "all"), ("NVIDIA_DRIVER_CAPABILITIES", "compute,utility"),
             ("NVIDIA_REQUIRE_CUDA", check_dockerfile_value(require, what="NVIDIA_REQUIRE_CUDA"))),
        note=note,
    )


def stack_labels(stack: Stack) -> tuple[Label, ...]:
    """The :data:`STACK_LABELS` of a stack image, with their values (checked)."""
    values = {
        L.MANAGED: L.TRUE,
        L.NAME: check_dockerfile_value(stack.name, what="stack name"),
        L.STACK: check_dockerfile_value(stack_label_json(stack), what="stack JSON"),
        L.VERSION: check_dockerfile_value(__version__, what="envman version"),
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


__all__ = [
    "nvidia_require_cuda",
    "pip_requirement",
    "stack_plan",
]
