"""A tiny package index for tests: serves fixed files on 127.0.0.1 (ephemeral port), with or
without HTTP Range support, and counts the requests it answered."""

from __future__ import annotations

import io
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator


class IndexServer:
    """``files``: path -> (body, content type). ``ranges``: honour ``Range`` headers."""

    def __init__(self, *, ranges: bool = True) -> None:
        self.files: dict[str, tuple[bytes, str]] = {}
        self.ranges = ranges
        self.requests: list[tuple[str, str | None]] = []  # (path, Range header)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                path = self.path.split("?")[0]
                rng = self.headers.get("Range")
                server.requests.append((path, rng))
                if path not in server.files:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body, ctype = server.files[path]
                status, extra = 200, {}
                if rng and server.ranges and rng.startswith("bytes="):
                    a, _, b = rng[6:].partition("-")
                    size = len(body)
                    start, end = (max(0, size - int(b)), size - 1) if a == "" else (int(a), min(size - 1, int(b or size - 1)))
                    extra["Content-Range"] = f"bytes {start}-{end}/{size}"
                    body, status = body[start:end + 1], 206
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for k, v in extra.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # a short poll: shutdown() waits for it, once per server
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def add(self, path: str, body: bytes | str, ctype: str = "application/octet-stream") -> None:
        self.files[path] = (body.encode() if isinstance(body, str) else body, ctype)

    def __enter__(self) -> "IndexServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def make_wheel(filename: str, requires: list[str], *, requires_python: str | None = None,
               padding: int = 0) -> tuple[bytes, bytes]:
    """A real wheel (zip) named ``filename`` and its METADATA; ``padding`` bytes of incompressible
    data stored before the metadata make it larger than one range read."""
    import os

    name, version = filename.split("-")[:2]
    meta = [f"Metadata-Version: 2.1", f"Name: {name.replace('_', '-')}", f"Version: {version}"]
    if requires_python:
        meta.append(f"Requires-Python: {requires_python}")
    meta += [f"Requires-Dist: {r}" for r in requires]
    metadata = ("\n".join(meta) + "\n\n").encode()
    buf = io.BytesIO()
    dist = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"{name}/__init__.py", "")
        if padding:
            zf.writestr(zipfile.ZipInfo(f"{name}/blob.bin"), os.urandom(padding), compress_type=zipfile.ZIP_STORED)
        zf.writestr(f"{dist}/METADATA", metadata)
        zf.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\n")
        zf.writestr(f"{dist}/RECORD", "")
    return buf.getvalue(), metadata


def iter_lines(text: str) -> Iterator[str]:
    return iter(text.splitlines())
