"""Prints what the run sees: the stack's torch and CUDA, and the GPU when one was given."""

import os

import torch

print("torch", torch.__version__, "built for CUDA", torch.version.cuda)
print("container CUDA_VERSION", os.environ.get("CUDA_VERSION"))
if torch.cuda.is_available():
    print("GPU", torch.cuda.get_device_name(0), "capability", torch.cuda.get_device_capability(0))
    x = torch.randn(1024, 1024, device="cuda")
    print("matmul ok:", bool(torch.isfinite(x @ x).all()))
else:
    print("no GPU in this run (envman run paper-2023 --no-gpu)")
