"""``envman ps``, ``envman stop``, ``envman notebook``: envman's running environments."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from envman.errors import counted

from envman.cli.complete import complete_stack, complete_project

from envman.cli._out import console, emit_json

if TYPE_CHECKING:  # helpers' annotations only (typer reads the commands' at run time)
    from envman.engine.docker import Engine

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def ps(
    all_users: Annotated[bool, typer.Option("--all-users", help="Every user's run containers, not only yours.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """List your running envman environments and runs (name, project, stack, state, started, image)."""
    from envman.run.envs import list_containers, own_containers

    rows = [c.to_json() for c in (list_containers(uid=None) if all_users else own_containers()[0])]
    if as_json:
        emit_json(rows)
        return
    if not rows:
        console().print("no running envman environments (start one: envman run --detach PROJECT)", markup=False)
        return
    from rich.table import Table

    t = Table(box=None, pad_edge=False)
    for col in ("name", "project", "stack", "state", "created", "uid" if all_users else None):
        if col:
            t.add_column(col, no_wrap=col in ("name", "project", "state"), overflow="fold")
    for r in rows:
        cells = [r["name"] or "-", r["project"], r["stack"], r["state"], r["created"]]
        if all_users:
            cells.append(str(r["uid"]))
        t.add_row(*(_plain(c) for c in cells))
    console().print(t)


def _plain(text: str):
    from rich.text import Text

    from envman.errors import printable

    return Text(printable(text))  # user data: never markup, never a control sequence


def stop(
    target: Annotated[str, typer.Argument(metavar="NAME|PROJECT", help="An environment's name, or a project: all of its environments.", autocompletion=complete_project)],
    timeout: Annotated[int, typer.Option("--time", "-t", min=0, help="Seconds to wait before killing.")] = 10,
) -> None:
    """Stop your environments called NAME, or all of PROJECT's (their containers are removed)."""
    from envman.errors import UserError
    from envman.run.envs import not_started_here, own_containers, select, stop as stop_containers

    mine, foreign = own_containers()
    try:
        chosen = select(mine, target, action="stop")
    except UserError:
        not_started_here(foreign, target, action="stop")
        raise
    stopped = stop_containers(chosen, timeout)
    for c in stopped:
        console().print(f"stopped {c.env or c.name} ({c.project} on {c.stack})", markup=False, highlight=False)


def notebook(
    project: Annotated[Optional[str], typer.Argument(metavar="PROJECT", help="Registered name or path (default: the project of the current directory).", show_default=False, autocompletion=complete_project)] = None,
    port: Annotated[Optional[int], typer.Option("--port", "-p", metavar="PORT", help="Port on 127.0.0.1 (default: a free one).", show_default=False)] = None,
    stack: Annotated[Optional[str], typer.Option("--stack", metavar="STACK", help="Run on this stack instead of the project's.", show_default=False, autocompletion=complete_stack)] = None,
    gpus: Annotated[Optional[str], typer.Option("--gpus", metavar="GPUS", help='"all", a count, or "device=0,2" (default: as envman run).', show_default=False)] = None,
    no_gpu: Annotated[bool, typer.Option("--no-gpu", help="Run on the CPU only.")] = False,
    rebuild: Annotated[bool, typer.Option("--rebuild", help="Rebuild the project image and the notebook layer.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Build what is missing, then print the docker command.")] = False,
    ca_bundle: Annotated[Optional[str], typer.Option("--ca-bundle", metavar="FILE", help="PEM bundle that apt and pip trust while the project image and the notebook layer build (default: \\[network] ca_bundle of config.toml).", show_default=False)] = None,
) -> None:
    """JupyterLab in a project's stack on 127.0.0.1 with a random token: prints the URL; Ctrl-C stops it."""
    from envman.run.notebook import notebook_cli
    from envman.cli import matrix_source

    notebook_cli(project, port=port, stack=stack, gpus=gpus, no_gpu=no_gpu, rebuild=rebuild, dry_run=dry_run,
                 matrix=matrix_source(), ca_bundle=ca_bundle)


