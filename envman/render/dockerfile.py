"""Render a resolved ``Stack`` into a Docker build context: a Dockerfile plus the files it copies.

Rendering never needs a Docker engine. The split follows repo2docker: :mod:`envman.render.plan`
answers small questions with typed data (a frozen ``DockerfilePlan`` with one section per layer:
which packages, which pins, which pip flags, which quoted LABEL values), :mod:`envman.render.layout`
lays it out as typed Dockerfile steps (the hpccm shape: building blocks made of primitives), and
the templates (``templates/dockerfiles``, through :mod:`envman.render.template`) print them. This module
checks the stack, picks the wheelhouse's wheels, turns index credentials into a build secret,
and assembles the context and its hash. Two renders of the same inputs are byte-identical.

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
    envman/mount-points.tar   -> unpacked at /             (BuildKit: envman.render.mountpoints)

Render hash: sha256 of a manifest in ``sha256sum`` format (``<sha256 of file>  <path>\\n`` for
every context file, sorted by path), where the Dockerfile's own digest is taken over the
Dockerfile without its last line, the ``LABEL envman.render-hash=...`` line. ``verify_context``
recomputes it for a written context; so does this shell line (coreutils)::

    cd CONTEXT && { head -n -1 Dockerfile | sha256sum | sed 's/ -$/ Dockerfile/';
      find . -type f ! -path ./Dockerfile -printf '%P\\0' | xargs -0 -r sha256sum; } |
      LC_ALL=C sort -k 2 | sha256sum
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Protocol

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version
from urllib.parse import urlsplit

from envman.config import Invalid, check_url, load_network_config, split_credentials
from envman import labels as L
from envman.engine.context import deterministic_tar
from envman.errors import RenderError, UserError
from envman.probe import ProbeSourceMissing, probe_archive
from envman.stack.names import FLAVOURS, PLATFORM_SUFFIX, STACK_NAME_PATTERN
from envman.matrix.validate import PINNED_REQUIREMENT_RE
from envman.stack.names import Stack
from envman.render.plan import MIN_PYTHON, OS_QUIRKS, OsQuirks, nvidia_require_cuda, pip_requirement, stack_plan
from envman.render.imagepaths import (
    BUILDER_KINDS, CA_CONTEXT_FILE, CA_DEST, ENVMAN_FILES, PROBE_CONTEXT_FILE, NETRC_SECRET, SETTLED_TIME, UV_VERSION,
)
from envman.render.layout import dockerfile_steps
from envman.render.mountpoints import MOUNT_POINTS_FILE, mount_points, mount_points_tar
from envman.render.options import RenderOptions
from envman.render.quote import dockerfile_quote, mirror_image, parse_image_ref, stack_label_json
from envman.render.template import render_dockerfile
from envman.render.wheels import Target, Wheel as _Wheel, select_wheels
from envman.paths import templates_dir


class RebuiltBase(Protocol):
    """What a stack's render needs of its base rebuilt from NVIDIA's recipe
    (:class:`envman.render.base.BaseBuild`): the image the stack starts from, and its context."""

    @property
    def ref(self) -> str: ...

    def context(self) -> dict[str, bytes]: ...

RENDER_HASH_LABEL = L.RENDER_HASH
#: Where a stack's context carries the Dockerfile of its rebuilt base (``envman render -o DIR``).
BASE_CONTEXT_DIR = "base"
CONTEXT_FILES = ("Dockerfile", *ENVMAN_FILES)

# --- strict patterns for every Stack field that reaches the Dockerfile ------------------------

_WORD = r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}"

#: Each Stack field that reaches the Dockerfile: the whole value must match the pattern; the text
#: says what was expected.
FIELD_RULES: dict[str, tuple[re.Pattern[str], str]] = {
    name: (re.compile(pattern), expected) for name, pattern, expected in (
        ("name", STACK_NAME_PATTERN, "a stack name like torch-2.4.1-cuda12.4-py3.10"),
        ("row", STACK_NAME_PATTERN, "a row name like torch-2.4.1-cuda12.4"),
        ("framework", _WORD, "a framework name"),
        ("framework_version", r"[A-Za-z0-9][A-Za-z0-9.+!_-]{0,63}", "a PEP 440 version"),
        ("variant", _WORD, "a variant such as cu124 or cpu"),
        ("cuda", r"[0-9]{1,2}\.[0-9]{1,2}", "CUDA major.minor"),
        ("python", r"[0-9]\.[0-9]{1,2}", "a Python X.Y"),
        ("os", r"[a-z][a-z0-9]*[0-9]+(?:\.[0-9]+)?", "an OS name like ubuntu22.04"),
        ("min_driver", r"[0-9]{1,4}(?:\.[0-9]{1,4}){0,2}", "a driver version like 525.60.13"),
    )
}
REQUIREMENT_RE = PINNED_REQUIREMENT_RE  # what matrix validation accepts is what renders
_WHEEL_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+!-]*\.whl$")

# --- validation of a Stack --------------------------------------------------------------------


def _bad(stack: Stack, key: str, expected: str, value: Any) -> RenderError:
    return RenderError(
        f"{key} {value!r} is not safe to render: expected {expected}",
        where=f"stack {getattr(stack, 'row', '?')!r}",
        fix="fix the matrix row (format: matrices/README.md)",
    )


def _check_field(stack: Stack, key: str, *, optional: bool = False) -> None:
    """Raise unless ``stack.<key>`` matches its :data:`FIELD_RULES` pattern (``None`` passes when ``optional``)."""
    value = getattr(stack, key)
    if value is None and optional:
        return
    pattern, expected = FIELD_RULES[key]
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise _bad(stack, key, expected, value)


def check_stack(stack: Stack) -> None:
    """Raise ``RenderError`` unless every field the Dockerfile uses matches a strict pattern."""
    for key in ("name", "row", "framework", "framework_version", "variant", "cuda", "python"):
        _check_field(stack, key, optional=key == "cuda")
    if Version(stack.python) < MIN_PYTHON:
        raise RenderError(
            f"Python {stack.python} is older than {MIN_PYTHON}, the oldest envman provisions (venv + pip)",
            where=f"stack {stack.row!r}",
            fix="choose a Python 3.5 or newer for the row",
        )
    if stack.python_strategy not in ("apt", "standalone"):
        raise _bad(stack, "python_strategy", "'apt' or 'standalone'", stack.python_strategy)
    if not isinstance(stack.freethreaded, bool):
        raise _bad(stack, "freethreaded", "true or false", stack.freethreaded)
    if stack.freethreaded and stack.python_strategy != "standalone":  # no distribution here packages one
        raise _bad(stack, "python_strategy", "'standalone' for a free-threaded Python", stack.python_strategy)
    _check_field(stack, "os")
    parse_image_ref(stack.base_image)
    if stack.platform not in PLATFORM_SUFFIX:
        raise _bad(stack, "platform", " | ".join(PLATFORM_SUFFIX), stack.platform)
    if stack.flavour not in FLAVOURS:
        raise _bad(stack, "flavour", " | ".join(FLAVOURS), stack.flavour)
    if stack.cuda is not None:
        _check_field(stack, "min_driver", optional=not stack.minor_compat)
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
    #: What the image is, whoever built it and however its packages were fetched
    #: (:func:`content_hash`): the identity a pull checks. ``""``: not computed.
    content_hash: str = ""

    def tar(self) -> bytes:
        """Uncompressed tar, byte-identical for identical contexts (so cache keys and hashes are stable)."""
        return deterministic_tar({name: (data, self.modes[name]) for name, data in self.files.items()})

    def write(self, dest: str | os.PathLike[str], shared: dict[tuple[str, bytes], Path] | None = None) -> Path:
        """Write the context to ``dest`` atomically: a temporary sibling, then a rename.

        ``dest`` may exist only as an empty directory or an earlier envman context (it is
        replaced whole); anything else is refused rather than overwritten.

        ``shared`` (kept by the caller across contexts, e.g. ``render --all``) makes the probe
        archive one file on disk: a context whose probe has the bytes of one written before
        gets a hard link to it (a plain file to a build), not another copy.
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
            pool = shared if shared is not None else {}
            linked: dict[tuple[str, bytes], str] = {}
            for name, data in self.files.items():
                path = tmp / name
                path.parent.mkdir(parents=True, exist_ok=True)
                key = (name, hashlib.sha256(data).digest()) if shared is not None and name == PROBE_CONTEXT_FILE else None
                if key is not None and key in pool:
                    try:
                        os.link(pool[key], path)
                        continue
                    except OSError:  # another file system, or the first copy is gone: write it
                        pass
                path.write_bytes(data)
                os.chmod(path, self.modes[name])
                if key is not None:
                    linked[key] = name
            os.chmod(tmp, 0o755)
            if dest.exists():
                old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".old", dir=dest.parent))
                os.rename(dest, old / "ctx")
                os.rename(tmp, dest)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.rename(tmp, dest)
            pool.update((key, dest / name) for key, name in linked.items())
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


