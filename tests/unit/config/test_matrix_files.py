"""The matrix files of an invocation and their order: shipped first, then ``[matrix] files`` of
config.toml, ``ENVMAN_MATRIX``, then ``--matrix``; a file named twice is loaded once, last."""

from __future__ import annotations

import os

import pytest

from envman.config.matrix_files import MATRIX_ENV, matrix_files, user_matrix_paths
from envman.paths import matrices_dir


@pytest.fixture
def cfg(tmp_path, monkeypatch):
    d = tmp_path / "cfg"
    d.mkdir(mode=0o700)
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(d))
    monkeypatch.delenv(MATRIX_ENV, raising=False)
    return d


def _config(d, files):
    p = d / "config.toml"
    p.write_text("[matrix]\nfiles = [" + ", ".join(f'"{f}"' for f in files) + "]\n")
    p.chmod(0o600)


def test_user_files_come_in_order_config_then_environment_then_options(cfg, tmp_path, monkeypatch):
    a, b, c, d = (tmp_path / f"{n}.toml" for n in "abcd")
    _config(cfg, [a])
    monkeypatch.setenv(MATRIX_ENV, os.pathsep.join([str(b), "", " ", str(c)]))
    assert user_matrix_paths([d]) == [a, b, c, d]


def test_a_file_named_twice_is_loaded_once_at_its_last_place(cfg, tmp_path, monkeypatch):
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    _config(cfg, [a])
    monkeypatch.setenv(MATRIX_ENV, str(b))
    assert user_matrix_paths([a]) == [b, a]


def test_shipped_files_come_first_sorted_and_can_be_left_out(cfg, tmp_path):
    mine = tmp_path / "mine.toml"
    shipped = sorted(matrices_dir().glob("*.toml"))
    assert shipped and matrix_files([mine]) == [*shipped, mine]
    assert matrix_files([mine], shipped=False) == [mine]
    assert matrix_files() == shipped
