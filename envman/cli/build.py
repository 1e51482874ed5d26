"""``envman build``, ``smoke``, ``images``, ``prune``: the image life cycle on a Docker engine."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated, Any, Optional, Sequence

import typer

from envman.errors import counted

from envman.cli.complete import complete_stack

from envman.cli._options import BuildFlags, Platform, option_group, platform_option
from envman.cli._out import console, emit_json, local_time, plain, tagged

if TYPE_CHECKING:  # helpers' annotations only (typer reads the commands' at run time)
    from envman.engine.docker import Engine
    from envman.images.stacks import StackPlan
    from envman.render.options import RenderOptions

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]


@option_group("flags", BuildFlags)
def build(
    ctx: typer.Context,
    names: Annotated[Optional[list[str]], typer.Argument(help="Stack names (e.g. torch-2.4-cuda12)", autocompletion=complete_stack)] = None,
    all_: Annotated[bool, typer.Option("--all", help="Build every matrix row.")] = False,
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, max=64, help="Parallel builds (they share layers).")] = 1,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Rebuild every layer.")] = False,
    pull: Annotated[bool, typer.Option("--pull/--no-pull", help="Pull a newer base image first.")] = False,
    require_gpu: Annotated[bool, typer.Option("--require-gpu", help="Smoke test must run on a GPU.")] = False,
    accept_cpu_only: Annotated[bool, typer.Option("--accept-cpu-only", help="Promote when the smoke test could only run on the CPU (no GPU here).")] = False,
    platform: Platform = None,
    flags: BuildFlags = BuildFlags(),
    as_json: JsonOpt = False,
) -> None:
    """Build stacks, smoke-test them inside the new image, promote the ones that pass."""
    from contextlib import ExitStack

    from envman.images.stacks import BuildRequest, build_stacks, plan_stacks, select_stacks
    from envman.cli import get_matrix, matrix_source
    from envman.cli.progress import BuildProgress

    stacks = select_stacks(matrix_source(), list(names or []), all_, platform_option(platform))
    options = flags.render_options()
    request = BuildRequest(options, flags.builder_preference(), nocache=no_cache, pull=pull, require_gpu=require_gpu,
                           accept_cpu_only=accept_cpu_only, jobs=jobs)
    plans = plan_stacks(stacks, get_matrix, flags.base_mode(), options)
    err = console(stderr=True)
    progress = BuildProgress([s.name for s in stacks], err, live=err.is_terminal, quiet=as_json)
    with ExitStack() as live:

        def started() -> None:  # the engine answered: say how bases come, then show the builds
            _say_bases(plans, err)
            live.enter_context(progress)

        outcomes = build_stacks(plans, request, listener=progress, started=started)
    rows = [o.row() for o in outcomes]
    emit_json(rows) if as_json else print_rows(rows, console(), err)
    if any(o.failed for o in outcomes):
        raise typer.Exit(1)
    if not no_cache and not pull and all(r["cached"] and r["promoted"] for r in rows):
        _remember_noop(rows, options, as_json=as_json, argv=ctx.obj)


def _say_bases(plans: Sequence[StackPlan], err: Any) -> None:
    """How each stack gets its base, when that is news: on stderr, so also beside --json."""
    for plan in plans:
        if plan.note:
            err.print(plain(f"{plan.stack.name}: {plan.note}"), highlight=False, soft_wrap=True)


def print_rows(rows: list[dict[str, Any]], out: Any, err: Any) -> None:
    """Each stack's result, one line each (failures on ``err``, with their step and error lines).
    The terminal wraps a long line, not rich: rich would break it at a space and leave a line
    ending in the ``—`` between the image and its state."""
    for r in rows:
        status, colour, rest = build_line(r)
        if r.get("result") == "build-failed":  # on stderr: what failed and why, then the evidence
            err.print(tagged(status, colour, f" {rest}"), highlight=False, soft_wrap=True)
            from envman.images.failure import Failure

            why = Failure(r["failing_step"], tuple(r["error_lines"]), r["error_class"], r["hint"])
            for line in why.lines():
                err.print(line, markup=False, highlight=False, soft_wrap=True)
            continue
        out.print(tagged(status, colour, f" {rest}"), highlight=False, soft_wrap=True)


def build_line(row: dict) -> tuple[str, str, str]:
    """(status, its colour, the rest of the line) for one stack's ``envman build`` result."""
    if row.get("result") == "build-failed":
        return "build failed", "red", f"{row['name']}: {row['error']}"
    colour = {"pass": "green", "cpu-only": "yellow"}.get(row["smoke"], "red")
    state = "promoted to " + row["stable"] if row["promoted"] else "not promoted" + (
        " (cpu-only: add --accept-cpu-only to promote without a GPU)" if row["smoke"] == "cpu-only" else "")
    rest = f"{row['name']} {'(cached) ' if row['cached'] else ''}{row['image']} — {state}" + (
        f": {row['reason']}" if row["reason"] and row["smoke"] != "pass" else "")
    return row["smoke"], colour, rest


