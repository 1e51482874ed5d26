"""What reading a wheel's metadata lazily costs against the alternative, downloading the wheel:
bytes and requests per wheel for the newest release of each framework on PyPI (range requests on
the zip directory, or PEP 658 where served), as a ratio of the wheel's size.

    python benchmarks/bench_matrix_update.py [--index URL]
"""

from __future__ import annotations

import argparse
import time

from envman.matrix.index import PYPI_SIMPLE, Http, fetch_project, read_wheel_metadata
from envman.matrix.update import releases, representative, wheels

PROJECTS = ("torch", "jax-cuda13-plugin", "onnxruntime-gpu", "tensorflow")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--index", default=PYPI_SIMPLE)
    args = ap.parse_args()
    total_read = total_size = 0
    for project in PROJECTS:
        http = Http(timeout=30)
        page = fetch_project(http, args.index, project)
        rels = releases(wheels(page.files))
        v = max(rels)
        rep = representative(rels[v], "linux/amd64")
        if rep is None or not rep.file.size:
            print(f"{project} {v}: no Linux x86_64 wheel with a size on the index")
            continue
        before_req, before_bytes = http.requests, http.bytes_read
        t0 = time.perf_counter()
        md = read_wheel_metadata(http, rep.file)
        secs = time.perf_counter() - t0
        read = http.bytes_read - before_bytes
        total_read += read
        total_size += rep.file.size
        print(f"{project} {v} ({md.how}): {http.requests - before_req} requests, {read / 1e6:.2f} MB of a "
              f"{rep.file.size / 1e6:.1f} MB wheel ({read / rep.file.size:.4f}x), {secs:.2f} s")
    if total_size:
        print(f"all: {total_read / 1e6:.2f} MB read for {total_size / 1e6:.1f} MB of wheels ({total_read / total_size:.4f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
