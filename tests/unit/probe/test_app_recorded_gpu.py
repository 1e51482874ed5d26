"""The recorded H100 run (``tests/gpu/recorded/h100_probe.json``) through envman's own code.

The recording is the probe's document from a real GPU run: torch 2.11.0+cu130 on one H100 80GB
HBM3, driver 580.159.04, inside a container (``host.in_container`` is true; the probe ran from the
image's virtual environment). These tests feed it to the host's report parser and re-run the
probe's aggregation and bench arithmetic over it, so a change to either that would judge this
run differently, or a documented figure (docs/performance.md) that no longer matches it, fails here.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from envman.images.build import CPU_ONLY, FAIL, PASS, judge_probe
from envman.matrix.load import load_matrix
from envman.probe import parse_output
from envman.probe.app import bench as bench_mod
from envman.probe.app import verdict as verdict_mod
from envman.stack.resolve import resolve

ROOT = Path(__file__).resolve().parents[3]
RECORDING = ROOT / "tests" / "gpu" / "recorded" / "h100_probe.json"


@pytest.fixture(scope="module")
def line() -> str:
    return RECORDING.read_text(encoding="utf-8").strip()


@pytest.fixture(scope="module")
def doc(line):
    return parse_output(line)


@pytest.fixture(scope="module")
def stack():
    """The stack the recording ran: torch 2.11.0, CUDA 13.0, from the shipped matrix."""
    return resolve(load_matrix(), "torch-2.11.0-cuda13.0")


def test_the_recording_is_one_probe_line_of_a_gpu_run(doc, line):
    assert "\n" not in line
    assert doc["overall"] == PASS
    assert doc["host"]["in_container"] is True
    assert [g["name"] for g in doc["gpus"]] == ["NVIDIA H100 80GB HBM3"]
    assert doc["expect"]["found"] is True


def test_the_host_judges_the_recording_as_a_pass(stack, line, doc):
    overall, reason, probe = judge_probe(stack, "framework chatter\n" + line + "\n", "", 0)
    assert (overall, reason) == (PASS, doc["reason"])
    assert probe == doc


@pytest.mark.parametrize(
    "change, needle",
    [
        (lambda d: d["expect"].update(found=False), "ran without the stack's expectations"),
        (lambda d: d["expect"]["stack"].update(framework_version="2.10.0"), "framework_version '2.10.0'"),
        (lambda d: d["expect"]["stack"].update(cuda="12.8"), "cuda '12.8' (not '13.0')"),
        (lambda d: d["expect"]["stack"].update(framework="jax"), "expectations are for another stack"),
        (lambda d: d.pop("expect"), "ran without the stack's expectations"),
    ],
)
def test_the_host_refuses_the_recording_without_matching_expectations(stack, doc, change, needle):
    bad = json.loads(json.dumps(doc))
    change(bad)
    overall, reason, _ = judge_probe(stack, json.dumps(bad), "", 0)
    assert overall == FAIL and needle in reason, reason


def test_the_host_refuses_the_recording_for_another_stack(stack, line):
    other = replace(stack, cuda="12.8")
    assert judge_probe(other, line, "", 0)[0] == FAIL


def test_the_host_reports_broken_output(stack, line):
    assert judge_probe(stack, "", "Traceback\nImportError: x", 1)[:2] == (
        FAIL, "probe printed no result (exit 1): the probe printed nothing on stdout; stderr: ImportError: x")
    assert judge_probe(stack, line[:-5], "", 1)[0] == FAIL
    assert judge_probe(stack, line, "", 0, timed_out=True, timeout=900)[:2] == (FAIL, "probe timed out after 900 s")


def test_aggregation_over_the_recorded_checks_gives_the_recorded_verdict(doc):
    assert verdict_mod.aggregate(doc["checks"], gpu_present=True) == (doc["overall"], doc["reason"])
    assert verdict_mod.aggregate(doc["checks"], gpu_present=True, require_gpu=True) == (doc["overall"], doc["reason"])


def test_one_failed_recorded_check_fails_the_run(stack, doc):
    for i, c in enumerate(doc["checks"]):
        bad = json.loads(json.dumps(doc))
        bad["checks"][i]["status"] = "fail"
        overall, reason = verdict_mod.aggregate(bad["checks"], gpu_present=True)
        assert overall == FAIL and reason.startswith(c["name"] + ": ")
        bad["overall"], bad["reason"] = overall, reason
        assert judge_probe(stack, json.dumps(bad), "", 1)[0] == FAIL


def test_without_the_gpu_the_recorded_checks_are_cpu_only(doc):
    assert verdict_mod.aggregate(doc["checks"], gpu_present=False)[0] == CPU_ONLY
    assert verdict_mod.aggregate(doc["checks"], gpu_present=False, require_gpu=True)[0] == FAIL


def test_bench_arithmetic_over_the_recording(doc):
    bench = doc["bench"]
    check = next(c for c in doc["checks"] if c["name"] == "bench")
    assert bench_mod.bench_reason(bench) == check["reason"]
    assert bench_mod.datasheet_fractions(bench, bench["datasheet"]) == bench["fraction_of_datasheet"]


def test_kernel_result_of_the_recording_is_exact(doc):
    kernel = next(c for c in doc["checks"] if c["name"] == "kernel")
    dev = kernel["data"]["devices"][0]
    assert dev["max_abs_error"] == 0.0
    assert "1048576 results exact" in kernel["reason"]


def test_documented_figures_are_the_recordings(doc):
    text = " ".join((ROOT / "docs" / "performance.md").read_text(encoding="utf-8").split())
    m = re.search(
        r"device copy (\d+) GB/s \((0\.\d+) of datasheet\), pinned H2D/D2H ([\d.]+)/([\d.]+) GB/s, "
        r"FP32 matmul ([\d.]+) TFLOP/s \((0\.\d+)\), FP16 (\d+) TFLOP/s \((0\.\d+)\)", text)
    assert m, "the H100 figures of docs/performance.md are missing or reworded"
    b, f = doc["bench"], doc["bench"]["fraction_of_datasheet"]
    assert int(m.group(1)) == round(b["device_bandwidth_gb_s"])
    assert float(m.group(2)) == round(f["bandwidth_gb_s"], 2)
    assert float(m.group(3)) == round(b["h2d_gb_s"], 1) and float(m.group(4)) == round(b["d2h_gb_s"], 1)
    assert float(m.group(5)) == round(b["fp32_tflops"], 1) and float(m.group(6)) == round(f["fp32_tflops"], 2)
    assert int(m.group(7)) == round(b["fp16_tflops"]) and float(m.group(8)) == round(f["fp16_tflops"], 2)
    assert "kernel exact over 1,048,576 elements" in text
    assert f"(driver {doc['checks'][0]['data']['release']})" in text


# ------------------------------------------------------------------------------------------
# The same test on an H200 (tests/gpu/test_probe_gpu.py with ENVMAN_PROBE_RECORD, 2026-11-26:
# torch 2.11.0+cu130 in the machine's own container, driver 580.159.04), with the tensor-core loop
# ------------------------------------------------------------------------------------------

H200 = ROOT / "tests" / "gpu" / "recorded" / "h200_probe.json"


def test_the_h200_recording_is_judged_a_pass_for_its_stack(stack):
    line = H200.read_text(encoding="utf-8").strip()
    doc = parse_output(line)
    assert "\n" not in line and [g["name"] for g in doc["gpus"]] == ["NVIDIA H200"]
    assert judge_probe(stack, line, "", 0)[:2] == (PASS, doc["reason"])
    assert verdict_mod.aggregate(doc["checks"], gpu_present=True, require_gpu=True) == (doc["overall"], doc["reason"])


def test_the_h200_bench_arithmetic_and_its_datasheet_fractions():
    doc = parse_output(H200.read_text(encoding="utf-8"))
    bench = doc["bench"]
    check = next(c for c in doc["checks"] if c["name"] == "bench")
    assert bench_mod.bench_reason(bench) == check["reason"]
    assert bench_mod.datasheet_fractions(bench, bench["datasheet"]) == bench["fraction_of_datasheet"]
    assert set(bench["fraction_of_datasheet"]) == {"bandwidth_gb_s", "fp32_tflops", "fp16_tflops", "fp16_mma"}
    # the matrix's H200 is the datasheet the test used
    gpu = load_matrix().gpu_index.lookup("NVIDIA H200")
    assert gpu is not None
    assert bench["datasheet"] == {"bandwidth_gb_s": gpu.bandwidth_gb_s, "fp32_tflops": gpu.fp32_tflops,
                                  "fp16_tflops": gpu.fp16_tflops}
    # cuBLAS's fp16 matmul (wgmma) beats the mma.sync loop; both below the datasheet
    assert bench["fp16_mma_tflops"] < bench["fp16_tflops"] < bench["datasheet"]["fp16_tflops"]
    assert bench["method"]["mma"]["wrong_results"] == 0
