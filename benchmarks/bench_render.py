"""Time rendering every matrix row (Dockerfile + context + render hash); prints the figures.

    python benchmarks/bench_render.py

Renders are in memory (no writing) with default options and the real probe (probe.pyz, built once per process), the way
``envman render --all`` and ``envman ci`` render; a second pass shows the warm figure (Jinja's
template cache and the matrix are loaded once per process). Writing every context to disk is
timed separately.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from envman.matrix.load import load_matrix
from envman.render.dockerfile import render_stack
from envman.render.options import RenderOptions
from envman.stack.resolve import resolve_row


def main() -> int:
    m = load_matrix()
    stacks = [resolve_row(m, b) for b in m.builds]
    options = RenderOptions()
    passes = []
    per_row: list[float] = []
    for _ in range(3):
        t0 = time.perf_counter()
        for s in stacks:
            t = time.perf_counter()
            render_stack(s, options)
            per_row.append(time.perf_counter() - t)
        passes.append(time.perf_counter() - t0)
    n = len(stacks)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        for s in stacks:
            render_stack(s, options).write(Path(tmp) / s.name)
        write_s = time.perf_counter() - t0
    print(f"render every row: {n} rows")
    print(f"  first pass {passes[0]:.3f} s total, {passes[0] / n * 1e3:.2f} ms/row (includes loading the template)")
    print(f"  warm passes {min(passes[1:]):.3f} s total, {min(passes[1:]) / n * 1e3:.2f} ms/row")
    print(f"  per row: median {statistics.median(per_row) * 1e3:.2f} ms, max {max(per_row) * 1e3:.2f} ms")
    print(f"render and write every context: {write_s:.3f} s total, {write_s / n * 1e3:.2f} ms/row")
    return 0 if passes[0] < 5.0 else 1


if __name__ == "__main__":
    sys.exit(main())
