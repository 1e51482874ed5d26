"""Costs that must not grow with state: how each grows from 10 to 100 to 1,000 projects (and from
1x to 16x matrix rows).

    python benchmarks/bench_state.py [--engine] [--json PATH]

A figure is the *marginal* cost per item between the two larger sizes over the one between the
two smaller ones: about 1 when the cost per project (row) stays the same, about 10 when every
project makes each other one dearer (a whole-registry walk per registration). Goal: at most 1.5.

* registering N projects in one process (``envman.project.registry.register``);
* ``envman project ls`` with N registered projects (a fresh process);
* resolving every stack name of a matrix made 1x, 4x, 16x larger (``tests/support/scale.py``);
* ``envman render --all``: bytes of probe archive on disk over one archive (goal 1x: shared);
* the never-mount policy with N other homes (a tenth of them exist, with a few protected things
  in them; the rest are accounts without one): made, then five mounts outside them checked, in
  CPU seconds of one process (best of 5);
* with ``--engine``: ``envman prune --dry-run`` with N projects that need a project image, all on
  one promoted stack (a tag of a local base image, removed at the end).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, Report, envman_cmd, json_option, run_once  # noqa: E402

sys.path.insert(0, str(ROOT))
SIZES = (10, 100, 1000)
GOAL = 1.5
STACK = "torch-0.0.1-cpu-py3.11"


def marginal(report: Report, what: str, sizes: tuple[int, int, int], times: list[float], detail: str = "") -> None:
    lo = (times[1] - times[0]) / (sizes[1] - sizes[0])
    hi = (times[2] - times[1]) / (sizes[2] - sizes[1])
    shown = ", ".join(f"{n}: {t:.3f} s" for n, t in zip(sizes, times))
    f = _figure(report, what, hi / lo, f"({shown}) {detail}".rstrip())
    report.figures.append(f)
    print(f.line(), flush=True)


def make_projects(tmp: Path, n: int, requirements: bool = False) -> list[Path]:
    roots = []
    for i in range(n):
        root = tmp / "projects" / f"p{i}"
        root.mkdir(parents=True, exist_ok=True)
        extra = f'requirements = ["six=={i}"]\n' if requirements else ""
        (root / "envman.toml").write_text(f'name = "p{i}"\nstack = "torch-0.0.1-cpu"\n{extra}')
        roots.append(root)
    return roots


def fresh_env(tmp: Path, tag: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENVMAN_") and k != "PYTHONDONTWRITEBYTECODE"}
    env.update(ENVMAN_CONFIG_DIR=str(tmp / tag / "config"), ENVMAN_STATE_DIR=str(tmp / tag / "state"),
               ENVMAN_CACHE_DIR=str(tmp / tag / "cache"), COLUMNS="120")
    return env


def register_all(env: dict[str, str], roots: list[Path]) -> float:
    """Seconds to register ``roots`` in one process."""
    code = ("import sys, time\nfrom envman.project.file import load_project\n"
            "from envman.project.registry import register\nroots = sys.argv[1:]\nt = time.perf_counter()\n"
            "for r in roots: register(load_project(r))\nprint(time.perf_counter() - t)\n")
    out = subprocess.run([sys.executable, "-c", code, *map(str, roots)], env=env, check=True, capture_output=True,
                         text=True).stdout
    return float(out)


#: One process: the mount policy made with N other homes, five mounts checked; prints CPU seconds.
POLICY_CODE = """
import os, sys, time
from envman.project import policy
top, n = sys.argv[1], int(sys.argv[2])
homes = [os.path.expanduser("~")] + [f"{top}/homes/u{i}" for i in range(n)]
policy._homes = lambda: sorted(homes)
mounts = [f"{top}/proj", f"{top}/proj/data", f"{top}/proj/src", f"{top}/proj/missing", f"{top}/proj/src/a.py"]
best = float("inf")
for _ in range(5):
    t = time.process_time()
    pol = policy.Policy.of(policy.protected_paths())
    for m in mounts:
        assert policy.forbidden_reason(m, pol) is None, m
    best = min(best, time.process_time() - t)
