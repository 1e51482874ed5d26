#!/usr/bin/env python3
# -*- coding: utf-8 -*-
"""envman smoke-test probe.

One self-contained script, copied into every image envman builds and run there as
``python3 /opt/envman/probe.py [options]``; it also runs directly on a bare GPU host.

Constraints (checked by the unit tests):
  * runs on any Python 3.6+: no f-strings at all, no walrus, no dataclasses, no
    ``from __future__ import annotations``;
  * standard library only at its core (ctypes talks to libcuda); a framework (torch,
    tensorflow, jax, onnxruntime) is imported only inside the framework and bench checks;
  * prints ONE JSON document as the last line of stdout. Anything else written to fd 1
    while the checks run (framework chatter) is sent to stderr instead;
  * exit status 0 when overall is ``pass`` or ``cpu-only``, 1 on ``fail``, 2 on bad usage
    (a JSON document with overall ``fail`` is printed for bad usage too, except --help).

Options:
  --expect FILE     resolved stack (JSON), default /opt/envman/stack.json; a missing or
                    unreadable file is bad usage (exit 2, overall fail): a check without its
                    expectations proves nothing
  --no-expect       run without expectations (a bare host); the document says so
                    (expect.found false, expect.path null)
  --require-gpu     a missing GPU is a failure, not a skip
  --bench           add the bench check (bandwidths, matmul TFLOP/s)
  --timeout SEC     per-check time limit (default 120); a hung check fails with
                    "timed out after N s"
  --only A,B        run only these checks (driver, runtime, kernel, framework, bench); the
                    driver discovery always runs, since the GPU checks depend on it, and is
                    listed when selected or when it failed

Result document (one line of JSON):
  {"probe_version": 1, "overall": "pass"|"cpu-only"|"fail", "reason": str,
   "python": "3.x.y", "host": {...}, "gpus": [{"index", "name", "cc", "memory_bytes", ...}],
   "driver_version": "12.4"|null, "checks": [{"name", "status", "reason", "seconds", "data"}],
   "bench": {...}|null, "expect": {"path", "found", "stack"}, "seconds": float}

Overall: any failed check -> fail; else, if no GPU was found or a check (or the GPU part
of the framework check) was skipped for lack of a GPU -> cpu-only; else pass. With
--require-gpu, no GPU -> fail.
"""

from __future__ import absolute_import, division, print_function

import argparse
import array
import ctypes
import ctypes.util
import glob
import json
import math
import os
import platform
import re
import socket
import subprocess
import sys
import threading
import time
import traceback

PROBE_VERSION = 1
DEFAULT_EXPECT = "/opt/envman/stack.json"
DEFAULT_TIMEOUT = 120.0
CHECK_ORDER = ("driver", "runtime", "kernel", "framework", "bench")
FRAMEWORKS = ("torch", "tensorflow", "jax", "onnxruntime")

PASS, FAIL, SKIP = "pass", "fail", "skip"
OVERALL_PASS, OVERALL_CPU_ONLY, OVERALL_FAIL = "pass", "cpu-only", "fail"
EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2

NO_LIBCUDA_REASON = (
    "libcuda.so.1 not found: no NVIDIA driver visible in this container (run with --gpus)"
)
NO_DEVICE_REASON = "cuInit: CUDA_ERROR_NO_DEVICE: the driver sees no GPU (run with --gpus)"
STUB_REASON = (
    "cuInit: CUDA_ERROR_STUB_LIBRARY: the loaded libcuda is the toolkit's stub, not the driver "
    "(no NVIDIA driver mounted; run with --gpus, and keep lib64/stubs off LD_LIBRARY_PATH)"
)


class UsageError(Exception):
    """Bad command line or expectations file (exit 2)."""


# --------------------------------------------------------------------------------------
# Small pure helpers (unit-tested without a GPU)
# --------------------------------------------------------------------------------------


def version_parts(text):
    """``"2.7.1+cu128"`` -> (2, 7, 1); ``"v12.8"`` -> (12, 8); ``"2.8.0rc1"`` -> (2, 8, 0).

    The local suffix (``+...``) is dropped; parsing stops at the first component that does
    not start with a digit. Returns () for None or text without a leading number.
    """
    if text is None:
        return ()
    t = str(text).strip().split("+", 1)[0].strip()
    if t[:1] in ("v", "V"):
        t = t[1:]
    parts = []
    for comp in t.split("."):
        m = re.match(r"(\d+)", comp)
        if not m:
            break
        parts.append(int(m.group(1)))
        if m.group(1) != comp:
            break
    return tuple(parts)


def versions_match(found, expected, depth=None):
    """Compare versions on the components both give (at most ``depth``).

    ``versions_match("2.7.1+cu118", "2.7.1")`` is True, ``("12.4", "12.8", 2)`` False,
    ``("9.1.0", "9")`` True (only the major is known on one side). Either side unparsable:
    False.
    """
    f = version_parts(found)
    e = version_parts(expected)
    if not f or not e:
        return False
    n = min(len(f), len(e))
    if depth is not None:
        n = min(n, depth)
    return f[:n] == e[:n]


def short_version(text, depth=2):
    """``"12.8.1"`` -> ``"12.8"``; None -> None."""
    p = version_parts(text)
    if not p:
        return None
    return ".".join(str(x) for x in p[:depth])


