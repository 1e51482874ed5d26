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

The protected paths inside the homes of other people are resolved only when a mount reaches
into one of those homes (:func:`_made_later` says why no verdict changes), so a policy costs about
the same on a server with a thousand accounts as on a laptop.
"""

from __future__ import annotations

import bisect
import functools
import os
import stat
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from envman.project.aliases import leading_out, mount_table, path_chain, shared_places

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
STARTUP = "a file a shell or a tool runs at start-up"
#: What a home holds that no file may mount, relative to it: (name, why), in the order checked.
HOME_INSIDE = tuple((n, STARTUP) for n in STARTUP_NAMES) + tuple((n, CREDENTIALS) for n in CREDENTIAL_NAMES)


@dataclass(frozen=True)
class Protected:
    path: str  # as written (for the message)
    why: str
    contents: bool = True  # what lies inside is protected too (False for a home: ~/data is fine)
    #: Paths under this one that are protected too, (relative path, why), checked right after it
    #: in this order (a home's :data:`HOME_INSIDE`).
    inside: tuple[tuple[str, str], ...] = ()

    def within(self) -> list[Protected]:
        """The paths of :attr:`inside`, each a protected path of its own."""
        return [Protected(os.path.join(self.path, name), why) for name, why in self.inside]


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
    """Every path a file may not mount (nor a parent of it, nor anything inside it); each home
    carries what it holds in :attr:`Protected.inside`."""
    from envman.paths import config_dir, state_dir

    env = os.environ if environ is None else environ
    out = [Protected(p, "a host system directory") for p in SYSTEM_PATHS]
    out += [Protected(h, "a home directory", contents=False, inside=HOME_INSIDE) for h in _homes()]
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


def _at_or_in(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or lies inside it."""
    return path == folder or path.startswith(folder if folder.endswith("/") else folder + "/")


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


def _make(p: Protected, ident: Callable[[str], tuple[int, int] | None], real: str | None = None,
          chain_of: Callable[[str], list[str]] = path_chain) -> _Entry:
    real = os.path.realpath(p.path) if real is None else real
    chain = chain_of(real)
    return _Entry(p, real, ident(real), frozenset(chain), frozenset(i for i in map(ident, chain) if i is not None))


class _Parents:
    """``os.path.realpath`` of many paths in a few folders (the homes in ``/home``): each folder
    resolved once, then one ``lstat`` per path that is no symbolic link."""

    def __init__(self) -> None:
        self.seen: dict[str, str | None] = {}  # a folder → its real path, when that is a folder
        self.chains: dict[str, list[str]] = {}

    def chain(self, real: str) -> list[str]:
        """:func:`~envman.project.aliases.path_chain` of ``real``, its parent's looked up once."""
        head = os.path.dirname(real)
        if head == real:
            return [real]
        if head not in self.chains:
            self.chains[head] = path_chain(head)
        return [real, *self.chains[head]]

    def real(self, path: str) -> str:
        head, name = os.path.split(path)
        if not path.startswith("/") or path.startswith("//") or name in ("", ".", "..") or path != os.path.normpath(path):
            return os.path.realpath(path)
        if head not in self.seen:
            real = os.path.realpath(head)
            try:
                # a folder: every step resolved (a loop or a step that cannot be looked up ends elsewhere)
                self.seen[head] = real if stat.S_ISDIR(os.lstat(real).st_mode) else None
            except (OSError, ValueError):
                self.seen[head] = None
        folder = self.seen[head]
        if folder is None:
            return os.path.realpath(path)
        joined = os.path.join(folder, name)
        try:
            link = stat.S_ISLNK(os.lstat(joined).st_mode)
        except OSError:
            link = False  # as realpath: what cannot be looked up is taken as it is written
        except ValueError:
            link = True
        return os.path.realpath(path) if link else joined


def _verdict(e: _Entry, real: str, own: tuple[int, int] | None, chain: frozenset[str],
             chain_ids: set[tuple[int, int]]) -> str | None:
    """Why the path ``real`` (its identity ``own``; ``chain``: it and its parents, and their
    identities) may not be mounted for the protected path of ``e``, or ``None``."""
    p = e.p
    if e.real == real or (e.ident is not None and e.ident == own):
        return f"{real} is {p.why} ({p.path})"
    # inside a protected path
    if p.contents and (e.real in chain or (e.ident is not None and e.ident in chain_ids)):
        return f"{real} lies inside {p.why} ({p.path})"
    # a parent of a protected path
    if real in e.chain or (own is not None and own in e.chain_ids):
        return f"{real} contains {p.why} ({p.path})"
    return None


