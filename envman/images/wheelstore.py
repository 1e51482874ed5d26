"""The wheel store: CUDA-library wheels fetched once per user, served to the classic builder.

BuildKit keeps what pip downloads in a cache mount; the classic builder has no mounts, so each
stack downloaded its CUDA libraries again (gigabytes for torch's twelve ``nvidia-*`` wheels). The
store makes a second stack with the same pins download none of them:

* **Filled on the host, checked by hash.** Before a classic build of a stack whose row pins its
  CUDA libraries with sha256 hashes, envman fetches each pinned wheel it lacks from the same
  indexes the build's pip would ask, the file whose sha256 is one of the pin's and whose tags the
  image's Python and platform accept. A download is hashed as it is written and kept only when the
  hash matches; a stored wheel is hashed again before every build that uses it, and one that no
  longer matches is removed.
* **Per user.** The store lives in the user's envman cache folder (``<cache>/wheels``, mode 0700):
  no other user of the engine can put a file there. Each user downloads a pin once, whatever the
  number of their stacks; sharing across users would need a folder others can write to, so it is
  left out (BuildKit's cache mount, shared by the engine's users, is the cross-user path).
* **Content-addressed.** ``<store>/sha256/<hex>/<wheel file name>``: the path names the content.
* **Served for the build only.** For each classic build, envman makes a bridge network of its own
  (labelled, removed after the build), serves the build's stored wheels read-only over HTTP on that
  network's gateway address at :data:`WHEEL_STORE_PORT`, and builds on that network with the host
  name :data:`WHEEL_STORE_HOST` pointing at the gateway. The rendered step
  (:func:`envman.render.plan.cuda_libs`) installs from there with ``--no-index --require-hashes``
  and falls back to the index when nothing answers, so a written context built by plain ``docker
  build`` still builds. The step's text does not depend on the build (fixed name and port), so
  the classic builder's cache key does not either.

Nothing here is needed for a build to succeed: when a wheel cannot be fetched on the host, or the
network or the server cannot be set up, the build's pip downloads from the index as before.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import urllib.parse
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator
from packaging.version import InvalidVersion, Version

from envman import labels as L
from envman.engine.wheelserver import ServedFile as StoredWheel
from envman.engine.wheelserver import WheelServer, serve
from envman.errors import EnvmanError
from envman.render.imagepaths import WHEEL_STORE_HOST, WHEEL_STORE_PORT
from envman.paths import cache_dir
from envman.paths import caches_enabled
from envman.render.plan import pip_flags

if TYPE_CHECKING:
    from packaging.tags import Tag

    from envman.engine.builder import Builder
    from envman.engine.facts import DockerFacts
    from envman.matrix.index import Http, IndexFile
    from envman.render.options import RenderOptions
    from envman.stack.names import Stack

#: A hashed CUDA-library pin as a row carries it (``Stack.cuda_libs``).
_PIN_RE = re.compile(r"([a-z0-9]+(?:-[a-z0-9]+)*)==([0-9A-Za-z.+!]+)((?: --hash=sha256:[0-9a-f]{64})+)")
_HEX_RE = re.compile(r"[0-9a-f]{64}")
#: The largest wheel the store takes (the biggest NVIDIA wheels are under 1.5 GB).
MAX_WHEEL_BYTES = 8 * 2**30
#: The glibc of each distribution release a stack's OS names (the ``libc6`` package of the
#: release); what decides which ``manylinux_2_X`` wheels its pip accepts. A release not named
#: here is taken as 2.17, the floor of manylinux2014: wheels for newer glibcs are then left to
#: the build's pip and the index.
GLIBC = {
    "ubuntu16.04": (2, 23), "ubuntu18.04": (2, 27), "ubuntu20.04": (2, 31), "ubuntu22.04": (2, 35),
    "ubuntu24.04": (2, 39), "debian10": (2, 28), "debian11": (2, 31), "debian12": (2, 36), "debian13": (2, 41),
    "ubuntu26.04": (2, 43),
}
_ARCH = {"linux/amd64": "x86_64", "linux/arm64": "aarch64", "linux/ppc64le": "ppc64le"}
#: The role label of a build network (see :func:`served`).
ROLE_BUILD_NETWORK = "build-network"


class StoreError(EnvmanError):
    """A pinned wheel could not be put into the store (the build's pip then uses the index)."""


@dataclass(frozen=True)
class Pin:
    """``name==version`` and the sha256 hashes any file of it may have."""

    name: str
    version: str
    hashes: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.name}=={self.version}"