def format_cuda_int(v):
    """CUDA's integer versions: 12040 -> "12.4", 13000 -> "13.0"."""
    if v is None:
        return None
    v = int(v)
    return "%d.%d" % (v // 1000, (v % 1000) // 10)


def format_cudnn_int(v):
    """cuDNN's integer versions: 8902 -> "8.9.2" (cuDNN <= 8), 90701 -> "9.7.1" (cuDNN >= 9)."""
    if v is None:
        return None
    v = int(v)
    if v >= 10000:
        return "%d.%d.%d" % (v // 10000, (v % 10000) // 100, v % 100)
    return "%d.%d.%d" % (v // 1000, (v % 1000) // 100, v % 100)


_ARCH_RE = re.compile(r"^(sm|compute|lto)?_?(\d+)(?:\.(\d+))?([a-z]?)$")


def parse_arch(text):
    """Parse a GPU arch: ``"sm_86"``, ``"compute_90"``, ``"sm_90a"``, ``"8.6"``, ``"sm_100"``.

    Returns ``(kind, major, minor, suffix)`` with kind ``"sm"`` (a cubin, SASS) or
    ``"compute"`` (PTX); a bare ``"8.6"`` counts as ``"sm"``. Raises ValueError.
    """
    t = str(text).strip().lower()
    m = _ARCH_RE.match(t)
    if not m:
        raise ValueError("not a GPU arch: %r" % (text,))
    kind, num, minor, suffix = m.group(1) or "sm", m.group(2), m.group(3), m.group(4)
    if kind == "lto":
        kind = "compute"
    if minor is not None:
        major = int(num)
        minor = int(minor)
    else:
        if len(num) < 2:
            raise ValueError("not a GPU arch: %r" % (text,))
        major, minor = int(num[:-1]), int(num[-1])
    return kind, major, minor, suffix


def arch_name(kind, major, minor, suffix=""):
    return "%s_%d%d%s" % (kind, major, minor, suffix)


def cc_to_sm(cc):
    """``"9.0"`` / ``(9, 0)`` -> ``"sm_90"``."""
    if isinstance(cc, (tuple, list)):
        return "sm_%d%d" % (int(cc[0]), int(cc[1]))
    _, major, minor, _ = parse_arch(cc)
    return "sm_%d%d" % (major, minor)


def arch_supported(cc, arch_list):
    """Can a build whose arch list is ``arch_list`` run kernels on a GPU of capability ``cc``?

    CUDA binary compatibility: an ``sm_X.y`` cubin runs on an ``X.z`` GPU for z >= y (same
    major); ``sm_X.ya`` (arch-specific) runs only on exactly X.y; ``sm_X.yf`` (family) like a
    plain cubin. ``compute_X.y`` PTX is JIT-compiled by the driver for any GPU >= X.y
    (``compute_X.ya`` only for exactly X.y).

    Returns ``(ok, via, reason)``: via is ``"sass"``, ``"ptx"`` or None.
    """
    if isinstance(cc, (tuple, list)):
        g_major, g_minor = int(cc[0]), int(cc[1])
    else:
        _, g_major, g_minor, _ = parse_arch(cc)
    gpu = "sm_%d%d" % (g_major, g_minor)
    listed = [str(a) for a in (arch_list or [])]
    parsed = []
    for a in listed:
        try:
            parsed.append((a, parse_arch(a)))
        except ValueError:
            continue
    for text, (kind, major, minor, suffix) in parsed:
        if kind != "sm":
            continue
        if suffix == "a":
            ok = (major, minor) == (g_major, g_minor)
        else:
            ok = major == g_major and minor <= g_minor
        if ok:
            return True, "sass", "%s cubin runs on %s" % (text, gpu)
    for text, (kind, major, minor, suffix) in parsed:
        if kind != "compute":
            continue
        if suffix == "a":
            ok = (major, minor) == (g_major, g_minor)
        else:
            ok = (major, minor) <= (g_major, g_minor)
        if ok:
            return True, "ptx", "%s PTX is JIT-compiled for %s" % (text, gpu)
    return (
        False,
        None,
        "no kernel image for %s in this build: arch list is [%s]" % (gpu, ", ".join(listed)),
    )


def det_matrix(rows, cols, seed):
    """A deterministic matrix of multiples of 1/8 in [-1, 1] (products and sums are exact)."""
    state = seed & 0x7FFFFFFF
    out = []
    for _ in range(rows):
        row = []
        for _ in range(cols):
            state = (state * 1103515245 + 12345) & 0x7FFFFFFF
            row.append(((state >> 16) % 17 - 8) / 8.0)
        out.append(row)
    return out


def py_matmul(a, b):
    """Pure-Python reference matrix product (lists of lists)."""
    bt = list(zip(*b))
    return [[sum(x * y for x, y in zip(row, col)) for col in bt] for row in a]


def flatten(m):
    out = []
    for row in m:
        if isinstance(row, (list, tuple)):
            out.extend(flatten(row))
        else:
            out.append(row)
    return out


def compare_values(got, ref, rtol=1e-3, atol=None):
    """allclose-style comparison of two flat sequences.

    ``atol`` defaults to ``rtol * max|ref|`` (scale-aware, so accumulated rounding of a long
    dot product, TF32 included, passes while a wrong result does not). ``max_rel_error`` is
    the largest absolute error relative to the largest reference magnitude.
    """
    got = list(got)
    ref = list(ref)
    if len(got) != len(ref):
        return {"ok": False, "n": len(ref), "mismatches": abs(len(got) - len(ref)),
                "max_abs_error": None, "max_rel_error": None, "rtol": rtol, "atol": atol,
                "note": "length %d != %d" % (len(got), len(ref))}
    scale = 0.0
    for r in ref:
        scale = max(scale, abs(r))
    if scale == 0.0:
        scale = 1.0
    if atol is None:
        atol = rtol * scale
    max_abs = 0.0
    bad = 0
    for g, r in zip(got, ref):
        d = abs(g - r)
        if d != d:  # NaN
            bad += 1
            max_abs = float("inf")
            continue
        if d > atol + rtol * abs(r):
            bad += 1
        if d > max_abs:
            max_abs = d
    return {"ok": bad == 0, "n": len(ref), "mismatches": bad, "max_abs_error": max_abs,
            "max_rel_error": max_abs / scale, "rtol": rtol, "atol": atol}


def _finite(x):
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return None
    if isinstance(x, dict):
        return dict((str(k), _finite(v)) for k, v in x.items())
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def to_json_line(doc):
    """One line of strict JSON (NaN / inf become null; non-ASCII escaped)."""
    return json.dumps(_finite(doc), allow_nan=False, ensure_ascii=True, default=str)


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


def make_check(name, status, reason, seconds, data=None):
    return {"name": name, "status": status, "reason": reason,
            "seconds": round(float(seconds), 4), "data": data if data is not None else {}}


def _fmt_seconds(x):
    return "%g" % x


def run_check(name, fn, ctx, timeout):
    """Run ``fn(ctx)`` -> ``(status, reason, data)`` in a daemon thread, at most ``timeout`` s.

    A check still running at the limit becomes ``fail`` "timed out after N s" (the thread is
    abandoned); an exception becomes ``fail`` with the traceback's tail in data.
    """
    box = {}

    def target():
        try:
            box["result"] = fn(ctx)
        except BaseException as e:  # noqa: B902 - a check must never take the probe down
            box["error"] = e
            box["traceback"] = traceback.format_exc()

    t0 = time.time()
    th = threading.Thread(target=target, name="envman-probe-" + name)
    th.daemon = True
    th.start()
    th.join(timeout)
    secs = time.time() - t0
    if th.is_alive():
        if ctx is not None:
            ctx.timed_out.append(name)
        return make_check(name, FAIL, "timed out after %s s" % _fmt_seconds(timeout), secs,
                          {"timed_out": True, "timeout_s": timeout})
    if "error" in box:
        e = box["error"]
        tb = box.get("traceback", "").strip().splitlines()[-12:]
        return make_check(name, FAIL, "internal error: %s: %s" % (type(e).__name__, e), secs,
                          {"traceback": tb})
    res = box.get("result")
    try:
        status, reason, data = res
    except (TypeError, ValueError):
        return make_check(name, FAIL, "internal error: check returned %r" % (res,), secs)
    if status not in (PASS, FAIL, SKIP):
        return make_check(name, FAIL, "internal error: bad status %r" % (status,), secs, data)
    return make_check(name, status, str(reason), secs, data)


# --------------------------------------------------------------------------------------
# CUDA driver API through ctypes
# --------------------------------------------------------------------------------------

CUDA_SUCCESS = 0
CUDA_ERROR_NAMES = {
    0: "CUDA_SUCCESS", 1: "CUDA_ERROR_INVALID_VALUE", 2: "CUDA_ERROR_OUT_OF_MEMORY",
    3: "CUDA_ERROR_NOT_INITIALIZED", 4: "CUDA_ERROR_DEINITIALIZED",
    34: "CUDA_ERROR_STUB_LIBRARY", 46: "CUDA_ERROR_DEVICE_UNAVAILABLE",
    100: "CUDA_ERROR_NO_DEVICE", 101: "CUDA_ERROR_INVALID_DEVICE",
    200: "CUDA_ERROR_INVALID_IMAGE", 201: "CUDA_ERROR_INVALID_CONTEXT",
    209: "CUDA_ERROR_NO_BINARY_FOR_GPU", 218: "CUDA_ERROR_INVALID_PTX",
    221: "CUDA_ERROR_JIT_COMPILER_NOT_FOUND", 222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
    304: "CUDA_ERROR_OPERATING_SYSTEM", 500: "CUDA_ERROR_NOT_FOUND",
    700: "CUDA_ERROR_ILLEGAL_ADDRESS", 701: "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
    702: "CUDA_ERROR_LAUNCH_TIMEOUT", 719: "CUDA_ERROR_LAUNCH_FAILED",
    803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", 804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
    999: "CUDA_ERROR_UNKNOWN",
}
CUDA_ERROR_NO_DEVICE = 100
CUDA_ERROR_STUB_LIBRARY = 34
JIT_RETRY_ERRORS = (200, 209, 218, 222)
CUDA_ERROR_JIT_COMPILER_NOT_FOUND = 221

CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
CU_JIT_INFO_LOG_BUFFER = 3
CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4
CU_JIT_ERROR_LOG_BUFFER = 5
CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6

_u = ctypes.c_uint
_i = ctypes.c_int
_p = ctypes.c_void_p
_sz = ctypes.c_size_t
_dptr = ctypes.c_uint64
_PROTOTYPES = {
    "cuInit": [_u],
    "cuDriverGetVersion": [ctypes.POINTER(_i)],
    "cuDeviceGetCount": [ctypes.POINTER(_i)],
    "cuDeviceGet": [ctypes.POINTER(_i), _i],
    "cuDeviceGetName": [ctypes.c_char_p, _i, _i],
    "cuDeviceGetAttribute": [ctypes.POINTER(_i), _i, _i],
    "cuDeviceTotalMem_v2": [ctypes.POINTER(_sz), _i],
    "cuDeviceGetUuid": [_p, _i],
    "cuDeviceGetUuid_v2": [_p, _i],
    "cuGetErrorName": [_i, ctypes.POINTER(ctypes.c_char_p)],
    "cuGetErrorString": [_i, ctypes.POINTER(ctypes.c_char_p)],
    "cuDevicePrimaryCtxRetain": [ctypes.POINTER(_p), _i],
    "cuDevicePrimaryCtxRelease": [_i],
    "cuDevicePrimaryCtxRelease_v2": [_i],
    "cuCtxSetCurrent": [_p],
    "cuCtxSynchronize": [],
    "cuModuleLoadDataEx": [ctypes.POINTER(_p), ctypes.c_char_p, _u, ctypes.POINTER(_i),
                           ctypes.POINTER(_p)],
    "cuModuleGetFunction": [ctypes.POINTER(_p), _p, ctypes.c_char_p],
    "cuModuleUnload": [_p],
    "cuMemAlloc_v2": [ctypes.POINTER(_dptr), _sz],
    "cuMemFree_v2": [_dptr],
    "cuMemcpyHtoD_v2": [_dptr, _p, _sz],
    "cuMemcpyDtoH_v2": [_p, _dptr, _sz],
    "cuMemcpyDtoD_v2": [_dptr, _dptr, _sz],
    "cuMemsetD8_v2": [_dptr, ctypes.c_ubyte, _sz],
    "cuMemAllocHost_v2": [ctypes.POINTER(_p), _sz],
    "cuMemFreeHost": [_p],
    "cuLaunchKernel": [_p, _u, _u, _u, _u, _u, _u, _u, _p, ctypes.POINTER(_p),
                       ctypes.POINTER(_p)],
    "cuEventCreate": [ctypes.POINTER(_p), _u],
    "cuEventRecord": [_p, _p],
    "cuEventSynchronize": [_p],
    "cuEventElapsedTime": [ctypes.POINTER(ctypes.c_float), _p, _p],
    "cuEventElapsedTime_v2": [ctypes.POINTER(ctypes.c_float), _p, _p],
    "cuEventDestroy_v2": [_p],
}


class CudaUnavailable(Exception):
    """No usable libcuda (no driver mounted into this container)."""

    def __init__(self, reason, tried=None):
        Exception.__init__(self, reason)
        self.reason = reason
        self.tried = tried or []


class CudaError(Exception):
    """A driver API call returned an error: carries the call, the code and its name."""

    def __init__(self, func, code, name=None, text=None, log=None):
        self.func = func
        self.code = code
        self.name = name or CUDA_ERROR_NAMES.get(code, "CUDA_ERROR_%s" % (code,))
        self.text = text
        self.log = log
        msg = "%s failed: %s (%s)" % (func, self.name, code)
        if text:
            msg += ": " + text
        if log:
            msg += " [JIT log: %s]" % log
        Exception.__init__(self, msg)


class Cuda(object):
    """A thin wrapper over the CUDA driver API.

    ``lib`` is anything with attributes named like libcuda's entry points, each returning
    an int ``CUresult``: the real ``ctypes.CDLL`` or, in tests, a fake. Out-parameters are
    passed as ``ctypes.byref(...)`` of c_int / c_size_t / c_uint64 / c_void_p objects
    (a fake writes ``arg._obj.value``); handles and device pointers as plain ints.
    """

    def __init__(self, lib, path=None):
        self.lib = lib
        self.path = path

    @classmethod
    def load(cls, candidates=("libcuda.so.1", "libcuda.so")):
        tried = []
        for name in candidates:
            try:
                lib = ctypes.CDLL(name)
            except OSError as e:
                tried.append("%s: %s" % (name, e))
                continue
            for fname, argtypes in _PROTOTYPES.items():
                try:
                    fn = getattr(lib, fname)
                except AttributeError:
                    continue
                fn.argtypes = argtypes
                fn.restype = ctypes.c_int
            return cls(lib, path=_loaded_path("libcuda.so") or name)
        raise CudaUnavailable(NO_LIBCUDA_REASON, tried)

    def has(self, fname):
        try:
            return getattr(self.lib, fname, None) is not None
        except AttributeError:
            return False

    def _fn(self, *names):
        for n in names:
            if self.has(n):
                return n, getattr(self.lib, n)
        raise CudaError(names[0], -1, "SYMBOL_NOT_FOUND",
                        "libcuda has no %s" % " / ".join(names))

    def error_name(self, code):
        if self.has("cuGetErrorName"):
            s = ctypes.c_char_p()
            try:
                if self.lib.cuGetErrorName(code, ctypes.byref(s)) == 0 and s.value:
                    return s.value.decode("ascii", "replace")
            except Exception:  # noqa: BLE001
                pass
        return CUDA_ERROR_NAMES.get(code, "CUDA_ERROR_%s" % (code,))

    def error_string(self, code):
        if self.has("cuGetErrorString"):
            s = ctypes.c_char_p()
            try:
                if self.lib.cuGetErrorString(code, ctypes.byref(s)) == 0 and s.value:
                    return s.value.decode("ascii", "replace")
            except Exception:  # noqa: BLE001
                pass
        return None

    def call(self, *names_and_args):
        """``call("cuX", a, b)`` or ``call(("cuX_v2", "cuX"), a, b)``; raises CudaError."""
        names = names_and_args[0]
        args = names_and_args[1:]
        if isinstance(names, str):
            names = (names,)
        fname, fn = self._fn(*names)
        rc = fn(*args)
        if rc != CUDA_SUCCESS:
            raise CudaError(fname, rc, self.error_name(rc), self.error_string(rc))
        return rc

    # -- device queries --
    def init(self):
        self.call("cuInit", 0)

    def driver_version(self):
        v = ctypes.c_int(0)
        self.call("cuDriverGetVersion", ctypes.byref(v))
        return v.value

    def device_count(self):
        n = ctypes.c_int(0)
        self.call("cuDeviceGetCount", ctypes.byref(n))
        return n.value

    def device(self, ordinal):
        d = ctypes.c_int(0)
        self.call("cuDeviceGet", ctypes.byref(d), ordinal)
        return d.value

    def device_name(self, dev):
        buf = ctypes.create_string_buffer(256)
        self.call("cuDeviceGetName", buf, 256, dev)
        return buf.value.decode("utf-8", "replace")

    def attribute(self, attr, dev):
        v = ctypes.c_int(0)
        self.call("cuDeviceGetAttribute", ctypes.byref(v), attr, dev)
        return v.value

    def compute_capability(self, dev):
        return (self.attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
                self.attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))

    def total_mem(self, dev):
        v = ctypes.c_size_t(0)
        self.call("cuDeviceTotalMem_v2", ctypes.byref(v), dev)
        return v.value

    def uuid(self, dev):
        buf = ctypes.create_string_buffer(16)
        self.call(("cuDeviceGetUuid_v2", "cuDeviceGetUuid"), buf, dev)
        h = "".join("%02x" % (b if isinstance(b, int) else ord(b)) for b in buf.raw[:16])
        return "GPU-%s-%s-%s-%s-%s" % (h[0:8], h[8:12], h[12:16], h[16:20], h[20:32])

    # -- contexts, modules, memory --
    def primary_context(self, dev):
        return _PrimaryContext(self, dev)

    def synchronize(self):
        self.call("cuCtxSynchronize")

    def module_load_ptx(self, ptx):
        """Load PTX text; on failure the CudaError carries the JIT error log."""
        if not isinstance(ptx, bytes):
            ptx = ptx.encode("ascii")
        if not ptx.endswith(b"\0"):
            ptx += b"\0"
        size = 8192
        err = ctypes.create_string_buffer(size)
        info = ctypes.create_string_buffer(size)
        opts = (ctypes.c_int * 4)(CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                                  CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES)
        vals = (ctypes.c_void_p * 4)(ctypes.cast(err, ctypes.c_void_p).value, size,
                                     ctypes.cast(info, ctypes.c_void_p).value, size)
        mod = ctypes.c_void_p()
        rc = self.lib.cuModuleLoadDataEx(ctypes.byref(mod), ptx, 4, opts, vals)
        if rc != CUDA_SUCCESS:
            log = err.value.decode("utf-8", "replace").strip() or None
            raise CudaError("cuModuleLoadDataEx", rc, self.error_name(rc),
                            self.error_string(rc), log)
        return mod.value, info.value.decode("utf-8", "replace").strip()

    def module_function(self, module, name):
        f = ctypes.c_void_p()
        if not isinstance(name, bytes):
            name = name.encode("ascii")
        self.call("cuModuleGetFunction", ctypes.byref(f), module, name)
        return f.value

    def module_unload(self, module):
        self.call("cuModuleUnload", module)

    def mem_alloc(self, nbytes):
        p = ctypes.c_uint64(0)
        self.call("cuMemAlloc_v2", ctypes.byref(p), nbytes)
        return p.value

    def mem_free(self, dptr):
        self.call("cuMemFree_v2", dptr)

    def memcpy_htod(self, dptr, host_addr, nbytes):
        self.call("cuMemcpyHtoD_v2", dptr, host_addr, nbytes)

    def memcpy_dtoh(self, host_addr, dptr, nbytes):
        self.call("cuMemcpyDtoH_v2", host_addr, dptr, nbytes)

    def memcpy_dtod(self, dst, src, nbytes):
        self.call("cuMemcpyDtoD_v2", dst, src, nbytes)

    def memset_d8(self, dptr, value, nbytes):
        self.call("cuMemsetD8_v2", dptr, value, nbytes)

    def mem_alloc_host(self, nbytes):
        p = ctypes.c_void_p()
        self.call("cuMemAllocHost_v2", ctypes.byref(p), nbytes)
        return p.value

    def mem_free_host(self, addr):
        self.call("cuMemFreeHost", addr)

    def launch(self, func, grid, block, params, shared=0, stream=None):
        """``params``: a list of ctypes scalars, passed by address as the kernel's arguments."""
        ptrs = (ctypes.c_void_p * len(params))(*[ctypes.addressof(p) for p in params])
        self.call("cuLaunchKernel", func, grid[0], grid[1], grid[2], block[0], block[1],
                  block[2], shared, stream, ptrs, None)

    def event_create(self):
        e = ctypes.c_void_p()
        self.call("cuEventCreate", ctypes.byref(e), 0)
        return e.value

    def event_record(self, ev, stream=None):
        self.call("cuEventRecord", ev, stream)

    def event_synchronize(self, ev):
        self.call("cuEventSynchronize", ev)

    def event_elapsed_ms(self, start, end):
        ms = ctypes.c_float(0.0)
        self.call(("cuEventElapsedTime_v2", "cuEventElapsedTime"), ctypes.byref(ms), start, end)
        return ms.value

    def event_destroy(self, ev):
        self.call("cuEventDestroy_v2", ev)


class _PrimaryContext(object):
    """``with cuda.primary_context(dev):`` retain + make current, then release."""

    def __init__(self, cuda, dev):
        self.cuda = cuda
        self.dev = dev
        self.ctx = None

    def __enter__(self):
        c = ctypes.c_void_p()
        self.cuda.call("cuDevicePrimaryCtxRetain", ctypes.byref(c), self.dev)
        self.ctx = c.value
        self.cuda.call("cuCtxSetCurrent", self.ctx)
        return self.ctx

    def __exit__(self, *exc):
        try:
            self.cuda.call("cuCtxSetCurrent", None)
        except CudaError:
            pass
        try:
            self.cuda.call(("cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"),
                           self.dev)
        except CudaError:
            pass
        return False


def _loaded_path(fragment):
    """The file a library whose name contains ``fragment`` was loaded from (/proc/self/maps)."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6 and fragment in os.path.basename(parts[-1]):
                    return parts[-1]
    except (IOError, OSError):
        pass
    return None


def _driver_release():
    """The kernel module's version (e.g. 580.159.04), when visible."""
    try:
        with open("/sys/module/nvidia/version") as f:
            v = f.read().strip()
            if v:
                return v
    except (IOError, OSError):
        pass
    try:
        with open("/proc/driver/nvidia/version") as f:
            m = re.search(r"Kernel Module\s+(?:for\s+\S+\s+)?(\d+\.\d+(?:\.\d+)?)", f.read())
            if m:
                return m.group(1)
    except (IOError, OSError):
        pass
    return None


# --------------------------------------------------------------------------------------
# Context shared by the checks
# --------------------------------------------------------------------------------------


class Context(object):
    """Expectations, options and what the driver check found, shared by the checks.

    The hooks (``cuda_loader``, ``cudart_patterns``, ``adapter_factory``, sizes) let the
    unit tests replace the driver, the file system search and the framework with fakes.
    """

    def __init__(self, expect=None, require_gpu=False, bench=False, timeout=DEFAULT_TIMEOUT,
                 cuda_loader=None, cudart_patterns=None, cudart_query=True,
                 adapter_factory=None, kernel_n=1 << 20, bench_bytes=256 << 20,
                 bench_reps=10, matmul_n=8192, matmul_iters=10):
        self.expect = expect or {}
        self.require_gpu = require_gpu
        self.bench = bench
        self.timeout = timeout
        self.cuda_loader = cuda_loader or Cuda.load
        self.cudart_patterns = cudart_patterns
        self.cudart_query = cudart_query
        self.adapter_factory = adapter_factory or make_adapter
        self.kernel_n = kernel_n
        self.bench_bytes = bench_bytes
        self.bench_reps = bench_reps
        self.matmul_n = matmul_n
        self.matmul_iters = matmul_iters
        self.cuda = None
        self.devices = []  # CUdevice handles, parallel to gpus
        self.gpus = []
        self.driver_version = None
        self.no_gpu_reason = None
        self.bench_result = None
        self.timed_out = []

    @property
    def gpu_present(self):
        return self.cuda is not None and bool(self.gpus)


def no_gpu_result(ctx, data=None):
    """A GPU check without a GPU: ``skip`` (``fail`` with --require-gpu)."""
    reason = ctx.no_gpu_reason or "no GPU"
    d = dict(data or {})
    if ctx.require_gpu:
        return FAIL, "%s (--require-gpu)" % reason, d
    d["gpu_skipped"] = True
    d["gpu_reason"] = reason
    return SKIP, reason, d


# --------------------------------------------------------------------------------------
# Check: driver
# --------------------------------------------------------------------------------------


def check_driver(ctx):
    data = {"library": None, "release": _driver_release()}
    try:
        cuda = ctx.cuda_loader()
    except CudaUnavailable as e:
        ctx.no_gpu_reason = e.reason
        data["tried"] = e.tried
        return no_gpu_result(ctx, data)
    data["library"] = cuda.path
    try:
        cuda.init()
    except CudaError as e:
        data["error"] = {"call": e.func, "code": e.code, "name": e.name}
        if e.code == CUDA_ERROR_NO_DEVICE:
            ctx.no_gpu_reason = NO_DEVICE_REASON
            return no_gpu_result(ctx, data)
        if e.code == CUDA_ERROR_STUB_LIBRARY:
            ctx.no_gpu_reason = STUB_REASON
            return no_gpu_result(ctx, data)
        ctx.no_gpu_reason = "cuInit(0) failed: %s" % e
        return FAIL, "cuInit(0) failed: %s (%s)%s" % (
            e.name, e.code, (": " + e.text) if e.text else ""), data
    try:
        v = cuda.driver_version()
        ctx.driver_version = format_cuda_int(v)
        data["driver_version"] = ctx.driver_version
        data["driver_version_int"] = v
        count = cuda.device_count()
        data["device_count"] = count
        if count == 0:
            ctx.no_gpu_reason = "cuDeviceGetCount: 0 devices (run with --gpus)"
            return no_gpu_result(ctx, data)
        gpus = []
        devices = []
        for i in range(count):
            dev = cuda.device(i)
            major, minor = cuda.compute_capability(dev)
            g = {"index": i, "name": cuda.device_name(dev), "cc": "%d.%d" % (major, minor),
                 "memory_bytes": cuda.total_mem(dev)}
            try:
                g["uuid"] = cuda.uuid(dev)
            except CudaError:
                g["uuid"] = None
            try:
                g["multiprocessors"] = cuda.attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                                      dev)
            except CudaError:
                pass
            gpus.append(g)
            devices.append(dev)
    except CudaError as e:
        ctx.no_gpu_reason = "driver query failed: %s" % e
        return FAIL, str(e), data
    ctx.cuda = cuda
    ctx.gpus = gpus
    ctx.devices = devices
    data["gpus"] = gpus
    desc = ", ".join("%s (sm_%s, %.1f GiB)" % (g["name"], g["cc"].replace(".", ""),
                                                g["memory_bytes"] / float(1 << 30)) for g in gpus)
    rel = (" (%s)" % data["release"]) if data["release"] else ""
    return PASS, "CUDA driver %s%s, %d GPU(s): %s" % (ctx.driver_version, rel, count, desc), data


# --------------------------------------------------------------------------------------
# Check: runtime (libcudart present in the image)
# --------------------------------------------------------------------------------------


def _site_dirs():
    dirs = []
    for p in sys.path:
        if p and os.path.isdir(p) and p not in dirs:
            dirs.append(p)
    try:
        import site
        for p in list(site.getsitepackages()) + [site.getusersitepackages()]:
            if p and os.path.isdir(p) and p not in dirs:
                dirs.append(p)
    except Exception:  # noqa: BLE001 - some virtualenvs lack getsitepackages
        pass
    return dirs


def default_cudart_patterns():
    """Where a CUDA runtime can live: system toolkits, LD_LIBRARY_PATH, framework wheels."""
    pats = [
        ("system", "/usr/local/cuda*/lib64/libcudart.so*"),
        ("system", "/usr/local/cuda*/targets/*/lib/libcudart.so*"),
        ("system", "/usr/lib/x86_64-linux-gnu/libcudart.so*"),
        ("system", "/usr/lib/aarch64-linux-gnu/libcudart.so*"),
        ("system", "/usr/lib64/libcudart.so*"),
    ]
    for d in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep):
        if d:
            pats.append(("LD_LIBRARY_PATH", os.path.join(d, "libcudart.so*")))
    for d in _site_dirs():
        pats.append(("wheel", os.path.join(d, "nvidia", "cuda_runtime", "lib", "libcudart.so*")))
        pats.append(("wheel", os.path.join(d, "nvidia", "cu*", "lib", "libcudart.so*")))
        pats.append(("wheel", os.path.join(d, "torch", "lib", "libcudart*.so*")))
        pats.append(("wheel", os.path.join(d, "tensorflow", "libcudart*.so*")))
        pats.append(("wheel", os.path.join(d, "jaxlib", "**", "libcudart*.so*")))
    return pats


