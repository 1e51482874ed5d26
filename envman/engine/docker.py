"""The one module that talks to the container engine through the Docker SDK.

Everything else in envman speaks to :class:`Engine` (a :class:`envman.engine.api.ContainerEngine`)
and the typed facts of :mod:`envman.engine.api`, never to ``docker`` itself. The SDK is imported lazily (inside :meth:`Engine.connect`, :meth:`Engine.__init__`
and the few helpers that need its types) so ``envman --help`` and every daemon-free code path
stay fast and work where the SDK cannot reach an engine.

Contract, in short:

* :meth:`Engine.connect` pings the engine; an unreachable one is one :class:`EngineError` line
  with the fix.
* :meth:`Engine.build` streams :class:`BuildEvent` objects from the classic builder (the
  low-level SDK speaks no BuildKit); a failed build raises :class:`BuildError` carrying the last
  :data:`envman.engine.streams.LOG_TAIL_LINES` lines of the log.
* :meth:`Engine.run` is for non-interactive commands: detached container, wait, stdout and
  stderr read separately, container removed in ``finally``. Asking for a GPU the engine cannot
  give is an error with the fix, never a silent CPU run: a GPU run that quietly fell back to
  the CPU would pass checks it never made.
* Everything envman creates carries labels in the ``envman.`` namespace (names in ``envman.labels``):
  callers pass theirs (keys outside ``envman.`` are refused) and :meth:`Engine.run` always adds
  :data:`envman.labels.MANAGED_LABELS`. Builds do not add it: image labels are inherited by every image built
  ``FROM`` them, so the caller decides what an image says about itself.
"""

from __future__ import annotations

import io
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from envman import labels as labels_mod
from envman.engine.api import BuildEvent, ContainerInfo, EngineInfo, ImageInfo, LabelFilter, RunResult, label_filters
from envman.engine.cdi import GENERATE_FIX
from envman.engine.gpurequests import NVIDIA_TOOLKIT_FIX, gpu_device_requests
from envman.engine.select import EngineKind, config_engine_host, kind_from, says_podman, select_engine
from envman.engine.streams import layer_progress, parse_build_stream
from envman.engine.values import GpuRequest, Mount
from envman.errors import BuildError, EngineError

if TYPE_CHECKING:  # pragma: no cover - typing only, never imported at run time
    from docker import APIClient

DEFAULT_TIMEOUT_S = 60

DEFAULT_DOCKER_URL = "unix:///var/run/docker.sock"
_DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
UNREACHABLE_FIX = "start dockerd / check DOCKER_HOST / add your user to the docker group"


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


# --------------------------------------------------------------------------- the engine


def _sdk_client(base_url: str | None, url: str, timeout: int) -> APIClient:
    """The Docker SDK's client of ``base_url`` (else as ``docker.from_env``), pinged."""
    import docker
    import requests

    try:
        if base_url:
            api = docker.APIClient(base_url=base_url, version="auto", timeout=timeout)
        else:
            api = docker.DockerClient.from_env(version="auto", timeout=timeout).api
        api.ping()
    except (docker.errors.DockerException, requests.RequestException, OSError) as exc:
        raise EngineError(f"Docker engine not reachable at {url}", fix=UNREACHABLE_FIX) from exc
    return api


def _says_api_version(status: int, version: Any) -> bool:
    return status == 200 and isinstance(version, dict) and bool(version.get("ApiVersion"))


