"""The overall verdict of a list of check results, and its exit status."""

from .contract import (EXIT_FAIL, EXIT_OK, FAIL, OVERALL_CPU_ONLY, OVERALL_FAIL, OVERALL_PASS, PASS,
                       SKIP)


CPU_STACK_REASON = "CPU stack: it uses no GPU"


def is_cpu_stack(expect, expect_found):
    """Whether the expectations are those of a CPU stack (found, and ``cuda`` is null)."""
    return bool(expect_found) and isinstance(expect, dict) and "cuda" in expect and expect.get("cuda") is None


def cpu_stack_check(check):
    """A check of a CPU stack: a GPU part skipped for lack of a GPU is not a gap, so its reason
    gives no GPU advice (no "run with --gpus")."""
    if check.get("status") == SKIP or (check.get("data") or {}).get("gpu_skipped"):
        check = dict(check)
        if check.get("status") == SKIP:
            check["reason"] = CPU_STACK_REASON
        data = dict(check.get("data") or {})
        if data.get("gpu_skipped"):
            data["gpu_reason"] = CPU_STACK_REASON
            check["data"] = data
    return check


def aggregate(checks, gpu_present, require_gpu=False, no_gpu_reason=None, cpu_stack=False):
    """Overall verdict of a list of check results: ``(overall, reason)``.

    * any ``fail`` -> ``fail``;
    * ``--require-gpu`` and no GPU -> ``fail``;
    * a CPU stack (``cpu_stack``) whose checks pass on the CPU -> ``pass``: it needs no GPU;
    * no GPU, or any check marked ``data.gpu_skipped`` -> ``cpu-only`` (never ``pass``);
    * else ``pass``.
    """
    failed = [c for c in checks if c.get("status") == FAIL]
    if failed:
        return OVERALL_FAIL, "; ".join("%s: %s" % (c["name"], c.get("reason", "")) for c in failed)
    if require_gpu and not gpu_present:
        return OVERALL_FAIL, "no GPU (--require-gpu): %s" % (no_gpu_reason or "none found")
    if cpu_stack:
        passed = [c["name"] for c in checks if c.get("status") == PASS]
        return OVERALL_PASS, "CPU stack: %d check(s) passed on the CPU (%s); it uses no GPU" % (
            len(passed), ", ".join(passed))
    gpu_skipped = [c for c in checks if (c.get("data") or {}).get("gpu_skipped")]
    if not gpu_present or gpu_skipped:
        why = no_gpu_reason
        if not why and gpu_skipped:
            why = gpu_skipped[0].get("data", {}).get("gpu_reason") or gpu_skipped[0].get("reason")
        names = ", ".join(c["name"] + (" GPU part" if c.get("status") == PASS else "")
                          for c in gpu_skipped) or "all GPU checks"
        return OVERALL_CPU_ONLY, "CPU only, GPU checks skipped (%s): %s" % (
            names, why or "no GPU")
    passed = [c["name"] for c in checks if c.get("status") == PASS]
    skipped = ["%s (%s)" % (c["name"], c.get("reason", "")) for c in checks
               if c.get("status") == SKIP]
    reason = "%d check(s) passed on the GPU: %s" % (len(passed), ", ".join(passed))
    if skipped:
        reason += "; skipped: " + "; ".join(skipped)
    return OVERALL_PASS, reason


def exit_code_for(overall):
    return EXIT_OK if overall in (OVERALL_PASS, OVERALL_CPU_ONLY) else EXIT_FAIL
