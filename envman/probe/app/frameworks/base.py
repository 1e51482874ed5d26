"""What the framework check asks of a framework, and a numpy comparison the adapters share."""

class NotReported(Exception):
    """The framework does not tell this (a sub-check becomes ``skip``)."""


class Adapter(object):
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


def np_compare(np, got, ref, rtol):
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    scale = float(np.max(np.abs(ref))) or 1.0
    atol = rtol * scale
    diff = np.abs(got - ref)
    bad = int(np.count_nonzero(~(diff <= atol + rtol * np.abs(ref))))
    max_abs = float(np.max(diff)) if diff.size else 0.0
    return {"ok": bad == 0, "n": int(ref.size), "mismatches": bad, "max_abs_error": max_abs,
            "max_rel_error": max_abs / scale, "rtol": rtol, "atol": atol}


def matmul_operands(np, n):
    """The GPU matmul sub-check's two n x n float32 matrices (the same in every framework)."""
    rs = np.random.RandomState(0)
    return rs.standard_normal((n, n)).astype(np.float32), rs.standard_normal((n, n)).astype(np.float32)


def conv_operands(np, channels_last=False):
    """The conv sub-check's input (8 images, 16 channels, 32 x 32) and weights (32 filters of
    3 x 3), float32: NCHW and OIHW, or NHWC and HWIO with ``channels_last``."""
    rs = np.random.RandomState(1)
    x_shape, w_shape = ((8, 32, 32, 16), (3, 3, 16, 32)) if channels_last else ((8, 16, 32, 32), (32, 16, 3, 3))
    return rs.standard_normal(x_shape).astype(np.float32), rs.standard_normal(w_shape).astype(np.float32)
