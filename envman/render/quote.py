"""Quoting for a Dockerfile, and Docker image references.

Two lexers read what envman writes: Docker's own for LABEL/ENV values (:func:`dockerfile_quote`,
:func:`stack_label_json`) and /bin/sh for words in RUN lines (:func:`sh_word`). Image references
are parsed strictly (:func:`parse_image_ref`) before they reach a ``FROM`` line, and
:func:`mirror_image` points a Docker Hub reference at a registry mirror.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from typing import Iterable

from envman.errors import RenderError
from envman.stack.names import Stack

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REPO_PATH_RE = re.compile(rf"^{_COMPONENT}(?:/{_COMPONENT})*$")
_TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
_REGISTRY_HOST_RE = re.compile(r"^(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$")
DOCKER_HUB = ("docker.io", "index.docker.io", "registry-1.docker.io")

# --- quoting ---------------------------------------------------------------------------------


def check_dockerfile_value(value: str, *, what: str = "value") -> str:
    """``value`` when :func:`dockerfile_quote` can carry it (printable ASCII), else a
    ``RenderError`` naming it as ``what``: the plan checks its LABEL/ENV values with this where
    it knows what they are, the layout quotes them where the Dockerfile is written."""
    if not isinstance(value, str):
        raise RenderError(f"{what} must be a string, got {type(value).__name__}")
    for ch in value:
        if not (" " <= ch <= "~"):
            raise RenderError(
                f"{what} contains {ch!r}, which a Dockerfile LABEL/ENV value cannot carry",
                fix="use printable ASCII only (no newlines or control characters)",
            )
    return value


def dockerfile_quote(value: str, *, what: str = "value") -> str:
    """``value`` as a double-quoted word for a Dockerfile LABEL or ENV instruction.

    Inside double quotes Docker's lexer unescapes ``\\"``, ``\\$`` and ``\\\\`` and leaves any
    other backslash as it is; ``$`` would expand a variable. So ``"`` and ``$`` are escaped, and
    a backslash is escaped only where the lexer would otherwise consume it (before ``"``, ``$``,
    ``\\`` or at the end): a backslash before an ordinary character is written as it is, which
    every Docker version (old lexers did not unescape ``\\\\``) and dockerfile-parse read alike.
    A newline cannot be carried at all (it ends the instruction), nor can any other control
    character: those are a ``RenderError``. ``shlex.quote`` is the wrong tool here: the
    Dockerfile lexer does not know single quotes inside LABEL/ENV values the way sh does.
    """
    check_dockerfile_value(value, what=what)
    out = []
    n = len(value)
    for i, ch in enumerate(value):
        if ch in '"$':
            out.append("\\" + ch)
        elif ch == "\\":
            nxt = value[i + 1] if i + 1 < n else ""
            out.append("\\\\" if nxt in ('"', "$", "\\", "") else "\\")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def sh_word(word: str) -> str:
    """A word for /bin/sh in a RUN line (values are validated first; this is belt and braces)."""
    return shlex.quote(word)


def sh_words(words: Iterable[str]) -> str:
    """Words for /bin/sh, each quoted by :func:`sh_word`, joined by spaces."""
    return " ".join(sh_word(w) for w in words)


def sh_double_quoted(word: str) -> str:
    """``word`` in double quotes for /bin/sh: for a word validated to hold none of the characters
    sh reads inside them (``"``, ``$``, a backquote, a backslash, a newline); others are an error."""
    if any(ch in word for ch in '"$`\\\n'):
        raise RenderError(f"{word!r} cannot be written in double quotes")
    return f'"{word}"'


_JSON_ESCAPE_RE = re.compile(r"\\(.)")


def stack_label_json(stack: Stack) -> str:
    """Compact, sorted-keys JSON of the stack, for the ``envman.stack`` label.

    Plain ``json.dumps`` except that a quote or backslash inside a string is written as
    ``\\u0022`` / ``\\u005c`` and ``$`` as ``\\u0024`` (equally valid JSON): then the only
    backslashes left precede ordinary letters, which every Dockerfile lexer keeps as they are,
    and the label reads back exactly, whatever text a matrix note holds.
    """
    text = json.dumps(stack.to_json(), sort_keys=True, separators=(",", ":"), ensure_ascii=True)

    def sub(m: re.Match[str]) -> str:
        c = m.group(1)
        return {"\\": "\\u005c", '"': "\\u0022"}.get(c, m.group(0))

    return _JSON_ESCAPE_RE.sub(sub, text).replace("$", "\\u0024")


# --- image references ------------------------------------------------------------------------


@dataclass(frozen=True)
class ImageRef:
    registry: str | None  # None: Docker Hub
    path: str  # "nvidia/cuda", "ubuntu"
    tag: str | None
    digest: str | None

    def __str__(self) -> str:
        s = f"{self.registry}/{self.path}" if self.registry else self.path
        if self.tag:
            s += f":{self.tag}"
        if self.digest:
            s += f"@{self.digest}"
        return s


def parse_image_ref(ref: str) -> ImageRef:
    """Parse a Docker image reference strictly; it must carry a tag or a digest."""
    if not isinstance(ref, str) or not ref or len(ref) > 255:
        raise RenderError(f"base image reference {ref!r} is not valid", fix="e.g. nvidia/cuda:12.4.1-base-ubuntu22.04")
    rest, _, digest = ref.partition("@")
    registry = None
    first, slash, remainder = rest.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        registry, rest = first, remainder
    tag = None
    last = rest.rsplit("/", 1)[-1]
    if ":" in last:
        rest, tag = rest.rsplit(":", 1)
    bad = (
        (registry is not None and not _REGISTRY_HOST_RE.fullmatch(registry))
        or not _REPO_PATH_RE.fullmatch(rest)
        or (tag is not None and not _TAG_RE.fullmatch(tag))
        or (digest and not _DIGEST_RE.fullmatch(digest))
    )
    if bad:
        raise RenderError(
            f"base image reference {ref!r} is not valid",
            fix="use [REGISTRY/]REPOSITORY:TAG[@sha256:DIGEST] with lowercase repository components",
        )
    if tag is None and not digest:
        raise RenderError(
            f"base image reference {ref!r} has no tag",
            fix="pin a tag (e.g. ubuntu:22.04); an untagged base means :latest, which changes under you",
        )
    return ImageRef(registry, rest, tag, digest or None)


def mirror_image(ref: str, mirror: str | None) -> str:
    """The ``FROM`` reference for ``ref`` through a Docker Hub mirror.

    ``nvidia/cuda:12.4.1-base-ubuntu22.04`` -> ``MIRROR/nvidia/cuda:12.4.1-base-ubuntu22.04``;
    an official library image ``ubuntu:22.04`` -> ``MIRROR/library/ubuntu:22.04`` (Docker Hub's
    real repository name: pull-through caches such as registry:2 proxies, Harbor and Artifactory
    need the ``library/`` the Docker client adds only for docker.io). A reference that names
    another registry (``nvcr.io/...``, a private base) is left alone: the mirror stands in for
    Docker Hub only.
    """
    parsed = parse_image_ref(ref)
    if mirror is None or (parsed.registry is not None and parsed.registry not in DOCKER_HUB):
        return str(parsed)
    path = parsed.path if "/" in parsed.path else f"library/{parsed.path}"
    return str(ImageRef(mirror, path, parsed.tag, parsed.digest))
