"""This machine's apt sources: which Debian or Ubuntu archive it installs from.

Read at run time from ``/etc/apt/sources.list`` and ``/etc/apt/sources.list.d`` (one-line
``*.list`` files and deb822 ``*.sources`` files); nothing here names an archive of its own.
Used by ``envman base make`` (the archive a base image is debootstrapped from) and by the
test suite's stand-in bases.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from envman.errors import UserError
from envman.safefile import read_file

APT_SOURCE_DIRS = (Path("/etc/apt/sources.list"), Path("/etc/apt/sources.list.d"))


@dataclass(frozen=True)
class AptSource:
    uri: str
    suites: tuple[str, ...]
    components: tuple[str, ...]


def host_apt_sources(paths: tuple[Path, ...] = APT_SOURCE_DIRS) -> list[AptSource]:
    """The ``deb`` sources this machine's apt uses: one-line ``*.list`` and deb822 ``*.sources``."""
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files += sorted(f for f in p.iterdir() if f.suffix in (".list", ".sources"))
        elif p.is_file():
            files.append(p)
    sources: list[AptSource] = []
    for f in files:
        try:
            text = read_file(f, what="apt source list").decode(errors="replace")
        except (OSError, UserError):
            continue  # unreadable: apt would say so itself
        sources += parse_deb822(text) if f.suffix == ".sources" else parse_one_line(text)
    return sources


def parse_one_line(text: str) -> list[AptSource]:
    out = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        line = re.sub(r"\[[^\]]*\]", " ", line)  # [signed-by=... arch=...]
        parts = line.split()
        if len(parts) >= 3 and parts[0] == "deb":
            out.append(AptSource(parts[1], (parts[2],), tuple(parts[3:])))
    return out


def parse_deb822(text: str) -> list[AptSource]:
    out = []
    for para in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        key = None
        for line in para.splitlines():
            if line.startswith("#") or not line.strip():
                continue
            if line[0] in " \t" and key:
                fields[key] += " " + line.strip()
                continue
            key, _, value = line.partition(":")
            key = key.strip().lower()
            fields[key] = value.strip()
        if "deb" not in fields.get("types", "").split():
            continue
        if fields.get("enabled", "yes").lower() == "no":
            continue
        for uri in fields.get("uris", "").split():
            out.append(AptSource(uri, tuple(fields.get("suites", "").split()),
                                 tuple(fields.get("components", "").split())))
    return out


def archive_mirror(sources: list[AptSource], suite: str | None = None) -> str | None:
    """The archive of ``sources`` that serves ``suite`` (any plain release when ``None``) with
    the ``main`` component: a release name, not its ``-security``/``-updates`` pocket. Only
    ``http(s)``/``file`` URIs whose text is safe on an argv are taken."""
    for src in sources:
        if "main" not in src.components or not SAFE_URI.fullmatch(src.uri):
            continue
        plain = [s for s in src.suites if "-" not in s and "/" not in s]
        if (suite is None and plain) or (suite is not None and suite in plain):
            return src.uri.rstrip("/")
    return None


SAFE_URI = re.compile(r"(?:https?|file)://[A-Za-z0-9._~:/%@+\-\[\]]+")
