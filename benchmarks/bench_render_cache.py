"""A project image's tag on the uncached ``envman run`` path, with and without the render cache.

    python benchmarks/bench_render_cache.py                  # this tree: cache hit vs miss
    python benchmarks/bench_render_cache.py --ref-tree DIR   # and a checkout of another commit (repeatable)

Every sample is a fresh Python process (as every GPU ``envman run`` is): it loads a project with
apt packages and requirements (untimed: the run path has done that already), then times
``project_image_ref`` (plan, Dockerfile, context, hash), the lazy imports inside it included.
Three ways, interleaved:

* ``hit``: this tree, the render cache holding this project's Dockerfile (what every run after the
  first gets);
* ``miss``: this tree, an empty cache folder each time (a first run, or one after an upgrade or a
  project change: render plus the cache write);
* ``ref:NAME``: the same call in each tree given by ``--ref-tree`` (e.g. a worktree of the commit
  before project Dockerfiles went through the templates), with its own imports.

Bytecode caches are written and used (as in a pip install), even where PYTHONDONTWRITEBYTECODE is
set. Prints the median and the ratios; the process's wall time is printed beside for scale.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = """
import sys, time, json
t0 = time.perf_counter()
from pathlib import Path
from envman.project.file import load_project
project = load_project(Path(sys.argv[1]))
t1 = time.perf_counter()
from envman.project.image import project_image_ref
ref = project_image_ref(project, "torch-2.4.1-cuda12.4-py3.10", "sha256:" + "c" * 64)
t2 = time.perf_counter()
import envman
print(json.dumps({"ref": ref, "ms": (t2 - t1) * 1000, "jinja2": "jinja2" in sys.modules, "envman": envman.__file__}))
"""

PROJECT = 'stack = "torch-2.4"\nname = "bench"\napt = ["git", "ffmpeg"]\nrequirements = "requirements.txt"\n'


def sample(root: Path, env: dict[str, str]) -> tuple[float, float, dict]:
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD, str(root)], env=env, cwd=root, capture_output=True, text=True,
                         check=True)
    wall = (time.perf_counter() - t0) * 1000
    data = json.loads(out.stdout)
    return data["ms"], wall, data


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ref-tree", action="append", default=[],
                    help="a checkout of envman to compare with (imported through PYTHONPATH); repeatable")
    ap.add_argument("-n", type=int, default=15, help="samples per way (default 15)")
    args = ap.parse_args()
    here = str(Path(__file__).resolve().parent.parent)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        root = tmp / "project"
        root.mkdir()
        (root / "envman.toml").write_text(PROJECT)
        (root / "requirements.txt").write_text("einops==0.8.0\nrich>=13\n")
        base = {k: v for k, v in os.environ.items() if not k.startswith("ENVMAN_")}
        base.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed envman has its .pyc files
        base.update(ENVMAN_CONFIG_DIR=str(tmp / "config"), ENVMAN_STATE_DIR=str(tmp / "state"))
        trees = {"hit": here, "miss": here}
        ways = {"hit": {**base, "PYTHONPATH": here, "ENVMAN_CACHE_DIR": str(tmp / "cache")}}
        for n, tree in enumerate(args.ref_tree):
            name = f"ref:{Path(tree).name}"
            trees[name] = str(Path(tree).resolve())
            ways[name] = {**base, "PYTHONPATH": trees[name], "ENVMAN_CACHE_DIR": str(tmp / f"ref{n}")}
        for env in ways.values():
            sample(root, env)  # fills the cache, writes bytecode
        results: dict[str, list[tuple[float, float]]] = {w: [] for w in trees}
        refs = set()
        for i in range(args.n):
            for way in results:
                env = ways.get(way) or {**base, "PYTHONPATH": here, "ENVMAN_CACHE_DIR": str(tmp / f"miss{i}")}
                ms, wall, data = sample(root, env)
                assert data["envman"].startswith(trees[way]), data["envman"]
                if way in ("hit", "miss"):
                    assert data["jinja2"] == (way == "miss"), (way, data)
                refs.add((way, data["ref"]))
                results[way].append((ms, wall))
    med = {w: statistics.median(ms for ms, _ in r) for w, r in results.items()}
    wall = {w: statistics.median(x for _, x in r) for w, r in results.items()}
    print(f"project_image_ref in a fresh process, median of {args.n} (process wall time beside)")
    for w in results:
        print(f"  {w:24} {med[w]:7.1f} ms   (process {wall[w]:6.1f} ms)")
    print(f"  miss / hit: {med['miss'] / med['hit']:.1f}x")
    for w in results:
        if w.startswith("ref:"):
            print(f"  {w}: hit / it {med['hit'] / med[w]:.2f}x, it / hit {med[w] / med['hit']:.1f}x")
    for w, tag in sorted(refs):
        print(f"  tag ({w}): {tag}")
    return 0 if len({r for w, r in refs if w in ("hit", "miss")}) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
