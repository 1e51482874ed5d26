"""The image builders behind one small interface: the engine's classic builder and BuildKit.

:class:`Builder` is what the rest of envman sees: ``build(context_tar, tag, labels=...)`` streams
:class:`envman.engine.docker.BuildEvent` objects whichever builder runs, and raises
:class:`envman.errors.BuildError` with the log tail on failure.

* :class:`ClassicBuilder` drives the engine's classic builder through the Docker SDK
  (:meth:`envman.engine.docker.Engine.build`). It cannot mount caches, bind mounts or secrets.
* :class:`BuildKitBuilder` runs the engine's BuildKit through a docker CLI: ``docker buildx build
  --load`` where the buildx plugin exists, otherwise ``docker build`` with ``DOCKER_BUILDKIT=1``
  (the CLIs before 23.0 carry BuildKit's client themselves). The context goes in on stdin as a
  tar; secrets are written to 0600 files in a private 0700 directory removed afterwards; the
  image id comes back through ``--iidfile`` in that directory. ``--progress=plain`` is parsed by
  :class:`PlainProgressParser` into the same events as the classic builder's stream.

:func:`select_builder` picks one for an engine: ``auto`` takes BuildKit when the engine and a CLI
support it, ``buildkit`` insists (one line with the fix when it cannot), ``classic`` never tries.
A builder for Podman (buildah also mounts caches and secrets) fits the same interface.
"""

from __future__ import annotations

import functools
import io
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections import deque
from contextlib import contextmanager
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol, TypedDict, cast
import time

from envman.config import BUILDERS as BUILDER_CHOICES
from envman.engine.api import BuildEvent, ContainerEngine, EngineInfo
from envman.engine.streams import LOG_TAIL_LINES
from envman.labels import namespaced as _namespaced
from envman.errors import BuildError, EngineError, UserError, without_ansi
from envman.errors import EnvmanError
from envman.paths import cache_dir
from envman.paths import caches_enabled

BuilderKind = Literal["classic", "buildkit"]
#: The engine's BuildKit came with 18.09 (Engine API 1.39).
MIN_BUILDKIT_API = (1, 39)
#: CLIs from 23.0 on need the buildx plugin for BuildKit; older ones carry it themselves.
LEGACY_CLI_MAX_MAJOR = 22
_SECRET_ID_RE = re.compile(r"^[a-z][a-z0-9-]{0,62}$")
BUILDKIT_FIX = ("install the buildx plugin (Debian: apt-get install docker-buildx), or use a docker CLI "
                "before 23.0, or pass --builder classic")


class Builder(Protocol):
    """Builds a context into a tagged image, streaming :class:`BuildEvent` objects."""

    @property
    def kind(self) -> BuilderKind: ...

    def build(
        self,
        context_tar: bytes,
        tag: str,
        *,
        labels: Mapping[str, str],
        nocache: bool = False,
        pull: bool = False,
        secrets: Mapping[str, bytes] | None = None,
        platform: str | None = None,
    ) -> Iterator[BuildEvent]: ...


class _BuildExtra(TypedDict, total=False):
    platform: str
    network: str
    extra_hosts: Mapping[str, str]


@dataclass(frozen=True)
class ClassicBuilder:
    """The engine's classic builder (Docker SDK). It has no secrets: asking for one is an error."""

    engine: ContainerEngine
    kind: BuilderKind = "classic"
    network: str | None = None  # the RUN steps' network (``[build] network``); None: the engine's default
    #: (name, address) pairs the RUN steps resolve (the wheel store of :mod:`envman.images.wheelstore`)
    hosts: tuple[tuple[str, str], ...] = ()

    def build(self, context_tar: bytes, tag: str, *, labels: Mapping[str, str], nocache: bool = False,
              pull: bool = False, secrets: Mapping[str, bytes] | None = None,
              platform: str | None = None) -> Iterator[BuildEvent]:
        if secrets:
            raise UserError("the classic builder cannot pass build secrets", where=f"build {tag}",
                            fix="build with --builder buildkit")
        # only what is set goes by name: an engine without these parameters still builds the rest
        extra: _BuildExtra = {"platform": platform} if platform else {}
        if self.network:
            extra["network"] = self.network
        if self.hosts:
            extra["extra_hosts"] = dict(self.hosts)
        return self.engine.build(context_tar, tag, labels=labels, nocache=nocache, pull=pull, **extra)


