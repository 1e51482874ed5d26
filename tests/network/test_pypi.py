"""Against the real PyPI (marker ``pypi``): the newest releases' wheels, read through range
requests, pin what ``envman matrix update`` says they pin."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from envman.matrix.index import PYPI_SIMPLE, Http, fetch_project, read_wheel_metadata
from envman.matrix.update import releases, representative, wheels
from envman.matrix.wheels import cuda_pins

pytestmark = pytest.mark.pypi


def _newest(project: str):
    http = Http(timeout=30)
    rels = releases(wheels(fetch_project(http, PYPI_SIMPLE, project).files))
    v = max(rels)
    return http, v, rels[v]


def test_newest_torch_wheel_metadata_by_range_requests() -> None:
    http, v, ws = _newest("torch")
    rep = representative(ws, "linux/amd64")
    assert rep is not None
    md = read_wheel_metadata(http, rep.file)
    assert md.how in ("range", "pep658") and md.version == str(v)
    pins = cuda_pins(md.requires_dist)
    assert pins.cuda is not None and pins.cuda.how == "pinned"  # torch pins its CUDA exactly
    assert pins.cudnn is not None and pins.cudnn.value.startswith("9.")
    assert http.bytes_read < (rep.file.size or 10**9) / 20


def test_update_dry_run_against_pypi_agrees_with_the_wheels(tmp_path) -> None:
    env = {**os.environ, "ENVMAN_CONFIG_DIR": str(tmp_path)}
    env.pop("ENVMAN_MATRIX", None)
    out = tmp_path / "ours.toml"
    p = subprocess.run([sys.executable, "-m", "envman", "matrix", "update", "-f", "onnxruntime", "--no-torch-index",
                        "-o", str(out), "--json"], capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    http, v, ws = _newest("onnxruntime-gpu")
    rep = representative(ws, "linux/amd64")
    md = read_wheel_metadata(http, rep.file)
    pins = cuda_pins(md.requires_dist, ["cuda", "cudnn"])
    # the newest release is in the shipped matrix or was written now, with what its wheel pins
    extra = ["--matrix", str(out)] if out.exists() else []
    p = subprocess.run([sys.executable, "-m", "envman", *extra, "matrix", "ls", "-f", "onnxruntime", "--json"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    rows = [r for r in json.loads(p.stdout) if r["framework_version"] == str(v)]
    assert rows, f"onnxruntime {v} is neither shipped nor written ({summary})"
    assert rows[0]["cuda"].split(".")[0] == str(pins.cuda_major)
    assert pins.cudnn is None or rows[0]["cudnn"].split(".")[0] == pins.cudnn.value.split(".")[0]


def test_check_runs_against_pypi(tmp_path) -> None:
    env = {**os.environ, "ENVMAN_CONFIG_DIR": str(tmp_path)}
    env.pop("ENVMAN_MATRIX", None)
    p = subprocess.run([sys.executable, "-m", "envman", "matrix", "update", "--check", "--json", "--no-torch-index"],
                       capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode in (0, 1), p.stderr
    summary = json.loads(p.stdout)
    assert summary["behind"] == (p.returncode == 1) and summary["requests"] >= 4