def _remember_noop(rows: list[dict[str, Any]], options: RenderOptions, *, as_json: bool, argv: tuple[str, ...] | None) -> None:
    """Record a build in which every stack was already built, smoke-tested and promoted, so the
    next identical ``envman build`` prints this result without rendering (envman.run.fastpath).
    ``argv`` is the console script's words as given (``None`` when the CLI was called otherwise:
    nothing is recorded then)."""
    from envman.boundary import run_argv
    from envman.config import config_path
    from envman.matrix.source import MatrixSource
    from envman.run.fastpath import build_key, record, tree_files
    from envman.state import report_path

    if options.credentials():
        return  # the cache key is the command line, and it would hold the index credentials
    split = run_argv(argv, "build") if argv is not None else None
    if split is None:
        return
    matrix, words = split
    # envman's loaded modules, templates and matrices are added by record (code_files)
    deps = [str(config_path()), *map(str, MatrixSource.of(matrix).user_files)]
    if options.ca_bundle is not None:
        deps.append(str(options.ca_bundle))
    if options.wheelhouse is not None:
        deps += tree_files(str(options.wheelhouse))
    deps += [str(report_path(r["image_id"])) for r in rows]
    images = [(ref, r["image_id"]) for r in rows for ref in (r["image"], r["stable"])]
    record(build_key(matrix, words), deps=[os.path.abspath(d) for d in deps], images=images,
           rows=[{k: v for k, v in r.items() if k != "build_seconds"} for r in rows],
           lines=[list(build_line(r)) for r in rows], json=as_json)


