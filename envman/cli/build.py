"""``envman build``, ``smoke``, ``images``, ``prune``: the image life cycle on a Docker engine."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional, Sequence

import typer

from envman.errors import counted

from envman.cli.complete import complete_stack

from envman.cli._options import (
    AptMirror, CaBundle, FrameworkIndex, Offline, PipExtraIndex, PipIndex, Platform, PythonMirror, RegistryMirror,
    Wheelhouse, BuilderOpt, BaseOpt, base_preference, builder_preference, network_options, platform_option,
)
from envman.cli._out import console, emit_json, local_time, plain, tagged

if TYPE_CHECKING:  # helpers' annotations only (typer reads the commands' at run time)
    from envman.engine.docker import Engine
    from envman.render.base import BaseBuild
    from envman.render.options import RenderOptions
    from envman.stack.names import Stack

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def require_names(names: list[str], all_: bool) -> None:
    """Stack names or ``--all``: exactly one of them."""
    from envman.errors import UserError

    if bool(names) == bool(all_):
        raise UserError("give stack names or --all, not both and not neither", where="envman build", fix="e.g. envman build torch-2.4-cuda12")


def _stacks(names: list[str], all_: bool, platform: str | None = None):
    from envman.stack.resolve import resolve, resolve_row
    from envman.stack.names import DEFAULT_PLATFORM
    from envman.cli import get_matrix

    require_names(names, all_)
    plat = platform_option(platform)
    if all_:
        m = get_matrix()
        on = plat or DEFAULT_PLATFORM
        return [resolve_row(m, b, on) for b in m.builds if on in b.platforms]
    if plat is None:  # through the stack cache, as a run resolves: no matrix load when it answers
        from envman.cli import matrix_source

        return [matrix_source().resolve(n) for n in names]
    return [resolve(get_matrix(), n, plat) for n in names]


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
    registry_mirror: RegistryMirror = None,
    ca_bundle: CaBundle = None,
    pip_index: PipIndex = None,
    pip_extra_index: PipExtraIndex = None,
    framework_index: FrameworkIndex = None,
    wheelhouse: Wheelhouse = None,
    offline: Offline = None,
    apt_mirror: AptMirror = None,
    python_mirror: PythonMirror = None,
    builder: BuilderOpt = None,
    base: BaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Build stacks, smoke-test them inside the new image, promote the ones that pass."""
    from concurrent.futures import ThreadPoolExecutor

    from envman.images.build import FAIL, build_smoke_promote
    from envman.engine.docker import Engine
    from envman.errors import EnvmanError
    from envman.state import stable_ref

    stacks = _stacks(list(names or []), all_, platform)
    options = network_options(
        registry_mirror=registry_mirror, ca_bundle=ca_bundle, pip_index=pip_index, pip_extra_index=pip_extra_index,
        framework_index=framework_index, wheelhouse=wheelhouse, offline=offline, apt_mirror=apt_mirror,
        python_mirror=python_mirror,
    )
    preference = builder_preference(builder)
    bases = stack_bases(stacks, options, base_preference(base))
    from envman.engine.builder import ClassicBuilder, select_builder

    from envman.config import load_build_network

    network = load_build_network()
    with Engine.connect() as first:  # fail fast, one line, before any work
        chosen = select_builder(first, preference, network=network)
    from envman.cli.progress import BuildProgress

    err = console(stderr=True)
    for stack in stacks:  # on stderr, so also beside --json
        if bases[stack.name][1]:
            err.print(plain(f"{stack.name}: {bases[stack.name][1]}"), highlight=False, soft_wrap=True)
    progress = BuildProgress([s.name for s in stacks], err, live=err.is_terminal, quiet=as_json)

    def one(stack):
        with Engine.connect() as engine:
            try:
                res = build_smoke_promote(
                    engine, stack, options, nocache=no_cache, pull=pull, require_gpu=require_gpu,
                    accept_cpu_only=accept_cpu_only, on_event=lambda ev: progress.event(stack.name, ev),
                    on_phase=lambda ph: progress.phase(stack.name, ph),
                    # classic: a builder on this thread's engine
                    builder=chosen if chosen.kind == "buildkit" else ClassicBuilder(engine, network=network),
                    base=bases[stack.name][0],
                )
                progress.phase(stack.name, "failed" if not res.ok else "done")  # smoke is always set here
                return stack, res, None
            except EnvmanError as exc:
                progress.phase(stack.name, "failed")
                return stack, None, exc

    with progress, ThreadPoolExecutor(max_workers=jobs) as pool:
        outcomes = list(pool.map(one, stacks))
    failed = 0
    rows = []
    for stack, res, exc in outcomes:
        if exc is not None:
            failed += 1
            tail = getattr(exc, "log_tail", "")
            from envman.images.failure import summarize

            why = summarize(getattr(exc, "what", ""), tail, getattr(exc, "step", None)).after(exc.fix) if tail else None
            from envman.images.failure import reason_of, without_script

            error = without_script(exc.line())
            if why is not None and why.error_class:
                error = f"{reason_of(why.error_class)}: {error}"
            rows.append({"name": stack.name, "result": "build-failed", "error": error, "log_tail": tail,
                         "failing_step": why.step if why else None, "error_lines": list(why.errors) if why else [],
                         "error_class": why.error_class if why else None, "hint": why.hint if why else None})
            continue
        smoke = res.smoke
        if smoke.overall == FAIL or not res.promoted:  # a build that is not promoted is not a success
            failed += 1
        rows.append({
            "name": stack.name, "image": res.build.ref, "image_id": res.build.image_id, "cached": res.build.cached,
            "build_seconds": round(res.build.seconds, 2), "smoke": smoke.overall, "reason": smoke.reason,
            "promoted": res.promoted, "stable": stable_ref(stack) if res.promoted else None,
            "log": res.build.log_path,
            **({"base": res.build.base.ref, "base_cached": res.build.base.cached,
                "base_seconds": round(res.build.base.seconds, 2)} if res.build.base is not None else {}),
        })
    if as_json:
        emit_json(rows)
    else:
        print_rows(rows, console(), console(stderr=True))
    if failed:
        raise typer.Exit(1)
    if not no_cache and not pull and all(r["cached"] and r["promoted"] for r in rows):
        _remember_noop(rows, options, as_json=as_json, argv=ctx.obj)


def stack_bases(stacks: Sequence[Stack], options: RenderOptions,
                mode: str) -> dict[str, tuple[BaseBuild | None, str | None]]:
    """{stack name: (its rebuilt base or None, the line that says how it gets its base or None)}."""
    from envman.cli import get_matrix
    from envman.render.base import base_line, choose_base

    out = {}
    for stack in stacks:
        rebuilt = choose_base(get_matrix, stack, mode, registry_mirror=options.registry_mirror,
                              apt_mirror=options.apt_mirror, ca_bundle=options.ca_bundle)
        out[stack.name] = (rebuilt, base_line(stack, rebuilt, mode, registry_mirror=options.registry_mirror))
    return out


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
    from envman.images.build import list_envman_images

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
    from envman.images.build import PruneScope, prune as _prune
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

