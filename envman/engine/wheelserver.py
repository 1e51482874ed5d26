"""The HTTP server of the wheel store (:mod:`envman.images.wheelstore`): one classic build's
hash-checked wheels, served read-only on that build's own network while it runs.

It lives in the engine package because it is what a build on the engine reaches, and only this
package may hold an HTTP stack (``tests/unit/test_import_rules.py``).
"""

from __future__ import annotations

import os
import threading
import urllib.parse
from contextlib import contextmanager
from dataclasses import dataclass
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

#: The port of :data:`envman.render.imagepaths.WHEEL_STORE_URL` (kept equal by a test).
WHEEL_STORE_PORT = 47263


@dataclass(frozen=True)
class ServedFile:
    """A wheel of the store: its file name, its sha256 (checked by the store) and where it is."""

    filename: str
    sha256: str
    path: Path


class WheelServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], wheels: list[ServedFile]) -> None:
        self.wheels = {w.filename: w for w in wheels}
        self.served: list[str] = []
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    """``/``: a find-links page of the build's wheels with their sha256; ``/<file>``: one of them."""

    server: WheelServer

    def do_GET(self) -> None:  # noqa: N802  (http.server's name)
        path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        if path == "/":
            links = "".join(f'<a href="{escape(urllib.parse.quote(w.filename))}#sha256={w.sha256}">{escape(w.filename)}</a>\n'
                            for w in sorted(self.server.wheels.values(), key=lambda w: w.filename))
            body = f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n".encode()
            self._answer(200, "text/html; charset=utf-8", len(body))
            self.wfile.write(body)
            return
        wheel = self.server.wheels.get(path[1:])
        if wheel is None:
            self._answer(404, "text/plain", 0)
            return
        with open(wheel.path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            self._answer(200, "application/octet-stream", size)
            while chunk := fh.read(1 << 20):
                self.wfile.write(chunk)
        self.server.served.append(wheel.filename)

    def _answer(self, status: int, ctype: str, length: int) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(length))
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002  (http.server's name)
        """Silent: the build's own log says what pip fetched."""


@contextmanager
def serve(address: str, wheels: list[ServedFile], port: int | None = None) -> Iterator[WheelServer]:
    """``wheels`` served read-only at ``http://address:port/`` (:data:`WHEEL_STORE_PORT` by
    default) while the block runs."""
    server = WheelServer((address, WHEEL_STORE_PORT if port is None else port), wheels)
    thread = threading.Thread(target=server.serve_forever, name="envman-wheel-store", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
