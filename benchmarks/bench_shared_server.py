"""Many stacks on one server: N stacks built on one engine, with the CUDA-library layer and
without it, against the floor; disk, downloads and time.

    python benchmarks/bench_shared_server.py [--torch] [--store | --buildkit] [--keep] [--json PATH]

The stacks are rendered by envman (``render_stack``, classic builder) on the test suite's
stand-in base (``tests/support/standin.py``: a debootstrapped Debian with its Python 3.11, tagged
with the name the Dockerfile uses) and built with ``docker build`` (``DOCKER_BUILDKIT=0``), in
this order: stack 1 and stack 2 pin the same CUDA libraries, stack 3 other ones.

* default (small, about 2 MB of wheels): stand-ins for frameworks. Stack 1 installs ``six`` after
  the CUDA libraries ``nvidia-cuda-runtime-cu12==12.4.127`` and ``nvidia-nvtx-cu12==12.4.127``;
  stack 2 ``idna`` after the same; stack 3 ``six`` after the 12.4.99 releases of both.
* ``--torch`` (real, about 10 GB of downloads and 20 GB of disk while it runs): torch 2.0.0 and
  2.0.1 from PyPI (both pin the same twelve ``nvidia-*-cu11`` wheels and triton 2.0.0, 2.3 GB),
  then torch 1.13.1 (four other pins), each with the pins its shipped matrix row carries.

Each set is built twice: with the CUDA-library layer (the rows' ``cuda_libs``), and without it
(``cuda_libs`` emptied: every pin comes with the framework, as before the layer existed). Each
build starts from the same warm OS and Python layers (built once first, not counted). Reported:

* disk: the bytes of the distinct layers the N images hold beyond the shared OS and Python layers
  (for the first two stacks, with the same pins, also against the first stack alone)
  (the engine's layer store: one size per chain id), against the floor, which is those bytes for
  a layout in which every image adds only its own framework and, where its pins are new, its CUDA
  libraries (measured: the framework layers of the built images plus each distinct CUDA-library
  layer once);
* downloads: what pip reports downloading in each build's log (``Downloading NAME (SIZE)``);
* time: each build's wall time.

``--store`` measures the wheel store (``envman.images.wheelstore``) instead: the first two stacks
(the same pins) built as ``envman build`` builds them on the classic builder, each without any
layer cache (so the second cannot reuse the first's layer), with the store and without it
(``ENVMAN_WHEEL_STORE=0``). Downloads are the CUDA-library wheels that came from the index: the
store's fetches on the host plus what pip downloaded in the CUDA-library step other than from the
store.

``--buildkit`` measures the same on BuildKit: the first two stacks (the same hashed pins) rendered
for BuildKit and built with the BuildKit docker CLI, the second made to run its CUDA-library step
(an ``ARG`` changed before it; ``--no-cache`` would start the cache mounts empty), on a pip cache
mount of the benchmark's own (so the first starts empty). Downloads are the NVIDIA wheels pip
downloaded in each build (``tests/docker/test_buildkit_pip_cache.py`` holds the same).

The images (``envman-bench/shared-*``) are removed at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import Figure, Report  # noqa: E402

STANDIN_MATRIX = ROOT / "tests" / "data" / "standin-torch.toml"
STANDIN_STACK = "torch-2.13.0-cpu"
SMALL = [("six==1.17.0", ("nvidia-cuda-runtime-cu12==12.4.127", "nvidia-nvtx-cu12==12.4.127")),
         ("idna==3.10", ("nvidia-cuda-runtime-cu12==12.4.127", "nvidia-nvtx-cu12==12.4.127")),
         ("six==1.17.0", ("nvidia-cuda-runtime-cu12==12.4.99", "nvidia-nvtx-cu12==12.4.99"))]
TORCH_ROWS = [("2.0.0", "cu117"), ("2.0.1", "cu117"), ("1.13.1", "cu117")]
_DOWNLOAD = re.compile(r"Downloading \S+ \(([\d.]+) (kB|MB|GB|bytes)\)")
_UNITS = {"bytes": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9}


def _stacks(torch: bool):
    from envman.matrix.load import load_matrix
    from envman.matrix.wheels import cuda_libraries, requirement_extras
    from envman.stack.resolve import resolve

    base = resolve(load_matrix([STANDIN_MATRIX]), STANDIN_STACK)
    out = []
    if not torch:
        for i, (pkg, pins) in enumerate(SMALL, 1):
            out.append(dataclasses.replace(base, name=f"bench-shared-{i}", packages=(pkg,), cuda_libs=pins))
        return out
    shipped = load_matrix()
    for version, variant in TORCH_ROWS:
        row = next(b for b in shipped.builds if b.framework == "torch" and str(b.version) == version and b.variant == variant)
        pins = cuda_libraries(row.cuda_libs, requirement_extras(row.packages), base.python)
        out.append(dataclasses.replace(base, name=f"bench-shared-torch-{version}", framework_version=version,
                                       packages=(f"torch=={version}",), cuda_libs=pins))
    return out


def _context(stack, tmp: Path, tag: str) -> Path:
    from envman.render.dockerfile import render_stack
    from envman.render.options import RenderOptions
    from tests.docker.conftest import host_ca_bundle

    ctx = render_stack(stack, RenderOptions(ca_bundle=host_ca_bundle()), builder="classic")
    return ctx.write(tmp / tag)


def _build(context: Path, tag: str) -> tuple[float, float, str]:
    """(seconds, bytes pip downloaded, log)."""
    t = time.perf_counter()
    p = subprocess.run(["docker", "build", "-t", tag, str(context)], capture_output=True, text=True,
                       env={**__import__("os").environ, "DOCKER_BUILDKIT": "0"})
    dt = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"docker build {tag} failed: {(p.stdout + p.stderr)[-2000:]}")
    down = sum(float(n) * _UNITS[u] for n, u in _DOWNLOAD.findall(p.stdout))
    return dt, down, p.stdout


def _chains(ref: str) -> list[str]:
    p = subprocess.run(["docker", "image", "inspect", "-f", "{{json .RootFS.Layers}}", ref],
                       capture_output=True, text=True, check=True)
    chains: list[str] = []
    for diff in json.loads(p.stdout):
        chains.append(diff if not chains else "sha256:" + hashlib.sha256(f"{chains[-1]} {diff}".encode()).hexdigest())
    return chains


def _layer_size(chain: str, root: Path) -> int:
    return int((root / "image" / "overlay2" / "layerdb" / "sha256" / chain.split(":")[1] / "size").read_text())


def _layer_index(log: str, marker: str) -> int:
    """The index (among the steps that make layers) of the RUN step whose text contains ``marker``."""
    steps = re.findall(r"^Step \d+/\d+ : (\w+)(.*)$", log, re.M)
    n = -1
    for kind, text in steps:
        if kind in ("RUN", "COPY", "ADD"):
            n += 1
            if marker in text:
                return n
    raise SystemExit(f"no RUN step with {marker!r} in the build log")


def _measure(stacks, tmp: Path, with_layer: bool, root: Path, refs: list[str]) -> dict:
    """Build ``stacks`` (with or without their CUDA-library layer); their builds and the bytes of
    the distinct layers they hold above the shared OS and Python layers."""
    label = "with" if with_layer else "without"
    built = []
    for s in stacks:
        # Without the layer, the pins come with the framework: torch requires them itself; the small
        # stand-ins for frameworks get them added to their packages.
        stack = s if with_layer else dataclasses.replace(
            s, cuda_libs=(), packages=s.packages + (() if s.packages[0].startswith("torch==") else s.cuda_libs))
        tag = f"envman-bench/shared-{label}-{s.name}:latest"
        refs.append(tag)
        seconds, down, log = _build(_context(stack, tmp, f"{label}-{s.name}"), tag)
        built.append((s, tag, seconds, down, log))
    base_layers = len(_chains_of_base())
    shared = set(_chains(built[0][1])[:base_layers + _layer_index(built[0][4], "-m venv") + 1])
    seen: set[str] = set()
    total, upto = 0, []
    for _, tag, _, _, _ in built:
        for c in _chains(tag):
            if c not in shared and c not in seen:
                seen.add(c)
                total += _layer_size(c, root)
        upto.append(total)
    return {"built": built, "total": total, "one": upto[0], "two": upto[1]}


def _floor(built, root: Path) -> int:
    """Every image's framework layer and what follows it, plus each distinct CUDA-library layer
    once (from the builds with the layer)."""
    base_layers = len(_chains_of_base())
    floor = 0
    cuda_seen: set[tuple[str, ...]] = set()
    for s, tag, _, _, log in built:
        chains = _chains(tag)
        floor += sum(_layer_size(c, root) for c in chains[base_layers + _layer_index(log, " ".join(s.packages)):])
        if s.cuda_libs not in cuda_seen:
            cuda_seen.add(s.cuda_libs)
            floor += _layer_size(chains[base_layers + _layer_index(log, "--no-deps --only-binary=:all: --no-compile")], root)
    return floor


def _cuda_downloads(log: str) -> float:
    """Bytes pip downloaded from the index in a build's CUDA-library step (what the wheel store
    served, from ``Looking in links: http://envman-wheels`` on, left out)."""
    from envman.render.imagepaths import CUDA_LIBS_FILE, WHEEL_STORE_URL

    kept, step, served = [], False, False
    for line in log.splitlines():
        if line.startswith("Step "):
            step, served = CUDA_LIBS_FILE in line, False
        elif line.startswith("Looking in links: " + WHEEL_STORE_URL):
            served = True
        elif line.startswith(("Looking in indexes", "ERROR:")):
            served = False
        if step and not served:
            kept.append(line)
    return sum(float(n) * _UNITS[u] for n, u in _DOWNLOAD.findall("\n".join(kept)))


