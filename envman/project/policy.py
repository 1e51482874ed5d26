"""What a bind mount may expose: the paths no file may ever mount, trusted or not.

A mount source is *forbidden* when its real path (symlinks resolved) is one of the protected
paths, lies inside one, or is a parent of one:

* the host's system directories: ``/`` (the parent of everything), ``/etc``, ``/proc``, ``/sys``,
  ``/dev``, ``/boot``, ``/run``, ``/var/run``, ``/root``, and the engines' own storage
  (``/var/lib/docker``, ``/var/lib/containers``, ``/var/lib/containerd``);
* container engine sockets, by name (``docker.sock``, ``podman.sock``, ``containerd.sock``,
  ...), by type (any Unix socket, and a folder with a Unix socket anywhere in it: an ssh agent,
  an X server) and by location (``DOCKER_HOST`` / ``CONTAINER_HOST``, the folder of
  ``SSH_AUTH_SOCK``, and a directory that holds an engine socket);
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

import functools
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

#: Host directories a container must never get: the system's configuration and its kernel
#: interfaces, the directories whose executables or libraries every process loads, the places
#: cron and the engines keep what they run (whoever writes them runs code as root), and root's home.
SYSTEM_PATHS = (
    "/etc", "/proc", "/sys", "/dev", "/boot", "/run", "/var/run", "/root",
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
    "/var/spool/cron", "/var/lib/sss",
    "/var/lib/docker", "/var/lib/containers", "/var/lib/containerd", "/var/lib/kubelet", "/var/lib/buildkit",
    "/var/lib/lxc", "/var/lib/lxd", "/var/lib/incus", "/var/lib/rancher", "/var/lib/cni", "/var/snap/docker",
    "/var/snap/lxd", "/var/lib/snapd",
)
#: Socket file names of container engines and their helpers.
ENGINE_SOCKET_NAMES = (
    "docker.sock", "podman.sock", "containerd.sock", "dockershim.sock", "crio.sock", "cri-dockerd.sock",
    "buildkitd.sock", "io.podman", "docker",
)
#: What a login or interactive shell reads when it starts (bash(1) INVOCATION, zsh(1) STARTUP/
#: SHUTDOWN FILES, fish's ~/.config/fish, csh/tcsh, ksh/mksh, readline, PAM's and systemd's user
#: environment, X session scripts), the directories a default PATH puts first (Debian's
#: ~/.profile adds ~/bin and ~/.local/bin) and Python's user site (any ``.pth`` file there runs
#: at every interpreter start): writing any of them runs code as the user at their next login,
#: shell or ``python``. Relative to a home directory.
STARTUP_NAMES = (
    ".profile", ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".bash_aliases", ".inputrc",
    ".zshenv", ".zprofile", ".zshrc", ".zlogin", ".zlogout", ".zsh", ".oh-my-zsh", ".config/zsh",
    ".config/fish", ".local/share/fish", ".xonshrc", ".config/xonsh", ".config/nushell", ".elvish",
    ".config/elvish", ".config/powershell", ".cshrc", ".tcshrc", ".login", ".logout", ".kshrc", ".mkshrc",
    ".pam_environment", ".config/environment.d", ".xprofile", ".xinitrc", ".xsession", ".xsessionrc",
    ".config/autostart", ".config/systemd", ".config/user-dirs.dirs",
    "bin", ".local/bin", ".local/lib", ".pythonrc", ".pythonstartup", ".ipython", ".jupyter",
    ".vimrc", ".vim", ".config/nvim", ".emacs", ".emacs.d", ".tmux.conf", ".screenrc",
    ".gitconfig", ".config/git", ".config/pip", ".pip", ".condarc",
    # tools a shell start-up file runs or puts first on PATH (conda init, nvm, pyenv, rustup),
    # their configs that redirect package installs, and editor servers run at the next connect
    ".config/uv", ".pydistutils.cfg", ".config/pypoetry", ".local/share/jupyter",
    "miniconda3", "anaconda3", "miniforge3", "mambaforge", ".conda", ".nvm", ".pyenv", ".cargo/bin", ".cargo/env",
    ".rustup", ".vscode-server", ".cursor-server",
)
#: Where tools keep credentials (keys, tokens, passwords, cookies, shell histories that hold
#: them) and where rootless engines keep their storage, relative to a home directory.
CREDENTIAL_NAMES = (
    ".ssh", ".gnupg", ".aws", ".azure", ".docker", ".kube", ".netrc", ".git-credentials",
    ".pypirc", ".npmrc", ".yarnrc", ".yarnrc.yml", ".cargo/credentials", ".cargo/credentials.toml", ".m2/settings.xml",
    ".gradle/gradle.properties", ".vault-token", ".password-store", ".terraform.d", ".oci", ".huggingface",
    ".cache/huggingface/token", ".cache/huggingface/stored_tokens", ".kaggle", ".databrickscfg", ".s3cfg", ".boto",
    ".mc", ".pgpass", ".my.cnf", ".wandb", ".config/wandb", ".streamlit/credentials.toml", ".singularity",
    ".apptainer", ".config/enroot", ".config/gcloud", ".config/gh", ".config/glab-cli", ".config/hub",
    ".config/helm", ".config/doctl", ".config/openstack", ".config/hcloud", ".terraformrc", ".ibmcloud",
    ".aliyun", ".config/containers", ".local/share/containers", ".config/rclone", ".config/op",
    ".config/envman", ".local/share/keyrings", ".local/share/envman", ".local/state/envman", ".cache/envman",
    ".mozilla", ".config/google-chrome", ".config/chromium", ".bash_history", ".zsh_history", ".python_history",
    ".psql_history", ".mysql_history", ".sqlite_history", ".node_repl_history", ".lesshst",
    ".histfile", ".zhistory", ".local/share/docker", ".config/docker", ".Xauthority", ".ICEauthority",
    ".config/kaggle", ".config/sops", ".ollama", ".gem/credentials", ".comet.config", ".clearml.conf",
    ".modal.toml", ".claude", ".codex",
)
#: Every path under a home directory that no file may mount.
HOME_NAMES = STARTUP_NAMES + CREDENTIAL_NAMES
#: At most this many entries are looked at for hard links: in your protected folders together
#: (to learn the inodes of their files) and in a mounted folder (to find a link to one of them).
HARDLINK_SCAN_LIMIT = 5000
CREDENTIALS = "a credentials file or folder"


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
        out += [Protected(os.path.join(h, c), "a file a shell or a tool runs at start-up") for c in STARTUP_NAMES]
        out += [Protected(os.path.join(h, c), CREDENTIALS) for c in CREDENTIAL_NAMES]
    for var in ("DOCKER_HOST", "CONTAINER_HOST"):
        v = env.get(var, "")
        if v.startswith("unix://"):
            out.append(Protected(v[len("unix://"):], "the container engine's socket"))
    for d in (env.get("XDG_RUNTIME_DIR"),):
        if d:
            out.append(Protected(d, "the user's runtime directory (engine sockets)"))
    agent = env.get("SSH_AUTH_SOCK", "")
    if agent.startswith("/"):
        out.append(Protected(os.path.dirname(agent) if os.path.dirname(agent) != "/" else agent,
                             "the folder of your ssh agent's socket (it signs as you)"))
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


@dataclass(frozen=True)
class _Entry:
    p: Protected
    real: str  # its real path
    ident: tuple[int, int] | None  # (device, inode) when it exists
    chain: frozenset[str]  # its real path and every parent
    chain_ids: frozenset[tuple[int, int]]


@dataclass(frozen=True)
class Policy:
    """The protected paths, resolved once: each check of a mount is then a few set lookups,
    so a file with thousands of mounts is checked in time linear in their number."""

    entries: tuple[_Entry, ...]
    #: What the scan of a mounted folder found, by its real path (a file that mounts one folder
    #: many times costs one scan).
    scans: dict[str, str | None]
    #: The real path of the folder whose protected entries are scanned for :attr:`file_ids`.
    home: str = "/"

    @classmethod
    def of(cls, protected: Iterable[Protected], home: str | None = None) -> Policy:
        """``home``: the folder whose protected entries are scanned for the inodes of their files
        (default: the invoking user's; only you can hard-link your own files, as Linux's
        ``fs.protected_hardlinks`` keeps others from linking files they cannot read and write)."""
        entries = []
        ids: dict[str, tuple[int, int] | None] = {}  # the entries share most parents (a home, /)

        def ident(path: str) -> tuple[int, int] | None:
            if path not in ids:
                ids[path] = _ident(path)
            return ids[path]

        for p in protected:
            real = os.path.realpath(p.path)
            chain = _chain(real)
            entries.append(_Entry(p, real, ident(real), frozenset(chain),
                                  frozenset(i for i in map(ident, chain) if i is not None)))
        return cls(tuple(entries), {}, os.path.realpath(home or os.path.expanduser("~")))

    @functools.cached_property
    def file_ids(self) -> dict[tuple[int, int], str]:
        """(device, inode) of every regular file inside a protected folder of :attr:`home`, for
        hard links to them. Scanned on first use: only a mount that holds a file with more than
        one link asks (most runs mount no such file, and the scan of a large home folder is the
        larger part of a run's own work)."""
        file_ids: dict[tuple[int, int], str] = {}
        budgets: dict[str, list[int]] = {}
        # credentials first, and each kind of protected path with its own budget: a large
        # ~/.local/lib (pip install --user) never uses up the scan of ~/.ssh
        for e in sorted(self.entries, key=lambda e: e.p.why != CREDENTIALS):
            if e.p.contents and e.p.why != "a host system directory" and e.real.startswith(self.home + "/"):
                _file_ids(e.real, file_ids, budgets.setdefault(e.p.why, [HARDLINK_SCAN_LIMIT]))
        return file_ids


def _file_ids(real: str, out: dict[tuple[int, int], str], budget: list[int]) -> None:
    """Add the (device, inode) of the regular files at or under ``real``; ``budget`` bounds the
    entries looked at over all calls."""
    stack = [real]
    while stack and budget[0] > 0:
        path = stack.pop()
        try:
            st = os.lstat(path)
        except (OSError, ValueError):
            continue
        budget[0] -= 1
        if stat.S_ISREG(st.st_mode):
            out.setdefault((st.st_dev, st.st_ino), path)
        elif stat.S_ISDIR(st.st_mode):
            try:
                with os.scandir(path) as it:
                    stack.extend(e.path for e in it)
            except OSError:
                continue


def _policy_key(environ: Mapping[str, str]) -> tuple[str, ...]:
    from envman.paths import config_dir, state_dir

    return (os.path.expanduser("~"), environ.get("DOCKER_HOST", ""), environ.get("CONTAINER_HOST", ""),
            environ.get("XDG_RUNTIME_DIR", ""), environ.get("SSH_AUTH_SOCK", ""), str(config_dir()), str(state_dir()))


_CACHE: dict[tuple[str, ...], Policy] = {}


def current_policy() -> Policy:
    """The policy for this process's environment (resolved once per environment)."""
    key = _policy_key(os.environ)
    pol = _CACHE.get(key)
    if pol is None:
        _CACHE.clear()
        pol = _CACHE[key] = Policy.of(protected_paths())
    return pol


def _inside_folder(real: str, st: os.stat_result, policy: Policy) -> str | None:
    """What makes ``real`` unsafe to mount for what lies in it, or ``None``: a file that is a
    hard link to a protected file, or (for a folder) a Unix socket anywhere in it (an ssh agent,
    an X server, an engine) or a hard link to a protected file in it. A folder is looked at
    breadth first, :data:`HARDLINK_SCAN_LIMIT` entries at most, once per real path."""
    if stat.S_ISREG(st.st_mode):
        if st.st_nlink > 1 and (st.st_dev, st.st_ino) in policy.file_ids:
            return f"is or holds a hard link to a protected file ({policy.file_ids[(st.st_dev, st.st_ino)]})"
        return None
    if not stat.S_ISDIR(st.st_mode):
        return None
    if real in policy.scans:
        return policy.scans[real]
    from collections import deque

    sock = _engine_socket_inside(real)  # by name too (a symlink called docker.sock)
    found = f"holds a container engine socket ({sock})" if sock else None
    seen = 0
    queue = deque([real])
    while queue and seen < HARDLINK_SCAN_LIMIT and found is None:
        try:
            with os.scandir(queue.popleft()) as it:
                for e in it:
                    seen += 1
                    try:
                        if e.is_dir(follow_symlinks=False):
                            queue.append(e.path)
                            continue
                        if e.is_symlink():
                            continue
                        est = e.stat(follow_symlinks=False)
                        if stat.S_ISSOCK(est.st_mode):
                            found = f"holds a Unix socket ({e.path}): an agent, a display or an engine answers there"
                            break
                        if (stat.S_ISREG(est.st_mode) and est.st_nlink > 1
                                and (est.st_dev, est.st_ino) in policy.file_ids):
                            found = ("is or holds a hard link to a protected file "
                                     f"({e.path} → {policy.file_ids[(est.st_dev, est.st_ino)]})")
                            break
                    except OSError:
                        continue
        except OSError:
            continue
    policy.scans[real] = found
    return found


def forbidden_reason(source: str, protected: Iterable[Protected] | Policy | None = None) -> str | None:
    """Why ``source`` (an absolute host path) may not be mounted from a file, or ``None``."""
    real = os.path.realpath(source)
    if protected is None:
        pol = current_policy()
    elif isinstance(protected, Policy):
        pol = protected
    else:
        pol = Policy.of(protected)
    name = os.path.basename(real)
    try:
        st = os.stat(real)
    except (OSError, ValueError):
        st = None
    if st is not None and stat.S_ISSOCK(st.st_mode):
        return f"{real} is a Unix socket (container engine sockets give root on the host)"
    if name.endswith(".sock"):  # every socket file name of ENGINE_SOCKET_NAMES (the last two name folders)
        return f"{real} is named like a container engine socket"
    chain = _chain(real)
    chain_set = frozenset(chain)
    chain_ids = {i for i in map(_ident, chain) if i is not None}
    own = (st.st_dev, st.st_ino) if st is not None else None
    for e in pol.entries:
        p = e.p
        if e.real == real or (e.ident is not None and e.ident == own):
            return f"{real} is {p.why} ({p.path})"
        # inside a protected path
        if p.contents and (e.real in chain_set or (e.ident is not None and e.ident in chain_ids)):
            return f"{real} lies inside {p.why} ({p.path})"
        # a parent of a protected path
        if real in e.chain or (own is not None and own in e.chain_ids):
            return f"{real} contains {p.why} ({p.path})"
    inside = _inside_folder(real, st, pol) if st is not None else None
    return f"{real} {inside}" if inside else None


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