def parse_pin(line: str) -> Pin | None:
    """The pin of one ``cuda_libs`` line; ``None`` when it carries no hashes (nothing to check a
    stored wheel against) or is not ``name==version --hash=sha256:HEX...``."""
    m = _PIN_RE.fullmatch(line)
    if m is None:
        return None
    hashes = tuple(h.rpartition(":")[2] for h in m.group(3).split())
    return Pin(m.group(1), m.group(2), hashes)


def supported_tags(python: str, platform: str, os_name: str) -> list[Tag]:
    """The wheel tags pip in the image accepts, best first: CPython ``python`` (``3.13t``: the
    free-threaded build) on ``platform`` with the glibc of ``os_name``."""
    from packaging.tags import compatible_tags, cpython_tags

    digits = python.rstrip("t")
    major, minor = (int(x) for x in digits.split(".")[:2])
    arch = _ARCH.get(platform, "x86_64")
    glibc_major, glibc_minor = GLIBC.get(os_name, (2, 17))
    legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}  # PEP 600's aliases
    out: list[str] = []
    for m in range(glibc_minor, 4, -1):
        out.append(f"manylinux_{glibc_major}_{m}_{arch}")
        if m in legacy and (arch in ("x86_64", "i686") or m == 17):
            out.append(f"{legacy[m]}_{arch}")
    out.append(f"linux_{arch}")
    abis = [f"cp{major}{minor}t"] if python.endswith("t") else None
    return [*cpython_tags((major, minor), abis=abis, platforms=out), *compatible_tags((major, minor), platforms=out)]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


#: The store's folder in the user's envman cache folder (``envman clean`` removes it).
STORE_FOLDER = "wheels"


def default_root() -> Path:
    return Path(cache_dir()) / STORE_FOLDER


@dataclass
class WheelStore:
    """The store at ``root`` (see the module's text); ``fetched`` counts what this process downloaded."""

    root: Path = field(default_factory=default_root)
    fetched: list[str] = field(default_factory=list)

    def _dir(self) -> Path:
        d = self.root / "sha256"
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.root, 0o700)
        return d

    def lookup(self, pin: Pin) -> StoredWheel | None:
        """The stored wheel of ``pin`` whose bytes still have one of its hashes (one that does not
        is removed); ``None`` when there is none."""
        base = self._dir()
        for h in pin.hashes:
            d = base / h
            if not d.is_dir():
                continue
            for f in sorted(d.glob("*.whl")):
                if f.is_file() and not f.is_symlink() and _wheel_of(f.name, pin) and _sha256(f) == h:
                    return StoredWheel(f.name, h, f)
                f.unlink(missing_ok=True)
        return None

    def add(self, pin: Pin, file: IndexFile, http: Http) -> StoredWheel:
        """Download ``file`` (one of ``pin``'s on an index page) into the store, hashing it as it is
        written; kept only when its sha256 is one of ``pin``'s."""
        from envman.config import shown_url

        name = file.filename
        if "/" in name or name.startswith(".") or not _wheel_of(name, pin):
            raise StoreError(f"{name!r} is not a wheel of {pin}", where=shown_url(file.url))
        base = self._dir()
        tmp = base / f".part-{secrets.token_hex(8)}"
        h = hashlib.sha256()
        try:
            with open(tmp, "xb") as out:
                size = http.download(file.url, out, limit=MAX_WHEEL_BYTES, on_chunk=h.update)
            digest = h.hexdigest()
            if digest not in pin.hashes:
                raise StoreError(f"{name} has sha256 {digest}, not one the matrix row pins for {pin}",
                                 where=shown_url(file.url), fix="check the index (a mirror serving other bytes?)")
            d = base / digest
            d.mkdir(exist_ok=True, mode=0o700)
            final = d / name
            os.replace(tmp, final)
        finally:
            tmp.unlink(missing_ok=True)
        self.fetched.append(f"{name} ({size} bytes)")
        return StoredWheel(name, digest, final)