def version_from_path(path):
    """CUDA version a libcudart file name / location reveals, or None.

    ``libcudart.so.12.8.90`` -> "12.8"; ``.../cuda-12.4/...libcudart.so.12`` -> "12.4";
    ``libcudart.so.12`` -> "12"; a sibling ``nvidia_cuda_runtime_cu12-12.8.90.dist-info``
    gives "12.8".
    """
    base = os.path.basename(path)
    m = re.search(r"\.so\.(\d+)\.(\d+)", base)
    if m:
        return "%s.%s" % (m.group(1), m.group(2))
    m = re.search(r"cuda-(\d+)\.(\d+)", path)
    if m:
        return "%s.%s" % (m.group(1), m.group(2))
    m = re.search(r"(?:^|/)(?:site|dist)-packages/nvidia/(?:cuda_runtime|cu\d+)/", path)
    if m:
        root = path[:m.end()].split("/nvidia/")[0]
        for info in sorted(glob.glob(os.path.join(root, "nvidia_cuda_runtime*.dist-info"))):
            mm = re.search(r"-(\d+)\.(\d+)[^-]*\.dist-info$", info)
            if mm:
                return "%s.%s" % (mm.group(1), mm.group(2))
    m = re.search(r"\.so\.(\d+)$", base)
    if m:
        return m.group(1)
    return None


