"""The probe on a real GPU, natively (no container): driver, kernel, and with torch the
framework check and the bench figures.

Skipped, with the reason, where ``libcuda.so.1`` cannot be loaded or sees no device. Set
``ENVMAN_PROBE_RECORD=PATH`` to save the torch run's document. That is how
``tests/gpu/recorded/h100_probe.json`` was made: on an H100 80GB HBM3 machine (driver 580.159.04)
where this suite itself ran inside a container with torch 2.11.0+cu130 in a virtual environment,
so the recording says ``host.in_container: true``. ``tests/unit/probe/test_app_recorded_gpu.py`` runs the
host's report parser, the aggregation and the bench arithmetic over it.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import subprocess
import sys

import pytest

from envman.probe import parse_output
from tests.support.probe_doc import probe_pyz

pytestmark = pytest.mark.gpu

#: Datasheet figures by device name (dense, no sparsity), for the fraction-of-datasheet report.
DATASHEETS = [
    (r"H100 PCIe", {"bandwidth_gb_s": 2000, "fp32_tflops": 51, "fp16_tflops": 756}),
    (r"H100 NVL", {"bandwidth_gb_s": 3900, "fp32_tflops": 60, "fp16_tflops": 835}),
    (r"H100", {"bandwidth_gb_s": 3350, "fp32_tflops": 67, "fp16_tflops": 989}),
    (r"H200", {"bandwidth_gb_s": 4800, "fp32_tflops": 67, "fp16_tflops": 989}),
]


def _no_gpu_reason():
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        return "libcuda.so.1 cannot be loaded: %s" % e
    rc = lib.cuInit(0)
    if rc != 0:
        return "cuInit(0) returned CUresult %d: no usable GPU" % rc
    n = ctypes.c_int(0)
    if lib.cuDeviceGetCount(ctypes.byref(n)) != 0 or n.value < 1:
        return "the driver sees no CUDA device"
    return None


@pytest.fixture(scope="module")
def gpu():
    reason = _no_gpu_reason()
    if reason:
        pytest.skip(reason)


def _run(args, timeout=600):
    r = subprocess.run([sys.executable, str(probe_pyz()), *args], capture_output=True, text=True,
                       timeout=timeout)
    return r.returncode, parse_output(r.stdout), r.stderr


def _check(doc, name):
    return next(c for c in doc["checks"] if c["name"] == name)


def _torch_info():
    code = ("import json, torch; c = torch.backends.cudnn; "
            "print(json.dumps({'version': torch.__version__, 'cuda': torch.version.cuda, "
            "'cudnn': c.version() if c.is_available() else None, "
            "'gpu': torch.cuda.is_available()}))")
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0:
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_driver_and_kernel_pass_natively(gpu, tmp_path):
    stack = tmp_path / "stack.json"
    stack.write_text("{}")
    rc, doc, err = _run(["--require-gpu", "--expect", str(stack), "--only", "driver,kernel"])
    assert doc["overall"] == "pass", (doc["reason"], err[-2000:])
    assert rc == 0
    assert re.match(r"^\d+\.\d+$", doc["driver_version"])
    assert doc["gpus"] and all(g["memory_bytes"] > 0 for g in doc["gpus"])
    assert all(re.match(r"^\d+\.\d+$", g["cc"]) for g in doc["gpus"])
    assert _check(doc, "driver")["status"] == "pass"
    kernel = _check(doc, "kernel")
    assert kernel["status"] == "pass", kernel["reason"]
    for d in kernel["data"]["devices"]:
        assert d["exact"] is True
        assert d["max_abs_error"] == 0.0 and d["mismatches"] == 0
        assert d["n"] == 1 << 20


def test_full_probe_with_torch_framework_and_bench(gpu, tmp_path):
    info = _torch_info()
    if not info:
        pytest.skip("torch is not importable by %s" % sys.executable)
    if not info["gpu"]:
        pytest.skip("torch %s cannot use the GPU here" % info["version"])
    stack = {"framework": "torch", "framework_version": info["version"].split("+")[0],
             "cuda": info["cuda"]}
    if info["cudnn"]:
        v = int(info["cudnn"])
        stack["cudnn"] = ("%d.%d" % (v // 10000, v % 10000 // 100) if v >= 10000
                          else "%d.%d" % (v // 1000, v % 1000 // 100))
    rc0, doc0, _ = _run(["--only", "driver", "--no-expect"])
    name = doc0["gpus"][0]["name"]
    for pattern, sheet in DATASHEETS:
        if re.search(pattern, name):
            stack["datasheet"] = sheet
            break
    f = tmp_path / "stack.json"
    f.write_text(json.dumps(stack))
    rc, doc, err = _run(["--require-gpu", "--bench", "--expect", str(f)])
    record = os.environ.get("ENVMAN_PROBE_RECORD")
    if record:
        with open(record, "w") as out:
            json.dump(doc, out, indent=1)
            out.write("\n")
    fw = _check(doc, "framework")
    assert fw["status"] == "pass", (fw["reason"], err[-2000:])
    assert fw["data"]["device"] != "cpu"
    subs = {s["name"]: s for s in fw["data"]["subchecks"]}
    for s in ("version", "cuda", "cpu_matmul", "device", "arch", "gpu_matmul"):
        assert subs[s]["status"] == "pass", subs[s]
    assert fw["data"]["gpu_matmul"]["max_rel_error"] < 1e-3
    bench = doc["bench"]
    assert _check(doc, "bench")["status"] == "pass"
    for key in ("device_bandwidth_gb_s", "h2d_gb_s", "d2h_gb_s", "fp32_tflops", "fp16_tflops"):
        assert isinstance(bench[key], float) and bench[key] > 0, key
    tensor_cores = tuple(int(p) for p in doc["gpus"][0]["cc"].split(".")) >= (8, 0)
    if tensor_cores:  # the framework-free fp16 loop (PTX mma.sync) ran, and every sum was exact
        assert bench["fp16_mma_tflops"] > 0 and bench["method"]["mma"]["wrong_results"] == 0
    else:
        assert bench["fp16_mma_tflops"] is None and "fp16_mma_tflops" in bench["skipped"]
    if "datasheet" in stack:
        assert set(bench["fraction_of_datasheet"]) == {"bandwidth_gb_s", "fp32_tflops", "fp16_tflops"} | (
            {"fp16_mma"} if tensor_cores else set())
    assert doc["overall"] == "pass", doc["reason"]
    assert rc == 0


def test_hung_timeout_is_enforced_on_the_gpu_too(gpu, tmp_path):
    """A tiny --timeout makes the (real) kernel check fail fast, and the probe still exits."""
    rc, doc, _ = _run(["--timeout", "0.001", "--only", "kernel",
                       "--no-expect"], timeout=120)
    assert rc == 1 and doc["overall"] == "fail"
    assert "timed out after 0.001 s" in doc["reason"]
