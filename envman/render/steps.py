"""Dockerfile instructions as typed, frozen steps, and the one place their syntax is written.

A Dockerfile envman writes is an ordered tuple of steps (:mod:`envman.render.layout` lays a
:class:`~envman.render.sections.DockerfilePlan` out as one; :mod:`envman.render.base` builds the
rebuilt base's); each step's :attr:`text` is its instruction, and the templates only print them,
one per line. This module alone knows how a ``RUN`` is spelled: BuildKit ``--mount`` flags, one
per line, and the three ways a ``RUN`` chains its commands (:data:`Chain`).

Steps take values that are already checked and quoted: words in commands for /bin/sh
(:func:`envman.render.quote.sh_word`), ENV and LABEL values for the Dockerfile lexer
(:func:`envman.render.quote.dockerfile_quote`). What this module checks is what would change a
step's shape: a newline in any value (it would end the instruction and start another), and
anything but a plain path or name in a ``--mount`` option (a comma or ``=`` would add options).
Standard library only: the run path renders project images through here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Literal, Union

from envman.errors import RenderError

#: How a ``RUN`` chains its commands:
#: ``"sequence"``: ``cmd; \`` per line (the stack image's steps start with ``set -eu``), and
#: the only chain that takes :class:`If` and :class:`OrElse`;
#: ``"and"``: ``cmd && \`` per line, the next indented by four;
#: ``"and-leading"``: ``cmd \`` per line, the next starting `` && ``.
Chain = Literal["sequence", "and", "and-leading"]

INDENT = "    "
#: What a ``--mount`` option value may be: a path or an id, nothing that separates options.
_MOUNT_VALUE_RE = re.compile(r"[A-Za-z0-9_./+-]+")


def _one_line(text: str, what: str) -> str:
    if "\n" in text or "\r" in text:
        raise RenderError(f"{what} {text!r} spans lines, which would end the Dockerfile instruction",
                          fix="this is a bug in envman's render: report it")
    return text


def _mount_option(value: str) -> str:
    if not _MOUNT_VALUE_RE.fullmatch(value):
        raise RenderError(f"--mount option value {value!r} is not a plain path or id",
                          fix="this is a bug in envman's render: report it")
    return value


# --- RUN --mount flags (BuildKit) --------------------------------------------------------------


@dataclass(frozen=True)
class CacheMount:
    """``--mount=type=cache``: a directory BuildKit keeps between builds, under ``id``."""

    id: str
    target: str
    sharing: Literal["shared", "private", "locked"] | None = None

    @property
    def flag(self) -> str:
        sharing = f",sharing={self.sharing}" if self.sharing else ""
        return f"--mount=type=cache,id={_mount_option(self.id)},target={_mount_option(self.target)}{sharing}"


@dataclass(frozen=True)
class BindMount:
    """``--mount=type=bind``: a path of the build context, visible during the step only."""

    source: str
    target: str

    @property
    def flag(self) -> str:
        return f"--mount=type=bind,source={_mount_option(self.source)},target={_mount_option(self.target)}"


@dataclass(frozen=True)
class SecretMount:
    """``--mount=type=secret``: a build secret, a file during the step only, never in a layer."""

    id: str
    target: str
    mode: str = "0400"

    @property
    def flag(self) -> str:
        return (f"--mount=type=secret,id={_mount_option(self.id)},target={_mount_option(self.target)},"
                f"mode={_mount_option(self.mode)}")


#: A BuildKit ``RUN --mount`` of one step (a cache, a bind of the context, a secret); a run's bind
#: mount of a host path is :class:`envman.engine.values.Mount`, another thing.
BuildMount = Union[CacheMount, BindMount, SecretMount]


# --- commands of a RUN -------------------------------------------------------------------------


@dataclass(frozen=True)
class If:
    """``if CONDITION; then ... [else ...] fi`` (a ``"sequence"`` RUN only)."""

    condition: str
    then: tuple[Command, ...]
    otherwise: tuple[Command, ...] = ()


@dataclass(frozen=True)
class OrElse:
    """``COMMAND || { FALLBACK; ...; }`` over lines: the fallback's commands start under ``|| {``."""

    command: str
    fallback: tuple[str, ...]


Command = Union[str, If, OrElse]

#: One physical line of a RUN body: (indent level, text, whether it ends a command). A line that
#: ends a command is followed by the chain's separator; one that does not (``then``, ``else``, a
#: command continued on the next line) by `` \``.
_Line = tuple[int, str, bool]


def _lines(commands: tuple[Command, ...], level: int) -> list[_Line]:
    out: list[_Line] = []
    for command in commands:
        if isinstance(command, str):
            out.append((level, _one_line(command, "command"), True))
        elif isinstance(command, If):
            out.append((level, f"if {_one_line(command.condition, 'condition')}; then", False))
            out += _lines(command.then, level + 1)
            if command.otherwise:
                out.append((level, "else", False))
                out += _lines(command.otherwise, level + 1)
            out.append((level, "fi", True))
        else:
            if not command.fallback:
                raise RenderError("an OrElse command needs a fallback", fix="this is a bug in envman's render: report it")
            out.append((level, _one_line(command.command, "command"), False))
            first, *rest = (_one_line(c, "command") for c in command.fallback)
            if not rest:
                out.append((level, f"|| {{ {first}; }}", True))
                continue
            out.append((level, f"|| {{ {first};", False))
            pad = " " * len("|| { ")
            for i, c in enumerate(rest):
                last = i == len(rest) - 1
                out.append((level, pad + c + ("; }" if last else ";"), last))
    return out


