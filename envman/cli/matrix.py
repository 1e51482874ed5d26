"""``envman matrix ...``: list, show, explain and validate the compatibility matrix."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from envman.errors import counted

from envman.cli.complete import complete_stack, complete_gpu

if TYPE_CHECKING:  # helpers' annotations only (typer reads the commands' at run time)
    from packaging.version import Version

    from envman.matrix.refresh import CheckReport, UpdateReport

    from envman.matrix.model import CudaRelease, Matrix
    from envman.stack.names import Stack

from rich.markup import escape

from envman.cli._out import console, emit_json, plain, tagged

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
MatrixOpt = Annotated[Optional[list[Path]], typer.Option("--matrix", "-m", help="Extra matrix file (repeatable), as `envman --matrix`.", show_default=False)]


def _extra_matrix(files: list[Path] | None) -> None:
    """``--matrix`` given after the sub-command adds to the root option's files."""
    from envman.cli import STATE, matrix_source

    STATE.matrix = matrix_source().adding(files or ())


def ls(
    framework: Annotated[Optional[str], typer.Option("--framework", "-f", help="torch, tensorflow (tf), jax, onnxruntime")] = None,
    cuda: Annotated[Optional[str], typer.Option("--cuda", help="CUDA version or prefix: 12, 12.4; 'cpu' for CPU builds")] = None,
    platform: Annotated[Optional[str], typer.Option("--platform", help="Only rows with wheels for this platform: linux/amd64, linux/arm64")] = None,
    as_json: JsonOpt = False,
    matrix: MatrixOpt = None,
) -> None:
    """List the matrix rows (one per framework build)."""
    _extra_matrix(matrix)
    from envman.matrix.listing import row_json, select_rows
    from envman.cli import get_matrix

    m = get_matrix()
    data = [row_json(b) for b in select_rows(m.builds, framework, cuda, platform)]
    if as_json:
        emit_json(data)
        return
    from envman.cli._out import PlainTable

    t = PlainTable(("name", "variant", "cuda", "cudnn", "python", "platforms", "status"), (
        (d["name"], d["variant"] + (" *" if d["default"] else ""), d["cuda"] or "-", d["cudnn"] or "-",
         f"{d['python'][0]}–{d['python'][-1]}", _platforms_cell(d), d["status"]) for d in data))
    c = console()
    c.print(t)
    c.print(f"{counted(len(data), 'row')} (* = the variant plain pip install gives)")


def _platforms_cell(d: dict) -> str:
    """``amd64,arm64`` (``?`` after a platform list that is not confirmed)."""
    short = ",".join(p.split("/", 1)[1] for p in d["platforms"])
    return short + ("?" if d["platform_status"] != "confirmed" and len(d["platforms"]) > 1 else "")


def _tag_history_fields(m: Matrix, ref: str) -> dict[str, str | None]:
    """``base_image_published`` / ``base_image_served`` of a stack's base image from the tag
    histories, each followed by ``(unconfirmed)`` or ``(partially confirmed)`` where its source is
    indirect; nothing for an image the histories do not know."""
    repository, _, tag = ref.rpartition(":")
    h = m.tag_history(repository, tag)
    if h is None:
        return {}
    mark = "" if h.status == "confirmed" else f" ({h.status})"
    served = {True: "yes", False: "no (deleted)"}.get(h.served, str(h.served)) if isinstance(h.served, bool) else str(h.served)
    return {"base_image_published": (h.published or "unknown") + mark, "base_image_served": served + mark}


def _rebuild_fields(m: Matrix, stack: Stack) -> dict[str, str]:
    """``base_image_rebuilt``: how ``envman build`` (``--base auto``) gets a base NVIDIA no longer
    serves, from which recipes, and what of them is unconfirmed; nothing for a served base."""
    from envman.stack.names import nvidia_tag
    from envman.state import BASE_REPOSITORY

    tag = nvidia_tag(stack)
    chain = m.recipe_chain(tag, stack.platform) if tag and stack.base_image_status != "published" else None
    if not chain:
        return {}
    out = {"base_image_rebuilt": f"as {BASE_REPOSITORY}:{tag}, from NVIDIA's recipe",
           "base_image_recipe": ", ".join(f"{r.path} @ {r.commit[:8]}" for r in chain)}
    unsure = [r for r in chain if r.os_archive_status != "confirmed" and r.note]
    if unsure:
        out["base_image_rebuilt_note"] = f"{unsure[0].note} ({unsure[0].os_archive_status})"
    return out


