"""Ask a registry whether each base image tag of the matrix still exists (``envman matrix check-tags``).

NVIDIA deletes end-of-life ``nvidia/cuda`` tags; a matrix row that says ``published`` while the
registry answers 404 is *disappeared* and needs its status changed. The check never guesses:
a registry that cannot be reached makes every answer ``unknown`` and the command says so.

Two APIs:

* Docker Hub's web API (the default): ``GET https://hub.docker.com/v2/namespaces/<ns>/repositories/<repo>/tags/<tag>``.
* The registry v2 API of any registry or mirror (``--registry URL``):
  ``HEAD <URL>/v2/<repository>/manifests/<tag>``, with the Bearer token dance of the
  distribution spec (anonymous, or ``ENVMAN_REGISTRY_TOKEN`` / basic credentials from
  ``ENVMAN_REGISTRY_USER`` + ``ENVMAN_REGISTRY_PASSWORD`` sent to the token service).

The HTTP layer is one small callable (:class:`Transport`), replaced by a fake in the unit tests.
"""

from __future__ import annotations

import base64
import json
import os
import re
import ssl
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Protocol, Sequence

from envman.errors import EnvmanError, UserError, counted
from envman.matrix.model import BaseImage, Matrix

HUB_API = "https://hub.docker.com"
DEFAULT_TIMEOUT = 5.0
TOKEN_ENV = "ENVMAN_REGISTRY_TOKEN"
USER_ENV, PASSWORD_ENV = "ENVMAN_REGISTRY_USER", "ENVMAN_REGISTRY_PASSWORD"
MANIFEST_TYPES = ", ".join((
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
))

#: What the registry says about a tag.
PRESENT, MISSING, UNKNOWN = "present", "missing", "unknown"
#: What that means for the matrix row.
OK, DISAPPEARED, REAPPEARED, UPDATE = "ok", "disappeared", "reappeared", "update"

#: Exit status when the registry could not answer: distinct from 1 (an answer that is bad
#: news: a tag disappeared) so CI can tell a network problem from a matrix problem.
EXIT_UNREACHABLE = 3


class RegistryUnreachable(EnvmanError):
    """The registry did not answer at all; no tag was judged."""

    exit_code = EXIT_UNREACHABLE


# --- the HTTP layer --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Response:
    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""

    def header(self, name: str) -> str:
        for k, v in self.headers.items():
            if k.lower() == name.lower():
                return v
        return ""


class TransportError(Exception):
    """No HTTP answer at all: DNS failure, refused connection, timeout, TLS failure."""


class Transport(Protocol):
    def __call__(self, method: str, url: str, headers: Mapping[str, str], timeout: float) -> Response:
        """One HTTP request. Any HTTP status is a ``Response``; no answer is ``TransportError``."""


class UrllibTransport:
    """The real transport: ``urllib`` (honours HTTPS_PROXY/NO_PROXY), short timeouts."""

    def __init__(self, ca_bundle: str | None = None) -> None:
        self.context = ssl.create_default_context(cafile=ca_bundle) if ca_bundle else None

    def __call__(self, method: str, url: str, headers: Mapping[str, str], timeout: float) -> Response:
        req = urllib.request.Request(url, method=method, headers=dict(headers))
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=self.context) as resp:
                body = resp.read(1 << 20) if method != "HEAD" else b""
                return Response(resp.status, dict(resp.headers.items()), body)
        except urllib.error.HTTPError as exc:
            return Response(exc.code, dict(exc.headers.items()) if exc.headers else {}, b"")
        except (urllib.error.URLError, OSError, ValueError) as exc:  # socket.timeout is an OSError
            reason = getattr(exc, "reason", exc)
            raise TransportError(f"{type(reason).__name__}: {reason}") from exc


# --- asking ----------------------------------------------------------------------------------------


@dataclass
class TagCheck:
    ref: str
    repository: str
    tag: str
    matrix_status: str  # published | deleted | unknown (the matrix's own word)
    registry_status: str = UNKNOWN  # present | missing | unknown
    verdict: str = UNKNOWN  # ok | disappeared | reappeared | update | unknown
    http_status: int | None = None
    detail: str = ""
    custom: bool = False
    used_by: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def verdict_for(matrix_status: str, registry_status: str) -> str:
    """``published`` + missing → disappeared; ``deleted`` + present → reappeared; a matrix
    ``unknown`` with an answer → update (the matrix can now say); agreement → ok."""
    if registry_status == UNKNOWN:
        return UNKNOWN
    if matrix_status == "unknown":
        return UPDATE
    if matrix_status == "published":
        return OK if registry_status == PRESENT else DISAPPEARED
    return REAPPEARED if registry_status == PRESENT else OK


