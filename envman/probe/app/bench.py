"""The bench check: copy bandwidths and fp16 tensor-core throughput through the driver API
(no framework needed), and matmul TFLOP/s through torch where torch can use the GPU."""

from .context import no_gpu_result
from .contract import FAIL, PASS
from .cuda import CudaError
from .tensorcore import bench_mma_fp16


DATASHEET_KEYS = {"bandwidth_gb_s": "device_bandwidth_gb_s", "fp32_tflops": "fp32_tflops",
                  "fp16_tflops": "fp16_tflops", "h2d_gb_s": "h2d_gb_s", "d2h_gb_s": "d2h_gb_s"}


def _median(xs):
    s = sorted(xs)
    n = len(s)
    if not n:
        return None
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def _timed_copies(cuda, copy, nbytes, reps, factor=1.0):
    """Time ``copy()`` with events ``reps`` times (after one warm-up): GB/s median and best."""
    start, end = cuda.event_create(), cuda.event_create()
    try:
        copy()
        cuda.synchronize()
        rates = []
        for _ in range(reps):
            cuda.event_record(start)
            copy()
            cuda.event_record(end)
            cuda.event_synchronize(end)
            ms = cuda.event_elapsed_ms(start, end)
            if ms > 0:
                rates.append(factor * nbytes / (ms / 1e3) / 1e9)
    finally:
        for e in (start, end):
            try:
                cuda.event_destroy(e)
            except CudaError:
                pass
    return {"gb_s": _median(rates), "best_gb_s": max(rates) if rates else None,
            "bytes": nbytes, "reps": len(rates)}


def bench_copies(cuda, dev, nbytes, reps):
    out = {}
    with cuda.primary_context(dev):
        a = b = host = None
        try:
            a = cuda.mem_alloc(nbytes)
            b = cuda.mem_alloc(nbytes)
            cuda.memset_d8(a, 1, nbytes)
            # device bandwidth counts bytes read plus bytes written
            out["dtod"] = _timed_copies(cuda, lambda: cuda.memcpy_dtod(b, a, nbytes), nbytes,
                                        reps, factor=2.0)
            host = cuda.mem_alloc_host(nbytes)
            out["htod"] = _timed_copies(cuda, lambda: cuda.memcpy_htod(a, host, nbytes),
                                        nbytes, reps)
            out["dtoh"] = _timed_copies(cuda, lambda: cuda.memcpy_dtoh(host, b, nbytes),
                                        nbytes, reps)
        finally:
            cuda.release(a, b)
            if host:
                try:
                    cuda.mem_free_host(host)
                except CudaError:
                    pass
    return out


class NeedsFramework(Exception):
    """The matmul bench has no framework that can use the GPU."""


def bench_torch_matmul(n, iters):
    """fp32 (TF32 off) and fp16 n x n x n matmul TFLOP/s through torch, or raise."""
    try:
        import torch
    except ImportError as e:
        raise NeedsFramework("torch is not importable here: %s" % e)
    if not torch.cuda.is_available():
        raise NeedsFramework("torch %s cannot use the GPU here" % torch.__version__)
    out = {}
    old_tf32 = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        for label, dtype in (("fp32", torch.float32), ("fp16", torch.float16)):
            g = torch.Generator(device="cuda").manual_seed(0)
            a = torch.randn(n, n, device="cuda", dtype=dtype, generator=g)
            b = torch.randn(n, n, device="cuda", dtype=dtype, generator=g)
            for _ in range(3):
                torch.matmul(a, b)
            torch.cuda.synchronize()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iters):
                torch.matmul(a, b)
            end.record()
            end.synchronize()
            ms = start.elapsed_time(end) / iters
            out[label] = {"tflops": 2.0 * n ** 3 / (ms / 1e3) / 1e12, "ms": ms, "n": n,
                          "iters": iters, "dtype": str(dtype).replace("torch.", "")}
            del a, b
        torch.cuda.empty_cache()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old_tf32
    out["torch"] = torch.__version__
    return out


