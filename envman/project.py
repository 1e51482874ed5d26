"""Projects: a directory bound to a stack by its ``envman.toml``, and the user's registry of them.

* ``envman.toml`` sits at the project root and is found by walking up from the current
  directory. It is validated strictly: an unknown key or a wrong type is one ``UserError`` line
  naming the file, the key and what was expected.
* Settings come from, in order of precedence: the command line, the project file, the user
  config (``<config dir>/config.toml``, tables ``[run]`` and ``[project]``), then envman's
  defaults (:func:`merge_settings`, a pure function).
* The registry (``<config dir>/projects.json``) maps project names to roots so that
  ``envman run NAME`` works from anywhere. Every change is a read-modify-write under a file
  lock, written with :func:`envman.state.atomic_write` (temp file, fsync, rename): a reader, or an
  envman killed at any moment, sees the old registry or the new one, never half of one.
* A project with apt packages or Python requirements gets its own image, built ``FROM`` the
  stack's promoted image and tagged by content (:func:`project_image_ref`); a project without
  them runs the stack's image itself and adds no image at all.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping

from .errors import UserError
from .paths import config_dir, state_dir

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PROJECT_FILE = "envman.toml"
REGISTRY_FILE = "projects.json"
USER_CONFIG_FILE = "config.toml"
#: Where the project root is mounted, and the working directory of every run.
WORKSPACE = "/workspace"
#: The HOME of every run (the stack image sets ``HOME`` to it); a per-project host directory is
#: mounted there so ``pip install --user`` and dotfiles persist between runs.
CONTAINER_HOME = "/home/envman"
#: The venv of stack images (``--system-site-packages``, so ``pip install --user`` works).
VENV_PYTHON = "/opt/venv/bin/python"
#: Bump when the project image recipe changes: every project image is then rebuilt once.
PROJECT_RECIPE = "1"
#: envman's default /dev/shm: PyTorch DataLoader workers pass batches through it, and Docker's
#: own 64 MB default makes them die with "bus error". Never more than half the host's RAM.
DEFAULT_SHM_BYTES = 8 * 1024**3

# Patterns as text: ``re`` compiles (and caches) one the first time it is used, so a run pays
# only for the checks its project file needs.
NAME_RE = r"^[a-z0-9][a-z0-9_.-]{0,62}$"
_ENV_KEY_RE = r"^[A-Za-z_][A-Za-z0-9_]{0,254}$"
_APT_RE = r"^[a-z0-9][a-z0-9+.-]+(=[A-Za-z0-9.+:~_-]+)?$"
_SHM_RE = r"(?i)^\d+(?:[kmgt](?:i?b)?|b)?$"
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
}
USER_RUN_KEYS = ("gpus", "shm_size", "environment", "mounts")
USER_PROJECT_KEYS = ("stack",)


# --------------------------------------------------------------------------- value types


@dataclass(frozen=True)
class Mount:
    source: str  # absolute host path
    target: str  # absolute container path
    read_only: bool = False


@dataclass(frozen=True)
class Port:
    host: int
    container: int


@dataclass(frozen=True)
class GpuRequest:
    """What a run asks for: every GPU, a count, or explicit device indexes / UUIDs."""

    kind: str  # all | count | devices
    count: int | None = None
    devices: tuple[str, ...] = ()

    def __str__(self) -> str:
        if self.kind == "all":
            return "all"
        if self.kind == "count":
            return str(self.count)
        return "device=" + ",".join(self.devices)


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
    if v.isdigit():
        return GpuRequest("count", count=int(v))
    if v.startswith("device="):
        ids = tuple(x.strip() for x in value.strip()[len("device="):].split(","))
        if ids and all(x and re.match(_GPU_DEVICE_RE, x) for x in ids):
            return GpuRequest("devices", devices=ids)
    raise bad


def shm_bytes(text: str) -> int:
    m = re.fullmatch(r"(\d+)([kmgt]?)(?:i?b)?", text.strip().lower())
    if not m:
        return int(text)
    return int(m.group(1)) * 1024 ** " kmgt".index(m.group(2) or " ")


def default_shm_size(total_ram: int | None = None) -> str:
    """8 GiB, or half the host's RAM when that is less (documented in the README)."""
    if total_ram is None:
        try:
            total_ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
            total_ram = 2 * DEFAULT_SHM_BYTES
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
            "environment": dict(self.environment),
            "mounts": [mount_text(m) for m in self.mounts],
            "ports": [f"{p.host}:{p.container}" for p in self.ports],
            "needs_image": self.needs_image,
        }


def mount_text(m: Mount) -> str:
    return f"{m.source}:{m.target}" + (":ro" if m.read_only else "")


def _type_error(key: str, expected: str, value: Any, where: str, fix: str | None = None) -> UserError:
    return UserError(f"key {key}: expected {expected}, got {value!r}", where=where, fix=fix)


def _str_list(doc: Mapping[str, Any], key: str, where: str) -> list[str]:
    v = doc[key]
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise _type_error(key, "a list of strings", v, where)
    return v


def default_name(root: Path) -> str:
    """A registry-safe name from a directory name: ``My Project`` → ``my-project``."""
    n = re.sub(r"[^a-z0-9_.-]+", "-", root.name.lower()).strip("-._")
    return n[:63]


