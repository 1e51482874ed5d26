"""Promoted images through an OCI registry: ``envman push`` and ``envman pull``.

* **Push** takes the stack's promoted image (``envman/<stack>:latest`` with a passing or
  ``cpu-only`` smoke verdict), which carries that verdict in its ``envman.smoke.*`` labels
  (:mod:`envman.images.store`; a verdict known only from this user's report is put on the image
  first), tags it ``HOST[/PREFIX]/envman/<stack>:latest`` and ``:<render hash>``, pushes, and
  records the manifest digest the registry reported (the digest ref is what clusters run).
* **Pull** takes a digest someone vouches for (:func:`pull_digest`): the one given
  (``--digest``), else the one this user pushed to that registry (``pushed.json``), else, only
  when the user says every pusher of the registry is trusted (``--trust-registry`` or
  ``[registry] trust_registry = true``), the tag's current one; otherwise it refuses, since labels
  are written by whoever pushes. It pulls by digest (the engine verifies the content against
  it), then refuses the image unless its labels say it is
  envman's image of exactly the stack this host resolves (``envman.stack`` equal to the resolved
  stack) and carry a runnable smoke verdict taken on exactly these layers
  (``envman.smoke.rootfs``). Only then is it tagged ``envman/<stack>:latest``, i.e. promoted here.
* **Transport**: the engine talks plain HTTP to the registries in its ``insecure-registries``
  (127.0.0.0/8 by default). envman allows that only for a loopback registry or when the user
  says so (``--allow-http`` or ``[registry] allow_http = true``).
* **Credentials** are the engine's and Docker's own (``docker login``, credential helpers):
  envman never reads, stores or passes any.

Config (``config.toml``)::

    [registry]
    default = "registry.lab.example:5000/team"   # --registry
    allow_http = false                             # --allow-http
    pull_on_run = false                            # envman run pulls a missing promoted image
    trust_registry = false                         # pull :latest unpinned (anyone who can push to it is trusted)
"""

from __future__ import annotations

import ipaddress
import json
import re
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from envman import labels as L
from envman.errors import EnvmanError, UserError, clip
from envman.stack.names import Stack

if TYPE_CHECKING:
    from collections.abc import Callable

    from envman.config import ConfigFile
    from envman.engine.api import ContainerEngine, EngineFacts, ImageInfo

RUNNABLE_SMOKE = ("pass", "cpu-only")
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
#: ``REPO@sha256:<64 hex>``: a reference pinned by digest, one ``@`` only.
DIGEST_REF_RE = re.compile(r"^[a-z0-9][A-Za-z0-9._:/\[\]-]*@sha256:[0-9a-f]{64}$")
_HASH_RE = re.compile(r"^[0-9a-f]{64}$")
_LABEL_MAX = 300


class RegistryError(EnvmanError):
    """A push or pull that ran and was refused or failed (exit 1)."""


# --------------------------------------------------------------------------- registry names


@dataclass(frozen=True)
class Registry:
    """``HOST[:PORT]`` and an optional repository prefix (``team/ml``)."""

    host: str
    prefix: str = ""

    def __str__(self) -> str:
        return f"{self.host}/{self.prefix}" if self.prefix else self.host

    def repository(self, stack_name: str) -> str:
        from envman.state import repository

        return f"{self}/{repository(stack_name)}"

    @property
    def hostname(self) -> str:
        """The host without the port (an IPv6 literal without its brackets)."""
        h = self.host
        if h.startswith("["):
            return h[1:h.index("]")]
        return h.rsplit(":", 1)[0] if ":" in h else h


