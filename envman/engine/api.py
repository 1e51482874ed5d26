"""The engine seam: what envman asks of a container engine, and the typed facts it gets back.

Two protocols, so that every implementation declares what it offers:

* :class:`EngineFacts`, the read side: the engine's :class:`EngineInfo`, images
  (:class:`ImageInfo`) and containers (:class:`ContainerInfo`). Implemented by the Docker SDK
  engine (:class:`envman.engine.docker.Engine`), by the fast Unix-socket client of the run path
  (:class:`envman.engine.facts.DockerFacts`) and by the tests' fake engine.
* :class:`ContainerEngine`, the full engine: the read side plus builds, runs, tags, removals,
  imports and registries. :class:`envman.engine.docker.Engine` implements it for Docker and for
  Podman's Docker-compatible API (GPU runs go through libpod's CDI devices there, see
  :mod:`envman.engine.select`); builders other than the engine's own (BuildKit through
  ``docker buildx``, :mod:`envman.engine.builder`) plug in behind the same ``build`` signature.

The facts are parsed from the Engine API's JSON in one place each (``from_api``), whatever the
transport, so both implementations answer the same shapes. ``docker inspect`` and the list
endpoints spell the same fact differently (``Config.Labels`` / ``Labels``, an ISO ``Created`` /
Unix seconds); the parsers take either.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, Union

from envman.engine.select import PODMAN, PODMAN_CDI_DIRS, EngineKind, cdi_gpu_devices
from envman.engine.values import GpuRequest, Mount
# A label filter: {"k": "v"} or ["k", "k=v"] (every one must match).
LabelFilter = Union[Mapping[str, str], Iterable[str]]

BuildEventKind = Literal["step", "log", "progress", "done", "error"]


def label_filters(labels: LabelFilter) -> list[str]:
    """A label filter as the Engine API's ``label`` filter values."""
    if isinstance(labels, Mapping):
        return [f"{k}={v}" for k, v in sorted(labels.items())]
    return sorted(labels)


# --------------------------------------------------------------------------- engine facts


def cdi_has_nvidia(dirs: Iterable[str]) -> bool:
    """Whether a CDI spec for NVIDIA GPUs is in one of the engine's spec dirs (local engine)."""
    for d in dirs:
        p = Path(d)
        try:
            if p.is_dir() and any("nvidia" in f.name for f in p.iterdir()):
                return True
        except OSError:
            continue
    return False


@dataclass(frozen=True)
class EngineInfo:
    """What envman needs to know about the engine (``docker info`` plus which engine it is)."""

    kind: str = "docker"  # docker | podman
    version: str = ""  # the engine's own version (Podman's on Podman)
    server_version: str = ""  # ``ServerVersion`` of the Docker-compatible API
    api_version: str = ""
    runtimes: tuple[str, ...] = ()
    default_runtime: str = ""
    os: str = ""
    architecture: str = ""
    storage_driver: str = ""
    cgroup_version: str = ""
    cdi_spec_dirs: tuple[str, ...] = ()
    #: Podman on this machine: the ``nvidia.com/gpu`` devices its CDI specs name; else ``None``.
    cdi_gpu_devices: tuple[str, ...] | None = None
    rootless: bool = False
    url: str | None = None
    source: str = ""  # how the engine was selected (envman.engine.select)

    @property
    def nvidia_runtime(self) -> bool:
        """Docker with the NVIDIA runtime. Podman's Docker API ignores GPU requests: never there."""
        return self.kind != PODMAN and "nvidia" in self.runtimes

    def gpu_mechanism(self) -> str | None:
        """How this engine gives containers GPUs: ``runtime``, ``cdi`` or ``None``."""
        if self.nvidia_runtime:
            return "runtime"
        if cdi_has_nvidia(self.cdi_spec_dirs):
            return "cdi"
        return None

    @classmethod
    def from_api(cls, raw: Mapping[str, Any], kind: EngineKind, *, api_version: str = "", url: str | None = None,
                 source: str = "", local: bool = False) -> EngineInfo:
        """From the Engine API's ``/info`` and the engine's kind. On Podman, GPUs are CDI devices
        only, read from the spec directories Podman itself reads when it is local."""
        podman = kind.kind == PODMAN
        if podman:
            spec_dirs: tuple[str, ...] = tuple(PODMAN_CDI_DIRS) if local else ()
            devices: tuple[str, ...] | None = tuple(sorted(cdi_gpu_devices(PODMAN_CDI_DIRS))) if local else ()
        else:
            spec_dirs = tuple(str(d) for d in raw.get("CDISpecDirs") or ())
            devices = None
        server = str(raw.get("ServerVersion") or "")
        return cls(
            kind=kind.kind, version=kind.version or server, server_version=server,
            api_version=api_version or kind.api_version,
            runtimes=tuple(sorted(str(r) for r in (raw.get("Runtimes") or {}))),
            default_runtime=str(raw.get("DefaultRuntime") or ""), os=str(raw.get("OperatingSystem") or ""),
            architecture=str(raw.get("Architecture") or ""), storage_driver=str(raw.get("Driver") or ""),
            cgroup_version=str(raw.get("CgroupVersion") or ""), cdi_spec_dirs=spec_dirs, cdi_gpu_devices=devices,
            rootless=kind.rootless, url=url, source=source,
        )


