"""One ``envman matrix update``: its options checked, the index read (``--check``: only which
releases are newer), the derived rows settled against the matrix files they would join, and
written (``-o FILE`` or ``--write``) or not (a dry run). The command line parses its flags into an
:class:`UpdateRequest` and prints the :class:`CheckReport` or :class:`UpdateReport` returned."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol

from envman.errors import EnvmanError, UserError
from envman.matrix.backfill import find_gaps, pins_from
from envman.matrix.gaps import cuda_lines, gpu_list_age
from envman.matrix.index import Http, IndexFileError
from envman.matrix.model import Matrix
from envman.matrix.update import DERIVERS, PROGRESS, PROJECTS, TORCH_INDEX, Result, Settings, IndexReader, discover
from envman.config import Invalid, check_url, load_matrix_config
from envman.matrix.index import PYPI_SIMPLE
from envman.paths import matrices_dir

if TYPE_CHECKING:
    from envman.matrix.newrow import NewRow
    from envman.matrix.source import MatrixSource


class _Network(Protocol):
    @property
    def pip_index(self) -> str | None: ...

    @property
    def ca_bundle(self) -> Path | None: ...


#: The ``[network]`` options given on the command line (``None``: not given) -> merged with the
#: user config and checked (``RenderOptions.from_config``).
NetworkOptions = Callable[[dict[str, Any]], _Network]


def find_updates(http: Http, settings: Settings, matrix: Matrix, progress: PROGRESS = lambda s: None) -> Result:
    """Derive rows for every release newer than ``matrix`` (nothing is written here)."""
    ctx = IndexReader(http, settings, matrix, progress)
    result = Result()
    try:
        if settings.cuda:
            new, result.unfilled = cuda_lines(ctx, result.warnings)
            if new:
                result.new_releases["cuda"] = new
        for fw in settings.frameworks:
            DERIVERS[fw](ctx, result)
        if settings.backfill:
            pins_of = pins_from(ctx.files, lambda f: ctx.metadata([f])[f.url].requires_dist)
            found = find_gaps(matrix, settings.frameworks, ctx.files, ctx.page_url, pins_of)
            result.gaps, result.unfilled = found.gaps, result.unfilled + found.unfilled
    except IndexFileError as exc:
        raise EnvmanError(exc.what, where=exc.where, fix="; ".join([*filter(None, [exc.fix]), "nothing was written"])) from None
    finally:
        ctx.pool.shutdown(wait=False, cancel_futures=True)
    return result



def check_only(http: Http, settings: Settings, matrix: Matrix, progress: PROGRESS = lambda s: None) -> dict[str, list[str]]:
    """Releases on the index newer than ``matrix`` per framework (no metadata reads); with
    ``settings.cuda`` also CUDA releases the matrix lacks and why the GPU list is stale."""
    ctx = IndexReader(http, settings, matrix, progress)
    try:
        out: dict[str, list[str]] = {}
        if settings.cuda:
            new, _ = cuda_lines(ctx, [])
            if new:
                out["cuda"] = new
            _, stale = gpu_list_age(matrix)
            if stale:
                out["gpus"] = stale
        for fw in settings.frameworks:
            _, releases = discover(ctx, fw, backfill=False)  # --check: releases newer than the matrix only
            if releases:
                out[fw] = [str(v) for v in releases]
        return out
    finally:
        ctx.pool.shutdown(wait=False, cancel_futures=True)




@dataclass(frozen=True)
class UpdateRequest:
    """``envman matrix update``'s options, as given (``None``: not given)."""

    frameworks: tuple[str, ...] = ()  # as typed: torch, tf, ort, ...
    output: Path | None = None
    write: bool = False
    check: bool = False
    pip_index: str | None = None
    torch_index: str | None = None
    no_torch_index: bool = False
    new_only: bool = False
    ca_bundle: Path | None = None
    timeout: float = 30.0


@dataclass(frozen=True)
class CheckReport:
    """``--check``: the releases newer than the shipped matrix, per framework (``gpus``: why the GPU
    list is stale)."""

    behind: dict[str, list[str]]
    requests: int
    seconds: float

    def summary(self) -> dict[str, Any]:
        return {"behind": bool(self.behind), "new_releases": self.behind, "requests": self.requests,
                "seconds": self.seconds}


@dataclass
class UpdateReport:
    """The rows derived and settled, and the files written (``planned``, when ``writes``)."""

    result: Result
    planned: dict[Path, str]
    writes: bool  # -o or --write: planned was written
    requests: int
    seconds: float
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def rows(self) -> list[NewRow]:
        return self.result.rows


