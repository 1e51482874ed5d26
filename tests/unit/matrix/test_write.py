"""Matrix TOML written by `envman matrix update` (envman/matrix/write.py): every string, key and
nested table reads back exactly with a TOML parser, whatever it holds; an overlay that is not a
framework file is refused; files land all together or not at all."""

from __future__ import annotations

import sys

import pytest
from hypothesis import given, strategies as st

from envman.errors import MatrixError, UserError
from envman.matrix.write import atomic_write_all, build_toml, overlay_text, read_overlay, toml_key, toml_value

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@given(st.text(max_size=60))
def test_any_string_reads_back_exactly(text):
    assert tomllib.loads(f"x = {toml_value(text)}\n")["x"] == text


@given(st.text(min_size=0, max_size=20), st.text(max_size=20))
def test_any_key_reads_back_exactly(key, value):
    assert tomllib.loads(f"{toml_key(key)} = {toml_value(value)}\n") == {key: value}


def test_bare_keys_stay_bare_and_others_are_quoted():
    assert toml_key("cuda_12-4") == "cuda_12-4"
    assert toml_key("a.b") == '"a.b"' and toml_key("") == '""' and toml_key("é") == '"é"'


def test_values_of_each_kind_and_a_kind_toml_cannot_hold():
    assert tomllib.loads("x = " + toml_value([1, True, "a", ["b"], {"k": "v"}]))["x"] == [1, True, "a", ["b"], {"k": "v"}]
    with pytest.raises(TypeError, match="cannot write float"):
        toml_value(1.5)


def test_a_build_table_puts_nested_tables_after_its_keys():
    row = {"name": "torch-9.9-cpu", "python": ["3.12"], "derived": {"python": "https://x.example/simple"},
           "wheel_python": {"torch": ["3.12"]}}
    doc = tomllib.loads(build_toml(row, framework="torch"))
    assert doc["build"] == [{"framework": "torch", **row}]


def test_an_overlay_reads_back_its_rows_with_their_framework(tmp_path):
    p = tmp_path / "o.toml"
    p.write_text(overlay_text([("torch", {"name": "a"}), ("jax", {"name": "b"})]))
    assert read_overlay(p) == [{"framework": "torch", "name": "a"}, {"framework": "jax", "name": "b"}]
    assert read_overlay(tmp_path / "missing.toml") == []


def test_a_file_that_is_not_a_framework_overlay_is_refused(tmp_path):
    p = tmp_path / "cuda.toml"
    p.write_text('schema = 1\nkind = "cuda"\n')
    with pytest.raises(UserError, match="not a framework matrix file"):
        read_overlay(p)


def test_files_land_all_together_or_none_at_all(tmp_path):
    a, b = tmp_path / "a.toml", tmp_path / "sub" / "b.toml"
    a.write_text("old")
    a.chmod(0o600)
    atomic_write_all({a: "new a", b: "new b"})
    assert (a.read_text(), b.read_text()) == ("new a", "new b")
    assert a.stat().st_mode & 0o777 == 0o600 and b.stat().st_mode & 0o777 == 0o644
    blocked = tmp_path / "file"
    blocked.write_text("x")
    with pytest.raises(MatrixError, match="nothing was written"):
        atomic_write_all({a: "newer a", blocked / "c.toml": "c"})  # a file where a folder must be
    assert a.read_text() == "new a" and not list(tmp_path.glob(".a.toml.*"))
