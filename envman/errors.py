"""The one exception family the CLI turns into a one-line message and an exit code.

Domain code raises these; ``envman.cli`` catches them once at the edge (fastapi-cli style).
"""

from __future__ import annotations

import re
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (hot path)
if TYPE_CHECKING:
    from typing import Iterable

#: Characters that change what a terminal shows rather than showing themselves: C0 controls
#: (ESC starts a control sequence, CR returns to the line's start, LF forges a new line), DEL,
#: C1 controls (U+009B is a one-character CSI), the bidirectional overrides, embeddings and
#: isolates (U+202A-U+202E, U+2066-U+2069: "Trojan Source"), the invisible direction marks and
#: the Unicode line and paragraph separators.
#: Letters that draw nothing (Hangul fillers): ``str.isprintable`` counts them as printable.
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0")
#: How much of one value a message shows before it says how much more there was.
CLIP = 300


def _escape(c: str) -> str:
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def printable(text: object) -> str:
    """``text`` with every character that is not plain visible text written as a visible escape
    (``\\x1b``, ``\\u202e``, ``\\U000e0063``): controls, format characters (zero-width, bidi
    overrides, tag characters), line and paragraph separators, spaces other than the ASCII space,
    unassigned and private-use code points, surrogates, and letters that draw nothing. What came
    from a file or a state file is shown, never obeyed, and two different values never look the
    same. Ordinary printable text, any script or emoji, is unchanged."""
    s = str(text)
    if s.isprintable() and _BLANK_LETTERS.isdisjoint(s):
        return s
    return "".join(_escape(c) if not c.isprintable() or c in _BLANK_LETTERS else c for c in s)


#: A terminal's escape sequences: CSI (``ESC [ ... final``, colours and cursor moves), OSC (``ESC ]
#: ... BEL`` or ``ESC \\``), a character set's choice (``ESC ( B``) and the two-character ones.
#: Build tools colour their output (apt's and pip's warnings, docker's own ``ESC[0m``).
_ANSI = r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[()*+][0-~]|[@-Z\\-_])"


def without_ansi(text: str) -> str:
    """``text`` without terminal escape sequences (a log line as its tool meant it to read); any
    other control character stays, for :func:`printable` to show."""
    if "\x1b" not in text:
        return text

    return re.sub(_ANSI, "", text)


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, the noun plural unless ``n`` is 1: ``1 line``, ``2 lines``, ``0 CUDA
    releases``; ``plural`` where adding an s is wrong."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def shell_quote(word: str) -> str:
    """``word`` quoted for bash so that the line both shows and means it: :func:`shlex.quote` for
    visible text, else bash's ``$'...'`` with every character :func:`printable` would escape
    written as its UTF-8 bytes, ``\\xHH`` each (a byte that was not UTF-8, kept by
    surrogateescape, as that byte): bash writes ``\\uHHHH`` in the locale's encoding, so under
    ``LC_ALL=C`` a pasted ``$'\\u202e'`` would be another argument. A copied dry-run line runs
    the same argv in any locale; a terminal shows every character of it."""
    import shlex

    if printable(word) == word:
        return shlex.quote(word)
    out = []
    for c in word:
        n = ord(c)
        if c in "\\'":
            out.append("\\" + c)
        elif 0xDC80 <= n <= 0xDCFF:
            out.append(f"\\x{n - 0xDC00:02x}")
        elif printable(c) != c:
            out.append("".join(f"\\x{b:02x}" for b in c.encode("utf-8", "surrogatepass")))
        else:
            out.append(c)
    return "$'" + "".join(out) + "'"


def shell_join(argv: Iterable[str]) -> str:
    """``argv`` as one bash line, each word through :func:`shell_quote`."""
    return " ".join(shell_quote(w) for w in argv)


def stderr_line(line: str) -> None:
    """Write ``line`` to stderr as one :func:`printable` line, flushed (what a command says
    beside its output: warnings, progress, the error boundary's message)."""
    sys.stderr.write(printable(line) + "\n")
    sys.stderr.flush()


def clip(text: object, limit: int = CLIP) -> str:
    """``text`` cut to ``limit`` characters, saying how many more there were."""
    s = str(text)
    return s if len(s) <= limit else f"{s[:limit]}… ({len(s) - limit} more characters)"


def clip_list(items: list[str], limit: int = CLIP, sep: str = ", ") -> str:
    """``items`` joined with ``sep``, at most about ``limit`` characters of them, then
    ``… (N more)``: a refusal names what it refuses without printing thousands of entries."""
    out: list[str] = []
    size = 0
    for i, item in enumerate(items):
        if out and size + len(sep) + len(item) > limit:
            return sep.join(out) + f"{sep}… ({len(items) - i} more)"
        out.append(clip(item, limit))
        size += len(sep) * bool(i) + len(out[-1])
    return sep.join(out)



class EnvmanError(Exception):
    """A failure the user can act on: *what* went wrong, *where*, and *how to fix it*.

    ``exit_code`` follows the CLI contract: 2 for bad input (a name, a file, an option),
    1 for an operation that ran and failed (a build, a smoke test, a verdict).
    """

    exit_code = 1

    def __init__(self, what: str, *, where: str | None = None, fix: str | None = None) -> None:
        self.what = what
        self.where = where
        self.fix = fix
        super().__init__(self.line())

    def line(self) -> str:
        what = clip(self.what, 4 * CLIP)
        parts = [f"{clip(self.where)}: {what}" if self.where else what]
        if self.fix:
            parts.append(clip(self.fix, 2 * CLIP))
        # One line, always: user data (a path, a matrix value, a file's command) must neither break
        # it nor drive the terminal; a line break is shown as a space, any other control escaped.
        return " — ".join(printable(p.replace("\n", " ")).strip() for p in parts)


class UserError(EnvmanError):
    """Bad input: an unknown name, a malformed file, an invalid option value (exit 2)."""

    exit_code = 2


class MatrixError(UserError):
    """A matrix file (shipped or user-supplied) is malformed or inconsistent."""


class ResolveError(UserError):
    """A stack name matches nothing in the matrix."""


class RenderError(UserError):
    """A value cannot be rendered safely into a Dockerfile."""


class EngineError(EnvmanError):
    """The Docker engine is unreachable or refused an operation."""


class BuildError(EnvmanError):
    """An image build failed; carries the tail of the build log."""

    step: str | None = None  # the failing step, when the build pipeline knows it (envman.images.build)

    def __init__(self, what: str, *, log_tail: str = "", **kw) -> None:
        self.log_tail = log_tail
        super().__init__(what, **kw)


class SmokeError(EnvmanError):
    """A smoke test failed; the image was not promoted."""