def find_cudart(patterns=None):
    """All distinct libcudart files found: ``[{"path", "realpath", "source", "version"}]``."""
    use_defaults = patterns is None
    if use_defaults:
        patterns = default_cudart_patterns()
    found = []
    seen = set()
    for source, pat in patterns:
        try:
            hits = sorted(glob.glob(pat, recursive=True))
        except (OSError, ValueError):
            continue
        for path in hits:
            if not os.path.isfile(path):
                continue
            real = os.path.realpath(path)
            if real in seen or real.endswith(".a"):
                continue
            seen.add(real)
            found.append({"path": path, "realpath": real, "source": source,
                          "version": version_from_path(real) or version_from_path(path),
                          "version_from": "file name"})
    if use_defaults:
        name = ctypes.util.find_library("cudart")
        if name and not any(os.path.basename(f["realpath"]).startswith(name) or
                            os.path.basename(f["path"]) == name for f in found):
            found.append({"path": name, "realpath": name, "source": "ldconfig",
                          "version": version_from_path(name), "version_from": "file name"})
    return found


_CUDART_QUERY = r"""
import ctypes, json, sys
out = {}
try:
    lib = ctypes.CDLL(sys.argv[1])
except OSError as e:
    print(json.dumps({"error": "dlopen failed: %s" % e}))
    sys.exit(0)
v = ctypes.c_int(0)
out["rc"] = lib.cudaRuntimeGetVersion(ctypes.byref(v))
out["version"] = v.value
if sys.argv[2] == "1":
    n = ctypes.c_int(0)
    rc = lib.cudaGetDeviceCount(ctypes.byref(n))
    out["device_count_rc"] = rc
    out["device_count"] = n.value
    try:
        lib.cudaGetErrorName.restype = ctypes.c_char_p
        out["device_count_error"] = lib.cudaGetErrorName(rc).decode()
    except Exception:
        pass
try:
    for line in open("/proc/self/maps"):
        p = line.split()
        if len(p) >= 6 and "libcudart" in p[-1]:
            out["loaded"] = p[-1]
            break
except Exception:
    pass
print(json.dumps(out))
"""

