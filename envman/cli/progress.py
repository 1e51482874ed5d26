"""Progress of ``envman build``: what each stack is doing now.

On a terminal, a live table (rich ``Live``) redrawn in place: one row per stack with its phase,
the Dockerfile step it is on (``5/21``), that step's instruction and the time spent, so parallel
builds (``--jobs N``) read at a glance. Inside a long step the row shows its latest output line or
byte count (BuildKit reports transfers as they go), so a 30 s install does not look frozen. Anywhere else (CI logs, pipes) one plain line per step and
phase change, since a log cannot be redrawn. The full build output always goes to the log file
(``envman build`` prints where), never to the screen.

Events arrive from the build threads; the live view reads them from its own refresh thread, so
every access to the state holds the lock.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from envman.errors import printable

#: Phase → (label, colour) in the live view; the pipeline reports these through ``on_phase``.
PHASES = {
    "queued": ("queued", "dim"),
    "build": ("building", "cyan"),
    "built": ("built", "cyan"),
    "cached": ("cached", "cyan"),
    "smoke": ("smoke test", "magenta"),
    "done": ("done", "green"),
    "failed": ("failed", "red"),
}


@dataclass
class _Row:
    name: str
    phase: str = "queued"
    step: str = ""
    text: str = ""
    started: float | None = None
    ended: float | None = None
    lines: int = field(default=0)
    detail: str = ""  # the current step's latest output line or byte count
    step_started: float | None = None


class BuildProgress:
    """Receives build events and phases for several stacks; shows them live or as lines."""

    def __init__(self, names: list[str], console: Any, *, live: bool, quiet: bool = False) -> None:
        self._rows = {n: _Row(n) for n in names}
        self._console = console
        self._quiet = quiet
        self._lock = threading.Lock()
        self._spinners: dict[str, Any] = {}  # one per row, kept: a new Spinner each redraw never moves
        self._live = None
        if live and not quiet:
            from rich.live import Live

            self._live = Live(self, console=console, refresh_per_second=8, transient=False)

    def __enter__(self) -> BuildProgress:
        if self._live is not None:
            self._live.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._live is not None:
            self._live.__exit__(exc_type, exc, tb)

    # -- events ------------------------------------------------------------------------------

    def event(self, name: str, ev: Any) -> None:
        """A :class:`envman.engine.docker.BuildEvent` of ``name``'s build."""
        with self._lock:
            row = self._rows[name]
            row.lines += 1
            if ev.kind in ("log", "progress"):
                if not ev.step or ev.step == row.step:
                    row.detail = " ".join(ev.text.split())
                return
            if ev.kind != "step":
                return
            row.step, row.text, row.detail = ev.step or "", _instruction(ev.text), ""
            row.step_started = time.monotonic()
        if self._live is None:
            from rich.markup import escape

            self._line(f"[dim]{escape(name)}[/dim] step {escape(str(ev.step))}: {escape(_instruction(ev.text)[:100])}")

    def phase(self, name: str, phase: str) -> None:
        """``name`` entered ``phase`` (a key of :data:`PHASES`)."""
        now = time.monotonic()
        with self._lock:
            row = self._rows[name]
            row.phase = phase
            if row.started is None and phase not in ("queued",):
                row.started = now
            if phase in ("done", "failed"):
                row.ended = now
            elif phase in ("cached", "built", "smoke"):
                row.step, row.text, row.detail = "", "", ""
        if self._live is None and phase in ("cached", "smoke"):
            from rich.markup import escape

            self._line(f"[dim]{escape(name)}[/dim] {escape(PHASES[phase][0])}")

    def _line(self, text: str) -> None:
        """Print ``text`` (markup: user data in it is escaped by the callers)."""
        if self._quiet:
            return
        self._console.print(printable(text), markup=True, highlight=False, soft_wrap=True)

    # -- the live view -----------------------------------------------------------------------

    def __rich__(self) -> Any:
        from rich.table import Table
        from rich.text import Text

        now = time.monotonic()
        with self._lock:
            rows = [(_Row(**vars(r))) for r in self._rows.values()]
        # Fixed widths for the short columns; only the instruction gives way on a narrow terminal.
        table = Table.grid(padding=(0, 1), expand=True)
        table.add_column(width=1, no_wrap=True)
        table.add_column(width=max(len(r.name) for r in rows), no_wrap=True)
        table.add_column(width=max(len(label) for label, _ in PHASES.values()), no_wrap=True)
        table.add_column(width=max([5, *(len(r.step) for r in rows)]), justify="right", no_wrap=True)
        table.add_column(ratio=1, overflow="ellipsis", no_wrap=True)
        table.add_column(width=5, justify="right", no_wrap=True)
        for r in rows:
            label, colour = PHASES.get(r.phase, (r.phase, "white"))
            if r.phase in ("done", "failed", "queued"):
                mark: Any = Text({"done": "✓", "failed": "✗", "queued": "·"}[r.phase], style=colour)
            else:
                mark = self._spinner(r.name, colour)
            elapsed = "" if r.started is None else f"{(r.ended or now) - r.started:.0f}s"
            what = Text(printable(r.text), style="dim")
            if r.phase == "build" and (r.detail or r.step_started is not None):
                # a long step shows that it is alive: its own elapsed time, with or without detail
                in_step = f" {now - r.step_started:.0f}s" if r.step_started is not None else ""
                detail = f" · {r.detail}" if r.detail else " ·"
                what = Text.assemble((r.text[:40] if r.detail else r.text[:60], "dim"), (f"{detail}{in_step}", "cyan"))
            table.add_row(mark, Text(printable(r.name), style="bold"), Text(label, style=colour), Text(printable(r.step)), what, elapsed)
        return table

    def _spinner(self, name: str, colour: str) -> Any:
        """``name``'s spinner: the same object on every redraw, so its frame advances."""
        from rich.spinner import Spinner

        spinner = self._spinners.get(name)
        if spinner is None:
            spinner = self._spinners[name] = Spinner("dots", style=colour)
        else:
            spinner.style = colour
        return spinner


def _instruction(text: str) -> str:
    """``Step 5/21 : RUN --mount=... pip install ...`` → ``RUN pip install ...`` (BuildKit's mount
    flags say nothing about what the step does)."""
    head, sep, rest = text.partition(" : ")
    words = (rest if sep and head.startswith("Step ") else text).split()
    return " ".join(w for w in words if not w.startswith("--mount="))
