"""MatrixSource: one object for an invocation's matrix — its files in load order, the matrix
parsed at most once and only when needed, stack names resolved once and through the on-disk
cache, and the run fast path left without the matrix loader."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from envman.matrix import load as matrix_load
from envman.matrix.source import MatrixSource
from envman.paths import matrices_dir
from tests.support.rows import cpu_torch_matrix

USER_ROWS = cpu_torch_matrix("0.0.7", "test fixture")


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.delenv("ENVMAN_MATRIX", raising=False)
    matrix_load._CACHE.clear()
    yield tmp_path
    matrix_load._CACHE.clear()


def test_files_are_shipped_then_config_then_env_then_options(home, monkeypatch):
    (home / "config").mkdir()
    (home / "config" / "config.toml").write_text(f'[matrix]\nfiles = ["{home / "c.toml"}"]\n')
    monkeypatch.setenv("ENVMAN_MATRIX", f"{home / 'e.toml'}{os.pathsep}{home / 'c.toml'}")
    src = MatrixSource.of([home / "o.toml"])
    shipped = tuple(sorted(matrices_dir().glob("*.toml")))
    assert src.shipped_files == shipped and shipped
    # a file named twice is loaded once, where it was named last
    assert src.user_files == (home / "e.toml", home / "c.toml", home / "o.toml")
    assert src.files == (*shipped, *src.user_files)
    assert src.extra == (str(home / "o.toml"),)


def test_adding_files_makes_a_new_unloaded_source(home):
    src = MatrixSource.of(["a.toml"])
    assert src.adding([]) is src
    more = src.adding([Path("b.toml")])
    assert more.extra == ("a.toml", "b.toml") and src.extra == ("a.toml",)


def test_the_matrix_is_loaded_once_and_only_when_asked(home, monkeypatch):
    calls = []
    real = matrix_load.load_matrix
    monkeypatch.setattr(matrix_load, "load_matrix", lambda extra=(), **kw: calls.append(1) or real(extra, **kw))
    src = MatrixSource()
    assert calls == []
    assert src.matrix is src.matrix and calls == [1]
    assert src.matrix.builds


def test_resolve_is_cached_per_name_and_on_disk(home, monkeypatch):
    (home / "user.toml").write_text(USER_ROWS)
    src = MatrixSource.of([home / "user.toml"])
    first = src.resolve("torch-0.0.7-cpu")
    assert first.name == "torch-0.0.7-cpu-py3.11"
    assert src.resolve("torch-0.0.7-cpu") is first  # per name, once per invocation
    assert (home / "state" / "cache" / "stacks.json").is_file()

    # a new invocation with the same files resolves from the disk cache: no matrix is parsed
    def no_load(*a, **kw):
        raise AssertionError("the matrix was parsed")

    monkeypatch.setattr(matrix_load, "load_matrix", no_load)
    matrix_load._CACHE.clear()
    assert MatrixSource.of([home / "user.toml"]).resolve("torch-0.0.7-cpu") == first


def test_a_changed_file_changes_the_fingerprint_and_misses_the_cache(home):
    f = home / "user.toml"
    f.write_text(USER_ROWS)
    before = MatrixSource.of([f]).fingerprint()
    assert before is not None and before == MatrixSource.of([f]).fingerprint()
    f.write_text(USER_ROWS.replace('python = ["3.11"]', 'python = ["3.12"]'))
    after = MatrixSource.of([f]).fingerprint()
    assert after != before
    matrix_load._CACHE.clear()
    assert MatrixSource.of([f]).resolve("torch-0.0.7-cpu").name == "torch-0.0.7-cpu-py3.12"
    assert MatrixSource.of([home / "missing.toml"]).fingerprint() is None  # no cache: the load reports it


def test_a_name_resolved_with_user_files_says_where_it_came_from(home):
    f = home / "user.toml"
    f.write_text(USER_ROWS)
    MatrixSource.of([f]).resolve("torch-0.0.7-cpu")
    assert MatrixSource.of([f]).missing_files_hint("torch-0.0.7-cpu") is None
    hint = MatrixSource().missing_files_hint("torch-0.0.7-cpu")
    assert hint is not None and str(f) in hint and "--matrix" in hint


def test_a_broken_disk_cache_is_ignored(home):
    (home / "state" / "cache").mkdir(parents=True)
    src = MatrixSource()
    for text in ("[1, 2]", "{not json", '{"key": "%s", "stacks": {"torch-2.4-cpu": {"x": 1}}}' % src.fingerprint()):
        (home / "state" / "cache" / "stacks.json").write_text(text)
        assert MatrixSource().resolve("torch-2.4-cpu").framework == "torch"


def test_the_run_fast_path_does_not_import_the_matrix():
    code = ("import sys, envman.main, envman.run.fastpath; "
            "print(sorted(m for m in sys.modules if m.startswith('envman')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "envman.matrix" not in out and "envman.stack" not in out, out
