"""The read side of the engine for the run path, without the Docker SDK.

:class:`DockerFacts` implements :class:`envman.engine.api.EngineFacts` on the engine that the
``docker`` CLI will run on: one request on its Unix socket (:mod:`envman.engine.socket`) when that
is the local engine, else the CLI itself (``docker context``, ``DOCKER_HOST``). It answers with
the same typed facts as :class:`envman.engine.docker.Engine`, parsed by the same functions.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import quote

from envman.engine.api import ContainerInfo, EngineInfo, ImageInfo, LabelFilter, NetworkInfo, label_filters
from envman.engine.select import EngineKind
from envman.engine.handoff import which
from envman.engine.socket import NoAnswer, api_get, api_request, engine_answers, image_path, local_socket
from envman.errors import EngineError
from envman.engine.select import PODMAN, kind_from
from envman.engine.select import config_engine_host, select_engine, socket_path

if TYPE_CHECKING:
    import subprocess


def _filters_query(labels: LabelFilter) -> str:
    return quote(json.dumps({"label": label_filters(labels)}))


class DockerFacts:
    """The engine's facts from the engine the ``docker`` CLI will run on.

    With ``socket`` (see :func:`envman.engine.socket.local_socket`) a fact is one HTTP request on
    the engine's Unix socket (~1 ms); without it, or whenever the socket gives no clean answer,
    it is the ``docker`` CLI (~15 ms), which follows ``docker context`` and ``DOCKER_HOST`` and
    words the errors. The Docker SDK (~100 ms to import) stays off this path.
    """

    def __init__(self, docker: str = "docker",
                 runner: Callable[[list[str]], subprocess.CompletedProcess[str]] | None = None,
                 socket: str | None = None, source: str = "") -> None:
        self.docker = docker
        self._run = runner or self._subprocess
        self.socket = socket
        self.source = source  # how the engine was selected (envman.engine.select)
        self._kind: EngineKind | None = None
        self._info: dict[str, Any] | None = None  # the engine's clean /info answer, asked with kind()

    # -- transports -----------------------------------------------------------------------------

    def _get(self, path: str) -> tuple[int, Any]:
        """``GET path`` on the socket; :class:`NoAnswer` when there is none or it says nothing clean."""
        return api_get(self.socket, path)

    def _subprocess(self, args: list[str]) -> subprocess.CompletedProcess[str]:
        exe = which(self.docker)
        if exe is None:
            raise EngineError("the docker CLI is not installed", fix="install docker-ce-cli (or docker.io)")
        import subprocess

        # `docker stop` waits for the container's own grace period first
        return subprocess.run([exe, *args], capture_output=True, text=True, timeout=120 if args[:1] == ["stop"] else 60)

    def _unreachable(self, p: subprocess.CompletedProcess[str], what: str = "Docker engine not reachable") -> EngineError:
        from envman.engine.docker import UNREACHABLE_FIX

        line = next((ln.strip() for ln in (p.stderr or p.stdout or "").splitlines() if ln.strip()), f"exit {p.returncode}")
        return EngineError(f"{what}: {line}", fix=UNREACHABLE_FIX)

    def _cli_json(self, args: list[str], what: str = "Docker engine not reachable") -> Any:
        """The CLI's JSON answer; ``None`` when it says there is no such object."""
        p = self._run(args)
        if p.returncode != 0:
            if "no such" in (p.stderr or "").lower():
                return None
            raise self._unreachable(p, what)
        return json.loads(p.stdout or "null")

    def _cli_inspect(self, kind: str, refs: list[str], what: str = "Docker engine not reachable") -> list[dict[str, Any]]:
        if not refs:
            return []
        docs = self._cli_json([kind, "inspect", *refs], what)
        return [d for d in docs or () if isinstance(d, dict)]

    def _cli_ids(self, args: list[str], labels: LabelFilter, what: str = "Docker engine not reachable") -> list[str]:
        for label in label_filters(labels):
            args += ["--filter", f"label={label}"]
        p = self._run(args)
        if p.returncode != 0:
            raise self._unreachable(p, what)
        return list(dict.fromkeys(p.stdout.split()))

    # -- the engine -------------------------------------------------------------------------------

    def kind(self) -> EngineKind:
        """The engine's :class:`envman.engine.select.EngineKind` (Docker unless it says Podman)."""
        if self._kind is None:
            version, info, libpod = engine_answers(self.socket)
            if info is not None:
                self._info = info
            self._kind = kind_from(version, info, libpod)
            if self._kind.kind != PODMAN and not version:
                self._kind = EngineKind("docker", "", False)
        return self._kind

    def info(self) -> EngineInfo:
        kind = self.kind()  # asks /info too: its answer is used when clean
        raw: dict[str, Any] = self._info or {}
        if not raw:
            try:
                status, body = self._get("/info")
                if status == 200 and isinstance(body, dict) and body.get("ServerVersion"):
                    raw = body
            except NoAnswer:
                pass
        if not raw:
            p = self._run(["info", "--format", "{{json .}}"])
            try:
                raw = json.loads(p.stdout) if p.stdout.strip() else {}
            except json.JSONDecodeError:
                pass
            if p.returncode != 0 or raw.get("ServerErrors") or not raw.get("ServerVersion"):
                if raw.get("ServerErrors"):
                    import subprocess

                    p = subprocess.CompletedProcess(p.args, p.returncode, "", "; ".join(raw["ServerErrors"]))
                raise self._unreachable(p)
        return EngineInfo.from_api(raw, kind, url=self.url,
                                   source=self.source, local=self.socket is not None)

    # -- images -----------------------------------------------------------------------------------

    def inspect_image(self, ref: str) -> ImageInfo | None:
        try:
            status, body = self._get(image_path(ref))
            if status == 200 and isinstance(body, dict):
                return ImageInfo.from_api(body)
            if status == 404:
                return None
        except NoAnswer:
            pass
        doc = self._cli_json(["image", "inspect", "--format", "{{json .}}", ref])
        return ImageInfo.from_api(doc) if isinstance(doc, dict) else None

    def image_exists(self, ref: str) -> bool:
        return self.inspect_image(ref) is not None

    def _listed(self, api_path: str, kind: str, cli_args: list[str], labels: LabelFilter,
                what: str = "Docker engine not reachable") -> list[dict[str, Any]]:
        """The documents of ``GET api_path`` filtered by ``labels``, else of the CLI's list and inspect."""
        try:
            status, body = self._get(f"{api_path}?filters={_filters_query(labels)}")
            if status == 200 and isinstance(body, list):
                return [d for d in body if isinstance(d, dict)]
        except NoAnswer:
            pass
        return self._cli_inspect(kind, self._cli_ids(cli_args, labels, what), what)

    def list_images(self, label_filter: LabelFilter) -> list[ImageInfo]:
        return [ImageInfo.from_api(d) for d in self._listed("/images/json", "image", ["images", "-q", "--no-trunc"],
                                                            label_filter)]

    # -- containers -------------------------------------------------------------------------------

    def list_containers(self, labels: LabelFilter, *, all: bool = True) -> list[ContainerInfo]:
        docs: list[dict[str, Any]] | None = None
        try:
            status, body = self._get(f"/containers/json?all={int(all)}&filters={_filters_query(labels)}")
            if status == 200 and isinstance(body, list):
                docs = []
                for c in body:
                    st, doc = self._get(f"/containers/{quote(str(c['Id']), safe='')}/json")
                    if st == 200 and isinstance(doc, dict):
                        docs.append(doc)
        except (NoAnswer, KeyError, TypeError):
            docs = None
        if docs is None:
            ids = self._cli_ids(["ps", "-q", "--no-trunc", *(["-a"] if all else [])], labels, "docker")
            docs = self._cli_inspect("container", ids, "docker")
        return [ContainerInfo.from_api(d) for d in docs]

    def inspect_container(self, ref: str) -> ContainerInfo | None:
        doc = self._inspect_one("container", ref)
        return ContainerInfo.from_api(doc) if doc is not None else None

    def stop_containers(self, ids: list[str], timeout: int = 10) -> None:
        """``docker stop`` these containers (gone already is fine)."""
        if not ids:
            return
        p = self._run(["stop", "--time", str(timeout), *ids])
        if p.returncode != 0 and "no such container" not in (p.stderr or "").lower():
            raise self._unreachable(p, "docker")

    # -- networks -------------------------------------------------------------------------------

    def _inspect_one(self, kind: str, ref: str) -> dict[str, Any] | None:
        """``docker KIND inspect REF``'s document (``None``: there is none), on the socket first."""
        try:
            status, doc = self._get(f"/{kind}s/{quote(ref, safe='')}" + ("/json" if kind == "container" else ""))
            if status == 404:
                return None
            if status == 200 and isinstance(doc, dict):
                return doc
        except NoAnswer:
            pass
        docs = self._cli_inspect(kind, [ref], "docker")
        return docs[0] if docs else None

    def inspect_network(self, name: str) -> NetworkInfo | None:
        """The network called ``name`` (``None``: there is none)."""
        doc = self._inspect_one("network", name)
        return NetworkInfo.from_api(doc) if doc is not None else None

    def create_network(self, name: str, labels: dict[str, str]) -> str | None:
        """Create a bridge network ``name`` with ``labels``; its id, or ``None`` when one of that
        name exists already (another process made it first). :class:`EngineError` otherwise."""
        try:
            status, doc = api_request(self.socket, "POST", "/networks/create", {
                "Name": name, "Driver": "bridge", "CheckDuplicate": True, "Labels": labels})
            if status == 201 and isinstance(doc, dict):
                return str(doc.get("Id") or "")
            if status == 409:
                return None
            message = doc.get("message") if isinstance(doc, dict) else None
            if status >= 400 and isinstance(message, str):
                raise EngineError(f"docker network create {name}: {message}")
        except NoAnswer:
            pass
        args = ["network", "create", "--driver", "bridge"]
        for k, v in labels.items():
            args += ["--label", f"{k}={v}"]
        p = self._run([*args, name])
        if p.returncode != 0:
            if "already exists" in (p.stderr or ""):
                return None
            raise self._unreachable(p, f"docker network create {name}")
        return p.stdout.strip()

    def remove_network(self, name: str) -> bool:
        """Remove the network ``name``; ``False`` when it is gone already or still in use."""
        try:
            status, _ = api_request(self.socket, "DELETE", f"/networks/{quote(name, safe='')}")
            if status in (200, 204, 404, 403, 409, 500):
                return status in (200, 204)
        except NoAnswer:
            pass
        return self._run(["network", "rm", name]).returncode == 0

    def list_networks(self, labels: LabelFilter) -> list[NetworkInfo]:
        """The networks carrying ``labels`` (their endpoints not counted: inspect one for that)."""
        return [NetworkInfo.from_api(d) for d in self._listed("/networks", "network", ["network", "ls", "-q", "--no-trunc"],
                                                              labels, "docker")]

    @property
    def url(self) -> str | None:
        """``unix://SOCKET`` when the engine is reached on its socket, else ``None`` (the CLI's)."""
        return f"unix://{self.socket}" if self.socket else None


def docker_facts() -> DockerFacts:
    """The engine facts of the engine a run will use: ``DOCKER_HOST`` or a Docker context as the
    ``docker`` CLI reads them, else the ``[engine] host`` of config.toml, the Docker socket, or
    this user's rootless Podman socket (see :mod:`envman.engine.select`)."""
    sock = local_socket()
    if os.environ.get("DOCKER_HOST"):
        return DockerFacts(socket=sock, source="DOCKER_HOST")
    if sock is None:  # a Docker context other than the default: only the CLI knows where it is
        return DockerFacts(socket=None, source="docker context")
    addr = select_engine(config_host=config_engine_host())
    return DockerFacts(socket=socket_path(addr.url), source=addr.source)