# cudaGetDeviceCount errors that mean "this runtime cannot work with this driver".
CUDART_FATAL = {35: "cudaErrorInsufficientDriver", 803: "cudaErrorSystemDriverMismatch",
                804: "cudaErrorCompatNotSupportedOnDevice"}


def query_cudart(path, with_device=False, timeout=30):
    """Load ``path`` in a child Python and ask it its version (and cudaGetDeviceCount).

    A child keeps this process clean: a libcudart loaded here would shadow (by soname) the
    one a framework loads later.
    """
    exe = sys.executable
    if not exe:
        return {"error": "no sys.executable to run the query"}
    try:
        p = subprocess.Popen([exe, "-c", _CUDART_QUERY, path, "1" if with_device else "0"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             universal_newlines=True)
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        return {"error": "query timed out after %s s" % timeout}
    except OSError as e:
        return {"error": "cannot run %s: %s" % (exe, e)}
    lines = [ln for ln in out.strip().splitlines() if ln.strip()]
    try:
        return json.loads(lines[-1])
    except (IndexError, ValueError):
        return {"error": "query crashed (rc %s): %s" % (p.returncode, err.strip()[-300:])}


def check_runtime(ctx):
    expected = ctx.expect.get("cuda")
    exp = short_version(expected) if expected else None
    data = {"expected": exp, "cuda_version_env": os.environ.get("CUDA_VERSION")}
    found = find_cudart(ctx.cudart_patterns)
    for f in found:
        if not ctx.cudart_query:
            continue
        q = query_cudart(f["realpath"], with_device=ctx.gpu_present)
        f["query"] = q
        if q.get("rc") == 0 and q.get("version"):
            f["version"] = format_cuda_int(q["version"])
            f["version_from"] = "cudaRuntimeGetVersion"
        if q.get("loaded") and f["source"] == "ldconfig":
            f["realpath"] = q["loaded"]
    data["found"] = found
    where = "; ".join("%s at %s (%s)" % (f["version"] or "?", f["realpath"], f["source"])
                      for f in found)
    if not found:
        if exp is None:
            return SKIP, "no CUDA runtime (libcudart) found, and the stack expects none", data
        hint = (" (CUDA_VERSION=%s is set, but no libcudart is there)" %
                data["cuda_version_env"]) if data["cuda_version_env"] else ""
        return FAIL, "no libcudart found; the stack expects CUDA %s%s" % (exp, hint), data
    fatal = []
    for f in found:
        q = f.get("query") or {}
        rc = q.get("device_count_rc")
        if rc in CUDART_FATAL:
            fatal.append("CUDA runtime %s at %s cannot use this driver (CUDA %s): %s" % (
                f["version"], f["realpath"], ctx.driver_version, CUDART_FATAL[rc]))
    if exp is None:
        if fatal:
            return FAIL, "; ".join(fatal), data
        return PASS, "found CUDA runtime %s; the stack expects no CUDA" % where, data
    matching = [f for f in found if f["version"] and versions_match(f["version"], exp, 2)]
    data["matching"] = [f["realpath"] for f in matching]
    if not matching:
        return FAIL, "CUDA runtime mismatch: expected %s, found %s" % (exp, where), data
    fatal_matching = [m for m in fatal if any(f["realpath"] in m for f in matching)]
    if fatal_matching:
        return FAIL, "; ".join(fatal_matching), data
    notes = ""
    if ctx.driver_version and version_parts(exp) > version_parts(ctx.driver_version):
        notes = " (newer than the driver's CUDA %s: relies on minor-version compatibility)" % (
            ctx.driver_version)
    others = [f for f in found if f not in matching]
    if others:
        notes += "; also present: " + "; ".join("%s at %s" % (f["version"] or "?", f["realpath"])
                                                for f in others)
    return PASS, "CUDA runtime %s found at %s%s" % (
        exp, ", ".join(f["realpath"] for f in matching), notes), data


# --------------------------------------------------------------------------------------
# Check: kernel (framework-free PTX saxpy)
# --------------------------------------------------------------------------------------

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
            for d in (dx, dy):
                if d:
                    try:
                        cuda.mem_free(d)
                    except CudaError:
                        pass
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


# --------------------------------------------------------------------------------------
# Check: framework
# --------------------------------------------------------------------------------------


class NotReported(Exception):
    """The framework does not tell this (a sub-check becomes ``skip``)."""


class _Adapter(object):
    """One framework, behind the few calls the framework check makes.

    Subclasses implement: ``load``, ``version``, ``cuda_version``, ``cudnn_version``,
    ``gpus`` (-> list of {"name", "cc"} or raise with the reason), ``arch_list`` (None or
    raise NotReported when unknown), ``cpu_matmul(a, b)`` (lists -> list of lists),
    ``gpu_matmul(n, rtol)`` and ``gpu_conv(rtol)`` (-> comparison dicts; conv may raise
    NotReported).
    """

    name = "?"
    module = None

    def extra(self):
        return {}


def _np_compare(np, got, ref, rtol):
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    scale = float(np.max(np.abs(ref))) or 1.0
    atol = rtol * scale
    diff = np.abs(got - ref)
    bad = int(np.count_nonzero(~(diff <= atol + rtol * np.abs(ref))))
    max_abs = float(np.max(diff)) if diff.size else 0.0
    return {"ok": bad == 0, "n": int(ref.size), "mismatches": bad, "max_abs_error": max_abs,
            "max_rel_error": max_abs / scale, "rtol": rtol, "atol": atol}


class TorchAdapter(_Adapter):
    name = "torch"

    def load(self):
        import torch  # noqa: F401 - imported only inside the framework check
        self.module = torch

    def version(self):
        return self.module.__version__

    def cuda_version(self):
        return getattr(self.module.version, "cuda", None)

    def cudnn_version(self):
        cudnn = self.module.backends.cudnn
        if not cudnn.is_available():
            return None
        return format_cudnn_int(cudnn.version())

    def gpus(self):
        torch = self.module
        if not torch.cuda.is_available():
            why = "torch.cuda.is_available() is False"
            try:
                torch.cuda.init()
            except Exception as e:  # noqa: BLE001
                why += ": %s" % e
            raise RuntimeError(why)
        out = []
        for i in range(torch.cuda.device_count()):
            major, minor = torch.cuda.get_device_capability(i)
            out.append({"name": torch.cuda.get_device_name(i), "cc": "%d.%d" % (major, minor)})
        return out

    def arch_list(self):
        return list(self.module.cuda.get_arch_list())

    def cpu_matmul(self, a, b):
        t = self.module
        return t.matmul(t.tensor(a, dtype=t.float32), t.tensor(b, dtype=t.float32)).tolist()

    def _compare(self, got, ref, rtol):
        got = got.double()
        ref = ref.double()
        scale = float(ref.abs().max().item()) or 1.0
        atol = rtol * scale
        diff = (got - ref).abs()
        bad = int((~(diff <= atol + rtol * ref.abs())).sum().item())
        max_abs = float(diff.max().item())
        return {"ok": bad == 0, "n": int(ref.numel()), "mismatches": bad,
                "max_abs_error": max_abs, "max_rel_error": max_abs / scale, "rtol": rtol,
                "atol": atol}

    def gpu_matmul(self, n, rtol):
        t = self.module
        g = t.Generator().manual_seed(0)
        a = t.randn(n, n, generator=g)
        b = t.randn(n, n, generator=g)
        ref = t.matmul(a, b)
        got = t.matmul(a.cuda(), b.cuda())
        t.cuda.synchronize()
        r = self._compare(got.cpu(), ref, rtol)
        r["tf32"] = bool(t.backends.cuda.matmul.allow_tf32)
        r["shape"] = [n, n]
        return r

    def gpu_conv(self, rtol):
        t = self.module
        if not t.backends.cudnn.is_available():
            raise NotReported("this torch has no cuDNN")
        F = t.nn.functional
        g = t.Generator().manual_seed(1)
        x = t.randn(8, 16, 32, 32, generator=g)
        w = t.randn(32, 16, 3, 3, generator=g)
        ref = F.conv2d(x, w, padding=1)
        got = F.conv2d(x.cuda(), w.cuda(), padding=1)
        t.cuda.synchronize()
        r = self._compare(got.cpu(), ref, rtol)
        r["tf32"] = bool(t.backends.cudnn.allow_tf32)
        r["cudnn"] = True
        return r


class TensorflowAdapter(_Adapter):
    name = "tensorflow"

    def load(self):
        os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
        import tensorflow as tf  # noqa: F401
        self.module = tf
        try:
            self.info = dict(tf.sysconfig.get_build_info())
        except Exception:  # noqa: BLE001
            self.info = {}

    def version(self):
        return self.module.__version__

    def cuda_version(self):
        if "cuda_version" not in self.info and "is_cuda_build" not in self.info:
            raise NotReported("tf.sysconfig.get_build_info() names no CUDA version")
        if not self.info.get("is_cuda_build", True) or not self.info.get("cuda_version"):
            return None
        v = str(self.info["cuda_version"])
        m = re.match(r"^64_(\d+)$", v)  # Windows-style "64_118"
        if m:
            d = m.group(1)
            v = "%s.%s" % (d[:-1], d[-1])
        return v

    def cudnn_version(self):
        v = self.info.get("cudnn_version")
        if v is None:
            if self.info.get("is_cuda_build"):
                raise NotReported("tf.sysconfig.get_build_info() names no cuDNN version")
            return None
        m = re.match(r"^64_(\d+)$", str(v))
        return m.group(1) if m else str(v)

    def gpus(self):
        tf = self.module
        devs = tf.config.list_physical_devices("GPU")
        if not devs:
            raise RuntimeError("tf.config.list_physical_devices('GPU') is empty")
        out = []
        for d in devs:
            try:
                tf.config.experimental.set_memory_growth(d, True)
            except Exception:  # noqa: BLE001 - already initialised
                pass
            det = {}
            try:
                det = tf.config.experimental.get_device_details(d)
            except Exception:  # noqa: BLE001
                pass
            cc = det.get("compute_capability")
            out.append({"name": det.get("device_name", d.name),
                        "cc": ("%d.%d" % tuple(cc)) if cc else None})
        return out

    def arch_list(self):
        caps = self.info.get("cuda_compute_capabilities")
        if not caps:
            raise NotReported("tf.sysconfig.get_build_info() names no compute capabilities")
        return [str(c) for c in caps]

    def cpu_matmul(self, a, b):
        tf = self.module
        with tf.device("/CPU:0"):
            return tf.matmul(tf.constant(a, tf.float32), tf.constant(b, tf.float32)).numpy().tolist()

    def gpu_matmul(self, n, rtol):
        import numpy as np
        tf = self.module
        rs = np.random.RandomState(0)
        a = rs.standard_normal((n, n)).astype(np.float32)
        b = rs.standard_normal((n, n)).astype(np.float32)
        with tf.device("/CPU:0"):
            ref = tf.matmul(a, b).numpy()
        with tf.device("/GPU:0"):
            got = tf.matmul(a, b).numpy()
        r = _np_compare(np, got, ref, rtol)
        r["shape"] = [n, n]
        try:
            r["tf32"] = bool(tf.config.experimental.tensor_float_32_execution_enabled())
        except Exception:  # noqa: BLE001
            pass
        return r

    def gpu_conv(self, rtol):
        import numpy as np
        tf = self.module
        rs = np.random.RandomState(1)
        x = rs.standard_normal((8, 32, 32, 16)).astype(np.float32)
        w = rs.standard_normal((3, 3, 16, 32)).astype(np.float32)
        with tf.device("/CPU:0"):
            ref = tf.nn.conv2d(x, w, strides=1, padding="SAME").numpy()
        with tf.device("/GPU:0"):
            got = tf.nn.conv2d(x, w, strides=1, padding="SAME").numpy()
        r = _np_compare(np, got, ref, rtol)
        r["cudnn"] = True
        return r


class JaxAdapter(_Adapter):
    name = "jax"

    def load(self):
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        import jax  # noqa: F401
        import jax.numpy  # noqa: F401
        self.module = jax
        self._versions = None
        for modname in ("jax._src.lib", "jax_cuda13_plugin", "jax_cuda12_plugin"):
            try:
                mod = __import__(modname, fromlist=["cuda_versions"])
                cv = getattr(mod, "cuda_versions", None)
            except Exception:  # noqa: BLE001
                cv = None
            if cv is not None:
                self._versions = cv
                break

    def version(self):
        return self.module.__version__

    def extra(self):
        try:
            import jaxlib
            return {"jaxlib": getattr(jaxlib, "__version__", None) or
                    __import__("jaxlib.version", fromlist=["x"]).__version__}
        except Exception:  # noqa: BLE001
            return {}

    def _gpu_devices(self):
        for plat in ("gpu", "cuda"):
            try:
                d = self.module.devices(plat)
                if d:
                    return d
            except Exception:  # noqa: BLE001
                continue
        return []

    def cuda_version(self):
        if self._versions is not None:
            try:
                return format_cuda_int(self._versions.cuda_runtime_get_version())
            except Exception:  # noqa: BLE001
                pass
        if not self._gpu_devices():
            return None
        raise NotReported("jax does not report its CUDA version")

    def cudnn_version(self):
        if self._versions is not None:
            try:
                return format_cudnn_int(self._versions.cudnn_get_version())
            except Exception:  # noqa: BLE001
                pass
        if not self._gpu_devices():
            return None
        raise NotReported("jax does not report its cuDNN version")

    def gpus(self):
        devs = self._gpu_devices()
        if not devs:
            raise RuntimeError("jax.devices('gpu') is empty (platforms: %s)" % ", ".join(
                sorted(set(d.platform for d in self.module.devices()))))
        return [{"name": getattr(d, "device_kind", str(d)),
                 "cc": getattr(d, "compute_capability", None)} for d in devs]

    def arch_list(self):
        raise NotReported("jax does not report the GPU archs it was built for")

    def _cpu(self):
        return self.module.devices("cpu")[0]

    def cpu_matmul(self, a, b):
        import numpy as np
        jax = self.module
        cpu = self._cpu()
        x = jax.device_put(np.asarray(a, np.float32), cpu)
        y = jax.device_put(np.asarray(b, np.float32), cpu)
        return np.asarray(jax.numpy.matmul(x, y)).tolist()

    def gpu_matmul(self, n, rtol):
        import numpy as np
        jax = self.module
        rs = np.random.RandomState(0)
        a = rs.standard_normal((n, n)).astype(np.float32)
        b = rs.standard_normal((n, n)).astype(np.float32)
        cpu, gpu = self._cpu(), self._gpu_devices()[0]
        ref = np.asarray(jax.numpy.matmul(jax.device_put(a, cpu), jax.device_put(b, cpu)))
        got = np.asarray(jax.numpy.matmul(jax.device_put(a, gpu), jax.device_put(b, gpu)))
        r = _np_compare(np, got, ref, rtol)
        r["shape"] = [n, n]
        return r

    def gpu_conv(self, rtol):
        import numpy as np
        jax = self.module
        rs = np.random.RandomState(1)
        x = rs.standard_normal((8, 16, 32, 32)).astype(np.float32)
        w = rs.standard_normal((32, 16, 3, 3)).astype(np.float32)
        cpu, gpu = self._cpu(), self._gpu_devices()[0]
        conv = jax.lax.conv_general_dilated
        ref = np.asarray(conv(jax.device_put(x, cpu), jax.device_put(w, cpu), (1, 1), "SAME"))
        got = np.asarray(conv(jax.device_put(x, gpu), jax.device_put(w, gpu), (1, 1), "SAME"))
        r = _np_compare(np, got, ref, rtol)
        r["cudnn"] = True
        return r


# A tiny protobuf writer: enough to build an ONNX model without the onnx package.
def _pb_varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _pb_int(field, v):
    return _pb_varint(field << 3) + _pb_varint(v)


def _pb_bytes(field, b):
    return _pb_varint((field << 3) | 2) + _pb_varint(len(b)) + b


def _pb_str(field, s):
    return _pb_bytes(field, s.encode("utf-8"))


def _onnx_value_info(name, shape):
    dims = b"".join(_pb_bytes(1, _pb_int(1, d)) for d in shape)
    tensor_type = _pb_int(1, 1) + _pb_bytes(2, dims)  # elem_type FLOAT, shape
    return _pb_str(1, name) + _pb_bytes(2, _pb_bytes(1, tensor_type))


def onnx_model(op_type, inputs, output, opset=13, ir_version=7):
    """Serialized ONNX ModelProto of one node: ``inputs`` [(name, shape)], ``output`` too."""
    node = b"".join(_pb_str(1, n) for n, _ in inputs) + _pb_str(2, output[0])
    node += _pb_str(3, "envman_node") + _pb_str(4, op_type)
    graph = _pb_bytes(1, node) + _pb_str(2, "envman_probe")
    graph += b"".join(_pb_bytes(11, _onnx_value_info(n, s)) for n, s in inputs)
    graph += _pb_bytes(12, _onnx_value_info(output[0], output[1]))
    opset_id = _pb_str(1, "") + _pb_int(2, opset)
    return (_pb_int(1, ir_version) + _pb_str(2, "envman-probe") + _pb_bytes(7, graph) +
            _pb_bytes(8, opset_id))


class OnnxruntimeAdapter(_Adapter):
    name = "onnxruntime"

    def load(self):
        import onnxruntime  # noqa: F401
        self.module = onnxruntime
        try:
            from onnxruntime.capi import build_and_package_info as bpi
            self.bpi = bpi
        except Exception:  # noqa: BLE001
            self.bpi = None

    def version(self):
        return self.module.__version__

    def extra(self):
        return {"providers": list(self.module.get_available_providers()),
                "package": getattr(self.bpi, "package_name", None)}

    def cuda_version(self):
        v = getattr(self.bpi, "cuda_version", None)
        if v:
            return str(v)
        if "CUDAExecutionProvider" not in self.module.get_available_providers():
            return None
        raise NotReported("onnxruntime does not report its CUDA version")

    def cudnn_version(self):
        v = getattr(self.bpi, "cudnn_version", None)
        if v:
            return str(v)
        if "CUDAExecutionProvider" not in self.module.get_available_providers():
            return None
        raise NotReported("onnxruntime does not report its cuDNN version")

    def gpus(self):
        prov = self.module.get_available_providers()
        if "CUDAExecutionProvider" not in prov:
            raise RuntimeError("CUDAExecutionProvider not in available providers [%s]" %
                               ", ".join(prov))
        sess = self._session("MatMul", [("A", [2, 2]), ("B", [2, 2])], ("C", [2, 2]), True)
        got = sess.get_providers()
        if not got or got[0] != "CUDAExecutionProvider":
            raise RuntimeError("CUDAExecutionProvider could not be loaded (session providers "
                               "[%s]; see stderr)" % ", ".join(got))
        return [{"name": "CUDAExecutionProvider device 0", "cc": None}]

    def arch_list(self):
        raise NotReported("onnxruntime does not report the GPU archs it was built for")

    def _session(self, op, inputs, output, gpu):
        ort = self.module
        so = ort.SessionOptions()
        so.log_severity_level = 3
        prov = ["CUDAExecutionProvider", "CPUExecutionProvider"] if gpu else ["CPUExecutionProvider"]
        return ort.InferenceSession(onnx_model(op, inputs, output), so, providers=prov)

    def _run(self, op, arrays, out_shape, gpu):
        names = ["A", "B"]
        inputs = [(nm, list(a.shape)) for nm, a in zip(names, arrays)]
        sess = self._session(op, inputs, ("C", out_shape), gpu)
        return sess.run(["C"], dict(zip(names, arrays)))[0]

    def cpu_matmul(self, a, b):
        import numpy as np
        a = np.asarray(a, np.float32)
        b = np.asarray(b, np.float32)
        return self._run("MatMul", [a, b], [a.shape[0], b.shape[1]], False).tolist()

    def gpu_matmul(self, n, rtol):
        import numpy as np
        rs = np.random.RandomState(0)
        a = rs.standard_normal((n, n)).astype(np.float32)
        b = rs.standard_normal((n, n)).astype(np.float32)
        ref = self._run("MatMul", [a, b], [n, n], False)
        got = self._run("MatMul", [a, b], [n, n], True)
        r = _np_compare(np, got, ref, rtol)
        r["shape"] = [n, n]
        return r

    def gpu_conv(self, rtol):
        import numpy as np
        rs = np.random.RandomState(1)
        x = rs.standard_normal((8, 16, 32, 32)).astype(np.float32)
        w = rs.standard_normal((32, 16, 3, 3)).astype(np.float32)
        ref = self._run("Conv", [x, w], [8, 32, 30, 30], False)
        got = self._run("Conv", [x, w], [8, 32, 30, 30], True)
        r = _np_compare(np, got, ref, rtol)
        r["cudnn"] = True
        return r


ADAPTERS = {"torch": TorchAdapter, "tensorflow": TensorflowAdapter, "jax": JaxAdapter,
            "onnxruntime": OnnxruntimeAdapter}


def make_adapter(name):
    cls = ADAPTERS.get(name)
    return cls() if cls else None


MATMUL_RTOL = 1e-3
GPU_SUBCHECKS = ("device", "arch", "gpu_matmul", "gpu_conv")


def _sub(subs, name, status, reason, **extra):
    s = {"name": name, "status": status, "reason": reason}
    s.update(extra)
    subs.append(s)
    return s


def _build_match(what, found, expected, fw):
    """Compare the CUDA / cuDNN a framework build reports with the stack's row."""
    if expected is None and found is None:
        return PASS, "no %s (CPU build), as expected" % what
    if expected is None:
        return FAIL, "%s is built with %s %s but the stack expects none" % (fw, what, found)
    if found is None:
        return FAIL, "%s reports no %s (CPU build?) but the stack expects %s %s" % (
            fw, what, what, expected)
    if versions_match(found, expected, 2):
        return PASS, "%s %s (expected %s)" % (what, found, expected)
    return FAIL, "%s reports %s %s, the stack expects %s" % (fw, what, found, expected)


def check_framework(ctx):
    fw = ctx.expect.get("framework")
    if not fw:
        return SKIP, "no framework in this stack", {}
    adapter = ctx.adapter_factory(fw)
    if adapter is None:
        return FAIL, "unknown framework %r (known: %s)" % (fw, ", ".join(FRAMEWORKS)), {}
    subs = []
    data = {"framework": fw, "subchecks": subs}
    try:
        adapter.load()
    except BaseException as e:  # noqa: B902 - ImportError, OSError from a missing .so, ...
        return FAIL, "cannot import %s: %s: %s" % (fw, type(e).__name__, e), data
    try:
        data.update(adapter.extra())
    except Exception:  # noqa: BLE001
        pass

    # version
    version = adapter.version()
    data["version"] = version
    exp_v = ctx.expect.get("framework_version")
    data["expected_version"] = exp_v
    if exp_v is None:
        _sub(subs, "version", SKIP, "%s %s (no expected version)" % (fw, version))
    elif versions_match(version, exp_v):
        _sub(subs, "version", PASS, "%s %s" % (fw, version))
    else:
        _sub(subs, "version", FAIL, "%s version %s, the stack expects %s" % (fw, version, exp_v))

    # CUDA / cuDNN the build reports
    exp_cuda = ctx.expect.get("cuda")
    build_cuda = None
    for what, getter, key, exp in (("CUDA", adapter.cuda_version, "cuda", exp_cuda),
                                   ("cuDNN", adapter.cudnn_version, "cudnn",
                                    ctx.expect.get("cudnn"))):
        try:
            found = getter()
        except NotReported as e:
            data[key] = None
            _sub(subs, key, SKIP, str(e))
            continue
        except Exception as e:  # noqa: BLE001
            data[key] = None
            _sub(subs, key, FAIL, "cannot read the %s version: %s: %s" % (
                what, type(e).__name__, e))
            continue
        data[key] = found
        if key == "cuda":
            build_cuda = found
        if key == "cudnn" and exp is None:
            _sub(subs, key, SKIP, "%s (the stack names no cuDNN)" % (
                ("cuDNN %s" % found) if found else "no cuDNN"))
            continue
        status, reason = _build_match(what, found, exp, fw)
        _sub(subs, key, status, reason)

    # CPU path: always exercised
    try:
        a = det_matrix(32, 32, 1)
        b = det_matrix(32, 32, 2)
        got = flatten(adapter.cpu_matmul(a, b))
        cmp_ = compare_values(got, flatten(py_matmul(a, b)), rtol=1e-5)
        data["cpu_matmul"] = cmp_
        if cmp_["ok"]:
            _sub(subs, "cpu_matmul", PASS, "32x32 CPU matmul matches the pure-Python reference "
                 "(max abs error %g)" % cmp_["max_abs_error"])
        else:
            _sub(subs, "cpu_matmul", FAIL, "32x32 CPU matmul differs from the pure-Python "
                 "reference: %d mismatches, max abs error %g" % (
                     cmp_["mismatches"], cmp_["max_abs_error"]))
    except Exception as e:  # noqa: BLE001
        _sub(subs, "cpu_matmul", FAIL, "CPU matmul raised %s: %s" % (type(e).__name__, e))

    # GPU part
    gpu_reason = None
    if exp_cuda is None and build_cuda is None:  # first: a CPU build needs no GPU advice
        gpu_reason = "CPU build of %s (the stack has no CUDA)" % fw
    elif not ctx.gpu_present:
        gpu_reason = ctx.no_gpu_reason or "no GPU"
    if gpu_reason is not None:
        data["device"] = "cpu"
        if ctx.require_gpu:
            _sub(subs, "device", FAIL, "%s (--require-gpu)" % gpu_reason)
        else:
            data["gpu_skipped"] = True
            data["gpu_reason"] = gpu_reason
            for name in GPU_SUBCHECKS:
                _sub(subs, name, SKIP, gpu_reason)
    else:
        _framework_gpu_part(ctx, adapter, fw, subs, data)

    failed = [s for s in subs if s["status"] == FAIL]
    if failed:
        return FAIL, "; ".join(s["reason"] for s in failed), data
    bits = ["%s %s" % (fw, version)]
    if data.get("cuda"):
        bits.append("CUDA %s" % data["cuda"])
    if data.get("cudnn"):
        bits.append("cuDNN %s" % data["cudnn"])
    if data.get("device") == "cpu":
        return PASS, "%s on the CPU; GPU sub-checks skipped: %s" % (
            ", ".join(bits), gpu_reason), data
    done = [s["name"] for s in subs if s["status"] == PASS]
    return PASS, "%s on %s: %s passed" % (", ".join(bits), data.get("device_name", "GPU"),
                                           ", ".join(done)), data


def expected_arch_list(expect):
    """The stack's ``sass_archs`` / ``ptx_archs`` as an arch list (``sm_80``, ``compute_90``),
    or None when the stack names neither."""
    sass = expect.get("sass_archs")
    ptx = expect.get("ptx_archs")
    if sass is None and ptx is None:
        return None
    out = []
    for kind, archs in (("sm", sass or []), ("compute", ptx or [])):
        for a in archs:
            try:
                _, major, minor, suffix = parse_arch(a)
            except ValueError:
                continue
            out.append(arch_name(kind, major, minor, suffix))
    return out


def _framework_gpu_part(ctx, adapter, fw, subs, data):
    try:
        fgpus = adapter.gpus()
    except Exception as e:  # noqa: BLE001
        data["device"] = None
        _sub(subs, "device", FAIL, "%s sees no GPU although the driver reports %d: %s" % (
            fw, len(ctx.gpus), e))
        return
    data["device"] = "gpu:0"
    data["device_name"] = fgpus[0].get("name") if fgpus else None
    data["framework_gpus"] = fgpus
    _sub(subs, "device", PASS, "%s sees %d GPU(s)" % (fw, len(fgpus)))

    expected_al = expected_arch_list(ctx.expect)
    if expected_al is not None:
        data["expected_arch_list"] = expected_al
    source = "the framework"
    try:
        al = adapter.arch_list()
    except NotReported as e:
        al = None
        if expected_al:
            al = expected_al
            source = "the stack's sass_archs/ptx_archs (%s)" % e
        else:
            _sub(subs, "arch", SKIP, str(e))
    except Exception as e:  # noqa: BLE001
        al = None
        _sub(subs, "arch", FAIL, "cannot read the arch list: %s: %s" % (type(e).__name__, e))
    if al is not None:
        data["arch_list"] = al
        data["arch_list_from"] = source
        problems, ok_bits = [], []
        for g in ctx.gpus:
            ok, via, why = arch_supported(g["cc"], al)
            (ok_bits if ok else problems).append(why)
        suffix = "" if source == "the framework" else " (per %s)" % source
        if problems:
            _sub(subs, "arch", FAIL, "; ".join(sorted(set(problems))) + suffix)
        elif source != "the framework":
            # The stack's own list only predicts that the GPU is covered; the framework did
            # not confirm it, so this is not counted as a pass (the GPU matmul is the evidence).
            _sub(subs, "arch", SKIP, "unverified: %s does not report its archs; the stack's list "
                 "covers the GPU: %s%s" % (fw, "; ".join(sorted(set(ok_bits))), suffix),
                 unverified=True)
        else:
            via_ptx = any("PTX" in b for b in ok_bits)
            _sub(subs, "arch", PASS, "; ".join(sorted(set(ok_bits))), via_ptx=via_ptx)

    for name, fn in (("gpu_matmul", lambda: adapter.gpu_matmul(512, MATMUL_RTOL)),
                     ("gpu_conv", lambda: adapter.gpu_conv(MATMUL_RTOL))):
        try:
            r = fn()
        except NotReported as e:
            _sub(subs, name, SKIP, str(e))
            continue
        except Exception as e:  # noqa: BLE001
            _sub(subs, name, FAIL, "%s on the GPU raised %s: %s" % (
                name, type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else ""))
            continue
        data[name] = r
        what = "512x512 fp32 matmul" if name == "gpu_matmul" else "conv2d"
        if r.get("ok"):
            _sub(subs, name, PASS, "%s GPU vs CPU: max rel error %.3g (rtol %g)" % (
                what, r["max_rel_error"], r["rtol"]))
        else:
            _sub(subs, name, FAIL, "%s GPU result differs from the CPU: %d of %d outside "
                 "rtol %g, max rel error %.3g" % (what, r["mismatches"], r["n"], r["rtol"],
                                                  r["max_rel_error"] or float("nan")))


# --------------------------------------------------------------------------------------
# Check: bench
# --------------------------------------------------------------------------------------

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
            for d in (a, b):
                if d:
                    try:
                        cuda.mem_free(d)
                    except CudaError:
                        pass
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
               "skipped": {}, "method": {}}
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
    return frac