def split_repository(repository: str) -> tuple[str | None, str]:
    """``nvidia/cuda`` → (None, "nvidia/cuda"); ``ubuntu`` → (None, "library/ubuntu");
    ``ghcr.io/x/y`` → ("ghcr.io", "x/y"). A first part with a dot or colon, or ``localhost``,
    is a registry host (Docker's own rule)."""
    first, _, rest = repository.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return first, rest
    return None, repository if "/" in repository else f"library/{repository}"


class RegistryClient:
    """Answers ``exists(repository, tag)`` for Docker Hub's API or a registry v2 endpoint."""

    def __init__(self, transport: Transport, *, registry: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                 token: str | None = None, credentials: tuple[str, str] | None = None) -> None:
        self.transport = transport
        self.registry = registry.rstrip("/") if registry else None
        self.timeout = timeout
        self.token = token
        self.credentials = credentials
        self._tokens: dict[str, str] = {}

    @property
    def endpoint(self) -> str:
        return self.registry or HUB_API

    def _ask(self, method: str, url: str, headers: dict[str, str]) -> Response:
        return self.transport(method, url, headers, self.timeout)

    def exists(self, repository: str, tag: str) -> tuple[str, int | None, str]:
        """(registry_status, http_status, detail). Raises TransportError when nothing answered."""
        host, repo = split_repository(repository)
        if self.registry is None and host is None:
            ns, _, name = repo.partition("/")
            url = f"{HUB_API}/v2/namespaces/{_q(ns)}/repositories/{_q(name)}/tags/{_q(tag)}"
            return _judge(self._ask("GET", url, {"Accept": "application/json"}))
        base = self.registry or f"https://{host}"
        url = f"{base}/v2/{'/'.join(_q(p) for p in repo.split('/'))}/manifests/{_q(tag)}"
        headers = {"Accept": MANIFEST_TYPES}
        token = self.token or self._tokens.get(repo)
        if token:
            headers["Authorization"] = f"Bearer {token}"
        resp = self._ask("HEAD", url, headers)
        if resp.status == 401 and not self.token:
            token = self._bearer(resp.header("WWW-Authenticate"), repo)
            if token:
                self._tokens[repo] = token
                resp = self._ask("HEAD", url, {**headers, "Authorization": f"Bearer {token}"})
        return _judge(resp)

    def _bearer(self, challenge: str, repo: str) -> str | None:
        """The distribution spec's token flow: GET realm?service=..&scope=repository:<repo>:pull."""
        m = re.match(r"\s*Bearer\s+(.*)$", challenge or "", re.I)
        if not m:
            return None
        params = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        realm = params.pop("realm", None)
        if not realm:
            return None
        query = {k: v for k, v in params.items() if k == "service"}
        query["scope"] = f"repository:{repo}:pull"
        headers = {"Accept": "application/json"}
        if self.credentials:
            raw = f"{self.credentials[0]}:{self.credentials[1]}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(raw).decode()
        resp = self._ask("GET", realm + "?" + urllib.parse.urlencode(query), headers)
        if resp.status != 200:
            return None
        try:
            body = json.loads(resp.body or b"{}")
        except json.JSONDecodeError:
            return None
        token = (body.get("token") or body.get("access_token")) if isinstance(body, dict) else None
        return token if isinstance(token, str) else None


def _q(part: str) -> str:
    return urllib.parse.quote(part, safe="")


def _judge(resp: Response) -> tuple[str, int | None, str]:
    if 200 <= resp.status < 300:
        return PRESENT, resp.status, ""
    if resp.status == 404:
        return MISSING, 404, "the registry answers 404 (no such tag)"
    if resp.status == 429:
        return UNKNOWN, 429, "rate limited by the registry (HTTP 429): retry later or use --registry"
    if resp.status in (401, 403):
        return UNKNOWN, resp.status, f"HTTP {resp.status}: not allowed to read it (set {TOKEN_ENV} or {USER_ENV}/{PASSWORD_ENV})"
    return UNKNOWN, resp.status, f"unexpected HTTP {resp.status}"