def parse_registry(value: Any, *, where: str) -> Registry:
    """``HOST[:PORT][/PREFIX]`` checked strictly (the same rules as ``--registry-mirror``: a
    host Docker reads as a registry, lowercase path components, no scheme, no credentials)."""
    from envman.config import Invalid, check_registry_mirror

    if isinstance(value, str) and "@" in value:
        raise UserError("the registry carries credentials (user@host)", where=where,
                        fix="give HOST[:PORT][/PREFIX] and log in with `docker login HOST`: envman uses Docker's own credentials")
    try:
        text = check_registry_mirror(value)
    except Invalid as exc:
        raise UserError(exc.what.replace("registry mirror", "registry"), where=where, fix=exc.fix) from None
    m = re.fullmatch(r"(?P<host>\[[^\]]+\](?::[0-9]+)?|[^/:]+(?::[0-9]+)?)(?:/(?P<prefix>.*))?", text)
    assert m is not None  # check_registry_mirror accepted it (its port 1-65535 too)
    if len(text) > 200:
        raise UserError(f"registry {text[:40]!r}...: longer than 200 characters", where=where)
    return Registry(m.group("host"), m.group("prefix") or "")


# --------------------------------------------------------------------------- config


@dataclass(frozen=True)
class RegistrySettings:
    default: Registry | None = None
    allow_http: bool = False
    pull_on_run: bool = False
    trust_registry: bool = False


def load_registry_settings(path: Path | None = None, *, cfg: ConfigFile | None = None) -> RegistrySettings:
    """The ``[registry]`` table of the user config (``cfg`` when the caller has read it already),
    validated (one line per problem)."""
    from envman.config import read_config

    cfg = read_config(path) if cfg is None else cfg
    table = cfg.table("registry")
    flags = [cfg.flag("registry", key) for key in ("allow_http", "pull_on_run", "trust_registry")]
    default = parse_registry(table["default"], where=cfg.where("registry", "default")) if "default" in table else None
    return RegistrySettings(default, *flags)


def choose_registry(given: str | None, settings: RegistrySettings) -> Registry:
    if given is not None:
        return parse_registry(given, where="--registry")
    if settings.default is None:
        raise UserError("no registry given and none configured", where="envman push/pull",
                        fix='pass --registry HOST[:PORT][/PREFIX], or set [registry] default = "..." in config.toml')
    return settings.default


# --------------------------------------------------------------------------- plain HTTP


def is_loopback(host: str) -> bool:
    """Whether ``host`` (no port) is this machine: ``localhost``, 127.0.0.0/8, ``::1`` (an
    IPv4-mapped address by the IPv4 address it carries), or a name that resolves only to those."""
    from envman.config import ip_literal, is_loopback_host

    if is_loopback_host(host) or ip_literal(host) is not None:
        return is_loopback_host(host)
    addrs = _resolve(host)
    return bool(addrs) and all(a.is_loopback for a in addrs)


def _resolve(host: str) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return []
    out = []
    for info in infos:
        try:
            addr = ipaddress.ip_address(str(info[4][0]))  # a scoped fe80::1%eth0 parses as it is
        except ValueError:
            continue
        out.append(getattr(addr, "ipv4_mapped", None) or addr)
    return out


def engine_uses_http(registry: Registry, cidrs: tuple[str, ...], names: tuple[str, ...]) -> bool:
    """Whether the engine would fall back to plain HTTP for ``registry`` (its insecure list)."""
    if registry.host in names or registry.hostname in names:
        return True
    from envman.config import ip_literal

    literal = ip_literal(registry.hostname)  # [::ffff:10.1.2.3] is 10.1.2.3, as the engine reads it
    addrs = [literal] if literal is not None else _resolve(registry.hostname)
    nets = []
    for c in cidrs:
        try:
            nets.append(ipaddress.ip_network(c, strict=False))
        except ValueError:
            continue
    return any(a in n for a in addrs for n in nets if a.version == n.version)