@dataclass(frozen=True)
class RunStep:
    """``RUN``: ``mounts`` (BuildKit), then ``commands`` chained as ``chain`` says."""

    commands: tuple[Command, ...]
    mounts: tuple[BuildMount, ...] = ()
    chain: Chain = "sequence"

    @property
    def text(self) -> str:
        if not self.commands:
            raise RenderError("a RUN step needs a command", fix="this is a bug in envman's render: report it")
        head = "RUN " + "".join(f"{m.flag} \\\n{INDENT}" for m in self.mounts)
        if self.chain == "sequence":
            lines = _lines(self.commands, 0)
            body = []
            for i, (level, text, ends) in enumerate(lines):
                indent = INDENT * (level + (1 if i else 0))
                end = "" if i == len(lines) - 1 else "; \\" if ends else " \\"
                body.append(indent + text + end)
            return head + "\n".join(body)
        if self.chain not in ("and", "and-leading"):
            raise RenderError(f"unknown RUN chain {self.chain!r}", fix="this is a bug in envman's render: report it")
        if not all(isinstance(c, str) for c in self.commands):
            raise RenderError(f"a RUN chained with {self.chain!r} takes plain commands only",
                              fix="this is a bug in envman's render: report it")
        words = [_one_line(c, "command") for c in self.commands if isinstance(c, str)]
        joint = f" && \\\n{INDENT}" if self.chain == "and" else " \\\n && "
        return head + joint.join(words)


# --- the other instructions --------------------------------------------------------------------


def _continued(keyword: str, items: tuple[str, ...], what: str) -> str:
    """``KEYWORD a \\`` and the rest of ``items`` aligned under the first."""
    if not items:
        raise RenderError(f"{keyword} needs a value", fix="this is a bug in envman's render: report it")
    return f"{keyword} " + f" \\\n{' ' * (len(keyword) + 1)}".join(_one_line(i, what) for i in items)


@dataclass(frozen=True)
class Comment:
    """``# line`` per line."""

    lines: tuple[str, ...]

    @property
    def text(self) -> str:
        return "\n".join(f"# {_one_line(line, 'comment')}" for line in self.lines)


@dataclass(frozen=True)
class Blank:
    """An empty line between two paragraphs of steps."""

    @property
    def text(self) -> str:
        return ""


@dataclass(frozen=True)
class FromStep:
    """``FROM [--platform=P] IMAGE [AS STAGE]`` (``image`` parsed strictly before it gets here)."""

    image: str
    platform: str | None = None
    stage: str | None = None

    @property
    def text(self) -> str:
        platform = f"--platform={self.platform} " if self.platform else ""
        stage = f" AS {self.stage}" if self.stage else ""
        return _one_line(f"FROM {platform}{self.image}{stage}", "FROM")


@dataclass(frozen=True)
class ArgStep:
    """``ARG NAME=value``: set while building only."""

    name: str
    value: str

    @property
    def text(self) -> str:
        return _one_line(f"ARG {self.name}={self.value}", "ARG")


@dataclass(frozen=True)
class EnvStep:
    """``ENV`` with one ``NAME=value`` per line (values quoted where they need it)."""

    pairs: tuple[str, ...]

    @property
    def text(self) -> str:
        return _continued("ENV", self.pairs, "ENV")


@dataclass(frozen=True)
class LabelStep:
    """``LABEL`` with one ``name=value`` per line (values quoted)."""

    pairs: tuple[str, ...]

    @property
    def text(self) -> str:
        return _continued("LABEL", self.pairs, "LABEL")


@dataclass(frozen=True)
class CopyStep:
    """``COPY SOURCE... DEST`` from the build context."""

    sources: tuple[str, ...]
    dest: str

    @property
    def text(self) -> str:
        return _one_line(f"COPY {' '.join(self.sources)} {self.dest}", "COPY")


@dataclass(frozen=True)
class AddStep:
    """``ADD ARCHIVE DEST``: a tar of the build context, unpacked at ``dest`` with its entries'
    modes and times (both builders unpack a local tar; a URL is never written here)."""

    archive: str
    dest: str

    @property
    def text(self) -> str:
        if "://" in self.archive or not self.archive.endswith(".tar"):
            raise RenderError(f"ADD {self.archive!r} is not a tar of the build context",
                              fix="this is a bug in envman's render: report it")
        return _one_line(f"ADD {self.archive} {self.dest}", "ADD")


@dataclass(frozen=True)
class UserStep:
    user: str

    @property
    def text(self) -> str:
        return _one_line(f"USER {self.user}", "USER")


@dataclass(frozen=True)
class ExecStep:
    """``ENTRYPOINT`` or ``CMD`` in exec form (a JSON array: no shell)."""

    instruction: Literal["ENTRYPOINT", "CMD"]
    argv: tuple[str, ...]

    @property
    def text(self) -> str:
        if self.instruction not in ("ENTRYPOINT", "CMD"):
            raise RenderError(f"{self.instruction!r} has no exec form", fix="this is a bug in envman's render: report it")
        return f"{self.instruction} {json.dumps([_one_line(a, self.instruction) for a in self.argv])}"


Step = Union[Comment, Blank, FromStep, ArgStep, EnvStep, LabelStep, CopyStep, AddStep, UserStep, ExecStep, RunStep]


def paragraphs(*blocks: list[Step] | tuple[Step, ...]) -> tuple[Step, ...]:
    """The non-empty ``blocks``, in order, with a :class:`Blank` between two."""
    out: list[Step] = []
    for block in blocks:
        if block:
            if out:
                out.append(Blank())
            out += block
    return tuple(out)


__all__ = [
    "AddStep", "ArgStep", "BindMount", "Blank", "BuildMount", "CacheMount", "Chain", "Command", "Comment", "CopyStep",
    "EnvStep", "ExecStep", "FromStep", "If", "LabelStep", "OrElse", "RunStep", "SecretMount",
    "Step", "UserStep", "paragraphs",
]