@dataclass
class CheckReport:
    registry: str
    api: str  # "hub" or "v2"
    reachable: bool
    message: str
    tags: list[TagCheck]

    @property
    def summary(self) -> dict[str, int]:
        out = {v: 0 for v in (OK, DISAPPEARED, REAPPEARED, UPDATE, UNKNOWN)}
        for t in self.tags:
            out[t.verdict] += 1
        return out

    @property
    def exit_code(self) -> int:
        """1 when a tag disappeared (a finding); 3 when any answer is unknown; else 0."""
        if any(t.verdict == DISAPPEARED for t in self.tags):
            return 1
        if any(t.verdict == UNKNOWN for t in self.tags):
            return EXIT_UNREACHABLE
        return 0

    def to_json(self) -> dict[str, Any]:
        return {
            "registry": self.registry, "api": self.api, "reachable": self.reachable, "message": self.message,
            "summary": self.summary, "tags": [t.to_json() for t in self.tags],
        }


def _used_by(matrix: Matrix) -> dict[str, list[str]]:
    from envman.stack.resolve import resolve_row

    out: dict[str, list[str]] = {}
    for b in matrix.builds:
        try:
            out.setdefault(resolve_row(matrix, b).base_image, []).append(b.name)
        except EnvmanError:
            continue
    return out


def check_tags(
    matrix: Matrix,
    client: RegistryClient,
    *,
    images: Sequence[BaseImage] | None = None,
    jobs: int = 8,
) -> CheckReport:
    """Ask ``client`` about every image row (once per ref). The first request is made alone: if
    it gets no answer at all the registry is unreachable and nothing else is asked."""
    images = list(matrix.images if images is None else images)
    used = _used_by(matrix)
    checks: list[TagCheck] = []
    seen: set[str] = set()
    for img in images:
        if img.ref in seen:
            continue
        seen.add(img.ref)
        checks.append(TagCheck(img.ref, img.repository, img.tag, img.status, custom=img.custom,
                               used_by=sorted(used.get(img.ref, []))))
    api = "v2" if client.registry else "hub"
    if not checks:
        return CheckReport(client.endpoint, api, True, "no image rows to check", checks)

    def ask(c: TagCheck) -> None:
        try:
            c.registry_status, c.http_status, c.detail = client.exists(c.repository, c.tag)
        except TransportError as exc:
            c.registry_status, c.http_status, c.detail = UNKNOWN, None, f"no answer: {exc}"
        c.verdict = verdict_for(c.matrix_status, c.registry_status)

    first = checks[0]
    try:
        first.registry_status, first.http_status, first.detail = client.exists(first.repository, first.tag)
        first.verdict = verdict_for(first.matrix_status, first.registry_status)
    except TransportError as exc:
        message = f"registry unreachable: {client.endpoint}: {exc}"
        for c in checks:
            c.registry_status, c.verdict, c.detail = UNKNOWN, UNKNOWN, message
        return CheckReport(client.endpoint, api, False, message, checks)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(ask, checks[1:]))
    unknown = sum(c.verdict == UNKNOWN for c in checks)
    message = f"{counted(len(checks), 'tag')} checked" + (f", {unknown} without an answer" if unknown else "")
    return CheckReport(client.endpoint, api, True, message, checks)


def make_client(registry: str | None, *, timeout: float = DEFAULT_TIMEOUT, ca_bundle: str | None = None,
                transport: Transport | None = None,
                env: Mapping[str, str] | None = None) -> RegistryClient:
    """A client from CLI options and the environment (credentials never come from arguments)."""
    env = os.environ if env is None else env
    if registry is not None:
        if not re.match(r"^https?://[^\s/]+", registry):
            raise UserError(f"--registry {registry!r}: expected a URL like https://mirror.example.com",
                            where="--registry", fix="include the scheme: https://HOST[:PORT]")
    creds = (env[USER_ENV], env[PASSWORD_ENV]) if env.get(USER_ENV) and env.get(PASSWORD_ENV) else None
    return RegistryClient(transport or UrllibTransport(ca_bundle), registry=registry, timeout=timeout,
                          token=env.get(TOKEN_ENV) or None, credentials=creds)


__all__ = [
    "check_tags", "make_client", "RegistryClient", "Response", "TransportError", "UrllibTransport",
    "CheckReport", "TagCheck", "verdict_for", "split_repository", "RegistryUnreachable", "EXIT_UNREACHABLE",
]
