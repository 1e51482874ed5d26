"""``envman doctor`` and ``envman ls``: the host, the engine and every registered project on them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Optional

import typer

from envman.cli.complete import complete_gpu
from envman.cli._out import console, emit_json, plain

if TYPE_CHECKING:  # helpers' annotations only (typer reads the commands' at run time)
    from envman.engine.api import EngineFacts
    from envman.host import HostFacts
    from envman.run.doctor import ProjectRow

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def _engine_or_error() -> tuple[EngineFacts | None, str | None]:
    from envman.errors import EnvmanError
    from envman.engine.facts import docker_facts

    engine = docker_facts()
    try:
        engine.info()
        return engine, None
    except EnvmanError as exc:
        return None, exc.line()


def _rows(host: HostFacts, engine: EngineFacts | None, what_if: bool) -> list[ProjectRow]:
    from envman.project.settings import load_user_config
    from envman.project.registry import read_registry
    from envman.cli import matrix_source
    from envman.run.command import suggester
    from envman.run.doctor import project_rows

    matrix = matrix_source()
    return project_rows(read_registry(), engine=engine, host=host, resolve_name=matrix.resolve, user=load_user_config(),
                        suggest_for=suggester(matrix), what_if=what_if, missing_files_hint=matrix.missing_files_hint)


def doctor(
    driver: Annotated[Optional[str], typer.Option("--driver", help="What if the driver were this version?")] = None,
    gpu: Annotated[Optional[str], typer.Option("--gpu", autocompletion=complete_gpu, help="What if the GPU were this one (matrix GPU name, e.g. 'RTX 3090')?")] = None,
    sm: Annotated[Optional[str], typer.Option("--sm", help="What if the GPU had this compute capability (e.g. 8.6)?")] = None,
    check_updates: Annotated[bool, typer.Option("--check-updates", help="Also ask the index (config's pip_index, else PyPI) which framework releases are newer than the matrix.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Check the host (driver, GPUs, Docker, NVIDIA runtime) and every registered project on it. Exit 1 on a problem."""
    from envman.cli import matrix_source
    from envman.run.command import detect_host
    from envman.run.doctor import doctor_report, what_if_host

    real = detect_host(matrix_source())
    asked = any(x is not None for x in (driver, gpu, sm))
    host = what_if_host(real, matrix_source(), driver=driver, gpu=gpu, sm=sm) if asked else real
    engine, engine_error = _engine_or_error()
    rows = _rows(host, engine, asked)
    report = doctor_report(host=host, engine=engine, engine_error=engine_error, rows=rows, what_if=asked,
                           matrix=_matrix_freshness(check_updates))
    if as_json:
        emit_json(report)
    else:
        _print_doctor(report)
    raise typer.Exit(0 if report["ok"] else 1)


def _matrix_freshness(check_updates: bool) -> dict:
    """``doctor``'s matrix section; an index that cannot be read is a warning, not a failure."""
    import datetime

    from envman.run.doctor import matrix_freshness
    from envman.errors import EnvmanError
    from envman.cli import get_matrix

    m = get_matrix()
    updates, error = None, None
    if check_updates:
        from envman.matrix.index import PYPI_SIMPLE, Http
        from envman.matrix.refresh import check_only
        from envman.matrix.update import Settings
        from envman.render.options import RenderOptions

        try:
            net = RenderOptions.from_config({})
            updates = check_only(Http(ca_bundle=net.ca_bundle, timeout=20, retries=1),
                                 Settings(index=net.pip_index or PYPI_SIMPLE, torch_index=None), m)
        except EnvmanError as exc:
            error = exc.line()
    return matrix_freshness(m, datetime.date.today(), updates, error)


def _colour(v: str | None) -> str:
    return {"ok": "green", "pass": "green", "present": "green", "cpu": "cyan", "jit_only": "yellow",
            "cpu-only": "yellow", "builds on first run": "yellow", "no-gpu": "yellow"}.get(v or "", "red")


