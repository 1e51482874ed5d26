"""``envman matrix ls``: the rows of a framework, a CUDA version or a platform, as plain values."""

from __future__ import annotations

import re
from typing import Any, Sequence

from envman.errors import UserError
from envman.matrix.model import FrameworkBuild
from envman.stack.names import ALIASES, parse_platform
from envman.stack.resolve import version_matches


def select_rows(rows: Sequence[FrameworkBuild], framework: str | None, cuda: str | None,
                platform: str | None) -> list[FrameworkBuild]:
    """The rows of ``framework`` (a name or alias), ``cuda`` (a version or prefix, ``cpu`` for CPU
    builds) and ``platform`` (``linux/arm64`` or ``arm64``), each when given, checked in that order."""
    out = list(rows)
    if framework is not None:
        fw = ALIASES.get(framework.lower())
        if fw is None:
            raise UserError(f"unknown framework {framework!r}", where="--framework", fix="use one of " + ", ".join(sorted(set(ALIASES))))
        out = [b for b in out if b.framework == fw]
    if cuda is not None:
        if cuda.lower() == "cpu":
            out = [b for b in out if b.cuda is None]
        else:
            if not re.fullmatch(r"[0-9]{1,3}(\.[0-9]{1,3}){0,2}", cuda):
                raise UserError(f"not a CUDA version: {cuda!r}", where="--cuda", fix="e.g. --cuda 12.4, --cuda 11, --cuda cpu")
            out = [b for b in out if b.cuda is not None and version_matches(cuda, b.cuda)]
    plat = parse_platform(platform) if platform is not None else None
    if plat:
        out = [b for b in out if plat in b.platforms]
    return out


def row_json(b: FrameworkBuild) -> dict[str, Any]:
    """One row as ``envman matrix ls --json`` prints it."""
    return {
        "name": b.name,
        "framework": b.framework,
        "framework_version": str(b.version),
        "variant": b.variant,
        "cuda": f"{b.cuda.major}.{b.cuda.minor}" if b.cuda else None,
        "cudnn": b.cudnn,
        "python": [str(p) for p in b.python],
        "python_freethreaded": [f"{p}t" for p in b.python_freethreaded],
        "platforms": list(b.platforms),
        "platform_status": b.platform_status,
        "default": b.default,
        "status": b.status,
    }


__all__ = ["row_json", "select_rows"]
