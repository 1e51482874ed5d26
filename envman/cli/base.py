"""``envman base make``: a base image from the distribution's own mirror, registered for the rows
that can build on it (:mod:`envman.images.localbase`)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer


def make(
    release: Annotated[
        Optional[str],
        typer.Option("--release", metavar="RELEASE",
                     help="Debian or Ubuntu release to make (bookworm, trixie, noble, or debian12...); default: this machine's.",
                     show_default=False),
    ] = None,
    mirror: Annotated[
        Optional[str],
        typer.Option("--mirror", metavar="URL", help="Archive to debootstrap from; default: the one in this machine's apt sources.",
                     show_default=False),
    ] = None,
) -> None:
    """Make a base image from the distribution's own mirror (debootstrap, then import; needs root and no registry)
    and register it in matrix files of yours for every row whose wheels bring their own CUDA libraries."""
    from envman.cli import matrix_source
    from envman.cli._out import console, plain
    from envman.engine.docker import Engine
    from envman.images import localbase

    err = console(stderr=True)
    made = localbase.make_here(release, mirror, connect=Engine.connect, extra=matrix_source().extra,
                               on_step=lambda s: err.print(plain(f"base make: {s}"), highlight=False, soft_wrap=True))
    out = console()
    for line in localbase.report(made):
        out.print(plain(line), highlight=False, soft_wrap=True)
