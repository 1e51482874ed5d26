"""Read a Python package index without pip: the PEP 691 JSON / PEP 503 HTML simple API, PEP 658
metadata files, and a wheel's METADATA through HTTP range requests on its zip directory (as pip's
lazy wheel does), so that ``envman matrix update`` learns what a 500 MB wheel pins from a few
hundred kilobytes.

Standard library only (urllib, ssl, zipfile). Every request has a bounded timeout and a bounded
number of retries; a network failure raises :class:`IndexUnreachable` (one line: what, where,
fix), never a traceback and never a hang.
"""

from __future__ import annotations

import hashlib
import io
import json
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass, field
from email.parser import HeaderParser
from email.message import Message
from html.parser import HTMLParser
from pathlib import Path
from typing import BinaryIO, Callable, Mapping, Protocol
import base64
import re

from envman import __version__
from envman.config import shown_url
from envman.errors import EnvmanError
from envman.config import split_credentials

PYPI_SIMPLE = "https://pypi.org/simple"
SIMPLE_ACCEPT = (
    "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"
)
#: The tail fetched first from a wheel: end-of-central-directory record plus, usually, the whole
#: central directory (torch's is ~400 KiB).
TAIL_BYTES = 1024 * 1024
#: Smallest range fetched on a miss; zipfile reads a local header, then the name, then the data.
READ_AHEAD = 256 * 1024
#: A wheel up to this size is downloaded whole when its server ignores range requests.
FULL_DOWNLOAD_LIMIT = 32 * 1024 * 1024
MAX_PAGE_BYTES = 64 * 1024 * 1024
MAX_METADATA_BYTES = 4 * 1024 * 1024
#: Largest single read through a range-backed wheel (a zip directory claiming more is refused).
MAX_RANGE_BYTES = 32 * 1024 * 1024


class IndexUnreachable(EnvmanError):
    """The index (or a file on it) could not be fetched: nothing is written."""


class IndexFileError(EnvmanError):
    """A file on the index could be fetched but not used (no metadata, no range support...)."""


class NotFound(IndexFileError):
    """The index answered 404 for a page (a project it does not carry)."""


@dataclass(frozen=True)
class Response:
    url: str  # after redirects
    status: int
    headers: Mapping[str, str]
    body: bytes


class _Body(Protocol):
    """What :meth:`Http._read` reads: an HTTP response body."""

    def read(self, amt: int, /) -> bytes: ...