def check_transport(registry: Registry, cidrs: tuple[str, ...], names: tuple[str, ...], *, allow_http: bool) -> None:
    """Refuse a registry the engine reaches over plain HTTP unless it is loopback or allowed."""
    if allow_http or not engine_uses_http(registry, cidrs, names) or is_loopback(registry.hostname):
        return
    raise UserError(
        f"the Docker engine would talk plain HTTP to {registry.host} (it is in the engine's insecure-registries), "
        "so images and any credentials would cross the network unencrypted",
        where=f"registry {registry}",
        fix="serve the registry over HTTPS, or say so explicitly: --allow-http (or [registry] allow_http = true)",
    )


# --------------------------------------------------------------------------- labels


def label_problems(labels: Mapping[str, str], stack: Stack, rootfs: str | None) -> list[str]:
    """Why an image's labels do not make it a promoted envman image of ``stack`` (empty: fine).
    ``rootfs`` is the digest of the image's own layers (:func:`envman.images.store.rootfs_digest`):
    the smoke verdict must have been taken on them."""
    problems: list[str] = []
    got = L.parse(labels)
    if not got.managed:
        problems.append(f"it carries no {L.MANAGED}={L.TRUE} label (not an envman image)")
    if got.name != stack.name:
        problems.append(f"its {L.NAME} label is {got.name!r}, expected {stack.name!r}")
    raw = got.stack_json
    if raw is None:
        problems.append(f"it has no {L.STACK} label")
    else:
        try:
            label_stack = json.loads(raw)
        except json.JSONDecodeError:
            label_stack = None
        expected = json.loads(json.dumps(stack.to_json()))
        if not isinstance(label_stack, dict):
            problems.append(f"its {L.STACK} label is not a JSON object")
        elif label_stack != expected:
            keys = sorted(k for k in set(label_stack) | set(expected) if label_stack.get(k) != expected.get(k))
            problems.append(f"its {L.STACK} label differs from the stack this host resolves in {', '.join(keys[:5])} "
                            "(the matrices differ)")
    if not _HASH_RE.fullmatch(str(got.render_hash)):
        problems.append(f"it has no valid {L.RENDER_HASH} label")
    smoke = got.smoke
    if smoke is None:
        problems.append(f"it has no valid {L.SMOKE_STATUS} label (no smoke verdict on the image: push it with envman push)")
    elif smoke.status not in RUNNABLE_SMOKE:
        problems.append(f"its smoke verdict is {smoke.status!r}, not one of {', '.join(RUNNABLE_SMOKE)}")
    elif smoke.rootfs is None or smoke.rootfs != rootfs:
        problems.append(f"its smoke verdict was not taken on these layers ({L.SMOKE_ROOTFS} does not match them)")
    return problems


# --------------------------------------------------------------------------- push


@dataclass(frozen=True)
class Pushed:
    registry: str
    stack: str
    ref: str  # REPO@sha256:...
    digest: str
    image_id: str  # the local id of the pushed (labelled) image
    smoke: str


def pushed_path() -> Path:
    from envman.paths import state_dir

    return state_dir() / "registry" / "pushed.json"


def read_pushed() -> dict[str, dict[str, Any]]:
    from envman.safefile import read_state_json

    data = read_state_json(pushed_path(), what="push record")
    return data if isinstance(data, dict) else {}


