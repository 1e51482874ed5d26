"""What every benchmark shares: interleaved timing, ratios with their spread, the machine's load,
and one JSON record per figure for ``benchmarks/run_all.py``.

A figure is a ratio against a reference measured in the same rounds (``envman run`` against
``docker run``, a no-op ``envman build`` against a cached ``docker build``) or an absolute time
with a goal in seconds. Rounds are interleaved (one sample of each command per round), so load
on the shared machine hits every command alike; a ratio is taken per round and reported as the
median with its min and max. The 1-minute load average is read before and after.

Each script takes ``--json PATH``: its figures are appended there as JSON lines
(:func:`Report.save`), which ``run_all.py`` reads to print one table.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

ROOT = Path(__file__).resolve().parents[1]


def envman_cmd() -> list[str]:
    """The ``envman`` console script beside this interpreter (as users start it), else ``-m``."""
    script = Path(sys.executable).with_name("envman")
    return [str(script)] if script.exists() else [sys.executable, "-m", "envman"]


def load() -> float:
    return os.getloadavg()[0]


def run_once(cmd: Sequence[str], env: Mapping[str, str] | None = None, cwd: str | None = None,
             check: bool = True, cpu: list[float] | None = None) -> float:
    """Wall time of one run of ``cmd`` (stdout and stderr captured; a failure stops the benchmark).
    ``cpu``: the process's CPU time (user + system, its children included) is appended there:
    load stretches it far less than wall time."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(list(cmd), env=None if env is None else dict(env), cwd=cwd, stdin=subprocess.DEVNULL,
                       capture_output=True, text=True)
    dt = time.perf_counter() - t
    if cpu is not None:
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    if check and p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {p.returncode}): {(p.stderr or p.stdout).strip()[-800:]}")
    return dt


def interleaved(samples: Mapping[str, Callable[[], float]], n: int, warm: int = 1) -> dict[str, list[float]]:
    """``n`` rounds, each taking one sample of every entry in order (after ``warm`` untimed rounds)."""
    for _ in range(warm):
        for f in samples.values():
            f()
    times: dict[str, list[float]] = {k: [] for k in samples}
    for _ in range(n):
        for k, f in samples.items():
            times[k].append(f())
    return times


@dataclass
class Figure:
    """One row of the table: ``value`` is a ratio (``unit == "x"``) or seconds (``unit == "s"``)."""

    bench: str
    what: str
    value: float
    low: float
    high: float
    unit: str
    goal: float | None
    detail: str = ""
    load: tuple[float, float] = (0.0, 0.0)

    @property
    def met(self) -> bool | None:
        return None if self.goal is None else self.value <= self.goal

    def line(self) -> str:
        fmt = (lambda v: f"{v:.3f}x") if self.unit == "x" else (lambda v: f"{v * 1e3:.1f} ms")
        goal = "" if self.goal is None else f" (goal <= {fmt(self.goal)}: {'met' if self.met else 'MISSED'})"
        return f"{self.what}: {fmt(self.value)} [{fmt(self.low)}-{fmt(self.high)}]{goal} {self.detail}".rstrip()


@dataclass
class Report:
    bench: str
    figures: list[Figure] = field(default_factory=list)
    start_load: float = field(default_factory=load)

    def ratio(self, what: str, mine: Sequence[float], ref: Sequence[float], goal: float | None, detail: str = "") -> Figure:
        """Per-round ratios of ``mine`` to ``ref``: median, min, max."""
        ratios = [a / b for a, b in zip(mine, ref)]
        detail = (f"(median {statistics.median(mine) * 1e3:.1f} ms vs {statistics.median(ref) * 1e3:.1f} ms, "
                  f"n={len(ratios)}) {detail}").rstrip()
        return self._add(Figure(self.bench, what, statistics.median(ratios), min(ratios), max(ratios), "x", goal, detail))

    def seconds(self, what: str, times: Sequence[float], goal: float | None, detail: str = "") -> Figure:
        detail = f"(n={len(times)}) {detail}".rstrip()
        return self._add(Figure(self.bench, what, statistics.median(times), min(times), max(times), "s", goal, detail))

    def _add(self, f: Figure) -> Figure:
        f.load = (self.start_load, load())
        self.figures.append(f)
        print(f.line(), flush=True)
        return f

    def save(self, path: str | None) -> int:
        """Append the figures to ``path`` (JSON lines); exit status 0 when every goal is met."""
        if path:
            with open(path, "a") as fh:
                for f in self.figures:
                    fh.write(json.dumps(asdict(f)) + "\n")
        return 0 if all(f.met is not False for f in self.figures) else 1


def other_envman(python: str) -> list[str]:
    """The ``envman`` console script beside another interpreter (``--compare PYTHON``: e.g. the
    virtual environment of a checkout of an earlier commit)."""
    script = Path(python).with_name("envman")
    if not script.exists():
        raise SystemExit(f"--compare: no envman console script beside {python}")
    return [str(script)]


def json_option(argv: list[str]) -> tuple[list[str], str | None]:
    """``--json PATH`` taken out of ``argv``."""
    if "--json" in argv:
        i = argv.index("--json")
        return argv[:i] + argv[i + 2:], argv[i + 1]
    return argv, None
