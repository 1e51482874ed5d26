"""The CUDA driver API (libcuda) through ctypes: a thin wrapper that raises ``CudaError``."""

import ctypes
import os


NO_LIBCUDA_REASON = (
    "libcuda.so.1 not found: no NVIDIA driver visible in this container (run with --gpus)"
)


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

    def _describe(self, fname, code):
        """What ``cuGetErrorName`` / ``cuGetErrorString`` (``fname``) say of ``code``, or None."""
        if self.has(fname):
            s = ctypes.c_char_p()
            try:
                if getattr(self.lib, fname)(code, ctypes.byref(s)) == 0 and s.value:
                    return s.value.decode("ascii", "replace")
            except Exception:  # noqa: BLE001
                pass
        return None

    def error_name(self, code):
        return self._describe("cuGetErrorName", code) or CUDA_ERROR_NAMES.get(code, "CUDA_ERROR_%s" % (code,))

    def error_string(self, code):
        return self._describe("cuGetErrorString", code)

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

    def _out(self, ctype, names, *args):
        """Call ``names`` with a pointer to a fresh ``ctype`` and then ``args``: its value after."""
        out = ctype()
        self.call(names, ctypes.byref(out), *args)
        return out.value

    def driver_version(self):
        return self._out(ctypes.c_int, "cuDriverGetVersion")

    def device_count(self):
        return self._out(ctypes.c_int, "cuDeviceGetCount")

    def device(self, ordinal):
        return self._out(ctypes.c_int, "cuDeviceGet", ordinal)

    def device_name(self, dev):
        buf = ctypes.create_string_buffer(256)
        self.call("cuDeviceGetName", buf, 256, dev)
        return buf.value.decode("utf-8", "replace")

    def attribute(self, attr, dev):
        return self._out(ctypes.c_int, "cuDeviceGetAttribute", attr, dev)

    def compute_capability(self, dev):
        return (self.attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
                self.attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))

    def total_mem(self, dev):
        return self._out(ctypes.c_size_t, "cuDeviceTotalMem_v2", dev)

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
        if not isinstance(name, bytes):
            name = name.encode("ascii")
        return self._out(ctypes.c_void_p, "cuModuleGetFunction", module, name)

    def module_unload(self, module):
        self.call("cuModuleUnload", module)

    def mem_alloc(self, nbytes):
        return self._out(ctypes.c_uint64, "cuMemAlloc_v2", nbytes)

    def mem_free(self, dptr):
        self.call("cuMemFree_v2", dptr)

    def release(self, *dptrs):
        """Free each non-null device pointer, ignoring errors (a check's clean-up)."""
        for d in dptrs:
            if d:
                try:
                    self.mem_free(d)
                except CudaError:
                    pass

    def memcpy_htod(self, dptr, host_addr, nbytes):
        self.call("cuMemcpyHtoD_v2", dptr, host_addr, nbytes)

    def memcpy_dtoh(self, host_addr, dptr, nbytes):
        self.call("cuMemcpyDtoH_v2", host_addr, dptr, nbytes)

    def memcpy_dtod(self, dst, src, nbytes):
        self.call("cuMemcpyDtoD_v2", dst, src, nbytes)

    def memset_d8(self, dptr, value, nbytes):
        self.call("cuMemsetD8_v2", dptr, value, nbytes)

    def mem_alloc_host(self, nbytes):
        return self._out(ctypes.c_void_p, "cuMemAllocHost_v2", nbytes)

    def mem_free_host(self, addr):
        self.call("cuMemFreeHost", addr)

    def launch(self, func, grid, block, params, shared=0, stream=None):
        """``params``: a list of ctypes scalars, passed by address as the kernel's arguments."""
        ptrs = (ctypes.c_void_p * len(params))(*[ctypes.addressof(p) for p in params])
        self.call("cuLaunchKernel", func, grid[0], grid[1], grid[2], block[0], block[1],
                  block[2], shared, stream, ptrs, None)

    def event_create(self):
        return self._out(ctypes.c_void_p, "cuEventCreate", 0)

    def event_record(self, ev, stream=None):
        self.call("cuEventRecord", ev, stream)

    def event_synchronize(self, ev):
        self.call("cuEventSynchronize", ev)

    def event_elapsed_ms(self, start, end):
        return self._out(ctypes.c_float, ("cuEventElapsedTime_v2", "cuEventElapsedTime"), start, end)

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
