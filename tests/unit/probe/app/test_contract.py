"""What the probe and the host agree on (``envman/probe/app/contract.py``): the document and its reader."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from envman.probe import EXIT_USAGE, parse_output
from envman.probe.app import contract as contract_mod
from tests.support.probe_app import DOC_KEYS, check, run_script


def test_parse_output_errors():
    with pytest.raises(ValueError):
        parse_output("")
    with pytest.raises(ValueError):
        parse_output("hello\nnot json")
    with pytest.raises(ValueError):
        parse_output('{"a": 1}')
    assert parse_output('noise\n{"overall": "pass", "checks": []}\n')["overall"] == "pass"


def test_recorded_gpu_fixture_matches_the_contract():
    rec = Path(__file__).resolve().parents[3] / "gpu" / "recorded" / "h100_probe.json"
    if not rec.exists():
        pytest.skip("no recorded GPU run")
    doc = json.loads(rec.read_text())
    assert set(doc) == DOC_KEYS
    assert doc["overall"] == "pass"
    assert doc["gpus"] and doc["gpus"][0]["cc"] == "9.0"
    assert check(doc, "kernel")["data"]["devices"][0]["max_abs_error"] == 0.0
    assert doc["bench"]["device_bandwidth_gb_s"] > 0


def test_default_expectations_path_is_required(tmp_path):
    if os.path.exists(contract_mod.DEFAULT_EXPECT):
        pytest.skip("this machine has an envman stack file at the default path")
    r = run_script([])
    assert r.returncode == EXIT_USAGE
    assert "expectations are missing" in parse_output(r.stdout)["reason"]
