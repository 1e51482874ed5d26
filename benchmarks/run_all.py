"""Run every benchmark and print one table: each figure's median, min-max over the rounds, goal,
whether it is met, and the machine's load while it was taken.

    python benchmarks/run_all.py [--skip NAME]... [--only NAME]... [--lock FILE] [--markdown FILE] [-n N]

The benchmarks (``benchmarks/bench_*.py``), in order: ``cli`` (start-up; ``envman images``),
``resolve``, ``state`` (growth with projects and rows; ``prune``), ``run`` (against ``docker
run``) and ``build`` (a no-op against a cached ``docker build``, both builders, on the stand-in
stack: its first build takes minutes). Those that use the Docker engine run under ``flock FILE``
when ``--lock`` is given (an engine shared with others). Exit 0 when every goal is met.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: (name, script and options, uses the engine, takes -n)
BENCHMARKS = (
    ("cli", ["bench_cli.py", "--engine"], True, True),
    ("resolve", ["bench_resolve.py"], False, False),
    ("state", ["bench_state.py", "--engine"], True, False),
    ("run", ["bench_run.py"], True, True),
    ("build", ["bench_build.py", "--standin"], True, True),
)


def table(rows: list[dict]) -> str:
    def fmt(v: float | None, unit: str) -> str:
        if v is None:
            return ""
        return f"{v:.3f}x" if unit == "x" else f"{v * 1e3:.1f} ms"

    out = ["| benchmark | figure | median | min–max | goal | met | load |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        met = "" if r["goal"] is None else ("yes" if r["value"] <= r["goal"] else "**no**")
        out.append(f"| {r['bench']} | {r['what'].strip()} {r['detail']} | {fmt(r['value'], r['unit'])} | "
                   f"{fmt(r['low'], r['unit'])}–{fmt(r['high'], r['unit'])} | "
                   f"{'≤ ' + fmt(r['goal'], r['unit']) if r['goal'] is not None else ''} | {met} | "
                   f"{r['load'][0]:.1f}–{r['load'][1]:.1f} |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--skip", action="append", default=[], help="a benchmark to leave out (repeatable)")
    ap.add_argument("--only", action="append", default=[], help="run only these (repeatable)")
    ap.add_argument("--lock", help="run the benchmarks that use the engine under flock FILE")
    ap.add_argument("--markdown", help="also write the table to FILE")
    ap.add_argument("-n", type=int, help="rounds for the benchmarks that take -n")
    args = ap.parse_args()
    names = [b[0] for b in BENCHMARKS]
    for n in args.skip + args.only:
        if n not in names:
            ap.error(f"unknown benchmark {n!r}: one of {', '.join(names)}")
    fd, results = tempfile.mkstemp(prefix="envman-bench-", suffix=".jsonl")
    os.close(fd)
    failed = []
    try:
        for name, cmd, engine, rounds in BENCHMARKS:
            if name in args.skip or (args.only and name not in args.only):
                continue
            argv = [sys.executable, str(HERE / cmd[0]), *cmd[1:], "--json", results]
            if rounds and args.n:
                argv += ["-n", str(args.n)]
            if engine and args.lock:
                argv = ["flock", args.lock, *argv]
            print(f"== {name}: {' '.join(argv[argv.index(sys.executable):])}", flush=True)
            if subprocess.run(argv).returncode not in (0, 1):  # 1: ran, a goal missed
                failed.append(name)
        rows = [json.loads(line) for line in Path(results).read_text().splitlines() if line.strip()]
    finally:
        os.unlink(results)
    text = table(rows)
    print("\n" + text)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n")
    if failed:
        print(f"benchmarks that did not finish: {', '.join(failed)}", file=sys.stderr)
    return 0 if not failed and all(r["goal"] is None or r["value"] <= r["goal"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
