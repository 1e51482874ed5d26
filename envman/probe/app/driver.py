"""The driver check: libcuda loads, cuInit succeeds, and the GPUs it sees."""

import re

from .context import no_gpu_result
from .contract import FAIL, PASS
from .cuda import (CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, CUDA_ERROR_NO_DEVICE, CUDA_ERROR_STUB_LIBRARY,
                   CudaError, CudaUnavailable)
from .versions import format_cuda_int


NO_DEVICE_REASON = "cuInit: CUDA_ERROR_NO_DEVICE: the driver sees no GPU (run with --gpus)"
STUB_REASON = (
    "cuInit: CUDA_ERROR_STUB_LIBRARY: the loaded libcuda is the toolkit's stub, not the driver "
    "(no NVIDIA driver mounted; run with --gpus, and keep lib64/stubs off LD_LIBRARY_PATH)"
)


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