def _measure_store(engine, stacks, tmp: Path, on: bool, refs: list[str]) -> list[tuple[float, float]]:
    """(seconds, CUDA-library bytes from the index) of each stack built by envman's classic build path with the
    wheel store ``on`` (or off), without layer cache, into a store of its own under ``tmp``."""
    import os

    from envman.engine.builder import ClassicBuilder
    from envman.images.wheelstore import WheelStore, served
    from envman.render.dockerfile import render_stack
    from envman.render.options import RenderOptions
    from tests.docker.conftest import host_ca_bundle

    options = RenderOptions(ca_bundle=host_ca_bundle())
    store = WheelStore(tmp / f"store-{on}")
    os.environ["ENVMAN_WHEEL_STORE"] = "1" if on else "0"
    out = []
    for s in stacks:
        tag = f"envman-bench/shared-store-{'on' if on else 'off'}-{s.name}:latest"
        refs.append(tag)
        ctx = render_stack(s, options, builder="classic")
        t = time.perf_counter()
        with served(ClassicBuilder(engine), s, options, store=store) as (run, info):
            log = "\n".join(ev.text for ev in run.build(ctx.tar(), tag, labels={}, nocache=True))
        fetched = sum(int(f.rpartition("(")[2].split()[0]) for f in info.fetched)
        out.append((time.perf_counter() - t, fetched + _cuda_downloads(log)))
        print(f"  store {'on' if on else 'off'}: {s.name}: {out[-1][0]:.1f} s, CUDA libraries from the index {out[-1][1] / 1e6:.2f} MB "
              f"(host {fetched / 1e6:.2f} MB); {'; '.join(info.notes) or 'no notes'}")
    return out