def _print_doctor(report: dict) -> None:
    from rich.text import Text

    c = console()
    h, e = report["host"], report["engine"]
    c.print(f"host    {h['summary']}", markup=False, highlight=False, soft_wrap=True)
    if e["reachable"]:
        none = ("no nvidia.com/gpu CDI spec in /etc/cdi or /var/run/cdi: no GPUs in containers"
                if e.get("engine") == "podman" else "no NVIDIA runtime or CDI: no GPUs in containers")
        mech = {"runtime": "GPUs through the NVIDIA runtime", "cdi": "GPUs through CDI"}.get(e.get("gpu_mechanism") or "", none)
        name = "Podman" if e.get("engine") == "podman" else "Docker"
        mode = "rootless" if e.get("rootless") else "rootful"
        where = f" at {e['url']}" if e.get("url") else ""
        how = f" (selected by {e['selected_by']})" if e.get("selected_by") else ""
        c.print(f"engine  {name} {e.get('engine_version') or e.get('server_version', '?')}, {mode}{where}{how}; {mech}",
                markup=False, highlight=False, soft_wrap=True)
    else:
        c.print(f"engine  not reachable: {e['error']}", markup=False, highlight=False, soft_wrap=True)
    fresh = report.get("matrix")
    if fresh:
        age = (f"newest release in it {fresh['newest_release']} ({fresh['age_days']} days old)"
               if fresh["newest_release"] else "no release dates recorded")
        newest = ", ".join(f"{fw} {v}" for fw, v in fresh["newest_version"].items())
        checked = "" if fresh["updates"] is None else ("; the index has nothing newer" if not fresh["updates"] else "")
        c.print(f"matrix  {age}; newest: {newest}{checked}", markup=False, highlight=False, soft_wrap=True)
    _print_rows(report["projects"])
    for p in report["problems"]:
        c.print(plain(p["level"], style="red" if p["level"] == "error" else "yellow") + plain(f": {p['message']}"),
                highlight=False, soft_wrap=True)
    for r in report["projects"]:
        for p in r["problems"]:
            c.print(plain(p["level"], style="red" if p["level"] == "error" else "yellow") + plain(f": {r['name']}: {p['message']}"),
                    highlight=False, soft_wrap=True)
    if not report["projects"]:
        c.print("no registered projects (envman project init --env STACK, or envman project add PATH)")


def _print_rows(rows: list[dict]) -> None:
    from rich.table import Table
    from rich.text import Text

    if not rows:
        return
    t = Table(box=None, pad_edge=False)
    for col in ("project", "stack", "image", "smoke", "verdict"):
        t.add_column(col, overflow="fold")
    for r in rows:
        img = plain(f"{r['image'] or '-'} ") + plain(f"({r['image_status']})", style=_colour(r["image_status"]))
        t.add_row(plain(r["name"]), plain(r["stack"]) if r["stack"] else plain("invalid", style="red"), img,
                  plain(r["smoke"] or "-", style=_colour(r["smoke"])),
                  plain(f"{r['verdict'] or '-'} ({r['gpus']})" if r["gpus"] else (r["verdict"] or "-"), style=_colour(r["verdict"])))
    console().print(t)


def ls(as_json: JsonOpt = False) -> None:
    """Projects × stack × image × last smoke × verdict on this host."""
    from envman.cli import matrix_source
    from envman.run.command import detect_host

    host = detect_host(matrix_source())
    engine, _ = _engine_or_error()
    rows = [r.to_json() for r in _rows(host, engine, False)]
    if as_json:
        emit_json([{k: r[k] for k in ("name", "root", "stack", "stack_query", "image", "image_status", "smoke",
                                       "verdict", "gpus", "verdicts", "problems")} for r in rows])
        return
    if not rows:
        console().print("no registered projects (envman project init --env STACK, or envman project add PATH)")
        return
    _print_rows(rows)
    from rich.text import Text

    for r in rows:  # why a row is invalid (the rest of the problems: envman doctor)
        for p in r["problems"]:
            if p["check"] == "project":
                console().print(plain("error", style="red") + plain(f": {r['name']}: {p['message']}"),
                                highlight=False, soft_wrap=True)
