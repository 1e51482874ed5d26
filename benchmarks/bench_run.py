"""``envman run P -- true`` against ``docker run --rm IMAGE true``, interleaved; prints the ratio.

    python benchmarks/bench_run.py                 # a throw-away project on a throw-away stack
    python benchmarks/bench_run.py --project NAME  # one of your registered projects (CPU run)
    python benchmarks/bench_run.py --base IMAGE    # the local image the throw-away stack uses

The throw-away stack is a user matrix row (``torch-0.0.1-cpu``) whose promoted image
``envman/torch-0.0.1-cpu-py3.11:latest`` is a tag of a local base image, with a passing smoke
report written for it; config, state and cache live in a temporary directory, reached the way a
user's are (``XDG_CONFIG_HOME``, ``XDG_STATE_HOME``, ``XDG_CACHE_HOME``, so the platform
directory lookup is paid as in real use), and the tag is removed at the end. Both commands run
the same image; envman's run also does its preflight (project file, stack, image and smoke
report) and adds its mounts, user, shm size and ``--init``.

Timed: ``envman run`` as users run it (after the first run, the run-plan cache of
``envman.run.cache`` serves it while nothing it depends on changed), and the same run with
``ENVMAN_RUN_CACHE=0``, the full path with every check (what a first run, or a run after any
change, costs). Python bytecode caches are allowed (as in a pip install), even where
PYTHONDONTWRITEBYTECODE is set. Target: a ratio of at most 1.2.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STACK = "torch-0.0.1-cpu-py3.11"
BASE_CANDIDATES = ("envman-test/rootfs:bookworm", "debian:bookworm-slim", "debian:bookworm", "ubuntu:24.04",
                   "ubuntu:22.04", "busybox:latest", "alpine:latest")

MATRIX = {
    "os.toml": """schema = 1
kind = "os"
[[os]]
name = "bench-os"
python_default = "3.11"
python_apt = ["3.11"]
source = ["benchmark fixture"]
status = "confirmed"
""",
    "images.toml": """schema = 1
kind = "images"
[[image]]
repository = "envman-bench/base"
tag = "cpu"
flavour = "base"
os = "bench-os"
status = "published"
custom = true
source = ["benchmark fixture"]
""",
    "torch.toml": """schema = 1
