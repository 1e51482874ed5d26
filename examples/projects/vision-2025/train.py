"""A DataLoader with workers: the kind of job Docker's default 64 MB /dev/shm breaks."""

import torch
from torch.utils.data import DataLoader, TensorDataset

data = TensorDataset(torch.randn(4096, 3, 64, 64), torch.randint(0, 10, (4096,)))
loader = DataLoader(data, batch_size=256, num_workers=4)
device = "cuda" if torch.cuda.is_available() else "cpu"
seen = 0
for x, y in loader:
    x = x.to(device)
    seen += len(y)
print(f"{seen} samples through {loader.num_workers} workers' shared memory, on {device}")
