"""The driver check (``envman/probe/app/driver.py``), against the fake libcuda."""

from __future__ import annotations

from envman.probe.app import cuda as cuda_mod
from envman.probe.app import run as run_mod
from envman.probe.app import verdict as verdict_mod
from tests.support.probe_app import FakeLib, check, make_ctx, opts


def test_no_libcuda_is_a_skip_with_the_reason():
    doc = run_mod.run_probe(opts(), ctx=make_ctx(), expect={})
    drv = check(doc, "driver")
    assert drv["status"] == "skip"
    assert drv["reason"] == cuda_mod.NO_LIBCUDA_REASON
    assert drv["reason"].startswith("libcuda.so.1 not found")
    assert check(doc, "kernel")["status"] == "skip"
    assert doc["overall"] == "cpu-only"
    assert doc["gpus"] == [] and doc["driver_version"] is None


def test_no_libcuda_with_require_gpu_fails():
    doc = run_mod.run_probe(opts(require_gpu=True), ctx=make_ctx(), expect={})
    assert check(doc, "driver")["status"] == "fail"
    assert check(doc, "kernel")["status"] == "fail"
    assert "--require-gpu" in check(doc, "driver")["reason"]
    assert doc["overall"] == "fail"
    assert verdict_mod.exit_code_for(doc["overall"]) == 1


def test_cuinit_no_device_is_a_skip_naming_the_error():
    doc = run_mod.run_probe(opts(), ctx=make_ctx(lib=FakeLib(init_rc=100)), expect={})
    drv = check(doc, "driver")
    assert drv["status"] == "skip" and "CUDA_ERROR_NO_DEVICE" in drv["reason"]
    assert doc["overall"] == "cpu-only"


def test_cuinit_other_error_is_a_failure_with_its_name():
    doc = run_mod.run_probe(opts(), ctx=make_ctx(lib=FakeLib(init_rc=999)), expect={})
    drv = check(doc, "driver")
    assert drv["status"] == "fail"
    assert "CUDA_ERROR_UNKNOWN (999)" in drv["reason"]
    assert doc["overall"] == "fail"


def test_zero_devices_is_a_skip():
    doc = run_mod.run_probe(opts(), ctx=make_ctx(lib=FakeLib(devices=())), expect={})
    assert check(doc, "driver")["status"] == "skip"
    assert doc["overall"] == "cpu-only"


def test_driver_reports_devices():
    lib = FakeLib(version=12040, devices=[("NVIDIA Fake A10", (8, 6), 24 << 30),
                                          ("NVIDIA Fake H100", (9, 0), 80 << 30)])
    doc = run_mod.run_probe(opts(), ctx=make_ctx(lib=lib), expect={})
    drv = check(doc, "driver")
    assert drv["status"] == "pass", drv
    assert doc["driver_version"] == "12.4"
    assert [g["cc"] for g in doc["gpus"]] == ["8.6", "9.0"]
    assert doc["gpus"][1] == {"index": 1, "name": "NVIDIA Fake H100", "cc": "9.0",
                              "memory_bytes": 80 << 30, "multiprocessors": 84,
                              "uuid": "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"}
    assert doc["overall"] == "pass"
