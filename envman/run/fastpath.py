"""The fast path of ``envman run``: a run plan reused while nothing it was made from has changed.

A run's ``docker run`` command line is a pure function of what the full path
(:func:`envman.run.command.run_cli`) reads: its own command line and matrix options, the current
directory, the uid and gid, envman's and Docker's environment variables, the host's RAM, the
files it consulted (the project file, and that no nearer ``envman.toml`` exists, the project
registry, the user config, a requirements file, the matrix files, the smoke report, and envman's
own code: the source of every envman module the full path loaded, its templates and matrices, see
:func:`code_files`) and the engine's image ids. After a successful CPU-run preflight the full path records
the plan together with each file's size and mtime and each image's id (:func:`record`). The next
identical ``envman run`` (:func:`try_cached_run`) stats those files and asks the engine for those
image ids on its Unix socket; if every one is unchanged it execs the same ``docker run`` without
loading the CLI, the matrix or the TOML parser (about 15 ms instead of 50–100 ms). Any
difference, error or doubt is a miss, and the full path runs with all its checks.

The same holds for a no-op ``envman build``: when every stack of the last identical invocation
was already built, smoke-tested and promoted and nothing it depended on (the envman modules the
full build path loaded, its templates and matrices, the user's matrix files, config, CA bundle and wheelhouse, the smoke
reports, the candidate and stable image ids) has changed, :func:`try_cached_build` prints the
same result without rendering anything.

Never cached: runs that request GPUs (the driver and the GPUs are read on every run),
``--dry-run``, ``--rebuild``, ``--help``, engines reached other than through the local socket;
builds with ``--no-cache`` or ``--pull``, or whose result was anything but a promoted no-op.
``ENVMAN_RUN_CACHE=0`` turns the cache off. The cache file is private to the user (mode 0600)
and holds no secret: entries are keyed by a hash of the invocation (whose ``-e NAME=VALUE``
words may carry values), and a run's environment is kept as names and value hashes only. A
cached run with an environment works its values out again from the same files and options
(``environment_of``, :func:`envman.run.command.cached_run_environment`), checks them against the hashes and hands them
to ``docker`` through :func:`exec_docker`'s in-memory env file, never on an argv.

Standard library only, and only ``os``, ``sys`` and ``json`` at import: this module is on the
hot path of every run. It imports nothing of the full path: a cached run's environment is worked
out again by the function its caller hands it (``environment_of``).
"""

from __future__ import annotations

import json
import os
import sys
import time
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (hot path)
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping, Sequence

from envman import __version__
from envman.digest import sha256_hex
from envman.engine.handoff import exec_docker, terminal_flags, which, with_terminal
from envman.engine.socket import NoAnswer, local_socket, object_ids
from envman.run.cidfile import with_cidfile
from envman.paths import cache_dir, caches_enabled
from envman.paths import matrices_dir, templates_dir

CACHE_FORMAT = 4
MAX_ENTRIES = 32
#: Environment that can change a plan (besides every ``ENVMAN_*`` and ``XDG_*`` variable).
ENV_KEYS = ("HOME", "DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_CONFIG")
#: Words of ``envman run`` that always take the full path.
UNCACHED_WORDS = ("--dry-run", "--rebuild", "--update", "--help", "-h", "--json", "--name", "--detach", "-d")


# --------------------------------------------------------------------------- the cache


def enabled(environ: Mapping[str, str] | None = None) -> bool:
    return caches_enabled(environ)


def cache_file(environ: Mapping[str, str] | None = None) -> str:
    """``runs.json`` in the user's envman cache folder (:func:`envman.paths.cache_dir`)."""
    return os.path.join(cache_dir(environ), "runs.json")


def cache_key(matrix: Sequence[str], args: Sequence[str], command: Sequence[str],
              environ: Mapping[str, str] | None = None) -> str:
    """Everything besides files and images that a plan depends on, as one string."""
    env = os.environ if environ is None else environ
    try:
        ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        ram = 0
    picked = {k: v for k, v in env.items() if k in ENV_KEYS or k.startswith(("ENVMAN_", "XDG_"))}
    text = json.dumps([CACHE_FORMAT, __version__, list(matrix), list(args), list(command), os.getcwd(),
                       os.getuid(), os.getgid(), ram, local_socket(env), sorted(picked.items())])
    return sha256_hex(text.encode("utf-8", "surrogateescape"))