_ISO_RE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.\d+)?(Z|[+-]\d\d:\d\d)?$", re.ASCII)


def unix_seconds(value: Any) -> int:
    """``Created`` as Unix seconds: the list endpoints' integer or ``inspect``'s RFC 3339 text."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, (int, float)):
        return int(value)
    m = _ISO_RE.match(str(value or "").strip())
    if not m:
        return 0
    text = m.group(1)
    year, month, day = int(text[0:4]), int(text[5:7]), int(text[8:10])
    hour, minute, second = int(text[11:13]), int(text[14:16]), int(text[17:19])
    if not (1 <= month <= 12 and 1 <= day <= _month_days(year, month) and hour <= 23 and minute <= 59 and second <= 61):
        return 0  # no such time: as unreadable as text that is no time at all
    seconds = _days_since_epoch(year, month, day) * 86400 + hour * 3600 + minute * 60 + second
    zone = m.group(2) or "Z"
    if zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        seconds -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    return seconds


def _month_days(year: int, month: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _days_since_epoch(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 to the proleptic Gregorian date (what ``calendar.timegm`` counts,
    without importing ``calendar`` and ``time.strptime`` on the run path): March-based years, so
    the leap day ends a year."""
    y = year - (month <= 2)
    era = y // 400
    year_of_era = y - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146097 + day_of_era - 719468


def _labels(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, (list, tuple)) else ()


@dataclass(frozen=True)
class ImageInfo:
    """An image, from ``docker image inspect`` or ``docker images``."""

    id: str
    tags: tuple[str, ...] = ()  # repo:tag names, sorted
    labels: Mapping[str, str] = field(default_factory=dict)
    size: int = 0  # bytes
    created: int = 0  # Unix seconds
    repo_digests: tuple[str, ...] = ()  # REPO@sha256:... as the engine knows them from registries
    architecture: str = ""
    os: str = ""
    layers: tuple[str, ...] = ()  # the digests of its root filesystem's layers (inspect only)
    env: tuple[str, ...] = ()  # NAME=value, as its config sets them (inspect only)

    @classmethod
    def from_api(cls, doc: Mapping[str, Any]) -> ImageInfo:
        config = doc.get("Config") if isinstance(doc.get("Config"), Mapping) else None
        labels = config.get("Labels") if config is not None else doc.get("Labels")
        return cls(
            id=str(doc.get("Id") or ""),
            tags=tuple(sorted(t for t in _strings(doc.get("RepoTags")) if t != "<none>:<none>")),
            labels=_labels(labels),
            size=int(doc.get("Size") or 0),
            created=unix_seconds(doc.get("Created")),
            repo_digests=tuple(d for d in _strings(doc.get("RepoDigests")) if d != "<none>@<none>"),
            architecture=str(doc.get("Architecture") or ""),
            os=str(doc.get("Os") or ""),
            layers=_strings((doc.get("RootFS") or {}).get("Layers") if isinstance(doc.get("RootFS"), Mapping) else ()),
            env=_strings(config.get("Env")) if config is not None else (),
        )