def project_identity(name: str, root: str | os.PathLike[str]) -> str:
    import hashlib  # not at module level: `envman run` imports this module on its hot path

    real = os.path.realpath(root)
    return f"{name}-{hashlib.sha256(real.encode('utf-8', 'surrogateescape')).hexdigest()[:12]}"


def _project_file_path(path: str | os.PathLike[str]) -> Path:
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
    from .safefile import load_toml
    from .trust import digest

    file = _project_file_path(path)
    where = str(file)
    try:
        doc, data = load_toml(file, what="project file")
    except FileNotFoundError:
        raise UserError("no such project file", where=where,
                        fix="create one with `envman project init --env STACK` in the project's root") from None
    return replace(parse_project(doc, file), digest=digest(data))


def parse_project(doc: Mapping[str, Any], file: Path) -> ProjectConfig:
    where = str(file)
    root = file.parent
    unknown = sorted(set(doc) - set(PROJECT_KEYS))
    if unknown:
        raise UserError(f"unknown key {unknown[0]}", where=where, fix="known keys: " + ", ".join(PROJECT_KEYS))

    if "name" in doc:
        name = doc["name"]
        if not isinstance(name, str) or not re.match(NAME_RE, name):
            raise _type_error("name", "1-63 lowercase letters, digits or ._- (starting with a letter or digit)", name, where)
    else:
        name = default_name(root)
        if not re.match(NAME_RE, name):
            raise UserError(f"the directory name {root.name!r} makes no valid project name", where=where,
                            fix='add name = "my-project" to the file')

    stack = None
    if "stack" in doc:
        stack = doc["stack"]
        if not isinstance(stack, str):
            raise _type_error("stack", 'a stack name such as "torch-2.4-cuda12"', stack, where)
        check_stack_name(stack, where=where)

    requirements, req_source = "", None
    if "requirements" in doc:
        v = doc["requirements"]
        if isinstance(v, str):
            requirements = read_requirements(root, v, where=where)
            req_source = v
        elif isinstance(v, list) and all(isinstance(x, str) for x in v):
            for x in v:
                if "\n" in x or not x.strip():
                    raise _type_error("requirements", "one requirement per list item", x, where)
            requirements = "".join(x.strip() + "\n" for x in v)
        else:
            raise _type_error("requirements", PROJECT_KEYS["requirements"], v, where)
        check_requirements(requirements, where=f"{where}: requirements" + (f" ({req_source})" if req_source else ""))

    apt: tuple[str, ...] = ()
    if "apt" in doc:
        pkgs = _str_list(doc, "apt", where)
        for p in pkgs:
            if not re.match(_APT_RE, p):
                raise _type_error("apt", "Debian package names (optionally name=version)", p, where)
        apt = tuple(sorted(set(pkgs)))

    command: tuple[str, ...] = ()
    if "command" in doc:
        v = doc["command"]
        if isinstance(v, str):
            try:
                command = tuple(shlex.split(v))
            except ValueError as exc:
                raise _type_error("command", f"a shell-like command line ({exc})", v, where) from None
        elif isinstance(v, list) and all(isinstance(x, str) for x in v):
            command = tuple(v)
        else:
            raise _type_error("command", PROJECT_KEYS["command"], v, where)
        if any("\0" in x for x in command):
            raise _type_error("command", "words without NUL bytes", v, where)
        if not command:
            raise _type_error("command", "a non-empty command", v, where)

    gpus, gpus_set = None, False
    if "gpus" in doc:
        gpus, gpus_set = parse_gpus(doc["gpus"], where=where), True

    shm = None
    if "shm_size" in doc:
        shm = check_shm(doc["shm_size"], where=where)

    environment = parse_environment(doc["environment"], where=where) if "environment" in doc else ()
    mounts = tuple(parse_mount(m, base=root, where=where) for m in _str_list(doc, "mounts", where)) if "mounts" in doc else ()

    ports: list[Port] = []
    if "ports" in doc:
        if not isinstance(doc["ports"], list):
            raise _type_error("ports", PROJECT_KEYS["ports"], doc["ports"], where)
        ports = [parse_port(p, where=where) for p in doc["ports"]]

    return ProjectConfig(
        name=name, root=root, file=file, stack=stack, requirements=requirements, requirements_source=req_source,
        apt=apt, command=command, gpus=gpus, gpus_set=gpus_set, shm_size=shm, environment=environment,
        mounts=mounts, ports=tuple(ports),
    )


def read_requirements(root: Path, rel: str, *, where: str) -> str:
    """The text of a requirements file named in a project file: a regular UTF-8 file of at most
    1 MiB whose real path lies inside the project root (no absolute path, ``..`` or symlink
    leading out, never a FIFO or a device)."""
    from .safefile import read_text

    bad = UserError(f"key requirements: {rel!r} must be a file inside the project", where=where,
                    fix="give a path relative to the project root, or a list of requirements")
    if not rel or "\0" in rel or os.path.isabs(rel) or rel.startswith("~") or len(rel) > 4096:
        raise bad
    try:
        return read_text(root / rel, what="requirements file", inside=root,
                         fix="give a regular UTF-8 file inside the project, or a list of requirements")
    except FileNotFoundError:
        raise UserError(f"key requirements: file {rel!r} not found under {root}", where=where,
                        fix="give a path relative to the project root, or a list of requirements") from None