def signature(path: str) -> list[int] | None:
    """What a dependency looked like: [size, mtime_ns, ctime_ns, inode], or ``None`` when it did
    not exist. The change time cannot be set back by ``touch``, so an edit that keeps the size
    and mtime is still a change."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def source_identity(path: str) -> list[Any] | None:
    """What a bind-mount source is, as ``docker run`` will follow it: [real path, device, inode],
    or ``None`` when it does not resolve. A folder swapped for a symlink (to ``~/.ssh``, to
    ``/var/run``), or any component of its path repointed, changes the real path; the same path
    recreated changes the inode."""
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except (OSError, ValueError):
        return None
    return [real, st.st_dev, st.st_ino]


def code_files() -> list[str]:
    """The files of envman that decided what this process is about to record: the source of every
    ``envman`` module it has loaded (all the full path needed, however deep its lazy imports went)
    and every file and folder of the shipped templates and matrices. Computed, not listed: an
    edited module, template or matrix of an editable install (or an upgrade) is a miss."""
    files = set(tree_files(str(templates_dir()), str(matrices_dir())))
    for name, module in list(sys.modules.items()):
        if name == "envman" or name.startswith("envman."):
            path = getattr(module, "__file__", None)
            if isinstance(path, str) and os.path.isfile(path):
                files.add(os.path.abspath(path))
    return sorted(files)


def _load(path: str) -> dict[str, Any]:
    from envman.safefile import read_state_json

    data = read_state_json(path, what="run-plan cache")
    if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT or not isinstance(data.get("runs"), dict):
        return {}
    return data


def lookup(key: str, environ: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The recorded plan for ``key`` if every file it depends on and every image it names is as
    recorded, else ``None``."""
    entry = _load(cache_file(environ)).get("runs", {}).get(key) if enabled(environ) else None
    if not isinstance(entry, dict):
        return None
    try:
        for path, sig in entry["deps"]:
            if signature(path) != sig:
                return None
        for path, ident in entry.get("sources", ()):
            if source_identity(path) != ident:
                return None
        images = [(str(ref), recorded) for ref, recorded in entry["images"]]
        networks = [(str(name), recorded) for name, recorded in entry.get("networks", ())]
        found = object_ids(local_socket(environ), [ref for ref, _ in images], [name for name, _ in networks])
        if found != [recorded for _, recorded in images + networks]:
            return None
    except (NoAnswer, KeyError, TypeError, ValueError):
        return None
    return entry


def try_cached_run(matrix: Sequence[str], args: Sequence[str], command: Sequence[str],
                   environment_of: Callable[[str, Sequence[str]], Sequence[tuple[str, str]]] | None = None) -> None:
    """Exec the recorded ``docker run`` when the plan is still valid; return on a miss.

    ``environment_of(project_file, args)`` works out a cached run's environment again
    (:func:`envman.run.command.cached_run_environment`); without it a run that has one is a miss."""
    if any(w.split("=", 1)[0] in UNCACHED_WORDS for w in args) or not enabled():
        return
    try:
        entry = lookup(cache_key(matrix, args, command))
        if entry is None or "sources" not in entry or not all(isinstance(a, str) for a in entry["argv"]):
            return
        os.makedirs(entry["home"], mode=0o700, exist_ok=True)
        argv = with_terminal(entry["argv"], *terminal_flags())
        if which(argv[0]) is None:
            return  # the full path says what is missing
        environment: list[tuple[str, str]] = []
        if entry.get("env"):
            if environment_of is None:
                return
            environment = list(environment_of(entry["project_file"], args))
            if [[k, value_hash(v)] for k, v in environment] != entry["env"]:
                return
        warnings = entry.get("warnings", [])
        if not isinstance(warnings, list) or not all(isinstance(w, str) for w in warnings):
            return
        argv = with_cidfile(argv)  # its ID recorded: envman exec enters only it (a folder it cannot use: a miss)
    except Exception:  # a cache never breaks a run: the full path decides
        return
    for line in warnings:
        from envman.errors import printable

        sys.stderr.write(f"envman: warning: {printable(line)}\n")
    exec_docker(argv, environment)