def _wheel_of(filename: str, pin: Pin) -> bool:
    from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

    try:
        name, version, _, _ = parse_wheel_filename(filename)
        return name == canonicalize_name(pin.name) and version == Version(pin.version)
    except (InvalidWheelFilename, InvalidVersion):
        return False


def choose(files: list[IndexFile], pin: Pin, tags: list[Tag]) -> IndexFile | None:
    """The file pip in the image would take of ``pin``: a wheel of it whose sha256 is pinned, with
    the best-ranked tag in ``tags``; ``None`` when there is none."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    rank = {t: i for i, t in enumerate(tags)}
    best: tuple[int, IndexFile] | None = None
    for f in files:
        sha = dict(f.hashes).get("sha256")
        if sha not in pin.hashes or f.yanked or not _wheel_of(f.filename, pin):
            continue
        try:
            file_tags = parse_wheel_filename(f.filename)[3]
        except InvalidWheelFilename:
            continue
        r = min((rank[t] for t in file_tags if t in rank), default=None)
        if r is not None and (best is None or r < best[0]):
            best = (r, f)
    return best[1] if best else None


@dataclass(frozen=True)
class Sources:
    """Where the build's pip looks for the CUDA libraries (credential-free http(s) URLs only)."""

    indexes: tuple[str, ...]
    find_links: tuple[str, ...] = ()


def sources_of(stack: Stack, options: RenderOptions) -> Sources:
    """The indexes and find-links pages of the CUDA-library step, as :func:`envman.render.plan.pip_flags`
    gives them to pip (PyPI when no index is named). A URL carrying credentials is left out: the
    wheels of a private index stay with the build, which gets its credentials as a secret."""
    from envman.config import split_credentials
    from envman.matrix.index import PYPI_SIMPLE

    flags = pip_flags(stack, options, [])
    indexes: list[str] = []
    links: list[str] = []
    primary = PYPI_SIMPLE
    for opt, value in zip(flags, flags[1:]):
        if opt == "--index-url":
            primary = value
        elif opt == "--extra-index-url":
            indexes.append(value)
        elif opt == "--find-links":
            links.append(value)

    def usable(url: str) -> bool:
        return urllib.parse.urlsplit(url).scheme in ("http", "https") and split_credentials(url)[1] is None

    return Sources(tuple(u for u in [primary, *indexes] if usable(u)), tuple(u for u in links if usable(u)))


@dataclass
class Filled:
    """What :func:`fill` found: the stored wheels, and for each pin it could not store, why."""

    wheels: list[StoredWheel] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


def fill(store: WheelStore, pins: list[Pin], sources: Sources, tags: list[Tag], http: Http) -> Filled:
    """Every pin in the store: found there, else fetched from the first of ``sources`` that has a
    file of it with a pinned hash and an accepted tag."""
    from envman.matrix.index import IndexFileError, IndexUnreachable, fetch_project, parse_html_page

    out = Filled()
    pages: dict[str, list[IndexFile]] = {}
    for pin in pins:
        found = store.lookup(pin)
        if found is None:
            why = "no file with a pinned hash and a tag the image accepts"
            for where in [*sources.find_links, *sources.indexes]:
                try:
                    if where in sources.find_links:
                        if where not in pages:
                            pages[where] = list(parse_html_page(http.get(where).body, where, pin.name).files)
                        files = pages[where]
                    else:
                        files = list(fetch_project(http, where, pin.name).files)
                    chosen = choose(files, pin, tags)
                    if chosen is not None:
                        found = store.add(pin, chosen, http)
                        break
                except (IndexUnreachable, IndexFileError, StoreError, OSError) as exc:
                    why = exc.line() if isinstance(exc, EnvmanError) else str(exc)
        if found is None:
            out.missing.append(f"{pin}: {why}")
        else:
            out.wheels.append(found)
    return out


# --- a classic build with the store -------------------------------------------------------------


@dataclass
class Served:
    """What :func:`served` did for one build (for the log and the tests)."""

    wheels: list[StoredWheel] = field(default_factory=list)
    fetched: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    server: WheelServer | None = None


