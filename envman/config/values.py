"""The validators of the values a user gives envman for its network options (in config.toml's
``[network]``, ``[matrix] torch_index`` and on the command line): URLs, a registry mirror, a CA
bundle, a wheelhouse. Strict on purpose: these strings end up in RUN lines, sed expressions and
ENV values. Each raises :class:`Invalid` (what, and the fix); the caller names where the value
came from (a file and key, or an option) in its ``UserError``. Messages show URLs through
:func:`shown_url`: never a secret a URL may carry.
"""

from __future__ import annotations

import ipaddress
import math
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from envman.errors import UserError

CA_MARKER = b"-----BEGIN CERTIFICATE-----"
MAX_CA_BYTES = 16 * 1024 * 1024

NO_CREDENTIALS = (
    "envman never bakes credentials into images (classic-builder build args and ENV values "
    "end up in the image history)"
)


class Invalid(ValueError):
    """A value failed validation; ``fix`` says what would be accepted."""

    def __init__(self, what: str, fix: str) -> None:
        super().__init__(what)
        self.what = what
        self.fix = fix


# --- validators (shared with envman.render.dockerfile) --------------------------------------------------

# Strict on purpose: these strings end up in RUN lines, sed expressions and ENV values. No
# whitespace, quotes, `$`, backticks, backslashes, `;|&`, `#`, `?` or `@` can get through.
_HOST = r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])"
_URL_RE = re.compile(r"^https?://" + _HOST + r"(?::(?P<port>[0-9]{1,5}))?(?:/[A-Za-z0-9._~%+=,:/-]*)?$")
_CREDENTIALS_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/]*@")
# user[:password]@ as a URL carries it: unreserved characters and percent escapes only.
_USERINFO_RE = re.compile(r"^(?P<scheme>https?://)(?P<user>[A-Za-z0-9._~%!+=-]+)(?::(?P<password>[A-Za-z0-9._~%!+=-]*))?@(?P<rest>.*)$")
_REGISTRY_RE = re.compile(
    r"^(?P<host>" + _HOST + r")(?::(?P<port>[0-9]{1,5}))?"
    r"(?P<path>(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*)$"
)


def split_credentials(value: str) -> tuple[str, str | None, str | None]:
    """(URL without ``user[:password]@``, user, password), both percent-decoded; no userinfo:
    ``(value, None, None)``. Decoded values with whitespace, quotes, ``#`` or a backslash are
    refused: they could not be written to a netrc file unambiguously."""
    m = _USERINFO_RE.match(value)
    if not m:
        return value, None, None
    user = unquote(m.group("user"))
    password = unquote(m.group("password") or "")
    for part in (user, password):
        if any(ch.isspace() or ch in "\"'#\\" or not ch.isprintable() for ch in part):
            raise Invalid(
                "the credentials in the URL hold a space, quote, # or backslash",
                "use credentials of letters, digits and . _ ~ ! + = - (percent-escaped as needed)",
            )
    return m.group("scheme") + m.group("rest"), user, password


def redact(value: str) -> str:
    """``value`` with any ``user[:password]@`` of a URL replaced by ``***@`` (for messages)."""
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/]*@", r"\1***@", value) if isinstance(value, str) else value


#: Prefixes of well-known API tokens (GitHub, GitLab, Hugging Face, npm, PyPI, AWS, Slack, ...).
_TOKEN_PREFIXES = ("ghp_", "gho_", "ghs_", "github_pat_", "glpat-", "hf_", "npm_", "pypi-", "akia", "xox", "sk-",
                   "cs_", "jfrt", "akcp")


#: A known prefix where a token may start: at the start of the text or after any character that
#: is not a letter or digit (``token=hf_...``, ``x:ghp_...``, ``key.glpat-...``), with the
#: letters, digits, ``_`` and ``-`` that follow it (the alphabet of those tokens).
_PREFIXED_RE = re.compile(r"(?<![A-Za-z0-9])(?:" + "|".join(map(re.escape, _TOKEN_PREFIXES)) + r")(?P<body>[A-Za-z0-9_-]*)",
                          re.IGNORECASE)
#: Inside a component, what follows a prefix is a token's body only when it holds a digit or a
#: capital letter (as every token of those kinds does); a repository manager's name of words
#: (``ml-pypi-virtual-repository``) holds neither.
_TOKEN_BODY_RE = re.compile(r"[A-Z0-9]")
_UUID_RE = re.compile(r"(?<![0-9a-fA-F])[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
                      r"(?![0-9a-fA-F])")