def check_stack_name(name: str, *, where: str, key: str = "stack") -> None:
    from .errors import ResolveError
    from .stack import parse_name

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
    if isinstance(v, bool) or not isinstance(v, (str, int)) or len(str(v)) > 32 or not re.match(_SHM_RE, str(v)) \
            or shm_bytes(str(v)) <= 0:
        raise _type_error(key, 'a size such as "8g", "512m" or a number of bytes', v, where)
    ram = host_ram()
    if shm_bytes(str(v)) > ram:
        raise _type_error(key, f"at most this host's RAM ({ram // 1024**2} MiB)", v, where, fix='e.g. "8g"')
    return str(v).lower()


def check_requirements(text: str, *, where: str) -> None:
    """Requirements go into the image build as one file: nothing may point outside it."""
    for line in text.splitlines():
        s = line.split(" #", 1)[0].strip()
        if not s or s.startswith("#"):
            continue
        low = s.lower()
        if re.match(r"^(-r|-c|-e|--requirement|--constraint|--editable)\b", low):
            raise UserError(f"{s!r}: other files and editable installs cannot be used in the image",
                            where=where, fix="inline the requirements; install the project itself at run time (pip install --user -e .)")
        if low.startswith(("./", "../", "/", "~", "file:")) or low == ".":
            raise UserError(f"{s!r}: a local path is not available inside the image build", where=where,
                            fix="use a package name or URL; install local code at run time from /workspace")


