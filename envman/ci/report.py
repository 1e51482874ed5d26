"""Support-matrix reports from ``envman ci run`` results: merged across shards, as one
self-contained HTML page or as Markdown.

The page shows framework versions down and CUDA versions across; every cell says its result in
words and a symbol as well as a colour (pass, CPU only, fail, not buildable here, not tested,
not in matrix) and opens the stack details and probe figures on click. It carries its CSS, JS
and data inline and fetches nothing.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from packaging.version import InvalidVersion, Version
import re

from envman.errors import UserError, counted
from envman import __version__
from envman.errors import EnvmanError
from envman.errors import printable

if TYPE_CHECKING:
    from envman.matrix.model import Matrix

#: Cell states, worst first: a cell holding several rows (variants) shows the worst of them.
STATES = ("fail", "not-buildable", "not-tested", "cpu-only", "pass", "not-in-matrix")
#: The same states in the order the legend explains them.
LEGEND = ("pass", "cpu-only", "fail", "not-buildable", "not-tested", "not-in-matrix")
LABELS = {
    "pass": "pass",
    "cpu-only": "CPU only",
    "fail": "fail",
    "not-buildable": "not buildable here",
    "not-tested": "not tested",
    "not-in-matrix": "not in matrix",
}
SYMBOLS = {"pass": "✓", "cpu-only": "◐", "fail": "✗", "not-buildable": "⊘", "not-tested": "?", "not-in-matrix": "—"}
MEANINGS = {
    "pass": "built, and every smoke check passed: on a GPU for a CUDA row, the CPU checks for a CPU row",
    "cpu-only": "a CUDA row built and smoke-tested, but no GPU check could run on that runner",
    "fail": "a step failed (validate, render, lint, build or smoke)",
    "not-buildable": "could not be validated on that runner (--base pull on a base deleted upstream with no registry "
                     "mirror, or no GPU when required); a deleted base is otherwise rebuilt from NVIDIA's recipe",
    "not-tested": "in the matrix, but no result in these reports",
    "not-in-matrix": "the matrix has no row for this framework version and CUDA version",
}
FRAMEWORK_NAMES = {"torch": "PyTorch", "tensorflow": "TensorFlow", "jax": "JAX", "onnxruntime": "ONNX Runtime"}
RESULTS_FILE = "results.json"
_DETAIL_LIMIT = 4000  # characters of a log tail kept in the page


# --- loading and merging -------------------------------------------------------------------------


@dataclass
class Loaded:
    results: list[dict[str, Any]]
    sources: list[str]
    notes: list[str] = field(default_factory=list)


#: The fields of a row result the report reads, and what each must be (``envman ci run`` writes
#: them so): text for the first five, always there; the rest text, a table or absent / null.
ROW_TEXT = ("row", "result", "framework", "framework_version", "variant")
ROW_OPTIONAL = {"cuda": str, "name": str, "reason": str, "finished": str, "started": str, "shard": str, "image": str,
                "render_hash": str, "steps": dict, "probe": dict, "stack": dict, "runner": dict}


def _rows_of(data: Any, where: str) -> list[dict[str, Any]]:
    from envman.project.file import kind_of

    rows = data.get("rows") if isinstance(data, dict) else data
    if not isinstance(rows, list) or not all(isinstance(r, dict) and "row" in r and "result" in r for r in rows):
        raise UserError("not an envman ci results file (expected a list of row results)", where=where,
                        fix="pass the --report DIR of `envman ci run` or its results.json")
    for i, r in enumerate(rows, 1):
        wrong = [f"{k} is {kind_of(r.get(k))}, not text" for k in ROW_TEXT if not isinstance(r.get(k), str)]
        wrong += [f"{k} is {kind_of(r[k])}" for k, t in ROW_OPTIONAL.items() if r.get(k) is not None
                  and not isinstance(r[k], t)]
        if not wrong and r["result"] not in STATES:
            wrong.append("its result is not one of " + ", ".join(STATES))
        if wrong:
            raise UserError(f"row result {i}: {wrong[0]}" + (f" (and {len(wrong) - 1} more)" if len(wrong) > 1 else ""),
                            where=where, fix="pass the results.json `envman ci run` wrote, unedited")
    return rows


def load_results(paths: Sequence[str | Path]) -> Loaded:
    """Read ``results.json`` from each path (a report directory or the file itself) and merge
    them. A row present in several shards keeps its latest result (by ``finished``)."""
    merged: dict[str, dict[str, Any]] = {}
    sources, notes = [], []
    for p in paths:
        path = Path(p)
        file = path / RESULTS_FILE if path.is_dir() else path
        from envman.safefile import LARGE_LIMIT, read_text

        try:
            data = json.loads(read_text(file, what="results file", limit=LARGE_LIMIT))
        except FileNotFoundError:
            raise UserError("no results found", where=str(file), fix="run `envman ci run --report DIR` first, then pass DIR")
        except (ValueError, RecursionError) as exc:  # a JSON error, or an integer too long to convert
            raise UserError(f"not valid JSON ({str(exc)[:200]})", where=str(file))
        sources.append(str(file))
        for r in _rows_of(data, str(file)):
            old = merged.get(r["row"])
            if old is not None:
                notes.append(f"{r['row']} appears in several results; the latest is shown")
                if (old.get("finished") or "") > (r.get("finished") or ""):
                    continue
            merged[r["row"]] = r
    return Loaded(list(merged.values()), sources, notes)


# --- the grid ------------------------------------------------------------------------------------


@dataclass
class Entry:
    row: str
    result: str  # one of STATES except not-in-matrix
    variant: str
    name: str | None
    reason: str


@dataclass
class Cell:
    column: str  # "cpu" or a CUDA "major.minor"
    entries: list[Entry] = field(default_factory=list)

    @property
    def state(self) -> str:
        if not self.entries:
            return "not-in-matrix"
        return min((e.result for e in self.entries), key=STATES.index)


@dataclass
class FrameworkTable:
    framework: str
    title: str
    columns: list[str]
    rows: list[tuple[str, list[Cell]]]  # (framework version, cells in column order)


def _vkey(v: str) -> tuple:
    try:
        return (1, Version(v), "")
    except InvalidVersion:
        return (0, Version("0"), v)


def _column_key(c: str) -> tuple:
    return (-1, Version("0"), "") if c == "cpu" else _vkey(c)


def _matrix_entries(matrix: Matrix) -> list[dict[str, Any]]:
    out = []
    for b in matrix.builds:
        out.append({
            "row": b.name, "framework": b.framework, "framework_version": str(b.version), "variant": b.variant,
            "cuda": f"{b.cuda.major}.{b.cuda.minor}" if b.cuda else None,
        })
    return out


def support_tables(results: Sequence[dict[str, Any]], matrix: Matrix | None = None, *, full_matrix: bool = False) -> list[FrameworkTable]:
    """Framework tables: versions down (newest first), ``cpu`` then CUDA versions across.

    With ``matrix``, a cell the matrix has a row for but the results do not is ``not-tested``
    (rather than ``not-in-matrix``); ``full_matrix`` adds every matrix row to the grid.
    """
    known = {r["row"]: r for r in results}
    in_matrix = {m["row"]: m for m in _matrix_entries(matrix)} if matrix is not None else {}
    shown = list(results)
    if full_matrix:
        shown += [m for name, m in in_matrix.items() if name not in known]
    frameworks: dict[str, dict[str, dict[str, Cell]]] = {}
    columns: dict[str, set[str]] = {}
    for r in shown:
        fw, ver, col = r["framework"], r["framework_version"], r.get("cuda") or "cpu"
        frameworks.setdefault(fw, {}).setdefault(ver, {})
        columns.setdefault(fw, set()).add(col)
    # rows of the matrix that fall into a shown (framework version, column) but were not run
    untested = [m for name, m in in_matrix.items() if name not in known]
    for r in list(shown) + untested:
        fw, ver, col = r["framework"], r["framework_version"], r.get("cuda") or "cpu"
        if fw not in frameworks or ver not in frameworks[fw] or col not in columns[fw]:
            continue
        cell = frameworks[fw][ver].setdefault(col, Cell(col))
        if any(e.row == r["row"] for e in cell.entries):
            continue
        tested = r["row"] in known
        cell.entries.append(Entry(r["row"], r["result"] if tested else "not-tested", r["variant"],
                                  r.get("name") if tested else None, r.get("reason", "") if tested else ""))
    tables = []
    order = {f: i for i, f in enumerate(FRAMEWORK_NAMES)}
    for fw in sorted(frameworks, key=lambda f: (order.get(f, 99), f)):
        cols = sorted(columns[fw], key=_column_key)
        rows = []
        for ver in sorted(frameworks[fw], key=_vkey, reverse=True):
            cells = frameworks[fw][ver]
            row_cells = []
            for c in cols:
                cell = cells.get(c, Cell(c))
                cell.entries.sort(key=lambda e: e.row)
                row_cells.append(cell)
            rows.append((ver, row_cells))
        tables.append(FrameworkTable(fw, FRAMEWORK_NAMES.get(fw, fw), cols, rows))
    return tables


def counts(results: Iterable[dict[str, Any]]) -> dict[str, int]:
    out = {s: 0 for s in ("pass", "cpu-only", "fail", "not-buildable")}
    for r in results:
        out[r["result"]] = out.get(r["result"], 0) + 1
    return out


# --- Markdown ------------------------------------------------------------------------------------


def _md(text: Any) -> str:
    """A table cell or line of data from results files: raw HTML escaped (GitHub renders it in a
    job summary), every character Markdown gives a meaning inline (links, images, emphasis, code,
    headings, table pipes, backslashes) backslash-escaped, line breaks and control characters
    shown, never obeyed."""
    import html


    s = str(text if text is not None else "").replace("\n", " ").replace("\r", " ")
    return re.sub(r"([\\`*_\[\]()!~#|<>])", r"\\\1", printable(html.escape(s, quote=False))).strip()


def markdown_summary(results: Sequence[dict[str, Any]], *, title: str = "envman CI validation",
                     sources: Sequence[str] = (), notes: Sequence[str] = (), matrix: Matrix | None = None) -> str:
    """A Markdown summary: totals, a compact support grid per framework, then one line per row.
    With ``matrix``, grid cells the matrix has a row for but the results do not say "not tested"."""
    c = counts(results)
    lines = [f"# {title}", ""]
    total = len(results)
    lines.append(f"{counted(total, 'row')}: " + ", ".join(f"{SYMBOLS[s]} {c[s]} {LABELS[s]}" for s in c) + ".")
    shards = sorted({shard for r in results if (shard := r.get("shard"))})
    if shards:
        lines.append(f"Shards: {', '.join(_md(s) for s in shards)}.")
    if sources:
        lines.append("Sources: " + ", ".join(_md(s) for s in sources) + ".")
    for n in notes:
        lines.append(f"> {_md(n)}")
    lines.append("")
    if not results:
        lines.append("No rows were validated.")
        return "\n".join(lines) + "\n"
    lines.append("Legend: " + "; ".join(f"{SYMBOLS[s]} {LABELS[s]}" for s in LEGEND) + ".")
    lines.append("")
    for t in support_tables(results, matrix):
        lines.append(f"## {_md(t.title)}")
        lines.append("")
        lines.append("| version | " + " | ".join("CPU" if c_ == "cpu" else f"CUDA {_md(c_)}" for c_ in t.columns) + " |")
        lines.append("|---" * (len(t.columns) + 1) + "|")
        for ver, cells in t.rows:
            lines.append(f"| {_md(ver)} | " + " | ".join(f"{SYMBOLS[cell.state]} {LABELS[cell.state]}" for cell in cells) + " |")
        lines.append("")
    lines.append("## Rows")
    lines.append("")
    lines.append("| row | stack | result | steps | reason |")
    lines.append("|---|---|---|---|---|")
    for r in sorted(results, key=lambda r: (STATES.index(r["result"]) if r["result"] in STATES else 0, r["row"])):
        steps = " ".join(f"{_md(k)} {SYMBOLS.get(_step_state(s['status']), '·')}" for k, s in (r.get("steps") or {}).items())
        lines.append(f"| {_md(r['row'])} | {_md(r.get('name') or '-')} | {SYMBOLS.get(r['result'], '')} "
                     f"{_md(LABELS.get(r['result'], r['result']))} | {steps} | {_md(str(r.get('reason') or '')[:300])} |")
    return "\n".join(lines) + "\n"


def _step_state(status: str) -> str:
    return {"skip": "not-tested"}.get(status, status)


# --- HTML ----------------------------------------------------------------------------------------


def _trim(result: dict[str, Any]) -> dict[str, Any]:
    """What the page needs of a result: everything, with long log tails cut to their end."""
    r = json.loads(json.dumps(result))
    for s in (r.get("steps") or {}).values():
        if isinstance(s, dict) and isinstance(s.get("detail"), str) and len(s["detail"]) > _DETAIL_LIMIT:
            s["detail"] = "…" + s["detail"][-_DETAIL_LIMIT:]
    return r


def _script_json(data: Any) -> str:
    """JSON safe inside <script>: no ``</script>``, no ``<!--``, no HTML-significant characters."""
    text = json.dumps(data, ensure_ascii=False)  # key order kept: steps run in that order
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e") \
        .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _environment():
    """HTML gets its own Jinja environment: this output is HTML, so autoescaping is on (the
    Dockerfile environment turns it off because Dockerfiles are not HTML). Strict as the other."""
    import jinja2

    from envman.paths import data_dir

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(data_dir("templates") / "report")),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render_html(results: Sequence[dict[str, Any]], *, matrix: Matrix | None = None, full_matrix: bool = False,
                title: str = "envman support matrix", sources: Sequence[str] = (),
                notes: Sequence[str] = (), generated: str | None = None) -> str:
    """The whole page as one string (inline CSS, JS and data; no external fetch)."""
    from markupsafe import Markup


    tables = support_tables(results, matrix, full_matrix=full_matrix)
    data = {"rows": {r["row"]: _trim(r) for r in results}, "untested": {}}
    if matrix is not None:
        from envman.stack.resolve import resolve_row

        shown = {e.row for t in tables for _, cells in t.rows for cell in cells for e in cell.entries}
        for b in matrix.builds:
            if b.name in shown and b.name not in data["rows"]:
                try:
                    stack = resolve_row(matrix, b).to_json()
                except EnvmanError:
                    stack = None
                data["untested"][b.name] = {"row": b.name, "result": "not-tested", "stack": stack,
                                            "reason": "in the matrix, but no result in these reports"}
    generated = generated or datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
    shards = sorted({shard for r in results if (shard := r.get("shard"))})
    return _environment().get_template("support-matrix.html.j2").render(
        title=title,
        tables=tables,
        counts=counts(results),
        total=len(results),
        legend=LEGEND,
        labels=LABELS,
        symbols=SYMBOLS,
        meanings=MEANINGS,
        sources=list(sources),
        notes=list(notes),
        shards=shards,
        generated=generated,
        version=__version__,
        data_json=Markup(_script_json(data)),
    )


__all__ = ["load_results", "support_tables", "markdown_summary", "render_html", "counts", "STATES", "LABELS"]
