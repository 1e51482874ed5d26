"""The kernel check: a framework-free PTX saxpy, JIT-compiled by the driver and run on every GPU."""

import array
import ctypes
import time

from .context import no_gpu_result
from .contract import FAIL, PASS
from .cuda import CUDA_ERROR_JIT_COMPILER_NOT_FOUND, JIT_RETRY_ERRORS, CudaError


KERNEL_NAME = "envman_saxpy"
_SAXPY_PTX = """
.version {version}
.target {target}
.address_size 64

.visible .entry envman_saxpy(
    .param .u64 x_ptr,
    .param .u64 y_ptr,
    .param .f32 a,
    .param .u32 n
)
{{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<5>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [x_ptr];
    ld.param.u64 %rd2, [y_ptr];
    ld.param.f32 %f1, [a];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mul.wide.u32 %rd5, %r5, 4;
    add.s64 %rd6, %rd3, %rd5;
    add.s64 %rd7, %rd4, %rd5;
    ld.global.f32 %f2, [%rd6];
    ld.global.f32 %f3, [%rd7];
    fma.rn.f32 %f4, %f1, %f2, %f3;
    st.global.f32 [%rd7], %f4;
DONE:
    ret;
}}
"""

# (PTX ISA version, target, lowest GPU it suits), oldest first: an old ISA JITs on any driver
# of the last decade; newer ones are fallbacks for a driver that refuses an old target.
PTX_VARIANTS = (
    ("6.0", "sm_50", (5, 0)),
    ("6.3", "sm_75", (7, 5)),
    ("7.0", "sm_80", (8, 0)),
    ("7.8", "sm_90", (9, 0)),
    ("8.6", "sm_100", (10, 0)),
)
SAXPY_A = 2.5


def saxpy_ptx(version, target):
    return _SAXPY_PTX.format(version=version, target=target)


def saxpy_inputs(n):
    """x, y (float32 arrays) and the exact expected a*x+y (every value representable)."""
    x = array.array("f", [float(i % 4096) for i in range(n)])
    y = array.array("f", [float(i % 251) * 0.25 for i in range(n)])
    expected = array.array("f", [SAXPY_A * xv + yv for xv, yv in zip(x, y)])
    return x, y, expected


def load_saxpy_module(cuda, cc):
    """Try the PTX variants that suit ``cc`` in order; return (module, variant, attempts)."""
    attempts = []
    for version, target, lowest in PTX_VARIANTS:
        if tuple(cc) < lowest:
            continue
        try:
            module, info = cuda.module_load_ptx(saxpy_ptx(version, target))
        except CudaError as e:
            attempts.append({"ptx_version": version, "target": target, "error": e.name,
                             "code": e.code, "log": e.log})
            if e.code in JIT_RETRY_ERRORS:
                continue
            if e.code == CUDA_ERROR_JIT_COMPILER_NOT_FOUND:
                e.text = ("libnvidia-ptxjitcompiler is missing: the container lacks the "
                          "driver's PTX JIT (NVIDIA_DRIVER_CAPABILITIES must include compute)")
            raise
        attempts.append({"ptx_version": version, "target": target, "error": None,
                         "info_log": info or None})
        return module, {"ptx_version": version, "target": target}, attempts
    detail = "; ".join("%s/%s: %s%s" % (a["ptx_version"], a["target"], a["error"],
                                        (" (log: %s)" % a["log"]) if a.get("log") else "")
                       for a in attempts)
    raise CudaError("cuModuleLoadDataEx", attempts[-1]["code"] if attempts else -1,
                    attempts[-1]["error"] if attempts else "NO_VARIANT",
                    "PTX JIT failed for every variant: %s" % (detail or "none suits this GPU"))


def run_saxpy(cuda, dev, cc, n):
    """Run the saxpy kernel on ``dev``; returns a dict of results (raises CudaError)."""
    x, y, expected = saxpy_inputs(n)
    nbytes = n * 4
    res = {"n": n, "a": SAXPY_A}
    with cuda.primary_context(dev):
        t0 = time.time()
        module, variant, attempts = load_saxpy_module(cuda, cc)
        res["jit_seconds"] = round(time.time() - t0, 4)
        res["ptx"] = variant
        res["jit_attempts"] = attempts
        dx = dy = None
        try:
            func = cuda.module_function(module, KERNEL_NAME)
            dx = cuda.mem_alloc(nbytes)
            dy = cuda.mem_alloc(nbytes)
            cuda.memcpy_htod(dx, x.buffer_info()[0], nbytes)
            cuda.memcpy_htod(dy, y.buffer_info()[0], nbytes)
            block = 256
            grid = (n + block - 1) // block
            args = [ctypes.c_uint64(dx), ctypes.c_uint64(dy), ctypes.c_float(SAXPY_A),
                    ctypes.c_uint32(n)]
            t0 = time.time()
            cuda.launch(func, (grid, 1, 1), (block, 1, 1), args)
            cuda.synchronize()
            res["kernel_seconds"] = round(time.time() - t0, 6)
            out = array.array("f", bytes(nbytes))
            cuda.memcpy_dtoh(out.buffer_info()[0], dy, nbytes)
        finally:
            cuda.release(dx, dy)
            try:
                cuda.module_unload(module)
            except CudaError:
                pass
    max_err = 0.0
    bad = 0
    first_bad = None
    for i in range(n):
        d = abs(out[i] - expected[i])
        if d != 0.0 or d != d:
            bad += 1
            if first_bad is None:
                first_bad = {"index": i, "got": out[i], "expected": expected[i]}
            if d == d and d > max_err:
                max_err = d
            elif d != d:
                max_err = float("inf")
    res["max_abs_error"] = max_err
    res["mismatches"] = bad
    res["first_mismatch"] = first_bad
    res["exact"] = bad == 0
    return res


def check_kernel(ctx):
    if not ctx.gpu_present:
        return no_gpu_result(ctx)
    results = []
    problems = []
    for g, dev in zip(ctx.gpus, ctx.devices):
        cc = tuple(int(p) for p in g["cc"].split("."))
        try:
            r = run_saxpy(ctx.cuda, dev, cc, ctx.kernel_n)
        except CudaError as e:
            results.append({"index": g["index"], "error": str(e)})
            problems.append("GPU %d: %s" % (g["index"], e))
            continue
        r["index"] = g["index"]
        results.append(r)
        if not r["exact"]:
            problems.append("GPU %d: %d of %d results wrong (max abs error %g, first %r)" % (
                g["index"], r["mismatches"], r["n"], r["max_abs_error"], r["first_mismatch"]))
    data = {"devices": results}
    if problems:
        return FAIL, "; ".join(problems), data
    r0 = results[0]
    return PASS, "PTX saxpy (ISA %s, %s) JIT-compiled and ran on %d GPU(s); %d results exact" % (
        r0["ptx"]["ptx_version"], r0["ptx"]["target"], len(results), r0["n"]), data
