"""The user's config file and the network options every render/build accepts.

``envman.paths.config_dir() / "config.toml"`` (``ENVMAN_CONFIG_DIR`` moves it), section
``[network]``; every key is optional and has the CLI option of the same name::

    [network]
    registry_mirror = "registry.corp.example:5000/hub"     # --registry-mirror
    ca_bundle = "~/corp-ca.pem"                             # --ca-bundle (relative: to this file)
    pip_index = "https://pypi.corp.example/simple"          # --pip-index
    pip_extra_index = "https://wheels.corp.example/simple"  # --pip-extra-index
    framework_index = "https://torch.corp.example/whl/cu124" # --framework-index
    wheelhouse = "/srv/wheels"                              # --wheelhouse
    offline = false                                         # --offline / --online
    apt_mirror = "http://apt.corp.example/ubuntu"           # --apt-mirror
    python_install_mirror = "https://pbs.corp.example/releases/download"  # --python-mirror

Index URLs (``pip_index``, ``pip_extra_index``, ``framework_index``) may carry
``user:password@``: BuildKit builds pass them as a build secret; the classic builder refuses
them. ``[build] builder = "auto" | "buildkit" | "classic"`` picks the builder (``--builder``).

Precedence: CLI option > this file (project files carry no network settings). Every value is validated
where it enters (a malformed file fails whole with one line naming the file and the key), and
the validators here are the same ones ``RenderOptions`` applies to CLI values.

The file is read by one reader, :func:`read_config` (one parse per content), and each of the
tables of :data:`TABLES` is checked by one function when it is asked for (a table, with only its
keys; one error style). Tables envman does not know are left alone. Each table has its typed
loader: ``[network]``, ``[build]`` and ``[matrix]`` here (with the user's matrix files it names,
:func:`user_matrix_paths`),
``[run]``/``[project]`` in ``envman.project.settings``, ``[engine]`` in ``envman.engine.select``,
``[registry]`` in ``envman.images.remote``, ``[slurm]`` in ``envman.cluster.slurm``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Literal, Mapping

from envman.errors import UserError


CONFIG_NAME = "config.toml"

#: [network] key -> the CLI option that sets the same thing.
NETWORK_KEYS: dict[str, str] = {
    "registry_mirror": "--registry-mirror",
    "ca_bundle": "--ca-bundle",
    "pip_index": "--pip-index",
    "pip_extra_index": "--pip-extra-index",
    "framework_index": "--framework-index",
    "wheelhouse": "--wheelhouse",
    "offline": "--offline",
    "apt_mirror": "--apt-mirror",
    "python_install_mirror": "--python-mirror",
}

PATH_KEYS = ("ca_bundle", "wheelhouse")
URL_KEYS = ("pip_index", "pip_extra_index", "framework_index", "apt_mirror", "python_install_mirror")

CA_MARKER = b"-----BEGIN CERTIFICATE-----"
MAX_CA_BYTES = 16 * 1024 * 1024

NO_CREDENTIALS = (
    "envman never bakes credentials into images (classic-builder build args and ENV values "
    "end up in the image history)"
)

#: Index keys whose URL may carry ``user[:password]@``: on BuildKit the credentials travel as a
#: build secret (a netrc file mounted for one RUN), never in the Dockerfile, a layer or a label.
CREDENTIAL_KEYS = ("pip_index", "pip_extra_index", "framework_index")

#: ``[build] builder`` in the config file and ``--builder`` on the command line.
BUILDERS = ("auto", "buildkit", "classic")


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
    from urllib.parse import unquote

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


_UUID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def looks_like_token(seg: str) -> bool:
    """Whether one URL component (a path segment, a host label) looks like a secret: a known
    token prefix, a UUID, or a long random-looking run of letters and digits. Runs are split at
    ``- _ . ~``, so a name made of words and a short id (``team-a-3f9a2b7c1d4e``) is not one."""
    import math

    if len(seg) < 20:
        return False
    if seg.lower().startswith(_TOKEN_PREFIXES) or _UUID_RE.fullmatch(seg):
        return True
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
    import ipaddress

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


def check_bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise Invalid(f"expected true or false, got {value!r}", "write offline = true or offline = false")
    return value


def _as_path(value: Any, what: str) -> Path:
    if isinstance(value, Path):
        return value.expanduser().resolve()
    if not isinstance(value, str) or not value:
        raise Invalid(f"{what} must be a path, got {value!r}", "give a file system path")
    return Path(value).expanduser().resolve()


VALIDATORS: dict[str, Callable[[Any], Any]] = {
    "registry_mirror": check_registry_mirror,
    "ca_bundle": check_ca_bundle,
    "pip_index": lambda v: check_url(v, what="pip index", credentials=True),
    "pip_extra_index": lambda v: check_url(v, what="pip extra index", credentials=True),
    "framework_index": lambda v: check_url(v, what="framework index", credentials=True),
    "wheelhouse": check_wheelhouse,
    "offline": check_bool,
    "apt_mirror": lambda v: check_url(v, what="apt mirror", plain_http=True),
    "python_install_mirror": lambda v: check_url(v, what="Python install mirror"),
}


def validate_network(values: Mapping[str, Any], *, where: Callable[[str], str]) -> dict[str, Any]:
    """Validate ``[network]``-shaped values; ``where(key)`` names the source in errors."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key not in NETWORK_KEYS:
            raise UserError(
                f"unknown network option {key!r}",
                where=where(key),
                fix="known: " + ", ".join(NETWORK_KEYS),
            )
        if value is None:
            continue
        try:
            out[key] = VALIDATORS[key](value)
        except Invalid as exc:
            raise UserError(exc.what, where=where(key), fix=exc.fix) from None
    return out


