"""Resolving a name costs the rows that match it: the lookup tables give what a scan of the whole
matrix gives, and resolving every name of a k times larger matrix does k times the work."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

import envman.stack.resolve as R
from envman.matrix.load import load_matrix
from envman.stack.names import parse_name
from tests.support.scale import scaled_matrix

SHIPPED = load_matrix()


def scan(matrix, framework: str, partial: str):
    """What the resolver selected before it had tables: every row, one by one."""
    return [b for b in matrix.builds if b.framework == framework and R.version_matches(partial, b.version)]


@settings(max_examples=300, deadline=None)
@given(framework=st.sampled_from(sorted({b.framework for b in SHIPPED.builds})),
       parts=st.lists(st.integers(0, 30), min_size=1, max_size=6))
def test_the_table_selects_what_a_scan_selects(framework, parts):
    partial = ".".join(map(str, parts))
    assert R._index(SHIPPED).select(framework, partial) == scan(SHIPPED, framework, partial)


@pytest.mark.parametrize("build", SHIPPED.builds, ids=lambda b: b.name)
def test_every_prefix_of_every_shipped_release_selects_what_a_scan_selects(build):
    release = tuple(build.version.release)
    for partial in {".".join(map(str, (release + (0, 0))[:k])) for k in range(1, len(release) + 3)}:
        assert R._index(SHIPPED).select(build.framework, partial) == scan(SHIPPED, build.framework, partial), partial


def work(matrix, monkeypatch) -> tuple[int, int]:
    """(versions compared, base images ranked) while resolving every row's stack name."""
    counts = {"versions": 0, "images": 0}
    real_match, real_choice = R.version_matches, R._python_choice

    def version_matches(*a):
        counts["versions"] += 1
        return real_match(*a)

    def python_choice(*a):
        counts["images"] += 1
        return real_choice(*a)

    names = [R.resolve_row(matrix, b).name for b in matrix.builds]
    monkeypatch.setattr(R, "version_matches", version_matches)
    monkeypatch.setattr(R, "_python_choice", python_choice)
    for name in names:
        assert R.resolve(matrix, name).name == name
    monkeypatch.undo()
    return counts["versions"], counts["images"]


def test_resolving_every_name_is_linear_in_the_rows(monkeypatch):
    one = work(scaled_matrix(SHIPPED, 1), monkeypatch)
    four = work(scaled_matrix(SHIPPED, 4), monkeypatch)
    assert four[0] <= 4 * one[0] and four[1] <= 4 * one[1], (one, four)


def test_a_scaled_copy_resolves_like_the_original():
    big = scaled_matrix(SHIPPED, 3)
    names = {R.resolve_row(SHIPPED, b).name for b in SHIPPED.builds}
    assert {R.resolve_row(big, b).name for b in big.builds[: len(SHIPPED.builds)]} == names
    assert len({R.resolve_row(big, b).name for b in big.builds}) == 3 * len(names)
