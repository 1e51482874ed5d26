"""What a bind mount may expose: the paths no file may ever mount, trusted or not.

A mount source is *forbidden* when its real path (symlinks resolved) is one of the protected
paths, lies inside one, or is a parent of one:

* the host's system directories: ``/`` (the parent of everything), ``/etc``, ``/proc``, ``/sys``,
  ``/dev``, ``/boot``, ``/run``, ``/var/run``, ``/root``, and the engines' own storage
  (``/var/lib/docker``, ``/var/lib/containers``, ``/var/lib/containerd``);
* container engine sockets, by name (``docker.sock``, ``podman.sock``, ``containerd.sock``,
  ...), by type (any Unix socket) and by location (``DOCKER_HOST`` / ``CONTAINER_HOST``, and a
  directory that holds an engine socket);
* every home directory itself (the invoking user's ``~`` and each home in the passwd database)
  and the credential folders and files in them (:data:`CREDENTIAL_NAMES`), plus envman's own
  config and state directories (a container that could write the trust store would trust its
  own project file).

Comparisons are made both on real-path strings and on (device, inode) pairs, so a symlink, a
bind mount, a hard link or a different spelling on a case-insensitive file system lands on the
same answer. Only an explicit command-line ``--mount`` together with ``--allow-dangerous-mount``
may name such a path.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

SYSTEM_PATHS = (
    "/etc", "/proc", "/sys", "/dev", "/boot", "/run", "/var/run", "/root",
    "/var/lib/docker", "/var/lib/containers", "/var/lib/containerd", "/var/lib/kubelet",
)
#: Socket file names of container engines and their helpers.
ENGINE_SOCKET_NAMES = (
    "docker.sock", "podman.sock", "containerd.sock", "dockershim.sock", "crio.sock", "cri-dockerd.sock",
    "buildkitd.sock", "io.podman", "docker",
)
#: Credential folders and files, relative to a home directory.
CREDENTIAL_NAMES = (
    ".ssh", ".gnupg", ".aws", ".azure", ".docker", ".kube", ".netrc", ".git-credentials", ".gitconfig",
    ".pypirc", ".npmrc", ".yarnrc", ".cargo/credentials", ".cargo/credentials.toml", ".m2/settings.xml",
    ".vault-token", ".password-store", ".terraform.d", ".oci", ".huggingface", ".cache/huggingface/token",
    ".config/gcloud", ".config/gh", ".config/hub", ".config/containers", ".config/rclone", ".config/git",
    ".config/envman", ".local/share/keyrings", ".local/share/envman", ".local/state/envman",
    ".mozilla", ".config/google-chrome", ".config/chromium", ".bash_history", ".zsh_history",
    ".bashrc", ".profile", ".bash_profile", ".zshrc", ".config/autostart", ".config/systemd",
)


@dataclass(frozen=True)
class Protected:
    path: str  # as written (for the message)
    why: str
    contents: bool = True  # what lies inside is protected too (False for a home: ~/data is fine)


def _homes() -> list[str]:
    homes = {os.path.expanduser("~")}
    try:
        import pwd

        # People's homes (uid 0 and the login range); system accounts' "homes" (/bin, /var/mail)
        # are system directories, and directory services may list thousands of entries.
        homes.update(p.pw_dir for p in pwd.getpwall()
                     if (p.pw_uid == 0 or 1000 <= p.pw_uid < 60000) and p.pw_dir not in ("/", "/nonexistent"))
    except (ImportError, KeyError, OSError):  # pragma: no cover - non-POSIX
        pass
    return sorted(h for h in homes if h and h.startswith("/"))


def protected_paths(environ: Mapping[str, str] | None = None) -> list[Protected]:
    """Every path a file may not mount (nor a parent of it, nor anything inside it)."""
    from envman.paths import config_dir, state_dir

    env = os.environ if environ is None else environ
    out = [Protected(p, "a host system directory") for p in SYSTEM_PATHS]
    for h in _homes():
        out.append(Protected(h, "a home directory", contents=False))
        out += [Protected(os.path.join(h, c), "a credentials file or folder") for c in CREDENTIAL_NAMES]
    for var in ("DOCKER_HOST", "CONTAINER_HOST"):
        v = env.get(var, "")
        if v.startswith("unix://"):
            out.append(Protected(v[len("unix://"):], "the container engine's socket"))
    for d in (env.get("XDG_RUNTIME_DIR"),):
        if d:
            out.append(Protected(d, "the user's runtime directory (engine sockets)"))
    out.append(Protected(str(config_dir()), "envman's own configuration (trust records)"))
    out.append(Protected(str(state_dir()), "envman's own state"))
    return out


def _ident(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino)


def _chain(path: str) -> list[str]:
    """``path`` and each of its parents, up to ``/``."""
    out = [path]
    while True:
        parent = os.path.dirname(out[-1])
        if parent == out[-1]:
            return out
        out.append(parent)


def _engine_socket_inside(directory: str) -> str | None:
    try:
        with os.scandir(directory) as it:
            for e in it:
                try:
                    if e.name in ENGINE_SOCKET_NAMES and stat.S_ISSOCK(e.stat(follow_symlinks=True).st_mode):
                        return e.path
                except OSError:
                    continue
    except OSError:
        return None
    return None


def forbidden_reason(source: str, protected: Iterable[Protected] | None = None) -> str | None:
    """Why ``source`` (an absolute host path) may not be mounted from a file, or ``None``."""
    real = os.path.realpath(source)
    prot = list(protected) if protected is not None else protected_paths()
    name = os.path.basename(real)
    try:
        st = os.stat(real)
    except (OSError, ValueError):
        st = None
    if st is not None and stat.S_ISSOCK(st.st_mode):
        return f"{real} is a Unix socket (container engine sockets give root on the host)"
    if name in ENGINE_SOCKET_NAMES[:-2] or name.endswith(".sock"):
        return f"{real} is named like a container engine socket"
    chain = _chain(real)
    chain_ids = {i for i in map(_ident, chain) if i is not None}
    own = _ident(real)
    for p in prot:
        preal = os.path.realpath(p.path)
        pchain = _chain(preal)
        pid = _ident(preal)
        if preal == real or (pid is not None and pid == own):
            return f"{real} is {p.why} ({p.path})"
        # inside a protected path
        if p.contents and (preal in chain or (pid is not None and pid in chain_ids)):
            return f"{real} is {p.why} ({p.path})" if preal == real else f"{real} lies inside {p.why} ({p.path})"
        # a parent of a protected path
        if real in pchain or (own is not None and own in {i for i in map(_ident, pchain) if i is not None}):
            return f"{real} contains {p.why} ({p.path})"
    if st is not None and stat.S_ISDIR(st.st_mode):
        sock = _engine_socket_inside(real)
        if sock:
            return f"{real} holds a container engine socket ({sock})"
    return None


def expand_user(text: str) -> str:
    """``~`` and ``~/x`` become the invoking user's home; ``~name`` is refused (a file must not
    reach into another user's home by name)."""
    if text == "~" or text.startswith("~/"):
        return os.path.expanduser("~") + text[1:]
    if text.startswith("~"):
        raise ValueError("only ~ or ~/path (your own home) may be used, not ~user")
    return text


def inside_root(source: str, root: str | Path) -> bool:
    """Whether the real path of ``source`` is the project root or inside it."""
    from envman.safefile import is_within

    return is_within(os.path.realpath(source), os.path.realpath(root))
