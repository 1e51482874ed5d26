"""envman.engine.gpurequests: what `docker run --gpus` sends for every GPU, a count or device ids, and
requests that are no GPU request refused with one line."""

from __future__ import annotations

import pytest

from envman.engine.gpurequests import gpu_device_requests
from envman.engine.values import GpuRequest
from envman.errors import UserError

def test_gpus_all() -> None:
    assert gpu_device_requests(GpuRequest("all")) == [{"driver": "", "count": -1, "capabilities": [["gpu"]]}]


def test_gpus_count() -> None:
    assert gpu_device_requests(GpuRequest("count", count=2)) == [{"driver": "", "count": 2, "capabilities": [["gpu"]]}]


def test_gpus_ids() -> None:
    assert gpu_device_requests(GpuRequest("devices", devices=("0", "GPU-1a2b"))) == [
        {"driver": "", "device_ids": ["0", "GPU-1a2b"], "capabilities": [["gpu"]]}
    ]


def test_gpus_none() -> None:
    assert gpu_device_requests(None) == []


@pytest.mark.parametrize("bad", [GpuRequest("count", count=0), GpuRequest("count", count=-1),
                                 GpuRequest("count", count=True), GpuRequest("some"),  # type: ignore[arg-type]
                                 GpuRequest("devices"), GpuRequest("devices", devices=("0;rm",)),
                                 GpuRequest("devices", devices=("0", ""))])
def test_gpus_invalid(bad: GpuRequest) -> None:
    with pytest.raises(UserError):
        gpu_device_requests(bad)


def test_gpu_requests_are_valid_sdk_device_requests() -> None:
    from docker.types import DeviceRequest

    req = DeviceRequest(**gpu_device_requests(GpuRequest("all"))[0])
    assert req == {"Driver": "", "Count": -1, "DeviceIDs": [], "Capabilities": [["gpu"]], "Options": {}}