def bench_reason(summary):
    """The bench check's one-line reason for a summary."""
    def fmt(v, unit):
        return ("%.1f %s" % (v, unit)) if isinstance(v, (int, float)) else "n/a"

    reason = "device %s, H2D %s, D2H %s, FP32 %s, FP16 %s" % (
        fmt(summary["device_bandwidth_gb_s"], "GB/s"), fmt(summary["h2d_gb_s"], "GB/s"),
        fmt(summary["d2h_gb_s"], "GB/s"), fmt(summary["fp32_tflops"], "TFLOP/s"),
        fmt(summary["fp16_tflops"], "TFLOP/s"))
    if summary["skipped"]:
        reason += " (matmul skipped: needs a framework)"
    return reason


CHECKS = {"driver": check_driver, "runtime": check_runtime, "kernel": check_kernel,
          "framework": check_framework, "bench": check_bench}


# --------------------------------------------------------------------------------------
# Command line and the result document
# --------------------------------------------------------------------------------------


class Options(object):
    def __init__(self, expect_path=DEFAULT_EXPECT, require_gpu=False, bench=False,
                 timeout=DEFAULT_TIMEOUT, only=None):
        # None: run without expectations (--no-expect)
        self.expect_path = expect_path
        self.require_gpu = require_gpu
        self.bench = bench
        self.timeout = timeout
        self.only = only


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def parse_args(argv):
    p = _Parser(prog="probe.py", description="envman in-container smoke-test probe: prints one "
                "JSON document (see the module docstring for its keys).")
    p.add_argument("--expect", metavar="FILE", default=None,
                   help="resolved stack JSON (default %s; it must exist)" % DEFAULT_EXPECT)
    p.add_argument("--no-expect", action="store_true",
                   help="run without expectations (a bare host, no stack)")
    p.add_argument("--require-gpu", action="store_true", help="a missing GPU is a failure")
    p.add_argument("--bench", action="store_true", help="measure bandwidths and matmul TFLOP/s")
    p.add_argument("--timeout", metavar="SECONDS", default=str(DEFAULT_TIMEOUT),
                   help="per-check time limit (default %(default)s)")
    p.add_argument("--only", metavar="CHECK,...", default=None,
                   help="run only these checks: %s" % ",".join(CHECK_ORDER))
    ns = p.parse_args(argv)
    try:
        timeout = float(ns.timeout)
    except ValueError:
        raise UsageError("--timeout: not a number: %r" % ns.timeout)
    if not timeout > 0 or math.isinf(timeout):
        raise UsageError("--timeout: must be a positive number of seconds, not %r" % ns.timeout)
    only = None
    if ns.only is not None:
        only = [c.strip() for c in ns.only.split(",") if c.strip()]
        unknown = [c for c in only if c not in CHECK_ORDER]
        if unknown or not only:
            raise UsageError("--only: unknown check(s) %s (known: %s)" % (
                ", ".join(repr(c) for c in unknown) or "(none given)", ", ".join(CHECK_ORDER)))
    bench = ns.bench or bool(only and "bench" in only)
    if ns.no_expect and ns.expect is not None:
        raise UsageError("--no-expect and --expect exclude each other")
    expect = None if ns.no_expect else (ns.expect or DEFAULT_EXPECT)
    return Options(expect, ns.require_gpu, bench, timeout, only)


