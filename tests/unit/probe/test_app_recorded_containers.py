"""The probe inside OCI containers on real H200s and an H100, recorded by ``scripts/gpu-evidence run``.

``tests/gpu/recorded/h200_*.json`` come from one H200 machine (driver 580.159.04, Firecracker
kernel 6.18.44): the probe in a container started by ``runc`` and by ``ch-run`` from the same
bundle, the GPU given through envman's own CDI spec (``h200_cdi_spec.json``), and the probe run
natively on that machine as the baseline (``h200_native_probe.json``, torch 2.11 there).
``h200b_*`` come from a second H200 machine: one GPU by index through runc, by UUID through
ch-run, and the control: both runtimes without the CDI edits (``*_no_cdi.json``), which must fail.
``h100_*`` come from an H100 machine (same driver), with the control; ``h100_cuda112_*`` are the
same runs with the old-stack userland in the container: CUDA 11.2.2's runtime (``pack --cuda 11.2``),
a release older than the GPU and the driver, whose nvidia/cuda bases NVIDIA deleted.

Each recording is ``{"evidence": provenance, "probe": the probe's document}``. These tests feed
the documents through the host's parser and judge, re-apply the recorded spec with envman's CDI
code and compare with the OCI config the run used, and check the bench figures against the
matrix's datasheet and against docs/gpu-evidence.md.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from envman.engine import cdi
from envman.images.build import FAIL, PASS, judge_probe
from envman.matrix.load import load_matrix
from envman.probe import parse_output
from envman.probe.app import bench as bench_mod
from envman.probe.app import verdict as verdict_mod

ROOT = Path(__file__).resolve().parents[3]
RECORDED = ROOT / "tests" / "gpu" / "recorded"
#: the GPU runs: (recording, runtime, CDI device given, spec it came from, GPU model, CUDA runtime)
H200, H100 = "NVIDIA H200", "NVIDIA H100 80GB HBM3"
RUNS = [
    ("h200_runc_probe.json", "runc", "all", "h200_cdi_spec.json", H200, "13.0"),
    ("h200_chrun_probe.json", "ch-run", "all", "h200_cdi_spec.json", H200, "13.0"),
    ("h200b_runc_device0.json", "runc", "0", "h200b_cdi_spec.json", H200, "13.0"),
    ("h200b_chrun_device_uuid.json", "ch-run", "GPU-7edc4735-e4ad-bc5e-f227-d20f621b9447", "h200b_cdi_spec.json",
     H200, "13.0"),
    ("h200c_runc_probe.json", "runc", "all", "h200c_cdi_spec.json", H200, "13.0"),
    ("h200c_chrun_probe.json", "ch-run", "all", "h200c_cdi_spec.json", H200, "13.0"),
    ("h100_runc_probe.json", "runc", "all", "h100_cdi_spec.json", H100, "13.0"),
    ("h100_chrun_probe.json", "ch-run", "all", "h100_cdi_spec.json", H100, "13.0"),
    ("h100_cuda112_runc_probe.json", "runc", "all", "h100_cdi_spec.json", H100, "11.2"),
    ("h100_cuda112_chrun_probe.json", "ch-run", "all", "h100_cdi_spec.json", H100, "11.2"),
]
IDS = [r[0] for r in RUNS]
#: where each CUDA runtime of a bundle sits in its root file system
CUDART = {"13.0": "/usr/local/cuda-13.0/lib64/libcudart.so.13",
          "11.2": "/usr/local/cuda-11.2/lib64/libcudart.so.11.2.152"}
CONTROLS = [("h200_runc_no_cdi.json", "runc", H200, "13.0"), ("h200_chrun_no_cdi.json", "ch-run", H200, "13.0"),
            ("h100_runc_no_cdi.json", "runc", H100, "13.0"), ("h100_chrun_no_cdi.json", "ch-run", H100, "13.0"),
            ("h100_cuda112_runc_no_cdi.json", "runc", H100, "11.2"),
            ("h100_cuda112_chrun_no_cdi.json", "ch-run", H100, "11.2")]
INJECTED_LIBCUDA = "/usr/local/nvidia/lib64/libcuda.so.1"


def load(name: str) -> dict:
    return json.loads((RECORDED / name).read_text(encoding="utf-8"))


def evidence_stack(record: dict) -> SimpleNamespace:
    """The stack the bundle carries (no framework, its CUDA runtime), in the shape judge_probe reads."""
    stack = record["evidence"]["stack"]
    return SimpleNamespace(to_json=lambda: {"framework": stack["framework"],
                                            "framework_version": stack["framework_version"], "cuda": stack["cuda"]})


@pytest.mark.parametrize("name, runtime, device, spec_name, model, cuda", RUNS, ids=IDS)
def test_each_container_run_passed_on_the_gpu_and_the_host_judges_it_so(name, runtime, device, spec_name, model, cuda):
    record = load(name)
    ev, doc = record["evidence"], record["probe"]
    line = json.dumps(doc)
    assert parse_output("runtime chatter\n" + line + "\n") == doc
    assert judge_probe(evidence_stack(record), line, "", ev["exit_status"])[:2] == (PASS, doc["reason"])
    assert verdict_mod.aggregate(doc["checks"], gpu_present=True, require_gpu=True) == (doc["overall"], doc["reason"])
    statuses = {c["name"]: c["status"] for c in doc["checks"]}
    assert statuses == {"driver": "pass", "runtime": "pass", "kernel": "pass", "framework": "skip", "bench": "pass"}
    assert ev["runtime"] == runtime and ev["exit_status"] == 0
    assert ev["cdi_device"] == f"nvidia.com/gpu={device}"
    assert [g["name"] for g in doc["gpus"]] == [model] == [g["model"] for g in ev["gpus"]]
    assert doc["driver_version"] == "13.0" and ev["driver_version"] == "580.159.04"
    assert re.fullmatch(r"[0-9a-f]{40}", ev["envman_commit"]) and ev["date"].startswith("2026-")


@pytest.mark.parametrize("name, runtime, device, spec_name, model, cuda", RUNS, ids=IDS)
def test_the_probe_ran_inside_the_container_on_the_injected_driver(name, runtime, device, spec_name, model, cuda):
    record = load(name)
    ev, doc = record["evidence"], record["probe"]
    host = doc["host"]
    assert host["in_container"] is True
    if runtime == "runc":  # runc gives the container its own hostname; ch-run keeps the machine's
        assert host["hostname"] == "envman-evidence"
    assert "root is the folder $WORK/rootfs of its file system" in host["container_signals"]
    if runtime == "ch-run":
        assert "CH_RUNNING (ch-run)" in host["container_signals"]
    # the bundle's Python, not the machine's (3.12 with torch)
    assert doc["python"].startswith("3.11.") and host["python_executable"] == "/usr/bin/python3"
    # libcuda came from where the CDI spec mounted it, and the spec mounted the machine's own file
    driver = next(c for c in doc["checks"] if c["name"] == "driver")["data"]
    assert driver["library"] == INJECTED_LIBCUDA and driver["release"] == ev["driver_version"]
    spec = cdi.check_spec(load(spec_name))
    mounts = {m["containerPath"]: m["hostPath"] for m in spec["containerEdits"]["mounts"]}
    assert mounts[INJECTED_LIBCUDA] == f"/usr/local/nvidia/lib64/libcuda.so.{ev['driver_version']}"
    assert mounts[INJECTED_LIBCUDA] in ev["injected_libraries"]
    # the CUDA runtime is the image's, working against the injected driver
    runtime_check = next(c for c in doc["checks"] if c["name"] == "runtime")["data"]
    assert runtime_check["matching"] == [CUDART[cuda]]
    (found,) = runtime_check["found"]
    assert found["query"]["loaded"] == CUDART[cuda] and found["query"]["device_count"] == 1
    assert found["query"]["version"] == int(cuda.split(".")[0]) * 1000 + int(cuda.split(".")[1]) * 10
    assert doc["expect"]["found"] is True and doc["expect"]["stack"]["cuda"] == cuda == ev["stack"]["cuda"]
    if runtime == "ch-run":  # runc's environment is in its config.json, not on its command line
        assert f"--set-env=CUDA_VERSION={cuda}" in ev["command"]


@pytest.mark.parametrize("name, runtime, device, spec_name, model, cuda", [r for r in RUNS if r[1] == "runc"],
                         ids=[r[0] for r in RUNS if r[1] == "runc"])
def test_envmans_cdi_code_gives_the_oci_config_the_runc_run_used(name, runtime, device, spec_name, model, cuda):
    record = load(name)
    spec = cdi.check_spec(load(spec_name))
    config = cdi.apply_to_oci({"process": {"env": []}, "mounts": []}, spec, [device],
                              stat_fn=lambda path: pytest.fail(f"the spec names every number; {path} was stat'ed"))
    assert config["linux"]["devices"] == record["evidence"]["oci_devices"]
    assert config["mounts"] == record["evidence"]["oci_mounts"]
    paths = [d["path"] for d in config["linux"]["devices"]]
    assert paths == ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-caps/nvidia-cap1",
                     "/dev/nvidia-caps/nvidia-cap2", "/dev/nvidia0"]


def test_the_recorded_specs_name_each_gpu_by_index_uuid_and_all():
    for name, uuid in (("h200_cdi_spec.json", "GPU-6dfc036b-e0c2-6ae4-1283-45954a500fb7"),
                       ("h200b_cdi_spec.json", "GPU-7edc4735-e4ad-bc5e-f227-d20f621b9447"),
                       ("h200c_cdi_spec.json", "GPU-344a91d1-8a67-8c10-7320-3e39f3672a46"),
                       ("h100_cdi_spec.json", "GPU-c15fda37-a218-90d9-adc6-a26b6373b6a5")):
        spec = cdi.check_spec(load(name))
        assert [d["name"] for d in spec["devices"]] == ["0", uuid, "all"]


@pytest.mark.parametrize("name, runtime, model, cuda", CONTROLS, ids=[c[0] for c in CONTROLS])
def test_without_the_cdi_edits_the_same_container_on_the_same_gpu_machine_fails(name, runtime, model, cuda):
    record = load(name)
    ev, doc = record["evidence"], record["probe"]
    assert ev["runtime"] == runtime and ev["cdi_device"] is None and ev["cdi_error"].startswith("--no-cdi")
    assert [g["model"] for g in ev["gpus"]] == [model]  # the GPU was there
    assert ev["stack"]["cuda"] == cuda
    assert doc["overall"] == FAIL and doc["gpus"] == []
    assert judge_probe(evidence_stack(record), json.dumps(doc), "", ev["exit_status"])[0] == FAIL
    for c in doc["checks"]:
        if c["name"] in ("driver", "kernel", "bench"):
            assert c["status"] == "fail" and c["reason"].startswith("libcuda.so.1 not found")


def _bench(name: str) -> dict:
    return load(name)["probe"]["bench"]


def test_bench_arithmetic_and_reasons_over_the_recordings():
    for name, *_ in RUNS:
        doc = load(name)["probe"]
        check = next(c for c in doc["checks"] if c["name"] == "bench")
        assert bench_mod.bench_reason(doc["bench"]) == check["reason"]
        mma = doc["bench"]["method"]["mma"]
        assert mma["wrong_results"] == 0 and mma["expected_per_thread"] == 32.0 * mma["iters"]
        assert mma["blocks"] == 4 * doc["gpus"][0]["multiprocessors"] == 4 * 132
        # the figure is the arithmetic of the recorded launch
        warps = mma["blocks"] * mma["threads_per_block"] // 32
        assert doc["bench"]["fp16_mma_tflops"] == pytest.approx(warps * mma["iters"] * 8 * 4096 / (mma["ms"] / 1e3) / 1e12)


#: per GPU model: its datasheet (bandwidth GB/s, dense FP16 TFLOP/s), the native run on such a
#: machine, and the container runs to hold against it
AGREEMENT = [
    (H200, (4800, 989), "h200_native_probe.json", ("h200_runc_probe.json", "h200_chrun_probe.json")),
    (H100, (3350, 989), "h100_probe.json", ("h100_runc_probe.json", "h100_chrun_probe.json",
                                            "h100_cuda112_runc_probe.json", "h100_cuda112_chrun_probe.json")),
]


@pytest.mark.parametrize("model, datasheet, native_name, names", AGREEMENT, ids=[a[0] for a in AGREEMENT])
def test_container_and_native_figures_agree_and_sit_below_the_datasheet(model, datasheet, native_name, names):
    gpu = load_matrix().gpu_index.lookup(model)
    assert gpu is not None and (gpu.bandwidth_gb_s, gpu.fp16_tflops) == datasheet
    native = parse_output((RECORDED / native_name).read_text())["bench"]
    assert native["device_name"] == model
    for name in names:
        b = _bench(name)
        assert b["device_name"] == model
        for key in ("device_bandwidth_gb_s", "h2d_gb_s", "d2h_gb_s", "fp16_mma_tflops"):
            if native.get(key) is not None:  # the H100's native run predates the mma.sync loop
                assert b[key] == pytest.approx(native[key], rel=0.05), (name, key)  # a container costs nothing here
        assert 0.5 < b["device_bandwidth_gb_s"] / gpu.bandwidth_gb_s < 1.0
        assert 0.5 < b["fp16_mma_tflops"] / gpu.fp16_tflops < 1.0
        assert b["fp16_tflops"] is None and b["skipped"]["fp16_tflops"].startswith("needs a framework")
        # torch's fp16 matmul (cuBLAS, wgmma on Hopper) beats the mma.sync loop: its figure is the peak
        assert native["fp16_tflops"] > b["fp16_mma_tflops"]


def test_documented_figures_are_the_recordings():
    text = " ".join((ROOT / "docs" / "gpu-evidence.md").read_text(encoding="utf-8").split())
    native = parse_output((RECORDED / "h200_native_probe.json").read_text())["bench"]
    for label, b in (("runc", _bench("h200_runc_probe.json")), ("ch-run", _bench("h200_chrun_probe.json")),
                     ("native", native)):
        row = (f"| {label} | {round(b['device_bandwidth_gb_s'])} | {b['h2d_gb_s']:.1f} | {b['d2h_gb_s']:.1f} | "
               f"{b['fp16_mma_tflops']:.1f} |")
        assert row in text, row
    assert f"{native['fp16_tflops']:.1f} TFLOP/s" in text
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    for label, name in (("in runc", "h200_runc_probe.json"), ("in ch-run", "h200_chrun_probe.json")):
        b = _bench(name)
        row = (f"| {label} | {round(b['device_bandwidth_gb_s'])} GB/s ({b['device_bandwidth_gb_s'] / 4800:.2f}) | "
               f"{b['fp16_mma_tflops']:.1f} TFLOP/s ({b['fp16_mma_tflops'] / 989:.2f}) |")
        assert row in readme, row


def test_the_later_ch_run_recording_bound_only_read_only_views_of_the_driver_files():
    """ch-run 0.31 binds read-write; since envman 08ad4eb the script hands it read-only bind mounts
    ($WORK/ro/N) of the files the spec names. The first recordings (h200_, h200b_) predate that."""
    record = load("h200c_chrun_probe.json")
    ev = record["evidence"]
    assert ev["envman_commit"].startswith("08ad4eb") and ev["binds_read_only"] is True
    spec = cdi.check_spec(load("h200c_cdi_spec.json"))
    binds = [a[2:] for a in ev["command"] if a.startswith("-b")]
    assert len(binds) == len(spec["containerEdits"]["mounts"])
    for i, (bind, mount) in enumerate(zip(binds, spec["containerEdits"]["mounts"])):
        assert bind == f"$WORK/ro/{i}:{mount['containerPath']}"
    for old in ("h200_chrun_probe.json", "h200b_chrun_device_uuid.json"):
        assert "binds_read_only" not in load(old)["evidence"]


@pytest.mark.parametrize("name", ["h100_cuda112_runc_probe.json", "h100_cuda112_chrun_probe.json"])
def test_the_old_stack_userland_runs_on_a_newer_driver_and_a_newer_gpu(name):
    """CUDA 11.2's runtime (2021; NVIDIA deleted its nvidia/cuda bases) in the container, the 580
    driver (CUDA 13.0) and a Hopper GPU (sm_90, first targeted by CUDA 11.8) under it: the old
    runtime loads against the injected driver, reports itself and counts the GPU, and the probe's
    kernels (PTX, compiled by the driver) pass. This is the compatibility the rebuilt old bases rely on."""
    record = load(name)
    ev, doc = record["evidence"], record["probe"]
    checks = {c["name"]: c for c in doc["checks"]}
    (found,) = checks["runtime"]["data"]["found"]
    assert found["query"] == {"rc": 0, "version": 11020, "device_count_rc": 0, "device_count": 1,
                              "device_count_error": "cudaSuccess", "loaded": CUDART["11.2"]}
    assert found["version"] == "11.2" and found["version_from"] == "cudaRuntimeGetVersion"
    assert checks["driver"]["data"]["driver_version_int"] == 13000 > found["query"]["version"]
    assert [g["cc"] for g in doc["gpus"]] == ["9.0"]
    assert checks["kernel"]["status"] == "pass" and checks["bench"]["status"] == "pass"
    assert ev["stack"]["name"].startswith("gpu-evidence (no framework; NVIDIA's CUDA runtime 11.2.152")
    # the same bundle without the spec's edits: the runtime is there, but finds no driver
    control = load(name.replace("_probe.json", "_no_cdi.json"))["probe"]
    (ctl,) = next(c for c in control["checks"] if c["name"] == "runtime")["data"]["found"]
    assert ctl["query"]["rc"] == 35 and control["overall"] == FAIL  # cudaErrorInsufficientDriver: no libcuda
