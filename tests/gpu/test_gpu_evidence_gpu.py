"""``scripts/gpu-evidence run`` on a real GPU: the probe passes inside runc and ch-run containers that
get the GPU through envman's CDI spec, and fails in the same containers without the spec's edits.

Needs root, an NVIDIA GPU and a bundle made by ``scripts/gpu-evidence pack`` in ``.gpu-evidence``
(carried to the GPU machine); skipped, with the reason, where one is missing. The old-stack
userland (``pack --cuda 11.2`` in ``.gpu-evidence-cuda11.2``: CUDA 11.2's runtime, a release whose
nvidia/cuda bases NVIDIA deleted) is held to the same: it sees the GPU through the spec, on a driver
and a GPU newer than itself, and sees none without it."""

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


OLD_BUNDLE = ROOT / ".gpu-evidence-cuda11.2"


def _bundle(path: Path, pack: str) -> Path:
    if os.geteuid() != 0:
        pytest.skip("needs root (runc and ch-run)")
    if not (path / "manifest.json").is_file():
        pytest.skip(f"no bundle: run `{pack}` where Debian's apt and PyPI answer, and carry {path.name}")
    return path


@pytest.fixture(scope="module")
def bundle() -> Path:
    return _bundle(BUNDLE, "scripts/gpu-evidence pack")


OLD_PACK = "scripts/gpu-evidence pack --cuda 11.2 --bundle .gpu-evidence-cuda11.2"


@pytest.fixture(scope="module")
def old_bundle() -> Path:
    return _bundle(OLD_BUNDLE, OLD_PACK)


@pytest.fixture(params=["cuda13.0", "cuda11.2"])
def each_bundle(request) -> Path:
    """Each bundle: the CUDA 13.0 one and the old-stack userland."""
    return _bundle(BUNDLE, "scripts/gpu-evidence pack") if request.param == "cuda13.0" else _bundle(OLD_BUNDLE, OLD_PACK)


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


def test_without_the_cdi_edits_the_same_containers_fail(each_bundle, tmp_path):
    r = _run(each_bundle, tmp_path, "--no-cdi")
    assert r.returncode == 0, r.stdout + r.stderr
    for runtime in ("runc", "ch-run"):
        doc = json.loads((tmp_path / f"{runtime}-no-cdi.json").read_text())["probe"]
        assert doc["overall"] == "fail" and doc["gpus"] == []


def _runtime(doc: dict) -> dict:
    return next(c for c in doc["checks"] if c["name"] == "runtime")


def test_the_old_stack_userland_cuda_11_2_sees_the_gpu_through_the_spec(old_bundle, tmp_path):
    r = _run(old_bundle, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    for runtime in ("runc", "ch-run"):
        doc = json.loads((tmp_path / f"{runtime}.json").read_text())["probe"]
        assert doc["overall"] == "pass", (runtime, doc["reason"])
        check = _runtime(doc)
        assert check["status"] == "pass", check["reason"]
        (found,) = check["data"]["found"]
        assert found["realpath"] == "/usr/local/cuda-11.2/lib64/libcudart.so.11.2.152"
        # the 11.2 runtime itself answers: its version, and the GPUs it can use on this driver
        assert found["query"]["version"] == 11020 and found["version"] == "11.2"
        assert found["query"]["device_count_rc"] == 0 and found["query"]["device_count"] == len(doc["gpus"]) >= 1