# --------------------------------------------------------------------------- the docker CLI


@dataclass(frozen=True)
class BuildKitCli:
    """How to run BuildKit: the docker CLI's path and whether it goes through buildx."""

    docker: str
    buildx: bool

    def argv(self) -> list[str]:
        return [self.docker, "buildx", "build", "--load"] if self.buildx else [self.docker, "build"]

    def describe(self) -> str:
        return f"{self.docker} buildx build" if self.buildx else f"DOCKER_BUILDKIT=1 {self.docker} build"


def _docker_clis(path: str | None = None) -> list[str]:
    """Every ``docker`` executable on ``PATH``, first first, each real file once."""
    seen: set[str] = set()
    out: list[str] = []
    for d in (path if path is not None else os.environ.get("PATH", "")).split(os.pathsep):
        cand = shutil.which("docker", path=d) if d else None
        if cand and os.path.realpath(cand) not in seen:
            seen.add(os.path.realpath(cand))
            out.append(cand)
    return out


def _quiet(argv: list[str]) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL,
                              env={**os.environ, "DOCKER_CLI_HINTS": "false"})
    except (OSError, subprocess.TimeoutExpired):
        return None


def cli_major(version_line: str) -> int | None:
    """``Docker version 20.10.24+dfsg1, build 297e128`` → 20."""
    m = re.search(r"version (\d+)\.", version_line)
    return int(m.group(1)) if m else None


def find_buildkit_cli(path: str | None = None) -> BuildKitCli | None:
    """The first docker CLI on ``PATH`` with the buildx plugin, else the first one old enough to
    build with BuildKit by itself (``DOCKER_BUILDKIT=1``); ``None`` when neither exists. The
    answer is kept per ``PATH`` for the life of the process."""
    return _find_buildkit_cli(path if path is not None else os.environ.get("PATH", ""))


@functools.lru_cache(maxsize=8)
def _find_buildkit_cli(path: str) -> BuildKitCli | None:
    clis = _docker_clis(path)
    key = _probe_key(path, clis)
    kept = _kept_probe(key) if key is not None else None
    if kept is not None:
        return kept[0]
    found = _probe_clis(clis)
    if key is not None:
        _keep_probe(key, found)
    return found


def _probe_clis(clis: list[str]) -> BuildKitCli | None:
    """Ask each docker CLI in turn (``docker buildx version``, then ``docker --version``)."""
    for cli in clis:
        p = _quiet([cli, "buildx", "version"])
        if p is not None and p.returncode == 0:
            return BuildKitCli(cli, True)
    for cli in clis:
        p = _quiet([cli, "--version"])
        major = cli_major(p.stdout) if p is not None and p.returncode == 0 else None
        if major is not None and 18 <= major <= LEGACY_CLI_MAX_MAJOR:
            return BuildKitCli(cli, False)
    return None


#: Where a docker CLI looks for its plugins besides ``$DOCKER_CONFIG/cli-plugins`` (docker/cli's
#: ``cli-plugins/manager``: the config folder's ``cli-plugins``, the config file's
#: ``cliPluginsExtraDirs``, then these).
SYSTEM_PLUGIN_DIRS = ("/usr/local/lib/docker/cli-plugins", "/usr/local/libexec/docker/cli-plugins",
                      "/usr/lib/docker/cli-plugins", "/usr/libexec/docker/cli-plugins")
PROBE_FILE = "buildkit-cli.json"
PROBE_FORMAT = 1
#: A file changed less than this long ago (ns) is not trusted to stay as its times say: file
#: times tick in milliseconds (git's "racily clean" case), so such an answer is not kept.
PROBE_SETTLED_NS = 2_000_000_000


