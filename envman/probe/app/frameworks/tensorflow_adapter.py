"""TensorFlow behind the framework check's calls."""

import os
import re

from .base import Adapter, NotReported, conv_operands, matmul_operands, np_compare


class TensorflowAdapter(Adapter):
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
        a, b = matmul_operands(np, n)
        with tf.device("/CPU:0"):
            ref = tf.matmul(a, b).numpy()
        with tf.device("/GPU:0"):
            got = tf.matmul(a, b).numpy()
        r = np_compare(np, got, ref, rtol)
        r["shape"] = [n, n]
        try:
            r["tf32"] = bool(tf.config.experimental.tensor_float_32_execution_enabled())
        except Exception:  # noqa: BLE001
            pass
        return r

    def gpu_conv(self, rtol):
        import numpy as np
        tf = self.module
        x, w = conv_operands(np, channels_last=True)
        with tf.device("/CPU:0"):
            ref = tf.nn.conv2d(x, w, strides=1, padding="SAME").numpy()
        with tf.device("/GPU:0"):
            got = tf.nn.conv2d(x, w, strides=1, padding="SAME").numpy()
        r = np_compare(np, got, ref, rtol)
        r["cudnn"] = True
        return r
