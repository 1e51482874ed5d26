"""The probe's overall verdict and exit status (``envman/probe/app/verdict.py``)."""

from __future__ import annotations

from envman.probe import EXIT_FAIL, EXIT_OK, EXIT_USAGE
from envman.probe.app import check as check_mod
from envman.probe.app import verdict as verdict_mod


def mk(name, status, **data):
    return check_mod.make_check(name, status, "r-" + name, 0.0, data)


def test_aggregate_pass_only_when_gpu_checks_ran():
    checks = [mk("driver", "pass"), mk("kernel", "pass"), mk("framework", "skip")]
    assert verdict_mod.aggregate(checks, gpu_present=True)[0] == "pass"


def test_aggregate_never_pass_when_gpu_checks_skipped():
    checks = [mk("driver", "skip", gpu_skipped=True), mk("runtime", "pass"),
              mk("kernel", "skip", gpu_skipped=True), mk("framework", "pass", gpu_skipped=True)]
    overall, reason = verdict_mod.aggregate(checks, gpu_present=False, no_gpu_reason="no driver")
    assert overall == "cpu-only"
    assert "no driver" in reason
    # even with a GPU, a framework whose GPU part was skipped keeps it from "pass"
    checks = [mk("driver", "pass"), mk("kernel", "pass"),
              mk("framework", "pass", gpu_skipped=True, gpu_reason="CPU build")]
    assert verdict_mod.aggregate(checks, gpu_present=True)[0] == "cpu-only"
    # all checks passing but no GPU seen at all (e.g. --only runtime) is not a pass either
    assert verdict_mod.aggregate([mk("runtime", "pass")], gpu_present=False)[0] == "cpu-only"


def test_aggregate_fail_dominates_and_require_gpu_fails():
    checks = [mk("driver", "pass"), mk("kernel", "fail")]
    overall, reason = verdict_mod.aggregate(checks, gpu_present=True)
    assert overall == "fail" and "kernel: r-kernel" in reason
    overall, reason = verdict_mod.aggregate([mk("runtime", "pass")], gpu_present=False, require_gpu=True,
                                  no_gpu_reason="no libcuda")
    assert overall == "fail" and "no libcuda" in reason


def test_exit_codes():
    assert verdict_mod.exit_code_for("pass") == verdict_mod.exit_code_for("cpu-only") == EXIT_OK == 0
    assert verdict_mod.exit_code_for("fail") == EXIT_FAIL == 1
    assert EXIT_USAGE == 2


def test_a_cpu_stack_passes_on_the_cpu_without_gpu_advice():
    skipped = {"name": "kernel", "status": "skip", "reason": "libcuda.so.1 not found (run with --gpus)"}
    fw = {"name": "framework", "status": "pass", "reason": "ok",
          "data": {"gpu_skipped": True, "gpu_reason": "cuInit failed (run with --gpus)"}}
    checks = [verdict_mod.cpu_stack_check(c) for c in (skipped, fw)]
    assert all("--gpus" not in c["reason"] and "--gpus" not in c.get("data", {}).get("gpu_reason", "") for c in checks)
    overall, reason = verdict_mod.aggregate(checks, gpu_present=False, cpu_stack=True)
    assert overall == "pass" and "CPU stack" in reason and "--gpus" not in reason
    # a failure still fails, and --require-gpu still demands a GPU
    assert verdict_mod.aggregate(checks + [{"name": "x", "status": "fail", "reason": "r"}], False, cpu_stack=True)[0] == "fail"
    assert verdict_mod.aggregate(checks, False, require_gpu=True, cpu_stack=True)[0] == "fail"
    # a CUDA stack without a GPU stays cpu-only
    assert verdict_mod.aggregate(checks, gpu_present=False)[0] == "cpu-only"
    assert verdict_mod.is_cpu_stack({"cuda": None}, True) and not verdict_mod.is_cpu_stack({"cuda": "12.4"}, True)
    assert not verdict_mod.is_cpu_stack({}, False) and not verdict_mod.is_cpu_stack({"cuda": None}, False)
