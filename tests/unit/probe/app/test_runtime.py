"""The CUDA runtime check (``envman/probe/app/runtime.py``)."""

from __future__ import annotations

from envman.probe.app import run as run_mod
from envman.probe.app import runtime as runtime_mod
from tests.support.probe_app import check, make_ctx, opts


def fake_cudart(tmp_path, name):
    d = tmp_path / "cuda" / "lib64"
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(b"not really a library")
    return [("system", str(d / "libcudart.so*"))]


def test_runtime_mismatch_fails(tmp_path):
    pats = fake_cudart(tmp_path, "libcudart.so.12.4.127")
    ctx = make_ctx(cudart_patterns=pats, cudart_query=True)  # the query fails: file name used
    doc = run_mod.run_probe(opts(only=["runtime"]), ctx=ctx, expect={"cuda": "12.8"})
    rt = check(doc, "runtime")
    assert rt["status"] == "fail"
    assert "expected 12.8" in rt["reason"] and "12.4" in rt["reason"]
    assert rt["data"]["found"][0]["version_from"] == "file name"
    assert doc["overall"] == "fail"


def test_runtime_match_passes(tmp_path):
    pats = fake_cudart(tmp_path, "libcudart.so.12.8.90")
    doc = run_mod.run_probe(opts(only=["runtime"]), ctx=make_ctx(cudart_patterns=pats),
                      expect={"cuda": "12.8.1"})
    assert check(doc, "runtime")["status"] == "pass"
    assert doc["overall"] == "cpu-only"  # no GPU was seen


def test_runtime_version_from_wheel_dist_info(tmp_path):
    site = tmp_path / "site-packages"
    lib = site / "nvidia" / "cuda_runtime" / "lib"
    lib.mkdir(parents=True)
    (lib / "libcudart.so.12").write_bytes(b"x")
    (site / "nvidia_cuda_runtime_cu12-12.6.77.dist-info").mkdir()
    assert runtime_mod.version_from_path(str(lib / "libcudart.so.12")) == "12.6"
    assert runtime_mod.version_from_path("/usr/local/cuda-12.4/targets/x86_64-linux/lib/libcudart.so.12") == "12.4"
    assert runtime_mod.version_from_path("/x/libcudart.so.13") == "13"


def test_runtime_nothing_found():
    doc = run_mod.run_probe(opts(only=["runtime"]), ctx=make_ctx(), expect={"cuda": None})
    assert check(doc, "runtime")["status"] == "skip"
    doc = run_mod.run_probe(opts(only=["runtime"]), ctx=make_ctx(), expect={"cuda": "12.8"})
    rt = check(doc, "runtime")
    assert rt["status"] == "fail" and "no libcudart found" in rt["reason"]


def test_runtime_query_of_a_missing_library_reports_the_error(tmp_path):
    q = runtime_mod.query_cudart(str(tmp_path / "libcudart.so.99"))
    assert "dlopen failed" in q["error"]