class _Group:
    """The paths inside one protected path (the home of another person) that are made when a
    mount first could meet them: when the mount's real path or one of its parents is that path's
    real path, or has its (device, inode) (see :func:`_made_later`)."""

    def __init__(self, base: _Entry, pos: int, early: set[int]) -> None:
        self.base = base
        self.pos = pos  # the position of its first path among all protected paths
        self.early = early  # the indices of those made with the policy
        self.made: list[tuple[int, _Entry]] | None = None


@dataclass(frozen=True)
class Policy:
    """The protected paths, resolved once: each check of a mount is then a few dictionary
    lookups, so a file with thousands of mounts is checked in time linear in their number; the
    paths in other people's homes are resolved only when a mount reaches into one."""

    entries: tuple[_Entry, ...]
    #: What the scan of a mounted folder found, by its real path (a file that mounts one folder
    #: many times costs one scan).
    scans: dict[str, str | None]
    #: The real path of the folder whose protected entries are scanned for :attr:`file_ids`.
    home: str = "/"
    #: Each entry by its position among all protected paths.
    at: dict[int, _Entry] = field(default_factory=dict)
    #: The first position at which a check of :func:`_verdict` can meet a key: by the real path and
    #: by the identity of entries whose contents are protected, by the real path and by the
    #: identity of each entry's path and parents.
    index: tuple[dict[Any, int], ...] = field(default_factory=lambda: tuple({} for _ in range(4)))
    groups: tuple[_Group, ...] = ()
    #: The groups by the real path, and by the identity, of the path that holds them.
    group_by_real: dict[str, list[int]] = field(default_factory=dict)
    group_by_ident: dict[tuple[int, int], list[int]] = field(default_factory=dict)
    #: Mount points under which a file may report the identity of a file elsewhere.
    foreign: frozenset[str] = frozenset()
    #: One past the last position.
    end: int = 0

    @classmethod
    def of(cls, protected: Iterable[Protected], home: str | None = None) -> Policy:
        """``home``: the folder whose protected entries are scanned for the inodes of their files
        (default: the invoking user's; only you can hard-link your own files, as Linux's
        ``fs.protected_hardlinks`` keeps others from linking files they cannot read and write)."""
        home_real = os.path.realpath(home or os.path.expanduser("~"))
        ids: dict[str, tuple[int, int] | None] = {}  # the entries share most parents (a home, /)

        def ident(path: str) -> tuple[int, int] | None:
            if path not in ids:
                ids[path] = _ident(path)
            return ids[path]

        at: dict[int, _Entry] = {}
        groups: list[_Group] = []
        shared: list[tuple[list[str], frozenset[str], frozenset[str]] | None] = []  # the mounts, read when a group asks
        parents = _Parents()
        pos = 0
        for p in protected:
            base = at[pos] = _make(p, ident, parents.real(p.path), parents.chain) if p.inside else _make(p, ident)
            early = _made_later(base, home_real, shared)
            for j in range(len(p.inside)) if early is None else sorted(early):
                name, why = p.inside[j]
                at[pos + 1 + j] = _make(Protected(os.path.join(p.path, name), why), ident)
            if early is not None:
                groups.append(_Group(base, pos + 1, early))
            pos += 1 + len(p.inside)
        index: tuple[dict[Any, int], ...] = ({}, {}, {}, {})
        by_real_in, by_ident_in, by_chain, by_chain_id = index
        for n, e in at.items():  # in order of position: each key keeps its first
            if e.p.contents:
                by_real_in.setdefault(e.real, n)
                by_ident_in.setdefault(e.ident, n)
            for c in e.chain:
                by_chain.setdefault(c, n)
            for i in e.chain_ids:
                by_chain_id.setdefault(i, n)
        by_ident_in.pop(None, None)
        group_by_real: dict[str, list[int]] = {}
        group_by_ident: dict[tuple[int, int], list[int]] = {}
        for n, g in enumerate(groups):
            group_by_real.setdefault(g.base.real, []).append(n)
            if g.base.ident is not None:
                group_by_ident.setdefault(g.base.ident, []).append(n)
        foreign = shared[0][2] if shared and shared[0] is not None else frozenset()
        return cls(tuple(at.values()), {}, home_real, at, index, tuple(groups), group_by_real, group_by_ident, foreign,
                   pos)

    def made(self, g: _Group) -> list[tuple[int, _Entry]]:
        """The paths of the group ``g`` not made with the policy, made now (once)."""
        if g.made is None:
            g.made = [(g.pos + j, _make(q, _ident)) for j, q in enumerate(g.base.p.within()) if j not in g.early]
        return g.made

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


