"""The engine's kind as a run needs it, kept per socket: which engine (Docker or Podman) and
whether it is rootless, without asking ``/info`` on every run.

Docker's ``/info`` is the slowest answer on a run's path: about 10 ms on a warm engine here, and
30–100 ms when the engine is asked once per process, as a run asks it. What a run reads of it
(Docker or Podman, rootless or not) belongs to the daemon behind the socket, and a different
daemon means a different socket file: a rootless Docker or Podman makes its own socket in the
user's runtime folder on every start, and Podman's socket is a file of its own even where
Docker's path links to it. So the kind is kept under the socket's path and its file identity
(device, inode, change time): a socket made anew, or a link pointed elsewhere, is a miss and the
engine is asked. An answer that was not the engine's (no socket, no clean reply: the default
kind) is never kept.

``kinds.json`` in the user's cache folder (:func:`envman.paths.cache_dir`): the user's own file,
mode 0600 in a private folder (read through :func:`envman.safefile.read_state_json`, which
believes no file another user could have written), the last 16 sockets. ``ENVMAN_ENGINE_CACHE=0``
turns it off; ``envman clean`` removes it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from envman.engine.select import DOCKER, PODMAN, EngineKind
from envman.paths import cache_dir, caches_enabled
from envman.safefile import read_state_json
from envman.state import atomic_write

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (hot path)
if TYPE_CHECKING:
    from typing import Any, Protocol

    class KindSource(Protocol):  # any reader of the engine; its ``socket`` (when it has one) is read too
        def kind(self) -> EngineKind: ...

KINDS_FILE = "kinds.json"
CACHE_FORMAT = 1
MAX_SOCKETS = 16
SWITCH = "ENVMAN_ENGINE_CACHE"


def socket_identity(path: str) -> list[Any] | None:
    """[real path, device, inode, change time] of the socket file at ``path`` (links followed),
    or ``None`` when it cannot be read."""
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except (OSError, ValueError):
        return None
    return [real, st.st_dev, st.st_ino, st.st_ctime_ns]


def kind_for_run(engine: KindSource) -> EngineKind:
    """``engine.kind()``, answered from the kept kinds when the engine is reached on a local
    socket that is still the same file; kept after an answer that was the engine's own."""
    sock = getattr(engine, "socket", None)
    if not isinstance(sock, str) or not sock or not caches_enabled(switch=SWITCH):
        return engine.kind()
    ident = socket_identity(sock)
    path = os.path.join(cache_dir(), KINDS_FILE)
    kinds = _load(path)
    if ident is not None:
        kept = _kept(kinds.get(sock), ident)
        if kept is not None:
            return kept
    kind = engine.kind()
    if ident is not None and (kind.version or kind.api_version):  # the engine's own answer, not the default
        kinds.pop(sock, None)
        kinds[sock] = {"id": ident, "kind": [kind.kind, kind.version, kind.rootless, kind.api_version]}
        _save(path, dict(list(kinds.items())[-MAX_SOCKETS:]))
    return kind


def _kept(entry: Any, ident: list[Any]) -> EngineKind | None:
    if not isinstance(entry, dict) or entry.get("id") != ident:
        return None
    raw = entry.get("kind")
    if not (isinstance(raw, list) and len(raw) == 4 and raw[0] in (DOCKER, PODMAN) and isinstance(raw[1], str)
            and isinstance(raw[2], bool) and isinstance(raw[3], str)):
        return None
    return EngineKind(raw[0], raw[1], raw[2], raw[3])


def _load(path: str) -> dict[str, Any]:
    data = read_state_json(path, what="engine kinds cache")
    if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT or not isinstance(data.get("sockets"), dict):
        return {}
    return dict(data["sockets"])


def _save(path: str, kinds: dict[str, Any]) -> None:
    try:
        folder = Path(path).parent
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic_write(Path(path), json.dumps({"format": CACHE_FORMAT, "sockets": kinds}))
    except OSError:
        pass  # a cache that cannot be written is a cache that misses