# --- the file --------------------------------------------------------------------------------


def config_path() -> Path:
    from envman.paths import config_dir

    return config_dir() / CONFIG_NAME


MATRIX_KEYS = ("files", "torch_index")

#: Every table config.toml may hold and the keys of each: what :func:`read_config` checks.
TABLES: dict[str, tuple[str, ...]] = {
    "network": tuple(NETWORK_KEYS),
    "build": ("builder", "base", "network"),
    "engine": ("host",),
    "registry": ("default", "allow_http", "pull_on_run", "trust_registry"),
    "matrix": MATRIX_KEYS,
    "run": ("gpus", "shm_size", "environment", "mounts"),
    "project": ("stack",),
    "slurm": ("runtime", "partition"),
}


@dataclass(frozen=True)
class ConfigFile:
    """config.toml as parsed by :func:`read_config` (``found``: it exists)."""

    path: Path
    document: Mapping[str, Any]
    found: bool = True

    def table(self, name: str) -> dict[str, Any]:
        """The table ``[name]`` of :data:`TABLES`, checked (empty when the file has none): a
        table, holding only its keys; else one ``UserError`` line naming the file and the key."""
        keys = TABLES[name]
        table = self.document.get(name, {})
        if not isinstance(table, dict):
            raise UserError(f"[{name}] must be a table", where=self.where(name),
                            fix=f"write [{name}] on a line of its own, then its keys (key = value)")
        unknown = [k for k in table if k not in keys]
        if unknown:
            raise UserError(f"unknown key {name}.{unknown[0]}", where=self.where(name, unknown[0]),
                            fix=f"known keys in [{name}]: " + ", ".join(keys))
        return dict(table)

    def where(self, table: str, key: str | None = None) -> str:
        """How errors name a table or one of its keys: ``FILE: [table].key``."""
        return f"{self.path}: [{table}]" + (f".{key}" if key else "")


_READ: dict[tuple[str, bytes], ConfigFile] = {}


def read_config(path: Path | None = None) -> ConfigFile:
    """The user's config file, read now and parsed once per content in this process. A file that
    is missing is an empty config; a file that cannot be read or parsed, or that is not the
    user's own (another uid's, writable by its group or others, or a symlink to such a file:
    its mounts, environment and index would apply to every run), is one ``UserError`` line
    naming it. Its tables are checked by :meth:`ConfigFile.table`."""
    from envman.safefile import parse_toml, read_file

    path = Path(path) if path is not None else config_path()
    try:
        data = read_file(path, what="config file", private=True, follow=True,
                         fix="make it yours and not writable by others (chown, chmod go-w), or remove it")
    except FileNotFoundError:
        return ConfigFile(path, {}, found=False)
    key = (str(path), data)
    if key not in _READ:
        doc = parse_toml(data, what="config file", where=str(path))
        _READ.clear()  # one config file per process, as a rule: keep only the latest
        _READ[key] = ConfigFile(path, doc)
    return _READ[key]


def load_config(path: Path | None = None) -> dict[str, Any]:
    """The whole config file as a dict ({} when there is none); malformed TOML → UserError."""
    return dict(read_config(path).document)


def load_network_config(path: Path | None = None) -> dict[str, Any]:
    """The validated ``[network]`` table of the user config ({} when absent).

    Relative paths (``ca_bundle``, ``wheelhouse``) are taken relative to the config file.
    """
    cfg = read_config(path)
    path = cfg.path
    net = cfg.table("network")
    resolved: dict[str, Any] = {}
    for key, value in net.items():
        if key in PATH_KEYS and isinstance(value, str) and value:
            p = Path(value).expanduser()
            value = p if p.is_absolute() else path.parent / p
        resolved[key] = value
    return validate_network(resolved, where=lambda k: cfg.where("network", k))


def load_builder_config(path: Path | None = None) -> str:
    """``[build] builder`` of the user config: ``auto`` (the default), ``buildkit`` or ``classic``."""
    cfg = read_config(path)
    value = cfg.table("build").get("builder", "auto")
    if value not in BUILDERS:
        raise UserError(f"builder {value!r} is not one of {', '.join(BUILDERS)}", where=cfg.where("build", "builder"),
                        fix='write builder = "auto", "buildkit" or "classic"')
    return value


#: ``[build] base`` and ``--base``: how a stack gets an ``nvidia/cuda`` base NVIDIA no longer serves.
BaseMode = Literal["auto", "pull", "rebuild"]
BASE_MODES: tuple[BaseMode, ...] = ("auto", "pull", "rebuild")


