"""Fakes for the in-container probe's unit tests (``tests/unit/probe/app/``), all without a GPU.

The driver API is replaced by ``FakeLib`` (a pure-Python libcuda that even runs the saxpy
kernel), frameworks by ``FakeAdapter``; ``run_script`` runs the probe for real, as the
``probe.pyz`` images carry, in a subprocess on this (GPU-less) machine.
"""

from __future__ import annotations

import ctypes
import os
import re
import struct
import subprocess
import sys

from envman.probe.app import cli as cli_mod
from envman.probe.app import context as context_mod
from envman.probe.app import cuda as cuda_mod
from envman.probe.app import frameworks as frameworks_mod
from envman.probe.app import kernel as kernel_mod
from envman.probe.app import numeric as numeric_mod
from envman.probe.app import tensorcore as tensorcore_mod
from envman.probe.app.frameworks import base as base_mod
from tests.support.probe_doc import probe_pyz


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


DOC_KEYS = {"probe_version", "overall", "reason", "python", "host", "gpus", "driver_version",
            "checks", "bench", "expect", "seconds"}
