"""``envman run P -- true`` against ``docker run --rm IMAGE true``, interleaved; prints the ratios.

    python benchmarks/bench_run.py [--json PATH]   # throw-away projects on a throw-away stack
    python benchmarks/bench_run.py --project NAME  # one of your registered projects (CPU run)
    python benchmarks/bench_run.py --base IMAGE    # the local image the throw-away stack uses
    python benchmarks/bench_run.py --profile DIR   # also: each path once under -X importtime and cProfile
    python benchmarks/bench_run.py --keep          # leave the throw-away stack's tags and folder in place

Two throw-away projects: one without requirements (it runs the stack image) and one with
(``six``), whose project image is a tag of the stack image under the ref envman works out for it,
so the run takes the project-image path (tag worked out, image found) without building. The throw-away stack is a user matrix row (``torch-0.0.1-cpu``) whose promoted image
``envman/torch-0.0.1-cpu-py3.11:latest`` is a tag of a local base image, with a passing smoke
report written for it; config, state and cache live in a temporary directory, reached the way a
user's are (``XDG_CONFIG_HOME``, ``XDG_STATE_HOME``, ``XDG_CACHE_HOME``, so the platform
directory lookup is paid as in real use), and the tag is removed at the end. Both commands run
the same image; envman's run also does its preflight (project file, stack, image and smoke
report) and adds its mounts, user, shm size and ``--init``.

Timed: ``envman run`` as users run it (after the first run, the run-plan cache of
``envman.run.fastpath`` serves it while nothing it depends on changed), and the same run with
``ENVMAN_RUN_CACHE=0``, the full path with every check (what a first run, or a run after any
change, costs). Python bytecode caches are allowed (as in a pip install), even where
PYTHONDONTWRITEBYTECODE is set. ``--compare PYTHON`` times another installation's envman (the
console script beside PYTHON, e.g. a checkout of an older commit) in the same rounds, so the two
can be compared under the same load. ``docker run`` with the very argv envman execs (from
``--dry-run --json``) is timed in the same rounds too, so the ratio splits into what the
container options cost (``--init``, mounts, user, shm size) and what envman's own process costs;
the CPU time of the envman process (and the docker CLI it execs) beyond ``docker run``'s is
reported too: what an idle machine's wall time would add. So is the CPU time of envman's process
alone, its exec of ``docker`` stubbed out (what envman itself costs, without the docker CLI's
share of the options), beside the floor of the full path: the interpreter importing the standard
library modules that path cannot do without (:data:`FLOOR_MODULES`).
Goals: against a bare ``docker run``, at most 1.05x cached and 1.1x on the full path; against
``docker run`` with the same options (the argv envman execs), at most 1.05x cached and 1.15x on the
full path; with and without a project image; ratios are per interleaved round (median, min, max).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Report, envman_cmd, interleaved, json_option, run_once  # noqa: E402

STACK = "torch-0.0.1-cpu-py3.11"
#: Goals (issue 26): a cached run within 5 % of ``docker run``, the full path within 10 %.
GOAL_CACHED, GOAL_FULL = 1.05, 1.10
#: Against ``docker run`` with the same options (the argv envman execs): a cached run within 5 %,
#: the full path within 15 %.
GOAL_SAME_CACHED, GOAL_SAME_FULL = 1.05, 1.15
#: The standard library modules the full path needs whatever envman does: the project file and the
#: config are TOML, the engine's answers and envman's state JSON, the run plan a frozen dataclass.
FLOOR_MODULES = ("re", "json", "pathlib", "dataclasses", "tomllib", "socket")
#: ``python -c`` program: envman's console script with its exec of the container's command stubbed out.
_ALONE = """
import os, sys
def stop(*args, **kwargs):
    os._exit(0)
