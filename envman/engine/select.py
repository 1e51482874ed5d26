"""Which container engine envman talks to, and what kind it is (Docker or Podman).

Selection, first match wins:

1. ``DOCKER_HOST`` (as the ``docker`` CLI and SDK read it);
2. ``host`` in the ``[engine]`` table of ``config.toml`` (``unix:///path/to/socket``);
3. the Docker socket ``/var/run/docker.sock`` when this user may use it (read and write);
4. this user's rootless Podman socket (``podman system service``): ``$XDG_RUNTIME_DIR/podman/
   podman.sock``, ``/run/user/UID/podman/podman.sock`` or ``/tmp/podman-run-UID/podman/
   podman.sock``, the first that exists, is a socket and belongs to this user;
5. else the Docker socket (its error then says how to get access).

The kind is the engine's own answer: Podman's Docker-compatible API names a ``Podman Engine``
component in ``/version`` (and its release in ``/_ping``'s ``Libpod-Api-Version`` header, which
:func:`version_from_ping` reads); whether it runs rootless is in its libpod ``/info``. Docker says
``name=rootless`` among its security options. :func:`envman.engine.socket.engine_answers` asks
them on a socket.

Standard library only (``os``, ``stat``, ``json`` at import): this is on the run path.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
import json
import re

if TYPE_CHECKING:
    from pathlib import Path

DOCKER_SOCKET = "/var/run/docker.sock"
DOCKER, PODMAN = "docker", "podman"
#: Where Podman 4 reads CDI specs (it has no setting for more).
PODMAN_CDI_DIRS = ("/etc/cdi", "/var/run/cdi")


@dataclass(frozen=True)
class EngineAddress:
    url: str  # unix:///path or whatever DOCKER_HOST says
    source: str  # DOCKER_HOST | config | docker socket | rootless podman socket | default


@dataclass(frozen=True)
class EngineKind:
    kind: str  # docker | podman
    version: str
    rootless: bool
    api_version: str = ""


def podman_socket_candidates(uid: int, environ: Mapping[str, str]) -> list[str]:
    runtime = environ.get("XDG_RUNTIME_DIR", "").strip()
    out = [os.path.join(runtime, "podman", "podman.sock")] if runtime.startswith("/") else []
    out += [f"/run/user/{uid}/podman/podman.sock", f"/tmp/podman-run-{uid}/podman/podman.sock"]
    return list(dict.fromkeys(out))


def _usable_socket(path: str, uid: int | None = None) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    if not stat.S_ISSOCK(st.st_mode):
        return False
    if uid is not None and st.st_uid != uid:
        return False  # someone else's socket in a shared directory is not this user's engine
    return os.access(path, os.R_OK | os.W_OK)


def select_engine(environ: Mapping[str, str] | None = None, config_host: str | None = None, *,
                  uid: int | None = None, usable: Callable[..., bool] = _usable_socket) -> EngineAddress:
    """The engine envman uses (see the module docstring for the order)."""
    env = os.environ if environ is None else environ
    me = os.getuid() if uid is None else uid
    if env.get("DOCKER_HOST"):
        return EngineAddress(env["DOCKER_HOST"], "DOCKER_HOST")
    if config_host:
        return EngineAddress(config_host, "config")
    if usable(DOCKER_SOCKET):
        return EngineAddress(f"unix://{DOCKER_SOCKET}", "docker socket")
    for path in podman_socket_candidates(me, env):
        if usable(path, me):
            return EngineAddress(f"unix://{path}", "rootless podman socket")
    return EngineAddress(f"unix://{DOCKER_SOCKET}", "default")


def check_engine_host(value: Any, *, where: str) -> str:
    """``[engine] host``: a ``unix://`` URL with an absolute socket path."""
    from envman.errors import UserError

    if not isinstance(value, str) or not value.startswith("unix:///") or len(value) > 4096 \
            or any(c in value for c in "\0\n\r") or "/../" in value + "/":
        raise UserError(f"engine host must be unix:///ABSOLUTE/PATH to a socket, got {str(value)[:80]!r}", where=where,
                        fix='e.g. [engine] host = "unix:///run/user/1000/podman/podman.sock"')
    return value


@dataclass(frozen=True)
class EngineConfig:
    """The ``[engine]`` table of the user's config.toml, checked (``host``: ``None`` when unset)."""

    host: str | None = None