def _measure_buildkit(report: Report, stacks, tmp: Path, refs: list[str]) -> None:
    """Two stacks with the same hashed pins on BuildKit, on a pip cache mount of their own."""
    import uuid

    from tests.docker.test_buildkit_pip_cache import build_with_cache_id
    from tests.docker.test_reproducible_layers import HASHED

    cache_id = f"envman-pip-bench-{uuid.uuid4().hex[:8]}"
    out = []
    for s in stacks:
        s = dataclasses.replace(s, cuda_libs=HASHED)
        tag = f"envman-bench/shared-buildkit-{s.name}:latest"
        refs.append(tag)
        log, seconds = build_with_cache_id(s, s.packages, tmp / f"bk-{s.name}", cache_id, tag)
        down = sum(float(n) * _UNITS[u] for line in log.splitlines() if "Downloading nvidia_" in line
                   for n, u in _DOWNLOAD.findall(line))
        out.append((seconds, down))
        print(f"  BuildKit: {s.name}: {seconds:.1f} s, CUDA libraries from the index {down / 1e6:.2f} MB")
    _ratio(report, "CUDA-library downloads of the second stack (same pins, its step run) / the first, BuildKit",
           out[1][1], out[0][1], "MB")


def _chains_of_base() -> list[str]:
    from envman.matrix.load import load_matrix
    from envman.stack.resolve import resolve

    return _chains(resolve(load_matrix([STANDIN_MATRIX]), STANDIN_STACK).base_image)