def load_expect(path):
    """The expectations file: ``({...}, found)``. ``path`` None means none were asked for
    (``--no-expect``); a named file that is missing is bad usage, never "no expectations"."""
    if path is None:
        return {}, False
    if not os.path.isfile(path):
        raise UsageError("--expect %s: no such file: the stack's expectations are missing (an image "
                         "not built by envman, or the file was not mounted); use --no-expect to run "
                         "without them" % path)
    try:
        with open(path) as f:
            doc = json.load(f)
    except (IOError, OSError, ValueError) as e:
        raise UsageError("--expect %s: cannot read JSON: %s" % (path, e))
    if not isinstance(doc, dict):
        raise UsageError("--expect %s: expected a JSON object, got %s" % (path, type(doc).__name__))
    fw = doc.get("framework")
    if fw is not None and fw not in FRAMEWORKS:
        raise UsageError("--expect %s: framework must be one of %s or null, not %r" % (
            path, ", ".join(FRAMEWORKS), fw))
    for key in ("framework_version", "cuda", "cudnn"):
        v = doc.get(key)
        if v is not None:
            if isinstance(v, bool) or not isinstance(v, (str, int, float)):
                raise UsageError("--expect %s: %s must be a version string or null" % (path, key))
            doc[key] = str(v)
    for key in ("sass_archs", "ptx_archs"):
        v = doc.get(key)
        if v is not None and not (isinstance(v, list) and all(isinstance(a, str) for a in v)):
            raise UsageError("--expect %s: %s must be a list of strings" % (path, key))
    ds = doc.get("datasheet")
    if ds is not None and not isinstance(ds, dict):
        raise UsageError("--expect %s: datasheet must be an object" % path)
    return doc, True


