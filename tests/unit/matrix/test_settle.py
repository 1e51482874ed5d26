"""The rows `envman matrix update` derived, planned as the files they would be written to
(envman/matrix/settle.py): an overlay keeps its other rows and replaces a row of the same key, a
shipped file gains the rows at its end, a missing shipped file is refused."""

from __future__ import annotations

import sys

import pytest

from envman.errors import UserError
from envman.matrix.newrow import NewRow
from envman.matrix.settle import plan_overlay, plan_shipped, settle
from envman.matrix.write import overlay_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def _row(fw: str, version: str, variant: str = "cpu", **more) -> NewRow:
    return NewRow(fw, {"version": version, "variant": variant, **more}, ())


def test_an_overlay_keeps_its_other_rows_and_replaces_one_of_the_same_key(tmp_path):
    out = tmp_path / "o.toml"
    out.write_text(overlay_text([("torch", {"version": "1.0", "variant": "cpu", "note": "old"}),
                                 ("jax", {"version": "0.4", "variant": "cpu"})]))
    (path, text), = plan_overlay([_row("torch", "1.0", note="new"), _row("torch", "2.0")], out).items()
    builds = tomllib.loads(text)["build"]
    assert path == out
    assert [(b["framework"], b["version"], b.get("note")) for b in builds] == [
        ("jax", "0.4", None), ("torch", "1.0", "new"), ("torch", "2.0", None)]


def test_a_shipped_file_gains_the_rows_at_its_end(tmp_path):
    (tmp_path / "torch.toml").write_text('schema = 1\nkind = "framework"\nframework = "torch"')  # no final newline
    files = plan_shipped([_row("torch", "9.0"), _row("torch", "9.1")], tmp_path)
    doc = tomllib.loads(files[tmp_path / "torch.toml"])
    assert [b["version"] for b in doc["build"]] == ["9.0", "9.1"] and doc["framework"] == "torch"


def test_a_missing_shipped_file_is_refused_and_nothing_planned(tmp_path):
    with pytest.raises(UserError, match="shipped matrix file is missing") as e:
        plan_shipped([_row("jax", "9.0")], tmp_path)
    assert "nothing was written" in e.value.fix


def test_no_rows_settle_into_nothing_to_write():
    assert settle([], [], lambda rows: pytest.fail("nothing to plan"), lambda stack: None) == ([], [], {})
