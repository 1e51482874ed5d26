"""Write framework rows as matrix TOML: an overlay file (``matrix update -o FILE``) or the
shipped ``matrices/<framework>.toml`` (``--write``). Every file is written to a temporary
sibling and renamed into place only after all of them were written, so a failure leaves the
old files untouched.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Iterable, Mapping

from envman.errors import MatrixError, UserError

_BARE_KEY = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def toml_string(s: str) -> str:
    out = ['"']
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def toml_key(k: str) -> str:
    return k if k and set(k) <= _BARE_KEY else toml_string(k)


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return toml_string(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, Mapping):
        return "{" + ", ".join(f"{toml_key(k)} = {toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def build_toml(row: Mapping[str, Any], *, framework: str | None = None) -> str:
    """One ``[[build]]`` table; nested tables (``derived``, ``wheel_python``) as sub-tables."""
    lines = ["[[build]]"]
    if framework:
        lines.append(f"framework = {toml_string(framework)}")
    subs = []
    for k, v in row.items():
        if isinstance(v, Mapping):
            subs.append((k, v))
        else:
            lines.append(f"{toml_key(k)} = {toml_value(v)}")
    for k, table in subs:
        lines.append(f"[build.{toml_key(k)}]")
        lines += [f"{toml_key(sk)} = {toml_value(sv)}" for sk, sv in table.items()]
    return "\n".join(lines) + "\n"


OVERLAY_HEADER = (
    "# Written by `envman matrix update`: framework rows derived from package index metadata.\n"
    "# Each row's [build.derived] table says how and from which URL a fact was derived; facts\n"
    "# that could not be derived are listed as unconfirmed in its note.\n"
    "schema = 1\nkind = \"framework\"\n"
)


def read_overlay(path: Path) -> list[dict[str, Any]]:
    """Rows of an existing overlay (each with its ``framework``), [] when the file is absent."""
    from envman.safefile import LARGE_LIMIT, load_toml

    try:
        doc, _ = load_toml(path, what="matrix overlay", limit=LARGE_LIMIT)
    except FileNotFoundError:
        return []
    if doc.get("kind") != "framework":
        raise UserError("exists and is not a framework matrix file", where=str(path),
                        fix="give -o a new file or a file written by `envman matrix update`; nothing was written")
    top = doc.get("framework")
    rows = []
    for raw in doc.get("build", []):
        if isinstance(raw, dict):
            rows.append({"framework": raw.get("framework", top), **{k: v for k, v in raw.items() if k != "framework"}})
    return rows


def overlay_text(rows: Iterable[tuple[str, Mapping[str, Any]]]) -> str:
    return OVERLAY_HEADER + "".join("\n" + build_toml(row, framework=fw) for fw, row in rows)


def atomic_write_all(files: Mapping[Path, str]) -> None:
    """Write every file to a temporary sibling first, then rename them all into place."""
    temps: list[tuple[str, Path]] = []
    try:
        for path, text in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            temps.append((tmp, path))
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            if path.exists():
                os.chmod(tmp, path.stat().st_mode & 0o777)
            else:
                os.chmod(tmp, 0o644)
    except OSError as exc:
        for tmp, _ in temps:
            Path(tmp).unlink(missing_ok=True)
        raise MatrixError(f"cannot write the matrix file: {exc.strerror}", where=str(exc.filename or ""),
                          fix="check the directory exists and is writable; nothing was written") from None
    for tmp, path in temps:
        os.replace(tmp, path)
