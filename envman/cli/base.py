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
    from envman.cli._out import console, plain
    from envman.config import config_path, user_matrix_paths
    from envman.engine.docker import Engine
    from envman.images import localbase
    from envman.images.aptsources import host_apt_sources
    from envman.paths import matrices_dir
    from envman.matrix.load import load_files
    from envman.errors import UserError

    try:
        host = localbase.host_release()
    except UserError:
        host = None
    rel = localbase.release(release) if release else (host or localbase.host_release())
    url = localbase.check_mirror(mirror) if mirror else localbase.mirror_for(rel, host, host_apt_sources())
    shipped = sorted(matrices_dir().glob("*.toml"))
    theirs = [p for p in user_matrix_paths() if not p.name.startswith(localbase.FILE_PREFIX + "-")]
    err = console(stderr=True)
    with Engine.connect() as engine:
        made = localbase.make(rel, mirror=url, engine=engine, config=config_path(), matrix_files=[*shipped, *theirs],
                              shipped_oses=[o.name for o in load_files(shipped).oses],
                              on_step=lambda s: err.print(plain(f"base make: {s}"), highlight=False, soft_wrap=True))
    out = console()
    for line in localbase.report(made):
        out.print(plain(line), highlight=False, soft_wrap=True)