def record(key: str, *, deps: Sequence[str], images: Sequence[tuple[str, str]], **payload: Any) -> None:
    """Keep what a command decided (``payload``) with what it decided it from: the files
    ``deps`` (envman's loaded code, templates and matrices are added: :func:`code_files`) and
    the image ids ``images``. The file signatures are taken
    now, so a change during the command is a miss next time."""
    if not enabled():
        return
    from envman.state import atomic_write

    path = cache_file()
    data = _load(path) or {"format": CACHE_FORMAT, "runs": {}}
    runs = data["runs"]
    runs.pop(key, None)
    all_deps = sorted(set(deps) | set(code_files()))
    runs[key] = {"deps": [[p, signature(p)] for p in all_deps], "images": [list(i) for i in images], **payload}
    while len(runs) > MAX_ENTRIES:
        runs.pop(next(iter(runs)))
    try:
        from pathlib import Path

        atomic_write(Path(path), json.dumps(data))
    except OSError:
        pass  # a cache that cannot be written only costs time


def value_hash(value: str) -> str:
    return sha256_hex(("envman-env\0" + value).encode("utf-8", "surrogateescape"))


def record_run(key: str, *, deps: Sequence[str], images: Sequence[tuple[str, str]], argv: Sequence[str],
               home: str, sources: Sequence[str], environment: Sequence[tuple[str, str]] = (),
               project_file: str = "", warnings: Sequence[str] = (),
               networks: Sequence[tuple[str, str]] = ()) -> None:
    """Keep the plan of a run that passed its preflight (the full path calls this before exec).
    ``sources`` are the host paths the run bind-mounts (project root, home, every mount): a hit
    needs each to resolve to the same real path and inode as now (:func:`source_identity`), since
    the mount policy was checked against what they resolved to. ``networks`` are (name, id) of
    the network the run joins: a hit needs the same network (checked when it was made). The
    environment is kept as names and hashes (:func:`value_hash`), never values."""
    idents = [[p, source_identity(p)] for p in sources]
    if any(ident is None for _, ident in idents):
        return  # a source that does not resolve now: nothing safe to remember
    record(key, deps=deps, images=images, argv=list(argv), home=home, project_file=project_file,
           sources=idents, env=[[k, value_hash(v)] for k, v in environment], warnings=list(warnings),
           networks=[list(n) for n in networks])


# --------------------------------------------------------------------------- envman build


#: Words of ``envman build`` that always take the full path.
UNCACHED_BUILD_WORDS = ("--no-cache", "--pull", "--help", "-h")


def build_key(matrix: Sequence[str], words: Sequence[str], environ: Mapping[str, str] | None = None) -> str:
    return cache_key(matrix, ["build", *words], [], environ)


def tree_files(*roots: str) -> list[str]:
    """Every directory and file under ``roots`` (bytecode caches left out): a file added,
    removed or changed there changes one of their signatures."""
    out = []
    for root in roots:
        for d, dirs, files in os.walk(root):
            dirs[:] = sorted(x for x in dirs if x != "__pycache__")
            out.append(d)
            out += [os.path.join(d, f) for f in sorted(files)]
    return out


_ANSI = {"green": "32", "yellow": "33", "red": "31"}


def try_cached_build(matrix: Sequence[str], words: Sequence[str]) -> None:
    """Print the recorded result and exit 0 when ``envman build`` would be the same no-op again
    (every stack cached, smoke-tested and promoted, nothing it depends on changed); return on a
    miss."""
    t0 = time.perf_counter()
    if any(w in UNCACHED_BUILD_WORDS for w in words) or not enabled():
        return
    try:
        entry = lookup(build_key(matrix, words))
        if entry is None or not isinstance(entry["rows"], list):
            return
        rows = [dict(r, build_seconds=round(time.perf_counter() - t0, 2)) for r in entry["rows"]]
        if entry["json"]:
            out = json.dumps(rows, indent=2) + "\n"
        else:
            from envman.errors import printable  # a verdict's reason comes from an image's labels

            tty = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
            out = "".join((f"\x1b[{_ANSI[colour]}m{printable(status)}\x1b[0m" if tty else printable(status))
                          + f" {printable(rest)}\n" for status, colour, rest in entry["lines"])
    except Exception:  # a cache never breaks a build: the full path decides
        return
    sys.stdout.write(out)
    sys.stdout.flush()
    sys.exit(0)
