"""The Engine API over the local engine's Unix socket: the fast, SDK-free client of the run path.

One ``GET`` is one HTTP/1.0 request on the socket (~1 ms), against ~100 ms to import the Docker
SDK. :func:`local_socket` says whether the ``docker`` CLI would talk to that socket at all (no
remote ``DOCKER_HOST``, no Docker context other than ``default``); when it would not, or the
socket gives no clean answer (:class:`NoAnswer`), callers fall back to the CLI
(:class:`envman.engine.facts.DockerFacts`) or take their full path.

Standard library only, and only ``os`` and ``json`` at import: ``envman run``'s cached fast path
(:mod:`envman.run.fastpath`) imports it.
"""

from __future__ import annotations

import json
import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (hot path)
if TYPE_CHECKING:
    from typing import Any, Mapping, Sequence

DEFAULT_SOCKET = "/var/run/docker.sock"


def local_socket(environ: Mapping[str, str] | None = None) -> str | None:
    """The engine's Unix socket when the ``docker`` CLI would talk to it: ``DOCKER_HOST`` unset or
    ``unix://``, and no Docker context other than ``default`` (``DOCKER_CONTEXT`` or the config's
    ``currentContext``). ``None`` otherwise: then only the CLI knows where the engine is."""
    env = os.environ if environ is None else environ
    host = env.get("DOCKER_HOST")
    if host:
        return host[len("unix://"):] if host.startswith("unix://") else None
    context = env.get("DOCKER_CONTEXT")
    if context is None:
        config_dir = env.get("DOCKER_CONFIG") or os.path.join(os.path.expanduser("~"), ".docker")
        try:
            with open(os.path.join(config_dir, "config.json")) as fh:
                context = json.load(fh).get("currentContext")
        except (OSError, ValueError, AttributeError):
            context = None
    if context not in (None, "", "default"):
        return None
    if os.access(DEFAULT_SOCKET, os.R_OK | os.W_OK):
        return DEFAULT_SOCKET
    from envman.engine.select import select_engine, socket_path  # only when Docker's socket is not ours

    return socket_path(select_engine(env).url)


class NoAnswer(Exception):
    """The socket gave no usable answer (no socket, refused, not the Engine API's reply)."""


def api_get(socket_path: str | None, path: str, timeout: float = 60) -> tuple[int, Any]:
    """``GET path`` on the engine's Unix socket: (HTTP status, decoded JSON body or ``None``)."""
    return api_request(socket_path, "GET", path, timeout=timeout)


def api_request(socket_path: str | None, method: str, path: str, body: Any = None,
                timeout: float = 60) -> tuple[int, Any]:
    """``METHOD path`` on the engine's Unix socket, with ``body`` as JSON when given: (HTTP
    status, decoded JSON body or ``None``)."""
    sock = _send(socket_path, method, path, body, timeout)
    try:
        status, _, answer = _reply(sock)
    finally:
        sock.close()
    return status, _json(answer)


def api_get_many(socket_path: str | None, paths: Sequence[str], timeout: float = 60) -> list[tuple[int, Any]]:
    """``GET`` each of ``paths`` at once (:func:`_replies`): (HTTP status, decoded JSON body or
    ``None``) of each, in the order of ``paths``; :class:`NoAnswer` when any has none."""
    return [(status, _json(body)) for status, _, body in _replies(socket_path, paths, timeout)]


