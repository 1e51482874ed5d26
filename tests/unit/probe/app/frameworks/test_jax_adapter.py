"""The JAX adapter (``envman/probe/app/frameworks/jax_adapter.py``), without JAX."""

from __future__ import annotations

import pytest

from envman.probe.app.frameworks import base as base_mod


def test_jax_and_onnxruntime_build_versions_without_the_frameworks():
    from envman.probe.app.frameworks.jax_adapter import JaxAdapter
    from envman.probe.app.frameworks.onnxruntime_adapter import OnnxruntimeAdapter

    class Versions:
        def cuda_runtime_get_version(self):
            return 12040

        def cudnn_get_version(self):
            raise RuntimeError("no cuDNN query in this jaxlib")

    class FakeJax:
        def __init__(self, gpus):
            self.gpus = gpus

        def devices(self, platform):
            return self.gpus

    jax = JaxAdapter()
    jax.module, jax._versions = FakeJax(["gpu:0"]), Versions()
    assert jax.cuda_version() == "12.4"
    with pytest.raises(base_mod.NotReported, match="jax does not report its cuDNN version"):
        jax.cudnn_version()
    jax.module, jax._versions = FakeJax([]), None  # a CPU jax: no CUDA, no cuDNN
    assert jax.cuda_version() is None and jax.cudnn_version() is None

    class Info:
        cuda_version = "12.2"
        cudnn_version = ""

    class FakeOrt:
        def __init__(self, providers):
            self.providers = providers

        def get_available_providers(self):
            return self.providers

    ort = OnnxruntimeAdapter()
    ort.module, ort.bpi = FakeOrt(["CUDAExecutionProvider", "CPUExecutionProvider"]), Info
    assert ort.cuda_version() == "12.2"
    with pytest.raises(base_mod.NotReported, match="onnxruntime does not report its cuDNN version"):
        ort.cudnn_version()
    ort.module, ort.bpi = FakeOrt(["CPUExecutionProvider"]), None
    assert ort.cuda_version() is None and ort.cudnn_version() is None