def _file_signature(path: str) -> list[object] | None:
    """[real path, device, inode, size, mtime ns, ctime ns] of ``path``, ``None`` when absent;
    :class:`_Unsettled` when it changed less than :data:`PROBE_SETTLED_NS` ago."""
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except (OSError, ValueError):
        return None
    if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) < PROBE_SETTLED_NS:
        raise _Unsettled()
    return [real, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


class _Unsettled(Exception):
    """A file the probe's answer depends on changed a moment ago."""


def _probe_key(path: str, clis: list[str]) -> str | None:
    """What the buildx probe's answer depends on, hashed: ``PATH``, each docker CLI found on it
    (real path and file identity), each plugin folder a CLI searches and the ``docker-buildx``
    in it, and the docker config file; ``None`` (probe, keep nothing) when the caches are off,
    the config file names extra plugin folders, or any of these changed a moment ago."""
    if not caches_enabled():
        return None
    config = os.environ.get("DOCKER_CONFIG") or os.path.join(os.path.expanduser("~"), ".docker")
    config_file = os.path.join(config, "config.json")
    from envman.safefile import read_file

    try:  # the docker CLI's own config (non-blocking, a regular file only)
        if b"cliPluginsExtraDirs" in read_file(config_file, what="docker config", follow=True):
            return None  # plugin folders named there: not worth following, probe every time
    except FileNotFoundError:
        pass
    except (OSError, EnvmanError):
        return None
    dirs = (os.path.join(config, "cli-plugins"), *SYSTEM_PLUGIN_DIRS)
    try:
        parts = [PROBE_FORMAT, path, config, _file_signature(config_file),
                 [[cli, _file_signature(cli)] for cli in clis],
                 [[d, _file_signature(d), _file_signature(os.path.join(d, "docker-buildx"))] for d in dirs]]
    except _Unsettled:
        return None
    import hashlib

    return hashlib.sha256(json.dumps(parts).encode("utf-8", "surrogateescape")).hexdigest()


def _probe_path() -> str:
    return os.path.join(cache_dir(), PROBE_FILE)


def _kept_probe(key: str) -> tuple[BuildKitCli | None] | None:
    """``(answer,)`` kept for ``key``, else ``None``."""
    from envman.safefile import read_state_json

    data = read_state_json(_probe_path(), what="buildx probe cache")
    probes = data.get("probes") if isinstance(data, dict) and data.get("format") == PROBE_FORMAT else None
    if not isinstance(probes, dict) or key not in probes:
        return None
    got = probes[key]
    if got is None:
        return (None,)
    if isinstance(got, dict) and isinstance(got.get("docker"), str) and isinstance(got.get("buildx"), bool):
        return (BuildKitCli(got["docker"], got["buildx"]),)
    return None


def _keep_probe(key: str, found: BuildKitCli | None) -> None:
    from envman.safefile import private_dir, read_state_json
    from envman.state import atomic_write

    data = read_state_json(_probe_path(), what="buildx probe cache", warn=False)
    probes = data.get("probes") if isinstance(data, dict) and data.get("format") == PROBE_FORMAT else None
    probes = dict(probes) if isinstance(probes, dict) else {}
    probes.pop(key, None)
    probes[key] = None if found is None else {"docker": found.docker, "buildx": found.buildx}
    path = Path(_probe_path())
    try:
        private_dir(path.parent)
        atomic_write(path, json.dumps({"format": PROBE_FORMAT, "probes": dict(list(probes.items())[-16:])}))
    except (OSError, EnvmanError):
        pass  # a cache that cannot be written only costs time


def engine_has_buildkit(info: EngineInfo) -> bool:
    """Whether the engine (``Engine.info()``) serves BuildKit sessions: Engine API 1.39+ on Linux."""
    try:
        api = tuple(int(x) for x in (info.api_version or "0.0").split(".")[:2])
    except ValueError:
        return False
    return api >= MIN_BUILDKIT_API and "windows" not in info.os.lower()


# --------------------------------------------------------------------------- progress parsing

_VERTEX_RE = re.compile(r"^#(\d+) (.*)$")
_STEP_RE = re.compile(r"^\[(?:(?P<stage>[^\]\s]+) )?(?P<n>\d+)/(?P<total>\d+)\] (?P<text>.*)$")
_DONE_RE = re.compile(r"^(DONE [0-9.]+s|CACHED)$")
_ERROR_RE = re.compile(r"^ERROR:? (.*)$")
_OUTPUT_RE = re.compile(r"^\d+\.\d+ (.*)$")
_BYTES_RE = re.compile(r"(\d+(?:\.\d+)?\s?[kKMGT]?i?B)(?: / (\d+(?:\.\d+)?\s?[kKMGT]?i?B))?(?: [0-9.]+s)?(?: done)?$")
_IMAGE_RE = re.compile(r"writing image (sha256:[0-9a-f]{64})")
_SHA_LINE_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
_CLI_ERROR_RE = re.compile(r"^(?:error|ERROR|failed to solve)[: ](.*)$")


class PlainProgressParser:
    """Turns ``--progress=plain`` lines into :class:`BuildEvent` objects.

    BuildKit numbers each vertex (``#5``): ``#5 [stage-0 2/7] RUN ...`` starts Dockerfile step
    2/7 (a ``step`` event, like the classic ``Step 2/7 : RUN ...``); ``#5 12.3 text`` is that
    step's output at 12.3 s (``log``); lines with byte counts (``transferring context: 2.1GB``,
    ``sha256:... 10MB / 30MB``) become ``progress`` events, so the live view moves inside a long
    step; ``#5 DONE 4.2s`` and ``#5 CACHED`` close a vertex; ``#5 ERROR: ...`` and the CLI's own
    ``error: ...`` / ``failed to solve: ...`` become the error of :meth:`finish`.
    """

    def __init__(self, *, tag: str | None = None) -> None:
        self.tag = tag
        self.image_id: str | None = None
        self.error: str | None = None
        self._tail: deque[str] = deque(maxlen=LOG_TAIL_LINES)
        self._steps: dict[str, str] = {}  # vertex number -> "2/7"

    @property
    def log_tail(self) -> str:
        return "\n".join(self._tail)

    def feed(self, raw: str) -> list[BuildEvent]:
        line = without_ansi(raw).rstrip("\r\n")
        if not line.strip():
            return []
        self._tail.append(line)
        image = _IMAGE_RE.search(line)
        if image:
            self.image_id = image.group(1)
        m = _VERTEX_RE.match(line)
        if not m:
            cli_error = _CLI_ERROR_RE.match(line)
            if cli_error and self.error is None:
                self.error = line
            return [BuildEvent("log", line)]
        vertex, rest = m.group(1), m.group(2)
        step_id = self._steps.get(vertex)
        step = _STEP_RE.match(rest)
        if step:
            sid = f"{step.group('n')}/{step.group('total')}"
            self._steps[vertex] = sid
            return [BuildEvent("step", f"Step {sid} : {step.group('text')}", step=sid)]
        if _DONE_RE.match(rest) or _SHA_LINE_RE.match(rest):
            return [BuildEvent("log", line, step=step_id)]
        err = _ERROR_RE.match(rest)
        if err:
            if self.error is None:
                self.error = err.group(1)
            return [BuildEvent("log", line, step=step_id)]
        out = _OUTPUT_RE.match(rest)
        if out:
            return [BuildEvent("log", out.group(1), step=step_id)]
        if _BYTES_RE.search(rest):
            return [BuildEvent("progress", rest, step=step_id)]
        return [BuildEvent("log", rest, step=step_id)]

    def finish(self, returncode: int) -> list[BuildEvent]:
        if returncode != 0 or not self.image_id:
            message = self.error or (f"the BuildKit build exited with status {returncode}" if returncode
                                     else "the BuildKit build ended without an image id")
            raise BuildError(" ".join(message.split())[:300], log_tail=self.log_tail,
                             where=f"build {self.tag}" if self.tag else None,
                             fix="see the log tail above; rerun with --no-cache if a cached layer is stale")
        return [BuildEvent("done", f"built {self.image_id}", image_id=self.image_id)]


# --------------------------------------------------------------------------- BuildKit


@dataclass(frozen=True)
class BuildKitBuilder:
    """BuildKit through a docker CLI (see the module docstring), on the engine at ``host``."""

    cli: BuildKitCli
    host: str | None
    network: str | None = None  # ``--network`` of RUN steps (``none`` in tests of offline rebuilds)
    kind: BuilderKind = "buildkit"

    def build(self, context_tar: bytes, tag: str, *, labels: Mapping[str, str], nocache: bool = False,
              pull: bool = False, secrets: Mapping[str, bytes] | None = None,
              platform: str | None = None) -> Iterator[BuildEvent]:
        with tempfile.TemporaryDirectory(prefix="envman-build-") as private:
            os.chmod(private, 0o700)
            argv = self._argv(Path(private), tag, _namespaced(labels), nocache, pull, secrets or {})
            if platform:
                argv[-3:-3] = ["--platform", platform]
            env = {**os.environ, "DOCKER_BUILDKIT": "1", "DOCKER_CLI_HINTS": "false", "BUILDKIT_PROGRESS": "plain"}
            if self.host is not None:  # None: an engine only the docker CLI knows, by its own context
                env["DOCKER_HOST"] = self.host
            yield from self._run(argv, env, context_tar, tag, Path(private) / "iid")

    def _argv(self, private: Path, tag: str, labels: Mapping[str, str], nocache: bool, pull: bool,
              secrets: Mapping[str, bytes]) -> list[str]:
        argv = [*self.cli.argv(), "--progress=plain", "--iidfile", str(private / "iid"), "-t", tag]
        for key, value in sorted(labels.items()):
            argv += ["--label", f"{key}={value}"]
        for sid, data in sorted(secrets.items()):
            if not _SECRET_ID_RE.fullmatch(sid):
                raise UserError(f"build secret id {sid!r} is not a-z, 0-9 and -", where=f"build {tag}")
            path = private / f"secret-{sid}"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            argv += ["--secret", f"id={sid},src={path}"]
        if nocache:
            argv.append("--no-cache")
        if pull:
            argv.append("--pull")
        if self.network:
            argv += ["--network", self.network]
        return [*argv, "-f", "Dockerfile", "-"]

    def _run(self, argv: list[str], env: dict[str, str], context_tar: bytes, tag: str, iidfile: Path) -> Iterator[BuildEvent]:
        parser = PlainProgressParser(tag=tag)
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    env=env, text=True, encoding="utf-8", errors="replace", bufsize=1)
        except OSError as exc:
            raise EngineError(f"build {tag}: cannot run {self.cli.docker}: {exc.strerror}", fix=BUILDKIT_FIX) from exc
        feeder = threading.Thread(target=_feed, args=(proc, context_tar), daemon=True)
        feeder.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                yield from parser.feed(line)
            rc = proc.wait()
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        finally:
            feeder.join(timeout=5)
        if rc == 0 and not parser.image_id and iidfile.is_file():
            parser.image_id = iidfile.read_text().strip() or None
        try:
            yield from parser.finish(rc)
        except BuildError as err:
            yield BuildEvent("error", err.what)
            raise


