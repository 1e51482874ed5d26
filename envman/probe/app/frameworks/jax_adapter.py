"""JAX behind the framework check's calls."""

import os

from ..versions import format_cuda_int, format_cudnn_int
from .base import Adapter, NotReported, conv_operands, matmul_operands, np_compare


class JaxAdapter(Adapter):
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

    def _build_version(self, what, query, fmt):
        """``fmt`` of what jaxlib's ``query`` answers; None for a jax without GPUs, else NotReported."""
        if self._versions is not None:
            try:
                return fmt(getattr(self._versions, query)())
            except Exception:  # noqa: BLE001
                pass
        if not self._gpu_devices():
            return None
        raise NotReported("jax does not report its %s version" % what)

    def cuda_version(self):
        return self._build_version("CUDA", "cuda_runtime_get_version", format_cuda_int)

    def cudnn_version(self):
        return self._build_version("cuDNN", "cudnn_get_version", format_cudnn_int)

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
        a, b = matmul_operands(np, n)
        cpu, gpu = self._cpu(), self._gpu_devices()[0]
        ref = np.asarray(jax.numpy.matmul(jax.device_put(a, cpu), jax.device_put(b, cpu)))
        got = np.asarray(jax.numpy.matmul(jax.device_put(a, gpu), jax.device_put(b, gpu)))
        r = np_compare(np, got, ref, rtol)
        r["shape"] = [n, n]
        return r

    def gpu_conv(self, rtol):
        import numpy as np
        jax = self.module
        x, w = conv_operands(np)
        cpu, gpu = self._cpu(), self._gpu_devices()[0]
        conv = jax.lax.conv_general_dilated
        ref = np.asarray(conv(jax.device_put(x, cpu), jax.device_put(w, cpu), (1, 1), "SAME"))
        got = np.asarray(conv(jax.device_put(x, gpu), jax.device_put(w, gpu), (1, 1), "SAME"))
        r = np_compare(np, got, ref, rtol)
        r["cudnn"] = True
        return r
