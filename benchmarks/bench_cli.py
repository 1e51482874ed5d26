"""Start-up of ``envman --help`` and the read-only commands that need no engine; ``envman images``
against ``docker images``.

    python benchmarks/bench_cli.py [-n 15] [--engine] [--compare PYTHON] [--json PATH]

Each command runs in a fresh process as users start it (the console script), interleaved with a
bare ``python -c pass`` of the same interpreter (the floor no Python command goes under). Config,
state and cache live in a temporary directory with 20 registered projects. Goal (issue 26): every
command under 0.15 s on an idle machine; on a loaded one, compare the ratio to the bare start,
and the process's CPU time (user + system), which load stretches far less than wall time: it is
reported beside each wall time and judged against the same goal. ``--engine`` adds ``envman
images`` against ``docker images`` (needs the engine). ``--compare PYTHON`` times the envman
installed beside PYTHON (e.g. a checkout of an earlier commit) in the same rounds, with its own
state, and reports this envman's wall and CPU time over that one's per command.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Report, envman_cmd, interleaved, json_option, other_envman, run_once  # noqa: E402

GOAL_S = 0.15
COMMANDS = (
    ["--help"],
    ["--version"],
    ["run", "--help"],
    ["project", "ls"],
    ["project", "show", "p0"],
    ["matrix", "show", "torch-2.4"],
    ["matrix", "ls"],
)


def main() -> int:
    argv, out = json_option(sys.argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=15)
    ap.add_argument("--engine", action="store_true", help="also envman images vs docker images")
    ap.add_argument("--compare", metavar="PYTHON", help="also time the envman installed beside PYTHON, same rounds")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="envman-bench-cli-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENVMAN_") and k != "PYTHONDONTWRITEBYTECODE"}
    env.update(ENVMAN_CONFIG_DIR=str(tmp / "config"), ENVMAN_STATE_DIR=str(tmp / "state"),
               ENVMAN_CACHE_DIR=str(tmp / "cache"), COLUMNS="120")
    report = Report("cli")
    try:
        for i in range(20):
            root = tmp / f"p{i}"
            root.mkdir()
            (root / "envman.toml").write_text(f'name = "p{i}"\nstack = "torch-2.4"\n')
            subprocess.run([*envman_cmd(), "project", "add", str(root)], env=env, check=True, capture_output=True)
        other = other_envman(args.compare) if args.compare else None
        other_env = {**env, "ENVMAN_STATE_DIR": str(tmp / "state-compare"), "ENVMAN_CACHE_DIR": str(tmp / "cache-compare")}
        if other:  # the same projects, registered in its own state
            for i in range(20):
                subprocess.run([*other, "project", "add", str(tmp / f"p{i}")], env=other_env, check=True, capture_output=True)
        bare = [sys.executable, "-c", "pass"]
        cpu: dict[str, list[float]] = {}
        samples = {"bare": lambda: run_once(bare, env, cpu=cpu.setdefault("bare", []))}
        for words in COMMANDS:
            k = " ".join(words)
            samples[k] = lambda words=words, k=k: run_once([*envman_cmd(), *words], env, cpu=cpu.setdefault(k, []))
            if other:
                samples["other " + k] = lambda words=words, k=k: run_once([*other, *words], other_env,
                                                                          cpu=cpu.setdefault("other " + k, []))
        times = interleaved(samples, args.n)
        for k in cpu:  # the warm-up round's samples are not figures
            del cpu[k][: len(cpu[k]) - args.n]
        report.seconds("python -c pass (the floor)", times["bare"], None)
        report.seconds("  its CPU time", cpu["bare"], None)
        for words in COMMANDS:
            k = " ".join(words)
            report.seconds(f"envman {k}", times[k], GOAL_S,
                           f"{sorted(times[k])[len(times[k]) // 2] / sorted(times['bare'])[len(times['bare']) // 2]:.1f}x bare")
            report.seconds("  its CPU time", cpu[k], GOAL_S)
            if other:
                report.ratio("  this / --compare's, wall", times[k], times["other " + k], None)
                report.ratio("  this / --compare's, CPU", cpu[k], cpu["other " + k], None)
        if args.engine:
            t = interleaved({"envman": lambda: run_once([*envman_cmd(), "images"], env),
                             "docker": lambda: run_once(["docker", "images"], env)}, args.n)
            report.ratio("envman images / docker images", t["envman"], t["docker"], None)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return report.save(out)


if __name__ == "__main__":
    sys.exit(main())
