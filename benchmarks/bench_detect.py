"""Time ``envman project detect`` on repositories of growing size against the floor: reading the
same files and nothing else, in the same rounds.

    python benchmarks/bench_detect.py [--json PATH]

Each repository is made here: a requirements file, a conda file, a README and N Python files of
a few hundred lines that import the framework (N = 50, 500, 2,000; jax's own repository has about
1,000). The floor opens and reads every file detection reads (the ratio says what the rules cost
beyond the reading; a small repository's floor is a few cached milliseconds, so its ratio says
little). Goal: under 2 s for 2,000 files (the matrix is loaded once, as the CLI does).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Report, interleaved, json_option  # noqa: E402

from envman.matrix.load import load_matrix  # noqa: E402
from envman.project.detect import detect  # noqa: E402
from envman.project.detect.repo import CODE_LIMIT, Repository  # noqa: E402


def make_repo(root: Path, files: int) -> None:
    (root / "requirements.txt").write_text("torch==1.7.1\ntorchvision==0.8.2\nnumpy>=1.19\ntensorflow==2.4.0\n")
    (root / "environment.yml").write_text("dependencies:\n  - python=3.8\n  - cudatoolkit=11.0\n  - pip:\n    - einops\n")
    (root / "README.md").write_text("# A paper\n\nTested with PyTorch 1.7.1 and CUDA 11.0.\n" * 50)
    body = "import torch\nimport torch.nn as nn\n\n" + "def f(x):\n    return x * 2\n\n" * 150
    for i in range(files):
        sub = root / f"pkg{i % 20}"
        sub.mkdir(exist_ok=True)
        (sub / f"m{i}.py").write_text(body)


def read_all(root: Path) -> float:
    """The floor: open and read what detection reads (manifests whole, Python files' heads)."""
    t = time.perf_counter()
    repo = Repository.scan(root)
    for rel in repo.files:
        repo.head(rel, CODE_LIMIT) if rel.endswith(".py") else repo.read(rel)
    return time.perf_counter() - t


def main() -> int:
    _, out = json_option(sys.argv[1:])
    report = Report("detect")
    matrix = load_matrix()
    for files in (50, 500, 2000):
        root = Path(tempfile.mkdtemp(prefix="envman-bench-detect-"))
        try:
            make_repo(root, files)

            def run() -> float:
                t = time.perf_counter()
                detect(root, matrix)
                return time.perf_counter() - t

            times = interleaved({"detect": run, "floor": lambda: read_all(root)}, n=5)
            report.ratio(f"detect / reading its files, {files} Python files", times["detect"], times["floor"], None)
            report.seconds(f"detect, {files} Python files", times["detect"], 2.0 if files == 2000 else None)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return report.save(out)


if __name__ == "__main__":
    raise SystemExit(main())