def _feed(proc: subprocess.Popen[str], data: bytes) -> None:
    """Write the context tar to the CLI's stdin (binary, under the text wrapper) and close it."""
    assert proc.stdin is not None
    stdin = cast(io.TextIOWrapper, proc.stdin)  # text=True: a TextIOWrapper over the binary pipe
    try:
        stdin.buffer.write(data)
        stdin.close()
    except (BrokenPipeError, OSError, ValueError):
        pass  # the CLI died early; its output says why


# --------------------------------------------------------------------------- selection


def select_builder(engine: ContainerEngine, preference: str = "auto", *, cli: BuildKitCli | None | Literal[False] = False,
                   network: str | None = None) -> Builder:
    """The builder for ``engine``: ``auto``, ``buildkit`` or ``classic`` (see the module docstring).

    ``cli`` overrides the search for a docker CLI (``None``: there is none), for tests. ``network``
    (``host``, from ``[build] network``): the network of the RUN steps.
    """
    if preference not in BUILDER_CHOICES:
        raise UserError(f"unknown builder {preference!r}", where="--builder", fix="use auto, buildkit or classic")
    if preference == "classic":
        return ClassicBuilder(engine, network=network)
    found = find_buildkit_cli() if cli is False else cli
    podman = bool(getattr(engine, "is_podman", False))  # its Docker API has no BuildKit sessions
    engine_ok = not podman and engine_has_buildkit(engine.info())
    if found is not None and engine_ok:
        return BuildKitBuilder(found, engine.url, network=network)
    if preference == "auto":
        return ClassicBuilder(engine, network=network)
    if podman:
        raise UserError("--builder buildkit: the engine is Podman, whose Docker API builds with its own (classic) builder",
                        where="--builder", fix="pass --builder classic (or auto) with Podman")
    why = "the engine does not serve BuildKit (Engine API 1.39+ on Linux)" if not engine_ok else \
        "no docker CLI here builds with BuildKit (no buildx plugin, and every docker CLI is 23.0 or newer)"
    raise UserError(f"--builder buildkit: {why}", where="--builder", fix=BUILDKIT_FIX if engine_ok else
                    "upgrade the engine to Docker 18.09 or newer, or pass --builder classic")


