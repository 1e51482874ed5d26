"""The PyTorch adapter (``envman/probe/app/frameworks/torch_adapter.py``), over a fake ``torch``."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from envman.probe.app.frameworks.torch_adapter import TorchAdapter


def fake_torch(*, cuda="12.8", cudnn=90701, devices=(), init_error=None, archs=("sm_80", "sm_90")):
    def init():
        if init_error:
            raise RuntimeError(init_error)

    cuda_ns = SimpleNamespace(
        is_available=lambda: bool(devices), init=init, device_count=lambda: len(devices),
        get_device_capability=lambda i: devices[i][1], get_device_name=lambda i: devices[i][0],
        get_arch_list=lambda: list(archs))
    cudnn_ns = SimpleNamespace(is_available=lambda: cudnn is not None, version=lambda: cudnn)
    return SimpleNamespace(__version__="2.7.1+cu128", version=SimpleNamespace(cuda=cuda),
                           backends=SimpleNamespace(cudnn=cudnn_ns), cuda=cuda_ns)


def adapter(torch):
    a = TorchAdapter()
    a.module = torch
    return a


def test_versions_come_from_the_build():
    a = adapter(fake_torch())
    assert (a.version(), a.cuda_version(), a.cudnn_version()) == ("2.7.1+cu128", "12.8", "9.7.1")


def test_a_cpu_build_reports_no_cuda_and_no_cudnn():
    a = adapter(fake_torch(cuda=None, cudnn=None))
    assert a.cuda_version() is None and a.cudnn_version() is None


def test_gpus_lists_each_device_with_its_compute_capability():
    a = adapter(fake_torch(devices=[("NVIDIA H100", (9, 0)), ("NVIDIA A10", (8, 6))]))
    assert a.gpus() == [{"name": "NVIDIA H100", "cc": "9.0"}, {"name": "NVIDIA A10", "cc": "8.6"}]
    assert a.arch_list() == ["sm_80", "sm_90"]


def test_no_gpu_raises_with_the_reason_cuda_init_gives():
    with pytest.raises(RuntimeError) as e:
        adapter(fake_torch(init_error="Found no NVIDIA driver on your system")).gpus()
    assert str(e.value) == "torch.cuda.is_available() is False: Found no NVIDIA driver on your system"
    with pytest.raises(RuntimeError, match=r"^torch.cuda.is_available\(\) is False$"):
        adapter(fake_torch()).gpus()


def test_cpu_matmul_multiplies_as_float32_and_returns_lists():
    calls = []

    class T:
        def __init__(self, rows):
            self.rows = rows

        def tolist(self):
            return self.rows

    def tensor(rows, dtype=None):
        calls.append(dtype)
        return T(rows)

    def matmul(a, b):
        return T([[sum(x * y for x, y in zip(r, c)) for c in zip(*b.rows)] for r in a.rows])

    torch = SimpleNamespace(float32="float32", tensor=tensor, matmul=matmul)
    assert adapter(torch).cpu_matmul([[1.0, 2.0]], [[3.0], [4.0]]) == [[11.0]]
    assert calls == ["float32", "float32"]
