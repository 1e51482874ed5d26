"""What a run asks the engine for (envman/engine/values.py): a bind mount's mode, and a GPU
request as ``--gpus`` spells it and as CDI names its devices."""

from __future__ import annotations

import dataclasses

import pytest

from envman.engine.values import GpuRequest, Mount


def test_a_mount_is_read_write_unless_read_only_and_frozen():
    assert Mount("/a", "/b").mode == "rw" and Mount("/a", "/b", read_only=True).mode == "ro"
    with pytest.raises(dataclasses.FrozenInstanceError):
        Mount("/a", "/b").source = "/etc"  # type: ignore[misc]


@pytest.mark.parametrize("request_, text, cdi", [
    (GpuRequest("all"), "all", ("all",)),
    (GpuRequest("count", count=1), "1", ("0",)),
    (GpuRequest("count", count=3), "3", ("0", "1", "2")),
    (GpuRequest("devices", devices=("0", "GPU-abc")), "device=0,GPU-abc", ("0", "GPU-abc")),
])
def test_a_gpu_request_as_gpus_spells_it_and_as_cdi_names_it(request_, text, cdi):
    assert str(request_) == text and request_.cdi_devices == cdi


def test_a_count_of_none_names_no_cdi_device():
    assert GpuRequest("count").cdi_devices == ()
