"""One matrix row read with checks (envman/matrix/row.py): each error names the file, the key and
what was expected; a key nobody asked for is an error once the row is read; a refused URL is never
echoed with its token."""

from __future__ import annotations

import datetime

import pytest
from packaging.version import Version

from envman.errors import MatrixError
from envman.matrix.model import DEFAULT_PLATFORMS, PLATFORMS
from envman.matrix.row import Row, each_row, rows_of, shown_value, to_date, to_str_table, to_update, to_version


def test_a_row_that_is_not_a_table_is_refused_naming_the_file():
    with pytest.raises(MatrixError) as e:
        Row(["x"], "m.toml", "build[0]")  # type: ignore[arg-type]
    assert e.value.where == "m.toml" and "build[0] must be a table" in e.value.what


def test_a_missing_required_key_and_a_wrong_type_name_the_key_and_the_expectation():
    r = Row({"name": 3}, "m.toml", "build[2]")
    with pytest.raises(MatrixError) as e:
        r.str("missing")
    assert e.value.what == "key build[2].missing: expected a string (required)"
    with pytest.raises(MatrixError) as e:
        r.str("name")
    assert e.value.what == "key build[2].name: expected a string, got 3"
    assert r.str("absent", default=None) is None


def test_an_empty_string_counts_as_missing():
    r = Row({"note": ""}, "m.toml", "x")
    assert r.str("note", default="d") == "d"
    with pytest.raises(MatrixError, match="required"):
        r.str("note")


def test_choices_are_listed_when_a_value_is_not_one_of_them():
    r = Row({"status": "maybe"}, "m.toml", "x")
    with pytest.raises(MatrixError) as e:
        r.status()
    assert "expected one of 'confirmed'" in e.value.what and "got 'maybe'" in e.value.what


@pytest.mark.parametrize("value, ok", [(0, True), (0.5, True), (-1, False), (True, False), ("1", False)])
def test_a_float_is_a_non_negative_number_and_never_a_bool(value, ok):
    r = Row({"f": value}, "m.toml", "x")
    if ok:
        assert r.float("f") == float(value)
    else:
        with pytest.raises(MatrixError, match="a non-negative number"):
            r.float("f")


def test_sources_take_one_string_or_a_non_empty_list():
    assert Row({"source": "https://a"}, "m", "x").sources() == ("https://a",)
    assert Row({"source": ["a", "b"]}, "m", "x").sources() == ("a", "b")
    for bad in ([], [1], 3):
        with pytest.raises(MatrixError, match="source"):
            Row({"source": bad}, "m", "x").sources()


def test_platforms_default_and_keep_the_models_order_without_repeats():
    assert Row({}, "m", "x").platforms() == DEFAULT_PLATFORMS
    assert Row({"platforms": list(reversed(PLATFORMS))}, "m", "x").platforms() == PLATFORMS
    for bad in ([], [PLATFORMS[0], PLATFORMS[0]], ["linux/sparc"]):
        with pytest.raises(MatrixError, match="platforms"):
            Row({"platforms": bad}, "m", "x").platforms()


def test_wheel_python_is_canonicalised_sorted_and_any_means_every_python():
    r = Row({"wheel_python": {"Torch_Vision": ["3.9", "3.10"], "six": ["any"]}}, "m", "x")
    assert r.wheel_python() == (("six", ()), ("torch-vision", (Version("3.9"), Version("3.10"))))
    for bad in ({"x": []}, {"x": "3.9"}, ["x"]):
        with pytest.raises(MatrixError, match="wheel_python"):
            Row({"wheel_python": bad}, "m", "x").wheel_python()


def test_each_row_refuses_a_key_the_reader_did_not_ask_for_once_the_row_is_read():
    doc = {"build": [{"name": "a", "typo": 1}]}
    it = each_row(doc, "build", "m.toml")
    r = next(it)
    assert r.str("name") == "a"
    with pytest.raises(MatrixError) as e:
        next(it)
    assert e.value.what == "unknown key build[0].typo" and e.value.where == "m.toml"


def test_an_array_of_tables_that_is_not_one_is_refused():
    assert rows_of({}, "build", "m") == []
    with pytest.raises(MatrixError, match=r"\[\[build\]\]"):
        rows_of({"build": {"a": 1}}, "build", "m")


def test_a_refused_url_is_shown_without_its_token():
    shown = shown_value({"u": ["https://user:ghp_secret123@host.example/x"]})
    assert "ghp_secret123" not in shown and "host.example" in shown


@pytest.mark.parametrize("value, out", [("2024-02-29", "2024-02-29"), (datetime.date(2024, 1, 2), "2024-01-02")])
def test_a_date_is_an_iso_date_or_a_toml_date(value, out):
    assert to_date(value) == out


@pytest.mark.parametrize("bad", ["2023-02-29", "2024-1-2", datetime.datetime(2024, 1, 2), 20240102])
def test_a_date_that_is_no_day_or_a_datetime_is_refused(bad):
    with pytest.raises((ValueError, TypeError)):
        to_date(bad)


def test_an_update_is_a_three_part_cuda_and_a_driver_and_nothing_else():
    cuda, driver = to_update({"cuda": "12.4.1", "toolkit_driver": "550.54.15"})
    assert cuda == Version("12.4.1") and str(driver) == "550.54.15"
    for bad in ({"cuda": "12.4", "toolkit_driver": "550.54.15"}, {"cuda": "12.4.1"},
                {"cuda": "12.4.1", "toolkit_driver": "550.54.15", "x": 1}):
        with pytest.raises(ValueError):
            to_update(bad)


def test_converters_refuse_values_of_the_wrong_type():
    with pytest.raises(TypeError):
        to_version(12.4)
    with pytest.raises(TypeError):
        to_str_table({"a": 1})
    assert to_str_table({"b": "2", "a": "1"}) == (("a", "1"), ("b", "2"))