def _replies(socket_path: str | None, paths: Sequence[str], timeout: float) -> list[tuple[int, dict[str, str], bytes]]:
    """``GET`` each of ``paths``, every request sent on its own connection before any answer is
    read, so the engine works on them together and the wait is the slowest one's, not their sum:
    each reply (:func:`_reply`), in the order of ``paths``."""
    socks: list[Any] = []
    try:
        for path in paths:
            socks.append(_send(socket_path, "GET", path, None, timeout))
        return [_reply(sock) for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def _send(socket_path: str | None, method: str, path: str, body: Any, timeout: float) -> Any:
    """A connection to the engine's socket on which ``METHOD path`` has been sent (HTTP/1.0: the
    engine answers with a plain body and closes the connection)."""
    import _socket  # the C module under ``socket``: what follows needs none of the wrapper's Python

    if not socket_path:
        raise NoAnswer()
    payload = b"" if body is None else json.dumps(body).encode()
    request = f"{method} {path} HTTP/1.0\r\nHost: docker\r\nUser-Agent: envman\r\n"
    if body is not None:
        request += f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(socket_path)
        sock.sendall((request + "\r\n").encode() + payload)
    except OSError as exc:
        sock.close()
        raise NoAnswer() from exc
    return sock


def _json(body: bytes) -> Any:
    """A reply's body decoded as JSON (``None`` when empty); :class:`NoAnswer` when it is not JSON."""
    try:
        return json.loads(body) if body.strip() else None
    except ValueError as exc:
        raise NoAnswer() from exc


def _reply(sock: Any) -> tuple[int, dict[str, str], bytes]:
    """The engine's reply on ``sock``: (HTTP status, headers by lower-case name, body)."""
    try:
        chunks = []
        while True:
            data = sock.recv(1 << 16)
            if not data:
                break
            chunks.append(data)
        head, sep, body = b"".join(chunks).partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status_line = lines[0].split()
        if not sep or len(status_line) < 2 or not status_line[0].startswith("HTTP/"):
            raise NoAnswer()
        headers = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if colon:
                headers[name.strip().lower()] = value.strip()
        return int(status_line[1]), headers, body
    except (OSError, ValueError) as exc:
        raise NoAnswer() from exc


def ping_and_info(socket_path: str | None, timeout: float = 60) -> tuple[dict[str, str], tuple[int, Any]]:
    """``/_ping``'s headers (by lower-case name; empty unless it answered 200) and ``/info``'s
    (status, JSON body), asked at once: the headers say which engine this is and its API version
    (``Api-Version``; Podman adds ``Libpod-Api-Version``), which Docker's ``/version`` answers
    far more slowly (it asks containerd and runc for theirs). :class:`NoAnswer` on doubt."""
    (ping_status, headers, _), (status, _, body) = _replies(socket_path, ["/_ping", "/info"], timeout)
    return (headers if ping_status == 200 else {}), (status, _json(body))


def ping(socket_path: str | None, timeout: float = 60) -> dict[str, str]:
    """``/_ping``'s headers (by lower-case name) when it answered 200; :class:`NoAnswer` otherwise."""
    ((status, headers, _),) = _replies(socket_path, ["/_ping"], timeout)
    if status != 200:
        raise NoAnswer()
    return headers


def engine_answers(socket_path: str | None, timeout: float = 60) -> tuple[Any, Any, Any]:
    """What the engine on ``socket_path`` says of itself, asked the quick way: ``/_ping`` and
    ``/info`` together (:func:`ping_and_info`), ``/version`` only when the ping names no API
    version, and Podman's libpod ``/info`` when it is Podman. (its ``/version`` or what the ping
    says of it, its ``/info``, its libpod ``/info``): each a JSON object, or ``None`` where there
    was no clean answer; :func:`envman.engine.select.kind_from` reads them. The one way every
    client of the socket (the run path's and the SDK's) asks an engine what it is."""
    from envman.engine.select import says_podman, version_from_ping

    def clean(status: int, body: Any) -> Any:
        return body if status == 200 and isinstance(body, dict) else None

    version = info = libpod = None
    try:
        headers, (status, body) = ping_and_info(socket_path, timeout)
        info = body if clean(status, body) is not None and body.get("ServerVersion") else None
        version = version_from_ping(headers)
    except NoAnswer:
        pass
    if version is None:  # no clean answer, or an engine whose ping names no API version
        try:
            version = clean(*api_get(socket_path, "/version", timeout))
        except NoAnswer:
            pass
    if version is not None and says_podman(version):
        try:
            libpod = clean(*api_get(socket_path, "/v4.0.0/libpod/info", timeout))
        except NoAnswer:
            pass
    return version, info, libpod


def running_ids(socket_path: str | None, labels: Sequence[str], timeout: float = 60) -> list[str]:
    """The IDs of the running containers that carry every one of ``labels`` (``key=value``), in
    one request (``docker ps -q --no-trunc --filter label=...``); :class:`NoAnswer` on doubt."""
    from urllib.parse import quote

    status, body = api_get(socket_path, f"/containers/json?filters={quote(json.dumps({'label': list(labels)}))}", timeout)
    if status != 200 or not isinstance(body, list):
        raise NoAnswer()
    return [c["Id"] for c in body if isinstance(c, dict) and isinstance(c.get("Id"), str)]


_REF_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/:@")


def image_path(ref: str) -> str:
    """The Engine API path of ``docker image inspect REF`` (refs need no escaping: checked)."""
    if not ref or not set(ref) <= _REF_CHARS:
        raise NoAnswer()
    return f"/images/{ref}/json"


def object_ids(socket_path: str | None, images: Sequence[str] = (), networks: Sequence[str] = ()) -> list[str | None]:
    """The ids of ``images`` then ``networks`` (``None`` for one the engine has none of), asked
    at once (:func:`api_get_many`); :class:`NoAnswer` on doubt."""
    paths = [image_path(ref) for ref in images] + [network_path(name) for name in networks]
    return [_id_of(status, body) for status, body in api_get_many(socket_path, paths)]


def _id_of(status: int, body: Any) -> str | None:
    if status == 404:
        return None
    if status != 200 or not isinstance(body, dict) or not isinstance(body.get("Id"), str):
        raise NoAnswer()
    found: str = body["Id"]
    return found


def network_path(name: str) -> str:
    """The Engine API path of ``docker network inspect NAME`` (names need no escaping: checked)."""
    if not name or not set(name) <= _REF_CHARS - {"/", ":", "@"}:
        raise NoAnswer()
    return f"/networks/{name}"
