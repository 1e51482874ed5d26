"""One adapter per framework, behind the few calls the framework check makes."""

from .jax_adapter import JaxAdapter
from .onnxruntime_adapter import OnnxruntimeAdapter
from .tensorflow_adapter import TensorflowAdapter
from .torch_adapter import TorchAdapter


ADAPTERS = {"torch": TorchAdapter, "tensorflow": TensorflowAdapter, "jax": JaxAdapter,
            "onnxruntime": OnnxruntimeAdapter}


def make_adapter(name):
    cls = ADAPTERS.get(name)
    return cls() if cls else None
