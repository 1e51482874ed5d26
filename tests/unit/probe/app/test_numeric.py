"""The probe's numeric comparison and pure-Python reference (``envman/probe/app/numeric.py``)."""

from __future__ import annotations

import pytest

from envman.probe.app import numeric as numeric_mod


def test_compare_values_tolerance():
    ref = [100.0, -50.0, 0.0, 1.0]
    assert numeric_mod.compare_values([100.05, -50.0, 0.02, 1.0], ref, rtol=1e-3)["ok"]  # atol = 0.1
    bad = numeric_mod.compare_values([100.0, -50.0, 0.5, 1.0], ref, rtol=1e-3)
    assert not bad["ok"] and bad["mismatches"] == 1
    assert bad["max_abs_error"] == pytest.approx(0.5)
    assert bad["max_rel_error"] == pytest.approx(0.005)
    assert not numeric_mod.compare_values([float("nan")] * 4, ref)["ok"]
    assert not numeric_mod.compare_values([1.0], ref)["ok"]


def test_pure_python_matmul_reference():
    a = [[1.0, 2.0], [3.0, 4.0]]
    b = [[5.0, 6.0], [7.0, 8.0]]
    assert numeric_mod.py_matmul(a, b) == [[19.0, 22.0], [43.0, 50.0]]
    m = numeric_mod.det_matrix(32, 32, 1)
    assert len(m) == 32 and all(len(r) == 32 for r in m)
    assert all(abs(v) <= 1 and (v * 8) == int(v * 8) for r in m for v in r)
