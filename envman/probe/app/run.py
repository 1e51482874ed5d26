"""Run the selected checks in order and build the result document."""

import time

from .bench import check_bench
from .check import run_check
from .context import Context
from .contract import CHECK_ORDER, FAIL
from .document import base_document
from .driver import check_driver
from .expect import load_expect
from .framework import check_framework
from .kernel import check_kernel
from .runtime import check_runtime
from .verdict import aggregate, cpu_stack_check, is_cpu_stack


CHECKS = {"driver": check_driver, "runtime": check_runtime, "kernel": check_kernel,
          "framework": check_framework, "bench": check_bench}


def run_probe(opts, ctx=None, expect=None, expect_found=None, checks=None):
    """Run the selected checks and return the result document (a dict)."""
    t0 = time.time()
    if expect is None:
        expect, expect_found = load_expect(opts.expect_path)
    if ctx is None:
        ctx = Context()
    ctx.expect = expect
    ctx.require_gpu = opts.require_gpu
    ctx.bench = opts.bench
    ctx.timeout = opts.timeout
    table = dict(CHECKS)
    if checks:
        table.update(checks)
    if opts.only:
        selected = [c for c in CHECK_ORDER if c in opts.only]
    else:
        selected = [c for c in CHECK_ORDER if c != "bench" or opts.bench]
    results = []
    drv = run_check("driver", table["driver"], ctx, opts.timeout)
    if "driver" in selected or drv["status"] == FAIL:
        results.append(drv)
    for name in CHECK_ORDER[1:]:
        if name in selected:
            results.append(run_check(name, table[name], ctx, opts.timeout))
    cpu_stack = is_cpu_stack(expect, expect_found)
    if cpu_stack and not ctx.require_gpu:
        results = [cpu_stack_check(r) for r in results]
    overall, reason = aggregate(results, ctx.gpu_present, ctx.require_gpu, ctx.no_gpu_reason,
                                cpu_stack=cpu_stack)
    doc = base_document()
    doc.update({"overall": overall, "reason": reason,
                "gpus": [dict(g) for g in ctx.gpus], "driver_version": ctx.driver_version,
                "checks": results, "bench": ctx.bench_result,
                "expect": {"path": opts.expect_path, "found": bool(expect_found), "stack": expect},
                "seconds": round(time.time() - t0, 3)})
    return doc
