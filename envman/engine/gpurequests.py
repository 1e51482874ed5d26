"""How a GPU request reaches Docker: ``docker run --gpus``'s device requests, and the fix when the
engine has no NVIDIA runtime to honour them."""

from __future__ import annotations

import re
from typing import Any

from envman.engine.values import GpuRequest
from envman.errors import UserError

NVIDIA_TOOLKIT_FIX = (
    "install the NVIDIA Container Toolkit: "
    "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html, "
    "then `nvidia-ctk runtime configure --runtime=docker` and restart dockerd"
)


def gpu_device_requests(gpus: GpuRequest | None) -> list[dict[str, Any]]:
    """What ``docker run --gpus`` sends, as keyword dicts for ``docker.types.DeviceRequest``.

    Every GPU → count -1; a count → that many GPUs; devices → those device indexes or UUIDs.
    The driver stays empty, like the CLI's, so the engine picks the NVIDIA runtime hook or CDI.
    """
    if gpus is None:
        return []
    base: dict[str, Any] = {"driver": "", "capabilities": [["gpu"]]}
    if gpus.kind == "all":
        return [{**base, "count": -1}]
    if gpus.kind == "count":
        if isinstance(gpus.count, bool) or not isinstance(gpus.count, int) or gpus.count < 1:
            raise UserError(f"gpus={gpus.count!r}: a GPU count must be at least 1 (ask for CPU-only explicitly instead)")
        return [{**base, "count": gpus.count}]
    if gpus.kind != "devices":
        raise UserError(f"gpus={gpus.kind!r}: expected every GPU, a positive count or a list of device ids")
    ids = [str(g) for g in gpus.devices]
    if not ids or any(not re.fullmatch(r"[A-Za-z0-9:._-]+", i) for i in ids):
        raise UserError(f"gpus={list(gpus.devices)!r}: expected a non-empty list of device indexes or UUIDs")
    return [{**base, "device_ids": ids}]