#: ``--cuda`` of ``matrix show`` / ``matrix explain``.
CudaOpt = Annotated[Optional[str], typer.Option(
    "--cuda", help="A CUDA update: 12.4.1, '12.4 Update 1' or its nvidia/cuda tag (show alone: that update's facts; with a "
                   "stack: its base image of that update and the update's toolkit driver)", show_default=False)]


def _cuda_update(m: Matrix, text: str) -> tuple[CudaRelease, Version | None]:
    from envman.errors import UserError

    try:
        return m.cuda_update(text)
    except ValueError as exc:
        raise UserError(str(exc), where="--cuda", fix="give a CUDA version of the matrix, e.g. --cuda 12.4.1 (list: envman matrix ls)")


def _cuda_facts(m: Matrix, rel: CudaRelease, patch: Version | None) -> dict[str, object]:
    """What the matrix knows of one CUDA update: its toolkit driver, the floors, the image rows."""
    label = "GA" if patch is None or not any(v == patch for v, _ in rel.updates) else \
        f"Update {[v for v, _ in rel.updates].index(patch) + 1}"
    images = sorted(i.ref for i in m.images if not i.custom and i.cuda == rel.version
                    and (i.cuda_patch == patch if patch is not None else True))
    return {
        "cuda": str(patch) if patch is not None else rel.key,
        "release": rel.key,
        "update": label,
        "toolkit_driver": str(rel.toolkit_driver_for(patch)),
        "minor_compat_driver": str(rel.minor_compat_driver) if rel.minor_compat_driver else None,
        "minor_compat_status": rel.minor_compat_status if rel.minor_compat_driver else None,
        "min_driver": str(rel.min_driver_for(patch)),
        "sm": [str(a) for a in rel.sm],
        "images": images,
        "sources": list(rel.source),
        "status": rel.status,
    }


def _print_fields(data: dict) -> None:
    c = console()
    width = max(len(k) for k in data)
    for k, v in data.items():
        if isinstance(v, list):
            v = ", ".join(v) if v else "-"
        c.print(f"[bold]{k:<{width}}[/bold]  {escape(str(v)) if v not in (None, '') else '-'}")


def _ngc_fields(m: Matrix, ref: str) -> dict:
    """What the matrix's NGC table says of an NGC image reference; one line naming the releases it has otherwise."""
    from envman.errors import UserError

    release = m.ngc_lookup(ref)
    if release is None:
        repository = ref.rpartition(":")[0] or ref
        known = sorted({t for r in m.ngc if r.repository == repository for t in r.tags})
        raise UserError(f"{ref[:120]!r} is not in the matrix's NGC table", where="matrix show",
                        fix=f"its {repository} tags: {', '.join(known[:8])}{', …' if len(known) > 8 else ''}" if known
                        else "give nvcr.io/nvidia/pytorch:YY.MM-py3, tensorflow:YY.MM-tf1-py3 or -tf2-py3, or jax:YY.MM-py3")
    return release.to_json()


def show(
    name: Annotated[Optional[str], typer.Argument(autocompletion=complete_stack, help="Stack name, e.g. torch-1.0-cuda10, tf-2.15-py3.11, jax-0.4-cuda12, torch-2.9-cuda12.8-arm64 (optional with --cuda)")] = None,
    platform: Annotated[Optional[str], typer.Option("--platform", help="linux/amd64 (default) or linux/arm64 (same as an -arm64 name)")] = None,
    cuda: CudaOpt = None,
    as_json: JsonOpt = False,
    matrix: MatrixOpt = None,
) -> None:
    """Resolve a stack name and show the full stack; with --cuda alone, what the matrix knows of a CUDA update; with an
    NGC image (nvcr.io/nvidia/pytorch:20.12-py3), what that release carries."""
    _extra_matrix(matrix)
    from envman.errors import UserError
    from envman.stack.resolve import resolve
    from envman.cli._options import platform_option
    from envman.cli import get_matrix

    m = get_matrix()
    if name is not None and name.startswith("nvcr.io/"):
        ngc = _ngc_fields(m, name)
        emit_json(ngc) if as_json else _print_fields(ngc)
        return
    rel, patch = _cuda_update(m, cuda) if cuda is not None else (None, None)
    if name is None:
        if rel is None:
            raise UserError("give a stack name or --cuda", where="matrix show", fix="e.g. envman matrix show torch-2.4 or --cuda 12.4.1")
        facts = _cuda_facts(m, rel, patch)
        if as_json:
            emit_json(facts)
        else:
            _print_fields(facts)
        return
    stack = resolve(m, name, platform_option(platform), cuda_patch=patch)
    data = stack.to_json()
    data["platform"] = stack.platform
    build = next((b for b in m.builds if b.name == stack.row), None)
    if build is not None:
        data["row_platforms"] = list(build.platforms)
        if build.wheel_python:  # the Pythons each installed package has wheels for (the row's are where all do)
            data["row_wheel_python"] = "; ".join(f"{pkg}: {' '.join(str(p) for p in pys) or 'any'}" for pkg, pys in build.wheel_python)
    data.update(_tag_history_fields(m, stack.base_image))
    data.update(_rebuild_fields(m, stack))
    if as_json:
        emit_json(data)
        return
    _print_fields(data)