print(best)
"""


def make_homes(tmp: Path, n: int) -> None:
    """``tmp/homes/u0`` … ``u{n-1}``: one in ten exists, with a key, a shell file, a config folder
    and a link out of it; a project beside them to mount."""
    for i in range(0, n, 10):
        h = tmp / "homes" / f"u{i}"
        (h / ".ssh").mkdir(parents=True, exist_ok=True)
        (h / ".ssh" / "id_ed25519").write_text("key")
        (h / ".bashrc").write_text("x")
        (h / ".config" / "fish").mkdir(parents=True, exist_ok=True)
        (h / "work").mkdir(exist_ok=True)
        if not (h / ".config" / "nvim").is_symlink():
            (h / ".config" / "nvim").symlink_to(tmp / "dotfiles" / f"nvim{i}")
    for d in ("data", "src"):
        (tmp / "proj" / d).mkdir(parents=True, exist_ok=True)
    (tmp / "proj" / "src" / "a.py").write_text("x")


def policy_cost(env: dict[str, str], tmp: Path, n: int, tree: str | None = None) -> float:
    """CPU seconds to make the mount policy with ``n`` other homes and check five mounts (``tree``:
    the envman source tree to import, e.g. an older commit's; default the installed one)."""
    out = subprocess.run([sys.executable, "-c", POLICY_CODE, str(tmp), str(n)], env=env, check=True,
                         capture_output=True, text=True, cwd=tree).stdout
    return float(out)


def homes_figure(report: Report, tmp: Path) -> None:
    make_homes(tmp, SIZES[-1])
    env = fresh_env(tmp, "homes")
    env["HOME"] = str(tmp / "me")
    (tmp / "me").mkdir(exist_ok=True)
    costs = [policy_cost(env, tmp, n) for n in SIZES]
    per_home = (costs[2] - costs[1]) / (SIZES[2] - SIZES[1])
    marginal(report, "mount policy with N other homes (CPU, best of 5)", SIZES, costs,
             f"{per_home * 1e6:.0f} us CPU per home from {SIZES[1]} to {SIZES[2]}")


def main() -> int:
    argv, out = json_option(sys.argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--engine", action="store_true", help="also envman prune --dry-run (needs the engine)")
    ap.add_argument("--base", help="local image for the promoted stack (default: the first of bench_run's candidates)")
    args = ap.parse_args(argv)
    report = Report("state")
    tmp = Path(tempfile.mkdtemp(prefix="envman-bench-state-"))
    from bench_run import MATRIX, pick_base

    matrix_opts: list[str] = []
    for name, text in MATRIX.items():
        (tmp / name).write_text(text)
        matrix_opts += ["--matrix", str(tmp / name)]
    tagged = None
    try:
        roots = make_projects(tmp, SIZES[-1], requirements=True)
        reg, ls = [], []
        for n in SIZES:
            env = fresh_env(tmp, f"n{n}")
            reg.append(register_all(env, roots[:n]))
            ls.append(min(run_once([*envman_cmd(), *matrix_opts, "project", "ls"], env) for _ in range(3)))
        marginal(report, "register N projects in one process", SIZES, reg)
        marginal(report, "envman project ls", SIZES, ls, "(best of 3)")

        from envman.matrix.load import load_matrix
        from envman.stack.resolve import resolve, resolve_row
        from tests.support.scale import scaled_matrix

        shipped = load_matrix()
        scales, rows = (1, 4, 16), []
        for k in scales:
            m = scaled_matrix(shipped, k)
            names = [resolve_row(m, b).name for b in m.builds]
            t = time.perf_counter()
            for name in names:
                resolve(m, name)
            rows.append(time.perf_counter() - t)
        n_rows = tuple(len(shipped.builds) * k for k in scales)
        marginal(report, "resolve every stack name (1x, 4x, 16x rows)", n_rows, rows)  # type: ignore[arg-type]

        homes_figure(report, tmp / "homes-bench")

        env = fresh_env(tmp, "render")
        ctx = tmp / "contexts"
        subprocess.run([*envman_cmd(), "render", "--all", "--builder", "classic", "-o", str(ctx)], env=env, check=True,
                       capture_output=True)
        probes = [p for p in ctx.glob("*/envman/probe.pyz")]
        on_disk = sum(p.stat().st_size for p in {p.stat().st_ino: p for p in probes}.values())
        f = _figure(report, "render --all: probe bytes on disk / one probe", on_disk / probes[0].stat().st_size,
                    f"({len(probes)} contexts)", goal=1.0)
        report.figures.append(f)
        print(f.line(), flush=True)

        if args.engine:
            base = pick_base(args.base)
            stable = f"envman/{STACK}:latest"
            if subprocess.run(["docker", "image", "inspect", stable], capture_output=True).returncode == 0:
                raise SystemExit(f"{stable} exists already; refusing to retag it")
            subprocess.run(["docker", "tag", base, stable], check=True)
            tagged = stable
            image_id = subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", stable], check=True,
                                      capture_output=True, text=True).stdout.strip()
            prune = []
            for n in SIZES:
                env = fresh_env(tmp, f"n{n}")
                reports = Path(env["ENVMAN_STATE_DIR"]) / "reports"
                reports.mkdir(parents=True, exist_ok=True)
                (reports / f"{image_id.replace('sha256:', '')}.json").write_text(json.dumps(
                    {"stack": STACK, "image": stable, "image_id": image_id, "overall": "pass", "reason": "benchmark"}))
                cmd = [*envman_cmd(), *matrix_opts, "prune", "--dry-run"]
                run_once(cmd, env)  # the first fills the render cache
                prune.append(min(run_once(cmd, env) for _ in range(3)))
            marginal(report, "envman prune --dry-run (projects with images)", SIZES, prune, "(best of 3)")
    finally:
        if tagged:
            subprocess.run(["docker", "rmi", tagged], capture_output=True)  # the tag only
        shutil.rmtree(tmp, ignore_errors=True)
    return report.save(out)


def _figure(report: Report, what: str, value: float, detail: str, goal: float = GOAL):
    from common import Figure, load

    return Figure(report.bench, what, value, value, value, "x", goal, detail, (report.start_load, load()))


if __name__ == "__main__":
    sys.exit(main())
