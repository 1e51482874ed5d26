"""The few engine facts the run path needs, without the Docker SDK.

:class:`DockerFacts` reads the image's id and whether the engine has an NVIDIA runtime or a CDI
spec from the engine that the ``docker`` CLI will run on: one request on its Unix socket when
that is the local engine, else the CLI itself (``docker context``, ``DOCKER_HOST``).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from envman.errors import EngineError
from envman.engine.socket import NoAnswer, api_get, image_path, local_socket

if TYPE_CHECKING:
    import subprocess



# --------------------------------------------------------------------------- engine facts via the CLI


class DockerFacts:
    """The two engine facts a run needs, from the engine the ``docker`` CLI will run on.

    Same shapes as :meth:`envman.engine.docker.Engine.info` / ``inspect_image`` so preflight code takes
    either. With ``socket`` (see :func:`local_socket`) a fact is one HTTP request on the engine's
    Unix socket (~1 ms); without it, or whenever the socket gives no clean answer, it is the
    ``docker`` CLI (~15 ms), which follows ``docker context`` and ``DOCKER_HOST`` and words the
    errors. The Docker SDK (~100 ms to import) stays off this path.
    """

    def __init__(self, docker: str = "docker",
                 runner: Callable[[list[str]], subprocess.CompletedProcess] | None = None,
                 socket: str | None = None, source: str = "") -> None:
        self.docker = docker
        self._run = runner or self._subprocess
        self.socket = socket
        self.source = source  # how the engine was selected (envman.engine.select)
        self._kind: Any = None

    def kind(self) -> Any:
        """The engine's :class:`envman.engine.select.EngineKind` (Docker unless it says Podman)."""
        from envman.engine.select import PODMAN, EngineKind, kind_from

        if self._kind is None:
            version = info = libpod = None
            try:
                status, version = api_get(self.socket, "/version")
                if status == 200 and isinstance(version, dict) and any(
                        c.get("Name") == "Podman Engine" for c in version.get("Components") or () if isinstance(c, dict)):
                    status, libpod = api_get(self.socket, "/v4.0.0/libpod/info")
                else:
                    status, info = api_get(self.socket, "/info")
            except NoAnswer:
                pass
            self._kind = kind_from(version if isinstance(version, dict) else None,
                                   info if isinstance(info, dict) else None, libpod if isinstance(libpod, dict) else None)
            if self._kind.kind != PODMAN and not version:
                self._kind = EngineKind("docker", "", False)
        return self._kind

    def _subprocess(self, args: list[str]) -> subprocess.CompletedProcess:
        exe = shutil.which(self.docker)
        if exe is None:
            raise EngineError("the docker CLI is not installed", fix="install docker-ce-cli (or docker.io)")
        import subprocess

        return subprocess.run([exe, *args], capture_output=True, text=True, timeout=60)

    def _unreachable(self, p: subprocess.CompletedProcess) -> EngineError:
        from envman.engine.docker import UNREACHABLE_FIX

        line = next((ln.strip() for ln in (p.stderr or p.stdout or "").splitlines() if ln.strip()), f"exit {p.returncode}")
        return EngineError(f"Docker engine not reachable: {line}", fix=UNREACHABLE_FIX)

    def inspect_image(self, ref: str) -> dict[str, Any] | None:
        try:
            status, body = api_get(self.socket, image_path(ref))
            if status == 200 and isinstance(body, dict):
                return body
            if status == 404:
                return None
        except NoAnswer:
            pass
        p = self._run(["image", "inspect", "--format", "{{json .}}", ref])
        if p.returncode != 0:
            if "no such image" in p.stderr.lower() or "no such object" in p.stderr.lower():
                return None
            raise self._unreachable(p)
        return json.loads(p.stdout)

    def info(self) -> dict[str, Any]:
        raw: dict[str, Any] = {}
        try:
            status, body = api_get(self.socket, "/info")
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
        runtimes = sorted((raw.get("Runtimes") or {}).keys())
        out = {
            "server_version": raw.get("ServerVersion", ""),
            "runtimes": runtimes,
            "default_runtime": raw.get("DefaultRuntime", ""),
            "nvidia_runtime": "nvidia" in runtimes,
            "os": raw.get("OperatingSystem", ""),
        }
        if raw.get("CDISpecDirs") is not None:
            out["cdi_spec_dirs"] = list(raw["CDISpecDirs"])
        return with_engine_kind(out, self.kind(), url=f"unix://{self.socket}" if self.socket else None,
                                source=self.source, local=self.socket is not None)


def with_engine_kind(info: dict[str, Any], kind: Any, *, url: str | None, source: str, local: bool) -> dict[str, Any]:
    """``info`` plus which engine it is. On Podman, GPUs are CDI devices only (its Docker API
    ignores GPU requests), read from the spec directories Podman itself reads when it is local."""
    from envman.engine.select import PODMAN, PODMAN_CDI_DIRS, cdi_gpu_devices

    out = {**info, "engine": kind.kind, "engine_version": kind.version or info.get("server_version", ""),
           "rootless": kind.rootless, "engine_url": url, "engine_source": source}
    if kind.kind == PODMAN:
        out["nvidia_runtime"] = False
        out["cdi_spec_dirs"] = list(PODMAN_CDI_DIRS) if local else []
        out["cdi_gpu_devices"] = sorted(cdi_gpu_devices(PODMAN_CDI_DIRS)) if local else []
    return out


def docker_facts() -> DockerFacts:
    """The engine facts of the engine a run will use: ``DOCKER_HOST`` or a Docker context as the
    ``docker`` CLI reads them, else the ``[engine] host`` of config.toml, the Docker socket, or
    this user's rootless Podman socket (see :mod:`envman.engine.select`)."""
    from envman.engine.select import config_engine_host, select_engine, socket_path

    sock = local_socket()
    if os.environ.get("DOCKER_HOST"):
        return DockerFacts(socket=sock, source="DOCKER_HOST")
    if sock is None:  # a Docker context other than the default: only the CLI knows where it is
        return DockerFacts(socket=None, source="docker context")
    addr = select_engine(config_host=config_engine_host())
    return DockerFacts(socket=socket_path(addr.url), source=addr.source)


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


def gpu_mechanism(info: Mapping[str, Any]) -> str | None:
    """How this engine gives containers GPUs: ``runtime``, ``cdi`` or ``None``."""
    if info.get("nvidia_runtime"):
        return "runtime"
    if cdi_has_nvidia(info.get("cdi_spec_dirs") or ()):
        return "cdi"
    return None


