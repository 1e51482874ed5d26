"""What the framework adapters share (``envman/probe/app/frameworks/base.py``)."""

from __future__ import annotations

from envman.probe.app.frameworks import base as base_mod


def test_framework_operands_are_seeded_and_shaped_per_layout():
    class FakeArray:
        def __init__(self, seed, shape):
            self.seed, self.shape, self.dtype = seed, shape, None

        def astype(self, dtype):
            self.dtype = dtype
            return self

    class FakeState:
        def __init__(self, seed):
            self.seed, self.draws = seed, 0

        def standard_normal(self, shape):
            self.draws += 1
            return FakeArray((self.seed, self.draws), shape)

    class FakeNp:
        float32 = "float32"

        class random:
            RandomState = FakeState

    a, b = base_mod.matmul_operands(FakeNp, 512)
    assert (a.seed, a.shape, b.seed, b.shape) == ((0, 1), (512, 512), (0, 2), (512, 512))
    x, w = base_mod.conv_operands(FakeNp)
    assert (x.seed, x.shape, w.seed, w.shape) == ((1, 1), (8, 16, 32, 32), (1, 2), (32, 16, 3, 3))
    x, w = base_mod.conv_operands(FakeNp, channels_last=True)
    assert (x.shape, w.shape) == ((8, 32, 32, 16), (3, 3, 16, 32)) and x.dtype == w.dtype == "float32"