#: Temporary tags that let BuildKit build ``FROM`` an image id (see :func:`from_image_id`).
ID_TAG_REPOSITORY = "envman/by-id"


@contextmanager
def buildable_ids(engine: ContainerEngine, builder: Builder, image_ids: Iterable[str]) -> Iterator[dict[str, str]]:
    """What a Dockerfile's ``FROM`` names for ``builder`` to build on each of ``image_ids``: the
    ID itself for the classic builder, which reads an image ID there; for BuildKit, which reads
    ``sha256:...`` as a registry name, a tag named after the ID (``envman/by-id:<64 hex>``), made
    here and removed afterwards, even when the build fails. (On a shared engine anyone can move
    that tag while the build runs, as any tag.)"""
    names: dict[str, str] = {}
    made: list[str] = []
    try:
        for image_id in image_ids:
            if builder.kind != "buildkit":
                names[image_id] = image_id
                continue
            hex_id = image_id.split(":", 1)[-1]
            if not re.fullmatch(r"[0-9a-f]{64}", hex_id):
                raise UserError(f"{image_id!r} is not an image id", where="FROM")
            if image_id not in names:
                ref = f"{ID_TAG_REPOSITORY}:{hex_id}"
                engine.tag(image_id, ref)
                made.append(ref)
                names[image_id] = ref
        yield names
    finally:
        for ref in made:
            engine.remove_image(ref)


