"""A fake engine on a Unix socket that speaks the Engine API's HTTP/1.0, as the real one does for
envman's raw-socket client: each test's server says what it answers by overriding ``answer``."""

from __future__ import annotations

import json
import socketserver
from typing import Any


class SocketEngine(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """Records every request path in ``requests``; ``answer(path)`` gives ``(status, JSON body)``."""

    daemon_threads = True

    def __init__(self, path: str) -> None:
        self.requests: list[str] = []
        super().__init__(path, _Handler)

    def answer(self, path: str) -> tuple[int, Any]:
        return 404, {"message": "no"}

    def headers(self, path: str) -> dict[str, str]:
        """Headers a reply to ``path`` carries besides its content type (default: none)."""
        return {}

    def answer_request(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        """What a request of any method gets (default: ``answer(path)``); ``body`` is its JSON."""
        return self.answer(path)


class _Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        line = self.rfile.readline().decode()
        length = 0
        while (header := self.rfile.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = header.decode().partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        method, path = line.split()[:2]
        payload = json.loads(self.rfile.read(length)) if length else None
        srv: SocketEngine = self.server  # type: ignore[assignment]
        srv.requests.append(path)
        status, body = srv.answer_request(method, path, payload)
        data = json.dumps(body).encode()
        extra = "".join(f"{k}: {v}\r\n" for k, v in srv.headers(path).items())
        self.wfile.write(f"HTTP/1.0 {status} X\r\nContent-Type: application/json\r\n{extra}\r\n".encode() + data)