class Engine:
    """A connected Docker engine. Build with :meth:`connect`; ``Engine(api)`` wraps an SDK client."""

    def __init__(self, api: APIClient | None, *, url: str = DEFAULT_DOCKER_URL, source: str = "",
                 socket: str | None = None, base_url: str | None = None, timeout: int = DEFAULT_TIMEOUT_S) -> None:
        """``api``: the SDK client; ``None`` with ``socket`` (the engine's Unix socket): the reads
        :meth:`info`, :meth:`kind` and :meth:`inspect_image` go over the socket
        (:mod:`envman.engine.socket`), and the SDK is imported and connected (to ``base_url``, or
        as ``docker.from_env``) only when something else is asked."""
        self._client = api
        self.url = url
        self.source = source  # how it was selected (envman.engine.select)
        self.socket = socket if api is None else None
        self._base_url = base_url
        self._timeout = timeout
        self._kind: EngineKind | None = None
        self._info: dict[str, Any] | None = None  # the socket's /info, as kind() read it

    @property
    def _api(self) -> APIClient:
        """The SDK client, connected on first use (about 0.1 s to import and connect)."""
        if self._client is None:
            self._client = _sdk_client(self._base_url, self.url, self._timeout)
        return self._client

    def _socket_get(self, path: str) -> Any:
        """``GET path`` on the socket: the JSON body of a 200, ``None`` for a 404; :class:`NoAnswer`
        when there is no socket or no clean answer (then the SDK answers)."""
        from envman.engine.socket import NoAnswer, api_get

        status, body = api_get(self.socket, path, timeout=self._timeout)
        if status == 404:
            return None
        if status != 200 or body is None:
            raise NoAnswer()
        return body

    # -- connection -------------------------------------------------------------------------

    @classmethod
    def connect(cls, base_url: str | None = None, timeout: int = DEFAULT_TIMEOUT_S) -> Engine:
        """Connect like ``docker.from_env`` (``DOCKER_HOST``, TLS variables, the current
        context) or to ``base_url``, and ping. Without ``DOCKER_HOST`` or a context, the engine is
        the one :func:`envman.engine.select.select_engine` picks (config, Docker socket, this
        user's rootless Podman socket). ``timeout`` bounds ordinary API calls; builds and
        container waits have their own. An engine on a Unix socket is pinged there and the SDK
        connected only when needed (see :meth:`__init__`)."""

        source = "argument" if base_url else ""
        if not base_url and not os.environ.get("DOCKER_HOST") and not os.environ.get("DOCKER_CONTEXT"):
            addr = select_engine(config_host=config_engine_host())
            if addr.source not in ("docker socket", "default"):
                base_url = addr.url
            source = addr.source
        url = base_url or os.environ.get("DOCKER_HOST") or DEFAULT_DOCKER_URL
        source = source or ("DOCKER_HOST" if os.environ.get("DOCKER_HOST") else "docker context")
        if url.startswith("unix://") and not os.environ.get("DOCKER_TLS_VERIFY"):
            from envman.engine.socket import NoAnswer, api_get, ping

            path = url[len("unix://"):]
            try:  # the engine's own socket answers: the SDK waits until something needs it
                # every engine's /_ping names its API version; /version (slower) only when it does not
                if ping(path, timeout=timeout).get("api-version") or _says_api_version(*api_get(path, "/version", timeout=timeout)):
                    return cls(None, url=url, source=source, socket=path, base_url=base_url, timeout=timeout)
            except NoAnswer:
                pass
        return cls(_sdk_client(base_url, url, timeout), url=url, source=source)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def info(self) -> EngineInfo:
        """The facts envman needs from ``docker info``."""
        from envman.engine.socket import NoAnswer

        try:
            kind = self.kind()  # asks /info too: its answer is used when clean
            raw, api_version = self._info or self._socket_get("/info"), kind.api_version
            if not isinstance(raw, dict):
                raise NoAnswer()
        except NoAnswer:
            with self._errors("docker info"):
                raw, api_version = self._api.info(), str(self._api.api_version)
        return EngineInfo.from_api(raw, self.kind(), api_version=api_version, url=self.url,
                                   source=self.source, local=self.url.startswith("unix://"))

    def kind(self) -> EngineKind:
        """The engine's :class:`envman.engine.select.EngineKind`: Docker or Podman, rootless or not."""

        from envman.engine.socket import engine_answers

        if self._kind is None:
            version, info, libpod = engine_answers(self.socket, timeout=self._timeout) if self.socket else (None, None, None)
            podman = says_podman(version)
            self._info = info  # the socket's /info, which info() reuses
            if version is None or (libpod if podman else info) is None:  # no clean answer: the SDK asks
                self._info = None
                with self._errors("docker version"):
                    version = self._api.version()
                podman = says_podman(version)
                libpod = self._libpod_get("/info") if podman else None
                with self._errors("docker info"):
                    info = None if podman else self._api.info()
            self._kind = kind_from(version, info, libpod)
        return self._kind

    @property
    def is_podman(self) -> bool:
        return self.kind().kind == "podman"

    def _libpod_url(self, path: str) -> str:
        return f"{self._api.base_url}/v4.0.0/libpod{path}"

    def _libpod_get(self, path: str) -> dict[str, Any] | None:
        with self._errors(f"podman {path}"):
            res = self._api._get(self._libpod_url(path))  # type: ignore[attr-defined]  # the SDK's GET with its timeout; not in types-docker
            return res.json() if res.status_code == 200 else None

    # -- build ------------------------------------------------------------------------------

    def build(
        self,
        context_tar: bytes,
        tag: str,
        *,
        labels: Mapping[str, str],
        buildargs: Mapping[str, str] | None = None,
        nocache: bool = False,
        pull: bool = False,
        dockerfile: str = "Dockerfile",
        platform: str | None = None,
        network: str | None = None,
        extra_hosts: Mapping[str, str] | None = None,
    ) -> Iterator[BuildEvent]:
        """Build ``context_tar`` (see :func:`deterministic_tar`) as ``tag``, streaming events.

        ``platform`` (``linux/arm64``) asks the engine for that platform; ``None``: the engine's own.
        ``network`` (``host``): the network of the RUN steps; ``None``: the engine's default.
        ``extra_hosts``: ``{name: address}`` added to the RUN steps' /etc/hosts.

        Intermediate containers are always removed. Raises :class:`BuildError` with the log
        tail on failure, after yielding an ``error`` event.
        """
        import docker.errors
        import requests

        try:
            chunks = self._api.build(
                fileobj=io.BytesIO(context_tar),
                custom_context=True,
                encoding=None,
                tag=tag,
                labels=labels_mod.namespaced(labels),
                buildargs=dict(buildargs or {}),
                nocache=nocache,
                pull=pull,
                dockerfile=dockerfile,
                platform=platform,
                network_mode=network,
                extra_hosts=dict(extra_hosts) if extra_hosts else None,
                rm=True,
                forcerm=True,
                decode=True,
                timeout=None,  # a silent RUN step (a big pip install) can take many minutes
            )
            yield from parse_build_stream(chunks, tag=tag)
        except requests.RequestException as exc:
            raise EngineError(f"build {tag}: lost the engine: {_one_line(str(exc))}", fix=UNREACHABLE_FIX) from exc
        except docker.errors.APIError as exc:
            yield BuildEvent("error", _one_line(exc.explanation or str(exc)))
            raise BuildError(_one_line(exc.explanation or str(exc)), where=f"build {tag}") from exc

    # -- images -----------------------------------------------------------------------------

    def inspect_image(self, ref: str) -> ImageInfo | None:
        from envman.engine.socket import NoAnswer, image_path

        try:
            found = self._socket_get(image_path(ref))
            if found is None or isinstance(found, dict):
                return ImageInfo.from_api(found) if found is not None else None
        except NoAnswer:
            pass
        doc = self._inspect(lambda: self._api.inspect_image(ref), f"inspect image {ref}")
        return ImageInfo.from_api(doc) if doc is not None else None

    def image_exists(self, ref: str) -> bool:
        return self.inspect_image(ref) is not None

    def tag(self, image: str, ref: str) -> None:
        """Point ``ref`` (``repo:tag``) at ``image`` (an id or another ref)."""
        from docker.utils import parse_repository_tag

        repository, tag = parse_repository_tag(ref)
        with self._errors(f"tag {image} as {ref}"):
            self._api.tag(image, repository, tag or "latest")

    def remove_image(self, ref: str, force: bool = False) -> bool:
        """Remove ``ref``; ``False`` when it was already gone."""
        return self._remove(lambda: self._api.remove_image(ref, force=force), f"remove image {ref}")

    def list_images(self, label_filter: LabelFilter) -> list[ImageInfo]:
        """Images matching every label filter (``{"k": "v"}`` or ``["k", "k=v"]``)."""
        with self._errors("list images"):
            raw = self._api.images(filters={"label": label_filters(label_filter)})
        return [ImageInfo.from_api(img) for img in raw]

    def import_image(self, tar_path: str | os.PathLike[str], ref: str, *, changes: Sequence[str] = ()) -> str:
        """``docker import`` a root filesystem tarball as ``ref``; returns the image id.

        ``changes`` are Dockerfile instructions applied on import (``LABEL``, ``ENV``, ``CMD``...).
        """
        from docker.utils import parse_repository_tag

        repository, tag = parse_repository_tag(ref)
        with self._errors(f"import {tar_path} as {ref}"):
            self._api.import_image_from_file(os.fspath(tar_path), repository=repository,
                                             tag=tag or "latest", changes=list(changes))
        info = self.inspect_image(ref)
        if info is None:
            raise EngineError(f"import of {tar_path} as {ref} left no image")
        return info.id

    # -- registries -------------------------------------------------------------------------
    #
    # Credentials: the SDK reads them from Docker's own config (``~/.docker/config.json``,
    # ``DOCKER_CONFIG``) and its credential helpers / store, exactly as the docker CLI does;
    # envman passes none and stores none.

    def push(self, ref: str, *, on_progress: Callable[[str], None] | None = None) -> str:
        """Push ``ref`` (``REGISTRY/REPO:TAG``); returns the manifest digest the registry
        reported. The push stream carries errors as items, never as exceptions: every item
        is checked. ``on_progress`` gets a line per layer as its state changes (and every
        quarter of a large upload), as :func:`layer_progress` words them."""
        from docker.utils import parse_repository_tag

        repository, tag = parse_repository_tag(ref)
        digest: str | None = None
        seen: dict[str, tuple[str, int]] = {}
        with self._errors(f"push {ref}"):
            for item in self._api.push(repository, tag=tag or "latest", stream=True, decode=True):
                self._stream_error(item, f"push {ref}")
                line = layer_progress(item, seen) if on_progress else None
                if line and on_progress:
                    on_progress(line)
                aux = item.get("aux") if isinstance(item, Mapping) else None
                if isinstance(aux, Mapping) and isinstance(aux.get("Digest"), str):
                    digest = aux["Digest"]
        if not digest or not _DIGEST_RE.fullmatch(digest):
            raise EngineError(f"push {ref}: the registry reported no manifest digest")
        return digest

    def pull(self, ref: str) -> None:
        """Pull ``ref`` (a tag or ``REPO@sha256:...``; the engine verifies a digest's content)."""
        from docker.utils import parse_repository_tag

        repository, tag = parse_repository_tag(ref)
        with self._errors(f"pull {ref}"):
            for item in self._api.pull(repository, tag=tag, stream=True, decode=True):
                self._stream_error(item, f"pull {ref}")

    def registry_digest(self, ref: str) -> str:
        """The manifest digest ``ref`` has in its registry now (``docker manifest inspect``'s,
        through the engine, so the engine's registry settings and Docker's credentials apply)."""
        with self._errors(f"ask the registry about {ref}"):
            data = self._api.inspect_distribution(ref)
        digest = ((data or {}).get("Descriptor") or {}).get("digest", "")
        if not _DIGEST_RE.fullmatch(str(digest)):
            raise EngineError(f"ask the registry about {ref}: no manifest digest in its answer")
        return str(digest)

    def storage(self) -> tuple[int, int]:
        """``(bytes of image layers, bytes of build cache)`` the engine holds (``docker system
        df``): what removing images really freed is the first before minus after."""
        with self._errors("docker system df"):
            raw = self._api.df()
        layers = raw.get("LayersSize") or 0
        cache = sum(int(c.get("Size") or 0) for c in (raw.get("BuildCache") or ()) if isinstance(c, Mapping))
        return int(layers), cache

    def insecure_registries(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """``(CIDRs, host[:port] names)`` this engine talks to over plain HTTP when HTTPS fails
        (``insecure-registries`` in daemon.json; 127.0.0.0/8 by default)."""
        with self._errors("docker info"):
            raw = self._api.info()
        reg = raw.get("RegistryConfig") or {}
        cidrs = tuple(str(c) for c in (reg.get("InsecureRegistryCIDRs") or ()))
        names = tuple(sorted(str(n) for n, c in (reg.get("IndexConfigs") or {}).items()
                             if isinstance(c, Mapping) and c.get("Secure") is False))
        return cidrs, names

    @staticmethod
    def _stream_error(item: Any, what: str) -> None:
        if isinstance(item, Mapping) and ("error" in item or "errorDetail" in item):
            detail = item.get("errorDetail") or {}
            raise EngineError(f"{what}: {_one_line(str(detail.get('message') or item.get('error')))}")

    # -- containers -------------------------------------------------------------------------

    def list_containers(self, labels: LabelFilter, *, all: bool = True) -> list[ContainerInfo]:
        """Containers matching every label filter (``all=False``: running ones only)."""
        with self._errors("list containers"):
            raw = self._api.containers(all=all, filters={"label": label_filters(labels)})
        return [ContainerInfo.from_api(c) for c in raw]

    def inspect_container(self, ref: str) -> ContainerInfo | None:
        doc = self._inspect(lambda: self._api.inspect_container(ref), f"inspect container {ref}")
        return ContainerInfo.from_api(doc) if doc is not None else None

    def remove_container(self, container: str, force: bool = True) -> bool:
        """Remove a container (killing it when ``force``); ``False`` when it was already gone."""
        return self._remove(lambda: self._api.remove_container(container, force=force, v=True),
                            f"remove container {container}")

    def run(
        self,
        image: str,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        user: str | None = None,
        mounts: Sequence[Mount] | None = None,
        workdir: str | None = None,
        gpus: GpuRequest | None = None,
        shm_size: str | int | None = None,
        ports: Mapping[int, int] | None = None,
        labels: Mapping[str, str] | None = None,
        remove: bool = True,
        tty: bool = False,
        stdin: bool = False,
        security_opt: Sequence[str] | None = ("no-new-privileges",),
        network: str | None = None,
        timeout: float | None = None,
    ) -> RunResult:
        """Run ``command`` in a new container and wait for it (non-interactive).

        ``ports`` maps container ports to host ports published on 127.0.0.1 only. A run that
        outlives ``timeout`` seconds is killed and reported with ``timed_out=True``. Asking for
        ``gpus`` on an engine without the NVIDIA runtime or CDI raises :class:`EngineError`
        with the install fix.
        """
        import docker.errors
        import requests

        device_requests = gpu_device_requests(gpus)
        all_labels = labels_mod.with_managed(labels)
        port_map = {int(c): int(h) for c, h in (ports or {}).items()}
        if device_requests and self.is_podman:
            # Podman's Docker API accepts GPU requests and ignores them (the container runs, no
            # GPU): create it through the libpod API with CDI devices instead, or fail.
            cid = self._podman_create_with_cdi(image, command, gpus, env=env, user=user, mounts=mounts,
                                               workdir=workdir, shm_size=shm_size, ports=port_map, labels=all_labels,
                                               security_opt=security_opt, network=network)
            return self._start_wait(cid, image, gpus, device_requests, remove=remove, tty=tty, timeout=timeout)
        with self._errors(f"create container from {image}"):
            host_config = self._api.create_host_config(
                binds=[f"{m.source}:{m.target}:{m.mode}" for m in (mounts or [])] or None,
                device_requests=device_requests or None,  # type: ignore[arg-type]  # the SDK makes DeviceRequests of dicts
                shm_size=shm_size,
                port_bindings={c: ("127.0.0.1", h) for c, h in port_map.items()} or None,
                security_opt=list(security_opt) if security_opt else None,
                network_mode=network,
            )
            created = self._api.create_container(
                image,
                command=list(command),
                environment=dict(env) if env else None,
                user=user,
                working_dir=workdir,
                labels=all_labels,
                host_config=host_config,
                ports=list(port_map) or None,
                tty=tty,
                stdin_open=stdin,
                detach=True,
            )
        return self._start_wait(created["Id"], image, gpus, device_requests, remove=remove, tty=tty, timeout=timeout)

    def _start_wait(self, cid: str, image: str, gpus: GpuRequest | None, device_requests: list[dict[str, Any]], *,
                    remove: bool, tty: bool, timeout: float | None) -> RunResult:
        import docker.errors
        import requests

        try:
            try:
                self._api.start(cid)
            except docker.errors.APIError as exc:
                if device_requests and "could not select device driver" in str(exc):
                    runtimes = ", ".join(self.info().runtimes) or "none"
                    raise EngineError(
                        f"GPU requested (gpus={str(gpus)!r}) but the engine has no NVIDIA runtime or CDI "
                        f"device (runtimes: {runtimes})",
                        fix=NVIDIA_TOOLKIT_FIX,
                    ) from exc
                if device_requests and "cdi device" in str(exc).lower():
                    raise EngineError(
                        f"GPU requested (gpus={str(gpus)!r}) but Podman cannot attach it: "
                        f"{_one_line(exc.explanation or str(exc))}",
                        fix=GENERATE_FIX,
                    ) from exc
                raise EngineError(f"start container from {image}: {_one_line(exc.explanation or str(exc))}") from exc
            timed_out = False
            try:
                status = self._api.wait(cid, timeout=timeout)  # type: ignore[arg-type]  # requests takes a float
                exit_code = int(status.get("StatusCode", -1))
            except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
                timed_out = True
                exit_code = 124
                try:
                    self._api.kill(cid)
                except docker.errors.APIError:
                    pass  # it exited between the timeout and the kill
            with self._errors(f"read logs of container {cid[:12]}"):
                stdout = self._api.logs(cid, stdout=True, stderr=False)
                stderr = b"" if tty else self._api.logs(cid, stdout=False, stderr=True)
            return RunResult(exit_code, stdout.decode("utf-8", "replace"), stderr.decode("utf-8", "replace"),
                             timed_out=timed_out)
        finally:
            if remove:
                self.remove_container(cid, force=True)

    def _podman_create_with_cdi(self, image: str, command: Sequence[str], gpus: GpuRequest | None, *,
                                env: Mapping[str, str] | None, user: str | None, mounts: Sequence[Mount] | None,
                                workdir: str | None, shm_size: str | int | None, ports: Mapping[int, int],
                                labels: Mapping[str, str], security_opt: Sequence[str] | None,
                                network: str | None) -> str:
        """``POST /libpod/containers/create`` with ``nvidia.com/gpu=...`` CDI devices; the id."""

        from docker.utils import parse_bytes

        names = list(gpus.cdi_devices) if gpus is not None else []
        spec: dict[str, Any] = {
            "image": image, "command": list(command), "labels": dict(labels),
            "devices": [{"path": f"nvidia.com/gpu={n}"} for n in names],
            "env": dict(env or {}),
            "mounts": [{"destination": m.target, "source": m.source, "type": "bind", "options": ["rbind", m.mode]}
                       for m in (mounts or [])],
            "portmappings": [{"host_ip": "127.0.0.1", "host_port": h, "container_port": c} for c, h in ports.items()],
            "no_new_privileges": "no-new-privileges" in (security_opt or ()),
        }
        if user:
            spec["user"] = user
        if workdir:
            spec["work_dir"] = workdir
        if shm_size is not None:
            spec["shm_size"] = parse_bytes(shm_size) if isinstance(shm_size, str) else int(shm_size)
        if network == "none":
            spec["netns"] = {"nsmode": "none"}
        with self._errors(f"create container from {image}"):
            res = self._api._post(  # type: ignore[attr-defined]  # the SDK's POST with its timeout; not in types-docker
                self._libpod_url("/containers/create"), data=json.dumps(spec),
                headers={"Content-Type": "application/json"})
        body = res.json() if res.headers.get("Content-Type", "").startswith("application/json") else {}
        if res.status_code >= 400 or not body.get("Id"):
            msg = _one_line(str(body.get("message") or body.get("cause") or res.text))
            if "cdi" in msg.lower() or "unresolvable" in msg.lower():
                raise EngineError(
                    f"GPU requested (gpus={str(gpus)!r}) but Podman cannot attach nvidia.com/gpu={','.join(names)}: {msg}",
                    fix=GENERATE_FIX)
            raise EngineError(f"create container from {image}: {msg}")
        return str(body["Id"])

    # -- internals --------------------------------------------------------------------------

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        """SDK and transport errors become one-line :class:`EngineError` (cause chained)."""
        import docker.errors
        import requests

        try:
            yield
        except docker.errors.APIError as exc:
            raise EngineError(f"{what}: {_one_line(exc.explanation or str(exc))}") from exc
        except (docker.errors.DockerException, requests.RequestException) as exc:
            raise EngineError(f"{what}: {_one_line(str(exc))}", fix=UNREACHABLE_FIX) from exc

    def _inspect(self, action: Any, what: str) -> Any:
        """``action()``'s answer, ``None`` when the engine has no such object."""
        import docker.errors

        try:
            with self._errors(what):
                return action()
        except EngineError as err:
            if isinstance(err.__cause__, docker.errors.NotFound):
                return None
            raise

    def _remove(self, action: Any, what: str) -> bool:
        import docker.errors

        try:
            action()
        except docker.errors.NotFound:
            return False
        except docker.errors.APIError as exc:
            # 409 "removal already in progress" (auto-remove racing us) counts as gone.
            if exc.status_code == 409 and "already in progress" in str(exc):
                return False
            raise EngineError(f"{what}: {_one_line(exc.explanation or str(exc))}") from exc
        return True