def _made_later(base: _Entry, home: str, shared: list[tuple[list[str], frozenset[str], frozenset[str]] | None]) -> set[int] | None:
    """Which paths of ``base.p.inside`` are made with the policy when the others wait for a mount
    that reaches ``base`` (see :class:`_Group`); ``None``: all of them.

    A path waits when its real path is the real path of ``base`` joined with its name: no
    symbolic link on the way (one listing of each folder on the way that exists tells; a link
    may lead anywhere). A mount outside ``base`` then meets it only by its (device, inode):

    * through a hard link: a mount with a link count over one (or under a file with one) makes
      every group (:func:`forbidden_reason`);
    * through another spelling of the same name (a file system that ignores case): the mount's
      parent at the depth of ``base`` has the identity of ``base``, which makes the group;
    * through a second mount of the same file system showing ``base`` or a folder in it again, or
      a file system that reports another file's identity (the mount table tells): such a
      ``base`` is made at once, as are your own home (:attr:`Policy.file_ids` scans it) and
      everything when the mount table cannot be read; a mount under such a file system makes
      every group."""
    if not base.p.inside or _at_or_in(base.real, home) or _at_or_in(home, base.real):
        return None
    if not shared:
        table = mount_table()
        shared.append(None if table is None else shared_places(table))
    known = shared[0]
    if known is None:
        return None
    places, place_set, _ = known
    real = base.real
    if places:
        inside = real if real.endswith("/") else real + "/"
        first = bisect.bisect_left(places, inside)  # the places inside ``real`` follow each other from here
        if (first < len(places) and places[first].startswith(inside)) or not place_set.isdisjoint(base.chain):
            return None
    return leading_out(real, base.p.inside)


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
    chain = path_chain(real)
    chain_set = frozenset(chain)
    ids = [_ident(c) for c in chain]
    chain_ids = {i for i in ids if i is not None}
    # whether the mount may meet any path of any group by its identity (see _made_later): through a
    # hard link (only the deepest path that exists may be a file), or a parent that cannot be
    # looked at above one that can
    every_group = False
    if chain_ids:
        deepest = next(k for k, i in enumerate(ids) if i is not None)
        every_group = any(i is None for i in ids[deepest:])
        try:
            dst = st if st is not None else os.stat(chain[deepest])  # st: the mount's own (then deepest is 0)
        except (OSError, ValueError):
            every_group = True
        else:
            every_group |= dst.st_nlink > 1 and not stat.S_ISDIR(dst.st_mode)
    own = (st.st_dev, st.st_ino) if st is not None else None
    by_real_in, by_ident_in, by_chain, by_chain_id = pol.index
    end = pol.end
    # an entry's own real path and identity are in its chain: "is" is found with "contains"
    first = min(by_chain.get(real, end), *(by_real_in.get(c, end) for c in chain),
                *(by_ident_in.get(i, end) for i in chain_ids))
    if own is not None:
        first = min(first, by_chain_id.get(own, end))
    why = _verdict(pol.at[first], real, own, chain_set, chain_ids) if first in pol.at else None
    if pol.groups:
        if every_group or any(c in pol.foreign for c in chain):
            reached: Iterable[int] = range(len(pol.groups))
        else:
            reached = sorted({n for c in chain for n in pol.group_by_real.get(c, ())}
                             | {n for i in chain_ids for n in pol.group_by_ident.get(i, ())})
        for n in reached:  # in order of position
            g = pol.groups[n]
            if g.pos >= first:
                break
            for at, e in pol.made(g):
                if at >= first:
                    break
                found = _verdict(e, real, own, chain_set, chain_ids)
                if found is not None:
                    first, why = at, found
                    break
    if why is not None:
        return why
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