@dataclass(frozen=True)
class ContainerInfo:
    """A container, from ``docker container inspect`` or ``docker ps``."""

    id: str
    name: str  # without the leading /
    image: str  # the image reference it was created from
    state: str  # running, exited, created, ...
    labels: Mapping[str, str] = field(default_factory=dict)
    image_id: str = ""  # the id of the image it was created from ("" when the engine does not say)
    created: int = 0  # Unix seconds
    mounts: tuple[tuple[str, str], ...] = ()  # (host source, container destination)

    @classmethod
    def from_api(cls, doc: Mapping[str, Any]) -> ContainerInfo:
        config = doc.get("Config") if isinstance(doc.get("Config"), Mapping) else None
        if config is not None:  # inspect
            name = str(doc.get("Name") or "")
            image, image_id = str(config.get("Image") or ""), str(doc.get("Image") or "")
            state = doc.get("State")
            status = str(state.get("Status") or "") if isinstance(state, Mapping) else str(state or "")
            labels = config.get("Labels")
        else:  # list
            names = _strings(doc.get("Names"))
            name = names[0] if names else ""
            image, image_id = str(doc.get("Image") or ""), str(doc.get("ImageID") or "")
            status = str(doc.get("State") or doc.get("Status") or "")
            labels = doc.get("Labels")
        mounts = tuple((str(m.get("Source") or ""), str(m.get("Destination") or ""))
                       for m in doc.get("Mounts") or () if isinstance(m, Mapping))
        return cls(id=str(doc.get("Id") or ""), name=name.lstrip("/"), image=image, state=status,
                   labels=_labels(labels), image_id=image_id, created=unix_seconds(doc.get("Created")),
                   mounts=mounts)

    def mount_source(self, destination: str) -> str | None:
        """The host path mounted at ``destination``, if any."""
        return next((src for src, dst in self.mounts if dst == destination), None)


@dataclass(frozen=True)
class NetworkInfo:
    """A network, from ``docker network inspect`` (``GET /networks/NAME``)."""

    id: str
    name: str
    driver: str
    labels: Mapping[str, str] = field(default_factory=dict)
    containers: int = 0  # endpoints attached now (inspect only: a list says 0)
    created: int = 0  # Unix seconds
    gateway: str = ""  # the first IPAM gateway address ("" when it has none)

    @classmethod
    def from_api(cls, doc: Mapping[str, Any]) -> NetworkInfo:
        attached = doc.get("Containers")
        ipam = doc.get("IPAM")
        configs = ipam.get("Config") if isinstance(ipam, Mapping) else None
        gateway = next((str(c["Gateway"]) for c in configs or () if isinstance(c, Mapping) and c.get("Gateway")), "") \
            if isinstance(configs, list) else ""
        return cls(id=str(doc.get("Id") or doc.get("id") or ""), name=str(doc.get("Name") or doc.get("name") or ""),
                   driver=str(doc.get("Driver") or doc.get("driver") or ""), labels=_labels(doc.get("Labels")),
                   containers=len(attached) if isinstance(attached, Mapping) else 0,
                   created=unix_seconds(doc.get("Created")), gateway=gateway)


