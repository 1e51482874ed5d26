"""ONNX Runtime behind the framework check's calls."""

from .base import Adapter, NotReported, conv_operands, matmul_operands, np_compare
from .onnx_proto import onnx_model


class OnnxruntimeAdapter(Adapter):
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

    def _build_version(self, what, key):
        """The build info's ``key``; None for a build without CUDA, else NotReported."""
        v = getattr(self.bpi, key, None)
        if v:
            return str(v)
        if "CUDAExecutionProvider" not in self.module.get_available_providers():
            return None
        raise NotReported("onnxruntime does not report its %s version" % what)

    def cuda_version(self):
        return self._build_version("CUDA", "cuda_version")

    def cudnn_version(self):
        return self._build_version("cuDNN", "cudnn_version")

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
        a, b = matmul_operands(np, n)
        ref = self._run("MatMul", [a, b], [n, n], False)
        got = self._run("MatMul", [a, b], [n, n], True)
        r = np_compare(np, got, ref, rtol)
        r["shape"] = [n, n]
        return r

    def gpu_conv(self, rtol):
        import numpy as np
        x, w = conv_operands(np)
        ref = self._run("Conv", [x, w], [8, 32, 30, 30], False)
        got = self._run("Conv", [x, w], [8, 32, 30, 30], True)
        r = np_compare(np, got, ref, rtol)
        r["cudnn"] = True
        return r