def parse_environment(v: Any, *, where: str, key: str = "environment") -> tuple[tuple[str, str], ...]:
    if not isinstance(v, dict):
        raise _type_error(key, "a table of NAME = value", v, where, fix=f"e.g. [{key}] then WANDB_MODE = \"offline\"")
    out = {}
    for k, val in v.items():
        if not re.match(_ENV_KEY_RE, k):
            raise _type_error(f"{key}.{k}", "a variable name (letters, digits, _)", k, where)
        if isinstance(val, bool) or not isinstance(val, (str, int, float)):
            raise _type_error(f"{key}.{k}", "a string or a number", val, where)
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

    Sources that :func:`envman.policy.forbidden_reason` protects (engine sockets, system
    directories, homes, credentials, and their parents) are refused from every file
    (``from_file``); on the command line only with ``allow_dangerous`` (``--allow-dangerous-mount``).
    """
    from .policy import expand_user, forbidden_reason, inside_root

    if not isinstance(text, str):
        raise _type_error(key, '"SOURCE:TARGET[:ro]"', text, where)
    if any(c in text for c in "\0\n\r") or len(text) > 4096:
        raise _type_error(key, '"SOURCE:TARGET[:ro]" without NUL bytes or line breaks, at most 4096 characters',
                          text[:200], where)
    parts = text.split(":")
    mode = "rw"
    if len(parts) == 3 and parts[2] in ("ro", "rw"):
        mode = parts.pop()
    if len(parts) != 2 or not parts[0] or not parts[1]:
        raise _type_error(key, '"SOURCE:TARGET[:ro]" (no ":" inside the paths)', text, where)
    src, dst = parts
    try:
        src = expand_user(src)
    except ValueError as exc:
        raise _type_error(key, str(exc), text, where) from None
    src_path = Path(src)
    relative = not src_path.is_absolute()
    if relative:
        if base is None:
            raise _type_error(key, "an absolute source path (or one starting with ~)", text, where)
        src_path = base / src_path
        if not inside_root(str(src_path), base):
            raise UserError(f"key {key}: the relative source of {text!r} resolves to {os.path.realpath(src_path)}, "
                            f"outside the project root {os.path.realpath(base)}", where=where,
                            fix="relative sources must stay inside the project (no .. or symlinks leading out)")
    target = os.path.normpath(dst)
    if not dst.startswith("/") or target in _RESERVED_TARGETS or target.startswith(("/proc/", "/sys/", "/dev/")) \
            or target.startswith("//"):
        raise _type_error(key, f"an absolute target other than {', '.join(_RESERVED_TARGETS)}", text, where)
    source = os.path.normpath(src_path)
    if not (from_file is False and allow_dangerous):
        why = forbidden_reason(source)
        if why:
            fix = ("no file may mount it, trusted or not; if you really mean it, pass it yourself: "
                   "envman run --mount SOURCE:TARGET --allow-dangerous-mount") if from_file else \
                "add --allow-dangerous-mount if you really mean to give the container this path"
            raise UserError(f"{'' if key == where else f'key {key}: '}{text!r} is refused: {why}", where=where, fix=fix)
    return Mount(source, target, mode == "ro")


def parse_port(v: Any, *, where: str, key: str = "ports") -> Port:
    def port(x: Any) -> int:
        if isinstance(x, bool):
            raise ValueError
        n = int(x)
        if not 1 <= n <= 65535 or (isinstance(x, str) and not x.isdigit()):
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
    raise _type_error(key, 'ports 1-65535: 8888 or "HOST:CONTAINER" such as "8080:80"', v, where)


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
        if sudo.isdigit():
            owners.add(int(sudo))
    return owners


def unsafe_reason(file: str | os.PathLike[str]) -> str | None:
    """Why a project file found by walking up cannot be taken as the user's own, or ``None``.

    git's rule, applied to the file and (after resolving symlinks) to its directory: the file is
    owned by the invoking user (for root: root or ``SUDO_UID``) and writable by no one else, and
    its directory is owned by the user or root and writable by no one else unless it has the
    sticky bit (as /tmp does: then others cannot replace a file they do not own). Root-owned
    files are not taken for a non-root user either: name them explicitly after trusting them."""
    import stat as _stat

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


# --------------------------------------------------------------------------- trust

#: Keys an untrusted project file may use: choosing and building the stack (inside a container,
#: with no host path but the project, no port, no variable and no command of the file's), and
#: asking for less than the defaults (``gpus = "none"``, a ``shm_size`` no larger than the default).
UNTRUSTED_KEYS = ("name", "stack", "requirements", "apt")


def trust_asks(project: ProjectConfig) -> list[str]:
    """What ``project``'s file asks for beyond :data:`UNTRUSTED_KEYS`, one phrase per kind (the
    environment by names only, never values); empty when the file needs no trust."""
    asks = []
    root = os.path.realpath(project.root)
    outside = [m for m in project.mounts if not _inside(m.source, root)]
    inside = [m for m in project.mounts if _inside(m.source, root)]
    if outside:
        asks.append("mounts outside the project: " + ", ".join(mount_text(m) for m in outside))
    if inside:
        asks.append("mounts: " + ", ".join(mount_text(m) for m in inside))
    if project.ports:
        asks.append("ports (127.0.0.1): " + ", ".join(f"{p.host}:{p.container}" for p in project.ports))
    if project.environment:
        asks.append("environment: " + ", ".join(k for k, _ in project.environment))
    if project.command:
        asks.append("command: " + shlex.join(project.command))
    if project.gpus is not None:  # "none" asks for less than the default: no trust needed
        asks.append(f"gpus: {project.gpus}")
    if project.shm_size is not None and shm_bytes(project.shm_size) > shm_bytes(default_shm_size()):
        asks.append(f"shm_size: {project.shm_size} (more than the default {default_shm_size()})")
    return asks


def _inside(path: str, root: str) -> bool:
    from .safefile import is_within

    return is_within(os.path.realpath(path), root)


def require_trust(project: ProjectConfig, *, explicit: bool = True) -> None:
    """Refuse ``project`` unless its file is trusted as it is now, or asks for nothing that needs
    trust and is the user's own (:func:`unsafe_reason`). One line lists every ask and the command
    that trusts the file."""
    from .trust import records

    record = records().get(project.real_file)
    if record is not None and record.get("sha256") == project.digest:
        return
    asks = trust_asks(project)
    foreign = unsafe_reason(project.file)
    if not asks and not foreign:
        return
    what = "; ".join(asks) if asks else "nothing beyond a stack"
    state = "changed since you trusted it" if record is not None else "new to you"
    why = f"it is not trusted ({state}; {foreign}) and asks for {what}" if foreign else \
        f"it is not trusted ({state}) and asks for {what}"
    raise UserError(why, where=str(project.file),
                    fix=f"read it, then trust it: envman project trust {shlex.quote(str(project.file))}")


# --------------------------------------------------------------------------- user config


@dataclass(frozen=True)
class UserConfig:
    """The ``[run]`` and ``[project]`` tables of ``<config dir>/config.toml`` (other tables belong
    to other commands and are left alone)."""

    stack: str | None = None
    gpus: GpuRequest | None = None
    gpus_set: bool = False
    shm_size: str | None = None
    environment: tuple[tuple[str, str], ...] = ()
    mounts: tuple[Mount, ...] = ()
    file: str | None = None


def user_config_path() -> Path:
    return config_dir() / USER_CONFIG_FILE


def load_user_config(path: Path | None = None) -> UserConfig:
    from .safefile import load_toml

    file = path or user_config_path()
    where = str(file)
    try:
        doc, _ = load_toml(file, what="config file")
    except FileNotFoundError:
        return UserConfig()
    cfg = UserConfig(file=where)
    run = doc.get("run", {})
    proj = doc.get("project", {})
    for table, value, keys in (("run", run, USER_RUN_KEYS), ("project", proj, USER_PROJECT_KEYS)):
        if not isinstance(value, dict):
            raise _type_error(table, "a table", value, where)
        unknown = sorted(set(value) - set(keys))
        if unknown:
            raise UserError(f"unknown key {table}.{unknown[0]}", where=where, fix=f"known keys in [{table}]: " + ", ".join(keys))
    if "stack" in proj:
        if not isinstance(proj["stack"], str):
            raise _type_error("project.stack", "a stack name", proj["stack"], where)
        check_stack_name(proj["stack"], where=where, key="project.stack")
        cfg = replace(cfg, stack=proj["stack"])
    if "gpus" in run:
        cfg = replace(cfg, gpus=parse_gpus(run["gpus"], where=where, key="run.gpus"), gpus_set=True)
    if "shm_size" in run:
        cfg = replace(cfg, shm_size=check_shm(run["shm_size"], where=where, key="run.shm_size"))
    if "environment" in run:
        cfg = replace(cfg, environment=parse_environment(run["environment"], where=where, key="run.environment"))
    if "mounts" in run:
        mounts = run["mounts"]
        if not isinstance(mounts, list):
            raise _type_error("run.mounts", "a list of strings", mounts, where)
        cfg = replace(cfg, mounts=tuple(parse_mount(m, base=None, where=where, key="run.mounts") for m in mounts))
    return cfg


# --------------------------------------------------------------------------- precedence


@dataclass(frozen=True)
class CliOverrides:
    """What the command line said; ``None`` / empty means "not given"."""

    stack: str | None = None
    gpus: GpuRequest | None = None
    gpus_set: bool = False  # --gpus given (or --no-gpu, which sets gpus=None)
    shm_size: str | None = None
    environment: tuple[tuple[str, str], ...] = ()
    mounts: tuple[Mount, ...] = ()
    ports: tuple[Port, ...] = ()
    command: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunSettings:
    """The effective settings of one run, each with where it came from (for ``project show``)."""

    stack: str
    gpus: GpuRequest | None
    shm_size: str
    environment: tuple[tuple[str, str], ...]
    mounts: tuple[Mount, ...]
    ports: tuple[Port, ...]
    command: tuple[str, ...]
    origin: tuple[tuple[str, str], ...] = field(default=())  # (setting, "cli" | "project" | "user" | "default")

    def to_json(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "gpus": str(self.gpus) if self.gpus else "none",
            "shm_size": self.shm_size,
            "environment": dict(self.environment),
            "mounts": [mount_text(m) for m in self.mounts],
            "ports": [f"127.0.0.1:{p.host}:{p.container}" for p in self.ports],
            "command": list(self.command),
            "origin": dict(self.origin),
        }


def merge_settings(
    project: ProjectConfig,
    user: UserConfig,
    cli: CliOverrides,
    *,
    stack_is_cpu: Callable[[str], bool] | None = None,
    total_ram: int | None = None,
) -> RunSettings:
    """CLI > project file > user config > defaults, setting by setting.

    Tables and lists add up in the same order (a later source wins per variable / per mount
    target). The GPU default is every GPU for a CUDA stack and none for a CPU stack
    (``stack_is_cpu``); a CPU run of a CUDA stack is always asked for (``--no-gpu``).
    """
    origin: dict[str, str] = {}

    def pick(setting: str, *candidates: tuple[bool, Any, str]) -> Any:
        for present, value, src in candidates:
            if present:
                origin[setting] = src
                return value
        raise AssertionError("the last candidate is always present")  # pragma: no cover

    stack = pick(
        "stack",
        (cli.stack is not None, cli.stack, "cli"),
        (project.stack is not None, project.stack, "project"),
        (user.stack is not None, user.stack, "user"),
        (True, None, "default"),
    )
    if stack is None:
        raise UserError("no stack for this project", where=str(project.file),
                        fix='add stack = "torch-2.4-cuda12" (list them: envman matrix ls), or pass --stack')
    cpu = bool(stack_is_cpu and stack_is_cpu(stack))
    gpus = pick(
        "gpus",
        (cli.gpus_set, cli.gpus, "cli"),
        (project.gpus_set, project.gpus, "project"),
        (user.gpus_set, user.gpus, "user"),
        (True, None if cpu else GpuRequest("all"), "default"),
    )
    shm = pick(
        "shm_size",
        (cli.shm_size is not None, cli.shm_size, "cli"),
        (project.shm_size is not None, project.shm_size, "project"),
        (user.shm_size is not None, user.shm_size, "user"),
        (True, default_shm_size(total_ram), "default"),
    )
    command = pick(
        "command",
        (bool(cli.command), cli.command, "cli"),
        (bool(project.command), project.command, "project"),
        (True, (), "default"),
    )
    env: dict[str, str] = {}
    for src in (user.environment, project.environment, cli.environment):
        env.update(src)
    mounts: dict[str, Mount] = {}
    for src in (user.mounts, project.mounts, cli.mounts):
        mounts.update((m.target, m) for m in src)
    ports: dict[int, Port] = {}
    for src in (project.ports, cli.ports):
        ports.update((p.host, p) for p in src)
    return RunSettings(
        stack=stack, gpus=gpus, shm_size=shm, environment=tuple(sorted(env.items())),
        mounts=tuple(sorted(mounts.values(), key=lambda m: m.target)),
        ports=tuple(sorted(ports.values(), key=lambda p: p.host)), command=tuple(command),
        origin=tuple(sorted(origin.items())),
    )


# --------------------------------------------------------------------------- registry


def registry_path() -> Path:
    return config_dir() / REGISTRY_FILE


def _lock(path: Path):
    from filelock import FileLock

    path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(path.with_name(path.name + ".lock")), timeout=60)


def read_registry(path: Path | None = None) -> dict[str, Path]:
    """Registered projects, name → root. A missing registry is an empty one."""
    from .safefile import read_text

    file = path or registry_path()
    where = str(file)
    fix = "restore it or delete it, then register the projects again with envman project add PATH"
    try:
        raw = read_text(file, what="project registry", limit=16 * 1024 * 1024, fix=fix)
    except FileNotFoundError:
        return {}
    try:
        doc = json.loads(raw)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise UserError(f"not valid JSON ({exc})", where=where, fix=fix) from None
    projects = doc.get("projects") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or doc.get("schema") != 1 or not isinstance(projects, dict):
        raise UserError('expected {"schema": 1, "projects": {NAME: {"root": PATH}}}', where=where, fix=fix)
    out = {}
    for name, entry in projects.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("root"), str):
            raise UserError(f"project {name!r}: expected {{\"root\": PATH}}", where=where, fix=fix)
        out[name] = Path(entry["root"])
    return dict(sorted(out.items()))


def _write_registry(path: Path, projects: Mapping[str, Path]) -> None:
    from .state import atomic_write

    doc = {"schema": 1, "projects": {n: {"root": str(r)} for n, r in sorted(projects.items())}}
    atomic_write(path, json.dumps(doc, indent=2, sort_keys=True) + "\n")


def update_registry(change: Callable[[dict[str, Path]], None], path: Path | None = None) -> dict[str, Path]:
    """Read-modify-write under the registry lock; the write is atomic."""
    file = path or registry_path()
    with _lock(file):
        projects = read_registry(file)
        change(projects)
        _write_registry(file, projects)
        return projects


def register(project: ProjectConfig, path: Path | None = None) -> bool:
    """Register ``project`` under its name; ``False`` when it already was. A name taken by
    another root is an error; a root registered under an older name is renamed."""
    root = project.root.resolve()
    added = []

    def change(projects: dict[str, Path]) -> None:
        other = projects.get(project.name)
        if other is not None and other.resolve() != root:
            raise UserError(
                f"project name {project.name!r} is already registered for {other}",
                where=str(project.file),
                fix=f'set another name = "..." in the file, or remove the old one: envman project rm {project.name}',
            )
        for n in [n for n, r in projects.items() if r.resolve() == root and n != project.name]:
            del projects[n]
        if other is None:
            added.append(project.name)
        projects[project.name] = root

    update_registry(change, path)
    return bool(added)


def unregister(name: str, path: Path | None = None) -> Path:
    removed: list[Path] = []

    def change(projects: dict[str, Path]) -> None:
        if name not in projects:
            raise unknown_project(name, projects)
        removed.append(projects.pop(name))

    update_registry(change, path)
    return removed[0]


def unknown_project(name: str, projects: Mapping[str, Path]) -> UserError:
    import difflib

    close = difflib.get_close_matches(name, list(projects), n=3, cutoff=0.5) if len(name) <= 100 else []
    hint = f"did you mean {', '.join(close)}? " if close else ""
    return UserError(f"no project named {name[:100]!r}", where="project registry",
                     fix=hint + "list them: envman project ls; register one: envman project add PATH")


def lookup(name: str, path: Path | None = None) -> Path:
    projects = read_registry(path)
    if name not in projects:
        raise unknown_project(name, projects)
    return projects[name]


def locate(target: str | None, *, cwd: Path | None = None, path: Path | None = None) -> ProjectConfig:
    """The project for ``envman run TARGET``: a registered name, a path, or (no TARGET) the
    nearest ``envman.toml`` above the current directory."""
    here = Path(cwd or os.getcwd())
    if target is not None and (not target or any(c in target for c in "\0\n\r") or len(target) > 4096):
        raise UserError(f"{target[:80]!r} is neither a project name nor a path", where="envman",
                        fix="name a registered project (envman project ls) or give a path")
    if target is None:
        f = find_project_file(here)
        if f is None:
            raise UserError(f"no {PROJECT_FILE} in {here} or any parent directory", where="envman run",
                            fix="name a registered project (envman project ls), or create one: envman project init --env STACK")
        return load_project(f)
    if "/" in target or target in (".", "..") or target.endswith(PROJECT_FILE):
        return load_project(here / target)
    projects = read_registry(path)
    if target not in projects and (len(target) > 255 or not re.match(NAME_RE, target)) and \
            not os.path.lexists(here / target):
        raise unknown_project(target, projects)
    if target in projects:
        root = projects[target]
        if not (root / PROJECT_FILE).is_file():
            raise UserError(f"project {target!r} is registered at {root}, but {root / PROJECT_FILE} is gone",
                            where="project registry", fix=f"move it back, or envman project rm {target}")
        return load_project(root)
    if (here / target / PROJECT_FILE).is_file():
        return load_project(here / target)
    raise unknown_project(target, projects)


def init_text(stack: str, name: str | None = None) -> str:
    lines = [
        "# envman project file (format: README, Projects); `envman project show` prints the effective settings",
        f'stack = "{stack}"',
    ]
    if name:
        lines.append(f'name = "{name}"')
    lines += [
        "# requirements = \"requirements.txt\"    # or a list: [\"einops==0.8.0\"]; builds a project image",
        "# apt = [\"ffmpeg\"]                     # extra Debian/Ubuntu packages (project image)",
        "# command = [\"python\", \"train.py\"]     # default for `envman run NAME`",
        "# gpus = \"all\"                         # \"all\", \"none\", 2, \"device=0,2\"",
        "# shm_size = \"8g\"",
        "# ports = [8888]                       # published on 127.0.0.1; listen on 0.0.0.0 inside",
        "# mounts = [\"~/datasets:/data:ro\"]",
        "# [environment]",
        "# WANDB_MODE = \"offline\"",
    ]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- project image


def project_repository(project: ProjectConfig) -> str:
    """``envman/project-<name>-<hash of the real root>`` (:attr:`ProjectConfig.identity`)."""
    return f"envman/project-{project.identity}"


def project_dockerfile(project: ProjectConfig, stack_name: str, base_image_id: str, lock: Any = None) -> str:
    """apt layer, then requirements layer, on the stack's promoted image (pinned by id, so the
    tag moving during a build cannot mix two bases). With ``lock`` (an
    ``envman.lockfile.Lock`` that matches), the requirements layer installs exactly its pins
    with ``--require-hashes`` and checks that it names nothing the requirements do not need;
    without, it resolves and leaves pip's install report for the next lock."""
    from .lockfile import REPORT_PATH

    lines = [
        f"# envman project image for {project.name}: stack {stack_name} (envman/{stack_name}:latest). Generated.",
        f"FROM {base_image_id}",
        "USER root",
    ]
    if project.apt:
        lines.append(
            "RUN apt-get update \\\n"
            " && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "
            + " ".join(project.apt)
            + " \\\n && rm -rf /var/lib/apt/lists/*"
        )
    pip = f"{VENV_PYTHON} -m pip install --no-cache-dir --disable-pip-version-check"
    if project.requirements.strip() and lock is not None:
        lines += [
            "COPY requirements.txt envman.lock.txt lockcheck.py /opt/envman/project/",
            f"RUN {pip} --require-hashes -r /opt/envman/project/envman.lock.txt \\\n"
            f" && {VENV_PYTHON} /opt/envman/project/lockcheck.py /opt/envman/project/requirements.txt"
            " /opt/envman/project/envman.lock.txt",
        ]
    elif project.requirements.strip():
        lines += [
            "COPY requirements.txt /opt/envman/project/requirements.txt",
            f"RUN {pip} --report {REPORT_PATH} -r /opt/envman/project/requirements.txt",
        ]
    return "\n".join(lines) + "\n"


