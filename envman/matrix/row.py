"""One row of a matrix file read with checks: typed access to a TOML table whose errors name the
file, the key and what was expected, and the converters of its values (strings, versions, dates,
architectures, drivers). A key the reader did not ask for is an error once the row is read.
"""

from __future__ import annotations

import builtins
import datetime
import re
from typing import Any, Callable, Iterable, Iterator, TypeVar, overload

from packaging.version import InvalidVersion, Version

from envman.config import looks_like_token, secret_in_url, shown_url
from envman.errors import MatrixError
from envman.matrix.model import DEFAULT_PLATFORMS, PLATFORMS, STATUSES, Arch, DriverVersion

_T = TypeVar("_T")
_D = TypeVar("_D")


def shown_value(got: Any) -> str:
    """A refused value as an error may show it: every URL in it through
    :func:`envman.config.shown_url` (a token in a matrix URL is never echoed)."""

    def show(v: Any) -> Any:
        if isinstance(v, str) and "://" in v:
            return shown_url(v)
        if isinstance(v, list):
            return [show(x) for x in v]
        if isinstance(v, dict):
            return {k: show(x) for k, x in v.items()}
        return v
    return repr(show(got))


#: A URL inside a citation: a scheme, ``://`` and what follows up to a space, a quote or a bracket.
_URL_IN_TEXT_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>()\[\]{},;]*")

_SECRET_WHAT = {"credentials": "a URL with credentials (user:token@)", "query": "a URL with a query string",
                "token": "a URL with a part that looks like a token"}


def citation_problem(text: str) -> str | None:
    """Why a row's source (a URL or a precise reference) may not be kept, or ``None``. Sources
    (and notes) go into the image (``envman/stack.json``, the ``envman.stack`` label) and every registry it
    is pushed to, so every URL in one follows the index URLs' rules on secrets (no
    ``user:token@``, no query string, nothing token-like: :func:`envman.config.secret_in_url`),
    and no other word of it holds a known token prefix or a UUID."""
    for m in _URL_IN_TEXT_RE.finditer(text):
        why = secret_in_url(m.group(0).rstrip(".:!"))  # a sentence's stop is not part of the URL
        if why is not None:
            return _SECRET_WHAT[why]
    if any(looks_like_token(word, runs=False) for word in text.split()):
        return "a word that looks like a token"
    return None


