"""The TensorFlow adapter (``envman/probe/app/frameworks/tensorflow_adapter.py``), over a fake
``tensorflow``'s build info and device list."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from envman.probe.app.frameworks.base import NotReported
from envman.probe.app.frameworks.tensorflow_adapter import TensorflowAdapter


def adapter(info, module=None):
    a = TensorflowAdapter()
    a.info, a.module = info, module
    return a


@pytest.mark.parametrize("info, cuda, cudnn", [
    ({"is_cuda_build": True, "cuda_version": "12.5.1", "cudnn_version": "9"}, "12.5.1", "9"),
    ({"is_cuda_build": True, "cuda_version": "64_118", "cudnn_version": "64_8"}, "11.8", "8"),  # Windows style
    ({"is_cuda_build": False}, None, None),  # a CPU build
    ({"is_cuda_build": True, "cuda_version": ""}, None, None),
])
def test_versions_from_the_build_info(info, cuda, cudnn):
    a = adapter(info)
    if cudnn is None and info.get("is_cuda_build"):
        with pytest.raises(NotReported):
            a.cudnn_version()
    else:
        assert a.cudnn_version() == cudnn
    assert a.cuda_version() == cuda


def test_build_info_without_versions_is_not_reported():
    with pytest.raises(NotReported, match="names no CUDA version"):
        adapter({}).cuda_version()
    with pytest.raises(NotReported, match="names no cuDNN version"):
        adapter({"is_cuda_build": True, "cuda_version": "12.5"}).cudnn_version()
    assert adapter({}).cudnn_version() is None


def test_arch_list_comes_from_the_compute_capabilities():
    assert adapter({"cuda_compute_capabilities": ["sm_60", "compute_90"]}).arch_list() == ["sm_60", "compute_90"]
    with pytest.raises(NotReported, match="names no compute capabilities"):
        adapter({"cuda_compute_capabilities": []}).arch_list()


def fake_tf(devices, details):
    grown = []

    def set_memory_growth(d, on):
        if d.name == "/physical_device:GPU:1":
            raise RuntimeError("Physical devices cannot be modified after being initialized")
        grown.append(d.name)

    def get_device_details(d):
        if d.name not in details:
            raise ValueError("no details")
        return details[d.name]

    exp = SimpleNamespace(set_memory_growth=set_memory_growth, get_device_details=get_device_details)
    config = SimpleNamespace(list_physical_devices=lambda kind: list(devices), experimental=exp)
    return SimpleNamespace(config=config), grown


def test_gpus_names_each_device_and_its_compute_capability_where_known():
    devs = [SimpleNamespace(name="/physical_device:GPU:0"), SimpleNamespace(name="/physical_device:GPU:1")]
    tf, grown = fake_tf(devs, {"/physical_device:GPU:0": {"device_name": "NVIDIA H100", "compute_capability": (9, 0)}})
    got = adapter({}, tf).gpus()
    assert got == [{"name": "NVIDIA H100", "cc": "9.0"}, {"name": "/physical_device:GPU:1", "cc": None}]
    assert grown == ["/physical_device:GPU:0"]  # memory growth where it can still be set


def test_no_gpu_raises():
    tf, _ = fake_tf([], {})
    with pytest.raises(RuntimeError, match=r"list_physical_devices\('GPU'\) is empty"):
        adapter({}, tf).gpus()