def project_lock(project: ProjectConfig, stack_name: str, base_image_id: str) -> Any:
    """The project's ``envman.lock`` when it matches its requirements and this stack image, else
    None (the build re-resolves and rewrites it)."""
    from .lockfile import read_lock, usable

    if not project.requirements.strip():
        return None
    lock = read_lock(project.root)
    return lock if usable(lock, project.requirements, stack_name, base_image_id) else None


def project_context(project: ProjectConfig, stack_name: str, base_image_id: str, *, relock: bool = False) -> dict[str, bytes]:
    """The build context; ``relock`` ignores the project's lock (``envman lock --upgrade``)."""
    from .lockfile import CLOSURE_CHECK

    lock = None if relock else project_lock(project, stack_name, base_image_id)
    files = {"Dockerfile": project_dockerfile(project, stack_name, base_image_id, lock).encode()}
    if project.requirements.strip():
        files["requirements.txt"] = project.requirements.encode()
    if lock is not None:
        files["envman.lock.txt"] = lock.requirements_text().encode()
        files["lockcheck.py"] = CLOSURE_CHECK.encode()
    return files


def project_image_hash(files: Mapping[str, bytes]) -> str:
    import hashlib  # not at module level: `envman run` imports this module on its hot path

    h = hashlib.sha256(f"envman-project-recipe:{PROJECT_RECIPE}\0".encode())
    for name in sorted(files):
        h.update(name.encode() + b"\0" + hashlib.sha256(files[name]).hexdigest().encode() + b"\0")
    return h.hexdigest()