@dataclass
class Http:
    """A small HTTP client with the build's network settings (CA bundle), bounded timeouts and
    retries, and a request counter (thread safe) for the ``--json`` summary."""

    ca_bundle: Path | None = None
    timeout: float = 30.0
    retries: int = 2
    backoff: float = 0.5
    requests: int = 0
    bytes_read: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _ctx: ssl.SSLContext | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._ctx = ssl.create_default_context(cafile=str(self.ca_bundle) if self.ca_bundle else None)

    def _count(self, n: int = 0) -> None:
        with self._lock:
            self.bytes_read += n

    def get(self, url: str, headers: Mapping[str, str] | None = None, *, limit: int = MAX_PAGE_BYTES) -> Response:
        """GET ``url``; 404 raises :class:`NotFound`; other failures, after the retries, raise
        :class:`IndexUnreachable`. A body larger than ``limit`` is refused (a range request that
        the server answers with the whole file stops there)."""
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https"):
            raise IndexFileError(f"refusing a {parsed.scheme or 'relative'} URL", where=shown_url(url),
                                 fix="the index must serve http(s) URLs")
        bare, user, password = split_credentials(url)
        req = urllib.request.Request(bare, headers={"User-Agent": f"envman/{__version__}", **(headers or {})})
        if user is not None:
            # sent to this host only: a redirect (to a file host) does not carry it

            token = base64.b64encode(f"{user}:{password or ''}".encode()).decode("ascii")
            req.add_unredirected_header("Authorization", f"Basic {token}")
        url = shown_url(url)  # from here on the URL is only shown
        last = ""
        for attempt in range(self.retries + 1):
            with self._lock:
                self.requests += 1
            try:
                with urllib.request.urlopen(req, timeout=self.timeout, context=self._ctx) as resp:
                    body = self._read(resp, limit, url)
                    self._count(len(body))
                    return Response(resp.geturl(), resp.status, {k.lower(): v for k, v in resp.headers.items()}, body)
            except urllib.error.HTTPError as exc:
                if exc.code == 404:
                    raise NotFound("not found (HTTP 404)", where=url, fix="check the index URL and the project name") from None
                last = f"HTTP {exc.code} {exc.reason}"
                if exc.code < 500 and exc.code != 429:
                    break
            except ssl.SSLCertVerificationError as exc:
                raise IndexUnreachable(
                    f"TLS certificate not trusted ({exc.verify_message})", where=url,
                    fix="pass --ca-bundle PEM (or set ca_bundle in [network] of config.toml)",
                ) from None
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                last = str(reason) or type(exc).__name__
            if attempt < self.retries:
                time.sleep(self.backoff * (2 ** attempt))
        raise IndexUnreachable(
            f"cannot reach the index ({last})", where=url,
            fix="check the network, or point --pip-index / --torch-index at a reachable mirror; nothing was written",
        )

    def download(self, url: str, out: BinaryIO, *, limit: int, on_chunk: Callable[[bytes], object] | None = None) -> int:
        """Stream the file at ``url`` (no credentials: see :meth:`get`) into ``out``, at most
        ``limit`` bytes, each chunk also to ``on_chunk``; its size. One attempt: a failure raises
        :class:`IndexUnreachable` and the caller drops what was written."""
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or parsed.username is not None:
            raise IndexFileError("refusing a URL that is not plain http(s)", where=shown_url(url),
                                 fix="the index must serve http(s) URLs")
        req = urllib.request.Request(url, headers={"User-Agent": f"envman/{__version__}"})
        with self._lock:
            self.requests += 1
        size = 0
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self._ctx) as resp:
                while chunk := resp.read(1 << 20):
                    size += len(chunk)
                    if size > limit:
                        raise IndexFileError(f"the file is larger than {limit} bytes", where=shown_url(url))
                    out.write(chunk)
                    if on_chunk is not None:
                        on_chunk(chunk)
        except urllib.error.HTTPError as exc:
            raise IndexUnreachable(f"HTTP {exc.code} {exc.reason}", where=shown_url(url)) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError, ssl.SSLError, OSError) as exc:
            raise IndexUnreachable(f"download failed ({getattr(exc, 'reason', exc)})", where=shown_url(url)) from None
        self._count(size)
        return size

    def _read(self, resp: _Body, limit: int, url: str) -> bytes:
        """The body, at most ``limit + 1`` bytes, within a whole-request deadline: the socket
        timeout bounds each read, the deadline a server that trickles bytes."""
        deadline = time.monotonic() + self.timeout * 4
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = resp.read(min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if time.monotonic() > deadline:
                raise TimeoutError(f"the answer took longer than {self.timeout * 4:.0f} s")
        return b"".join(chunks)

    def get_range(self, url: str, start: int | None, end: int | None) -> tuple[bytes, int | None, bool]:
        """Bytes ``start..end`` (inclusive; ``start=None``: the last ``end`` bytes).

        Returns ``(data, total size or None, ranged)``; ``ranged`` is False when the server
        ignored the Range header (then ``data`` is the whole file, if it is small enough)."""
        spec = f"bytes=-{end}" if start is None else f"bytes={start}-{end}"
        resp = self.get(url, {"Range": spec, "Accept-Encoding": "identity"}, limit=max(FULL_DOWNLOAD_LIMIT, (end or 0) + 1))
        if resp.status == 206:
            total = _content_range_total(resp.headers.get("content-range", ""))
            return resp.body, total, True
        if len(resp.body) > FULL_DOWNLOAD_LIMIT:
            raise IndexFileError(
                f"the server ignores HTTP range requests and serves no PEP 658 metadata for this "
                f"{len(resp.body) // 2**20}+ MiB wheel", where=shown_url(url),
                fix="use an index that serves PEP 658 .metadata files or honours Range requests (PyPI does)",
            )
        return resp.body, len(resp.body), False


def _content_range_total(value: str) -> int | None:
    # "bytes 100-199/12345"
    _, _, total = value.rpartition("/")
    return int(total) if total.strip().isdigit() else None


# --- the simple API ----------------------------------------------------------------------------


@dataclass(frozen=True)
class IndexFile:
    """One file of a project page, URL already absolute."""

    filename: str
    url: str
    hashes: tuple[tuple[str, str], ...] = ()
    metadata: bool | tuple[tuple[str, str], ...] = False  # PEP 658/714: True or the file's hashes
    requires_python: str | None = None
    yanked: bool = False
    upload_time: str | None = None
    size: int | None = None

    @property
    def metadata_url(self) -> str | None:
        return self.url + ".metadata" if self.metadata else None


@dataclass(frozen=True)
class ProjectPage:
    name: str
    url: str
    files: tuple[IndexFile, ...]
    format: str  # "json" (PEP 691) or "html" (PEP 503)


def project_url(index: str, project: str) -> str:
    """``{index}/{normalized name}/`` as PEP 503 defines it."""
    return index.rstrip("/") + "/" + normalize(project) + "/"


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def fetch_project(http: Http, index: str, project: str) -> ProjectPage:
    """The project page of ``project`` on ``index`` (PEP 691 JSON if served, else HTML)."""
    url = project_url(index, project)
    resp = http.get(url, {"Accept": SIMPLE_ACCEPT})
    ctype = resp.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype == "application/vnd.pypi.simple.v1+json" or (ctype.endswith("json") and resp.body[:1] == b"{"):
        return parse_json_page(resp.body, resp.url, project)
    return parse_html_page(resp.body, resp.url, project)


def _hash_items(value: object) -> tuple[tuple[str, str], ...]:
    if isinstance(value, dict):
        return tuple(sorted((str(k), str(v)) for k, v in value.items()))
    return ()


def parse_json_page(body: bytes, page_url: str, project: str) -> ProjectPage:
    try:
        doc = json.loads(body)
        raw_files = doc["files"]
        if not isinstance(raw_files, list):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        raise IndexFileError("not a PEP 691 project page (no files list)", where=page_url,
                             fix="point the index option at a PEP 503/691 simple index") from None
    files = []
    for f in raw_files:
        if not isinstance(f, dict) or not isinstance(f.get("filename"), str) or not isinstance(f.get("url"), str):
            continue
        meta = f.get("core-metadata", f.get("data-dist-info-metadata", False))
        files.append(IndexFile(
            filename=f["filename"],
            url=urllib.parse.urljoin(page_url, f["url"]),
            hashes=_hash_items(f.get("hashes")),
            metadata=_hash_items(meta) or True if meta else False,
            requires_python=f.get("requires-python") if isinstance(f.get("requires-python"), str) else None,
            yanked=bool(f.get("yanked")),
            upload_time=f.get("upload-time") if isinstance(f.get("upload-time"), str) else None,
            size=f.get("size") if isinstance(f.get("size"), int) else None,
        ))
    return ProjectPage(project, page_url, tuple(files), "json")


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.base: str | None = None
        self.links: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "base" and self.base is None:
            self.base = dict(attrs).get("href")
        elif tag == "a":
            self.links.append(dict(attrs))


def _parse_hash_fragment(fragment: str) -> tuple[tuple[str, str], ...]:
    name, sep, value = fragment.partition("=")
    return ((name, value),) if sep and name in hashlib.algorithms_guaranteed and value else ()


def _meta_attr(value: str | None) -> bool | tuple[tuple[str, str], ...]:
    if value is None:
        return False
    if value.lower() == "false":
        return False
    return _parse_hash_fragment(value) or True


def parse_html_page(body: bytes, page_url: str, project: str) -> ProjectPage:
    parser = _Links()
    parser.feed(body.decode("utf-8", errors="replace"))
    base = urllib.parse.urljoin(page_url, parser.base) if parser.base else page_url
    files = []
    for a in parser.links:
        href = a.get("href")
        if not href:
            continue
        url, _, fragment = urllib.parse.urljoin(base, href).partition("#")
        filename = urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1])
        if not filename:
            continue
        files.append(IndexFile(
            filename=filename,
            url=url,
            hashes=_parse_hash_fragment(fragment),
            metadata=_meta_attr(a.get("data-core-metadata", a.get("data-dist-info-metadata"))),
            requires_python=a.get("data-requires-python"),
            yanked="data-yanked" in a,
        ))
    return ProjectPage(project, page_url, tuple(files), "html")