def _record_push(p: Pushed) -> None:
    from filelock import FileLock

    from envman.state import atomic_write

    path = pushed_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock", timeout=60):
        data = read_pushed()
        if not isinstance(data.get(p.registry), dict):  # a record of another shape is replaced, never believed
            data[p.registry] = {}
        data[p.registry][p.stack] = {
            "ref": p.ref, "digest": p.digest, "image_id": p.image_id, "smoke": p.smoke, "time": int(time.time()),
        }
        atomic_write(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def promoted_image(engine: ContainerEngine, stack: Stack) -> ImageInfo:
    """The inspected promoted image of ``stack``, its smoke verdict on its labels (put there from
    this user's report when only the report has it), or a one-line error."""
    from envman.images.store import image_verdict, record_verdict, rootfs_digest
    from envman.state import load_report, stable_ref

    ref = stable_ref(stack)
    info = engine.inspect_image(ref)
    if info is None:
        raise UserError(f"no promoted image {ref}", where=f"stack {stack.name}",
                        fix=f"build it first: envman build {stack.name} (or envman pull {stack.name})")
    verdict = image_verdict(info)
    if verdict is None or verdict.status not in RUNNABLE_SMOKE:
        what = f"says {verdict.status}" if verdict else "is missing"
        raise UserError(f"the smoke verdict of {ref} {what}", where=f"stack {stack.name}",
                        fix=f"envman smoke {stack.name}; only a passing or cpu-only image is pushed")
    on_image = L.parse_smoke(info.labels)
    if on_image is None or on_image.rootfs != rootfs_digest(info) or on_image.report_digest != verdict.report_digest:
        report = load_report(info.id)
        if report is None:  # image_verdict found it a moment ago: removed meanwhile
            raise UserError(f"the smoke report of {ref} vanished", where=f"stack {stack.name}")
        # the verdict travels on an image of its own: the promoted image keeps its id, which
        # project images and their locks here were built on
        pushed = record_verdict(engine, stack.name, {**report, "image_id": info.id}, move_tags=False)
        info = engine.inspect_image(pushed) or info
    return info


def push_stack(engine: ContainerEngine, stack: Stack, registry: Registry, *, allow_http: bool = False,
               on_progress: Callable[[str], None] | None = None) -> Pushed:
    """Push the promoted image of ``stack`` with its smoke verdict; see the module docstring."""
    from envman.state import STABLE_TAG

    check_transport(registry, *engine.insecure_registries(), allow_http=allow_http)
    info = promoted_image(engine, stack)
    got = L.parse(info.labels)
    if got.smoke is None or got.smoke.status not in RUNNABLE_SMOKE:  # never push an image without its verdict
        raise RegistryError(f"the image {info.id[:19]} to push carries no runnable smoke verdict in its labels",
                            where=f"stack {stack.name}", fix=f"envman smoke {stack.name}, then push again")
    repo = registry.repository(stack.name)
    render_hash = str(got.render_hash)
    tags = [f"{repo}:{STABLE_TAG}"] + ([f"{repo}:{render_hash[:16]}"] if _HASH_RE.fullmatch(render_hash) else [])
    for t in tags:
        engine.tag(info.id, t)
    digest = engine.push(tags[0], on_progress=on_progress)
    for t in tags[1:]:
        engine.push(t)  # the same layers: nothing more to show
    pushed = Pushed(str(registry), stack.name, f"{repo}@{digest}", digest, info.id, got.smoke.status)
    _record_push(pushed)
    return pushed


# --------------------------------------------------------------------------- pull


#: Who vouches for a pulled digest (:func:`pull_digest`): the user (``--digest``), the user's own
#: push record, or nobody but the labels (the user trusts every pusher of the registry).
GIVEN, PUSHED, LABELS_ONLY = "given", "your push", "labels only"
VOUCHERS = (GIVEN, PUSHED, LABELS_ONLY)


@dataclass(frozen=True)
class Pulled:
    stack: str
    ref: str  # REPO@sha256:...
    digest: str
    image_id: str
    smoke: str
    already_promoted: bool = False
    vouched_by: str = GIVEN  # who vouches for the digest: one of VOUCHERS
    note: str = ""  # something the user should know (the tag moved since their push; labels only)


def pushed_digest(registry: Registry, stack_name: str) -> str | None:
    """The digest this user last pushed of ``stack_name`` to ``registry`` (``pushed.json``), or ``None``."""
    stacks = read_pushed().get(str(registry))
    entry = stacks.get(stack_name) if isinstance(stacks, dict) else None
    ref = entry.get("ref") if isinstance(entry, dict) else None
    if not isinstance(ref, str) or not DIGEST_REF_RE.fullmatch(ref) or ref.partition("@")[0] != registry.repository(stack_name):
        return None
    return ref.partition("@")[2]


def pull_digest(engine: ContainerEngine, stack: Stack, registry: Registry, *, digest: str | None,
                trust_registry: bool) -> tuple[str, str, str]:
    """(the digest to pull, who vouches for it, a note): a digest the user gave, else the one the
    user pushed there, else, with ``trust_registry``, the tag's current one. An image's labels
    are written by whoever pushed it, so without any of these nothing vouches for it: refused."""
    from envman.state import STABLE_TAG

    repo = registry.repository(stack.name)
    if digest is not None:
        return digest, GIVEN, ""
    mine = pushed_digest(registry, stack.name)
    if mine is not None:
        try:
            now = engine.registry_digest(f"{repo}:{STABLE_TAG}")
        except EnvmanError:
            now = mine  # the pull itself says what is wrong with the registry
        note = "" if now == mine else (
            f"{repo}:{STABLE_TAG} is now {now}, not the {mine} you pushed; pulled yours: to take the newer one, "
            f"ask who pushed it, then envman pull {stack.name} --digest {now}")
        return mine, PUSHED, note
    if trust_registry:
        return engine.registry_digest(f"{repo}:{STABLE_TAG}"), LABELS_ONLY, (
            f"{repo}:{STABLE_TAG} is vouched for by its labels only, which anyone who can push to {registry} writes "
            "(trust_registry)")
    raise UserError(
        f"nothing vouches for {repo}:{STABLE_TAG}: no --digest, and no push of yours to {registry}; its labels are "
        "written by whoever pushed it",
        where=f"envman pull {stack.name}",
        fix=f"ask whoever pushed it for the digest (envman push prints it): envman pull {stack.name} --digest sha256:...; "
            "or trust everyone who can push there: --trust-registry (or [registry] trust_registry = true)")


def check_digest(digest: str | None) -> None:
    """A manifest digest given to ``pull`` (``None``: none given): ``sha256:<64 hex digits>``."""
    if digest is not None and not DIGEST_RE.fullmatch(digest):
        raise UserError(f"digest {clip(digest, 80)!r} is not sha256:<64 hex digits>", where="--digest",
                        fix="give it as envman push printed it (REPO@sha256:..., the part after @)")


def pull_stack(engine: ContainerEngine, stack: Stack, registry: Registry, *, digest: str | None = None,
               allow_http: bool = False, trust_registry: bool = False,
               render_hashes: frozenset[str] | None = None) -> Pulled:
    """Pull ``stack``'s image from ``registry`` by a digest someone vouches for (:func:`pull_digest`),
    check it, and promote it here. ``render_hashes``: the render hashes this host gives the stack
    (default: computed, :func:`envman.images.build.expected_render_hashes`); the image's label
    must be one of them."""
    from envman.images.store import rootfs_digest
    from envman.state import stable_ref

    check_digest(digest)
    check_transport(registry, *engine.insecure_registries(), allow_http=allow_http)
    repo = registry.repository(stack.name)
    want, vouched_by, note = pull_digest(engine, stack, registry, digest=digest, trust_registry=trust_registry)
    ref = f"{repo}@{want}"
    had = engine.inspect_image(ref) is not None
    engine.pull(ref)
    info = engine.inspect_image(ref)
    if info is None:
        raise RegistryError(f"pulled {ref} but the engine has no such image", where=str(registry))
    problems = []
    if ref not in info.repo_digests:
        problems.append(f"the engine's digests of the pulled image are {list(info.repo_digests)}, not {want}")
    labels = info.labels
    problems += label_problems(labels, stack, rootfs_digest(info))
    identity = labels.get(L.CONTENT_HASH)
    if not problems and identity:  # what the image is, however its packages were fetched
        from envman.images.build import expected_content_hash

        if identity != expected_content_hash(stack):
            problems.append(f"its {L.CONTENT_HASH} label {clip(identity, 64)} is not this host's for {stack.name} "
                            "(another recipe or envman version)")
    elif not problems:  # an image built before envman labelled its content: the whole render must match
        if render_hashes is None:
            from envman.images.build import expected_render_hashes

            render_hashes = expected_render_hashes(stack, _config_options())
        got = L.parse(labels).render_hash
        if got not in render_hashes:
            problems.append(f"its {L.RENDER_HASH} label {got} is not what this host renders for {stack.name} "
                            "(another recipe, envman version or network options)")
    if problems:
        if not had:
            engine.remove_image(ref, force=False)
        raise RegistryError(f"refused {ref}: {problems[0]}" + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""),
                            where=f"envman pull {stack.name}",
                            fix="push it again from a host whose matrix resolves the same stack: envman push " + stack.name)
    stable = engine.inspect_image(stable_ref(stack))
    already = bool(stable and stable.id == info.id)
    engine.tag(info.id, stable_ref(stack))  # the verdict travels on the image's labels
    smoke = L.parse_smoke(labels)
    assert smoke is not None  # label_problems refused an image without a verdict
    return Pulled(stack.name, ref, want, info.id, smoke.status, already, vouched_by, note)