def _build_cache_line(engine: Engine | None) -> str:
    """The engine's build cache, which clean leaves (it is the engine's, shared by its users)."""
    from envman.cli.build import engine_storage, build_cache_note

    storage = engine_storage(engine) if engine is not None else None
    if storage is not None and storage[1]:
        return build_cache_note(storage[1])
    return ("the engine's build cache (often the largest item, shared by everyone who builds on the engine) is "
            "not envman's to remove: docker builder prune reclaims it (as someone the engine trusts)")


def _print_plan(p: Any, engine: Any, *, dry_run: bool) -> None:
    """What ``clean`` removes (or would), what it keeps, and the engine's build cache."""
    c = console()
    for path, size in zip(p.paths, p.sizes):
        c.print(f"{'would remove' if dry_run else 'remove'} {path} ({size / 1e6:.1f} MB)", markup=False, highlight=False)
    for _id, what, size in p.images:
        c.print(f"{'would remove' if dry_run else 'remove'} image {what} ({size / 1e6:.0f} MB)", markup=False, highlight=False)
    for what in p.kept_in_use:
        c.print(f"keep image {what}: a container uses it", markup=False, highlight=False)
    if p.empty:
        c.print("nothing to remove", markup=False)
    c.print(_build_cache_line(engine), markup=False, highlight=False)


def _print_removed(p: Any, failed: list[str], based_on: list[str], size: int) -> None:
    for f in failed:
        console(stderr=True).print(f"could not remove image {f}", markup=False, highlight=False)
    for k in based_on:
        console().print(f"keep image {k}", markup=False, highlight=False)
    console().print(f"removed {counted(len(p.paths), 'path')}, {counted(len(p.images) - len(failed) - len(based_on), 'image')} "
                    f"({size / 1e6:.0f} MB)", markup=False, highlight=False)


def clean(
    images: Annotated[bool, typer.Option("--images", help="Also remove the images you built (stacks, project images, notebook layers) that no container uses.")] = False,
    config: Annotated[bool, typer.Option("--config", help="Also remove the project registry and config.toml (project files stay).")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would be removed; remove nothing.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Remove envman's state for you: project homes, logs, reports, caches (and, asked, config and your images)."""
    import sys

    from envman.run.clean import apply, plan
    from envman.errors import UserError

    engine = None
    if images:
        from envman.engine.docker import Engine

        engine = Engine.connect()
    try:
        p = plan(config=config, images=images, engine=engine)
        doc: dict[str, Any] = {"paths": [str(x) for x in p.paths], "bytes": sum(p.sizes) + sum(i[2] for i in p.images),
               "images": [i[1] for i in p.images], "kept_in_use": list(p.kept_in_use), "removed": False}
        if not yes and not dry_run and not p.empty and not sys.stdin.isatty():
            # refused before the list: "remove ..." lines followed by a refusal read as done
            raise UserError(f"not confirmed: {counted(len(p.paths), 'path')} and {counted(len(p.images), 'image')} "
                            "would be removed and there is no terminal to ask", where="envman clean",
                            fix="pass --yes to remove without asking (or --dry-run to list)")
        if not as_json:
            _print_plan(p, engine, dry_run=dry_run)
        if dry_run or p.empty:
            if as_json:
                emit_json(doc)
            return
        if not yes:
            if not typer.confirm(f"remove {counted(len(p.paths), 'path')} and {counted(len(p.images), 'image')}?", default=False):
                raise typer.Exit(1)
        based_on: list[str] = []
        failed = apply(p, engine, kept=based_on)
        doc["removed"], doc["failed"], doc["kept_as_base"] = True, failed, based_on
        emit_json(doc) if as_json else _print_removed(p, failed, based_on, doc["bytes"])
        if failed:
            raise typer.Exit(1)
    finally:
        if engine is not None:
            engine.close()

