"""config.toml's [matrix] table: one typed value (MatrixConfig), files relative to the config
file's folder, the index URL checked as every index URL is; hostile values in one line."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from envman.config import MatrixConfig, load_matrix_config
from envman.errors import UserError


def write(tmp_path, text):
    p = tmp_path / "config.toml"
    p.write_text(text, encoding="utf-8")
    return p


def test_files_are_taken_relative_to_the_config_folder_and_home_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    cfg = write(tmp_path, '[matrix]\nfiles = ["a.toml", "~/b.toml", "/abs/c.toml"]\n')
    got = load_matrix_config(cfg)
    assert got.files == (tmp_path / "a.toml", tmp_path / "home" / "b.toml", Path("/abs/c.toml"))
    assert got.torch_index is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.files = ()  # type: ignore[misc]


@pytest.mark.parametrize("value", ['"ours.toml"', "[1]", '[""]', '["  "]', '["a.toml", 2]', "{ a = 1 }"])
def test_files_that_are_not_a_list_of_paths_are_one_line(tmp_path, value):
    cfg = write(tmp_path, f"[matrix]\nfiles = {value}\n")
    with pytest.raises(UserError) as e:
        load_matrix_config(cfg)
    assert e.value.line() == f'{cfg}: [matrix].files: files must be a list of paths — e.g. files = ["~/envman/ours.toml"]'
    assert e.value.exit_code == 2


def test_an_empty_list_is_no_files(tmp_path):
    assert load_matrix_config(write(tmp_path, "[matrix]\nfiles = []\n")) == MatrixConfig()


@pytest.mark.parametrize("value", ['"ftp://x.example/whl"', "3", '"https://x.example/whl?token=1"',
                                   '"https://u:secret@x.example/whl"', '"https://x.example/whl\\u0007"'])
def test_a_bad_torch_index_is_one_line_and_never_echoes_a_secret(tmp_path, value):
    cfg = write(tmp_path, f"[matrix]\ntorch_index = {value}\n")
    with pytest.raises(UserError) as e:
        load_matrix_config(cfg)
    line = e.value.line()
    assert line.startswith(f"{cfg}: [matrix].torch_index: ") and "\n" not in line and "\x07" not in line
    assert "secret" not in line and "token=1" not in line
