"""PyTorch behind the framework check's calls."""

from ..versions import format_cudnn_int
from .base import Adapter, NotReported


class TorchAdapter(Adapter):
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