def explain(
    name: Annotated[str, typer.Argument(help="Stack name", autocompletion=complete_stack)],
    driver: Annotated[Optional[str], typer.Option("--driver", help="NVIDIA driver version, e.g. 535.104.05 (default: this host's).", show_default=False)] = None,
    sm: Annotated[Optional[str], typer.Option("--sm", help="GPU compute capability, e.g. 8.6 or sm_86")] = None,
    gpu: Annotated[Optional[str], typer.Option("--gpu", help="GPU name from the matrix, e.g. 'RTX 3090', a100", autocompletion=complete_gpu)] = None,
    cuda: CudaOpt = None,
    as_json: JsonOpt = False,
    matrix: MatrixOpt = None,
) -> None:
    """Will NAME run on a host with this driver and GPU?  Exit 0: ok/jit_only, 1: no, 2: bad input."""
    _extra_matrix(matrix)
    from envman.stack.resolve import resolve
    from envman.stack.verdict import verdict
    from envman.cli import get_matrix

    m = get_matrix()
    drv, arch, g = _host_asked(m, driver, sm, gpu)
    stack = resolve(m, name, cuda_patch=_cuda_update(m, cuda)[1] if cuda is not None else None)
    v = verdict(stack, drv, arch)
    alternative = None if v.runs else _compatible_build(m, stack, str(drv), str(arch))
    gpu_fields = {"gpu": g.name, "gpu_status": g.status} if g is not None else {}
    if as_json:
        emit_json({**v.to_json(), "name": stack.name, "driver": str(drv), "sm": str(arch), "alternative": alternative,
                   **gpu_fields})
    else:
        _print_verdict(m, stack, v, drv, arch, g, alternative)
    raise typer.Exit(0 if v.runs else 1)


def _host_asked(m: Matrix, driver: str | None, sm: str | None, gpu: str | None) -> tuple[Any, Any, Any]:
    """(driver, compute capability, the matrix's GPU or None) of ``explain``'s what-if host:
    exactly one of ``--sm`` and ``--gpu``; the driver given, or this host's."""
    from envman.errors import UserError
    from envman.matrix.model import Arch, DriverVersion

    if (sm is None) == (gpu is None):
        raise UserError("give exactly one of --sm and --gpu", where="matrix explain", fix="e.g. --sm 8.6 or --gpu a100")
    if driver is None:
        driver = _host_driver()
    try:
        drv = DriverVersion.parse_option(driver)
    except ValueError as exc:
        raise UserError(str(exc), where="--driver", fix="e.g. --driver 535.104.05")
    g = None
    if sm is not None:
        try:
            arch = Arch.parse(sm)
        except ValueError as exc:
            raise UserError(str(exc), where="--sm", fix="e.g. --sm 8.6")
    else:
        assert gpu is not None  # exactly one of --sm and --gpu
        g = m.gpu(gpu)
        if g is None:
            from envman.matrix.gpus import unknown_gpu

            what, fix = unknown_gpu(m.gpu_index, gpu)
            raise UserError(what, where="--gpu", fix=fix)
        arch = g.cc
    return drv, arch, g


