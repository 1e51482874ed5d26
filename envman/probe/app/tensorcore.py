"""Framework-free fp16 tensor-core throughput: a PTX ``mma.sync`` loop JIT-compiled by the driver.

Each warp keeps eight independent accumulator tiles in registers and issues
``mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`` on them in a loop (2*16*8*16 = 4096
floating-point operations per warp-wide instruction). No memory traffic sits in the loop, so the
figure is the rate at which the tensor cores retire fp16 products with fp32 accumulation as the
``mma.sync`` instruction drives them: an upper bound for a matmul through that instruction, and
below the datasheet where a GPU reaches its peak only through other instructions (Hopper's
``wgmma``). It needs sm_80 or later (PTX ISA 7.0).
"""

import ctypes
import time

from .cuda import CudaError

KERNEL_NAME = "envman_mma_loop"
CHAINS = 8
FLOPS_PER_MMA = 2 * 16 * 8 * 16
LOWEST_CC = (8, 0)
BLOCK_THREADS = 256
BLOCKS_PER_SM = 4
#: one calibration launch, then one timed launch sized to about this many milliseconds
TARGET_MS = 100.0
CALIBRATION_ITERS = 2000
#: every partial sum of a thread's 4 * CHAINS accumulators stays an integer below 2 ** 24, so exact
MAX_ITERS = (1 << 24) // (4 * CHAINS) - 1


def mma_ptx(chains=CHAINS):
    """The PTX module: ``envman_mma_loop(u64 out, u32 iters)``, one f32 written per thread."""
    lines = [
        ".version 7.0",
        ".target sm_80",
        ".address_size 64",
        "",
        ".visible .entry %s(" % KERNEL_NAME,
        "    .param .u64 out_ptr,",
        "    .param .u32 iters",
        ")",
        "{",
        "    .reg .pred %p;",
        "    .reg .b32 %a<4>;",
        "    .reg .b32 %b<2>;",
        "    .reg .f32 %d<" + str(4 * chains) + ">;",
        "    .reg .f32 %s;",
        "    .reg .u32 %i, %n, %t, %c, %w, %g;",
        "    .reg .u64 %po, %off;",
        "",
        "    ld.param.u64 %po, [out_ptr];",
        "    ld.param.u32 %n, [iters];",
        "    mov.u32 %t, %tid.x;",
        "    mov.u32 %c, %ctaid.x;",
        "    mov.u32 %w, %ntid.x;",
        "    mad.lo.u32 %g, %c, %w, %t;",
        # A = 1.0 in every half, B = 1/16: each product adds 16 * 1/16 = 1 to every element
        "    mov.b32 %a0, 0x3c003c00;",
        "    mov.b32 %a1, 0x3c003c00;",
        "    mov.b32 %a2, 0x3c003c00;",
        "    mov.b32 %a3, 0x3c003c00;",
        "    mov.b32 %b0, 0x2c002c00;",
        "    mov.b32 %b1, 0x2c002c00;",
    ]
    for k in range(4 * chains):
        lines.append("    mov.f32 %%d%d, 0f00000000;" % k)
    lines += ["    mov.u32 %i, 0;", "    setp.eq.u32 %p, %n, 0;", "    @%p bra DONE;", "LOOP:"]
    for ch in range(chains):
        d = ", ".join("%%d%d" % (4 * ch + j) for j in range(4))
        lines.append("    mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%s}, {%%a0, %%a1, %%a2, %%a3}, "
                     "{%%b0, %%b1}, {%s};" % (d, d))
    lines += ["    add.u32 %i, %i, 1;", "    setp.lt.u32 %p, %i, %n;", "    @%p bra LOOP;", "DONE:",
              "    mov.f32 %s, 0f00000000;"]
    for k in range(4 * chains):
        lines.append("    add.f32 %%s, %%s, %%d%d;" % k)
    lines += [
        "    cvta.to.global.u64 %po, %po;",
        "    mul.wide.u32 %off, %g, 4;",
        "    add.u64 %po, %po, %off;",
        "    st.global.f32 [%po], %s;",
        "    ret;",
        "}",
        "",
    ]
    return "\n".join(lines)


def expected_sum(iters, chains=CHAINS):
    """What every thread writes: each product adds 1 to each of its 4 elements per chain."""
    return float(4 * chains * iters)


def _launch(cuda, func, out, blocks, iters):
    args = [ctypes.c_uint64(out), ctypes.c_uint32(iters)]
    start, end = cuda.event_create(), cuda.event_create()
    try:
        cuda.event_record(start)
        cuda.launch(func, (blocks, 1, 1), (BLOCK_THREADS, 1, 1), args)
        cuda.event_record(end)
        cuda.event_synchronize(end)
        return cuda.event_elapsed_ms(start, end)
    finally:
        for e in (start, end):
            try:
                cuda.event_destroy(e)
            except CudaError:
                pass


def bench_mma_fp16(cuda, dev, cc, multiprocessors, target_ms=TARGET_MS):
    """fp16 tensor-core TFLOP/s (fp32 accumulation) through ``mma.sync``; raises CudaError.

    Returns ``{"tflops", "ms", "iters", "blocks", ...}``, or ``None`` below sm_80.
    """
    if tuple(cc) < LOWEST_CC:
        return None
    sms = int(multiprocessors or 0) or 1
    blocks = sms * BLOCKS_PER_SM
    threads = blocks * BLOCK_THREADS
    warps = threads // 32
    with cuda.primary_context(dev):
        t0 = time.time()
        module, _info = cuda.module_load_ptx(mma_ptx())
        jit_seconds = round(time.time() - t0, 4)
        out = None
        try:
            func = cuda.module_function(module, KERNEL_NAME)
            out = cuda.mem_alloc(threads * 4)
            _launch(cuda, func, out, blocks, 10)  # warm-up (clocks, module load)
            ms = _launch(cuda, func, out, blocks, CALIBRATION_ITERS)
            iters = CALIBRATION_ITERS
            if ms > 0:
                iters = int(min(MAX_ITERS, max(CALIBRATION_ITERS, CALIBRATION_ITERS * target_ms / ms)))
            ms = _launch(cuda, func, out, blocks, iters)
            host = (ctypes.c_float * threads)()
            cuda.memcpy_dtoh(ctypes.addressof(host), out, threads * 4)
        finally:
            cuda.release(out)
            try:
                cuda.module_unload(module)
            except CudaError:
                pass
    want = expected_sum(iters)
    wrong = sum(1 for v in host if v != want)
    flops = float(warps) * iters * CHAINS * FLOPS_PER_MMA
    return {"tflops": flops / (ms / 1e3) / 1e12 if ms > 0 else None, "ms": ms, "iters": iters,
            "blocks": blocks, "threads_per_block": BLOCK_THREADS, "chains_per_warp": CHAINS,
            "jit_seconds": jit_seconds, "expected_per_thread": want, "wrong_results": wrong,
            "instruction": "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"}
