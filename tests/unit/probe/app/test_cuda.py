"""The driver API wrapper (``envman/probe/app/cuda.py``), over the fake libcuda."""

from __future__ import annotations

from envman.probe.app import cuda as cuda_mod
from tests.support.probe_app import FakeLib


def test_cuda_release_frees_what_was_allocated_and_ignores_errors():
    class Lib(FakeLib):
        def cuMemFree_v2(self, h):
            return 1 if h not in self.mem else FakeLib.cuMemFree_v2(self, h)  # CUDA_ERROR_INVALID_VALUE

    lib = Lib()
    cuda = cuda_mod.Cuda(lib)
    a, b = cuda.mem_alloc(64), cuda.mem_alloc(64)
    cuda.release(a, None, 0, b, a)  # a second free of ``a`` fails in the driver: ignored
    assert lib.mem == {}
    assert cuda.error_name(100) == "CUDA_ERROR_NO_DEVICE" and cuda.error_string(100) is None