def _print_verdict(m: Matrix, stack: Stack, v: Any, drv: Any, arch: Any, g: Any, alternative: str | None) -> None:
    """``explain``'s verdict, the GPU it found, the reasons, a rebuilt base and a build that runs."""
    c = console()
    colour = {"ok": "green", "jit_only": "yellow"}.get(v.verdict, "red")
    c.print(tagged(v.verdict, colour, f"  {stack.name} on driver {drv}, {arch.sm}"))
    if g is not None:  # which GPU the name found, and how well its compute capability is sourced
        c.print(f"  - GPU {g.name}: compute capability {g.cc}" + ("" if g.status == "confirmed" else f" ({g.status})"),
                markup=False)
    for r in v.reasons:
        c.print(f"  - {r}", markup=False)
    rebuilt = _rebuild_fields(m, stack).get("base_image_rebuilt")
    if rebuilt:
        c.print(f"  - base {stack.base_image} is no longer served by NVIDIA: envman build rebuilds it {rebuilt}",
                markup=False)
    if not v.runs:
        c.print(f"  compatible: {alternative}" if alternative else
                f"  no {stack.framework} build in the matrix runs there", markup=False)


def _host_driver() -> str:
    """This host's NVIDIA driver version, for ``explain`` without ``--driver``."""
    from envman.errors import UserError
    from envman.host import detect

    host = detect()
    if not host.driver:
        raise UserError(f"no NVIDIA driver on this host to read ({host.note or 'none found'})", where="matrix explain",
                        fix="give --driver VERSION, e.g. --driver 535.104.05")
    return host.driver


def _compatible_build(m: Matrix, stack: Stack, driver: str, cc: str) -> str | None:
    """A build of the same framework that runs with ``driver`` on a GPU of capability ``cc``."""
    from envman.host import what_if
    from envman.run.preflight import suggest_stack

    host = what_if(driver, cc)
    return suggest_stack(m, stack, host, host.gpus)


def validate_cmd(
    paths: Annotated[Optional[list[Path]], typer.Argument(help="Extra matrix files to check with the shipped ones")] = None,
    as_json: JsonOpt = False,
    matrix: MatrixOpt = None,
) -> None:
    """Check schema and cross-consistency of the matrix (shipped files plus PATHs). Exit 1 on problems."""
    _extra_matrix(matrix)
    from envman.matrix.load import load_matrix
    from envman.matrix.validate import validate
    from envman.stack.resolve import resolve_row
    from envman.errors import ResolveError
    from envman.cli import matrix_source

    m = load_matrix([*matrix_source().extra, *(paths or [])])
    problems = [str(p) for p in validate(m)]
    for b in m.builds:  # every row must resolve to a stack, on every platform it lists
        for plat in b.platforms:
            try:
                resolve_row(m, b, plat)
            except ResolveError as exc:
                on = "" if plat == b.platforms[0] else f" on {plat}"
                problems.append(f"{b.name}: does not resolve{on}: {exc.line()}")
    summary: dict[str, Any] = {
        "files": list(m.files),
        "rows": {"cuda": len(m.cuda), "os": len(m.oses), "images": len(m.images), "builds": len(m.builds), "gpus": len(m.gpus),
                 "published_tags": sum(len(p.tags) for p in m.published)},
        "problems": problems,
        "ok": not problems,
    }
    if as_json:
        emit_json(summary)
    else:
        c = console(stderr=bool(problems))
        for p in problems:
            c.print(f"problem: {p}", markup=False, soft_wrap=True)
        r = summary["rows"]
        c.print(f"{counted(len(m.files), 'file')}, {counted(r['builds'], 'build')}, {counted(r['images'], 'image')}, "
                f"{counted(r['cuda'], 'CUDA release')}, {counted(r['gpus'], 'GPU')}: "
                + ("ok" if not problems else counted(len(problems), "problem")))
    raise typer.Exit(0 if not problems else 1)