def update_settings(request: UpdateRequest, network: NetworkOptions) -> tuple[Settings, Http]:
    """The run's settings and HTTP client: the options over ``[network]`` (``network`` merges and
    checks them: envman's render options, which sit above the matrix) and ``[matrix]`` of the user
    config; a bad combination or value is a :class:`UserError`."""
    from envman.stack.names import ALIASES

    if request.output is not None and request.write:
        raise UserError("give -o FILE or --write, not both", where="envman matrix update", fix="-o writes an overlay; --write changes the shipped matrix")
    if request.check and (request.output is not None or request.write):
        raise UserError("--check only reports; it writes nothing", where="envman matrix update", fix="drop -o/--write, or drop --check")
    fws: list[str] = []
    for f in request.frameworks:
        fw = {"ort": "onnxruntime"}.get(f.lower()) or ALIASES.get(f.lower())
        if fw not in PROJECTS:
            raise UserError(f"unknown framework {f!r}", where="--framework", fix="use torch, tensorflow, jax or onnxruntime")
        fws.append(fw)
    net = network({"pip_index": request.pip_index, "ca_bundle": request.ca_bundle})
    mcfg = load_matrix_config()
    tindex = None
    if not request.no_torch_index:
        try:
            tindex = check_url(request.torch_index, what="torch index") if request.torch_index else (mcfg.torch_index or TORCH_INDEX)
        except Invalid as exc:
            raise UserError(exc.what, where="--torch-index", fix=exc.fix) from None

    settings = Settings(
        index=net.pip_index or PYPI_SIMPLE, torch_index=tindex,
        torch_index_required=bool(request.torch_index or mcfg.torch_index),
        frameworks=tuple(dict.fromkeys(fws)) or tuple(PROJECTS),
        cuda=not fws,  # --framework narrows the run to frameworks
        backfill=not request.new_only,
    )
    return settings, Http(ca_bundle=net.ca_bundle, timeout=request.timeout)


def compared_files(request: UpdateRequest, source: MatrixSource) -> list[Path]:
    """What the new rows are compared with and checked against: the shipped matrix for --check
    and --write; everything the user loads (and the overlay itself) for -o and a dry run."""
    if request.check or request.write:
        return list(source.shipped_files)
    # The overlay being written may be one of the user's files (config, --matrix) that does
    # not exist yet: it is read when it exists, never required.
    output = request.output
    target = output.expanduser().absolute() if output is not None else None
    files = [f for f in source.files if f.expanduser().absolute() != target]
    if output is not None and output.exists():
        files.append(output)
    return files


def run_update(request: UpdateRequest, source: MatrixSource, *, render: Callable[[Any], object],
               network: NetworkOptions, progress: PROGRESS = lambda s: None) -> CheckReport | UpdateReport:
    """One ``envman matrix update``: ``render`` renders a resolved stack and ``network`` merges the
    network options with the user config (the caller passes envman's: the matrix sits below the
    render); ``progress`` hears what is being read."""
    from envman.matrix.load import load_files
    from envman.matrix.settle import plan_overlay, plan_shipped, settle, settle_gaps
    from envman.matrix.write import atomic_write_all

    settings, http = update_settings(request, network)
    files = compared_files(request, source)
    base = load_files(files)
    started = time.monotonic()
    if request.check:
        behind = check_only(http, settings, base, progress)
        return CheckReport(behind, http.requests, round(time.monotonic() - started, 1))
    result = find_updates(http, settings, base, progress)
    seconds = round(time.monotonic() - started, 1)
    output, writes = request.output, request.write or request.output is not None
    plan: Callable[[list[NewRow]], dict[Path, str]]
    if request.write:
        plan = lambda rows: plan_shipped(rows, matrices_dir())  # noqa: E731
    elif output is not None:
        plan = lambda rows: plan_overlay(rows, output)  # noqa: E731
    else:
        from envman.matrix.write import overlay_text

        dry = Path("(dry run).toml")
        plan = lambda rows: {dry: overlay_text((r.framework, r.data) for r in rows)}  # noqa: E731
    rows, skipped, planned = settle(result.rows, files, plan, render)
    result.rows = rows
    result.skipped += skipped
    result.gaps, skipped, planned = settle_gaps(
        result.gaps, files, planned, render,
        overlay=(lambda extra: plan_overlay([*rows, *extra], output)) if output is not None else None)
    result.skipped += skipped
    if planned and writes:
        atomic_write_all(planned)
    summary = {**result.summary(http), "written": [str(p) for p in planned] if writes else [], "seconds": seconds}
    return UpdateReport(result, planned, writes, http.requests, seconds, summary)
