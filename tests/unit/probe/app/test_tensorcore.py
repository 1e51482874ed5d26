"""The tensor-core loop (``envman/probe/app/tensorcore.py``)."""

from __future__ import annotations

from envman.probe.app import cuda as cuda_mod
from envman.probe.app import tensorcore as tensorcore_mod
from tests.support.probe_app import FakeLib


def test_tensor_core_ptx_chains_independent_accumulators():
    ptx = tensorcore_mod.mma_ptx(chains=3)
    assert ".version 7.0" in ptx and ".target sm_80" in ptx
    mmas = [ln.strip() for ln in ptx.splitlines() if ln.strip().startswith("mma.sync")]
    assert len(mmas) == 3
    for k, ln in enumerate(mmas):
        d = "{%%d%d, %%d%d, %%d%d, %%d%d}" % tuple(range(4 * k, 4 * k + 4))
        # each chain accumulates into its own four registers, in place
        assert ln.startswith("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 " + d + ",")
        assert ln.endswith(", " + d + ";")
    assert ".reg .f32 %d<12>;" in ptx
    assert sum(1 for ln in ptx.splitlines() if ln.strip().startswith("add.f32 %s, %s, %d")) == 12
    assert tensorcore_mod.expected_sum(10, chains=3) == 120.0
    # the cap: every partial sum of a thread's accumulators is an exact fp32 integer
    cap = tensorcore_mod.MAX_ITERS
    assert tensorcore_mod.expected_sum(cap) < 2 ** 24 <= tensorcore_mod.expected_sum(cap + 1)


def test_tensor_core_loop_iterations_are_capped_where_sums_stay_exact(monkeypatch):
    lib = FakeLib(devices=[("NVIDIA Fake", (9, 0), 16 << 30)])
    monkeypatch.setattr(tensorcore_mod, "TARGET_MS", 1e9)
    res = tensorcore_mod.bench_mma_fp16(cuda_mod.Cuda(lib, path="/fake"), 0, (9, 0), 2, target_ms=1e9)
    assert lib.mma_launches[-1][1] == tensorcore_mod.MAX_ITERS == res["iters"]
    assert res["wrong_results"] == 0