# --- wheel metadata ------------------------------------------------------------------------------


@dataclass(frozen=True)
class WheelMetadata:
    """A wheel's core metadata and how it was read."""

    name: str
    version: str
    requires_dist: tuple[str, ...]
    requires_python: str | None
    url: str  # the wheel
    how: str  # "pep658" | "range" | "download"


class RangeFile(io.RawIOBase):
    """A read-only, seekable view of a remote file that fetches only the ranges read.

    The first request asks for the last ``TAIL_BYTES`` (which gives the size); every miss then
    fetches at least ``READ_AHEAD`` bytes. ``zipfile`` reads the end-of-central-directory record,
    the central directory and one member through it.
    """

    def __init__(self, http: Http, url: str) -> None:
        super().__init__()
        self.http, self.url = http, url
        data, total, ranged = http.get_range(url, None, TAIL_BYTES)
        if total is None:
            raise IndexFileError("the server's range answer has no total size (Content-Range)", where=shown_url(url),
                                 fix="use an index that serves PEP 658 .metadata files")
        self.size = total
        self.ranged = ranged
        self._chunks: list[tuple[int, bytes]] = [(total - len(data), data)]
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def _cached(self, start: int, end: int) -> bytes | None:
        for off, data in self._chunks:
            if off <= start and end <= off + len(data):
                return data[start - off:end - off]
        return None

    def readinto(self, buf: memoryview | bytearray) -> int:  # type: ignore[override]  # io passes a memoryview; typeshed says any buffer
        n = min(len(buf), self.size - self._pos)
        if n <= 0:
            return 0
        start, end = self._pos, self._pos + n
        data = self._cached(start, end)
        if data is None and n > MAX_RANGE_BYTES:
            raise IndexFileError(f"the wheel's zip asks for a {n}-byte read", where=shown_url(self.url),
                                 fix="not a wheel envman reads lazily; use an index that serves PEP 658 metadata")
        if data is None:
            if not self.ranged:
                raise IndexFileError("range requests not honoured", where=shown_url(self.url))
            stop = min(self.size, max(end, start + READ_AHEAD)) - 1
            got, _, ranged = self.http.get_range(self.url, start, stop)
            if not ranged or len(got) != stop - start + 1:
                raise IndexFileError("the server answered a range request with the wrong bytes", where=shown_url(self.url),
                                     fix="use an index that serves PEP 658 .metadata files")
            self._chunks.append((start, got))
            data = got[:n]
        buf[:n] = data
        self._pos += n
        return n