def check_bench(ctx):
    if not ctx.gpu_present:
        return no_gpu_result(ctx)
    cuda, dev, g = ctx.cuda, ctx.devices[0], ctx.gpus[0]
    summary = {"device": g["index"], "device_name": g["name"], "device_bandwidth_gb_s": None,
               "h2d_gb_s": None, "d2h_gb_s": None, "fp32_tflops": None, "fp16_tflops": None,
               "fp16_mma_tflops": None, "skipped": {}, "method": {}}
    problems = []
    nbytes = ctx.bench_bytes
    try:
        c = bench_copies(cuda, dev, nbytes, ctx.bench_reps)
        summary["device_bandwidth_gb_s"] = c["dtod"]["gb_s"]
        summary["h2d_gb_s"] = c["htod"]["gb_s"]
        summary["d2h_gb_s"] = c["dtoh"]["gb_s"]
        summary["method"]["copies"] = {
            "bytes": nbytes, "reps": ctx.bench_reps, "timing": "CUDA events, median",
            "device_bandwidth": "cuMemcpyDtoD, bytes read + written",
            "host": "pinned (cuMemAllocHost) cuMemcpyHtoD / cuMemcpyDtoH",
            "best_gb_s": {"device": c["dtod"]["best_gb_s"], "h2d": c["htod"]["best_gb_s"],
                          "d2h": c["dtoh"]["best_gb_s"]}}
    except CudaError as e:
        problems.append("copy bandwidth: %s" % e)
    cc = tuple(int(p) for p in str(g.get("cc") or "0.0").split(".")[:2])
    try:
        tc = bench_mma_fp16(cuda, dev, cc, g.get("multiprocessors"))
        if tc is None:
            summary["skipped"]["fp16_mma_tflops"] = "mma.sync m16n8k16 needs sm_80 or later, this is sm_%d%d" % cc
        else:
            summary["fp16_mma_tflops"] = tc["tflops"]
            summary["method"]["mma"] = tc
            if tc["wrong_results"]:
                problems.append("tensor-core loop: %d thread(s) summed a wrong result (expected %g)" % (
                    tc["wrong_results"], tc["expected_per_thread"]))
    except CudaError as e:
        problems.append("tensor-core loop: %s" % e)
    try:
        mm = bench_torch_matmul(ctx.matmul_n, ctx.matmul_iters)
        summary["fp32_tflops"] = mm["fp32"]["tflops"]
        summary["fp16_tflops"] = mm["fp16"]["tflops"]
        summary["method"]["matmul"] = {
            "framework": "torch %s" % mm["torch"], "n": ctx.matmul_n,
            "iters": ctx.matmul_iters, "timing": "torch.cuda.Event, mean after 3 warm-ups",
            "fp32": "TF32 disabled", "ms": {"fp32": mm["fp32"]["ms"], "fp16": mm["fp16"]["ms"]}}
    except NeedsFramework as e:
        why = "needs a framework (%s)" % e
        summary["skipped"]["fp32_tflops"] = why
        summary["skipped"]["fp16_tflops"] = why
    except Exception as e:  # noqa: BLE001
        problems.append("torch matmul: %s: %s" % (type(e).__name__, e))
    sheet = ctx.expect.get("datasheet") or None
    summary["datasheet"] = sheet
    if sheet:
        summary["fraction_of_datasheet"] = datasheet_fractions(summary, sheet)
    ctx.bench_result = summary
    if problems:
        return FAIL, "; ".join(problems), summary
    return PASS, bench_reason(summary), summary


def datasheet_fractions(summary, sheet):
    """Each measured figure of a bench summary as a fraction of the datasheet's (4 places)."""
    frac = {}
    for key, measured in DATASHEET_KEYS.items():
        ref = sheet.get(key)
        val = summary.get(measured)
        if isinstance(ref, (int, float)) and ref > 0 and isinstance(val, (int, float)):
            frac[key] = round(val / float(ref), 4)
    ref, val = sheet.get("fp16_tflops"), summary.get("fp16_mma_tflops")
    if isinstance(ref, (int, float)) and ref > 0 and isinstance(val, (int, float)):
        frac["fp16_mma"] = round(val / float(ref), 4)
    return frac


def bench_reason(summary):
    """The bench check's one-line reason for a summary."""
    def fmt(v, unit):
        return ("%.1f %s" % (v, unit)) if isinstance(v, (int, float)) else "n/a"

    reason = "device %s, H2D %s, D2H %s, FP32 %s, FP16 %s" % (
        fmt(summary["device_bandwidth_gb_s"], "GB/s"), fmt(summary["h2d_gb_s"], "GB/s"),
        fmt(summary["d2h_gb_s"], "GB/s"), fmt(summary["fp32_tflops"], "TFLOP/s"),
        fmt(summary["fp16_tflops"], "TFLOP/s"))
    if summary.get("fp16_mma_tflops") is not None:
        reason += ", FP16 tensor cores (mma.sync) %s" % fmt(summary["fp16_mma_tflops"], "TFLOP/s")
    if "fp32_tflops" in summary["skipped"]:
        reason += " (matmul skipped: needs a framework)"
    return reason
