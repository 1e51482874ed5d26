"""Time loading the matrix and resolving every matrix row and every stack name; prints the figures.

    python benchmarks/bench_resolve.py [--json PATH]

Goals: every row resolved in under 1 s in all; resolving every name linear in the rows (see
``bench_state.py`` for 1x to 16x rows). ``envman --help`` start-up is in ``bench_cli.py``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Report, json_option  # noqa: E402

from envman.matrix.load import load_matrix  # noqa: E402
from envman.stack.resolve import resolve, resolve_row  # noqa: E402


def main() -> int:
    _, out = json_option(sys.argv[1:])
    report = Report("resolve")
    loads, rows, names = [], [], []
    for _ in range(5):
        t0 = time.perf_counter()
        m = load_matrix()
        loads.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        stacks = [resolve_row(m, b) for b in m.builds]
        rows.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for s in stacks:
            resolve(m, s.name)
        names.append(time.perf_counter() - t0)
    detail = f"({len(m.builds)} builds, {len(m.images)} images)"
    report.seconds("load the shipped matrix (first load in the process)", loads[:1], None, detail)
    report.seconds("resolve every row", rows, 1.0, detail)
    report.seconds("resolve every canonical stack name", names, 1.0, detail)
    return report.save(out)


if __name__ == "__main__":
    sys.exit(main())
