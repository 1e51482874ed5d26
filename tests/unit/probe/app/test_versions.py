"""Version matching and formatting in the probe (``envman/probe/app/versions.py``)."""

from __future__ import annotations

import pytest

from envman.probe.app import versions as versions_mod


@pytest.mark.parametrize(
    "found, expected, depth, ok",
    [("2.7.1+cu128", "2.7.1", None, True), ("2.7.1+cu118", "2.7.0", None, False),
     ("12.4", "12.8", 2, False), ("12.8.90", "12.8", 2, True), ("9.1.0", "9", None, True),
     ("2.16.1", "2.16", None, True), ("v0.4.30", "0.4.30", None, True),
     ("2.8.0rc1", "2.8.0", None, True), (None, "1.0", None, False), ("1.0", "", None, False)],
)
def test_versions_match(found, expected, depth, ok):
    assert versions_mod.versions_match(found, expected, depth) is ok


def test_version_formatting():
    assert versions_mod.format_cuda_int(12040) == "12.4"
    assert versions_mod.format_cuda_int(13000) == "13.0"
    assert versions_mod.format_cudnn_int(8902) == "8.9.2"
    assert versions_mod.format_cudnn_int(90701) == "9.7.1"
    assert versions_mod.short_version("12.8.1") == "12.8"
