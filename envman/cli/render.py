"""``envman render``: a stack's build context (Dockerfile + files), without Docker."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from envman.cli._out import emit_line, emit_text
from envman.errors import counted

from envman.cli.complete import complete_stack, complete_flavour

from envman.cli._options import BuildFlags, Platform, option_group, platform_option

if TYPE_CHECKING:  # helpers' annotations only (typer reads the commands' at run time)
    from envman.images.stacks import StackPlan
    from envman.render.options import RenderOptions

DEFAULT_OUT = Path("envman-context")


@option_group("flags", BuildFlags)
def render(
    name: Annotated[Optional[str], typer.Argument(help="Stack name, e.g. torch-2.4-cuda12 (or --all).", show_default=False, autocompletion=complete_stack)] = None,
    all_: Annotated[bool, typer.Option("--all", help="Render every matrix row, one subdirectory each (for CI).")] = False,
    output: Annotated[
        Optional[str],
        typer.Option("--output", "-o", help="Output directory (default ./envman-context/<stack>); '-' prints the Dockerfile.", show_default=False),
    ] = None,
    flavour: Annotated[
        Optional[str],
        typer.Option("--flavour", autocompletion=complete_flavour, help="nvidia/cuda flavour instead of the stack's: base, runtime, cudnn-runtime, devel, cudnn-devel.", show_default=False),
    ] = None,
    platform: Platform = None,
    flags: BuildFlags = BuildFlags(),
) -> None:
    """Render a stack's build context (Dockerfile, entrypoint, probe; base/Dockerfile where the base is rebuilt from NVIDIA's recipe) without Docker."""
    from envman.engine.builder import builder_for_render
    from envman.errors import UserError
    from envman.images.stacks import plan_stacks, render_stacks, select_stacks
    from envman.cli import get_matrix, matrix_source

    if bool(name) == bool(all_):
        raise UserError("give a stack NAME or --all, not both and not neither", where="envman render", fix="e.g. envman render torch-2.4-cuda12")
    options = flags.render_options()
    plat = platform_option(platform)
    kind = builder_for_render(flags.builder_preference())
    mode = flags.base_mode()
    m = get_matrix()
    if all_:
        root = _all_output(flavour, output)
        plans = plan_stacks(select_stacks(matrix_source(), [], True, plat), m, mode, options)
        emit_line(f"{counted(render_stacks(plans, options, kind, root), 'context')} in {root}")
        return
    assert name is not None
    [plan] = plan_stacks(select_stacks(matrix_source(), [_flavoured(name, flavour)], False, plat), m, mode, options)
    _write_one(plan, options, kind, output)


def _all_output(flavour: str | None, output: str | None) -> Path:
    """Where ``render --all`` writes (``--flavour`` and ``-o -`` name one stack)."""
    from envman.errors import UserError

    if flavour is not None:
        raise UserError("--flavour applies to one stack, not to --all", where="envman render", fix="render the rows, then the flavour you need by name")
    if output == "-":
        raise UserError("-o - prints one Dockerfile; --all writes directories", where="envman render", fix="give --all an output directory: -o DIR")
    return Path(output) if output else DEFAULT_OUT


def _flavoured(name: str, flavour: str | None) -> str:
    """``name`` with ``--flavour`` (a known flavour, not one the name already names)."""
    from envman.errors import UserError
    from envman.stack.names import FLAVOURS, parse_name

    if flavour is None:
        return name
    if flavour not in FLAVOURS:
        raise UserError(f"unknown flavour {flavour!r}", where="--flavour", fix="use one of " + ", ".join(FLAVOURS))
    q = parse_name(name)
    if q.flavour and q.flavour != flavour:
        raise UserError(f"{name!r} already names flavour {q.flavour!r}", where="--flavour", fix="give the flavour once")
    return name if q.flavour else f"{name}-{flavour}"


def _write_one(plan: StackPlan, options: RenderOptions, kind: str, output: str | None) -> None:
    """One stack's context written (or its Dockerfile printed, ``-o -``), in plain lines: scripts read them."""
    from envman.render.dockerfile import render_stack

    stack = plan.stack
    ctx = render_stack(stack, options, builder=kind, base=plan.base)
    if output == "-":
        emit_text(ctx.dockerfile)
        return
    dest = ctx.write(Path(output) if output else DEFAULT_OUT / stack.name)
    emit_line(str(dest))
    emit_line(f"render-hash {ctx.render_hash}")
    if "base/Dockerfile" in ctx.files:
        emit_line(f"base {stack.base_image} is no longer served by NVIDIA: {dest / 'base' / 'Dockerfile'} rebuilds it "
                   "from NVIDIA's recipe")