# --- the render hash -------------------------------------------------------------------------


def _dockerfile_body(data: bytes) -> bytes:
    """The Dockerfile without its last line (the render-hash label)."""
    text = data[:-1] if data.endswith(b"\n") else data
    cut = text.rfind(b"\n")
    return text[: cut + 1] if cut >= 0 else b""


def render_hash(files: Mapping[str, bytes], *, dockerfile_has_hash_line: bool = True,
                digests: Mapping[str, str] | None = None) -> str:
    """sha256 of the ``sha256sum``-style manifest of ``files`` (see the module docstring).
    ``digests``: the sha256 (hex) of some of the files, already known (wheels whose digest
    :mod:`envman.render.wheelfacts` kept), so their bytes are not hashed again."""
    manifest = []
    for name in sorted(files):
        data = files[name]
        if name == "Dockerfile" and dockerfile_has_hash_line:
            data = _dockerfile_body(data)
        known = digests.get(name) if digests is not None and name != "Dockerfile" else None
        manifest.append(f"{known or hashlib.sha256(data).hexdigest()}  {name}\n")
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


def _static(name: str) -> bytes:
    path = templates_dir() / name
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise RenderError(f"template file {name} is missing", where=str(path), fix="reinstall envman") from None


# --- the wheelhouse and index credentials -----------------------------------------------------


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


