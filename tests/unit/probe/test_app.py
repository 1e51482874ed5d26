"""Unit tests of the in-container probe (the package ``envman/probe/app``), all without a GPU.

The driver API is replaced by ``FakeLib`` (a pure-Python libcuda that even runs the saxpy
kernel), frameworks by ``FakeAdapter`` or a fake ``torch`` package on PYTHONPATH, and the
probe is also run for real, as the ``probe.pyz`` images carry, in a subprocess on this
(GPU-less) machine. Its Python 3.6 grammar, imports and archive: ``test_probe_pyz.py``.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from envman.probe import EXIT_FAIL, EXIT_OK, EXIT_USAGE, parse_output
from envman.probe.app import arch as arch_mod
from envman.probe.app import bench as bench_mod
from envman.probe.app import check as check_mod
from envman.probe.app import cli as cli_mod
from envman.probe.app import context as context_mod
from envman.probe.app import contract as contract_mod
from envman.probe.app import cuda as cuda_mod
from envman.probe.app import document as document_mod
from envman.probe.app import expect as expect_mod
from envman.probe.app import frameworks as frameworks_mod
from envman.probe.app import kernel as kernel_mod
from envman.probe.app import numeric as numeric_mod
from envman.probe.app import run as run_mod
from envman.probe.app import runtime as runtime_mod
from envman.probe.app import verdict as verdict_mod
from envman.probe.app import tensorcore as tensorcore_mod
from envman.probe.app import versions as versions_mod
from envman.probe.app.frameworks import base as base_mod
from envman.probe.app.frameworks import onnx_proto as onnx_proto_mod
from tests.support.probe_doc import probe_pyz


# ------------------------------------------------------------------------------------------
# Fakes
# ------------------------------------------------------------------------------------------


class FakeLib:
    """A pure-Python stand-in for libcuda.so.1, enough for the driver, kernel and bench checks.

    Out-parameters arrive as ``ctypes.byref(...)`` objects (written through ``._obj``);
    device memory is a dict of bytearrays; ``cuLaunchKernel`` runs saxpy on it.
    """

    NAMES = {100: b"CUDA_ERROR_NO_DEVICE", 222: b"CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
             218: b"CUDA_ERROR_INVALID_PTX", 999: b"CUDA_ERROR_UNKNOWN", 34: b"CUDA_ERROR_STUB_LIBRARY"}

    def __init__(self, version=12040, devices=(("NVIDIA Fake A10", (8, 6), 24 << 30),), init_rc=0,
                 reject_ptx=(), jit_log=b"", corrupt=False):
        self.version = version
        self.devices = list(devices)
        self.init_rc = init_rc
        self.reject_ptx = set(reject_ptx)
        self.jit_log = jit_log
        self.corrupt = corrupt
        self.mem = {}
        self.next = 0x10000
        self.loaded_ptx = []
        self.launches = 0
        self.mma_launches = []
        self.retained = 0

    # errors
    def cuGetErrorName(self, code, p):
        p._obj.value = self.NAMES.get(code, b"CUDA_ERROR_FAKE")
        return 0

    # device queries
    def cuInit(self, flags):
        return self.init_rc

    def cuDriverGetVersion(self, p):
        p._obj.value = self.version
        return 0

    def cuDeviceGetCount(self, p):
        p._obj.value = len(self.devices)
        return 0

    def cuDeviceGet(self, p, i):
        p._obj.value = i
        return 0

    def cuDeviceGetName(self, buf, n, dev):
        buf.value = self.devices[dev][0].encode()
        return 0

    def cuDeviceGetAttribute(self, p, attr, dev):
        cc = self.devices[dev][1]
        p._obj.value = {75: cc[0], 76: cc[1], 16: 84}.get(attr, 0)
        return 0

    def cuDeviceTotalMem_v2(self, p, dev):
        p._obj.value = self.devices[dev][2]
        return 0

    def cuDeviceGetUuid_v2(self, buf, dev):
        ctypes.memmove(buf, bytes(range(16)), 16)
        return 0

    # contexts and modules
    def cuDevicePrimaryCtxRetain(self, p, dev):
        self.retained += 1
        p._obj.value = 0xC0 + dev
        return 0

    def cuDevicePrimaryCtxRelease_v2(self, dev):
        self.retained -= 1
        return 0

    def cuCtxSetCurrent(self, ctx):
        return 0

    def cuCtxSynchronize(self):
        return 0

    def cuModuleLoadDataEx(self, pmod, image, nopts, opts, vals):
        version = re.search(rb"\.version (\S+)", image).group(1).decode()
        self.loaded_ptx.append(version)
        if version in self.reject_ptx or "*" in self.reject_ptx:
            if self.jit_log:
                for i in range(nopts):
                    if opts[i] == cuda_mod.CU_JIT_ERROR_LOG_BUFFER:
                        ctypes.memmove(vals[i], self.jit_log + b"\0", len(self.jit_log) + 1)
            return 222
        pmod._obj.value = 0xD0
        return 0

    def cuModuleGetFunction(self, pf, mod, name):
        assert name in (kernel_mod.KERNEL_NAME.encode(), tensorcore_mod.KERNEL_NAME.encode())
        pf._obj.value = 0xF0 if name == kernel_mod.KERNEL_NAME.encode() else 0xF1
        return 0

    def cuModuleUnload(self, mod):
        return 0

    # events: every interval is 1 ms, so bandwidths are exact numbers
    def cuEventCreate(self, p, flags):
        p._obj.value = 0xE0
        return 0

    def cuEventRecord(self, ev, stream):
        return 0

    def cuEventSynchronize(self, ev):
        return 0

    def cuEventElapsedTime(self, p, start, end):
        p._obj.value = 1.0
        return 0

    def cuEventDestroy_v2(self, ev):
        return 0

    # memory
    def cuMemsetD8_v2(self, d, value, n):
        self.mem[d][:n] = bytes([value]) * n
        return 0

    def cuMemcpyDtoD_v2(self, dst, src, n):
        self.mem[dst][:n] = self.mem[src][:n]
        return 0

    def cuMemAllocHost_v2(self, p, size):
        buf = ctypes.create_string_buffer(size)
        self.host = getattr(self, "host", {})
        self.host[ctypes.addressof(buf)] = buf
        p._obj.value = ctypes.addressof(buf)
        return 0

    def cuMemFreeHost(self, addr):
        del self.host[addr]
        return 0

    def cuMemAlloc_v2(self, p, size):
        h = self.next
        self.next += size + 256
        self.mem[h] = bytearray(size)
        p._obj.value = h
        return 0

    def cuMemFree_v2(self, h):
        del self.mem[h]
        return 0

    def cuMemcpyHtoD_v2(self, d, host, n):
        self.mem[d][:n] = ctypes.string_at(host, n)
        return 0

    def cuMemcpyDtoH_v2(self, host, d, n):
        ctypes.memmove(host, bytes(self.mem[d][:n]), n)
        return 0

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        self.launches += 1
        if f == 0xF1:  # the tensor-core loop: every thread writes its accumulators' sum
            out = ctypes.c_uint64.from_address(params[0]).value
            iters = ctypes.c_uint32.from_address(params[1]).value
            self.mma_launches.append((gx * bx, iters))
            vals = [tensorcore_mod.expected_sum(iters)] * (gx * bx)
            if self.corrupt:
                vals[3] += 1.0
            self.mem[out][: 4 * gx * bx] = struct.pack("%df" % (gx * bx), *vals)
            return 0
        x = ctypes.c_uint64.from_address(params[0]).value
        y = ctypes.c_uint64.from_address(params[1]).value
        a = ctypes.c_float.from_address(params[2]).value
        n = ctypes.c_uint32.from_address(params[3]).value
        assert gx * bx >= n
        xs = struct.unpack("%df" % n, bytes(self.mem[x][: 4 * n]))
        ys = struct.unpack("%df" % n, bytes(self.mem[y][: 4 * n]))
        out = [a * xv + yv for xv, yv in zip(xs, ys)]
        if self.corrupt:
            out[7] += 1.0
        self.mem[y][: 4 * n] = struct.pack("%df" % n, *out)
        return 0


def fake_loader(lib):
    def load():
        return cuda_mod.Cuda(lib, path="/fake/libcuda.so.1")

    return load


def no_libcuda():
    raise cuda_mod.CudaUnavailable(cuda_mod.NO_LIBCUDA_REASON, ["libcuda.so.1: cannot open shared object file"])


class FakeAdapter(base_mod.Adapter):
    """A framework whose answers the test chooses."""

    def __init__(self, name="torch", version="2.7.1+cu128", cuda="12.8", cudnn="9.7.1",
                 gpus=None, arch=("sm_80", "sm_86", "sm_90"), gpu_error=None, bad_matmul=False,
                 import_error=None):
        self.name = name
        self._version = version
        self._cuda = cuda
        self._cudnn = cudnn
        self._gpus = gpus if gpus is not None else [{"name": "Fake GPU", "cc": "9.0"}]
        self._arch = list(arch) if arch is not None else None
        self._gpu_error = gpu_error
        self._bad = bad_matmul
        self._import_error = import_error
        self.gpu_calls = 0

    def load(self):
        if self._import_error:
            raise self._import_error

    def version(self):
        return self._version

    def cuda_version(self):
        return self._cuda

    def cudnn_version(self):
        return self._cudnn

    def gpus(self):
        self.gpu_calls += 1
        if self._gpu_error:
            raise RuntimeError(self._gpu_error)
        return self._gpus

    def arch_list(self):
        if self._arch is None:
            raise base_mod.NotReported("not reported")
        return self._arch

    def cpu_matmul(self, a, b):
        return numeric_mod.py_matmul(a, b)

    def gpu_matmul(self, n, rtol):
        ref = [float(i % 13) for i in range(64)]
        got = [v + (5.0 if self._bad and i == 3 else 0.0) for i, v in enumerate(ref)]
        return numeric_mod.compare_values(got, ref, rtol)

    def gpu_conv(self, rtol):
        raise base_mod.NotReported("no cuDNN in this fake")


def make_ctx(lib=None, expect=None, adapter=None, **kw):
    kw.setdefault("cudart_patterns", [])
    kw.setdefault("cudart_query", False)
    kw.setdefault("kernel_n", 4096)
    return context_mod.Context(expect=expect or {}, cuda_loader=fake_loader(lib) if lib else no_libcuda,
                     adapter_factory=(lambda name: adapter) if adapter else frameworks_mod.make_adapter, **kw)


def opts(**kw):
    kw.setdefault("expect_path", None)
    return cli_mod.Options(**kw)


def check(doc, name):
    for c in doc["checks"]:
        if c["name"] == name:
            return c
    raise AssertionError("no check %r in %s" % (name, [c["name"] for c in doc["checks"]]))


def run_script(args, env=None, timeout=120, python=None):
    e = dict(os.environ)
    if env:
        e.update(env)
    return subprocess.run([python or sys.executable, str(probe_pyz()), *args], capture_output=True,
                          text=True, env=e, timeout=timeout)


def host_has_gpu():
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    n = ctypes.c_int(0)
    return lib.cuInit(0) == 0 and lib.cuDeviceGetCount(ctypes.byref(n)) == 0 and n.value > 0


# ------------------------------------------------------------------------------------------
# Pure helpers
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cc, archs, ok, via",
    [
        ("8.6", ["sm_80"], True, "sass"),  # same major, newer minor: cubin runs
        ("9.0", ["sm_80", "compute_80"], True, "ptx"),  # only the PTX JITs for sm_90
        ("9.0", ["sm_86"], False, None),  # no cubin for 9.x, no PTX
        ("8.0", ["sm_86"], False, None),  # a newer-minor cubin does not run on an older GPU
        ("9.0", ["sm_90a"], True, "sass"),
        ("10.0", ["sm_90a", "compute_90a"], False, None),  # arch-specific: exact only
        ("12.0", ["sm_100", "compute_120"], True, "ptx"),
        ("10.3", ["sm_100f"], True, "sass"),
        ((7, 5), ["sm_75"], True, "sass"),
        ("8.9", ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"], True, "sass"),
    ],
)
def test_arch_supported(cc, archs, ok, via):
    got_ok, got_via, reason = arch_mod.arch_supported(cc, archs)
    assert (got_ok, got_via) == (ok, via), reason


def test_arch_missing_reason_names_the_gpu_and_the_list():
    ok, via, reason = arch_mod.arch_supported("9.0", ["sm_86"])
    assert not ok
    assert reason == "no kernel image for sm_90 in this build: arch list is [sm_86]"


@pytest.mark.parametrize(
    "text, parsed",
    [("sm_86", ("sm", 8, 6, "")), ("compute_90", ("compute", 9, 0, "")),
     ("sm_90a", ("sm", 9, 0, "a")), ("8.6", ("sm", 8, 6, "")), ("sm_100", ("sm", 10, 0, "")),
     ("sm_120", ("sm", 12, 0, "")), ("12.1", ("sm", 12, 1, ""))],
)
def test_parse_arch(text, parsed):
    assert arch_mod.parse_arch(text) == parsed


def test_parse_arch_rejects_garbage():
    with pytest.raises(ValueError):
        arch_mod.parse_arch("gfx90a")


@pytest.mark.parametrize(
    "found, expected, depth, ok",
    [("2.7.1+cu128", "2.7.1", None, True), ("2.7.1+cu118", "2.7.0", None, False),
     ("12.4", "12.8", 2, False), ("12.8.90", "12.8", 2, True), ("9.1.0", "9", None, True),
     ("2.16.1", "2.16", None, True), ("v0.4.30", "0.4.30", None, True),
     ("2.8.0rc1", "2.8.0", None, True), (None, "1.0", None, False), ("1.0", "", None, False)],
)
def test_versions_match(found, expected, depth, ok):
    assert versions_mod.versions_match(found, expected, depth) is ok


def test_version_formatting():
    assert versions_mod.format_cuda_int(12040) == "12.4"
    assert versions_mod.format_cuda_int(13000) == "13.0"
    assert versions_mod.format_cudnn_int(8902) == "8.9.2"
    assert versions_mod.format_cudnn_int(90701) == "9.7.1"
    assert versions_mod.short_version("12.8.1") == "12.8"


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


def test_to_json_line_is_one_strict_line():
    line = document_mod.to_json_line({"a": float("nan"), "b": [float("inf"), 1.5], "c": "x\ny\u00e9"})
    assert "\n" not in line
    assert json.loads(line) == {"a": None, "b": [None, 1.5], "c": "x\ny\u00e9"}


# ------------------------------------------------------------------------------------------
# Aggregation
# ------------------------------------------------------------------------------------------


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


# ------------------------------------------------------------------------------------------
# Timeouts
# ------------------------------------------------------------------------------------------


def test_hung_check_fails_with_timeout():
    release = threading.Event()
    ctx = make_ctx()
    t0 = time.time()
    res = check_mod.run_check("kernel", lambda c: release.wait(30), ctx, 0.2)
    release.set()
    assert time.time() - t0 < 5
    assert res["status"] == "fail"
    assert res["reason"] == "timed out after 0.2 s"
    assert res["data"]["timed_out"] is True
    assert ctx.timed_out == ["kernel"]


def test_hung_check_makes_overall_fail():
    release = threading.Event()

    def hang(ctx):
        release.wait(30)
        return contract_mod.PASS, "late", {}

    try:
        doc = run_mod.run_probe(opts(timeout=0.3), ctx=make_ctx(lib=FakeLib()), expect={},
                          checks={"runtime": hang})
    finally:
        release.set()
    assert doc["overall"] == "fail"
    assert check(doc, "runtime")["reason"] == "timed out after 0.3 s"
    assert "runtime: timed out after 0.3 s" in doc["reason"]


def test_exception_in_a_check_is_a_failure_not_a_crash():
    def boom(ctx):
        raise ValueError("kaput")

    doc = run_mod.run_probe(opts(), ctx=make_ctx(lib=FakeLib()), expect={}, checks={"kernel": boom})
    c = check(doc, "kernel")
    assert c["status"] == "fail" and "ValueError: kaput" in c["reason"]
    assert doc["overall"] == "fail"


# ------------------------------------------------------------------------------------------
# Driver check
# ------------------------------------------------------------------------------------------


def test_no_libcuda_is_a_skip_with_the_reason():
    doc = run_mod.run_probe(opts(), ctx=make_ctx(), expect={})
    drv = check(doc, "driver")
    assert drv["status"] == "skip"
    assert drv["reason"] == cuda_mod.NO_LIBCUDA_REASON
    assert drv["reason"].startswith("libcuda.so.1 not found")
    assert check(doc, "kernel")["status"] == "skip"
    assert doc["overall"] == "cpu-only"
    assert doc["gpus"] == [] and doc["driver_version"] is None


def test_no_libcuda_with_require_gpu_fails():
    doc = run_mod.run_probe(opts(require_gpu=True), ctx=make_ctx(), expect={})
    assert check(doc, "driver")["status"] == "fail"
    assert check(doc, "kernel")["status"] == "fail"
    assert "--require-gpu" in check(doc, "driver")["reason"]
    assert doc["overall"] == "fail"
    assert verdict_mod.exit_code_for(doc["overall"]) == 1


def test_cuinit_no_device_is_a_skip_naming_the_error():
    doc = run_mod.run_probe(opts(), ctx=make_ctx(lib=FakeLib(init_rc=100)), expect={})
    drv = check(doc, "driver")
    assert drv["status"] == "skip" and "CUDA_ERROR_NO_DEVICE" in drv["reason"]
    assert doc["overall"] == "cpu-only"


def test_cuinit_other_error_is_a_failure_with_its_name():
    doc = run_mod.run_probe(opts(), ctx=make_ctx(lib=FakeLib(init_rc=999)), expect={})
    drv = check(doc, "driver")
    assert drv["status"] == "fail"
    assert "CUDA_ERROR_UNKNOWN (999)" in drv["reason"]
    assert doc["overall"] == "fail"


def test_zero_devices_is_a_skip():
    doc = run_mod.run_probe(opts(), ctx=make_ctx(lib=FakeLib(devices=())), expect={})
    assert check(doc, "driver")["status"] == "skip"
    assert doc["overall"] == "cpu-only"


def test_driver_reports_devices():
    lib = FakeLib(version=12040, devices=[("NVIDIA Fake A10", (8, 6), 24 << 30),
                                          ("NVIDIA Fake H100", (9, 0), 80 << 30)])
    doc = run_mod.run_probe(opts(), ctx=make_ctx(lib=lib), expect={})
    drv = check(doc, "driver")
    assert drv["status"] == "pass", drv
    assert doc["driver_version"] == "12.4"
    assert [g["cc"] for g in doc["gpus"]] == ["8.6", "9.0"]
    assert doc["gpus"][1] == {"index": 1, "name": "NVIDIA Fake H100", "cc": "9.0",
                              "memory_bytes": 80 << 30, "multiprocessors": 84,
                              "uuid": "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"}
    assert doc["overall"] == "pass"


# ------------------------------------------------------------------------------------------
# Kernel check (saxpy run by the fake driver)
# ------------------------------------------------------------------------------------------


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


# ------------------------------------------------------------------------------------------
# Runtime check
# ------------------------------------------------------------------------------------------


def fake_cudart(tmp_path, name):
    d = tmp_path / "cuda" / "lib64"
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(b"not really a library")
    return [("system", str(d / "libcudart.so*"))]


def test_runtime_mismatch_fails(tmp_path):
    pats = fake_cudart(tmp_path, "libcudart.so.12.4.127")
    ctx = make_ctx(cudart_patterns=pats, cudart_query=True)  # the query fails: file name used
    doc = run_mod.run_probe(opts(only=["runtime"]), ctx=ctx, expect={"cuda": "12.8"})
    rt = check(doc, "runtime")
    assert rt["status"] == "fail"
    assert "expected 12.8" in rt["reason"] and "12.4" in rt["reason"]
    assert rt["data"]["found"][0]["version_from"] == "file name"
    assert doc["overall"] == "fail"


def test_runtime_match_passes(tmp_path):
    pats = fake_cudart(tmp_path, "libcudart.so.12.8.90")
    doc = run_mod.run_probe(opts(only=["runtime"]), ctx=make_ctx(cudart_patterns=pats),
                      expect={"cuda": "12.8.1"})
    assert check(doc, "runtime")["status"] == "pass"
    assert doc["overall"] == "cpu-only"  # no GPU was seen


def test_runtime_version_from_wheel_dist_info(tmp_path):
    site = tmp_path / "site-packages"
    lib = site / "nvidia" / "cuda_runtime" / "lib"
    lib.mkdir(parents=True)
    (lib / "libcudart.so.12").write_bytes(b"x")
    (site / "nvidia_cuda_runtime_cu12-12.6.77.dist-info").mkdir()
    assert runtime_mod.version_from_path(str(lib / "libcudart.so.12")) == "12.6"
    assert runtime_mod.version_from_path("/usr/local/cuda-12.4/targets/x86_64-linux/lib/libcudart.so.12") == "12.4"
    assert runtime_mod.version_from_path("/x/libcudart.so.13") == "13"


def test_runtime_nothing_found():
    doc = run_mod.run_probe(opts(only=["runtime"]), ctx=make_ctx(), expect={"cuda": None})
    assert check(doc, "runtime")["status"] == "skip"
    doc = run_mod.run_probe(opts(only=["runtime"]), ctx=make_ctx(), expect={"cuda": "12.8"})
    rt = check(doc, "runtime")
    assert rt["status"] == "fail" and "no libcudart found" in rt["reason"]


def test_runtime_query_of_a_missing_library_reports_the_error(tmp_path):
    q = runtime_mod.query_cudart(str(tmp_path / "libcudart.so.99"))
    assert "dlopen failed" in q["error"]


# ------------------------------------------------------------------------------------------
# Framework check (fake adapter)
# ------------------------------------------------------------------------------------------

# The runtime check would fail these stacks (no libcudart 12.8 in the fake file system).
GPU_AND_FW = ["driver", "kernel", "framework"]
STACK = {"framework": "torch", "framework_version": "2.7.1", "cuda": "12.8", "cudnn": "9.7"}


def test_no_framework_is_a_skip():
    doc = run_mod.run_probe(opts(only=["framework"]), ctx=make_ctx(lib=FakeLib()), expect={})
    fw = check(doc, "framework")
    assert fw["status"] == "skip" and fw["reason"] == "no framework in this stack"


def test_framework_without_gpu_passes_on_cpu_but_overall_is_cpu_only():
    ad = FakeAdapter()
    doc = run_mod.run_probe(opts(only=GPU_AND_FW), ctx=make_ctx(adapter=ad), expect=STACK)
    fw = check(doc, "framework")
    assert fw["status"] == "pass", fw
    assert fw["data"]["device"] == "cpu" and fw["data"]["gpu_skipped"] is True
    subs = {s["name"]: s["status"] for s in fw["data"]["subchecks"]}
    assert subs == {"version": "pass", "cuda": "pass", "cudnn": "pass", "cpu_matmul": "pass",
                    "device": "skip", "arch": "skip", "gpu_matmul": "skip", "gpu_conv": "skip"}
    assert ad.gpu_calls == 0
    assert doc["overall"] == "cpu-only"


def test_framework_without_gpu_and_require_gpu_fails():
    doc = run_mod.run_probe(opts(require_gpu=True, only=["framework"]),
                      ctx=make_ctx(adapter=FakeAdapter()), expect=STACK)
    assert check(doc, "framework")["status"] == "fail"
    assert doc["overall"] == "fail"


def test_framework_on_gpu_passes():
    lib = FakeLib(devices=[("NVIDIA Fake H100", (9, 0), 80 << 30)])
    doc = run_mod.run_probe(opts(only=GPU_AND_FW), ctx=make_ctx(lib=lib, adapter=FakeAdapter()),
                      expect=STACK)
    fw = check(doc, "framework")
    assert fw["status"] == "pass", fw
    subs = {s["name"]: s["status"] for s in fw["data"]["subchecks"]}
    assert subs["arch"] == subs["gpu_matmul"] == subs["device"] == "pass"
    assert subs["gpu_conv"] == "skip"
    assert doc["overall"] == "pass"


def test_framework_missing_arch_fails_with_the_reason():
    lib = FakeLib(devices=[("NVIDIA Fake H100", (9, 0), 80 << 30)])
    ad = FakeAdapter(arch=["sm_86"])
    fw = check(run_mod.run_probe(opts(), ctx=make_ctx(lib=lib, adapter=ad), expect=STACK), "framework")
    assert fw["status"] == "fail"
    assert "no kernel image for sm_90 in this build: arch list is [sm_86]" in fw["reason"]


def test_framework_arch_ok_only_via_ptx_is_recorded():
    lib = FakeLib(devices=[("NVIDIA Fake H100", (9, 0), 80 << 30)])
    ad = FakeAdapter(arch=["sm_80", "compute_80"])
    fw = check(run_mod.run_probe(opts(), ctx=make_ctx(lib=lib, adapter=ad), expect=STACK), "framework")
    arch = [s for s in fw["data"]["subchecks"] if s["name"] == "arch"][0]
    assert arch["status"] == "pass" and arch["via_ptx"] is True


def test_expected_arch_list():
    assert arch_mod.expected_arch_list({}) is None
    assert arch_mod.expected_arch_list({"sass_archs": ["8.0", "9.0a"], "ptx_archs": ["9.0"]}) == [
        "sm_80", "sm_90a", "compute_90"]


@pytest.mark.parametrize("fw_name", ["jax", "onnxruntime"])
@pytest.mark.parametrize("sass, ptx, arch_status, fw_status", [(["8.0", "9.0"], [], "skip", "pass"),
                                                               (["8.0", "8.6"], [], "fail", "fail"),
                                                               (["8.0"], ["8.0"], "skip", "pass")])
def test_arch_falls_back_to_the_stacks_lists_when_the_framework_reports_none(fw_name, sass, ptx,
                                                                             arch_status, fw_status):
    """A framework that does not report its archs cannot confirm the GPU is covered: the stack's
    own lists may only predict a failure; a predicted fit is marked unverified, never a pass."""
    lib = FakeLib(devices=[("NVIDIA Fake H100", (9, 0), 80 << 30)])
    ad = FakeAdapter(name=fw_name, arch=None)
    stack = dict(STACK, framework=fw_name, sass_archs=sass, ptx_archs=ptx)
    fw = check(run_mod.run_probe(opts(only=GPU_AND_FW), ctx=make_ctx(lib=lib, adapter=ad),
                           expect=stack), "framework")
    arch = [s for s in fw["data"]["subchecks"] if s["name"] == "arch"][0]
    assert arch["status"] == arch_status
    assert "per the stack's sass_archs/ptx_archs" in arch["reason"]
    assert fw["status"] == fw_status
    if arch_status == "skip":
        assert arch["unverified"] is True and arch["reason"].startswith("unverified:")
        assert "arch" not in fw["reason"].split(":")[-1]  # not among the sub-checks that passed


def test_arch_not_reported_and_no_stack_lists_is_a_skip():
    lib = FakeLib(devices=[("NVIDIA Fake H100", (9, 0), 80 << 30)])
    fw = check(run_mod.run_probe(opts(only=GPU_AND_FW), ctx=make_ctx(lib=lib, adapter=FakeAdapter(arch=None)),
                           expect=STACK), "framework")
    arch = [s for s in fw["data"]["subchecks"] if s["name"] == "arch"][0]
    assert arch["status"] == "skip" and fw["status"] == "pass"


@pytest.mark.parametrize(
    "adapter_kw, expect_kw, needle",
    [
        ({"version": "2.6.0+cu128"}, {}, "torch version 2.6.0+cu128, the stack expects 2.7.1"),
        ({"cuda": "12.6"}, {}, "torch reports CUDA 12.6, the stack expects 12.8"),
        ({"cudnn": "9.1.0"}, {}, "torch reports cuDNN 9.1.0, the stack expects 9.7"),
        ({"cuda": None, "cudnn": None}, {}, "reports no CUDA"),
        ({}, {"cuda": None, "cudnn": None}, "built with CUDA 12.8 but the stack expects none"),
        ({"gpu_error": "CUDA driver too old"}, {}, "torch sees no GPU although the driver reports 1"),
        ({"bad_matmul": True}, {}, "GPU result differs from the CPU"),
        ({"import_error": ImportError("libcudnn.so.9: cannot open")}, {}, "cannot import torch"),
    ],
)
def test_framework_mismatches_fail(adapter_kw, expect_kw, needle):
    lib = FakeLib(devices=[("NVIDIA Fake H100", (9, 0), 80 << 30)])
    stack = dict(STACK, **expect_kw)
    doc = run_mod.run_probe(opts(), ctx=make_ctx(lib=lib, adapter=FakeAdapter(**adapter_kw)), expect=stack)
    fw = check(doc, "framework")
    assert fw["status"] == "fail", fw
    assert needle in fw["reason"]
    assert doc["overall"] == "fail"


def test_cpu_stack_on_a_gpu_host_is_cpu_only():
    lib = FakeLib(devices=[("NVIDIA Fake H100", (9, 0), 80 << 30)])
    ad = FakeAdapter(version="2.7.1+cpu", cuda=None, cudnn=None)
    doc = run_mod.run_probe(opts(), ctx=make_ctx(lib=lib, adapter=ad),
                      expect={"framework": "torch", "framework_version": "2.7.1", "cuda": None})
    fw = check(doc, "framework")
    assert fw["status"] == "pass" and fw["data"]["device"] == "cpu"
    assert doc["overall"] == "cpu-only"


def test_onnx_model_encoding_is_valid_protobuf():
    onnx = pytest.importorskip("onnx")
    m = onnx.load_from_string(onnx_proto_mod.onnx_model("MatMul", [("A", [2, 3]), ("B", [3, 4])], ("C", [2, 4])))
    onnx.checker.check_model(m)
    assert m.graph.node[0].op_type == "MatMul"


def test_pb_varint():
    assert onnx_proto_mod._pb_varint(0) == b"\x00"
    assert onnx_proto_mod._pb_varint(300) == b"\xac\x02"


# ------------------------------------------------------------------------------------------
# Bench (needs a GPU)
# ------------------------------------------------------------------------------------------


def test_bench_with_fake_gpu_measures_and_compares_with_the_datasheet(monkeypatch):
    def fake_matmul(n, iters):
        return {"fp32": {"tflops": 33.5, "ms": 1.0}, "fp16": {"tflops": 494.5, "ms": 1.0},
                "torch": "2.7.1"}

    monkeypatch.setattr(bench_mod, "bench_torch_matmul", fake_matmul)
    lib = FakeLib(devices=[("NVIDIA Fake H100", (9, 0), 80 << 30)])
    ctx = make_ctx(lib=lib, bench_bytes=1 << 20, bench_reps=3)
    stack = {"datasheet": {"bandwidth_gb_s": 2.097152, "fp32_tflops": 67, "fp16_tflops": 989}}
    doc = run_mod.run_probe(opts(bench=True, only=["bench"]), ctx=ctx, expect=stack)
    b = check(doc, "bench")
    assert b["status"] == "pass", b
    bench = doc["bench"]
    assert bench["device_bandwidth_gb_s"] == pytest.approx(2 * (1 << 20) / 1e6)  # read + write
    assert bench["h2d_gb_s"] == pytest.approx((1 << 20) / 1e6)
    assert bench["d2h_gb_s"] == pytest.approx((1 << 20) / 1e6)
    # the tensor-core loop: 84 SMs x 4 blocks x 256 threads; calibrated on 2000 iterations (1 ms
    # each launch here), then sized to the 100 ms target: 200,000 iterations in 1 ms (under the
    # cap that keeps every sum exact)
    assert lib.mma_launches == [(84 * 4 * 256, 10), (84 * 4 * 256, 2000), (84 * 4 * 256, 200000)]
    warps = 84 * 4 * 256 // 32
    mma_tflops = warps * 200000 * 8 * 4096 / 1e-3 / 1e12
    assert bench["fp16_mma_tflops"] == pytest.approx(mma_tflops)
    assert bench["method"]["mma"]["wrong_results"] == 0
    assert bench["fraction_of_datasheet"] == {"bandwidth_gb_s": 1.0, "fp32_tflops": 0.5,
                                              "fp16_tflops": 0.5, "fp16_mma": round(mma_tflops / 989, 4)}
    assert "FP16 tensor cores (mma.sync) %.1f TFLOP/s" % mma_tflops in b["reason"]
    assert lib.mem == {} and not lib.host and lib.retained == 0
    assert doc["overall"] == "pass"


@pytest.mark.parametrize("cc, runs", [((7, 5), False), ((8, 0), True), ((8, 6), True), ((9, 0), True),
                                      ((12, 0), True)])
def test_bench_tensor_core_loop_runs_from_sm80_and_says_why_not_below(cc, runs):
    lib = FakeLib(devices=[("NVIDIA Fake", cc, 16 << 30)])
    doc = run_mod.run_probe(opts(only=["bench"]), ctx=make_ctx(lib=lib, bench_bytes=4096), expect={})
    assert check(doc, "bench")["status"] == "pass"
    assert bool(lib.mma_launches) is runs
    if runs:
        assert doc["bench"]["fp16_mma_tflops"] > 0 and "fp16_mma_tflops" not in doc["bench"]["skipped"]
    else:
        assert doc["bench"]["fp16_mma_tflops"] is None
        assert doc["bench"]["skipped"]["fp16_mma_tflops"] == "mma.sync m16n8k16 needs sm_80 or later, this is sm_75"


def test_bench_tensor_core_loop_with_a_wrong_sum_fails_the_bench():
    lib = FakeLib(devices=[("NVIDIA Fake H100", (9, 0), 80 << 30)], corrupt=True)
    doc = run_mod.run_probe(opts(only=["bench"]), ctx=make_ctx(lib=lib, bench_bytes=4096), expect={})
    b = check(doc, "bench")
    assert b["status"] == "fail" and "tensor-core loop: 1 thread(s) summed a wrong result" in b["reason"]
    assert doc["overall"] == "fail"


def test_tensor_core_ptx_chains_independent_accumulators():
    ptx = tensorcore_mod.mma_ptx(chains=3)
    assert ".version 7.0" in ptx and ".target sm_80" in ptx
    mmas = [ln.strip() for ln in ptx.splitlines() if ln.strip().startswith("mma.sync")]
    assert len(mmas) == 3
    for k, ln in enumerate(mmas):
        d = "{%%d%d, %%d%d, %%d%d, %%d%d}" % tuple(range(4 * k, 4 * k + 4))
        # each chain accumulates into its own four registers, in place
        assert ln.startswith("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 " + d + ",")
        assert ln.endswith(", " + d + ";")
    assert ".reg .f32 %d<12>;" in ptx
    assert sum(1 for ln in ptx.splitlines() if ln.strip().startswith("add.f32 %s, %s, %d")) == 12
    assert tensorcore_mod.expected_sum(10, chains=3) == 120.0
    # the cap: every partial sum of a thread's accumulators is an exact fp32 integer
    cap = tensorcore_mod.MAX_ITERS
    assert tensorcore_mod.expected_sum(cap) < 2 ** 24 <= tensorcore_mod.expected_sum(cap + 1)


def test_tensor_core_loop_iterations_are_capped_where_sums_stay_exact(monkeypatch):
    lib = FakeLib(devices=[("NVIDIA Fake", (9, 0), 16 << 30)])
    monkeypatch.setattr(tensorcore_mod, "TARGET_MS", 1e9)
    res = tensorcore_mod.bench_mma_fp16(cuda_mod.Cuda(lib, path="/fake"), 0, (9, 0), 2, target_ms=1e9)
    assert lib.mma_launches[-1][1] == tensorcore_mod.MAX_ITERS == res["iters"]
    assert res["wrong_results"] == 0


def test_bench_matmul_without_a_framework_is_skipped_with_the_reason(monkeypatch):
    def no_torch(n, iters):
        raise bench_mod.NeedsFramework("torch is not importable here: No module named 'torch'")

    monkeypatch.setattr(bench_mod, "bench_torch_matmul", no_torch)
    lib = FakeLib(devices=[("NVIDIA Fake H100", (9, 0), 80 << 30)])
    doc = run_mod.run_probe(opts(only=["bench"]), ctx=make_ctx(lib=lib, bench_bytes=4096), expect={})
    b = check(doc, "bench")
    assert b["status"] == "pass"
    assert doc["bench"]["fp32_tflops"] is None
    assert doc["bench"]["skipped"]["fp16_tflops"].startswith("needs a framework")
    assert doc["bench"]["device_bandwidth_gb_s"] > 0


def test_bench_without_gpu_is_skipped_and_never_pass():
    doc = run_mod.run_probe(opts(bench=True), ctx=make_ctx(), expect={})
    b = check(doc, "bench")
    assert b["status"] == "skip" and b["data"]["gpu_skipped"]
    assert doc["bench"] is None and doc["overall"] == "cpu-only"


# ------------------------------------------------------------------------------------------
# Command line and the document
# ------------------------------------------------------------------------------------------


def test_parse_args():
    o = cli_mod.parse_args(["--require-gpu", "--timeout", "5", "--only", "kernel,driver"])
    assert o.require_gpu and o.timeout == 5.0 and o.only == ["kernel", "driver"] and not o.bench
    assert cli_mod.parse_args(["--only", "bench"]).bench
    assert cli_mod.parse_args([]).expect_path == "/opt/envman/stack.json"
    for bad in (["--bogus"], ["--only", "kernel,nope"], ["--timeout", "-1"], ["--timeout", "x"],
                ["--only", ""]):
        with pytest.raises(expect_mod.UsageError):
            cli_mod.parse_args(bad)


def test_load_expect(tmp_path):
    assert expect_mod.load_expect(None) == ({}, False)
    for missing in (tmp_path / "missing.json", tmp_path):  # absent, or a directory
        with pytest.raises(expect_mod.UsageError, match="expectations are missing"):
            expect_mod.load_expect(str(missing))
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"framework": "torch", "framework_version": "2.7.1", "cuda": "12.8",
                             "sass_archs": ["8.0"], "ptx_archs": ["9.0"]}))
    assert expect_mod.load_expect(str(f))[0]["cuda"] == "12.8"
    for bad in ("{not json", "[]", '{"framework": "mxnet"}', '{"sass_archs": "8.0"}'):
        f.write_text(bad)
        with pytest.raises(expect_mod.UsageError):
            expect_mod.load_expect(str(f))


DOC_KEYS = {"probe_version", "overall", "reason", "python", "host", "gpus", "driver_version",
            "checks", "bench", "expect", "seconds"}


def test_document_contract_in_process(tmp_path):
    import io

    buf = io.StringIO()
    code = cli_mod.main(["--no-expect"], out=buf, ctx=make_ctx())
    doc = parse_output(buf.getvalue())
    assert code == 0
    assert set(doc) == DOC_KEYS
    assert doc["probe_version"] == 1
    assert doc["host"]["hostname"]
    for c in doc["checks"]:
        assert set(c) == {"name", "status", "reason", "seconds", "data"}
        assert c["status"] in ("pass", "fail", "skip")
        assert isinstance(c["seconds"], float)
    assert [c["name"] for c in doc["checks"]] == ["driver", "runtime", "kernel", "framework"]


def test_script_runs_here_and_prints_cpu_only_json(tmp_path):
    r = run_script(["--no-expect"])
    doc = parse_output(r.stdout)
    assert len([ln for ln in r.stdout.splitlines() if ln.strip()]) == 1
    assert set(doc) == DOC_KEYS
    if host_has_gpu():
        pytest.skip("this machine has a GPU: tests/gpu covers it")
    assert doc["overall"] == "cpu-only", doc["reason"]
    assert r.returncode == 0
    assert check(doc, "driver")["status"] == "skip"


def test_script_require_gpu_without_gpu_exits_1(tmp_path):
    if host_has_gpu():
        pytest.skip("this machine has a GPU")
    r = run_script(["--require-gpu", "--no-expect"])
    doc = parse_output(r.stdout)
    assert r.returncode == 1
    assert doc["overall"] == "fail"


@pytest.mark.parametrize("args", [["--bogus"], ["--only", "nope"], ["--timeout", "0"]])
def test_script_bad_usage_exits_2(args):
    r = run_script(args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "error" in r.stderr
    doc = parse_output(r.stdout)
    assert doc["overall"] == "fail" and doc["reason"].startswith("bad usage")


def test_script_bad_expect_file_exits_2(tmp_path):
    f = tmp_path / "stack.json"
    f.write_text("{oops")
    r = run_script(["--expect", str(f)])
    assert r.returncode == 2
    assert "cannot read JSON" in parse_output(r.stdout)["reason"]


def test_script_help_exits_0():
    r = run_script(["--help"])
    assert r.returncode == 0 and "--require-gpu" in r.stdout


FAKE_TORCH = '''
import os, sys
print("fake torch: chatter on sys.stdout")
os.write(1, b"fake torch: chatter on fd 1\\n")
__version__ = "2.7.1+cpu"
class version:
    cuda = None
class _Cudnn:
    @staticmethod
    def is_available():
        return False
class backends:
    cudnn = _Cudnn
class cuda:
    @staticmethod
    def is_available():
        return False
float32 = "float32"
class _T:
    def __init__(self, rows):
        self.rows = rows
    def tolist(self):
        return self.rows
def tensor(rows, dtype=None):
    return _T([[float(v) for v in r] for r in rows])
def matmul(a, b):
    cols = list(zip(*b.rows))
    return _T([[sum(x * y for x, y in zip(r, c)) for c in cols] for r in a.rows])
'''


def _fake_torch_env(tmp_path):
    pkg = tmp_path / "fake" / "torch"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(FAKE_TORCH)
    return {"PYTHONPATH": str(tmp_path / "fake")}


def test_script_framework_cpu_path_and_stdout_isolation(tmp_path):
    env = _fake_torch_env(tmp_path)
    f = tmp_path / "stack.json"
    f.write_text(json.dumps({"framework": "torch", "framework_version": "2.7.1", "cuda": None}))
    r = run_script(["--expect", str(f), "--only", "framework"], env=env)
    # the framework's chatter went to stderr; stdout holds the document alone
    assert [ln for ln in r.stdout.splitlines() if ln.strip()] == [r.stdout.strip()]
    assert "chatter on sys.stdout" in r.stderr and "chatter on fd 1" in r.stderr
    doc = parse_output(r.stdout)
    fw = check(doc, "framework")
    assert fw["status"] == "pass", fw
    assert fw["data"]["device"] == "cpu"
    assert fw["data"]["cpu_matmul"]["ok"]
    # a CPU stack ("cuda": null) that passes its CPU checks is a pass, GPU or not
    assert doc["overall"] == "pass" and r.returncode == 0 and "CPU stack" in doc["reason"]


def test_script_framework_version_mismatch_exits_1(tmp_path):
    env = _fake_torch_env(tmp_path)
    f = tmp_path / "stack.json"
    f.write_text(json.dumps({"framework": "torch", "framework_version": "2.6.0", "cuda": None}))
    r = run_script(["--expect", str(f), "--only", "framework"], env=env)
    doc = parse_output(r.stdout)
    assert r.returncode == 1 and doc["overall"] == "fail"
    assert "the stack expects 2.6.0" in check(doc, "framework")["reason"]


def test_parse_output_errors():
    with pytest.raises(ValueError):
        parse_output("")
    with pytest.raises(ValueError):
        parse_output("hello\nnot json")
    with pytest.raises(ValueError):
        parse_output('{"a": 1}')
    assert parse_output('noise\n{"overall": "pass", "checks": []}\n')["overall"] == "pass"


def test_recorded_gpu_fixture_matches_the_contract():
    rec = Path(__file__).resolve().parents[2] / "gpu" / "recorded" / "h100_probe.json"
    if not rec.exists():
        pytest.skip("no recorded GPU run")
    doc = json.loads(rec.read_text())
    assert set(doc) == DOC_KEYS
    assert doc["overall"] == "pass"
    assert doc["gpus"] and doc["gpus"][0]["cc"] == "9.0"
    assert check(doc, "kernel")["data"]["devices"][0]["max_abs_error"] == 0.0
    assert doc["bench"]["device_bandwidth_gb_s"] > 0


# --- expectations are evidence: their absence is never a pass -----------------------------


def test_missing_expectations_file_fails_the_probe(tmp_path):
    r = run_script(["--expect", str(tmp_path / "none.json")])
    assert r.returncode == EXIT_USAGE, r.stderr
    doc = parse_output(r.stdout)
    assert doc["overall"] == "fail"
    assert "expectations are missing" in doc["reason"]
    assert doc["checks"] == []


def test_default_expectations_path_is_required(tmp_path):
    if os.path.exists(contract_mod.DEFAULT_EXPECT):
        pytest.skip("this machine has an envman stack file at the default path")
    r = run_script([])
    assert r.returncode == EXIT_USAGE
    assert "expectations are missing" in parse_output(r.stdout)["reason"]


def test_no_expect_is_an_explicit_state_in_the_document():
    r = run_script(["--no-expect", "--only", "runtime"])
    doc = parse_output(r.stdout)
    assert doc["expect"] == {"path": None, "found": False, "stack": {}}


def test_no_expect_and_expect_exclude_each_other(tmp_path):
    f = tmp_path / "s.json"
    f.write_text("{}")
    r = run_script(["--no-expect", "--expect", str(f)])
    assert r.returncode == EXIT_USAGE and "exclude each other" in r.stderr


def test_found_expectations_are_reported(tmp_path):
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"name": "x", "framework": None, "cuda": None}))
    doc = parse_output(run_script(["--expect", str(f), "--only", "runtime"]).stdout)
    assert doc["expect"]["found"] is True and doc["expect"]["path"] == str(f)
    assert doc["expect"]["stack"]["name"] == "x"


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


def test_cuda_release_frees_what_was_allocated_and_ignores_errors():
    class Lib(FakeLib):
        def cuMemFree_v2(self, h):
            return 1 if h not in self.mem else FakeLib.cuMemFree_v2(self, h)  # CUDA_ERROR_INVALID_VALUE

    lib = Lib()
    cuda = cuda_mod.Cuda(lib)
    a, b = cuda.mem_alloc(64), cuda.mem_alloc(64)
    cuda.release(a, None, 0, b, a)  # a second free of ``a`` fails in the driver: ignored
    assert lib.mem == {}
    assert cuda.error_name(100) == "CUDA_ERROR_NO_DEVICE" and cuda.error_string(100) is None


def test_jax_and_onnxruntime_build_versions_without_the_frameworks():
    from envman.probe.app.frameworks.jax_adapter import JaxAdapter
    from envman.probe.app.frameworks.onnxruntime_adapter import OnnxruntimeAdapter

    class Versions:
        def cuda_runtime_get_version(self):
            return 12040

        def cudnn_get_version(self):
            raise RuntimeError("no cuDNN query in this jaxlib")

    class FakeJax:
        def __init__(self, gpus):
            self.gpus = gpus

        def devices(self, platform):
            return self.gpus

    jax = JaxAdapter()
    jax.module, jax._versions = FakeJax(["gpu:0"]), Versions()
    assert jax.cuda_version() == "12.4"
    with pytest.raises(base_mod.NotReported, match="jax does not report its cuDNN version"):
        jax.cudnn_version()
    jax.module, jax._versions = FakeJax([]), None  # a CPU jax: no CUDA, no cuDNN
    assert jax.cuda_version() is None and jax.cudnn_version() is None

    class Info:
        cuda_version = "12.2"
        cudnn_version = ""

    class FakeOrt:
        def __init__(self, providers):
            self.providers = providers

        def get_available_providers(self):
            return self.providers

    ort = OnnxruntimeAdapter()
    ort.module, ort.bpi = FakeOrt(["CUDAExecutionProvider", "CPUExecutionProvider"]), Info
    assert ort.cuda_version() == "12.2"
    with pytest.raises(base_mod.NotReported, match="onnxruntime does not report its cuDNN version"):
        ort.cudnn_version()
    ort.module, ort.bpi = FakeOrt(["CPUExecutionProvider"]), None
    assert ort.cuda_version() is None and ort.cudnn_version() is None
