"""``envman.toml``: a directory bound to a stack, found by walking up and validated strictly.

The file sits at the project root and is found by walking up from the current directory
(:func:`find_project_file`, refusing a file another user owns or can write). It is validated
strictly: an unknown key or a wrong type is one ``UserError`` line naming the file, the key and
what was expected. The value types (mounts, ports, GPU requests, shm sizes) and their parsers
live here too, because the command line and the user config reuse them.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping
import stat as _stat

from envman.digest import sha256
from envman.engine.values import GpuRequest, Mount
from envman.errors import UserError, counted
from envman.project.requirements import check_requirements, read_requirements
from envman.paths import CONTAINER_HOME, WORKSPACE
from envman.stack.names import APT_PACKAGE_PATTERN, PROJECT_NAME_PATTERN
from envman.errors import ResolveError
from envman.stack.names import parse_name

PROJECT_FILE = "envman.toml"
REGISTRY_FILE = "projects.json"
#: Bump when the project image recipe changes: every project image is then rebuilt once.
PROJECT_RECIPE = "1"
#: envman's default /dev/shm: PyTorch DataLoader workers pass batches through it, and Docker's
#: own 64 MB default makes them die with "bus error". Never more than half the host's RAM.
DEFAULT_SHM_BYTES = 8 * 1024**3

# Patterns as text: ``re`` compiles (and caches) one the first time it is used, so a run pays
# only for the checks its project file needs. They are applied with ``re.fullmatch``: with
# ``re.match`` the ``$`` also accepts a trailing newline, which would end a Dockerfile line.
_ENV_KEY_RE = r"^[A-Za-z_][A-Za-z0-9_]{0,254}$"
_SHM_RE = r"(?i)^[0-9]+(?:[kmgt](?:i?b)?|b)?$"
_GPU_DEVICE_RE = r"^[A-Za-z0-9:._-]+$"

PROJECT_KEYS = {
    "name": 'the project name (lowercase letters, digits, "._-"); default: the directory name',
    "stack": 'the stack, e.g. "torch-2.4-cuda12"',
    "requirements": 'a requirements file relative to the project root, or a list of requirement strings',
    "apt": "a list of Debian/Ubuntu package names",
    "command": 'the default command: a list of strings or one string (split like a shell)',
    "gpus": '"all", "none", a count, or "device=0,2"',
    "shm_size": 'shared memory, e.g. "8g"',
    "environment": "a table of environment variables",
    "mounts": 'a list of "SOURCE:TARGET[:ro]" strings',
    "ports": 'a list of ports (8888) or "HOST:CONTAINER" strings, published on 127.0.0.1',
    "network": '"project" (default: a network of this project\'s own containers) or "none" (no network at all)',
}

#: What a run's container may be attached to (see envman.run.network): a network of the project's
#: own (other projects' and users' containers cannot reach it), or none at all.
NETWORK_PROJECT, NETWORK_NONE = "project", "none"
NETWORK_MODES = (NETWORK_PROJECT, NETWORK_NONE)


# --------------------------------------------------------------------------- value types


@dataclass(frozen=True)
class Port:
    host: int
    container: int


def cluster_gpu_count(request: GpuRequest | None) -> int:
    """A run's GPU request as the count a cluster scheduler is asked for: the count, as many as
    a device list names, one for "all" (a cluster has no "every GPU of the node"), none for a
    CPU run."""
    if request is None:
        return 0
    if request.kind == "count":
        return request.count or 0
    if request.kind == "devices":
        return len(request.devices)
    return 1


def parse_gpus(value: Any, *, where: str, key: str = "gpus") -> GpuRequest | None:
    """``"all"`` / ``"none"`` / ``2`` / ``"2"`` / ``"device=0,2"`` → a request (``None`` for none)."""
    bad = UserError(
        f"key {key}: expected \"all\", \"none\", a count or \"device=0,2\", got {value!r}",
        where=where,
        fix='e.g. gpus = "all", gpus = 2 or gpus = "device=0,2"',
    )
    if isinstance(value, bool):
        raise bad
    if isinstance(value, int):
        if value < 0:
            raise bad
        return GpuRequest("count", count=value) if value else None
    if not isinstance(value, str):
        raise bad
    v = value.strip().lower()
    if v == "all":
        return GpuRequest("all")
    if v in ("none", "0", ""):
        return None
    if v.isascii() and v.isdigit():
        return GpuRequest("count", count=int(v))
    if v.startswith("device="):
        ids = tuple(x.strip() for x in value.strip()[len("device="):].split(","))
        if ids and all(x and re.match(_GPU_DEVICE_RE, x) for x in ids):
            return GpuRequest("devices", devices=ids)
    raise bad


def shm_bytes(text: str) -> int:
    """``"8g"``, ``"512MiB"``, ``"100"`` → bytes (powers of 1024); ``ValueError`` for anything else."""
    m = re.fullmatch(r"([0-9]+)([kmgt]?)(?:i?b)?", text.strip().lower())
    if not m:
        raise ValueError(f"not a size: {text!r}")
    scale: int = 1024 ** " kmgt".index(m.group(2) or " ")
    return int(m.group(1)) * scale


def default_shm_size(total_ram: int | None = None) -> str:
    """8 GiB, or half the host's RAM when that is less (documented in docs/projects.md)."""
    if total_ram is None:
        total_ram = host_ram()
    size = min(DEFAULT_SHM_BYTES, max(total_ram // 2, 64 * 1024**2))
    if size % 1024**3 == 0:
        return f"{size // 1024**3}g"
    return f"{size // 1024**2}m"


# --------------------------------------------------------------------------- envman.toml


@dataclass(frozen=True)
class ProjectConfig:
    """A parsed, validated ``envman.toml``."""

    name: str
    root: Path
    file: Path
    stack: str | None = None
    requirements: str = ""  # the requirements file's text (or the inline list, one per line)
    requirements_source: str | None = None  # the file it came from, relative to the root
    apt: tuple[str, ...] = ()
    command: tuple[str, ...] = ()
    gpus: GpuRequest | None = None
    gpus_set: bool = False  # the file said gpus (possibly "none")
    shm_size: str | None = None
    environment: tuple[tuple[str, str], ...] = ()
    mounts: tuple[Mount, ...] = ()
    ports: tuple[Port, ...] = ()
    network: str | None = None  # NETWORK_MODES; None: not said (the project's own network)
    digest: str = ""  # sha256 of the exact bytes parsed (what `envman project trust` records)

    @property
    def real_file(self) -> str:
        """The project file's real path (symlinks resolved): the key of its trust record."""
        return os.path.realpath(self.file)

    @property
    def identity(self) -> str:
        """``<name>-<hash of the real root>``: what keys the project's HOME and image repository,
        so a file elsewhere that claims the same ``name`` gets neither."""
        return project_identity(self.name, self.root)

    @property
    def needs_image(self) -> bool:
        """Whether this project gets its own image (extra apt packages or Python requirements)."""
        return bool(self.apt or self.requirements.strip())

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "root": str(self.root),
            "file": str(self.file),
            "stack": self.stack,
            "requirements": [ln for ln in self.requirements.splitlines() if ln.strip()],
            "requirements_file": self.requirements_source,
            "apt": list(self.apt),
            "command": list(self.command),
            "gpus": (str(self.gpus) if self.gpus else "none") if self.gpus_set else None,
            "shm_size": self.shm_size,
            "environment": sorted(k for k, _ in self.environment),  # names: values may be secrets
            "mounts": [mount_text(m) for m in self.mounts],
            "ports": [f"{p.host}:{p.container}" for p in self.ports],
            "network": self.network,
            "needs_image": self.needs_image,
        }


def mount_text(m: Mount) -> str:
    return f"{m.source}:{m.target}" + (":ro" if m.read_only else "")


def type_error(key: str, expected: str, value: Any, where: str, fix: str | None = None) -> UserError:
    """The one-line error for a key of a project file (or of the user config's tables that take the
    same values) whose value is not what it must be."""
    named = "" if key == where else f"key {key}: "  # a command-line option is its own place: named once
    return UserError(f"{named}expected {expected}, got {value!r}", where=where, fix=fix)


#: The most mounts one file may ask for: each is checked against the protected paths (a scan of
#: the folder for sockets and hard links), and a run needs far fewer.
MAX_MOUNTS = 256
#: The most ports one file may publish: each is a ``-p`` option of the run's command line, whose
#: length the system bounds (a file with 120,000 ports made a command line too long to start).
MAX_PORTS = 256


def kind_of(value: Any) -> str:
    """What a TOML value is, in words, without the value ("a list", "a table", "a boolean")."""
    kinds = ((bool, "a boolean"), (int, "a number"), (float, "a number"), (str, "a string"), (list, "a list"),
             (dict, "a table"))
    if value is None:
        return "no value"
    return next((word for t, word in kinds if isinstance(value, t)), f"a {type(value).__name__}")


def _str_list(doc: Mapping[str, Any], key: str, where: str) -> list[str]:
    v = doc[key]
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise type_error(key, "a list of strings", v, where)
    return v


def default_name(root: Path) -> str:
    """A registry-safe name from a directory name: ``My Project`` → ``my-project``."""
    n = re.sub(r"[^a-z0-9_.-]+", "-", root.name.lower()).strip("-._")
    return n[:63]


def project_identity(name: str, root: str | os.PathLike[str]) -> str:

    real = os.path.realpath(root)
    return f"{name}-{sha256(real.encode('utf-8', 'surrogateescape')).hexdigest()[:12]}"


def project_file_path(path: str | os.PathLike[str]) -> Path:
    """The absolute path of a project's ``envman.toml`` from the file or its directory (not read)."""
    text = os.fspath(path)
    if "\0" in text or "\n" in text:
        raise UserError("a project path may not contain NUL bytes or newlines", where=repr(text),
                        fix="give the project's directory or its envman.toml")
    file = Path(text)
    try:
        if file.is_dir() or (not file.exists() and file.suffix != ".toml"):
            file = file / PROJECT_FILE
    except OSError as exc:  # ENAMETOOLONG, ELOOP, EACCES on a parent
        raise UserError(f"cannot use this path: {exc.strerror or exc}", where=text[:200],
                        fix="give the project's directory or its envman.toml") from None
    return file.absolute()


def load_project(path: str | os.PathLike[str]) -> ProjectConfig:
    """Parse and validate an ``envman.toml`` (``path`` is the file or its directory). The file is
    read once, as a regular file of at most 1 MiB (:mod:`envman.safefile`); its sha256 is kept
    with the result (:attr:`ProjectConfig.digest`), so trust is checked against what was parsed."""

    from envman.safefile import load_toml

    file = project_file_path(path)
    where = str(file)
    try:
        doc, data = load_toml(file, what="project file")
    except FileNotFoundError:
        raise UserError("no such project file", where=where,
                        fix="create one with `envman project init --env STACK` in the project's root") from None
    return replace(parse_project(doc, file), digest=sha256(data).hexdigest())


def parse_project(doc: Mapping[str, Any], file: Path) -> ProjectConfig:
    where = str(file)
    root = file.parent
    unknown = sorted(set(doc) - set(PROJECT_KEYS))
    if unknown:
        raise UserError(f"unknown key {unknown[0]}", where=where, fix="known keys: " + ", ".join(PROJECT_KEYS))

    if "name" in doc:
        name = doc["name"]
        if not isinstance(name, str) or not re.fullmatch(PROJECT_NAME_PATTERN, name):
            raise type_error("name", "1-63 lowercase letters, digits or ._- (starting with a letter or digit)", name, where)
    else:
        name = default_name(root)
        if not re.fullmatch(PROJECT_NAME_PATTERN, name):
            raise UserError(f"the directory name {root.name!r} makes no valid project name", where=where,
                            fix='add name = "my-project" to the file')

    stack = None
    if "stack" in doc:
        stack = doc["stack"]
        if not isinstance(stack, str):
            raise type_error("stack", 'a stack name such as "torch-2.4-cuda12"', stack, where)
        check_stack_name(stack, where=where)

    requirements, req_source = "", None
    if "requirements" in doc:
        v = doc["requirements"]
        if isinstance(v, str):
            requirements = read_requirements(root, v, where=where)
            req_source = v
        elif isinstance(v, list) and all(isinstance(x, str) for x in v):
            for x in v:
                if "\n" in x or len(x.splitlines()) > 1 or not x.strip():
                    raise type_error("requirements", "one requirement per list item", x, where)
            # written as plain UTF-8 with no comment item, so never with a coding line for pip to obey
            requirements = "".join(x.strip() + "\n" for x in v if not x.strip().startswith("#"))
        else:
            raise type_error("requirements", PROJECT_KEYS["requirements"], v, where)
        check_requirements(requirements, where=f"{where}: requirements" + (f" ({req_source})" if req_source else ""))

    apt: tuple[str, ...] = ()
    if "apt" in doc:
        pkgs = _str_list(doc, "apt", where)
        for p in pkgs:
            if not re.fullmatch(APT_PACKAGE_PATTERN, p):
                raise type_error("apt", "Debian package names (optionally name=version)", p, where)
        apt = tuple(sorted(set(pkgs)))

    command: tuple[str, ...] = ()
    if "command" in doc:
        v = doc["command"]
        if isinstance(v, str):
            try:
                command = tuple(shlex.split(v))
            except ValueError as exc:
                raise type_error("command", f"a shell-like command line ({exc})", v, where) from None
        elif isinstance(v, list) and all(isinstance(x, str) for x in v):
            command = tuple(v)
        else:
            raise type_error("command", PROJECT_KEYS["command"], v, where)
        if any("\0" in x for x in command):
            raise type_error("command", "words without NUL bytes", v, where)
        if not command:
            raise type_error("command", "a non-empty command", v, where)

    gpus, gpus_set = None, False
    if "gpus" in doc:
        gpus, gpus_set = parse_gpus(doc["gpus"], where=where), True

    shm = None
    if "shm_size" in doc:
        shm = check_shm(doc["shm_size"], where=where)

    environment = parse_environment(doc["environment"], where=where) if "environment" in doc else ()
    mount_texts = _str_list(doc, "mounts", where) if "mounts" in doc else []
    if len(mount_texts) > MAX_MOUNTS:
        raise UserError(f"key mounts: {counted(len(mount_texts), 'mount')}, more than {MAX_MOUNTS}", where=where,
                        fix="mount a parent folder once instead of its parts")
    mounts = tuple(parse_mount(m, base=root, where=where) for m in mount_texts)

    ports: list[Port] = []
    if "ports" in doc:
        if not isinstance(doc["ports"], list):
            raise type_error("ports", PROJECT_KEYS["ports"], doc["ports"], where)
        if len(doc["ports"]) > MAX_PORTS:
            raise UserError(f"key ports: {counted(len(doc['ports']), 'port')}, more than {MAX_PORTS}", where=where,
                            fix="publish the ports the project serves; others reach them over its network")
        ports = [parse_port(p, where=where) for p in doc["ports"]]

    network = check_network(doc["network"], where=where) if "network" in doc else None

    return ProjectConfig(
        name=name, root=root, file=file, stack=stack, requirements=requirements, requirements_source=req_source,
        apt=apt, command=command, gpus=gpus, gpus_set=gpus_set, shm_size=shm, environment=environment,
        mounts=mounts, ports=tuple(ports), network=network,
    )


def check_network(v: Any, *, where: str, key: str = "network") -> str:
    """One of :data:`NETWORK_MODES`, else a one-line error (``host``, another project's or a
    named network would put the container beside others)."""
    if not isinstance(v, str):
        raise UserError(f"key {key}: expected \"project\" or \"none\", got {kind_of(v)}", where=where)
    if v not in NETWORK_MODES:
        raise UserError(f"key {key}: {v[:40]!r} is not a network envman attaches runs to", where=where,
                        fix='write network = "project" (the default: only this project\'s containers) or "none"')
    return v


def check_stack_name(name: str, *, where: str, key: str = "stack") -> None:
    try:
        parse_name(name)
    except ResolveError as exc:
        raise UserError(f"key {key}: {exc.what}", where=where, fix=exc.fix) from None


def host_ram() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 2 * DEFAULT_SHM_BYTES


def check_shm(v: Any, *, where: str, key: str = "shm_size") -> str:
    """A ``/dev/shm`` size: positive, and no more than the host's RAM (a tmpfs larger than
    memory only moves the failure into the container)."""
    # a boolean is an int, and str(True) is no size: the pattern refuses it
    if not isinstance(v, (str, int)) or len(str(v)) > 32 or not re.fullmatch(_SHM_RE, str(v)) or shm_bytes(str(v)) <= 0:
        raise type_error(key, 'a size such as "8g", "512m" or a number of bytes', v, where)
    ram = host_ram()
    if shm_bytes(str(v)) > ram:
        raise type_error(key, f"at most this host's RAM ({ram // 1024**2} MiB)", v, where, fix='e.g. "8g"')
    return str(v).lower()


def parse_environment(v: Any, *, where: str, key: str = "environment") -> tuple[tuple[str, str], ...]:
    if not isinstance(v, dict):
        raise UserError(f"key {key}: expected a table of NAME = value, got {kind_of(v)} (values are not shown: they "
                        "may be secrets)", where=where, fix=f"e.g. [{key}] then WANDB_MODE = \"offline\"")
    out = {}
    for k, val in v.items():
        if not re.fullmatch(_ENV_KEY_RE, k):
            raise type_error(f"{key}.{k}" if k.isprintable() else key, "a variable name (letters, digits, _)", k, where)
        if isinstance(val, bool) or not isinstance(val, (str, int, float)):
            raise UserError(f"key {key}.{k}: expected a string or a number, got {kind_of(val)} (values are not "
                            "shown: they may be secrets)", where=where)
        if isinstance(val, str) and ("\0" in val or "\n" in val or "\r" in val):
            raise UserError(f"key {key}.{k}: the value contains a NUL byte or a line break, which cannot be passed "
                            "to a container", where=where, fix="put multi-line data in a file in the project and read it")
        out[k] = str(val)
    return tuple(sorted(out.items()))


#: Where a mount may not go inside the container (envman's own mounts, and the kernel's).
_RESERVED_TARGETS = ("/", WORKSPACE, CONTAINER_HOME, "/proc", "/sys", "/dev")


def parse_mount(text: Any, *, base: Path | None, where: str, key: str = "mounts",
                from_file: bool = True, allow_dangerous: bool = False) -> Mount:
    """``SOURCE:TARGET[:ro|:rw]``; SOURCE may start with ``~`` (your own home) or, with ``base``
    (the project root), be relative to it, and must then resolve inside it.

    Sources that :func:`envman.project.policy.forbidden_reason` protects (engine sockets, system
    directories, homes, credentials, and their parents) are refused from every file
    (``from_file``); on the command line only with ``allow_dangerous`` (``--allow-dangerous-mount``).
    """
    from envman.project.policy import expand_user, forbidden_reason, inside_root

    if not isinstance(text, str):
        raise type_error(key, '"SOURCE:TARGET[:ro]"', text, where)
    if any(c in text for c in "\0\n\r") or len(text) > 4096:
        raise type_error(key, '"SOURCE:TARGET[:ro]" without NUL bytes or line breaks, at most 4096 characters',
                          text[:200], where)
    parts = text.split(":")
    read_only = False
    if len(parts) == 3 and parts[2] in ("ro", "rw"):
        read_only = parts.pop() == "ro"
    if len(parts) != 2 or not parts[0] or not parts[1]:
        raise type_error(key, '"SOURCE:TARGET[:ro]" (no ":" inside the paths)', text, where)
    src, dst = parts
    try:
        src = expand_user(src)
    except ValueError as exc:
        raise type_error(key, str(exc), text, where) from None
    src_path = Path(src)
    relative = not src_path.is_absolute()
    if relative:
        if base is None:
            raise type_error(key, "an absolute source path (or one starting with ~)", text, where)
        src_path = base / src_path
        if not inside_root(str(src_path), base):
            raise UserError(f"key {key}: the relative source of {text!r} resolves to {os.path.realpath(src_path)}, "
                            f"outside the project root {os.path.realpath(base)}", where=where,
                            fix="relative sources must stay inside the project (no .. or symlinks leading out)")
    target = os.path.normpath(dst)
    if not dst.startswith("/") or target in _RESERVED_TARGETS or target.startswith(("/proc/", "/sys/", "/dev/")) \
            or target.startswith("//"):
        raise type_error(key, f"an absolute target other than {', '.join(_RESERVED_TARGETS)}", text, where)
    source = os.path.normpath(src_path)
    if not (from_file is False and allow_dangerous):
        why = forbidden_reason(source)
        if why:
            fix = ("no file may mount it, trusted or not; if you really mean it, pass it yourself: "
                   "envman run --mount SOURCE:TARGET --allow-dangerous-mount") if from_file else \
                "add --allow-dangerous-mount if you really mean to give the container this path"
            raise UserError(f"{'' if key == where else f'key {key}: '}{text!r} is refused: {why}", where=where, fix=fix)
    return Mount(source, target, read_only)


def parse_port(v: Any, *, where: str, key: str = "ports") -> Port:
    def port(x: Any) -> int:
        if isinstance(x, bool):
            raise ValueError
        n = int(x)
        if not 1 <= n <= 65535 or (isinstance(x, str) and not (x.isascii() and x.isdigit())):
            raise ValueError
        return n

    try:
        if isinstance(v, int):
            return Port(port(v), port(v))
        if isinstance(v, str):
            h, sep, c = v.partition(":")
            return Port(port(h), port(c)) if sep else Port(port(h), port(h))
    except ValueError:
        pass
    raise type_error(key, 'ports 1-65535: 8888 or "HOST:CONTAINER" such as "8080:80"', v, where)


def find_project_file(start: str | os.PathLike[str] | None = None) -> Path | None:
    """The nearest ``envman.toml`` in ``start`` (default: the current directory) or its parents.

    Walking up stops at the first ``envman.toml`` found; one that someone else could have put
    there or could change (:func:`unsafe_reason`) is refused with a ``UserError`` instead of
    used: name it explicitly once you have read and trusted it."""
    cur = Path(start if start is not None else os.getcwd()).absolute()
    for d in (cur, *cur.parents):
        f = d / PROJECT_FILE
        if os.path.lexists(f):
            why = unsafe_reason(f)
            if why:
                raise UserError(f"found walking up from {cur}, but {why}; it was not used", where=str(f),
                                fix=f"read it, then name it explicitly and trust it (envman project trust {f}), "
                                    "or create your own envman.toml nearer")
            return f
    return None


def _trusted_owners() -> set[int]:
    """Owners whose files count as the user's own: the user; for root, also the user ``sudo``
    came from (git does the same)."""
    uid = os.getuid()
    owners = {uid}
    if uid == 0:
        sudo = os.environ.get("SUDO_UID", "")
        if sudo.isascii() and sudo.isdigit():
            owners.add(int(sudo))
    return owners


def unsafe_reason(file: str | os.PathLike[str]) -> str | None:
    """Why a project file found by walking up cannot be taken as the user's own, or ``None``.

    git's rule, applied to the file and (after resolving symlinks) to its directory: the file is
    owned by the invoking user (for root: root or ``SUDO_UID``) and writable by no one else, and
    its directory is owned by the user or root and writable by no one else unless it has the
    sticky bit (as /tmp does: then others cannot replace a file they do not own). Root-owned
    files are not taken for a non-root user either: name them explicitly after trusting them."""
    owners = _trusted_owners()
    real = os.path.realpath(file)
    try:
        st = os.stat(real)
    except OSError as exc:
        return f"it cannot be read ({exc.strerror})"
    if not _stat.S_ISREG(st.st_mode):
        return "it is not a regular file"
    if st.st_uid not in owners:
        return f"it belongs to {_user_name(st.st_uid)}, not to you"
    if st.st_mode & 0o022:
        return "others can write it (group/world-writable)"
    for d in {os.path.dirname(os.path.abspath(file)), os.path.dirname(real)}:
        try:
            dst = os.stat(d)
        except OSError as exc:
            return f"its directory {d} cannot be checked ({exc.strerror})"
        if dst.st_uid not in owners | {0}:
            return f"its directory {d} belongs to {_user_name(dst.st_uid)}"
        if dst.st_mode & 0o022 and not dst.st_mode & _stat.S_ISVTX:
            return f"others can write its directory {d} (group/world-writable, no sticky bit)"
    return None


def _user_name(uid: int) -> str:
    try:
        import pwd

        return f"user {pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (KeyError, ImportError):
        return f"uid {uid}"


