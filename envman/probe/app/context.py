"""What the checks share: expectations, options, hooks for the tests, and what the driver check found."""

from .contract import FAIL, SKIP
from .cuda import Cuda
from .frameworks import make_adapter


DEFAULT_TIMEOUT = 120.0


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
