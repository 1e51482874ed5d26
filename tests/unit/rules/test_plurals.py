"""Counts are printed with their noun in the right number ("1 package", "2 packages"): through
envman.errors.counted, never as a number glued to a plural noun."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from envman.errors import counted

ROOT = Path(__file__).resolve().parents[3] / "envman"
#: ``{len(x)} packages``, ``{n} lines``, ``{total} rows``: a computed count before a plural noun.
_GLUED = re.compile(r"\{(?:len\([^{}]*\)|n|count|total|[a-z_]+_count|num_[a-z_]+)\} (?:[A-Z]+ )?[a-z]{2,}s\b")


def test_no_message_glues_a_count_to_a_plural_noun():
    found = [f"{p.relative_to(ROOT.parent)}:{i}: {line.strip()}"
             for p in sorted(ROOT.rglob("*.py")) for i, line in enumerate(p.read_text().splitlines(), 1)
             if _GLUED.search(line) and not line.lstrip().startswith("#")]
    assert found == []


@pytest.mark.parametrize("n, want", [(0, "0 lines"), (1, "1 line"), (2, "2 lines"), (-1, "-1 lines")])
def test_counted(n, want):
    assert counted(n, "line") == want
    assert counted(n, "CUDA release").endswith("release" if n == 1 else "releases")
    assert counted(1, "index", "indexes") == "1 index" and counted(3, "index", "indexes") == "3 indexes"
