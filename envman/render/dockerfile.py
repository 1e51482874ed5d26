"""Render a resolved ``Stack`` into a Docker build context: a Dockerfile plus the files it copies.

Rendering never needs a Docker engine. The split follows repo2docker: this module answers small
questions with plain data (which packages, which pins, which pip flags, which quoted LABEL
values), and one strict Jinja template (``templates/dockerfiles/Dockerfile.j2``) lays them out.
Two renders of the same inputs are byte-identical.

Safety: every value that reaches the template is validated against a strict pattern first
(``check_stack`` and the validators of ``envman.config``); values that land in LABEL/ENV are
quoted for the Dockerfile lexer by ``dockerfile_quote``; words that land in RUN lines are quoted
for /bin/sh by ``shlex.quote`` (there the shell *is* the lexer). Anything else is a
``RenderError`` naming the field.

The build context (``BuildContext``)::

    Dockerfile
    envman/entrypoint.sh      -> /opt/envman/entrypoint.sh (templates/dockerfiles/entrypoint.sh)
    envman/probe.pyz          -> /opt/envman/probe.pyz     (envman/probe/app, see envman.probe.pyz)
    envman/stack.json         -> /opt/envman/stack.json    (Stack.to_json())
    envman/ca-bundle.crt      -> /usr/local/share/ca-certificates/envman-ca.crt  (--ca-bundle)
    wheels/*.whl              -> /opt/envman/wheels/       (--wheelhouse)

Render hash: sha256 of a manifest in ``sha256sum`` format (``<sha256 of file>  <path>\\n`` for
every context file, sorted by path), where the Dockerfile's own digest is taken over the
Dockerfile without its last line, the ``LABEL envman.render-hash=...`` line. ``verify_context``
recomputes it for a written context; so does this shell line (coreutils)::

    cd CONTEXT && { head -n -1 Dockerfile | sha256sum | sed 's/ -$/ Dockerfile/';
      find . -type f ! -path ./Dockerfile -printf '%P\\0' | xargs -0 -r sha256sum; } |
      LC_ALL=C sort -k 2 | sha256sum
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import os
import re
import shlex
import shutil
import tarfile
import tempfile
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

from packaging.specifiers import SpecifierSet
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from envman import __version__
from envman.config import (
    CREDENTIAL_KEYS,
    NETWORK_KEYS,
    Invalid,
    check_url,
    load_network_config,
    redact,
    split_credentials,
    validate_network,
)
from envman import labels as L
from envman.errors import RenderError, UserError
from envman.probe import IMAGE_DIR, PROBE_FILE, ProbeSourceMissing, probe_archive
from envman.stack.names import DEFAULT_PLATFORM, FLAVOURS, PLATFORM_SUFFIX
from envman.stack.names import Stack
from envman.render.wheels import Target, Wheel as _Wheel, select_wheels

# --- where things go in the image ------------------------------------------------------------

VENV = "/opt/venv"
ENVMAN_DIR = IMAGE_DIR
WHEELS_DIR = f"{ENVMAN_DIR}/wheels"
PYTHON_DIR = f"{ENVMAN_DIR}/python"  # python-build-standalone installs (strategy "standalone")
HOME = "/home/envman"
CA_DEST = "/usr/local/share/ca-certificates/envman-ca.crt"
SYSTEM_CA = "/etc/ssl/certs/ca-certificates.crt"  # what update-ca-certificates writes (Debian/Ubuntu)
BOOTSTRAP = "/tmp/envman-uv"

#: uv, pinned: it installs python-build-standalone for Pythons the distribution lacks.
UV_VERSION = "0.13.8"

#: Wheels of these projects in a wheelhouse serve the Python layer (the venv's pip upgrade, the
#: uv bootstrap); they are not force-installed into the venv with the others.
TOOL_WHEELS = frozenset({"pip", "uv"})

#: The two Dockerfile dialects: the classic builder's, and BuildKit's (RUN --mount).
BUILDER_KINDS = ("classic", "buildkit")

# BuildKit only: where the cache mounts, the bind-mounted CA bundle and uv live during a RUN.
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

RENDER_HASH_LABEL = L.RENDER_HASH
PROBE_CONTEXT_FILE = f"envman/{PROBE_FILE}"
CONTEXT_FILES = ("Dockerfile", "envman/entrypoint.sh", PROBE_CONTEXT_FILE, "envman/stack.json")

# --- strict patterns for every Stack field that reaches the Dockerfile ------------------------

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._+-]{0,127}$")
_WORD_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
_VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.+!_-]{0,63}$")
_PYTHON_RE = re.compile(r"^\d\.\d{1,2}$")
_CUDA_RE = re.compile(r"^\d{1,2}\.\d{1,2}$")
_DRIVER_RE = re.compile(r"^\d{1,4}(?:\.\d{1,4}){0,2}$")
_OS_RE = re.compile(r"^[a-z][a-z0-9]*\d+(?:\.\d+)?$")
REQUIREMENT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[a-z0-9,_-]+\])?==[A-Za-z0-9.+!_-]+$")
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REPO_PATH_RE = re.compile(rf"^{_COMPONENT}(?:/{_COMPONENT})*$")
_TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
_REGISTRY_HOST_RE = re.compile(r"^(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$")
_WHEEL_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+!-]*\.whl$")
DOCKER_HUB = ("docker.io", "index.docker.io", "registry-1.docker.io")

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


# --- quoting ---------------------------------------------------------------------------------


def dockerfile_quote(value: str, *, what: str = "value") -> str:
    """``value`` as a double-quoted word for a Dockerfile LABEL or ENV instruction.

    Inside double quotes Docker's lexer unescapes ``\\"``, ``\\$`` and ``\\\\`` and leaves any
    other backslash as it is; ``$`` would expand a variable. So ``"`` and ``$`` are escaped, and
    a backslash is escaped only where the lexer would otherwise consume it (before ``"``, ``$``,
    ``\\`` or at the end): a backslash before an ordinary character is written as it is, which
    every Docker version (old lexers did not unescape ``\\\\``) and dockerfile-parse read alike.
    A newline cannot be carried at all (it ends the instruction), nor can any other control
    character: those are a ``RenderError``. ``shlex.quote`` is the wrong tool here: the
    Dockerfile lexer does not know single quotes inside LABEL/ENV values the way sh does.
    """
    if not isinstance(value, str):
        raise RenderError(f"{what} must be a string, got {type(value).__name__}")
    for ch in value:
        if not (" " <= ch <= "~"):
            raise RenderError(
                f"{what} contains {ch!r}, which a Dockerfile LABEL/ENV value cannot carry",
                fix="use printable ASCII only (no newlines or control characters)",
            )
    out = []
    n = len(value)
    for i, ch in enumerate(value):
        if ch in '"$':
            out.append("\\" + ch)
        elif ch == "\\":
            nxt = value[i + 1] if i + 1 < n else ""
            out.append("\\\\" if nxt in ('"', "$", "\\", "") else "\\")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _sh(word: str) -> str:
    """A word for /bin/sh in a RUN line (values are validated first; this is belt and braces)."""
    return shlex.quote(word)


_JSON_ESCAPE_RE = re.compile(r"\\(.)")


def stack_label_json(stack: Stack) -> str:
    """Compact, sorted-keys JSON of the stack, for the ``envman.stack`` label.

    Plain ``json.dumps`` except that a quote or backslash inside a string is written as
    ``\\u0022`` / ``\\u005c`` and ``$`` as ``\\u0024`` (equally valid JSON): then the only
    backslashes left precede ordinary letters, which every Dockerfile lexer keeps as they are,
    and the label reads back exactly, whatever text a matrix note holds.
    """
    text = json.dumps(stack.to_json(), sort_keys=True, separators=(",", ":"), ensure_ascii=True)

    def sub(m: re.Match[str]) -> str:
        c = m.group(1)
        return {"\\": "\\u005c", '"': "\\u0022"}.get(c, m.group(0))

    return _JSON_ESCAPE_RE.sub(sub, text).replace("$", "\\u0024")


# --- image references ------------------------------------------------------------------------


@dataclass(frozen=True)
class ImageRef:
    registry: str | None  # None: Docker Hub
    path: str  # "nvidia/cuda", "ubuntu"
    tag: str | None
    digest: str | None

    def __str__(self) -> str:
        s = f"{self.registry}/{self.path}" if self.registry else self.path
        if self.tag:
            s += f":{self.tag}"
        if self.digest:
            s += f"@{self.digest}"
        return s


def parse_image_ref(ref: str) -> ImageRef:
    """Parse a Docker image reference strictly; it must carry a tag or a digest."""
    if not isinstance(ref, str) or not ref or len(ref) > 255:
        raise RenderError(f"base image reference {ref!r} is not valid", fix="e.g. nvidia/cuda:12.4.1-base-ubuntu22.04")
    rest, _, digest = ref.partition("@")
    registry = None
    first, slash, remainder = rest.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        registry, rest = first, remainder
    tag = None
    last = rest.rsplit("/", 1)[-1]
    if ":" in last:
        rest, tag = rest.rsplit(":", 1)
    bad = (
        (registry is not None and not _REGISTRY_HOST_RE.fullmatch(registry))
        or not _REPO_PATH_RE.fullmatch(rest)
        or (tag is not None and not _TAG_RE.fullmatch(tag))
        or (digest and not _DIGEST_RE.fullmatch(digest))
    )
    if bad:
        raise RenderError(
            f"base image reference {ref!r} is not valid",
            fix="use [REGISTRY/]REPOSITORY:TAG[@sha256:DIGEST] with lowercase repository components",
        )
    if tag is None and not digest:
        raise RenderError(
            f"base image reference {ref!r} has no tag",
            fix="pin a tag (e.g. ubuntu:22.04); an untagged base means :latest, which changes under you",
        )
    return ImageRef(registry, rest, tag, digest or None)


def mirror_image(ref: str, mirror: str | None) -> str:
    """The ``FROM`` reference for ``ref`` through a Docker Hub mirror.

    ``nvidia/cuda:12.4.1-base-ubuntu22.04`` -> ``MIRROR/nvidia/cuda:12.4.1-base-ubuntu22.04``;
    an official library image ``ubuntu:22.04`` -> ``MIRROR/library/ubuntu:22.04`` (Docker Hub's
    real repository name: pull-through caches such as registry:2 proxies, Harbor and Artifactory
    need the ``library/`` the Docker client adds only for docker.io). A reference that names
    another registry (``nvcr.io/...``, a private base) is left alone: the mirror stands in for
    Docker Hub only.
    """
    parsed = parse_image_ref(ref)
    if mirror is None or (parsed.registry is not None and parsed.registry not in DOCKER_HUB):
        return str(parsed)
    path = parsed.path if "/" in parsed.path else f"library/{parsed.path}"
    return str(ImageRef(mirror, path, parsed.tag, parsed.digest))


# --- validation of a Stack --------------------------------------------------------------------


def _bad(stack: Stack, key: str, expected: str, value: Any) -> RenderError:
    return RenderError(
        f"{key} {value!r} is not safe to render: expected {expected}",
        where=f"stack {getattr(stack, 'row', '?')!r}",
        fix="fix the matrix row (format: matrices/README.md)",
    )


def _match(stack: Stack, key: str, value: Any, pattern: re.Pattern[str], expected: str, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise _bad(stack, key, expected, value)


def check_stack(stack: Stack) -> None:
    """Raise ``RenderError`` unless every field the Dockerfile uses matches a strict pattern."""
    _match(stack, "name", stack.name, _NAME_RE, "a stack name like torch-2.4.1-cuda12.4-py3.10")
    _match(stack, "row", stack.row, _NAME_RE, "a row name like torch-2.4.1-cuda12.4")
    _match(stack, "framework", stack.framework, _WORD_RE, "a framework name")
    _match(stack, "framework_version", stack.framework_version, _VERSION_RE, "a PEP 440 version")
    _match(stack, "variant", stack.variant, _WORD_RE, "a variant such as cu124 or cpu")
    _match(stack, "cuda", stack.cuda, _CUDA_RE, "CUDA major.minor", optional=True)
    _match(stack, "python", stack.python, _PYTHON_RE, "a Python X.Y")
    if Version(stack.python) < MIN_PYTHON:
        raise RenderError(
            f"Python {stack.python} is older than {MIN_PYTHON}, the oldest envman provisions (venv + pip)",
            where=f"stack {stack.row!r}",
            fix="choose a Python 3.5 or newer for the row",
        )
    if stack.python_strategy not in ("apt", "standalone"):
        raise _bad(stack, "python_strategy", "'apt' or 'standalone'", stack.python_strategy)
    _match(stack, "os", stack.os, _OS_RE, "an OS name like ubuntu22.04")
    parse_image_ref(stack.base_image)
    if stack.platform not in PLATFORM_SUFFIX:
        raise _bad(stack, "platform", " | ".join(PLATFORM_SUFFIX), stack.platform)
    if stack.flavour not in FLAVOURS:
        raise _bad(stack, "flavour", " | ".join(FLAVOURS), stack.flavour)
    if stack.cuda is not None:
        _match(stack, "min_driver", stack.min_driver, _DRIVER_RE, "a driver version like 525.60.13", optional=not stack.minor_compat)
    if not stack.packages:
        raise RenderError("stack has no packages to install", where=f"stack {stack.row!r}", fix="list the pinned packages in the matrix row")
    for req in stack.packages:
        if not isinstance(req, str) or not REQUIREMENT_RE.fullmatch(req):
            raise _bad(stack, "package", "a pinned requirement NAME[extras]==VERSION (nothing else: no markers, URLs or shell text)", req)
    for key in ("index_url", "extra_index_url", "find_links"):
        value = getattr(stack, key)
        if value is None:
            continue
        try:
            check_url(value, what=key)
        except Invalid as exc:
            raise RenderError(exc.what, where=f"stack {stack.row!r}: {key}", fix=exc.fix) from None


# --- options ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RenderOptions:
    """Network options of a render (all optional). Validated on construction.

    Build one from CLI values and the user config with ``RenderOptions.from_config``.
    """

    registry_mirror: str | None = None
    ca_bundle: Path | None = None
    pip_index: str | None = None
    pip_extra_index: str | None = None
    framework_index: str | None = None
    wheelhouse: Path | None = None
    offline: bool = False
    apt_mirror: str | None = None
    python_install_mirror: str | None = None

    def __post_init__(self) -> None:
        given = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) not in (None, False)}
        checked = validate_network(given, where=lambda k: NETWORK_KEYS[k])
        for k, v in checked.items():
            object.__setattr__(self, k, v)
        if self.offline and self.wheelhouse is None:
            raise UserError(
                "--offline needs a wheelhouse: with no index, every package must come from one",
                where="--offline",
                fix="pip download the stack's packages (and their dependencies) into a directory and pass --wheelhouse DIR",
            )

    @classmethod
    def from_config(
        cls,
        cli_overrides: Mapping[str, Any] | None = None,
        *,
        config_file: Path | None = None,
        project: Mapping[str, Any] | None = None,
    ) -> "RenderOptions":
        """CLI values > ``project`` values (none of today's callers pass any) > the user config file.

        ``cli_overrides`` uses the ``[network]`` key names (``pip_index``, ``ca_bundle``...);
        ``None`` means "not given".
        """
        merged: dict[str, Any] = dict(load_network_config(config_file))
        if project:
            merged.update(validate_network(dict(project), where=lambda k: f"project file: [network].{k}"))
        cli = {k: v for k, v in (cli_overrides or {}).items() if v is not None}
        merged.update(validate_network(cli, where=lambda k: NETWORK_KEYS.get(k, k)))
        return cls(**merged)

    def describe(self) -> dict[str, Any]:
        """The options that are set, as plain values (for messages and JSON)."""
        return {f.name: (str(v) if isinstance(v, Path) else redact(v) if isinstance(v, str) else v)
                for f in fields(self) if (v := getattr(self, f.name)) not in (None, False)}

    def credentials(self) -> dict[str, str]:
        """The index options that carry ``user[:password]@`` (key -> the CLI option)."""
        return {k: NETWORK_KEYS[k] for k in CREDENTIAL_KEYS
                if isinstance(getattr(self, k), str) and split_credentials(getattr(self, k))[1] is not None}


# --- the build context ----------------------------------------------------------------------


@dataclass(frozen=True)
class BuildContext:
    """A rendered build context: every file by context path, in sorted order."""

    stack: Stack
    dockerfile: str
    render_hash: str
    files: dict[str, bytes] = field(repr=False)
    modes: dict[str, int] = field(repr=False)
    #: ``classic`` or ``buildkit``: which builder this Dockerfile is written for.
    builder: str = "classic"
    #: Build secrets by id (BuildKit only): never part of ``files``, the tar or the render hash.
    secrets: dict[str, bytes] = field(default_factory=dict, repr=False)

    def tar(self) -> bytes:
        """Uncompressed tar, byte-identical for identical contexts (so cache keys and hashes are stable)."""
        return deterministic_tar({name: (data, self.modes[name]) for name, data in self.files.items()})

    def write(self, dest: str | os.PathLike[str]) -> Path:
        """Write the context to ``dest`` atomically: a temporary sibling, then a rename.

        ``dest`` may exist only as an empty directory or an earlier envman context (it is
        replaced whole); anything else is refused rather than overwritten.
        """
        dest = Path(dest).absolute()
        if dest.exists() and not _replaceable(dest):
            raise UserError(
                f"{dest} exists and is not an envman build context",
                fix="choose another output directory (-o) or remove it",
            )
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
        try:
            for name, data in self.files.items():
                path = tmp / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
                os.chmod(path, self.modes[name])
            os.chmod(tmp, 0o755)
            if dest.exists():
                old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".old", dir=dest.parent))
                os.rename(dest, old / "ctx")
                os.rename(tmp, dest)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.rename(tmp, dest)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return dest


def _replaceable(dest: Path) -> bool:
    if not dest.is_dir() or dest.is_symlink():
        return False
    if not any(dest.iterdir()):
        return True
    return (dest / "Dockerfile").is_file() and (dest / "envman" / "stack.json").is_file()


def deterministic_tar(files: Mapping[str, tuple[bytes, int]]) -> bytes:
    """Tar of ``{name: (data, mode)}``: sorted names, parent directories 0755, owner 0:0 with
    empty names, mtime 0; the bytes depend on names, contents and modes only."""
    dirs: set[str] = set()
    for name in files:
        parts = name.split("/")
        for i in range(1, len(parts)):
            dirs.add("/".join(parts[:i]))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(dirs | set(files)):
            info = tarfile.TarInfo(name)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            if name in dirs:
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                tar.addfile(info)
            else:
                data, mode = files[name]
                info.mode = mode
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


# --- the render hash -------------------------------------------------------------------------


def _dockerfile_body(data: bytes) -> bytes:
    """The Dockerfile without its last line (the render-hash label)."""
    text = data[:-1] if data.endswith(b"\n") else data
    cut = text.rfind(b"\n")
    return text[: cut + 1] if cut >= 0 else b""


def render_hash(files: Mapping[str, bytes], *, dockerfile_has_hash_line: bool = True) -> str:
    """sha256 of the ``sha256sum``-style manifest of ``files`` (see the module docstring)."""
    manifest = []
    for name in sorted(files):
        data = files[name]
        if name == "Dockerfile" and dockerfile_has_hash_line:
            data = _dockerfile_body(data)
        manifest.append(f"{hashlib.sha256(data).hexdigest()}  {name}\n")
    return hashlib.sha256("".join(manifest).encode()).hexdigest()


def verify_context(path: str | os.PathLike[str]) -> str:
    """Recompute the render hash of a written context; ``RenderError`` if it does not match."""
    root = Path(path)
    files: dict[str, bytes] = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            files[p.relative_to(root).as_posix()] = p.read_bytes()
    docker = files.get("Dockerfile")
    if docker is None:
        raise RenderError("no Dockerfile in the context", where=str(root))
    last = docker.rstrip(b"\n").rsplit(b"\n", 1)[-1].decode("utf-8", "replace")
    m = re.fullmatch(rf'LABEL {re.escape(RENDER_HASH_LABEL)}="([0-9a-f]{{64}})"', last)
    if not m:
        raise RenderError(f"the Dockerfile's last line is not the {RENDER_HASH_LABEL} label", where=str(root))
    got = render_hash(files)
    if got != m.group(1):
        raise RenderError(
            f"render hash mismatch: the label says {m.group(1)[:16]}..., the files give {got[:16]}...",
            where=str(root),
            fix="the context was changed after rendering: render it again",
        )
    return got


# --- inputs from the envman package ------------------------------------------------------------


def probe_source() -> bytes:
    """envman's smoke-test probe, ``probe.pyz`` built from ``envman/probe/app``, copied into every image."""
    try:
        return probe_archive()
    except ProbeSourceMissing as exc:
        raise RenderError(
            f"the probe is missing from this installation ({exc}), and every image carries it",
            fix="reinstall envman (pip install -e . in a checkout)",
        ) from None


@functools.lru_cache(maxsize=1)
def _jinja_env():
    import jinja2

    from envman.paths import templates_dir

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # HTML escaping would turn && into &amp;&amp;
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def _static(name: str) -> bytes:
    from envman.paths import templates_dir

    path = templates_dir() / name
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise RenderError(f"template file {name} is missing", where=str(path), fix="reinstall envman") from None


# --- the plan: everything the template prints, computed here ----------------------------------


def _wheelhouse(options: RenderOptions) -> list[_Wheel]:
    if options.wheelhouse is None:
        return []
    found = []
    for p in sorted(options.wheelhouse.iterdir()):
        if not p.name.endswith(".whl") or not p.is_file():
            continue
        if not _WHEEL_NAME_RE.fullmatch(p.name):
            raise RenderError(
                f"wheel file name {p.name!r} has characters envman does not copy",
                where=f"--wheelhouse {options.wheelhouse}",
                fix="keep the name pip gave it (letters, digits, . _ + ! -)",
            )
        try:
            project, version, _, _ = parse_wheel_filename(p.name)
        except InvalidWheelFilename as exc:
            raise RenderError(f"{p.name!r} is not a wheel file name: {exc}", where=f"--wheelhouse {options.wheelhouse}") from None
        found.append(_Wheel(p.name, canonicalize_name(project), version))
    if not found:
        raise RenderError(
            "the wheelhouse holds no *.whl files",
            where=f"--wheelhouse {options.wheelhouse}",
            fix="pip download PACKAGE==VERSION --no-deps -d DIR",
        )
    return found


def _python_layer_wants(stack: Stack) -> list[str]:
    """Requirements of the pip and uv wheels the Python layer installs from a wheelhouse."""
    wants = [pip_requirement(stack.python), f"uv=={UV_VERSION}"]
    quirks = OS_QUIRKS.get(stack.os, OsQuirks())
    if stack.python_strategy == "standalone" and quirks.bootstrap_pip:
        wants.append(quirks.bootstrap_pip)
    return wants


def _selected_wheels(stack: Stack, options: RenderOptions) -> list[_Wheel]:
    """The wheelhouse's wheels this stack's pins select (see :mod:`envman.render.wheels`)."""
    found = _wheelhouse(options)
    if not found:
        return []
    target = Target(python=stack.python, platform=stack.platform)
    directory: Path = options.wheelhouse  # type: ignore[assignment]
    # The pins together (one environment); each pip/uv install of the Python layer on its own.
    picked = {w.filename for roots in [list(stack.packages), *([t] for t in _python_layer_wants(stack))]
              for w in select_wheels(found, directory, roots, target)}
    chosen = [w for w in found if w.filename in picked]
    if options.offline:
        have = {w.project for w in chosen}
        for pin in stack.packages:
            try:
                name = canonicalize_name(Requirement(pin).name)
            except InvalidRequirement:
                continue
            if name not in have:
                raise RenderError(
                    f"--offline and the wheelhouse has no wheel of {pin} for Python {stack.python} on {stack.platform}",
                    where=f"--wheelhouse {options.wheelhouse}",
                    fix=f"pip download {shlex.quote(pin)} --python-version {stack.python} --only-binary=:all: -d WHEELHOUSE",
                )
    return chosen


def _has_wheel(wheels: list[_Wheel], project: str, spec: str) -> bool:
    ss = SpecifierSet(spec)
    return any(w.project == project and ss.contains(w.version, prereleases=True) for w in wheels)


def _framework_sources(stack: Stack, options: RenderOptions) -> tuple[str | None, str | None, str | None]:
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


def _pip_flags(stack: Stack, options: RenderOptions, wheels: list[_Wheel]) -> list[str]:
    if options.offline:
        return ["--no-index", "--find-links", WHEELS_DIR]
    index, extra, links = _framework_sources(stack, options)
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


def _title(stack: Stack) -> str:
    return f"{stack.framework} {stack.framework_version} ({stack.variant})"


def index_secrets(options: RenderOptions, builder: str) -> tuple[RenderOptions, dict[str, bytes]]:
    """(``options`` with every index URL stripped of ``user[:password]@``, the build secrets).

    The credentials become one netrc file (secret :data:`NETRC_SECRET`), which pip and uv read
    for the host of each index. The classic builder cannot mount a secret, so credentials there
    are a :class:`RenderError` saying why. Two indexes on one host with different credentials
    cannot share a netrc file and are refused too.
    """
    from dataclasses import replace
    from urllib.parse import urlsplit

    carrying = options.credentials()
    if not carrying:
        return options, {}
    if builder != "buildkit":
        first = next(iter(carrying.values()))
        raise RenderError(
            "this index URL carries credentials, which the classic builder would keep in the image (its "
            "ENV and build args are part of the image history)",
            where=first,
            fix="build with BuildKit (--builder buildkit: docker buildx, or a docker CLI that honours "
                "DOCKER_BUILDKIT=1), or download with your credentials on the host and pass --wheelhouse DIR",
        )
    bare: dict[str, str] = {}
    hosts: dict[str, tuple[str, str]] = {}
    for key, option in carrying.items():
        try:
            url, user, password = split_credentials(getattr(options, key))
        except Invalid as exc:
            raise RenderError(exc.what, where=option, fix=exc.fix) from None
        bare[key] = url
        host = urlsplit(url).hostname or ""
        if hosts.setdefault(host, (user or "", password or "")) != (user, password or ""):
            raise RenderError(
                f"two indexes on host {host} carry different credentials, and one netrc file holds one login per host",
                where=option,
                fix="use one login for every index on that host",
            )
    lines = [f"machine {host} login {user} password {password}\n" for host, (user, password) in sorted(hosts.items())]
    return replace(options, **bare), {NETRC_SECRET: "".join(lines).encode()}


def _mount_flags(stack: Stack, options: RenderOptions, *, cache: bool, wheels: bool, secret: bool) -> str:
    """``RUN --mount=...`` flags of one BuildKit step (the text after ``RUN``, with a trailing
    continuation when there are any)."""
    flags = []
    if cache:
        flags += [f"--mount=type=cache,id=envman-pip,target={PIP_CACHE}",
                  f"--mount=type=cache,id=envman-uv,target={UV_CACHE}",
                  f"--mount=type=cache,id=envman-tools,target={TOOLS_CACHE}"]
    if wheels:
        flags.append(f"--mount=type=bind,source=wheels,target={WHEELS_DIR}")
    if options.ca_bundle is not None:
        flags.append(f"--mount=type=bind,source=envman/ca-bundle.crt,target={CA_MOUNT}")
    if secret:
        flags.append(f"--mount=type=secret,id={NETRC_SECRET},target={NETRC_TARGET},mode=0400")
    return "".join(f"{f} \\\n    " for f in flags)


def _buildkit_plan(stack: Stack, options: RenderOptions, wheels: list[_Wheel], secret: bool) -> dict[str, Any]:
    """The template values that differ on BuildKit: mounts, caches, the CA bundle and uv."""
    apt_caches = (f"--mount=type=cache,id=envman-apt-lists-{stack.os},target=/var/lib/apt/lists,sharing=locked \\\n    "
                  f"--mount=type=cache,id=envman-apt-archives-{stack.os},target={APT_ARCHIVES},sharing=locked \\\n    ")
    apt_ca = (f"--mount=type=bind,source=envman/ca-bundle.crt,target={CA_MOUNT} \\\n    "
              if options.ca_bundle is not None else "")
    apt_get = f"apt-get -o Dir::Cache::Archives={APT_ARCHIVES}/ -o APT::Keep-Downloaded-Packages=true"
    if options.ca_bundle is not None:
        apt_get += f" -o Acquire::https::CAInfo={CA_MOUNT}"
    uses_index = not options.offline
    installer = "uv" if Version(stack.python) >= MIN_UV_PYTHON else "pip"
    offline_flags = f"--no-index --find-links {WHEELS_DIR} " if options.offline else ""
    ca = options.ca_bundle is not None
    return {
        "buildkit": True,
        "run_apt": "RUN " + apt_caches + apt_ca,
        "run_python": "RUN " + _mount_flags(stack, options, cache=True, wheels=bool(wheels) and options.offline,
                                             secret=secret and uses_index),
        "run_framework": "RUN " + _mount_flags(stack, options, cache=True, wheels=bool(wheels), secret=secret and uses_index),
        "apt_get": apt_get,
        "pip_cache": f"--cache-dir {PIP_CACHE}",
        "ca_env": [],
        "ca_prelude": (f"{{ cat {SYSTEM_CA} 2>/dev/null || true; cat {CA_MOUNT}; }} > {CA_MERGED}; "
                       f"export PIP_CERT={CA_MERGED} REQUESTS_CA_BUNDLE={CA_MERGED} SSL_CERT_FILE={CA_MERGED}"
                       if ca else ""),
        "ca_cleanup": f"; \\\n    rm -f {CA_MERGED}" if ca else "",
        "installer": installer,
        "uv_version": UV_VERSION,
        "uv_tool": UV_TOOL,
        "uv_cache": UV_CACHE,
        "uv_fetch_flags": offline_flags or (f"--find-links {WHEELS_DIR} " if any(w.project == "uv" for w in wheels) else ""),
        "uv_flags": "--index-strategy unsafe-best-match " + "".join(_sh(f) + " " for f in _pip_flags(stack, options, wheels)),
    }


def _plan(stack: Stack, options: RenderOptions, wheels: list[_Wheel], builder: str = "classic",
          secret: bool = False) -> dict[str, Any]:
    quirks = OS_QUIRKS.get(stack.os, OsQuirks())
    python = stack.python
    standalone = stack.python_strategy == "standalone"

    if options.apt_mirror and options.apt_mirror.startswith("https:") and not quirks.apt_https:
        raise RenderError(
            f"apt on {stack.os} cannot fetch https:// sources without apt-transport-https",
            where="--apt-mirror",
            fix="give the mirror's http:// URL (apt verifies packages by signature either way)",
        )

    packages = {"ca-certificates"}
    if standalone:
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

    offline_flags = f"--no-index --find-links {WHEELS_DIR} " if options.offline else ""
    pip_req = pip_requirement(python)
    pip_upgrade: str | None = f"--upgrade {_sh(pip_req)}"
    pip_note = ""
    if options.offline:
        spec = pip_req[3:] or ">=0"
        if _has_wheel(wheels, "pip", spec):
            pip_upgrade = offline_flags + pip_upgrade
        else:
            pip_upgrade = None
            pip_note = f"offline and no {pip_req} wheel in the wheelhouse: the interpreter's bundled pip stays"

    bootstrap_pip = None
    uv_env = ""
    if standalone:
        bootstrap_pip = _sh(quirks.bootstrap_pip) if quirks.bootstrap_pip else None
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
            assigns.append(f"UV_PYTHON_INSTALL_MIRROR={_sh(options.python_install_mirror)}")
        uv_env = " ".join(assigns)

    apt_get = "apt-get"
    ca_env: list[str] = []
    if options.ca_bundle:
        apt_get = f"apt-get -o Acquire::https::CAInfo={CA_DEST}"
        quoted = dockerfile_quote(SYSTEM_CA)
        ca_env = [f"{k}={quoted}" for k in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")]
        ca_env.append(f"UV_NATIVE_TLS={dockerfile_quote('1')}")

    pip_env = []
    if options.pip_index:
        pip_env.append(f"PIP_INDEX_URL={dockerfile_quote(options.pip_index, what='--pip-index')}")
    if options.pip_extra_index:
        pip_env.append(f"PIP_EXTRA_INDEX_URL={dockerfile_quote(options.pip_extra_index, what='--pip-extra-index')}")

    nvidia_env: list[str] = []
    nvidia_note = ""
    if stack.cuda is not None:
        require, nvidia_note = nvidia_require_cuda(stack)
        nvidia_env = [
            f"NVIDIA_VISIBLE_DEVICES={dockerfile_quote('all')}",
            f"NVIDIA_DRIVER_CAPABILITIES={dockerfile_quote('compute,utility')}",
            f"NVIDIA_REQUIRE_CUDA={dockerfile_quote(require)}",
        ]

    labels = [
        f"{L.MANAGED}={dockerfile_quote(L.TRUE)}",
        f"{L.NAME}={dockerfile_quote(stack.name, what='stack name')}",
        f"{L.STACK}={dockerfile_quote(stack_label_json(stack), what='stack JSON')}",
        f"{L.VERSION}={dockerfile_quote(__version__, what='envman version')}",
    ]

    target = f"CUDA {stack.cuda}" if stack.cuda else "CPU"
    summary = (
        f"{_title(stack)}, {target}, Python {python} ({stack.python_strategy}), {stack.os}, "
        f"{stack.flavour} flavour; matrix row {stack.row}"
    )
    plan: dict[str, Any] = {
        "envman_version": __version__,
        "name": stack.name,
        "summary": summary,
        "base_image": stack.base_image,
        "from_image": mirror_image(stack.base_image, options.registry_mirror),
        "from_platform": None if stack.platform == DEFAULT_PLATFORM else stack.platform,
        "ca_bundle": options.ca_bundle is not None,
        "ca_dest": CA_DEST,
        "apt_get": apt_get,
        "hide_nvidia_apt": stack.cuda is not None,
        "apt_mirror": options.apt_mirror,
        "apt_packages": sorted(packages),
        "home": HOME,
        "ca_env": ca_env,
        "pip_env": pip_env,
        "wheels": [w.filename for w in wheels],
        "wheels_early": options.offline,
        "wheels_dir": WHEELS_DIR,
        "python_strategy": stack.python_strategy,
        "python": python,
        "python_exe": f"python{python}",
        "os": stack.os,
        "venv": VENV,
        "bootstrap": BOOTSTRAP,
        "bootstrap_pip": bootstrap_pip,
        "bootstrap_flags": offline_flags,
        "uv_requirement": _sh(f"uv=={UV_VERSION}"),
        "uv_env": uv_env,
        "pip_upgrade": pip_upgrade,
        "pip_note": pip_note,
        "framework_title": _title(stack),
        "wheel_paths": " ".join(_sh(f"{WHEELS_DIR}/{w.filename}") for w in wheels if w.project not in TOOL_WHEELS),
        "fw_flags": "".join(_sh(f) + " " for f in _pip_flags(stack, options, wheels)),
        "packages": " ".join(_sh(p) for p in stack.packages),
        "nvidia_env": nvidia_env,
        "nvidia_require_note": nvidia_note,
        "envman_dir": ENVMAN_DIR,
        "labels": labels,
        "buildkit": False,
        "run_apt": "RUN ",
        "run_python": "RUN ",
        "run_framework": "RUN ",
        "pip_cache": "--no-cache-dir",
        "ca_prelude": "",
        "ca_cleanup": "",
        "installer": "pip",
    }
    if builder == "buildkit":
        plan.update(_buildkit_plan(stack, options, wheels, secret))
    return plan


# --- the entry point ---------------------------------------------------------------------------


def render_stack(stack: Stack, options: RenderOptions | None = None, *, probe: bytes | None = None,
                 builder: str = "classic") -> BuildContext:
    """Render ``stack`` with ``options`` into a ``BuildContext`` (no Docker needed).

    ``probe`` replaces the probe archive's content (the golden files use a fixed one so they change
    only when rendering changes); by default it is read from the envman package. ``builder``
    (``classic`` or ``buildkit``) picks the Dockerfile dialect; index credentials are possible on
    BuildKit only and travel in ``BuildContext.secrets``, outside the context and its hash.
    """
    options = options or RenderOptions()
    if builder not in BUILDER_KINDS:
        raise RenderError(f"unknown builder {builder!r}", fix="use " + " or ".join(BUILDER_KINDS))
    check_stack(stack)
    options, secrets = index_secrets(options, builder)
    wheels = _selected_wheels(stack, options)
    plan = _plan(stack, options, wheels, builder, bool(secrets))
    body = _jinja_env().get_template("Dockerfile.j2").render(**plan)
    files: dict[str, bytes] = {
        "Dockerfile": body.encode(),
        "envman/entrypoint.sh": _static("entrypoint.sh"),
        PROBE_CONTEXT_FILE: probe if probe is not None else probe_source(),
        "envman/stack.json": (json.dumps(stack.to_json(), indent=2, sort_keys=True) + "\n").encode(),
    }
    if options.ca_bundle is not None:
        files["envman/ca-bundle.crt"] = options.ca_bundle.read_bytes()
    for w in wheels:
        files[f"wheels/{w.filename}"] = (options.wheelhouse / w.filename).read_bytes()  # type: ignore[operator]
    digest = render_hash(files, dockerfile_has_hash_line=False)
    dockerfile = body + f'LABEL {RENDER_HASH_LABEL}="{digest}"\n'
    files["Dockerfile"] = dockerfile.encode()
    files = dict(sorted(files.items()))
    modes = {name: (0o755 if name == "envman/entrypoint.sh" else 0o644) for name in files}
    return BuildContext(stack=stack, dockerfile=dockerfile, render_hash=digest, files=files, modes=modes,
                        builder=builder, secrets=secrets)


__all__ = [
    "BuildContext",
    "RenderOptions",
    "render_stack",
    "render_hash",
    "verify_context",
    "dockerfile_quote",
    "stack_label_json",
    "mirror_image",
    "parse_image_ref",
    "pip_requirement",
    "nvidia_require_cuda",
    "check_stack",
    "deterministic_tar",
    "load_network_config",
]
