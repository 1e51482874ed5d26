"""Tests of ``envman/run/preflight.py``, moved unchanged from the former ``test_runner.py``
(which tested several modules)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from envman.project.file import GpuRequest
from envman.stack.resolve import resolve
from envman.engine.api import EngineInfo
from envman.run.preflight import ImageState, preflight, suggest_stack

from tests.unit.run.test_plan import GOOD_IMAGE, NOGPU, NVIDIA, dirs, errors, host  # noqa: F401 (shared with that file)


NO_RUNTIME = EngineInfo(server_version="27.0", runtimes=("runc",))


def warnings_(problems):
    return [p.message for p in problems if p.level == "warning"]


def test_driver_too_old_names_an_older_cuda_stack(mini):
    stack = resolve(mini, "torch-2.4-cuda12.4")
    h = host("rtx3090-470")
    probs = preflight(stack, GpuRequest("all"), host=h, engine_info=NVIDIA, image=GOOD_IMAGE,
                      suggest=lambda s, hh, g: suggest_stack(mini, s, hh, g))
    assert errors(probs) == [
        "driver 470.57.02 is older than 525.60.13 that CUDA 12.4 needs: upgrade the driver or use torch-2.4.1-cuda11.8"]


def test_arch_unsupported_on_one_gpu_of_a_mixed_host(mini):
    stack = replace(resolve(mini, "torch-2.4-cuda12.4"), sass_archs=("7.0", "8.0", "8.6", "9.0"), ptx_archs=("9.0",))
    probs = preflight(stack, GpuRequest("all"), host=host("mixed-535"), engine_info=NVIDIA, image=GOOD_IMAGE)
    (msg,) = errors(probs)
    assert msg.startswith("GPU 1 (NVIDIA GeForce GTX 1080 Ti, sm_61): torch-2.4.1-cuda12.4-py3.10 has no kernel image")
    assert msg.endswith("or use only --gpus device=0")
    # the GPU that works, asked for alone, passes
    assert errors(preflight(stack, GpuRequest("devices", devices=("0",)), host=host("mixed-535"),
                            engine_info=NVIDIA, image=GOOD_IMAGE)) == []


def test_jit_only_is_a_warning_not_a_failure(mini):
    stack = resolve(mini, "torch-1.0-cuda10")  # SASS up to sm_75, PTX compute_50
    probs = preflight(stack, GpuRequest("all"), host=host("h100-570"), engine_info=NVIDIA, image=GOOD_IMAGE)
    assert errors(probs) == []
    (w,) = warnings_(probs)
    assert "JIT-compiling PTX" in w and "sm_90" in w


def test_gpus_requested_without_a_gpu_fail_with_the_cpu_fix(mini):
    stack = resolve(mini, "torch-2.4-cuda12.4")
    probs = preflight(stack, GpuRequest("all"), host=NOGPU, engine_info=NO_RUNTIME, image=GOOD_IMAGE)
    msgs = errors(probs)
    assert msgs[0].startswith("GPUs requested (--gpus all) but no NVIDIA GPU on this host (NVML: ")
    assert all("--no-gpu" in m for m in msgs)
    assert "NVIDIA Container Toolkit" in msgs[1]
    # asked for a CPU run: no GPU check at all
    assert preflight(stack, None, host=None, engine_info=None, image=GOOD_IMAGE) == []


def test_engine_without_runtime_but_with_cdi(tmp_path, mini):
    stack = resolve(mini, "torch-2.4-cuda12.4")
    (tmp_path / "cdi").mkdir()
    info = replace(NO_RUNTIME, cdi_spec_dirs=(str(tmp_path / "cdi"),))
    assert info.gpu_mechanism() is None
    (tmp_path / "cdi" / "nvidia.yaml").write_text("cdiVersion: 0.5.0\n")
    assert info.gpu_mechanism() == "cdi" and NVIDIA.gpu_mechanism() == "runtime"
    assert errors(preflight(stack, GpuRequest("all"), host=host("h100-570"), engine_info=info, image=GOOD_IMAGE)) == []


def test_more_gpus_than_the_host_has(mini):
    stack = resolve(mini, "torch-2.4-cuda12.4")
    h = host("h100-570")
    assert "2 GPUs requested but this host has 1" in errors(
        preflight(stack, GpuRequest("count", count=2), host=h, engine_info=NVIDIA, image=GOOD_IMAGE))[0]
    assert "GPU device 3 does not exist" in errors(
        preflight(stack, GpuRequest("devices", devices=("3",)), host=h, engine_info=NVIDIA, image=GOOD_IMAGE))[0]


@pytest.mark.parametrize("image, level, text", [
    (ImageState("envman/s:latest", None), "error", "build it with envman build torch-2.4.1-cpu-py3.10"),
    (ImageState("envman/s:latest", "sha256:1", None), "error", "run envman smoke torch-2.4.1-cpu-py3.10"),
    (ImageState("envman/s:latest", "sha256:1", "fail", "kernel failed"), "error", "says fail (kernel failed)"),
    (ImageState("envman/s:latest", "sha256:1", "cpu-only"), None, ""),
])
def test_image_and_smoke_checks(mini, image, level, text):
    stack = resolve(mini, "torch-2.4-cpu")
    probs = preflight(stack, None, host=None, engine_info=None, image=image)
    if level is None:
        assert probs == []
    else:
        (p,) = probs
        assert p.level == level and text in p.message and "\n" not in p.message


def test_cpu_only_smoke_warns_when_gpus_are_used(mini):
    stack = resolve(mini, "torch-2.4-cuda12.4")
    img = ImageState("envman/s:latest", "sha256:1", "cpu-only")
    (w,) = warnings_(preflight(stack, GpuRequest("all"), host=host("h100-570"), engine_info=NVIDIA, image=img))
    assert "smoke-tested without a GPU" in w