def _decoded_forms(seg: str) -> list[str]:
    """``seg`` as written and as each round of percent-decoding reads it: a server (and pip)
    reads ``%68f_`` as ``hf_``, and a proxy in front of it may decode once more."""
    forms = [seg]
    while "%" in forms[-1] and len(forms) < 4:
        decoded = unquote(forms[-1])
        if decoded == forms[-1]:
            break
        forms.append(decoded)
    return forms


def looks_like_token(seg: str, *, runs: bool = True) -> bool:
    """Whether one URL component (a path segment, a host label) looks like a secret, as written
    or percent-decoded: a known token prefix at the start of it or after any character that is
    not a letter or digit (with at least 20 characters of the token's alphabet from there, and,
    after a separator, a digit or a capital letter among them), a
    UUID anywhere in it, or (``runs``) a long random-looking run of letters and digits. Runs are
    split at ``- _ . ~``, so a name made of words and a short id (``team-a-3f9a2b7c1d4e``) is
    not one."""
    return any(_looks_like_token(form, runs) for form in _decoded_forms(seg))


def _looks_like_token(seg: str, runs: bool) -> bool:
    if len(seg) < 20:
        return False
    if any(len(m.group(0)) >= 20 and (m.start() == 0 or _TOKEN_BODY_RE.search(m.group("body")))
           for m in _PREFIXED_RE.finditer(seg)):
        return True
    if _UUID_RE.search(seg):
        return True
    if not runs:
        return False
    for run in re.split(r"[-_.~]", seg):
        if len(run) >= 20 and re.search(r"[0-9]", run) and re.search(r"[A-Za-z]", run):
            counts = {c: run.count(c) for c in set(run)}
            if -sum(n / len(run) * math.log2(n / len(run)) for n in counts.values()) >= 3.5:
                return True
    return False


def _url_parts(url: str) -> tuple[str, str, str, str]:
    """(scheme://, userinfo, host[:port], path) of ``url``, leniently (for messages and checks)."""
    m = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*://)?([^/?#]*)([^?#]*)", url)
    scheme, authority, path = (m.group(1) or "", m.group(2), m.group(3)) if m else ("", url, "")
    userinfo, _, hostport = authority.rpartition("@")
    return scheme, userinfo, hostport, path


def token_in_path(url: str) -> str | None:
    """A host label or path segment of ``url`` that looks like a secret (:func:`looks_like_token`),
    or ``None``. Such a component would be baked into the image with the URL, so it is refused;
    a user:token@ goes into a build secret instead."""
    _, _, hostport, path = _url_parts(url)
    for seg in [*re.split(r"[.:\[\]]", hostport), *path.split("/")]:
        if looks_like_token(seg):
            return seg
    return None


#: Archive names and hex digests (a commit, a content-addressed path): parts of a URL that are no
#: random-looking secret (a known token prefix or a UUID in one still is).
_PLAIN_PART_RE = re.compile(r".*\.(whl|zip|tar\.gz|tgz|tar\.bz2|tar\.xz|egg|git)|[0-9a-f]{7,128}")


def secret_in_url(url: str) -> str | None:
    """What in ``url`` (``scheme://...``) would carry a secret wherever the URL is written, or
    ``None``: ``"credentials"`` (``user[:token]@``), ``"query"`` (a query string, often a token) or
    ``"token"`` (a host label, path segment or fragment field that looks like one, see
    :func:`looks_like_token`; archive names and hex digests are not taken for random runs)."""
    rest = url.partition("://")[2]
    authority = re.sub(r"[/?#][\s\S]*", "", rest)  # up to the path, the query or the fragment
    if "@" in authority:
        return "credentials"
    path, _, fragment = rest[len(authority):].partition("#")
    parts = [*re.split(r"[.:\[\]]", authority), *re.split(r"[/@]", path.partition("?")[0]),
             *re.split(r"[&=/]", fragment)]
    if any(looks_like_token(p, runs=not _PLAIN_PART_RE.fullmatch(p)) for p in parts):
        return "token"
    if "?" in rest:
        return "query"
    return None


def citable_url(url: str) -> str:
    """``url`` as a matrix row may cite it: without its ``user[:token]@`` and its query string (a
    private index's credentials, a signed download's signature); the rest as it is."""
    m = re.fullmatch(r"([A-Za-z][A-Za-z0-9+.-]*://)(?:[^/?#]*@)?([^?#]*)(?:\?[^#]*)?(#.*)?", url, re.DOTALL)
    return url if m is None else m.group(1) + m.group(2) + (m.group(3) or "")


