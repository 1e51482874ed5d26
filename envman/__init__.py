"""envman: containerised multi-CUDA environment manager."""

__version__ = "0.1.0"
