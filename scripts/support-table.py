"""Print the support table of docs/matrix.md from the shipped matrix: for each framework and CUDA
major (and CPU), the oldest and newest release and how many rows. `--check` compares it with the
table between the support-table markers of docs/matrix.md (tests/unit/rules/test_docs.py does too)."""
from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from envman.matrix.load import load_matrix  # noqa: E402

FRAMEWORKS = ("torch", "tensorflow", "jax", "onnxruntime")
START, END = "<!-- support-table:start -->", "<!-- support-table:end -->"


def support_table() -> str:
    cells: dict[tuple[str, str], list] = defaultdict(list)
    for b in load_matrix().builds:
        cells[(b.framework, "CPU" if b.cuda is None else f"CUDA {b.cuda.major}")].append(b.version)
    cols = sorted({c for _, c in cells}, key=lambda c: (c != "CPU", int(c.split()[-1]) if c != "CPU" else 0))
    lines = ["| framework | " + " | ".join(cols) + " |", "| --- |" + " --- |" * len(cols)]
    for fw in FRAMEWORKS:
        row = []
        for c in cols:
            v = cells.get((fw, c))
            row.append(f"{min(v)} → {max(v)} ({len(v)})" if v else "—")
        lines.append(f"| {fw} | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def documented(path: Path = ROOT / "docs" / "matrix.md") -> str:
    text = path.read_text(encoding="utf-8")
    return text[text.index(START) + len(START):text.index(END)].strip("\n") + "\n"


def write(path: Path = ROOT / "docs" / "matrix.md") -> None:
    text = path.read_text(encoding="utf-8")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    path.write_text(f"{head}{START}\n{support_table()}{END}{tail}", encoding="utf-8")


if __name__ == "__main__":
    if "--check" in sys.argv:
        sys.exit(0 if documented() == support_table() else 1)
    if "--write" in sys.argv:
        write()
    else:
        sys.stdout.write(support_table())