def base_mode(value: object, *, where: str) -> BaseMode:
    """``value`` as a base mode: the one check of ``--base`` and ``[build] base`` (``where``: which
    of them gave it), with one wording."""
    if value not in BASE_MODES:
        raise UserError(f"base mode {value!r} is not one of {', '.join(BASE_MODES)}", where=where,
                        fix="use auto, pull or rebuild (--base, or base in [build] of config.toml)")
    return value


def load_base_config(path: Path | None = None) -> BaseMode:
    """``[build] base`` of the user config: ``auto`` (the default), ``pull`` or ``rebuild``."""
    cfg = read_config(path)
    return base_mode(cfg.table("build").get("base", "auto"), where=cfg.where("build", "base"))


#: ``[build] network``: the network of a build's RUN steps. ``host`` reaches a proxy, cache or
#: package mirror on the host's own loopback (apt-cacher-ng on 127.0.0.1:3142, ...).
BUILD_NETWORKS = ("default", "host")


def load_build_network(path: Path | None = None) -> str | None:
    """``[build] network`` of the user config: ``None`` for the engine's default, or ``host``."""
    cfg = read_config(path)
    value = cfg.table("build").get("network", "default")
    if value not in BUILD_NETWORKS:
        raise UserError(f"network {value!r} is not one of {', '.join(BUILD_NETWORKS)}", where=cfg.where("build", "network"),
                        fix='write network = "default" or "host"')
    return None if value == "default" else value


@dataclass(frozen=True)
class MatrixConfig:
    """The ``[matrix]`` table, checked: the user's matrix files (absolute or relative to the
    config file's folder) and the PyTorch variant index ``envman matrix update`` reads."""

    files: tuple[Path, ...] = ()
    torch_index: str | None = None


def load_matrix_config(path: Path | None = None) -> MatrixConfig:
    """The validated ``[matrix]`` table: ``files`` (matrix files the user relies on, loaded after
    the shipped ones; relative paths are taken relative to the config file) and ``torch_index``
    (base URL of PyTorch's variant index or its mirror, for ``envman matrix update``)::

        [matrix]
        files = ["~/envman/ours.toml", "updates.toml"]
        torch_index = "https://torch.corp.example/whl"
    """
    cfg = read_config(path)
    path = cfg.path
    where = lambda k: cfg.where("matrix", k)  # noqa: E731
    out = MatrixConfig()
    for key, value in cfg.table("matrix").items():
        if key == "files":
            if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
                raise UserError("files must be a list of paths", where=where(key), fix='e.g. files = ["~/envman/ours.toml"]')
            files = []
            for v in value:
                p = Path(v).expanduser()
                files.append(p if p.is_absolute() else path.parent / p)
            out = replace(out, files=tuple(files))
        else:
            try:
                out = replace(out, torch_index=check_url(value, what="torch index"))
            except Invalid as exc:
                raise UserError(exc.what, where=where(key), fix=exc.fix) from None
    return out


#: Extra matrix files, os.pathsep-separated (before any --matrix option).
MATRIX_ENV = "ENVMAN_MATRIX"


def user_matrix_paths(extra: Iterable[str | os.PathLike[str]] = ()) -> list[Path]:
    """User files: ``[matrix] files`` of the user config first, then ENVMAN_MATRIX
    (os.pathsep-separated), then --matrix options (a file named twice is loaded once, last)."""
    paths = list(load_matrix_config().files)
    paths += [Path(p) for p in os.environ.get(MATRIX_ENV, "").split(os.pathsep) if p.strip()]
    paths += [Path(p) for p in extra]
    seen: dict[Path, Path] = {}
    for p in paths:  # later wins, as a later file's rows replace an earlier one's
        key = p.expanduser().absolute()
        seen.pop(key, None)
        seen[key] = p
    return list(seen.values())


def matrix_files(extra: Iterable[str | os.PathLike[str]] = (), *, shipped: bool = True) -> list[Path]:
    """Every matrix file of an invocation, in load order: the shipped ones (sorted), then the
    user's (``[matrix] files``, ``ENVMAN_MATRIX``, then ``--matrix``)."""
    from envman.paths import matrices_dir

    return [*(sorted(matrices_dir().glob("*.toml")) if shipped else []), *user_matrix_paths(extra)]


__all__ = [
    "BUILDERS",
    "CREDENTIAL_KEYS",
    "MATRIX_KEYS",
    "MatrixConfig",
    "load_matrix_config",
    "MATRIX_ENV",
    "user_matrix_paths",
    "matrix_files",
    "NETWORK_KEYS",
    "load_builder_config",
    "load_base_config",
    "load_build_network",
    "BASE_MODES",
    "BaseMode",
    "base_mode",
    "redact",
    "split_credentials",
    "Invalid",
    "check_url",
    "check_registry_mirror",
    "check_ca_bundle",
    "check_wheelhouse",
    "config_path",
    "ConfigFile",
    "TABLES",
    "read_config",
    "load_config",
    "load_network_config",
    "validate_network",
]