def load_engine_config(path: Path | None = None) -> EngineConfig:
    """The ``[engine]`` table of the user config, checked (one line naming the file and key)."""
    from envman.config import read_config

    cfg = read_config(path)
    table = cfg.table("engine")
    return EngineConfig(check_engine_host(table["host"], where=cfg.where("engine", "host")) if "host" in table else None)


def config_engine_host() -> str | None:
    """``[engine] host`` from the user's config.toml, validated (``None`` when unset)."""
    return load_engine_config().host


def socket_path(url: str) -> str | None:
    return url[len("unix://"):] if url.startswith("unix://") else None


def says_podman(version: Any) -> bool:
    """Whether an engine's ``/version`` answer names a ``Podman Engine`` component."""
    components = version.get("Components") if isinstance(version, Mapping) else None
    return any(isinstance(c, Mapping) and c.get("Name") == "Podman Engine" for c in components or ())


def version_from_ping(headers: Mapping[str, str]) -> dict[str, Any] | None:
    """What :func:`kind_from` reads of ``/version``, from ``/_ping``'s headers (lower-case names):
    every engine gives its Docker API version (``Api-Version``); Podman adds its own release
    (``Libpod-Api-Version``), and is named as its ``/version`` names it. ``None`` when there is no
    ``Api-Version``: then only ``/version`` can say."""
    api = headers.get("api-version", "").strip()
    if not api:
        return None
    libpod = headers.get("libpod-api-version", "").strip()
    if libpod:
        return {"Version": libpod, "ApiVersion": api, "Components": [{"Name": "Podman Engine", "Version": libpod}]}
    return {"ApiVersion": api}


def kind_from(version: Mapping[str, Any] | None, docker_info: Mapping[str, Any] | None,
              libpod_info: Mapping[str, Any] | None) -> EngineKind:
    """Pure: the engine's kind from its ``/version``, ``/info`` and (Podman) libpod ``/info``."""
    version = version or {}
    if says_podman(version):
        host = (libpod_info or {}).get("host") or {}
        rootless = bool((host.get("security") or {}).get("rootless"))
        return EngineKind(PODMAN, str(version.get("Version", "")), rootless, str(version.get("ApiVersion", "")))
    opts = (docker_info or {}).get("SecurityOptions") or []
    rootless = any("name=rootless" in str(o) for o in opts)
    server = str((docker_info or {}).get("ServerVersion") or version.get("Version", ""))
    return EngineKind(DOCKER, server, rootless, str(version.get("ApiVersion", "")))


# --------------------------------------------------------------------------- CDI (Podman)


def cdi_gpu_devices(dirs: Sequence[str] = PODMAN_CDI_DIRS) -> frozenset[str]:
    """The device names of every ``nvidia.com/gpu`` CDI spec in ``dirs`` (JSON or YAML specs).

    A YAML spec is read line by line for its ``kind:`` and the ``- name:`` entries under
    ``devices:``; that is the shape ``nvidia-ctk cdi generate`` writes.
    """
    names: set[str] = set()
    for d in dirs:
        try:
            entries = sorted(os.listdir(d))
        except OSError:
            continue
        for f in entries:
            path = os.path.join(d, f)
            if not f.endswith((".json", ".yaml", ".yml")) or not os.path.isfile(path):
                continue
            try:
                with open(path, encoding="utf-8") as fh:
                    text = fh.read(1 << 20)
            except (OSError, UnicodeDecodeError):
                continue
            if f.endswith(".json"):
                try:
                    spec = json.loads(text)
                except ValueError:
                    continue
                if isinstance(spec, dict) and spec.get("kind") == "nvidia.com/gpu":
                    names.update(str(x.get("name")) for x in spec.get("devices") or () if isinstance(x, dict))
                continue
            if not re.search(r'^kind:\s*["\']?nvidia\.com/gpu["\']?\s*$', text, re.M):
                continue
            in_devices = False
            for line in text.splitlines():
                if re.match(r"^devices:\s*$", line):
                    in_devices = True
                elif re.match(r"^\S", line):
                    in_devices = False
                elif in_devices:
                    m = re.match(r'^\s*-\s*name:\s*["\']?([^"\'\s]+)["\']?\s*$', line)
                    if m:
                        names.add(m.group(1))
    return frozenset(names)
