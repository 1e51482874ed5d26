"""The probe's one-line JSON document (``envman/probe/app/document.py``)."""

from __future__ import annotations

import json

from envman.probe.app import document as document_mod


def test_to_json_line_is_one_strict_line():
    line = document_mod.to_json_line({"a": float("nan"), "b": [float("inf"), 1.5], "c": "x\ny\u00e9"})
    assert "\n" not in line
    assert json.loads(line) == {"a": None, "b": [None, 1.5], "c": "x\ny\u00e9"}