def shown_url(value: object) -> str:
    """``value`` as a message may show it: ``user[:password]@`` as ``***@``, a query or fragment
    as ``?…``, any host label or path segment that looks like a token as ``***``, at most 200
    characters. Never the secret a URL may carry, wherever in it."""
    if not isinstance(value, str):
        return repr(value)[:200]
    scheme, userinfo, hostport, path = _url_parts(value)
    rest = value[len(scheme) + len(userinfo) + (1 if userinfo else 0) + len(hostport) + len(path):]
    host = re.sub(r"[^.:\[\]]+", lambda m: "***" if looks_like_token(m.group(0)) else m.group(0), hostport)
    path = "/".join("***" if looks_like_token(seg) else seg for seg in path.split("/"))
    text = scheme + ("***@" if userinfo else "") + host + path + ("?…" if rest else "")
    return text[:200]


def ip_literal(host: str):
    """The IP address a URL's host is (brackets dropped, an IPv4-mapped IPv6 address as the IPv4
    address it carries), or ``None`` for a name."""
    try:
        addr = ipaddress.ip_address(host[1:-1] if host.startswith("[") and host.endswith("]") else host)
    except ValueError:
        return None
    return getattr(addr, "ipv4_mapped", None) or addr


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (no port) is this machine by rule: ``localhost`` or a loopback address
    literal (127.0.0.0/8, ``::1``, ``::ffff:127.x.y.z``). A name that resolves to loopback is not
    taken: what it resolves to can change."""
    if host.lower() == "localhost":
        return True
    addr = ip_literal(host)
    return addr is not None and addr.is_loopback


def check_url(value: Any, *, what: str = "URL", credentials: bool = False, plain_http: bool = False) -> str:
    """An http(s) URL with a strict character set; returns it unchanged.

    ``credentials``: ``user[:password]@`` is accepted (see :func:`split_credentials`); it never
    appears in an error message. Otherwise a URL with credentials is refused. ``plain_http``:
    ``http://`` to any host (an apt mirror: apt checks every package's signature); otherwise
    plain HTTP only to a loopback host (:func:`is_loopback_host`), as packages and credentials
    would cross the network unencrypted. Messages show URLs through :func:`shown_url`.
    """
    if not isinstance(value, str) or not value:
        raise Invalid(f"{what} must be a non-empty string, got {shown_url(value)!r}", "e.g. https://pypi.corp.example/simple")
    if credentials and _USERINFO_RE.match(value):
        bare, _, _ = split_credentials(value)
        if _CREDENTIALS_RE.match(bare):
            raise Invalid(f"{what} {shown_url(value)!r} has more than one @ before its path", "give one user[:password]@")
        check_url(bare, what=what, plain_http=plain_http)
        return value
    if credentials and _CREDENTIALS_RE.match(value):
        raise Invalid(
            f"{what} {shown_url(value)!r}: its user[:password]@ has characters a URL does not carry as they are",
            "percent-escape them (e.g. @ as %40, : in a user name as %3A)",
        )
    if isinstance(value, str) and token_in_path(value):
        raise Invalid(
            f"{what} seems to carry a token ({shown_url(value)}): "
            "an index URL is written into the image, so a token there would be kept in it",
            "give the token as user:token@host (carried as a build secret, BuildKit), or download on the host "
            "(pip download ... -d DIR) and pass --wheelhouse DIR",
        )
    if _CREDENTIALS_RE.match(value):
        raise Invalid(
            f"{what} carries credentials (user[:password]@): {NO_CREDENTIALS}",
            "use a mirror that needs no credentials, or download with your credentials on the host "
            "(pip download ... -d DIR) and pass --wheelhouse DIR",
        )
    m = _URL_RE.fullmatch(value)
    if not m:
        raise Invalid(
            f"{what} {shown_url(value)!r}{' (with a query string)' if '?' in value else ''} is not an accepted URL",
            "use http:// or https://, a host name, an optional :port and a path of letters, digits "
            "and . _ ~ % + = , : / - (no query string, spaces, quotes or shell characters)",
        )
    _check_port(m.group("port"), f"{what} {shown_url(value)!r}")
    if value[:7].lower() == "http://" and not plain_http:
        host = _url_parts(value)[2]
        host = host[:host.index("]") + 1] if host.startswith("[") else host.rsplit(":", 1)[0]
        if not is_loopback_host(host):
            raise Invalid(
                f"{what} {shown_url(value)!r} is plain http:// to a host that is not this machine: packages "
                "(and any credentials) would cross the network unencrypted",
                "use https:// (or a loopback address such as 127.0.0.1 for a local index)",
            )
    return value


def _check_port(port: str | None, what: str) -> None:
    """A port, when given, is 1-65535 (one line now rather than a failed build later)."""
    if port is not None and not 1 <= int(port) <= 65535:
        raise Invalid(f"{what}: port {port} is out of range", "use a port 1-65535")


def check_registry_mirror(value: Any) -> str:
    """``HOST[:PORT][/PATH]`` of a registry that mirrors Docker Hub."""
    if not isinstance(value, str) or not value:
        raise Invalid(f"registry mirror must be a non-empty string, got {value!r}", "e.g. registry.corp.example:5000")
    if "@" in value:
        raise Invalid(
            f"registry mirror carries credentials: {NO_CREDENTIALS}",
            "log in to the registry with `docker login HOST` instead; the engine keeps the credentials",
        )
    if "://" in value:
        raise Invalid(f"registry mirror {shown_url(value)!r} has a URL scheme", "give HOST[:PORT][/PATH] without http(s)://")
    m = _REGISTRY_RE.fullmatch(value.rstrip("/"))
    if not m:
        raise Invalid(
            f"registry mirror {shown_url(value)!r} is not HOST[:PORT][/PATH]",
            "e.g. registry.corp.example:5000 or mirror.corp.example/dockerhub (path: lowercase letters, digits, . _ -)",
        )
    _check_port(m.group("port"), f"registry mirror {shown_url(value)!r}")
    if token_in_path(value):
        raise Invalid(
            f"registry mirror {shown_url(value)!r} seems to carry a token: it is written into every Dockerfile's FROM",
            "log in to the registry with `docker login HOST` instead; the engine keeps the credentials",
        )
    host = m.group("host")
    # Docker reads the first component of an image reference as a registry only when it has a
    # dot or a port, or is "localhost"; anything else would silently mean a Docker Hub user.
    if not ("." in host or m.group("port") or host == "localhost" or host.startswith("[")):
        raise Invalid(
            f"registry mirror host {host!r} has no dot and no port, so Docker would read it as a Docker Hub namespace",
            "use a fully qualified name (mirror.corp.example) or add the port (mirror:5000)",
        )
    return value.rstrip("/")


def check_ca_bundle(value: Any) -> Path:
    path = _as_path(value, "CA bundle")
    if not path.is_file():
        raise Invalid(f"CA bundle {str(path)!r} is not a file", "give a PEM file, e.g. /etc/ssl/certs/ca-certificates.crt")
    from envman.safefile import read_file

    try:
        data = read_file(path, what="CA bundle", limit=MAX_CA_BYTES)
    except (OSError, UserError) as exc:
        raise Invalid(f"cannot read CA bundle {str(path)!r}: {getattr(exc, 'what', None) or exc}",
                      "give a readable regular PEM file") from None
    if CA_MARKER not in data:
        raise Invalid(
            f"CA bundle {str(path)!r} is not PEM (no {CA_MARKER.decode()} line)",
            "convert it: openssl x509 -inform der -in CERT -out CERT.pem",
        )
    return path


def check_wheelhouse(value: Any) -> Path:
    path = _as_path(value, "wheelhouse")
    if not path.is_dir():
        raise Invalid(f"wheelhouse {str(path)!r} is not a directory", "give a directory of *.whl files (pip download ... -d DIR)")
    return path


def check_bool(value: Any, key: str = "offline") -> bool:
    """``value`` when it is a boolean: the one wording of a config key that takes true or false."""
    if not isinstance(value, bool):
        raise Invalid(f"{key} must be true or false, got {value!r}", f"write {key} = true or {key} = false")
    return value


def _as_path(value: Any, what: str) -> Path:
    if isinstance(value, Path):
        return value.expanduser().resolve()
    if not isinstance(value, str) or not value:
        raise Invalid(f"{what} must be a path, got {value!r}", "give a file system path")
    return Path(value).expanduser().resolve()


__all__ = ["CA_MARKER", "MAX_CA_BYTES", "NO_CREDENTIALS", "Invalid", "check_bool", "check_ca_bundle", "check_registry_mirror",
           "check_url", "check_wheelhouse", "citable_url", "ip_literal", "is_loopback_host", "looks_like_token", "redact", "secret_in_url",
           "shown_url", "split_credentials", "token_in_path"]
