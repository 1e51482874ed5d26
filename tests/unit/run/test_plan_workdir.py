"""Tests of ``envman/run/plan.py``, moved unchanged from the former ``test_daily_use.py``
(which tested several modules)."""

from __future__ import annotations

from envman.run.plan import container_workdir


def test_working_directory_matches_the_callers(tmp_path):
    root = tmp_path / "alpha"
    (root / "sub" / "deep").mkdir(parents=True)
    assert container_workdir(root, root / "sub" / "deep") == "/workspace/sub/deep"
    assert container_workdir(root, root) == "/workspace"
    assert container_workdir(root, tmp_path) == "/workspace"  # outside the project: its root
    (tmp_path / "link").symlink_to(root / "sub")
    assert container_workdir(root, tmp_path / "link") == "/workspace/sub"  # through a link, resolved
    (tmp_path / "alpha2").mkdir()
    assert container_workdir(root, tmp_path / "alpha2") == "/workspace"  # a prefix is not a parent