def wanted(stack: Stack, options: RenderOptions, run: Builder) -> list[Pin]:
    """The pins the store serves to this build: the stack's hashed CUDA-library pins, for envman's
    classic builder with no network of the user's choosing, not ``--offline``; ``[]`` otherwise."""
    from envman.engine.builder import ClassicBuilder

    if not isinstance(run, ClassicBuilder) or run.network or options.offline or not stack.cuda_libs:
        return []
    if not caches_enabled(switch="ENVMAN_WHEEL_STORE"):
        return []
    pins = [parse_pin(line) for line in stack.cuda_libs]
    return [p for p in pins if p is not None] if all(pins) else []


def _local_facts(run: Builder) -> DockerFacts | None:
    """The engine's facts over its Unix socket, when the engine runs on this host (only then can
    its builds reach a server here)."""
    from envman.engine.facts import DockerFacts

    url = getattr(getattr(run, "engine", None), "url", "") or ""
    return DockerFacts(socket=url[len("unix://"):]) if url.startswith("unix://") else None


def _build_network_labels(uid: int) -> dict[str, str]:
    return {L.MANAGED: L.TRUE, L.ROLE: ROLE_BUILD_NETWORK, L.UID: str(uid)}


def _remove_leftovers(facts: DockerFacts, uid: int) -> None:
    """This user's build networks whose build is over (its process ended without removing it): a
    live build holds its network's lock."""
    from filelock import FileLock, Timeout

    from envman.state import locks_dir

    for net in facts.list_networks(_build_network_labels(uid)):
        if net.labels.get(L.UID) != str(uid) or not net.name.startswith(f"envman-build-{uid}-"):
            continue
        lock = FileLock(str(locks_dir() / f"{net.name}.lock"))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            continue
        try:
            facts.remove_network(net.name)
        finally:
            lock.release()
            Path(lock.lock_file).unlink(missing_ok=True)


@contextmanager
def served(run: Builder, stack: Stack, options: RenderOptions, *, store: WheelStore | None = None,
           http: Http | None = None) -> Iterator[tuple[Builder, Served]]:
    """``run`` as the build of ``stack`` should use it: with the store filled for its CUDA-library
    pins and served on a network of the build's own, when :func:`wanted` and the engine is local;
    else ``run`` itself. Whatever fails here leaves the build to the index (a note says why)."""
    result = Served()
    pins = wanted(stack, options, run)
    facts = _local_facts(run) if pins else None
    if not pins or facts is None:
        yield run, result
        return
    from filelock import FileLock

    from envman.matrix.index import Http as _Http
    from envman.state import locks_dir

    store = store or WheelStore()
    http = http or _Http(ca_bundle=options.ca_bundle, timeout=60.0)
    done_before = len(store.fetched)
    filled = fill(store, pins, sources_of(stack, options), supported_tags(stack.python, stack.platform, stack.os), http)
    result.wheels, result.fetched = filled.wheels, store.fetched[done_before:]
    result.notes += [f"wheel store: {m}; the build's pip takes it from the index" for m in filled.missing]
    if not filled.wheels:
        yield run, result
        return
    uid = os.getuid()
    name = f"envman-build-{uid}-{secrets.token_hex(4)}"
    locks_dir().mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(locks_dir() / f"{name}.lock"))
    lock.acquire(timeout=0)
    made = False
    try:
        try:
            _remove_leftovers(facts, uid)
            made = facts.create_network(name, _build_network_labels(uid)) is not None
            info = facts.inspect_network(name) if made else None
            gateway = info.gateway if info else ""
            if not gateway:
                raise OSError("the build network has no gateway address")
            server_cm = serve(gateway, filled.wheels, port=WHEEL_STORE_PORT)
            server = server_cm.__enter__()
        except (EnvmanError, OSError) as exc:
            why = exc.line() if isinstance(exc, EnvmanError) else str(exc)
            result.notes.append(f"wheel store not served ({why}); the build's pip takes the wheels from the index")
            yield run, result
            return
        result.server = server
        try:
            yield replace(run, network=name, hosts=((WHEEL_STORE_HOST, gateway),)), result  # type: ignore[type-var]
        finally:
            server_cm.__exit__(None, None, None)
    finally:
        if made:
            facts.remove_network(name)
        lock.release()
        Path(lock.lock_file).unlink(missing_ok=True)


__all__ = [
    "Filled", "GLIBC", "Pin", "Served", "Sources", "StoreError", "StoredWheel", "WheelStore", "choose", "fill",
    "parse_pin", "serve", "served", "sources_of", "supported_tags", "wanted",
]
