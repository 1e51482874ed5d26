"""The kernel check (``envman/probe/app/kernel.py``): saxpy run by the fake driver."""

from __future__ import annotations

from envman.probe.app import kernel as kernel_mod
from envman.probe.app import run as run_mod
from tests.support.probe_app import FakeLib, check, make_ctx, opts


def test_kernel_check_runs_saxpy_and_checks_exactly():
    lib = FakeLib()
    doc = run_mod.run_probe(opts(), ctx=make_ctx(lib=lib), expect={})
    k = check(doc, "kernel")
    assert k["status"] == "pass", k
    d = k["data"]["devices"][0]
    assert d["exact"] and d["max_abs_error"] == 0.0 and d["mismatches"] == 0 and d["n"] == 4096
    assert d["ptx"] == {"ptx_version": "6.0", "target": "sm_50"}
    assert lib.launches == 1 and lib.mem == {} and lib.retained == 0  # freed and released


def test_kernel_check_falls_back_to_a_newer_ptx_isa():
    lib = FakeLib(reject_ptx={"6.0", "6.3"})
    k = check(run_mod.run_probe(opts(), ctx=make_ctx(lib=lib), expect={}), "kernel")
    assert k["status"] == "pass"
    assert k["data"]["devices"][0]["ptx"]["ptx_version"] == "7.0"
    assert lib.loaded_ptx == ["6.0", "6.3", "7.0"]  # sm_86: sm_90 variant not tried


def test_kernel_jit_failure_reports_the_jit_log():
    lib = FakeLib(reject_ptx={"*"}, jit_log=b"ptxas fatal: Unsupported .version 6.0")
    k = check(run_mod.run_probe(opts(), ctx=make_ctx(lib=lib), expect={}), "kernel")
    assert k["status"] == "fail"
    assert "CUDA_ERROR_UNSUPPORTED_PTX_VERSION" in k["reason"]
    assert "ptxas fatal: Unsupported .version 6.0" in k["reason"]


def test_kernel_wrong_result_fails():
    lib = FakeLib(corrupt=True)
    k = check(run_mod.run_probe(opts(), ctx=make_ctx(lib=lib), expect={}), "kernel")
    assert k["status"] == "fail"
    assert "1 of 4096 results wrong" in k["reason"]
    assert k["data"]["devices"][0]["first_mismatch"]["index"] == 7


def test_saxpy_ptx_text():
    ptx = kernel_mod.saxpy_ptx("6.0", "sm_50")
    assert ".version 6.0" in ptx and ".target sm_50" in ptx and ".entry envman_saxpy(" in ptx
    assert "{{" not in ptx
