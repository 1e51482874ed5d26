"""The user's registry of projects: ``<config dir>/projects.json`` maps names to roots.

``envman run NAME`` works from anywhere through it. Every change is a read-modify-write under a
file lock, written with :func:`envman.state.atomic_write` (temp file, fsync, rename): a reader, or
an envman killed at any moment, sees the old registry or the new one, never half of one.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

from envman.errors import UserError
from envman.paths import config_dir
from envman.stack.names import PROJECT_NAME_PATTERN
from envman.project.file import PROJECT_FILE, ProjectConfig, REGISTRY_FILE, find_project_file, load_project
from envman.errors import printable

if TYPE_CHECKING:
    from filelock import BaseFileLock

if sys.version_info >= (3, 11):
    pass
else:  # pragma: no cover
    pass

# --------------------------------------------------------------------------- registry


def registry_path() -> Path:
    return config_dir() / REGISTRY_FILE


def _lock(path: Path) -> BaseFileLock:
    from filelock import FileLock

    path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(path.with_name(path.name + ".lock")), timeout=60)


def read_registry(path: Path | None = None) -> dict[str, Path]:
    """Registered projects, name → root. A missing registry is an empty one."""
    return {name: Path(root) for name, root in sorted(_read_roots(path or registry_path()).items())}


def _read_roots(file: Path) -> dict[str, str]:
    """The registry as it is stored: name → root, both strings (a registration reads and writes
    it without making a path object of every root)."""
    from envman.safefile import read_text

    where = str(file)
    fix = "restore it or delete it, then register the projects again with envman project add PATH"
    try:
        raw = read_text(file, what="project registry", limit=16 * 1024 * 1024, fix=fix, private=True)
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
        out[name] = entry["root"]
    return out


def registry_text(projects: Mapping[str, Path | str]) -> str:
    """The registry file: ``json.dumps(doc, indent=2, sort_keys=True)``, byte for byte, but each
    string through the C encoder (an indented dump runs the pure-Python one, which was most of a
    registration's time with a thousand projects)."""
    if not projects:
        return '{\n  "projects": {},\n  "schema": 1\n}\n'
    enc = json.encoder.encode_basestring_ascii
    entries = ",\n".join(f'    {enc(n)}: {{\n      "root": {enc(str(r))}\n    }}' for n, r in sorted(projects.items()))
    return '{\n  "projects": {\n' + entries + '\n  },\n  "schema": 1\n}\n'


def _write_registry(path: Path, projects: Mapping[str, Path | str]) -> None:
    from envman.state import atomic_write

    atomic_write(path, registry_text(projects))


def update_registry(change: Callable[[dict[str, Path]], None], path: Path | None = None) -> dict[str, Path]:
    """Read-modify-write under the registry lock; the write is atomic."""
    def on_paths(roots: dict[str, str]) -> None:
        projects = {name: Path(root) for name, root in sorted(roots.items())}
        change(projects)
        roots.clear()
        roots.update((name, str(root)) for name, root in projects.items())

    return {name: Path(root) for name, root in _update_roots(on_paths, path).items()}


def _update_roots(change: Callable[[dict[str, str]], None], path: Path | None = None) -> dict[str, str]:
    """:func:`update_registry` on the stored strings."""
    file = path or registry_path()
    with _lock(file):
        roots = _read_roots(file)
        change(roots)
        _write_registry(file, roots)
        return roots


def register(project: ProjectConfig, path: Path | None = None) -> bool:
    """Register ``project`` under its name; ``False`` when it already was. A name taken by
    another root is an error; a root registered under an older name is renamed. The cost does
    not grow with the registry beyond reading and writing its file: only this project's root and
    the entry under its name are resolved, and the other entries stay strings (a path object
    per root per registration was most of a registration with a thousand projects)."""
    root = str(project.root.resolve())
    added = []

    def change(projects: dict[str, str]) -> None:
        other = projects.get(project.name)
        if other is not None and str(Path(other).resolve()) != root:
            raise UserError(
                f"project name {project.name!r} is already registered for {other}",
                where=str(project.file),
                fix=f'set another name = "..." in the file, or remove the old one: envman project rm {project.name}',
            )
        # roots are stored resolved (as written below), so an equal root is an equal string: no
        # registration resolves every root registered before it
        for n in [n for n, r in projects.items() if r == root and n != project.name]:
            del projects[n]
        if other is None:
            added.append(project.name)
        projects[project.name] = root

    _update_roots(change, path)
    return bool(added)


def unregister(name: str, path: Path | None = None) -> Path:
    removed: list[str] = []

    def change(projects: dict[str, str]) -> None:
        if name not in projects:
            raise unknown_project(name, projects)
        removed.append(projects.pop(name))

    _update_roots(change, path)
    return Path(removed[0])


def unknown_project(name: str, projects: Mapping[str, object]) -> UserError:
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
    if target not in projects and (len(target) > 255 or not re.fullmatch(PROJECT_NAME_PATTERN, target)) and \
            not os.path.lexists(here / target):
        raise unknown_project(target, projects)
    if target in projects:
        root = projects[target]
        if not os.path.lexists(root / PROJECT_FILE):  # anything else there (a FIFO, a folder): load_project names it
            raise UserError(f"project {target!r} is registered at {root}, but {root / PROJECT_FILE} is gone",
                            where="project registry", fix=f"move it back, or envman project rm {target}")
        return load_project(root)
    if (here / target / PROJECT_FILE).is_file():
        return load_project(here / target)
    raise unknown_project(target, projects)


def init_text(stack: str, name: str | None = None, *, requirements: str | None = None, typed: str | None = None,
              requirement_list: list[str] | None = None, detected: str | None = None) -> str:
    """A new project file: ``stack`` (the pinned name; ``typed``, what the user asked for, in a
    comment when it differs; ``detected``, the statement detection decided on), ``requirements``
    when the folder has a requirements file, or ``requirement_list`` (the repository's
    requirements that the stack does not already provide) written inline."""
    comment = (f"    # envman project init --env {typed}" if typed and typed != stack
               else f"    # detected: {printable(detected)[:160]}" if detected else "")
    lines = [
        "# envman project file (format: docs/projects.md); `envman project show` prints the effective settings",
        f'stack = "{stack}"' + comment,
    ]
    if name:
        lines.append(f'name = "{name}"')
    if requirement_list is not None:
        lines.append(f"# the repository's requirements{f' ({requirements})' if requirements else ''} less what the stack "
                     "provides (envman project detect --json says why for each line)")
        lines.append("requirements = [" + "".join(f"\n    {toml_string(r)}," for r in requirement_list)
                     + ("\n" if requirement_list else "") + "]")
    elif requirements:
        lines.append(f'requirements = "{requirements}"    # builds a project image; envman.lock pins it')
    lines += [
        *([] if requirements else
          ["# requirements = \"requirements.txt\"    # or a list: [\"einops==0.8.0\"]; builds a project image"]),
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




def toml_string(text: str) -> str:
    """``text`` as a TOML basic string: quotes, backslashes, control and every invisible or
    format character (a bidi override, a zero-width space) escaped, so the file reads as its
    value does (no character that shows what it is not)."""
    out = []
    for ch in text:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch.isprintable() and ch != "\x7f":
            out.append(ch)
        else:
            out.append(f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'
