"""Time resolving every matrix row and ``envman --help`` start-up; prints the figures.

    python benchmarks/bench_resolve.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

from envman.matrix.load import load_matrix
from envman.stack.resolve import resolve, resolve_row


def main() -> int:
    t0 = time.perf_counter()
    m = load_matrix()
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    stacks = [resolve_row(m, b) for b in m.builds]
    rows_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for s in stacks:
        resolve(m, s.name)
    names_s = time.perf_counter() - t0
    helps = []
    for _ in range(7):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "envman", "--help"], check=True, capture_output=True)
        helps.append(time.perf_counter() - t)
    print(f"matrix load: {load_s:.3f} s ({len(m.builds)} builds, {len(m.images)} images)")
    print(f"resolve every row: {rows_s:.3f} s total, {rows_s / max(1, len(stacks)) * 1e3:.2f} ms/row (target < 1 s total)")
    print(f"resolve every canonical name: {names_s:.3f} s total")
    print(f"envman --help: median {statistics.median(helps):.3f} s, best {min(helps):.3f} s (target < 0.25 s)")
    return 0 if rows_s < 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
