"""The framework check (``envman/probe/app/framework.py``), with a fake adapter."""

from __future__ import annotations

import pytest

from envman.probe.app import run as run_mod
from tests.support.probe_app import FakeAdapter, FakeLib, check, make_ctx, opts


# The runtime check would fail these stacks (no libcudart 12.8 in the fake file system).
GPU_AND_FW = ["driver", "kernel", "framework"]


STACK = {"framework": "torch", "framework_version": "2.7.1", "cuda": "12.8", "cudnn": "9.7"}


def test_no_framework_is_a_skip():
    doc = run_mod.run_probe(opts(only=["framework"]), ctx=make_ctx(lib=FakeLib()), expect={})
    fw = check(doc, "framework")
    assert fw["status"] == "skip" and fw["reason"] == "no framework in this stack"


def test_framework_without_gpu_passes_on_cpu_but_overall_is_cpu_only():
    ad = FakeAdapter()
    doc = run_mod.run_probe(opts(only=GPU_AND_FW), ctx=make_ctx(adapter=ad), expect=STACK)
    fw = check(doc, "framework")
    assert fw["status"] == "pass", fw
    assert fw["data"]["device"] == "cpu" and fw["data"]["gpu_skipped"] is True
    subs = {s["name"]: s["status"] for s in fw["data"]["subchecks"]}
    assert subs == {"version": "pass", "cuda": "pass", "cudnn": "pass", "cpu_matmul": "pass",
                    "device": "skip", "arch": "skip", "gpu_matmul": "skip", "gpu_conv": "skip"}
    assert ad.gpu_calls == 0
    assert doc["overall"] == "cpu-only"


def test_framework_without_gpu_and_require_gpu_fails():
    doc = run_mod.run_probe(opts(require_gpu=True, only=["framework"]),
                      ctx=make_ctx(adapter=FakeAdapter()), expect=STACK)
    assert check(doc, "framework")["status"] == "fail"
    assert doc["overall"] == "fail"


def test_framework_on_gpu_passes():
    lib = FakeLib(devices=[("NVIDIA Fake H100", (9, 0), 80 << 30)])
    doc = run_mod.run_probe(opts(only=GPU_AND_FW), ctx=make_ctx(lib=lib, adapter=FakeAdapter()),
                      expect=STACK)
    fw = check(doc, "framework")
    assert fw["status"] == "pass", fw
    subs = {s["name"]: s["status"] for s in fw["data"]["subchecks"]}
    assert subs["arch"] == subs["gpu_matmul"] == subs["device"] == "pass"
    assert subs["gpu_conv"] == "skip"
    assert doc["overall"] == "pass"


def test_framework_missing_arch_fails_with_the_reason():
    lib = FakeLib(devices=[("NVIDIA Fake H100", (9, 0), 80 << 30)])
    ad = FakeAdapter(arch=["sm_86"])
    fw = check(run_mod.run_probe(opts(), ctx=make_ctx(lib=lib, adapter=ad), expect=STACK), "framework")
    assert fw["status"] == "fail"
    assert "no kernel image for sm_90 in this build: arch list is [sm_86]" in fw["reason"]


def test_framework_arch_ok_only_via_ptx_is_recorded():
    lib = FakeLib(devices=[("NVIDIA Fake H100", (9, 0), 80 << 30)])
    ad = FakeAdapter(arch=["sm_80", "compute_80"])
    fw = check(run_mod.run_probe(opts(), ctx=make_ctx(lib=lib, adapter=ad), expect=STACK), "framework")
    arch = [s for s in fw["data"]["subchecks"] if s["name"] == "arch"][0]
    assert arch["status"] == "pass" and arch["via_ptx"] is True


@pytest.mark.parametrize("fw_name", ["jax", "onnxruntime"])
@pytest.mark.parametrize("sass, ptx, arch_status, fw_status", [(["8.0", "9.0"], [], "skip", "pass"),
                                                               (["8.0", "8.6"], [], "fail", "fail"),
                                                               (["8.0"], ["8.0"], "skip", "pass")])
