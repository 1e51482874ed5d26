"""What a run asks the engine for, one type each, shared by every layer above: a bind
:class:`Mount` (host path → container path) and a :class:`GpuRequest` (every GPU, a count, or
explicit devices). The project file (:mod:`envman.project.file`) parses them, the run plan and
the exporters turn them into command lines and manifests, and the engine
(:mod:`envman.engine.docker`) into the Engine API's binds and device requests. Standard library
only: the run path imports it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

GpuKind = Literal["all", "count", "devices"]


@dataclass(frozen=True)
class Mount:
    """A bind mount of a host path into a container."""

    source: str  # absolute host path
    target: str  # absolute container path
    read_only: bool = False

    @property
    def mode(self) -> str:
        """``ro`` or ``rw``: the mode of a bind as the Engine API and ``docker run -v`` spell it."""
        return "ro" if self.read_only else "rw"


@dataclass(frozen=True)
class GpuRequest:
    """What a run asks for: every GPU, a count, or explicit device indexes / UUIDs."""

    kind: GpuKind
    count: int | None = None
    devices: tuple[str, ...] = ()

    def __str__(self) -> str:
        if self.kind == "all":
            return "all"
        if self.kind == "count":
            return str(self.count)
        return "device=" + ",".join(self.devices)

    @property
    def cdi_devices(self) -> tuple[str, ...]:
        """The CDI device names of the request (``nvidia.com/gpu=<name>``): CDI has no "N GPUs",
        so a count takes indexes 0..N-1, on the run path and on Podman's API alike."""
        if self.kind == "all":
            return ("all",)
        if self.kind == "count":
            return tuple(str(i) for i in range(self.count or 0))
        return self.devices


__all__ = ["GpuKind", "GpuRequest", "Mount"]
