"""Reading the stack's expectations (``envman/probe/app/expect.py``)."""

from __future__ import annotations

import json

import pytest

from envman.probe.app import expect as expect_mod


def test_load_expect(tmp_path):
    assert expect_mod.load_expect(None) == ({}, False)
    for missing in (tmp_path / "missing.json", tmp_path):  # absent, or a directory
        with pytest.raises(expect_mod.UsageError, match="expectations are missing"):
            expect_mod.load_expect(str(missing))
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"framework": "torch", "framework_version": "2.7.1", "cuda": "12.8",
                             "sass_archs": ["8.0"], "ptx_archs": ["9.0"]}))
    assert expect_mod.load_expect(str(f))[0]["cuda"] == "12.8"
    for bad in ("{not json", "[]", '{"framework": "mxnet"}', '{"sass_archs": "8.0"}'):
        f.write_text(bad)
        with pytest.raises(expect_mod.UsageError):
            expect_mod.load_expect(str(f))
