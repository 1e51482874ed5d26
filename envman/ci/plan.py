"""``envman ci plan`` and the selection of ``envman ci run``: the rows to validate (frameworks,
names), and their split into shards by balanced greedy bin packing over *base image groups*: rows
that start ``FROM`` the same image always land in the same shard, so a shard pulls each base once
and its builds share layers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence
import re

from envman.errors import EnvmanError, UserError
from envman.matrix.model import FrameworkBuild, Matrix
from envman.stack.names import DEFAULT_PLATFORM
from envman.stack.resolve import resolve_row
from envman.stack.names import ALIASES
from envman.stack.resolve import resolve

UNRESOLVED_GROUP = "(unresolved)"


# --- selection ---------------------------------------------------------------------------------


def split_names(values: Iterable[str] | None) -> list[str]:
    """``["a b", "c,d"]`` → ``["a", "b", "c", "d"]``: a GitHub matrix passes rows as one string."""
    out: list[str] = []
    for v in values or ():
        out += [p for p in v.replace(",", " ").split() if p]
    return list(dict.fromkeys(out))


def select_builds(
    matrix: Matrix, *, framework: str | None = None, rows: Sequence[str] | None = None
) -> list[FrameworkBuild]:
    """Matrix rows filtered by framework (alias allowed) and by row names (exact row names, or
    any stack name that resolves to a row). Unknown names raise ``UserError`` (exit 2)."""
    builds = list(matrix.builds)
    if framework:
        fw = ALIASES.get(framework.lower())
        if fw is None:
            raise UserError(f"unknown framework {framework!r}", where="--framework",
                            fix="use one of " + ", ".join(sorted(set(ALIASES))))
        builds = [b for b in builds if b.framework == fw]
    if rows:
        by_name = {b.name.lower(): b for b in matrix.builds}
        wanted: list[FrameworkBuild] = []
        for name in rows:
            b = by_name.get(name.lower())
            if b is None:  # a stack name: torch-2.4-cuda12 → its row
                row = resolve(matrix, name).row
                b = by_name[row.lower()]
            if b not in wanted:
                wanted.append(b)
        builds = [b for b in builds if b in wanted]
    return builds


# --- sharding ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanRow:
    row: str
    group: str  # base image ref
    weight: float = 1.0


@dataclass
class Shard:
    index: int  # 1-based
    total: int
    rows: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    weight: float = 0.0

    @property
    def label(self) -> str:
        return f"{self.index}/{self.total}"


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/4"`` → ``(2, 4)``; anything else is a ``UserError``."""
    m = re.fullmatch(r"([0-9]{1,4})/([0-9]{1,4})", text)
    i, n = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
    if not (n >= 1 and 1 <= i <= n):
        raise UserError(f"--shard {text!r}: expected I/N with 1 <= I <= N", where="--shard", fix="e.g. --shard 2/4")
    return i, n


def plan_shards(rows: Sequence[PlanRow], n: int) -> list[Shard]:
    """Split rows into ``n`` shards: whole base-image groups, heaviest first, each to the
    currently lightest shard (LPT greedy: at most 4/3 of the best possible maximum load).

    Deterministic: the result depends only on the set of rows, not on their order. Shards may
    be empty when there are fewer groups than shards.
    """
    if n < 1:
        raise UserError(f"--shards {n}: expected at least 1", where="--shards")
    groups: dict[str, list[PlanRow]] = {}
    for r in sorted(rows, key=lambda r: (r.group, r.row)):
        groups.setdefault(r.group, []).append(r)
    order = sorted(groups.items(), key=lambda kv: (-sum(r.weight for r in kv[1]), kv[0]))
    shards = [Shard(i + 1, n) for i in range(n)]
    for group, members in order:
        target = min(shards, key=lambda s: (s.weight, s.index))
        target.groups.append(group)
        target.rows += [r.row for r in members]
        target.weight += sum(r.weight for r in members)
    return shards


#: Expected cost of a row that cannot be built: render and lint only (weights must not depend on
#: runner options: ``ci plan`` and every ``ci run --shard`` must compute the same shards).
DELETED_BASE_WEIGHT = 0.25


def plan_rows(matrix: Matrix, builds: Sequence[FrameworkBuild], platform: str = DEFAULT_PLATFORM) -> list[PlanRow]:
    """Rows weighted by expected cost: 1 for a build (its framework install dominates, the shared
    base image, pulled or rebuilt from NVIDIA's recipe, is paid once per group),
    :data:`DELETED_BASE_WEIGHT` for a row that does not resolve."""
    out = []
    for b in builds:
        try:
            stack = resolve_row(matrix, b, platform)
        except EnvmanError:
            out.append(PlanRow(b.name, UNRESOLVED_GROUP, DELETED_BASE_WEIGHT))
            continue
        out.append(PlanRow(b.name, stack.base_image, 1.0))
    return out


def github_matrix(shards: Sequence[Shard]) -> dict[str, Any]:
    """A GitHub Actions ``strategy.matrix`` value: non-empty shards only."""
    return {
        "include": [
            {"shard": s.label, "rows": " ".join(s.rows), "count": len(s.rows)} for s in shards if s.rows
        ]
    }