def host_info():
    def env(k):
        return os.environ.get(k)
    in_container = os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv")
    return {"hostname": socket.gethostname(), "platform": platform.platform(),
            "machine": platform.machine(), "kernel": platform.release(),
            "in_container": in_container, "cuda_version_env": env("CUDA_VERSION"),
            "nvidia_visible_devices": env("NVIDIA_VISIBLE_DEVICES"),
            "nvidia_driver_capabilities": env("NVIDIA_DRIVER_CAPABILITIES"),
            "python_executable": sys.executable}


def base_document():
    return {"probe_version": PROBE_VERSION, "overall": OVERALL_FAIL, "reason": "",
            "python": platform.python_version(), "host": host_info(), "gpus": [],
            "driver_version": None, "checks": [], "bench": None,
            "expect": {"path": None, "found": False, "stack": {}}, "seconds": 0.0}


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


def usage_document(message):
    doc = base_document()
    doc["reason"] = "bad usage: %s" % message
    return doc


def main(argv=None, out=None, ctx=None):
    """Parse ``argv``, run, write the JSON line to ``out``; returns the exit status."""
    out = out or sys.stdout
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        opts = parse_args(argv)
        expect, found = load_expect(opts.expect_path)
    except UsageError as e:
        sys.stderr.write("probe.py: error: %s\n" % e)
        out.write(to_json_line(usage_document(str(e))) + "\n")
        out.flush()
        return EXIT_USAGE
    try:
        doc = run_probe(opts, ctx=ctx, expect=expect, expect_found=found)
    except Exception as e:  # noqa: BLE001 - always answer with a document
        doc = base_document()
        doc["reason"] = "probe crashed: %s: %s" % (type(e).__name__, e)
        doc["traceback"] = traceback.format_exc().splitlines()[-12:]
    out.write(to_json_line(doc) + "\n")
    out.flush()
    main.last_doc = doc
    return exit_code_for(doc["overall"])


def _isolate_stdout():
    """Send fd 1 (and sys.stdout) to stderr; return a text file on the real stdout."""
    try:
        sys.stdout.flush()
        real = os.dup(1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        return os.fdopen(real, "w")
    except (OSError, ValueError, AttributeError):
        return sys.stdout


def _script_entry():
    argv = sys.argv[1:]
    if "-h" in argv or "--help" in argv:
        try:
            parse_args(argv)
        except UsageError as e:
            sys.stderr.write("probe.py: error: %s\n" % e)
            return EXIT_USAGE
        return EXIT_OK
    out = _isolate_stdout()
    ctx = Context()
    code = main(argv, out=out, ctx=ctx)
    out.flush()
    if ctx.timed_out:
        # A hung check's thread may still sit in a driver or framework call: leave now.
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(_script_entry())