class Row:
    """Typed access to one TOML table, with errors that name file, key and expectation."""

    def __init__(self, data: dict[str, Any], file: str, where: str) -> None:
        if not isinstance(data, dict):
            raise MatrixError(f"{where} must be a table", where=file, fix="see matrices/README.md")
        self.data = data
        self.file = file
        self.where = where
        self.used: set[str] = set()

    def fail(self, key: str, expected: str, got: Any = None) -> MatrixError:
        shown = "" if got is None else f", got {shown_value(got)}"
        return MatrixError(
            f"key {self.where}.{key}: expected {expected}{shown}",
            where=self.file,
            fix="fix the value (format: matrices/README.md)",
        )

    @overload
    def get(self, key: str, conv: Callable[[Any], _T], expected: str) -> _T: ...
    @overload
    def get(self, key: str, conv: Callable[[Any], _T], expected: str, *, default: _D) -> _T | _D: ...

    def get(self, key: str, conv: Callable[[Any], Any], expected: str, *, default: Any = ..., ) -> Any:
        self.used.add(key)
        if key not in self.data or self.data[key] in ("", None):
            if default is ...:
                raise self.fail(key, expected + " (required)")
            return default
        value = self.data[key]
        try:
            return conv(value)
        except (ValueError, TypeError, InvalidVersion) as exc:
            raise self.fail(key, expected, value) from exc

    def str(self, key: str, *, default: Any = ..., choices: Iterable[str] | None = None) -> Any:
        choices = tuple(choices) if choices else None

        def conv(v: Any) -> str:
            if not isinstance(v, str):
                raise TypeError
            if choices and v not in choices:
                raise ValueError
            return v

        expected = "one of " + ", ".join(repr(c) for c in choices) if choices else "a string"
        return self.get(key, conv, expected, default=default)

    def bool(self, key: builtins.str, default: bool = False) -> bool:
        def conv(v: Any) -> bool:
            if not isinstance(v, bool):
                raise TypeError
            return v

        return self.get(key, conv, "true or false", default=default)

    def float(self, key: builtins.str) -> float | None:
        def conv(v: Any) -> float:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                raise TypeError
            return float(v)

        return self.get(key, conv, "a non-negative number", default=None)

    def version(self, key: builtins.str, *, default: Any = ...) -> Any:
        return self.get(key, to_version, "a version string like '12.4'", default=default)

    def list(self, key: builtins.str, conv: Callable[[Any], Any], expected: builtins.str, *,
             default: Any = ()) -> tuple[Any, ...]:
        def lconv(v: Any) -> tuple[Any, ...]:
            if not isinstance(v, list):
                raise TypeError
            return tuple(conv(x) for x in v)

        return self.get(key, lconv, f"a list of {expected}", default=default)

    def strs(self, key: builtins.str, *, default: Any = ()) -> tuple[builtins.str, ...]:
        return self.list(key, to_str, "strings", default=default)

    def sources(self) -> tuple[builtins.str, ...]:
        src = self.get(
            "source",
            lambda v: tuple(to_str(x) for x in ([v] if isinstance(v, str) else v)),
            "a non-empty list of sources (URLs or precise references)",
        )
        if not src:
            raise self.fail("source", "a non-empty list of sources")
        return self._cited("source", src)

    def citations(self, key: builtins.str) -> tuple[builtins.str, ...]:
        """A list of sources other than ``source`` (``platform_source``, ...), checked as it is."""
        return self._cited(key, self.strs(key))

    def _cited(self, key: builtins.str, src: tuple[builtins.str, ...]) -> tuple[builtins.str, ...]:
        for text in src:
            why = citation_problem(text)
            if why is not None:  # the value is never shown: it may be the secret
                raise MatrixError(
                    f"key {self.where}.{key}: {why}, which would be written into every image built from the row",
                    where=self.file,
                    fix="cite the page without credentials, query string or token (a public URL or a precise reference)",
                )
        return src

    def status(self, key: builtins.str = "status") -> builtins.str:
        status: builtins.str = self.str(key, choices=STATUSES)
        return status

    def provenance(self) -> dict[builtins.str, Any]:
        """``source``, ``status`` and ``note``, which every kind of row carries (read in that order)."""
        return {"source": self.sources(), "status": self.status(), "note": self.note("note")}

    def note(self, key: builtins.str) -> builtins.str:
        """A row's note (prose, copied into the image with the stack like its sources), checked as
        a source is."""
        text: builtins.str = self.str(key, default="")
        return self._cited(key, (text,))[0] if text else text

    def platforms(self) -> tuple[builtins.str, ...]:
        """``platforms``: a non-empty, duplicate-free list out of PLATFORMS, kept in PLATFORMS order."""

        def conv(v: Any) -> tuple[builtins.str, ...]:
            if not isinstance(v, list) or not v or len(set(v)) != len(v) or any(p not in PLATFORMS for p in v):
                raise ValueError
            return tuple(p for p in PLATFORMS if p in v)

        expected = "a non-empty list without repeats out of " + ", ".join(repr(p) for p in PLATFORMS)
        return self.get("platforms", conv, expected, default=DEFAULT_PLATFORMS)

    def wheel_python(self) -> tuple[tuple[builtins.str, tuple[Version, ...]], ...]:
        """``wheel_python``: a table {package = [Python versions with wheels]}."""

        def conv(v: Any) -> tuple[tuple[builtins.str, tuple[Version, ...]], ...]:
            if not isinstance(v, dict):
                raise TypeError
            from packaging.utils import canonicalize_name  # not at import: it loads packaging.tags

            out: list[tuple[builtins.str, tuple[Version, ...]]] = []
            for name, pys in v.items():
                if not isinstance(pys, list) or not pys:
                    raise ValueError
                if pys == ["any"]:  # a pure-Python wheel (py3-none-any): every Python
                    out.append((canonicalize_name(name), ()))
                    continue
                out.append((canonicalize_name(name), tuple(sorted(to_version(p) for p in pys))))
            return tuple(sorted(out))

        return self.get("wheel_python", conv, "a table {package = [\"3.10\", ...]} (non-empty lists; [\"any\"] for a pure-Python wheel)", default=())

    def done(self) -> None:
        unknown = sorted(set(self.data) - self.used)
        if unknown:
            raise MatrixError(
                f"unknown key {self.where}.{unknown[0]}",
                where=self.file,
                fix="remove it or check its spelling (format: matrices/README.md)",
            )


def to_str(v: Any) -> str:
    if not isinstance(v, str):
        raise TypeError
    return v


def to_version(v: Any) -> Version:
    if not isinstance(v, str):
        raise TypeError
    return Version(v)


def to_date(v: Any) -> str:

    if isinstance(v, datetime.date) and not isinstance(v, datetime.datetime):
        return v.isoformat()
    if not isinstance(v, str):
        raise TypeError
    return datetime.date.fromisoformat(v).isoformat()


def to_update(v: Any) -> tuple[Version, DriverVersion]:
    """One ``{cuda, toolkit_driver}`` table of a release's ``updates``."""
    if not isinstance(v, dict) or set(v) != {"cuda", "toolkit_driver"}:
        raise ValueError
    cuda = to_version(v["cuda"])
    if len(cuda.release) != 3:
        raise ValueError
    return cuda, to_driver(v["toolkit_driver"])


def to_str_table(v: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(v, dict) or not all(isinstance(k, str) and isinstance(x, str) for k, x in v.items()):
        raise TypeError
    return tuple(sorted(v.items()))


def to_arch(v: Any) -> Arch:
    if not isinstance(v, str):
        raise TypeError
    return Arch.parse(v)


def to_driver(v: Any) -> DriverVersion:
    if not isinstance(v, str):
        raise TypeError
    return DriverVersion.parse(v)


def rows_of(doc: dict[str, Any], key: str, file: str) -> list[dict[str, Any]]:
    rows = doc.get(key, [])
    if not isinstance(rows, list):
        raise MatrixError(f"key {key}: expected an array of tables ([[{key}]])", where=file)
    return rows


def each_row(doc: dict[str, Any], key: str, file: str) -> Iterator[Row]:
    """Each row of the array of tables ``key``; once the caller has read it (the loop moves on),
    a key it did not read is an error."""
    for i, raw in enumerate(rows_of(doc, key, file)):
        r = Row(raw, file, f"{key}[{i}]")
        yield r
        r.done()