def smoke(
    name: Annotated[str, typer.Argument(help="Stack name", autocompletion=complete_stack)],
    require_gpu: Annotated[bool, typer.Option("--require-gpu", help="Missing GPU is a failure, not a skip.")] = False,
    bench: Annotated[bool, typer.Option("--bench", help="Also measure bandwidths and matmul throughput.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Run the smoke test (the GPU kernel check) in the stack's stable image."""
    from envman.images.build import smoke_image
    from envman.state import stable_ref
    from envman.engine.docker import Engine
    from envman.errors import UserError
    from envman.stack.resolve import resolve
    from envman.cli import get_matrix

    stack = resolve(get_matrix(), name)
    with Engine.connect() as engine:
        ref = stable_ref(stack)
        if not engine.image_exists(ref):
            raise UserError(f"no promoted image for {stack.name}", where=ref, fix=f"build it first: envman build {name}")
        rep = smoke_image(engine, stack, ref, require_gpu=require_gpu, bench=bench)
    if as_json:
        emit_json(rep.to_json())
    else:
        c = console()
        colour = {"pass": "green", "cpu-only": "yellow"}.get(rep.overall, "red")
        c.print(tagged(rep.overall, colour, f" {stack.name}: {rep.reason}"), highlight=False)
        for chk in (rep.probe or {}).get("checks", []):
            c.print(f"  {chk['status']:<5} {chk['name']:<10} {chk.get('reason', '')}", markup=False, highlight=False)
    raise typer.Exit(1 if rep.overall == "fail" else 0)


def images(as_json: JsonOpt = False) -> None:
    """List envman's images with stack, size, smoke status and date."""
    from envman.engine.facts import docker_facts
    from envman.images.prune import list_envman_images

    # one request on the engine's socket (the docker CLI where there is none), not the Docker SDK
    rows = [own_tags(r) for r in list_envman_images(docker_facts())]
    rows.sort(key=lambda r: (r.project or r.stack, -r.created))
    if as_json:
        emit_json([{**r.__dict__, "tags": list(r.tags)} for r in rows])
        return
    from envman.cli._out import PlainTable

    cells = []
    for r in rows:
        when = local_time(r.created, "%Y-%m-%d %H:%M")
        name = f"{r.project} (project, on {r.stack})" if r.project else r.stack
        smoke = "-" if r.project else r.smoke  # a project image is not smoke-tested itself
        cells.append((name, ", ".join(x.split(":")[-1] for x in r.tags) or "<none>",
                      f"{r.size / 1e6:.0f} MB", smoke, "yes" if r.stable else "", when))
    console().print(PlainTable(("name", "tag", "size", "smoke", "stable", "created"), cells))


def own_tags(row):
    """``row`` with only envman's own tags (``envman/...``): another tag someone put on the same
    image is not envman's to list, nor what makes it stable."""
    from dataclasses import replace

    from envman.state import REPO_PREFIX, is_stable_tag

    tags = tuple(t for t in row.tags if t.startswith(REPO_PREFIX))
    return replace(row, tags=tags, stable=any(is_stable_tag(t) for t in tags) and not row.project)


def prune(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only list what would be removed.")] = False,
    all_users: Annotated[bool, typer.Option("--all-users", help="Root only: every user's envman images, not only yours.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Remove envman images you built that nothing uses: no container (anyone's), stable tag or project of yours."""
    from envman.errors import UserError
    from envman.images.prune import PruneScope, prune as _prune
    from envman.engine.docker import Engine
    from envman.images.pins import pinned_ids
    from envman.project.image import project_images_in_use
    from envman.cli import matrix_source

    if all_users and os.geteuid() != 0:
        raise UserError("--all-users removes other users' images: only root may ask for it",
                        where="envman prune", fix="run envman prune without --all-users (your own images)")
    with Engine.connect() as engine:
        refs, unsure = project_images_in_use(engine, matrix_source().resolve)
        scope = PruneScope(uid=os.getuid(), all_users=all_users, keep=frozenset(refs), keep_projects=frozenset(unsure),
                           keep_ids=pinned_ids())
        before = engine_storage(engine)
        removed = _prune(engine, scope, dry_run=dry_run)
        after = engine_storage(engine) if removed and not dry_run else before
    if as_json:
        emit_json([{"stack": r.stack, "tags": list(r.tags), "image_id": r.image_id, "size": r.size} for r in removed])
        return
    verb = "would remove" if dry_run else "removed"
    for r in removed:
        console().print(f"{verb} {r.stack} {', '.join(r.tags) or r.image_id}", highlight=False)
    if dry_run:  # layers shared with images that stay are not freed: only a real prune can tell
        console().print(f"{counted(len(removed), 'image')} would be removed: at most {sum(r.size for r in removed) / 1e6:.0f} MB "
                        "(their sizes; layers shared with images that stay are not freed)", highlight=False)
    elif before is not None and after is not None:
        console().print(f"{counted(len(removed), 'image')} removed, {max(0, before[0] - after[0]) / 1e6:.0f} MB freed "
                        "(the engine's image storage before and after)", highlight=False)
    else:
        console().print(f"{counted(len(removed), 'image')} removed", highlight=False)
    if before is not None and before[1]:
        console().print(build_cache_note(before[1]), highlight=False)


def build_cache_note(cache_bytes: int) -> str:
    """What envman leaves alone: the engine's build cache, shared by everyone who builds on it."""
    return (f"the engine's build cache holds {cache_bytes / 1e6:.0f} MB, shared by everyone who builds on this "
            "engine; envman leaves it: docker builder prune reclaims it (as someone the engine trusts)")


def engine_storage(engine: Engine) -> tuple[int, int] | None:
    """The engine's disk usage (``engine.storage()``), or ``None`` when it cannot say."""
    try:
        return engine.storage()
    except Exception:  # noqa: BLE001 - an engine without disk usage: say less, remove as asked
        return None

