"""``envman matrix ...``: list, show, explain and validate the compatibility matrix."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from rich.markup import escape

from ._out import console, emit_json

app = typer.Typer(no_args_is_help=True)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


@app.command("ls")
def ls(
    framework: Annotated[Optional[str], typer.Option("--framework", "-f", help="torch, tensorflow (tf), jax, onnxruntime")] = None,
    cuda: Annotated[Optional[str], typer.Option("--cuda", help="CUDA version or prefix: 12, 12.4; 'cpu' for CPU builds")] = None,
    platform: Annotated[Optional[str], typer.Option("--platform", help="Only rows with wheels for this platform: linux/amd64, linux/arm64")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List the matrix rows (one per framework build)."""
    from ._options import platform_option
    from packaging.version import Version

    from ..errors import UserError
    from ..resolve import version_matches
    from ..stack import ALIASES
    from . import get_matrix

    m = get_matrix()
    rows = list(m.builds)
    if framework:
        fw = ALIASES.get(framework.lower())
        if fw is None:
            raise UserError(f"unknown framework {framework!r}", where="--framework", fix="use one of " + ", ".join(sorted(set(ALIASES))))
        rows = [b for b in rows if b.framework == fw]
    if cuda:
        if cuda.lower() == "cpu":
            rows = [b for b in rows if b.cuda is None]
        else:
            try:
                Version(cuda)
            except Exception:
                raise UserError(f"not a CUDA version: {cuda!r}", where="--cuda", fix="e.g. --cuda 12.4, --cuda 11, --cuda cpu")
            rows = [b for b in rows if b.cuda is not None and version_matches(cuda, b.cuda)]
    plat = platform_option(platform)
    if plat:
        rows = [b for b in rows if plat in b.platforms]
    data = [
        {
            "name": b.name,
            "framework": b.framework,
            "framework_version": str(b.version),
            "variant": b.variant,
            "cuda": f"{b.cuda.major}.{b.cuda.minor}" if b.cuda else None,
            "cudnn": b.cudnn,
            "python": [str(p) for p in b.python],
            "platforms": list(b.platforms),
            "platform_status": b.platform_status,
            "default": b.default,
            "status": b.status,
        }
        for b in rows
    ]
    if as_json:
        emit_json(data)
        return
    from rich.table import Table

    t = Table("name", "variant", "cuda", "cudnn", "python", "platforms", "status", box=None, pad_edge=False)
    for d in data:
        t.add_row(escape(d["name"]), escape(d["variant"]) + (" *" if d["default"] else ""), d["cuda"] or "-",
                  escape(d["cudnn"] or "-"), f"{d['python'][0]}–{d['python'][-1]}", _platforms_cell(d), d["status"])
    c = console()
    c.print(t)
    c.print(f"{len(data)} rows (* = the variant plain pip install gives)")


def _platforms_cell(d: dict) -> str:
    """``amd64,arm64`` (``?`` after a platform list that is not confirmed)."""
    short = ",".join(p.split("/", 1)[1] for p in d["platforms"])
    return short + ("?" if d["platform_status"] != "confirmed" and len(d["platforms"]) > 1 else "")