kind = "framework"
framework = "torch"
[[build]]
version = "0.0.1"
variant = "cpu"
python = ["3.11"]
packages = ["torch==0.0.1"]
base_image = "envman-bench/base:cpu"
source = ["benchmark fixture"]
status = "confirmed"
""",
}


def envman_cmd() -> list[str]:
    script = Path(sys.executable).with_name("envman")
    return [str(script)] if script.exists() else [sys.executable, "-m", "envman"]


def timed(cmd: list[str], env: dict[str, str], cwd: str) -> float:
    t = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {p.returncode}): {p.stderr.strip()[-500:]}")
    return dt


def pick_base(asked: str | None) -> str:
    for ref in ([asked] if asked else BASE_CANDIDATES):
        if subprocess.run(["docker", "image", "inspect", ref], capture_output=True).returncode == 0:
            return ref
    raise SystemExit(f"no base image found locally (tried {', '.join([asked] if asked else BASE_CANDIDATES)}); "
                     "pull one, or give --base IMAGE")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--project", help="a registered project to run instead of the throw-away one")
    ap.add_argument("--base", help="local image for the throw-away stack")
    ap.add_argument("-n", type=int, default=15, help="runs of each command (default 15)")
    args = ap.parse_args()

    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed envman has its .pyc files
    tmp = Path(tempfile.mkdtemp(prefix="envman-bench-"))
    stable = f"envman/{STACK}:latest"
    tagged = False
    try:
        if args.project:
            project, cwd = args.project, os.getcwd()
            extra: list[str] = []
        else:
            base = pick_base(args.base)
            if subprocess.run(["docker", "image", "inspect", stable], capture_output=True).returncode == 0:
                raise SystemExit(f"{stable} exists already; refusing to retag it")
            subprocess.run(["docker", "tag", base, stable], check=True)
            tagged = True
            image_id = subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", stable], check=True,
                                      capture_output=True, text=True).stdout.strip()
            for var in ("ENVMAN_CONFIG_DIR", "ENVMAN_STATE_DIR", "ENVMAN_CACHE_DIR", "ENVMAN_MATRIX", "ENVMAN_RUN_CACHE"):
                env.pop(var, None)
            env.update(XDG_CONFIG_HOME=str(tmp / "config"), XDG_STATE_HOME=str(tmp / "state"),
                       XDG_CACHE_HOME=str(tmp / "cache"))
            extra = []
            for name, text in MATRIX.items():
                (tmp / name).write_text(text)
                extra += ["--matrix", str(tmp / name)]
            state = Path(subprocess.run([sys.executable, "-c", "from envman.paths import state_dir; print(state_dir())"],
                                        env=env, check=True, capture_output=True, text=True).stdout.strip())
            (state / "reports").mkdir(parents=True)
            (state / "reports" / f"{image_id.replace('sha256:', '')}.json").write_text(json.dumps(
                {"stack": STACK, "image": stable, "image_id": image_id, "overall": "pass",
                 "reason": "benchmark fixture: no probe was run"}))
            proj = tmp / "bench-project"
            proj.mkdir()
            (proj / "envman.toml").write_text('name = "bench"\nstack = "torch-0.0.1-cpu"\n')
            project, cwd = "bench", str(proj)
            subprocess.run([*envman_cmd(), *extra, "project", "add", str(proj)], env=env, check=True, capture_output=True)
        dry = subprocess.run([*envman_cmd(), *extra, "run", project, "--no-gpu", "--dry-run", "--json", "--", "true"],
                             env=env, cwd=cwd, capture_output=True, text=True)
        if dry.returncode != 0:
            raise SystemExit(f"envman run --dry-run failed: {dry.stderr.strip()}")
        image = json.loads(dry.stdout)["plan"]["image"]
        run = [*envman_cmd(), *extra, "run", project, "--no-gpu", "--", "true"]
        cmds = {
            "docker run --rm IMAGE true": (["docker", "run", "--rm", image, "true"], env),
            f"envman run {project} --no-gpu -- true": (run, env),
            "  the same, ENVMAN_RUN_CACHE=0 (full path)": (run, {**env, "ENVMAN_RUN_CACHE": "0"}),
        }
        for cmd, e in cmds.values():  # warm caches: page cache, .pyc files, envman's caches
            timed(cmd, e, cwd)
        times: dict[str, list[float]] = {k: [] for k in cmds}
        for _ in range(args.n):  # interleaved, so load on the machine hits all three alike
            for k, (cmd, e) in cmds.items():
                times[k].append(timed(cmd, e, cwd))
        med = {k: statistics.median(v) for k, v in times.items()}
        docker_key, envman_key, full_key = cmds
        print(f"image: {image}")
        for k, v in times.items():
            print(f"{k:<45} median {med[k] * 1e3:7.1f} ms  best {min(v) * 1e3:7.1f} ms  (n={args.n})")
        ratio = med[envman_key] / med[docker_key]
        print(f"ratio envman/docker: {ratio:.2f}x (target <= 1.2x); envman's own overhead "
              f"{(med[envman_key] - med[docker_key]) * 1e3:.0f} ms")
        print(f"ratio of the full path: {med[full_key] / med[docker_key]:.2f}x; overhead "
              f"{(med[full_key] - med[docker_key]) * 1e3:.0f} ms")
        return 0 if ratio <= 1.2 else 1
    finally:
        if tagged:
            subprocess.run(["docker", "rmi", stable], capture_output=True)  # removes the tag only
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