def _config_options():
    """The render options of the user config (what a plain ``envman build`` uses)."""
    from envman.render.options import RenderOptions

    return RenderOptions.from_config()


def ensure_image(engine: ContainerEngine, stack: Stack, *, registry: Registry | None = None, allow_http: bool | None = None) -> str:
    """The promoted image of ``stack`` on this engine: present with a runnable smoke report, or
    pulled from ``registry`` (default: the configured one) by a digest someone vouches for
    (:func:`pull_digest`). Returns ``envman/<stack>:latest``. For callers that must make sure a
    node has the image (a batch job's preflight)."""
    from envman.images.store import image_verdict
    from envman.state import stable_ref

    verdict = image_verdict(engine.inspect_image(stable_ref(stack)))
    if verdict is not None and verdict.status in RUNNABLE_SMOKE:
        return stable_ref(stack)
    settings = load_registry_settings()
    reg = registry or settings.default
    if reg is None:
        raise UserError(f"no promoted image {stable_ref(stack)} here and no registry configured to pull it from",
                        where=f"stack {stack.name}",
                        fix=f'envman build {stack.name}, or set [registry] default = "HOST[:PORT][/PREFIX]" and envman push it')
    pull_stack(engine, stack, reg, allow_http=settings.allow_http if allow_http is None else allow_http,
               trust_registry=settings.trust_registry)
    return stable_ref(stack)