def _ratio(report: Report, what: str, mine: float, ref: float, unit: str) -> None:
    """One figure: ``mine / ref`` (one run each), both shown in ``unit`` (``MB`` or ``s``)."""
    scale = 1e6 if unit == "MB" else 1.0
    detail = f"({mine / scale:.1f} {unit} vs {ref / scale:.1f} {unit})"
    if ref <= 0:
        print(f"{what}: n/a {detail}")
        return
    report._add(Figure(report.bench, what, mine / ref, mine / ref, mine / ref, "x", None, detail))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--torch", action="store_true", help="real torch 2.0.0, 2.0.1 and 1.13.1 (about 10 GB of downloads)")
    ap.add_argument("--store", action="store_true", help="the wheel store: two stacks with the same pins, no layer cache")
    ap.add_argument("--buildkit", action="store_true", help="BuildKit's kept wheels: two stacks with the same pins")
    ap.add_argument("--keep", action="store_true", help="keep the images")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    from envman.engine.docker import Engine
    from tests.support.standin import ensure_standin

    root = Path(subprocess.run(["docker", "info", "-f", "{{.DockerRootDir}}"], capture_output=True, text=True,
                               check=True).stdout.strip())
    stacks = _stacks(args.torch)
    with Engine.connect() as engine:
        ensure_standin(stacks[0].base_image, engine=engine)
    report = Report("shared_server")
    refs: list[str] = []
    tmp = Path(tempfile.mkdtemp(prefix="envman-bench-shared-"))
    try:
        if args.buildkit:
            _measure_buildkit(report, stacks[:2], tmp, refs)
            return report.save(args.json)
        if args.store:
            # the store takes hashed pins only: the same two small wheels, with their sha256
            from tests.docker.test_reproducible_layers import HASHED

            same = [dataclasses.replace(s, cuda_libs=HASHED) for s in stacks[:2]] if not args.torch else stacks[:2]
            with Engine.connect() as engine:
                for on in (True, False):
                    (t1, d1), (t2, d2) = _measure_store(engine, same, tmp, on, refs)
                    label = "with the wheel store" if on else "without it"
                    _ratio(report, f"CUDA-library downloads of the second stack (same pins, no layer cache) / the first, {label}", d2, d1, "MB")
                    _ratio(report, f"time of the second stack (same pins, no layer cache) / the first, {label}", t2, t1, "s")
            return report.save(args.json)
        # Warm the OS and Python layers once (a stack with no CUDA libraries and nothing after them).
        warm = dataclasses.replace(stacks[0], name="bench-shared-warm", cuda_libs=(), packages=("six==1.17.0",))
        refs.append("envman-bench/shared-warm:latest")
        _build(_context(warm, tmp, "warm"), refs[-1])
        results = {}
        for with_layer in (True, False):
            results[with_layer] = _measure(stacks, tmp, with_layer, root, refs)
        floor = _floor(results[True]["built"], root)
        for with_layer, r in results.items():
            label = "with the CUDA-library layer" if with_layer else "without it (pins with the framework)"
            built = r["built"]
            one = sum(_layer_size(c, root) for c in _chains(built[0][1])[len(_chains_of_base()):])
            two = built[:2]
            print(f"\n{label}:")
            for s, tag, seconds, down, _ in built:
                print(f"  {s.name}: {seconds:.1f} s, downloaded {down / 1e6:.1f} MB, pins {' '.join(s.cuda_libs)}")
            print(f"  disk beyond the OS and Python layers: {r['total'] / 1e6:.1f} MB for {len(built)} stacks; "
                  f"the floor {floor / 1e6:.1f} MB; one stack's image above its base {one / 1e6:.1f} MB")
            _ratio(report, f"disk of {len(built)} stacks / the floor, {label}", r["total"], floor, "MB")
            _ratio(report, f"disk of the first two stacks (same pins) / the first, {label}", r["two"], r["one"], "MB")
            _ratio(report, f"downloads of the second stack (same pins) / the first, {label}", two[1][3], two[0][3], "MB")
            _ratio(report, f"time of the second stack (same pins) / the first, {label}", two[1][2], two[0][2], "s")
        _ratio(report, "disk of the stacks, with the layer / without", results[True]["total"], results[False]["total"], "MB")
        _ratio(report, "downloads of all builds, with the layer / without", sum(b[3] for b in results[True]["built"]),
               sum(b[3] for b in results[False]["built"]), "MB")
    finally:
        if not args.keep:
            for ref in reversed(refs):
                subprocess.run(["docker", "image", "rm", "-f", ref], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    return report.save(args.json)


if __name__ == "__main__":
    sys.exit(main())