def parse_metadata(text: bytes, url: str, how: str) -> WheelMetadata:
    msg: Message = HeaderParser().parsestr(text.decode("utf-8", errors="replace"))
    name, version = msg.get("Name"), msg.get("Version")
    if not name or not version:
        raise IndexFileError("wheel METADATA has no Name/Version", where=shown_url(url), fix="report it to the index operator")
    return WheelMetadata(
        name=str(name), version=str(version),
        requires_dist=tuple(str(r).strip() for r in msg.get_all("Requires-Dist") or ()),
        requires_python=str(msg["Requires-Python"]) if msg.get("Requires-Python") else None,
        url=url, how=how,
    )


def _check_hashes(data: bytes, hashes: tuple[tuple[str, str], ...], url: str) -> None:
    for algo, value in hashes:
        if algo in hashlib.algorithms_guaranteed:
            if hashlib.new(algo, data).hexdigest() != value.lower():
                raise IndexFileError(f"{algo} of the downloaded file does not match the index", where=shown_url(url),
                                     fix="the index or a proxy serves a corrupt file; retry or use another mirror")
            return


def read_wheel_metadata(http: Http, f: IndexFile) -> WheelMetadata:
    """METADATA of wheel ``f``: the PEP 658 file where the index serves one, otherwise the
    ``*.dist-info/METADATA`` member read through range requests (a small wheel on a server
    without range support is downloaded whole)."""
    if f.metadata_url:
        resp = http.get(f.metadata_url, limit=MAX_METADATA_BYTES)
        if isinstance(f.metadata, tuple):
            _check_hashes(resp.body, f.metadata, f.metadata_url)
        return parse_metadata(resp.body, f.metadata_url, "pep658")
    rf = RangeFile(http, f.url)
    fobj: io.BufferedIOBase
    if rf.ranged:
        how, fobj = "range", io.BufferedReader(rf, buffer_size=8192)
    else:
        data = rf._chunks[0][1]
        _check_hashes(data, f.hashes, f.url)
        how, fobj = "download", io.BytesIO(data)
    try:
        with zipfile.ZipFile(fobj) as zf:
            member = _metadata_member(zf.namelist(), f)
            info = zf.getinfo(member)
            if info.file_size > MAX_METADATA_BYTES:
                raise IndexFileError("METADATA larger than 4 MiB", where=shown_url(f.url))
            return parse_metadata(zf.read(member), f.url, how)
    except zipfile.BadZipFile as exc:
        raise IndexFileError(f"not a readable wheel ({exc})", where=shown_url(f.url), fix="check the index serves real wheels") from None


def _metadata_member(names: list[str], f: IndexFile) -> str:
    cands = [n for n in names if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
    prefix = f.filename.split("-")[0].lower() + "-"
    preferred = [n for n in cands if n.lower().startswith(prefix)]
    if len(preferred) == 1:
        return preferred[0]
    if len(cands) == 1:
        return cands[0]
    raise IndexFileError("wheel has no single *.dist-info/METADATA", where=shown_url(f.url))