def project_image_ref(project: ProjectConfig, stack_name: str, base_image_id: str, *, relock: bool = False) -> str:
    """``envman/project-<name>:<hash>``: the hash covers the recipe, the base image id, the apt
    packages, the requirements and the lock in use, so any change gives a new tag and an
    unchanged project reuses its image."""
    digest = project_image_hash(project_context(project, stack_name, base_image_id, relock=relock))
    return f"{project_repository(project)}:{digest[:16]}"


def project_labels(project: ProjectConfig, stack_name: str, ref: str) -> dict[str, str]:
    from . import labels
    from .smokestore import current_user

    out = labels.project_labels(project.name, stack_name, ref.rsplit(":", 1)[1], *current_user())
    out["envman.project-id"] = project.identity  # the registered identity (name + real root)
    return out


def project_images_in_use(engine, resolve_name: Callable[[str], Any], registry: Mapping[str, Path] | None = None,
                          user: UserConfig | None = None) -> tuple[set[str], set[str]]:
    """What ``envman prune`` must keep for the registered projects: (the refs of the project images
    they run on now, the names of projects whose image cannot be worked out).

    A project's image is the one its current file, stack and promoted stack image give; older ones
    (other requirements, a re-promoted stack) are no longer used. A project whose file does not
    load, whose stack does not resolve or whose stack image is missing keeps every image it has:
    the user may be halfway through a fix.
    """
    from .errors import EnvmanError
    from .pins import load_pin, project_key
    from .state import stable_ref

    refs: set[str] = set()
    unsure: set[str] = set()
    user = user if user is not None else load_user_config()
    for name, root in (read_registry() if registry is None else registry).items():
        try:
            project = load_project(root)
            settings = merge_settings(project, user, CliOverrides(), stack_is_cpu=lambda s: resolve_name(s).is_cpu)
            stack = resolve_name(settings.stack)
        except EnvmanError:
            unsure.add(name)
            continue
        if not project.needs_image:
            continue
        pin = load_pin(project_key(project.name, str(project.root.resolve())))
        base_ids = {pin.image_id} if pin is not None and pin.stack == stack.name else set()
        base = engine.inspect_image(stable_ref(stack.name))
        if base is not None:
            base_ids.add(str(base["Id"]))
        if not base_ids:
            unsure.add(name)
            continue
        try:
            refs.update(project_image_ref(project, stack.name, b) for b in base_ids)
        except EnvmanError:  # a malformed envman.lock: keep its images until it is fixed
            unsure.add(name)
    return refs, unsure


