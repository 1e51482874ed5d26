"""What the probe's checks share (``envman/probe/app/context.py``): the defaults a real run gets,
when a GPU counts as present, and what a GPU check says without one."""

from __future__ import annotations

from envman.probe.app import context as context_mod
from envman.probe.app.contract import FAIL, SKIP
from envman.probe.app.cuda import Cuda
from envman.probe.app.frameworks import make_adapter


def test_a_real_run_gets_the_real_driver_and_frameworks_and_no_expectations():
    ctx = context_mod.Context()
    assert ctx.cuda_loader == Cuda.load and ctx.adapter_factory is make_adapter
    assert ctx.expect == {} and ctx.timeout == context_mod.DEFAULT_TIMEOUT
    assert (ctx.gpus, ctx.devices, ctx.timed_out) == ([], [], [])
    assert ctx.driver_version is None and ctx.no_gpu_reason is None and ctx.bench_result is None


def test_each_context_has_lists_of_its_own():
    a, b = context_mod.Context(), context_mod.Context()
    a.gpus.append({"cc": "9.0"})
    a.timed_out.append("kernel")
    assert b.gpus == [] and b.timed_out == []


def test_a_gpu_is_present_only_with_a_driver_and_a_device():
    ctx = context_mod.Context()
    assert not ctx.gpu_present
    ctx.gpus = [{"name": "NVIDIA Fake H100", "cc": "9.0"}]
    assert not ctx.gpu_present  # devices listed, but no driver loaded
    ctx.cuda, ctx.gpus = object(), []
    assert not ctx.gpu_present  # a driver that reports no device
    ctx.gpus = [{"name": "NVIDIA Fake H100", "cc": "9.0"}]
    assert ctx.gpu_present


def test_without_a_gpu_a_gpu_check_is_a_skip_naming_why():
    ctx = context_mod.Context()
    ctx.no_gpu_reason = "cuInit failed: CUDA_ERROR_NO_DEVICE"
    data = {"n": 1}
    status, reason, out = context_mod.no_gpu_result(ctx, data)
    assert (status, reason) == (SKIP, "cuInit failed: CUDA_ERROR_NO_DEVICE")
    assert out == {"n": 1, "gpu_skipped": True, "gpu_reason": "cuInit failed: CUDA_ERROR_NO_DEVICE"}
    assert data == {"n": 1}  # the caller's dict is left as it was


def test_without_a_gpu_and_with_require_gpu_a_gpu_check_fails():
    ctx = context_mod.Context(require_gpu=True)
    assert context_mod.no_gpu_result(ctx) == (FAIL, "no GPU (--require-gpu)", {})
    ctx.no_gpu_reason = "libcuda.so.1 not found"
    status, reason, out = context_mod.no_gpu_result(ctx, {"n": 1})
    assert (status, reason, out) == (FAIL, "libcuda.so.1 not found (--require-gpu)", {"n": 1})
