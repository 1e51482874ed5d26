"""The ONNX Runtime adapter (``envman/probe/app/frameworks/onnxruntime_adapter.py``), over a fake
``onnxruntime``. Its build versions without the framework: ``test_jax_adapter.py``."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from envman.probe.app.frameworks.base import NotReported
from envman.probe.app.frameworks.onnx_proto import onnx_model
from envman.probe.app.frameworks.onnxruntime_adapter import OnnxruntimeAdapter

CUDA, CPU = "CUDAExecutionProvider", "CPUExecutionProvider"


def fake_ort(available, session_providers=None):
    sessions = []

    class Session:
        def __init__(self, model, options, providers):
            self.model, self.options, self.providers = model, options, providers
            sessions.append(self)

        def get_providers(self):
            return list(session_providers if session_providers is not None else self.providers)

    ort = SimpleNamespace(get_available_providers=lambda: list(available), SessionOptions=SimpleNamespace,
                          InferenceSession=Session, __version__="1.20.1")
    return ort, sessions


def adapter(ort, bpi=None):
    a = OnnxruntimeAdapter()
    a.module, a.bpi = ort, bpi
    return a


def test_extra_names_the_providers_and_the_package():
    ort, _ = fake_ort([CUDA, CPU])
    assert adapter(ort, SimpleNamespace(package_name="onnxruntime-gpu")).extra() == {
        "providers": [CUDA, CPU], "package": "onnxruntime-gpu"}
    assert adapter(ort).extra()["package"] is None
    assert adapter(ort).version() == "1.20.1"


def test_gpus_opens_a_cuda_session_on_a_model_of_its_own():
    ort, sessions = fake_ort([CUDA, CPU])
    assert adapter(ort).gpus() == [{"name": "CUDAExecutionProvider device 0", "cc": None}]
    (s,) = sessions
    assert s.providers == [CUDA, CPU] and s.options.log_severity_level == 3
    assert s.model == onnx_model("MatMul", [("A", [2, 2]), ("B", [2, 2])], ("C", [2, 2]))


def test_no_cuda_provider_raises_naming_those_available():
    ort, sessions = fake_ort([CPU])
    with pytest.raises(RuntimeError, match=r"CUDAExecutionProvider not in available providers \[CPUExecutionProvider\]"):
        adapter(ort).gpus()
    assert sessions == []


def test_a_cuda_provider_that_fails_to_load_raises():
    ort, _ = fake_ort([CUDA, CPU], session_providers=[CPU])  # the session fell back to the CPU
    with pytest.raises(RuntimeError, match=r"could not be loaded \(session providers \[CPUExecutionProvider\]"):
        adapter(ort).gpus()


def test_arch_list_is_never_reported():
    ort, _ = fake_ort([CUDA])
    with pytest.raises(NotReported, match="does not report the GPU archs"):
        adapter(ort).arch_list()
