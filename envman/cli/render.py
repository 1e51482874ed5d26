"""``envman render``: a stack's build context (Dockerfile + files), without Docker."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from envman.cli._out import emit_line, emit_text
from envman.errors import counted

from envman.cli.complete import complete_stack, complete_flavour

from envman.cli._options import (
    AptMirror, CaBundle, FrameworkIndex, Offline, PipExtraIndex, PipIndex, Platform, PythonMirror, RegistryMirror,
    Wheelhouse, BuilderOpt, BaseOpt, base_preference, builder_preference, network_options, platform_option,
)

DEFAULT_OUT = Path("envman-context")


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
) -> None:
    """Render a stack's build context (Dockerfile, entrypoint, probe; base/Dockerfile where the base is rebuilt from NVIDIA's recipe) without Docker."""
    from envman.engine.builder import builder_for_render
    from envman.errors import UserError
    from envman.render.dockerfile import render_stack
    from envman.stack.resolve import resolve, resolve_row
    from envman.stack.names import DEFAULT_PLATFORM, parse_name
    from envman.cli import get_matrix

    if bool(name) == bool(all_):
        raise UserError("give a stack NAME or --all, not both and not neither", where="envman render", fix="e.g. envman render torch-2.4-cuda12")
    options = network_options(
        registry_mirror=registry_mirror, ca_bundle=ca_bundle, pip_index=pip_index, pip_extra_index=pip_extra_index,
        framework_index=framework_index, wheelhouse=wheelhouse, offline=offline, apt_mirror=apt_mirror,
        python_mirror=python_mirror,
    )
    plat = platform_option(platform)
    kind = builder_for_render(builder_preference(builder))
    mode = base_preference(base)
    m = get_matrix()

    def rebuilt(stack):
        from envman.render.base import choose_base

        return choose_base(m, stack, mode, registry_mirror=options.registry_mirror, apt_mirror=options.apt_mirror,
                           ca_bundle=options.ca_bundle)

    if all_:
        if flavour is not None:
            raise UserError("--flavour applies to one stack, not to --all", where="envman render", fix="render the rows, then the flavour you need by name")
        if output == "-":
            raise UserError("-o - prints one Dockerfile; --all writes directories", where="envman render", fix="give --all an output directory: -o DIR")
        root = Path(output) if output else DEFAULT_OUT
        on = plat or DEFAULT_PLATFORM
        stacks = [resolve_row(m, b, on) for b in m.builds if on in b.platforms]
        seen: dict[str, object] = {}
        shared: dict = {}  # one probe archive on disk, hard-linked into every context
        for stack in stacks:
            if stack.name in seen:
                if seen[stack.name] == stack:  # two rows resolving to one stack: render it once
                    continue
                raise UserError(
                    f"rows {seen[stack.name].row} and {stack.row} both resolve to the stack name {stack.name}",  # type: ignore[attr-defined]
                    where="envman render --all",
                    fix="make the rows differ in version, CUDA or Python (envman matrix validate)",
                )
            seen[stack.name] = stack
            render_stack(stack, options, builder=kind, base=rebuilt(stack)).write(root / stack.name, shared)
        emit_line(f"{counted(len(seen), 'context')} in {root}")
        return

    assert name is not None
    if flavour is not None:
        from envman.stack.names import FLAVOURS

        if flavour not in FLAVOURS:
            raise UserError(f"unknown flavour {flavour!r}", where="--flavour", fix="use one of " + ", ".join(FLAVOURS))
        q = parse_name(name)
        if q.flavour and q.flavour != flavour:
            raise UserError(f"{name!r} already names flavour {q.flavour!r}", where="--flavour", fix="give the flavour once")
        if not q.flavour:
            name = f"{name}-{flavour}"
    stack = resolve(m, name, plat)
    ctx = render_stack(stack, options, builder=kind, base=rebuilt(stack))
    if output == "-":
        emit_text(ctx.dockerfile)
        return
    dest = ctx.write(Path(output) if output else DEFAULT_OUT / stack.name)
    # Plain lines (no wrapping): scripts read them.
    emit_line(str(dest))
    emit_line(f"render-hash {ctx.render_hash}")
    if "base/Dockerfile" in ctx.files:
        emit_line(f"base {stack.base_image} is no longer served by NVIDIA: {dest / 'base' / 'Dockerfile'} rebuilds it "
                   "from NVIDIA's recipe")
