"""config.toml's ``[build]`` table: the builder (``--builder``), how a stack gets a base NVIDIA no
longer serves (``--base``) and the network of a build's RUN steps, parsed into one typed value,
:class:`BuildConfig`::

    [build]
    builder = "auto"    # auto | buildkit | classic (--builder)
    base = "auto"       # auto | pull | rebuild (--base)
    network = "default" # default | host
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal, Mapping

from envman.errors import UserError

#: ``[build] builder`` in the config file and ``--builder`` on the command line.
BUILDERS = ("auto", "buildkit", "classic")

#: ``[build] base`` and ``--base``: how a stack gets an ``nvidia/cuda`` base NVIDIA no longer serves.
BaseMode = Literal["auto", "pull", "rebuild"]
BASE_MODES: tuple[BaseMode, ...] = ("auto", "pull", "rebuild")


def base_mode(value: object, *, where: str) -> BaseMode:
    """``value`` as a base mode: the one check of ``--base`` and ``[build] base`` (``where``: which
    of them gave it), with one wording."""
    if value not in BASE_MODES:
        raise UserError(f"base mode {value!r} is not one of {', '.join(BASE_MODES)}", where=where,
                        fix="use auto, pull or rebuild (--base, or base in [build] of config.toml)")
    return value


#: ``[build] network``: the network of a build's RUN steps. ``host`` reaches a proxy, cache or
#: package mirror on the host's own loopback (apt-cacher-ng on 127.0.0.1:3142, ...).
BUILD_NETWORKS = ("default", "host")

#: The keys of ``[build]``.
BUILD_KEYS = ("builder", "base", "network")


def one_of(key: str, value: object, choices: tuple[str, ...], *, where: str) -> str:
    """``value`` when it is one of ``choices``; else the one wording of a ``[build]`` key's error."""
    if not isinstance(value, str) or value not in choices:
        quoted = [f'"{c}"' for c in choices]
        raise UserError(f"{key} {value!r} is not one of {', '.join(choices)}", where=where,
                        fix=f"write {key} = " + (", ".join(quoted[:-1]) + " or " + quoted[-1]))
    return value


@dataclass(frozen=True)
class BuildConfig:
    """The ``[build]`` table, checked (the defaults when the file sets nothing)."""

    builder: str = "auto"  # one of BUILDERS
    base: BaseMode = "auto"
    network: str | None = None  # None: the engine's default; "host"

    @classmethod
    def parse(cls, table: Mapping[str, Any], *, where: Callable[[str], str]) -> "BuildConfig":
        """``table`` (``[build]``'s keys) checked; ``where(key)`` names a value in errors."""
        builder = one_of("builder", table.get("builder", "auto"), BUILDERS, where=where("builder"))
        base = base_mode(table.get("base", "auto"), where=where("base"))
        network = one_of("network", table.get("network", "default"), BUILD_NETWORKS, where=where("network"))
        return cls(builder, base, None if network == "default" else network)


__all__ = ["BASE_MODES", "BUILDERS", "BUILD_KEYS", "BUILD_NETWORKS", "BaseMode", "BuildConfig", "base_mode", "one_of"]
