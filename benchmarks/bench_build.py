"""A second ``envman build`` of an unchanged stack against a fully cached ``docker build`` of the
same Dockerfile, interleaved; prints the ratio (target: under 0.2).

    python benchmarks/bench_build.py STACK [-- BUILD OPTIONS...]   # a stack your engine can build
    python benchmarks/bench_build.py --standin                       # no registry: stand-in bases

The first ``envman build`` (not timed) builds, smoke-tests and promotes the stack; it may take
minutes. ``envman render`` then writes the very context that build used, and one ``docker build``
of it (not timed) warms that command. Timed, interleaved, ``-n`` times each:

* ``envman build STACK``: the result of the last identical no-op, served by the cache of
  ``envman.runcache`` after checking that nothing it depends on changed (code, templates,
  matrices, config, wheelhouse, reports, the candidate and stable image ids);
* the same with ``ENVMAN_RUN_CACHE=0``: it renders the stack, finds its content-addressed
  candidate and the smoke report kept for it, and does no Docker build either;
* ``docker build -t TAG CONTEXT``: every step a cache hit, the context sent each time.

Both use the engine's classic builder (the one the Docker SDK's build API drives), so they share
one layer cache; ``DOCKER_BUILDKIT=0`` is set for the CLI. Options after ``--`` go to both
``envman build`` and ``envman render`` (network options such as ``--wheelhouse``, ``--ca-bundle``).

``--standin`` needs no registry: it makes the test suite's stand-in base images
(``tests/support/standin.py``: a debootstrapped Debian tagged with the name the Dockerfile uses),
downloads the CPU wheel of torch 2.13.0 into a wheelhouse, and builds ``torch-2.13.0-cpu`` from
``tests/data/standin-torch.toml`` with the host's CA bundle; the smoke test there is ``cpu-only``.

envman's state (logs, reports) goes to a temporary directory; the images stay on the engine
(the next run reuses them) except the benchmark's own ``docker build`` tag, which is removed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STANDIN_MATRIX = ROOT / "tests" / "data" / "standin-torch.toml"
STANDIN_STACK = "torch-2.13.0-cpu"
BENCH_TAG = "envman-bench/docker-build:cached"


def envman_cmd() -> list[str]:
    script = Path(sys.executable).with_name("envman")
    return [str(script)] if script.exists() else [sys.executable, "-m", "envman"]


def run(cmd: list[str], env: dict[str, str], what: str) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{what} failed (exit {p.returncode}): {' '.join(cmd)}\n{(p.stderr or p.stdout).strip()[-2000:]}")
    return p


def timed(cmd: list[str], env: dict[str, str], what: str) -> float:
    t = time.perf_counter()
    run(cmd, env, what)
    return time.perf_counter() - t


def standin_setup(tmp: Path) -> tuple[list[str], str, list[str]]:
    """(matrix options, stack, build options) for the stand-in build."""
    sys.path.insert(0, str(ROOT))
    from envman.engine import Engine
    from envman.matrix.load import load_matrix
    from envman.resolve import resolve
    from tests.support.standin import ensure_standin

    with Engine.connect() as engine:
        ensure_standin(resolve(load_matrix([STANDIN_MATRIX]), STANDIN_STACK).base_image, engine=engine)
    wheels = tmp / "wheelhouse"
    run([sys.executable, "-m", "pip", "download", "torch==2.13.0", "--no-deps", "--only-binary=:all:",
         "--python-version", "3.11", "--platform", "manylinux_2_28_x86_64", "-d", str(wheels), "-q"],
        dict(os.environ), "pip download of the torch 2.13.0 CPU wheel")
    paths = ssl.get_default_verify_paths()
    ca = next((p for p in (os.environ.get("SSL_CERT_FILE"), paths.cafile, paths.openssl_cafile) if p and Path(p).is_file()), None)
    opts = ["--wheelhouse", str(wheels)] + (["--ca-bundle", ca] if ca else [])
    return ["--matrix", str(STANDIN_MATRIX)], STANDIN_STACK, opts


def main() -> int:
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("stack", nargs="?", help="the stack to build (e.g. torch-2.4-cuda12)")
    ap.add_argument("--standin", action="store_true", help=f"build {STANDIN_STACK} on stand-in bases (no registry needed)")
    ap.add_argument("-n", type=int, default=9, help="runs of each command (default 9)")
    args = ap.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    if bool(args.stack) == bool(args.standin):
        ap.error("give a STACK or --standin")

    tmp = Path(tempfile.mkdtemp(prefix="envman-bench-build-"))
    env = dict(os.environ, ENVMAN_STATE_DIR=str(tmp / "state"), DOCKER_BUILDKIT="0")
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed envman has its .pyc files
    try:
        matrix, stack, opts = standin_setup(tmp) if args.standin else ([], args.stack, [])
        opts += extra
        build = [*envman_cmd(), *matrix, "build", stack, "--accept-cpu-only", "--json", *opts]
        t0 = time.perf_counter()
        first = json.loads(run(build, env, "the first envman build").stdout)[0]
        print(f"first envman build: {time.perf_counter() - t0:.1f} s, {first['smoke']}, "
              f"{'cached' if first['cached'] else 'built'} {first['image']}")
        if first["smoke"] == "fail":
            raise SystemExit(f"{stack}: the smoke test fails ({first['reason']}); a no-op build reruns it, pick a stack that passes")
        ctx = tmp / "context"
        run([*envman_cmd(), *matrix, "render", stack, "-o", str(ctx), *opts], env, "envman render")
        docker = ["docker", "build", "-q", "-t", BENCH_TAG, str(ctx)]
        timed(docker, env, "the warm-up docker build")
        full_env = {**env, "ENVMAN_RUN_CACHE": "0"}
        times: dict[str, list[float]] = {"envman": [], "full": [], "docker": []}
        for _ in range(args.n):  # interleaved, so load on the machine hits all three alike
            for key, e in (("envman", env), ("full", full_env)):
                t = time.perf_counter()
                again = json.loads(run(build, e, "envman build").stdout)[0]
                times[key].append(time.perf_counter() - t)
                if not again["cached"]:
                    raise SystemExit("the second envman build was not a no-op: " + json.dumps(again))
            times["docker"].append(timed(docker, env, "docker build"))
        med = {k: statistics.median(v) for k, v in times.items()}
        size = sum(f.stat().st_size for f in ctx.rglob("*") if f.is_file())
        steps = sum(1 for ln in (ctx / "Dockerfile").read_text().splitlines() if ln and not ln.startswith(("#", " ")))
        print(f"stack {stack}; context {size / 1e6:.1f} MB, about {steps} Dockerfile instructions; classic builder")
        print(f"envman build (no-op)           median {med['envman']:6.2f} s  best {min(times['envman']):6.2f} s  (n={args.n})")
        print(f"  the same, ENVMAN_RUN_CACHE=0 median {med['full']:6.2f} s  best {min(times['full']):6.2f} s  (n={args.n})")
        print(f"docker build (all cached)      median {med['docker']:6.2f} s  best {min(times['docker']):6.2f} s  (n={args.n})")
        ratio = med["envman"] / med["docker"]
        print(f"ratio envman/docker: {ratio:.2f}x (target < 0.2x); full path (renders, asks the engine): "
              f"{med['full'] / med['docker']:.2f}x")
        return 0 if ratio < 0.2 else 1
    finally:
        subprocess.run(["docker", "rmi", BENCH_TAG], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