@dataclass(frozen=True)
class BuildEvent:
    """One line of progress from a build.

    ``kind`` is ``"step"`` for a Dockerfile instruction starting (``step`` is then ``"3/12"``),
    ``"log"`` for any other output line, ``"progress"`` for a byte count inside a step (BuildKit's
    transfers), ``"done"`` once at the end (``image_id`` set) and ``"error"`` just before
    :class:`envman.errors.BuildError` is raised. On BuildKit, ``log`` and ``progress`` events carry
    the ``step`` they belong to when it is known.
    """

    kind: BuildEventKind
    text: str
    step: str | None = None
    image_id: str | None = None


@dataclass(frozen=True)
class RunResult:
    """Outcome of a non-interactive run. ``timed_out`` runs were killed; their ``exit_code`` is 124."""

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


# --------------------------------------------------------------------------- the protocols


class EngineFacts(Protocol):
    """The read side of an engine: what the run path, ``doctor`` and every other reader ask."""

    @property
    def url(self) -> str | None:
        """Where the engine is (``unix:///path``), ``None`` when only the ``docker`` CLI knows."""
        ...

    def info(self) -> EngineInfo:
        """The engine's facts; an unreachable engine is one :class:`envman.errors.EngineError`."""
        ...

    def kind(self) -> EngineKind:
        """Docker or Podman, rootless or not."""
        ...

    def inspect_image(self, ref: str) -> ImageInfo | None:
        """The image ``ref`` (a name or an id), ``None`` when the engine has none."""
        ...

    def image_exists(self, ref: str) -> bool:
        ...

    def list_images(self, label_filter: LabelFilter) -> list[ImageInfo]:
        """Images matching every label filter."""
        ...

    def list_containers(self, labels: LabelFilter, *, all: bool = True) -> list[ContainerInfo]:
        """Containers matching every label filter (``all=False``: running ones only)."""
        ...

    def inspect_container(self, ref: str) -> ContainerInfo | None:
        """The container ``ref`` (a name or an id), ``None`` when there is none."""
        ...


class ContainerEngine(EngineFacts, Protocol):
    """A full engine: the read side plus what changes the engine's state."""

    @property
    def is_podman(self) -> bool:
        ...

    def build(self, context_tar: bytes, tag: str, *, labels: Mapping[str, str],
              buildargs: Mapping[str, str] | None = None, nocache: bool = False, pull: bool = False,
              dockerfile: str = "Dockerfile", platform: str | None = None,
              network: str | None = None, extra_hosts: Mapping[str, str] | None = None) -> Iterator[BuildEvent]:
        """Build a context tar (:func:`envman.engine.context.deterministic_tar`) as ``tag``;
        ``network``: the RUN steps' network (``None``: the engine's default); ``extra_hosts``:
        host names the RUN steps resolve to these addresses."""
        ...

    def run(self, image: str, command: Sequence[str], *, env: Mapping[str, str] | None = None,
            user: str | None = None, mounts: Sequence[Mount] | None = None, workdir: str | None = None,
            gpus: GpuRequest | None = None, shm_size: str | int | None = None,
            ports: Mapping[int, int] | None = None, labels: Mapping[str, str] | None = None, remove: bool = True,
            tty: bool = False, stdin: bool = False, security_opt: Sequence[str] | None = ("no-new-privileges",),
            network: str | None = None, timeout: float | None = None) -> RunResult:
        """Run ``command`` in a new container and wait for it (non-interactive)."""
        ...

    def tag(self, image: str, ref: str) -> None:
        ...

    def remove_image(self, ref: str, force: bool = False) -> bool:
        ...

    def remove_container(self, container: str, force: bool = True) -> bool:
        ...

    def import_image(self, tar_path: str, ref: str, *, changes: Sequence[str] = ()) -> str:
        ...

    def push(self, ref: str, *, on_progress: Callable[[str], None] | None = None) -> str:
        ...

    def pull(self, ref: str) -> None:
        ...

    def registry_digest(self, ref: str) -> str:
        ...

    def insecure_registries(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        ...
