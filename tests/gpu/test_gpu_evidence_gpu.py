"""``scripts/gpu-evidence run`` on a real GPU: the probe passes inside runc and ch-run containers that
get the GPU through envman's CDI spec, and fails in the same containers without the spec's edits.

Needs root, an NVIDIA GPU and a bundle made by ``scripts/gpu-evidence pack`` in ``.gpu-evidence``
(carried to the GPU machine); skipped, with the reason, where one is missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / ".gpu-evidence"
pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def bundle() -> Path:
    if os.geteuid() != 0:
        pytest.skip("needs root (runc and ch-run)")
    if not (BUNDLE / "manifest.json").is_file():
        pytest.skip("no bundle: run `scripts/gpu-evidence pack` where Debian's apt and PyPI answer, and carry .gpu-evidence")
    return BUNDLE


def _run(bundle: Path, out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu-evidence"), "run", "--bundle", str(bundle),
                           "--out", str(out), *args], capture_output=True, text=True, timeout=600)


def test_the_probe_passes_in_both_runtimes_through_the_cdi_spec(bundle, tmp_path):
    r = _run(bundle, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    spec = json.loads((tmp_path / "cdi-nvidia.json").read_text())
    for runtime in ("runc", "ch-run"):
        record = json.loads((tmp_path / f"{runtime}.json").read_text())
        doc = record["probe"]
        assert doc["overall"] == "pass", (runtime, doc["reason"])
        assert doc["host"]["in_container"] is True
        library = next(c for c in doc["checks"] if c["name"] == "driver")["data"]["library"]
        assert library in {m["containerPath"] for m in spec["containerEdits"]["mounts"]}


def test_without_the_cdi_edits_the_same_containers_fail(bundle, tmp_path):
    r = _run(bundle, tmp_path, "--no-cdi")
    assert r.returncode == 0, r.stdout + r.stderr
    for runtime in ("runc", "ch-run"):
        doc = json.loads((tmp_path / f"{runtime}-no-cdi.json").read_text())["probe"]
        assert doc["overall"] == "fail" and doc["gpus"] == []