@app.command("show")
def show(
    name: Annotated[str, typer.Argument(help="Stack name, e.g. torch-1.0-cuda10, tf-2.15-py3.11, jax-0.4-cuda12, torch-2.9-cuda12.8-arm64")],
    platform: Annotated[Optional[str], typer.Option("--platform", help="linux/amd64 (default) or linux/arm64 (same as an -arm64 name)")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Resolve a stack name and show the full stack."""
    from ..resolve import resolve
    from ._options import platform_option
    from . import get_matrix

    m = get_matrix()
    stack = resolve(m, name, platform_option(platform))
    data = stack.to_json()
    data["platform"] = stack.platform
    build = next((b for b in m.builds if b.name == stack.row), None)
    if build is not None:
        data["row_platforms"] = list(build.platforms)
    if as_json:
        emit_json(data)
        return
    c = console()
    width = max(len(k) for k in data)
    for k, v in data.items():
        if isinstance(v, list):
            v = ", ".join(v) if v else "-"
        c.print(f"[bold]{k:<{width}}[/bold]  {escape(str(v)) if v not in (None, '') else '-'}")


@app.command("explain")
def explain(
    name: Annotated[str, typer.Argument(help="Stack name")],
    driver: Annotated[str, typer.Option("--driver", help="Host NVIDIA driver version, e.g. 535.104.05")],
    sm: Annotated[Optional[str], typer.Option("--sm", help="GPU compute capability, e.g. 8.6 or sm_86")] = None,
    gpu: Annotated[Optional[str], typer.Option("--gpu", help="GPU name from the matrix, e.g. 'RTX 3090', a100")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Will NAME run on a host with this driver and GPU?  Exit 0: ok/jit_only, 1: no, 2: bad input."""
    from ..errors import UserError
    from ..matrix.model import Arch, DriverVersion
    from ..resolve import resolve
    from ..verdict import verdict
    from . import get_matrix

    m = get_matrix()
    if (sm is None) == (gpu is None):
        raise UserError("give exactly one of --sm and --gpu", where="matrix explain", fix="e.g. --sm 8.6 or --gpu a100")
    try:
        drv = DriverVersion.parse(driver)
    except ValueError as exc:
        raise UserError(str(exc), where="--driver", fix="e.g. --driver 535.104.05")
    if sm is not None:
        try:
            arch = Arch.parse(sm)
        except ValueError as exc:
            raise UserError(str(exc), where="--sm", fix="e.g. --sm 8.6")
    else:
        g = m.gpu(gpu)
        if g is None:
            import difflib

            names = [x.name for x in m.gpus] + [x.id for x in m.gpus]
            close = difflib.get_close_matches(gpu, names, n=3, cutoff=0.4)
            raise UserError(f"unknown GPU {gpu!r}", where="--gpu", fix=("did you mean " + ", ".join(close) + "? " if close else "") + "or give --sm X.Y")
        arch = g.cc
    stack = resolve(m, name)
    v = verdict(stack, drv, arch)
    if as_json:
        emit_json({**v.to_json(), "name": stack.name, "driver": str(drv), "sm": str(arch)})
    else:
        c = console()
        colour = {"ok": "green", "jit_only": "yellow"}.get(v.verdict, "red")
        c.print(f"[{colour}]{v.verdict}[/{colour}]  {stack.name} on driver {drv}, {arch.sm}")
        for r in v.reasons:
            c.print(f"  - {r}")
    raise typer.Exit(0 if v.runs else 1)


@app.command("validate")
def validate_cmd(
    paths: Annotated[Optional[list[Path]], typer.Argument(help="Extra matrix files to check with the shipped ones")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Check schema and cross-consistency of the matrix (shipped files plus PATHs). Exit 1 on problems."""
    from ..matrix.load import load_matrix
    from ..matrix.validate import validate
    from ..resolve import resolve_row
    from ..errors import ResolveError
    from . import STATE

    m = load_matrix(list(STATE.matrix_files) + list(paths or []))
    problems = [str(p) for p in validate(m)]
    for b in m.builds:  # every row must resolve to a stack, on every platform it lists
        for plat in b.platforms:
            try:
                resolve_row(m, b, plat)
            except ResolveError as exc:
                on = "" if plat == b.platforms[0] else f" on {plat}"
                problems.append(f"{b.name}: does not resolve{on}: {exc.line()}")
    summary = {
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
            c.print(f"problem: {p}", markup=False)
        r = summary["rows"]
        c.print(f"{len(m.files)} files, {r['builds']} builds, {r['images']} images, {r['cuda']} CUDA releases, "
                f"{r['gpus']} GPUs: " + ("ok" if not problems else f"{len(problems)} problems"))
    raise typer.Exit(0 if not problems else 1)