os.execv = os.execve = os.execvp = os.execvpe = stop
sys.argv = ["envman", *sys.argv[1:]]
from envman.main import main
main()
"""
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


def pick_base(asked: str | None) -> str:
    for ref in ([asked] if asked else BASE_CANDIDATES):
        if subprocess.run(["docker", "image", "inspect", ref], capture_output=True).returncode == 0:
            return ref
    raise SystemExit(f"no base image found locally (tried {', '.join([asked] if asked else BASE_CANDIDATES)}); "
                     "pull one, or give --base IMAGE")


def project_ref(env: dict[str, str], root: Path, image_id: str, python: str = sys.executable) -> str:
    """The tag a run of the project at ``root`` uses for its project image on the stack image."""
    code = ("import sys\nfrom envman.project.file import load_project\nfrom envman.project.image import project_image_ref\n"
            "print(project_image_ref(load_project(sys.argv[1]), sys.argv[2], sys.argv[3]))\n")
    return subprocess.run([python, "-c", code, str(root), STACK, image_id], env=env, check=True,
                          capture_output=True, text=True).stdout.strip()


def record_built(env: dict[str, str], image_id: str, ref: str) -> None:
    """Record ``ref`` (the stack image ``image_id`` under a project image's tag) in ``built.json`` as
    this user's build of it on ``image_id``."""
    code = ("import sys\nfrom envman.images.provenance import record_built\n"
            "record_built(sys.argv[1], sys.argv[2], base=sys.argv[1])\n")
    subprocess.run([sys.executable, "-c", code, image_id, ref], env=env, check=True, capture_output=True, text=True)


def stable_tag(matrix_files: list[str], env: dict[str, str]) -> str:
    """The stable tag envman gives the throw-away stack of ``matrix_files`` (a user's row)."""
    code = ("import sys\nfrom envman.matrix.load import load_matrix\nfrom envman.stack.resolve import resolve\n"
            "from envman.state import stable_ref\n"
            "print(stable_ref(resolve(load_matrix(sys.argv[2:]), sys.argv[1])))\n")
    return subprocess.run([sys.executable, "-c", code, STACK, *matrix_files], env=env, check=True,
                          capture_output=True, text=True).stdout.strip()


def main() -> int:
    argv, out = json_option(sys.argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--project", help="a registered project to run instead of the throw-away ones")
    ap.add_argument("--base", help="local image for the throw-away stack")
    ap.add_argument("-n", type=int, default=15, help="rounds (default 15)")
    ap.add_argument("--compare", metavar="PYTHON",
                    help="also time the envman installed beside this interpreter (e.g. another checkout's venv), "
                         "in the same rounds, with its own run-plan cache")
    ap.add_argument("--profile", metavar="DIR",
                    help="before timing, run each project's full and cached paths once with python -X importtime "
                         "(DIR/NAME[-cached].importtime) and once under cProfile (DIR/NAME[-cached].prof)")
    ap.add_argument("--keep", action="store_true",
                    help="leave the throw-away stack's tags and its folder (config, state, cache, projects) in place")
    args = ap.parse_args(argv)

    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed envman has its .pyc files
    tmp = Path(tempfile.mkdtemp(prefix="envman-bench-"))
    stable = f"envman/{STACK}:latest"
    tags: list[str] = []
    extra: list[str] = []
    report = Report("run")
    try:
        other_state: dict[str, str] = {}
        if args.project:
            projects, cwd, extra = {args.project: args.project}, os.getcwd(), []
        else:
            base = pick_base(args.base)
            for var in ("ENVMAN_CONFIG_DIR", "ENVMAN_STATE_DIR", "ENVMAN_CACHE_DIR", "ENVMAN_MATRIX", "ENVMAN_RUN_CACHE"):
                env.pop(var, None)
            env.update(XDG_CONFIG_HOME=str(tmp / "config"), XDG_STATE_HOME=str(tmp / "state"),
                       XDG_CACHE_HOME=str(tmp / "cache"))
            extra = []
            for name, text in MATRIX.items():
                (tmp / name).write_text(text)
                extra += ["--matrix", str(tmp / name)]
            stable = stable_tag([str(tmp / name) for name in MATRIX], env)  # a user's row: latest-<key>
            if subprocess.run(["docker", "image", "inspect", stable], capture_output=True).returncode == 0:
                raise SystemExit(f"{stable} exists already; refusing to retag it")
            subprocess.run(["docker", "tag", base, stable], check=True)
            tags.append(stable)
            image_id = subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", stable], check=True,
                                      capture_output=True, text=True).stdout.strip()
            state = Path(subprocess.run([sys.executable, "-c", "from envman.paths import state_dir; print(state_dir())"],
                                        env=env, check=True, capture_output=True, text=True).stdout.strip())
            (state / "reports").mkdir(parents=True)
            (state / "reports" / f"{image_id.replace('sha256:', '')}.json").write_text(json.dumps(
                {"stack": STACK, "image": stable, "image_id": image_id, "overall": "pass",
                 "reason": "benchmark fixture: no probe was run"}))
            # --compare's envman gets its own state folder with the same report: the stack cache lives
            # there, and two versions sharing it would each miss and rewrite it on every full-path run
            shutil.copytree(state / "reports", tmp / "state-compare" / state.name / "reports")
            other_state = {"XDG_STATE_HOME": str(tmp / "state-compare")}
            projects = {}
            for name, body in (("bench", ""), ("bench-image", 'requirements = ["six==1.17.0"]\n')):
                proj = tmp / name
                proj.mkdir()
                (proj / "envman.toml").write_text(f'name = "{name}"\nstack = "torch-0.0.1-cpu"\n{body}')
                subprocess.run([*envman_cmd(), *extra, "project", "add", str(proj)], env=env, check=True, capture_output=True)
                if body:  # its project image: a tag of the stack image under the ref the run works out
                    for python in dict.fromkeys([sys.executable, *([args.compare] if args.compare else [])]):
                        ref = project_ref(env, proj, image_id, python)
                        if ref not in tags:
                            subprocess.run(["docker", "tag", stable, ref], check=True)
                            tags.append(ref)
                        # a project image is reused only when this user's build made it on that stack
                        # image: the tag is recorded as such a build, in each envman's own state
                        for state_env in ({}, other_state):
                            record_built(env | state_env, image_id, ref)
                projects[name] = name
            cwd = str(tmp)
        for label, project in projects.items():
            dry = subprocess.run([*envman_cmd(), *extra, "run", project, "--no-gpu", "--dry-run", "--json", "--", "true"],
                                 env=env, cwd=cwd, capture_output=True, text=True)
            if dry.returncode != 0:
                raise SystemExit(f"envman run --dry-run failed: {dry.stderr.strip()}")
            planned = json.loads(dry.stdout)
            image = planned["plan"]["image"]
            run = [*envman_cmd(), *extra, "run", project, "--no-gpu", "--", "true"]
            docker = ["docker", "run", "--rm", image, "true"]
            full_env = {**env, "ENVMAN_RUN_CACHE": "0"}
            cpu: dict[str, list[float]] = {"docker": [], "cached": [], "full": [], "alone cached": [],
                                           "alone full": [], "floor": []}
            alone = [sys.executable, "-c", _ALONE, *run[len(envman_cmd()):]]
            samples = {
                "docker": lambda: run_once(docker, env, cwd, cpu=cpu["docker"]),
                "cached": lambda: run_once(run, env, cwd, cpu=cpu["cached"]),
                "full": lambda: run_once(run, full_env, cwd, cpu=cpu["full"]),
                "alone cached": lambda: run_once(alone, env, cwd, cpu=cpu["alone cached"]),
                "alone full": lambda: run_once(alone, full_env, cwd, cpu=cpu["alone full"]),
                "floor": lambda: run_once([sys.executable, "-c", f"import {', '.join(FLOOR_MODULES)}"], env, cwd,
                                          cpu=cpu["floor"]),
            }
            argv = [str(w) for w in planned.get("argv") or []]
            if argv[:2] == ["docker", "run"] and not any("{" in w for w in argv):  # no env-file slot to fill
                samples["argv"] = lambda: run_once(argv, env, cwd)
                no_net = without_network(argv)
                if no_net != argv:  # the per-project network's cost: the same argv on the default bridge
                    samples["argv without network"] = lambda: run_once(no_net, env, cwd)
            if args.compare:
                other = [str(Path(args.compare).with_name("envman")), *run[len(envman_cmd()):]]
                other_env = {**env, "XDG_CACHE_HOME": str(tmp / "cache-compare"), **other_state}  # its own caches
                samples["other cached"] = lambda: run_once(other, other_env, cwd)
                samples["other full"] = lambda: run_once(other, {**other_env, "ENVMAN_RUN_CACHE": "0"}, cwd)
            if args.profile:
                profile_path(Path(args.profile), label, run, full_env, cwd)
                profile_path(Path(args.profile), f"{label}-cached", run, env, cwd)
            times = interleaved(samples, args.n)
            what = "project image" if label != "bench" and not args.project else "stack image"
            report.ratio(f"envman run ({what}) / docker run, cached", times["cached"], times["docker"], GOAL_CACHED)
            if "argv" in times:  # what the container options alone cost (--init, mounts, user, shm size)
                report.ratio(f"  docker run with envman's argv ({what}) / docker run", times["argv"], times["docker"], None)
                report.ratio(f"envman run ({what}), cached / docker run with the same options", times["cached"],
                             times["argv"], GOAL_SAME_CACHED)
                report.ratio(f"envman run ({what}), full path / docker run with the same options", times["full"],
                             times["argv"], GOAL_SAME_FULL, "(ENVMAN_RUN_CACHE=0)")
            if "argv without network" in times:
                report.ratio(f"  docker run with envman's argv ({what}) / the same without its --network", times["argv"],
                             times["argv without network"], None)
                report.seconds(f"  the per-project network's cost per run ({what})",
                               [a - b for a, b in zip(times["argv"], times["argv without network"])], None)
            report.ratio(f"envman run ({what}) / docker run, full path", times["full"], times["docker"], GOAL_FULL,
                         "(ENVMAN_RUN_CACHE=0)")
            # CPU time of the process (envman, then the docker CLI it execs) beyond docker run's own
            # CLI: envman's cost as an idle machine would see it, which load stretches far less
            for path in ("cached", "full"):
                own = [a - b for a, b in zip(cpu[path][-args.n:], cpu["docker"][-args.n:])]
                report.seconds(f"  envman's own CPU time per run ({what}, {path})", own, None)
                report.seconds(f"  envman's process alone, its exec stubbed: CPU per run ({what}, {path})",
                               cpu[f"alone {path}"][-args.n:], None)
            report.seconds("  the floor: the interpreter importing " + ", ".join(FLOOR_MODULES) + ": CPU per run",
                           cpu["floor"][-args.n:], None)
            if args.compare:
                report.ratio(f"  --compare's envman run ({what}) / docker run, cached", times["other cached"],
                             times["docker"], None)
                report.ratio(f"  --compare's envman run ({what}) / docker run, full path", times["other full"],
                             times["docker"], None)
    finally:
        if args.keep:
            print(f"kept: {tmp} ({' '.join(tags)}); its matrix options: {' '.join(extra)}", file=sys.stderr)
        else:
            for ref in reversed(tags):
                subprocess.run(["docker", "rmi", ref], capture_output=True)  # removes the tags only
            shutil.rmtree(tmp, ignore_errors=True)
    return report.save(out)


def profile_path(folder: Path, label: str, run: list[str], env: dict[str, str], cwd: str) -> None:
    """``run`` (envman's argv) once with ``-X importtime`` and once under cProfile, as ``python -m envman``,
    after one run that is not profiled (``env`` picks the path: ``ENVMAN_RUN_CACHE=0`` the full one)."""
    folder.mkdir(parents=True, exist_ok=True)
    args = run[len(envman_cmd()):]
    run_once(run, env, cwd)  # the first run writes what later ones read: not profiled
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "envman", *args], env=env, cwd=cwd,
                       capture_output=True, text=True)
    (folder / f"{label}.importtime").write_text(p.stderr)
    subprocess.run([sys.executable, "-c", _PROFILED, str(folder / f"{label}.prof"), *args], env=env, cwd=cwd,
                   capture_output=True, text=True)


#: ``python -c`` program: envman's main under cProfile, the profile written when envman execs the
#: container's command (which would end the process before cProfile writes anything).
_PROFILED = """
import cProfile, os, runpy, sys
out = sys.argv[1]
prof = cProfile.Profile()
def stop(*args, **kwargs):
    prof.disable()
    prof.dump_stats(out)
    os._exit(0)
os.execv = os.execve = os.execvp = os.execvpe = stop
sys.argv = ["envman", *sys.argv[2:]]
prof.enable()
try:
    runpy.run_module("envman", run_name="__main__", alter_sys=True)
finally:
    prof.disable()
    prof.dump_stats(out)
"""


def without_network(argv: list[str]) -> list[str]:
    """``argv`` without its ``--network NAME`` / ``--network=NAME`` (the container then joins the
    default bridge)."""
    out: list[str] = []
    skip = False
    for w in argv:
        if skip:
            skip = False
        elif w in ("--network", "--net"):
            skip = True
        elif not w.startswith(("--network=", "--net=")):
            out.append(w)
    return out


if __name__ == "__main__":
    sys.exit(main())