def build_project_image(engine, project: ProjectConfig, stack_name: str, base_image_id: str, *,
                        on_event: Callable[[Any], None] | None = None, nocache: bool = False, builder=None,
                        relock: bool = False) -> str:
    """Build (or reuse) the project image on ``engine`` (an ``envman.engine.Engine``); its ref.

    A build that resolved the requirements (no matching lock, or ``relock``) writes
    ``envman.lock`` from pip's report and tags the image under the locked ref as well, so the
    next run reuses it. ``builder`` (an ``envman.builder.Builder``) runs the build; by default
    the classic one."""
    from .builder import ClassicBuilder, from_image_id

    from filelock import FileLock

    from .state import locks_dir
    from .engine import deterministic_tar
    from .errors import BuildError

    locks_dir().mkdir(parents=True, exist_ok=True)
    with FileLock(str(locks_dir() / f"project-{project.identity}.lock"), timeout=3600):
        files = project_context(project, stack_name, base_image_id, relock=relock)
        ref = project_image_ref(project, stack_name, base_image_id, relock=relock)
        if not nocache and not relock and engine.inspect_image(ref) is not None:
            return ref
        try:
            run = builder if builder is not None else ClassicBuilder(engine)
            with from_image_id(engine, run, files, base_image_id) as buildable:
                for ev in run.build(deterministic_tar(buildable), ref, labels=project_labels(project, stack_name, ref),
                                    nocache=nocache or relock):
                    if on_event:
                        on_event(ev)
        except BuildError as exc:
            raise BuildError(
                f"project image of {project.name} failed to build: {exc.what}", log_tail=exc.log_tail,
                where=str(project.file), fix="check the apt packages, requirements and envman.lock (log tail above)",
            ) from None
        if project.requirements.strip() and "envman.lock.txt" not in files:
            ref = record_lock(engine, project, stack_name, base_image_id, ref)
    return ref