@contextmanager
def from_image_id(engine: ContainerEngine, builder: Builder, files: Mapping[str, bytes], image_id: str) -> Iterator[dict[str, bytes]]:
    """The context ``files`` as ``builder`` can build them when the Dockerfile says ``FROM <image
    id>``: for BuildKit the ``FROM`` line names the ID's tag of :func:`buildable_ids` instead."""
    line = f"FROM {image_id}\n".encode()
    if builder.kind != "buildkit" or line not in files.get("Dockerfile", b""):
        yield dict(files)
        return
    with buildable_ids(engine, builder, [image_id]) as names:
        out = dict(files)
        out["Dockerfile"] = files["Dockerfile"].replace(line, f"FROM {names[image_id]}\n".encode(), 1)
        yield out


def builder_for_render(preference: str) -> BuilderKind:
    """The Dockerfile dialect ``envman render`` writes for ``preference``, without an engine:
    ``auto`` means BuildKit when a docker CLI here can drive it."""
    if preference == "auto":
        return "buildkit" if find_buildkit_cli() is not None else "classic"
    if preference not in ("buildkit", "classic"):
        raise UserError(f"unknown builder {preference!r}", where="--builder", fix="use auto, buildkit or classic")
    return preference  # type: ignore[return-value]


__all__ = [
    "BUILDER_CHOICES",
    "BuildKitBuilder",
    "BuildKitCli",
    "Builder",
    "BuilderKind",
    "ClassicBuilder",
    "PlainProgressParser",
    "builder_for_render",
    "engine_has_buildkit",
    "find_buildkit_cli",
    "select_builder",
]