def test_arch_falls_back_to_the_stacks_lists_when_the_framework_reports_none(fw_name, sass, ptx,
                                                                             arch_status, fw_status):
    """A framework that does not report its archs cannot confirm the GPU is covered: the stack's
    own lists may only predict a failure; a predicted fit is marked unverified, never a pass."""
    lib = FakeLib(devices=[("NVIDIA Fake H100", (9, 0), 80 << 30)])
    ad = FakeAdapter(name=fw_name, arch=None)
    stack = dict(STACK, framework=fw_name, sass_archs=sass, ptx_archs=ptx)
    fw = check(run_mod.run_probe(opts(only=GPU_AND_FW), ctx=make_ctx(lib=lib, adapter=ad),
                           expect=stack), "framework")
    arch = [s for s in fw["data"]["subchecks"] if s["name"] == "arch"][0]
    assert arch["status"] == arch_status
    assert "per the stack's sass_archs/ptx_archs" in arch["reason"]
    assert fw["status"] == fw_status
    if arch_status == "skip":
        assert arch["unverified"] is True and arch["reason"].startswith("unverified:")
        assert "arch" not in fw["reason"].split(":")[-1]  # not among the sub-checks that passed


def test_arch_not_reported_and_no_stack_lists_is_a_skip():
    lib = FakeLib(devices=[("NVIDIA Fake H100", (9, 0), 80 << 30)])
    fw = check(run_mod.run_probe(opts(only=GPU_AND_FW), ctx=make_ctx(lib=lib, adapter=FakeAdapter(arch=None)),
                           expect=STACK), "framework")
    arch = [s for s in fw["data"]["subchecks"] if s["name"] == "arch"][0]
    assert arch["status"] == "skip" and fw["status"] == "pass"


@pytest.mark.parametrize(
    "adapter_kw, expect_kw, needle",
    [
        ({"version": "2.6.0+cu128"}, {}, "torch version 2.6.0+cu128, the stack expects 2.7.1"),
        ({"cuda": "12.6"}, {}, "torch reports CUDA 12.6, the stack expects 12.8"),
        ({"cudnn": "9.1.0"}, {}, "torch reports cuDNN 9.1.0, the stack expects 9.7"),
        ({"cuda": None, "cudnn": None}, {}, "reports no CUDA"),
        ({}, {"cuda": None, "cudnn": None}, "built with CUDA 12.8 but the stack expects none"),
        ({"gpu_error": "CUDA driver too old"}, {}, "torch sees no GPU although the driver reports 1"),
        ({"bad_matmul": True}, {}, "GPU result differs from the CPU"),
        ({"import_error": ImportError("libcudnn.so.9: cannot open")}, {}, "cannot import torch"),
    ],
)
def test_framework_mismatches_fail(adapter_kw, expect_kw, needle):
    lib = FakeLib(devices=[("NVIDIA Fake H100", (9, 0), 80 << 30)])
    stack = dict(STACK, **expect_kw)
    doc = run_mod.run_probe(opts(), ctx=make_ctx(lib=lib, adapter=FakeAdapter(**adapter_kw)), expect=stack)
    fw = check(doc, "framework")
    assert fw["status"] == "fail", fw
    assert needle in fw["reason"]
    assert doc["overall"] == "fail"


def test_cpu_stack_on_a_gpu_host_is_cpu_only():
    lib = FakeLib(devices=[("NVIDIA Fake H100", (9, 0), 80 << 30)])
    ad = FakeAdapter(version="2.7.1+cpu", cuda=None, cudnn=None)
    doc = run_mod.run_probe(opts(), ctx=make_ctx(lib=lib, adapter=ad),
                      expect={"framework": "torch", "framework_version": "2.7.1", "cuda": None})
    fw = check(doc, "framework")
    assert fw["status"] == "pass" and fw["data"]["device"] == "cpu"
    assert doc["overall"] == "cpu-only"