def record_lock(engine, project: ProjectConfig, stack_name: str, base_image_id: str, ref: str) -> str:
    """Write ``envman.lock`` from the install report inside the freshly built ``ref`` and tag the
    image under the ref the lock gives; that ref."""
    from .errors import BuildError
    from .lockfile import REPORT_PATH, make_lock, pins_from_report, write_lock

    res = engine.run(ref, ["cat", REPORT_PATH], network="none", timeout=120)
    try:
        report = json.loads(res.stdout) if res.exit_code == 0 else None
    except ValueError:
        report = None
    if report is None:
        raise BuildError(f"cannot read pip's install report from {ref}", where=str(project.file),
                         fix="use a stack image whose venv has pip >= 22.2")
    lock = make_lock(stack_name, base_image_id, project.requirements, pins_from_report(report, where=ref))
    try:
        write_lock(project.root, lock)
    except OSError as exc:  # a read-only checkout still builds and runs, without a lock
        print(f"envman: warning: cannot write {project.root / 'envman.lock'}: {exc.strerror or exc}"
              " (the next build resolves the requirements again)", file=sys.stderr)
        return ref
    locked = project_image_ref(project, stack_name, base_image_id)
    engine.tag(ref, locked)
    return locked


def home_dir(project: ProjectConfig) -> Path:
    """The host directory mounted as the container's HOME for this project:
    ``<state dir>/homes/<name>-<hash of the real root>`` (:attr:`ProjectConfig.identity`), never
    a directory picked by the ``name`` a file claims."""
    return state_dir() / "homes" / project.identity


def prepare_home(project: ProjectConfig, registry: Mapping[str, Path] | None = None) -> Path:
    """Create the project's HOME (0700). A registered project whose HOME still has the older
    name-only key (``homes/<name>``) gets it moved to the new one once, so ``pip install
    --user`` and dotfiles survive; only the project registered under that name at this root
    may claim it."""
    from .safefile import private_dir

    home = home_dir(project)
    if not os.path.lexists(home):
        legacy = state_dir() / "homes" / project.name
        if os.path.isdir(legacy) and not os.path.islink(legacy):
            projects = read_registry() if registry is None else registry
            reg = projects.get(project.name)
            if reg is not None and os.path.realpath(reg) == os.path.realpath(project.root):
                private_dir(home.parent)
                os.rename(legacy, home)
    private_dir(home.parent)
    return private_dir(home)