def update(
    framework: Annotated[Optional[list[str]], typer.Option("--framework", "-f", help="Only this framework (repeatable): torch, tensorflow (tf), jax, onnxruntime (ort).", show_default=False)] = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write the new rows to this overlay matrix file (merged with its rows if it exists).", show_default=False)] = None,
    write: Annotated[bool, typer.Option("--write", help="Maintainers: append the new rows to the shipped matrices/<framework>.toml.")] = False,
    check: Annotated[bool, typer.Option("--check", help="Only list releases newer than the shipped matrix (frameworks, CUDA) and a stale GPU list; exit 1 when there are any (for a scheduled CI job).")] = False,
    pip_index: Annotated[Optional[str], typer.Option("--pip-index", help="Simple index (PEP 503/691) to read instead of PyPI (default: \\[network] pip_index of config.toml).", show_default=False)] = None,
    torch_index: Annotated[Optional[str], typer.Option("--torch-index", help="Base URL of PyTorch's variant index or a mirror of it (…/whl; default: \\[matrix] torch_index, else PyTorch's).", show_default=False)] = None,
    no_torch_index: Annotated[bool, typer.Option("--no-torch-index", help="Read only the main index (the build plain pip install gives).")] = False,
    new_only: Annotated[bool, typer.Option("--new-only", help="Only releases newer than the matrix: no backfill of the patch releases of its minors it lacks, no report of Pythons its rows leave out.")] = False,
    ca_bundle: Annotated[Optional[Path], typer.Option("--ca-bundle", help="PEM bundle to trust for the indexes (default: \\[network] ca_bundle of config.toml).", show_default=False)] = None,
    timeout: Annotated[float, typer.Option("--timeout", min=1, max=300, help="Seconds per request (each is retried twice).")] = 30.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON summary on stdout.")] = False,
    matrix: MatrixOpt = None,
) -> None:
    """Find framework releases newer than the matrix on the index and derive rows from their wheels' metadata; report CUDA releases (cuda-toolkit) and what the matrix cannot fill for them."""
    from envman.matrix.refresh import CheckReport, UpdateRequest, run_update
    from envman.render.dockerfile import render_stack
    from envman.render.options import RenderOptions
    from envman.cli import matrix_source

    _extra_matrix(matrix)
    request = UpdateRequest(tuple(framework or ()), output, write, check, pip_index, torch_index, no_torch_index,
                            new_only, ca_bundle, timeout)
    with _IndexStatus(live=sys.stderr.isatty() and not as_json) as status:
        report = run_update(request, matrix_source(), render=render_stack, network=RenderOptions.from_config,
                            progress=status)
    if isinstance(report, CheckReport):
        emit_json(report.summary()) if as_json else _print_check(report)
        raise typer.Exit(1 if report.behind else 0)
    emit_json(report.summary) if as_json else _print_update(report)


class _IndexStatus:
    """A live status line on stderr (a terminal only) that says what the index run reads."""

    def __init__(self, *, live: bool) -> None:
        self.status = console(stderr=True).status("reading the index…") if live else None

    def __enter__(self) -> _IndexStatus:
        if self.status is not None:
            self.status.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.status is not None:
            self.status.stop()

    def __call__(self, msg: str) -> None:
        if self.status is not None:
            self.status.update(escape(msg))


def _print_check(report: CheckReport) -> None:
    c = console()
    for fw, vs in report.behind.items():
        if fw == "gpus":
            for why in vs:
                c.print(f"gpus: stale: {why}", markup=False, soft_wrap=True)
            continue
        c.print(f"{fw}: {', '.join(vs)} newer than the shipped matrix", markup=False, soft_wrap=True)
    c.print(("the shipped matrix is behind" if report.behind else "the shipped matrix is up to date")
            + f" ({report.requests} requests, {report.seconds} s)", markup=False, soft_wrap=True)


def _print_update(report: UpdateReport) -> None:
    c, err, result = console(), console(stderr=True), report.result
    for fw, vs in result.new_releases.items():
        c.print(f"{fw}: new releases {', '.join(vs)}", markup=False, soft_wrap=True)
    for r in report.rows:
        unc = f"  (unconfirmed: {', '.join(r.unconfirmed)})" if r.unconfirmed else ""
        c.print(f"  + {r.name} {r.data['variant']} cudnn {r.data.get('cudnn', '-')} python "
                f"{r.data['python'][0]}–{r.data['python'][-1]}{unc}", markup=False, soft_wrap=True)
    for g in result.gaps:
        c.print(f"  ~ {g.line()}", markup=False, soft_wrap=True)
    for u in result.unfilled:
        err.print(f"not filled: {u}", markup=False, soft_wrap=True)
    for s in result.skipped:
        err.print(f"skipped: {s}", markup=False, soft_wrap=True)
    for w in result.warnings:
        err.print(f"warning: {w}", markup=False, soft_wrap=True)
    where = ", ".join(str(p) for p in report.planned) if report.writes else "nothing written (dry run: give -o FILE or --write)"
    c.print(f"{len(report.rows)} new rows, {counted(len(result.gaps), 'row')} backfilled, {report.requests} requests, "
            f"{report.seconds} s: {where}", markup=False,
            soft_wrap=True)
