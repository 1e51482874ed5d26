"""The bench (``envman/probe/app/bench.py``), with the fake GPU."""

from __future__ import annotations

import pytest

from envman.probe.app import bench as bench_mod
from envman.probe.app import run as run_mod
from tests.support.probe_app import FakeLib, check, make_ctx, opts


def test_bench_with_fake_gpu_measures_and_compares_with_the_datasheet(monkeypatch):
    def fake_matmul(n, iters):
        return {"fp32": {"tflops": 33.5, "ms": 1.0}, "fp16": {"tflops": 494.5, "ms": 1.0},
                "torch": "2.7.1"}

    monkeypatch.setattr(bench_mod, "bench_torch_matmul", fake_matmul)
    lib = FakeLib(devices=[("NVIDIA Fake H100", (9, 0), 80 << 30)])
    ctx = make_ctx(lib=lib, bench_bytes=1 << 20, bench_reps=3)
    stack = {"datasheet": {"bandwidth_gb_s": 2.097152, "fp32_tflops": 67, "fp16_tflops": 989}}
    doc = run_mod.run_probe(opts(bench=True, only=["bench"]), ctx=ctx, expect=stack)
    b = check(doc, "bench")
    assert b["status"] == "pass", b
    bench = doc["bench"]
    assert bench["device_bandwidth_gb_s"] == pytest.approx(2 * (1 << 20) / 1e6)  # read + write
    assert bench["h2d_gb_s"] == pytest.approx((1 << 20) / 1e6)
    assert bench["d2h_gb_s"] == pytest.approx((1 << 20) / 1e6)
    # the tensor-core loop: 84 SMs x 4 blocks x 256 threads; calibrated on 2000 iterations (1 ms
    # each launch here), then sized to the 100 ms target: 200,000 iterations in 1 ms (under the
    # cap that keeps every sum exact)
    assert lib.mma_launches == [(84 * 4 * 256, 10), (84 * 4 * 256, 2000), (84 * 4 * 256, 200000)]
    warps = 84 * 4 * 256 // 32
    mma_tflops = warps * 200000 * 8 * 4096 / 1e-3 / 1e12
    assert bench["fp16_mma_tflops"] == pytest.approx(mma_tflops)
    assert bench["method"]["mma"]["wrong_results"] == 0
    assert bench["fraction_of_datasheet"] == {"bandwidth_gb_s": 1.0, "fp32_tflops": 0.5,
                                              "fp16_tflops": 0.5, "fp16_mma": round(mma_tflops / 989, 4)}
    assert "FP16 tensor cores (mma.sync) %.1f TFLOP/s" % mma_tflops in b["reason"]
    assert lib.mem == {} and not lib.host and lib.retained == 0
    assert doc["overall"] == "pass"


@pytest.mark.parametrize("cc, runs", [((7, 5), False), ((8, 0), True), ((8, 6), True), ((9, 0), True),
                                      ((12, 0), True)])
def test_bench_tensor_core_loop_runs_from_sm80_and_says_why_not_below(cc, runs):
    lib = FakeLib(devices=[("NVIDIA Fake", cc, 16 << 30)])
    doc = run_mod.run_probe(opts(only=["bench"]), ctx=make_ctx(lib=lib, bench_bytes=4096), expect={})
    assert check(doc, "bench")["status"] == "pass"
    assert bool(lib.mma_launches) is runs
    if runs:
        assert doc["bench"]["fp16_mma_tflops"] > 0 and "fp16_mma_tflops" not in doc["bench"]["skipped"]
    else:
        assert doc["bench"]["fp16_mma_tflops"] is None
        assert doc["bench"]["skipped"]["fp16_mma_tflops"] == "mma.sync m16n8k16 needs sm_80 or later, this is sm_75"


def test_bench_tensor_core_loop_with_a_wrong_sum_fails_the_bench():
    lib = FakeLib(devices=[("NVIDIA Fake H100", (9, 0), 80 << 30)], corrupt=True)
    doc = run_mod.run_probe(opts(only=["bench"]), ctx=make_ctx(lib=lib, bench_bytes=4096), expect={})
    b = check(doc, "bench")
    assert b["status"] == "fail" and "tensor-core loop: 1 thread(s) summed a wrong result" in b["reason"]
    assert doc["overall"] == "fail"


def test_bench_matmul_without_a_framework_is_skipped_with_the_reason(monkeypatch):
    def no_torch(n, iters):
        raise bench_mod.NeedsFramework("torch is not importable here: No module named 'torch'")

    monkeypatch.setattr(bench_mod, "bench_torch_matmul", no_torch)
    lib = FakeLib(devices=[("NVIDIA Fake H100", (9, 0), 80 << 30)])
    doc = run_mod.run_probe(opts(only=["bench"]), ctx=make_ctx(lib=lib, bench_bytes=4096), expect={})
    b = check(doc, "bench")
    assert b["status"] == "pass"
    assert doc["bench"]["fp32_tflops"] is None
    assert doc["bench"]["skipped"]["fp16_tflops"].startswith("needs a framework")
    assert doc["bench"]["device_bandwidth_gb_s"] > 0


def test_bench_without_gpu_is_skipped_and_never_pass():
    doc = run_mod.run_probe(opts(bench=True), ctx=make_ctx(), expect={})
    b = check(doc, "bench")
    assert b["status"] == "skip" and b["data"]["gpu_skipped"]
    assert doc["bench"] is None and doc["overall"] == "cpu-only"