def digest_ref(stack: Stack | str, *, registry: Registry | None = None,
               engine: EngineFacts | None = None) -> str | None:
    """``REPO@sha256:...`` of ``stack`` as pushed from here (newest push, or the push to
    ``registry``), else as pulled here (the promoted image's repo digests); ``None`` if neither."""
    from envman.state import repository, stable_ref

    stack_name = stack if isinstance(stack, str) else stack.name

    pushes = []
    for reg, stacks in read_pushed().items():
        entry = stacks.get(stack_name) if isinstance(stacks, dict) else None
        if isinstance(entry, dict) and (registry is None or reg == str(registry)):
            ref, at = entry.get("ref"), entry.get("time")
            if isinstance(ref, str) and DIGEST_REF_RE.fullmatch(ref):  # a time that is not a number is the oldest
                pushes.append((at if isinstance(at, int) and not isinstance(at, bool) else 0, ref))
    if pushes:
        return max(pushes)[1]
    if engine is None:
        return None
    info = engine.inspect_image(stable_ref(stack))
    wanted = registry.repository(stack_name) if registry is not None else None
    for ref in sorted(info.repo_digests if info is not None else ()):
        repo = ref.partition("@")[0]
        if DIGEST_REF_RE.fullmatch(ref) and (repo == wanted or (wanted is None and repo.endswith("/" + repository(stack_name)))):
            return ref
    return None
