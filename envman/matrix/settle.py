"""The rows ``envman matrix update`` derived, checked as the matrix files they would be written to:
rows that do not load, validate, resolve and render are dropped (and said) until the rest settle."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping
import tempfile

from envman.errors import EnvmanError, UserError
from envman.matrix.backfill import Gap
from envman.matrix.newrow import NewRow
from envman.errors import EnvmanError as _E
from envman.matrix.backfill import edited_files, patched_rows, row_sources


def _row_wheres(row: NewRow) -> set[str]:
    fw, version, variant = row.key
    return {f"{fw} {version} {variant}", f"{fw} {version}"}


def check_rows(rows: list[NewRow], files: list[Path], candidates: Mapping[Path, str],
               render: Callable[[Any], object]) -> tuple[list[NewRow], list[str]]:
    """The rows that load, validate, resolve and render with ``files`` (the matrix files of the
    target set-up, where ``candidates`` replace or add files); the others with why. ``render``
    renders a resolved stack (the caller passes envman's renderer: the matrix sits below it)."""
    from envman.stack.resolve import resolve_row
    from envman.matrix.load import load_files
    from envman.matrix.validate import validate

    with tempfile.TemporaryDirectory(prefix="envman-update-") as tmp:
        paths = []
        for i, f in enumerate([*files, *(c for c in candidates if c not in files)]):
            if f in candidates:
                t = Path(tmp) / f"{i}-{f.name}"
                t.write_text(candidates[f], encoding="utf-8")
                paths.append(t)
            else:
                paths.append(f)
        m = load_files(paths)
    bad: dict[tuple[str, str, str], str] = {}
    problems = validate(m)
    by_key = {(b.framework, str(b.version), b.variant): b for b in m.builds}
    for row in rows:
        mine = [p.what for p in problems if p.where in _row_wheres(row)]
        if mine:
            bad[row.key] = mine[0]
            continue
        b = by_key.get(row.key)
        if b is None:
            bad[row.key] = "not loaded"
            continue
        try:
            render(resolve_row(m, b))
        except _E as exc:
            bad[row.key] = exc.line()
    return [r for r in rows if r.key not in bad], [f"{r.name} ({r.data['variant']}): {bad[r.key]}" for r in rows if r.key in bad]


def plan_overlay(rows: list[NewRow], output: Path) -> dict[Path, str]:
    from envman.matrix.write import overlay_text, read_overlay

    existing = read_overlay(output)
    new_keys = {r.key for r in rows}
    kept = [(d["framework"], {k: v for k, v in d.items() if k != "framework"}) for d in existing
            if (d.get("framework"), str(d.get("version")), d.get("variant")) not in new_keys]
    return {output: overlay_text([*kept, *((r.framework, r.data) for r in rows)])}


def plan_shipped(rows: list[NewRow], directory: Path) -> dict[Path, str]:
    from envman.safefile import LARGE_LIMIT, read_text
    from envman.matrix.write import build_toml

    out: dict[Path, str] = {}
    for fw in sorted({r.framework for r in rows}):
        path = directory / f"{fw}.toml"
        try:
            text = read_text(path, what="shipped matrix file", limit=LARGE_LIMIT)
        except FileNotFoundError:
            raise UserError("the shipped matrix file is missing", where=str(path),
                            fix="run --write from a source checkout; nothing was written") from None
        if not text.endswith("\n"):
            text += "\n"
        out[path] = text + "".join("\n" + build_toml(r.data) for r in rows if r.framework == fw)
    return out


def settle(rows: list[NewRow], files: list[Path], plan: Callable[[list[NewRow]], dict[Path, str]],
           render: Callable[[Any], object]) -> tuple[list[NewRow], list[str], dict[Path, str]]:
    """Drop rows that fail the checks until the rest pass together; returns (rows, skipped, files)."""
    skipped: list[str] = []
    for _ in range(4):
        if not rows:
            return rows, skipped, {}
        candidates = plan(rows)
        ok, bad = check_rows(rows, files, candidates, render)
        skipped += bad
        if len(ok) == len(rows):
            return rows, skipped, candidates
        rows = ok
    raise EnvmanError("the derived rows do not settle into a valid matrix", where="envman matrix update",
                      fix="run `envman matrix validate`; nothing was written")


def settle_gaps(gaps: list[Gap], files: list[Path], planned: Mapping[Path, str], render: Callable[[Any], object], *,
                overlay: Callable[[list[NewRow]], dict[Path, str]] | None = None) -> tuple[list[Gap], list[str], dict[Path, str]]:
    """The backfill gaps (envman.matrix.backfill) whose edited rows load, validate and render with
    the rest (the others, with why), and the files to write: ``planned`` (the new rows' files) with
    the rows edited in place where they are, or, with ``overlay`` (``-o FILE``: it plans the
    overlay from extra rows), the whole edited rows added to the overlay."""
    sources = row_sources(files)
    skipped = [f"{g.name}: its row is in no matrix file read" for g in gaps if g.key not in sources]
    gaps = [g for g in gaps if g.key in sources]
    for _ in range(4):
        if not gaps:
            break
        cands = (overlay([NewRow(fw, row, ()) for fw, row in patched_rows(gaps, sources)]) if overlay is not None
                 else edited_files(gaps, sources, planned))
        stand_ins = [NewRow(g.framework, {"version": g.version, "variant": g.variant}, ()) for g in gaps]
        ok, bad = check_rows(stand_ins, files, cands, render)
        skipped += [f"backfill of {line}" for line in bad]
        if len(ok) == len(gaps):
            return gaps, skipped, cands
        keep = {r.key for r in ok}
        gaps = [g for g in gaps if g.key in keep]
    return [], skipped, dict(planned)