def index_secrets(options: RenderOptions, builder: str) -> tuple[RenderOptions, dict[str, bytes]]:
    """(``options`` with every index URL stripped of ``user[:password]@``, the build secrets).

    The credentials become one netrc file (secret :data:`NETRC_SECRET`), which pip and uv read
    for the host of each index. The classic builder cannot mount a secret, so credentials there
    are a :class:`RenderError` saying why. Two indexes on one host with different credentials
    cannot share a netrc file and are refused too.
    """
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
    bare: dict[str, Any] = {}  # RenderOptions fields: the index URLs without their login
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


# --- the entry point ---------------------------------------------------------------------------


def content_hash(stack: Stack, *, probe: bytes | None = None, base: RebuiltBase | None = None) -> str:
    """The identity of ``stack``'s image: the render hash of its context rendered with no network
    option, in the classic dialect, with its rebuilt base (if any) named by its image and recipe
    sources instead of its Dockerfile. A wheelhouse, a mirror, a CA bundle, another index or the
    builder's dialect change how packages are fetched, not which are installed (they are pinned),
    so they never change it; the stack, its recipe and envman's version do."""
    plain = render_stack(stack, probe=probe, base=base, _identity=False)
    files = {name: data for name, data in plain.files.items() if not name.startswith(f"{BASE_CONTEXT_DIR}/")}
    if base is not None:
        sources = getattr(base, "sources", ())
        files[f"{BASE_CONTEXT_DIR}/identity"] = "\n".join([base.ref, *sources]).encode()
    return render_hash(files)


def render_stack(stack: Stack, options: RenderOptions | None = None, *, probe: bytes | None = None,
                 builder: str = "classic", base: RebuiltBase | None = None, _identity: bool = True) -> BuildContext:
    """Render ``stack`` with ``options`` into a ``BuildContext`` (no Docker needed).

    ``probe`` replaces the probe archive's content (the golden files use a fixed one so they change
    only when rendering changes); by default it is read from the envman package. ``builder``
    (``classic`` or ``buildkit``) picks the Dockerfile dialect; index credentials are possible on
    BuildKit only and travel in ``BuildContext.secrets``, outside the context and its hash.
    ``base`` (:func:`envman.render.base.rebuilt_base`): the stack starts ``FROM`` its base rebuilt
    from NVIDIA's recipe, whose Dockerfile the context carries as ``base/Dockerfile`` (so the
    render hash covers it).
    """
    options = options or RenderOptions()
    if builder not in BUILDER_KINDS:
        raise RenderError(f"unknown builder {builder!r}", fix="use " + " or ".join(BUILDER_KINDS))
    check_stack(stack)
    options, secrets = index_secrets(options, builder)
    wheels = _selected_wheels(stack, options)
    plan = stack_plan(stack, options, wheels, builder, bool(secrets), base.ref if base else None)
    body = render_dockerfile(plan)
    files: dict[str, bytes] = {
        "Dockerfile": body.encode(),
        "envman/entrypoint.sh": _static("entrypoint.sh"),
        PROBE_CONTEXT_FILE: probe if probe is not None else probe_source(),
        "envman/stack.json": (json.dumps(stack.to_json(), indent=2, sort_keys=True) + "\n").encode(),
    }
    if options.ca_bundle is not None:
        files[CA_CONTEXT_FILE] = options.ca_bundle.read_bytes()
    if builder == "buildkit":
        files[MOUNT_POINTS_FILE] = mount_points_tar(mount_points(dockerfile_steps(plan), files), SETTLED_TIME)
    if base is not None:
        files.update({f"{BASE_CONTEXT_DIR}/{name}": data for name, data in base.context().items()})
    known: dict[str, str] = {}  # sha256 of the wheels, kept while each file is unchanged
    if wheels:
        from envman.render.wheelfacts import FACTS

        for w in wheels:
            name = f"wheels/{w.filename}"
            files[name], known[name] = FACTS.read(options.wheelhouse / w.filename)  # type: ignore[operator]
        FACTS.save()
    digest = render_hash(files, dockerfile_has_hash_line=False, digests=known)
    dockerfile = body + f'LABEL {RENDER_HASH_LABEL}="{digest}"\n'
    files["Dockerfile"] = dockerfile.encode()
    files = dict(sorted(files.items()))
    modes = {name: (0o755 if name == "envman/entrypoint.sh" else 0o644) for name in files}
    identity = content_hash(stack, probe=probe, base=base) if _identity else ""
    return BuildContext(stack=stack, dockerfile=dockerfile, render_hash=digest, files=files, modes=modes,
                        builder=builder, secrets=secrets, content_hash=identity)


__all__ = [
    "BuildContext",
    "CA_DEST",
    "content_hash",
    "NETRC_SECRET",
    "UV_VERSION",
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
    "load_network_config",
]
