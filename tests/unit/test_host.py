"""Host detection replayed from recorded NVML and nvidia-smi outputs (tests/data/host/)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from envman.host import (
    NONE, NVML, SMI, SMI_FIELDS, SMI_FIELDS_OLD, HostFacts, NvmlUnavailable, detect, from_nvidia_smi, from_nvml,
    matrix_gpu_table, name_variants, parse_smi_csv, smi_command, what_if,
)

HOSTS = Path(__file__).resolve().parents[1] / "data" / "host"


def recorded(name: str) -> dict:
    return json.loads((HOSTS / f"{name}.json").read_text())


class FakeNvml:
    """Replays one recorded host through the pynvml calls envman makes."""

    class NVMLError(Exception):
        pass

    def __init__(self, rec: dict) -> None:
        self.rec = rec
        self.initialised = False

    def nvmlInit(self):
        if "error" in self.rec:
            # pynvml's subclasses print like these (e.g. "NVML Shared Library Not Found").
            message = {"NVMLError_LibraryNotFound": "NVML Shared Library Not Found",
                       "NVMLError_DriverNotLoaded": "Driver Not Loaded"}[self.rec["error"]]
            raise self.NVMLError(message)
        self.initialised = True

    def nvmlShutdown(self):
        self.initialised = False

    def nvmlSystemGetDriverVersion(self):
        return self.rec["driver"]

    def nvmlSystemGetCudaDriverVersion(self):
        return self.rec["cuda_driver_version"]

    def nvmlDeviceGetCount(self):
        return len(self.rec["devices"])

    def nvmlDeviceGetHandleByIndex(self, i):
        return self.rec["devices"][i]

    def nvmlDeviceGetName(self, h):
        return h["name"].encode()  # older pynvml returned bytes; envman decodes both

    def nvmlDeviceGetUUID(self, h):
        return h["uuid"]

    def nvmlDeviceGetCudaComputeCapability(self, h):
        return tuple(h["cc"])

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(total=h["memory_total"])


def smi_from(rec: dict):
    calls = []

    def run(cmd):
        calls.append(cmd)
        if rec["nvidia_smi"] is None:
            return None
        fields = cmd[1].split("=", 1)[1]
        r = rec["nvidia_smi"][fields]
        return (r["rc"], r["stdout"], r["stderr"])

    run.calls = calls
    return run


def no_nvml():
    raise NvmlUnavailable("NVML Shared Library Not Found")


GPU_TABLE = {"GeForce RTX 3090": "8.6", "GeForce RTX 4090": "8.9", "GeForce GTX 1080 Ti": "6.1", "H100 80GB HBM3": "9.0"}


def table(name):
    for n in name_variants(name):
        if n in GPU_TABLE:
            return GPU_TABLE[n]
    return None


def test_h100_through_nvml():
    nvml = FakeNvml(recorded("h100-570")["nvml"])
    facts = detect(nvml=lambda: nvml, smi=lambda cmd: pytest.fail("nvidia-smi must not run when NVML works"))
    assert facts.source == NVML and facts.has_gpu
    assert facts.driver == "570.124.06" and facts.cuda_driver == "12.8"
    (g,) = facts.gpus
    assert (g.index, g.name, g.compute_cap, g.memory_mib) == (0, "NVIDIA H100 80GB HBM3", "9.0", 81559)
    assert g.uuid.startswith("GPU-")
    assert not nvml.initialised  # shut down again
    assert facts.summary() == "driver 570.124.06, CUDA 12.8 (via nvml): GPU 0 (NVIDIA H100 80GB HBM3, sm_90)"


@pytest.mark.parametrize("host", ["h100-570", "rtx3090-470", "mixed-535"])
def test_nvidia_smi_fallback_agrees_with_nvml(host):
    rec = recorded(host)
    via_nvml = from_nvml(FakeNvml(rec["nvml"]))
    via_smi = detect(nvml=no_nvml, smi=smi_from(rec), gpu_table=table)
    assert via_smi.source == SMI
    assert via_smi.driver == via_nvml.driver
    assert via_smi.gpus == via_nvml.gpus  # names, UUIDs, capabilities, memory


def test_old_driver_nvidia_smi_has_no_compute_cap_field():
    rec = recorded("rtx3090-470")
    run = smi_from(rec)
    facts = from_nvidia_smi(run)
    assert [c[1] for c in run.calls] == [smi_command(SMI_FIELDS)[1], smi_command(SMI_FIELDS_OLD)[1]]
    assert facts.driver == "470.57.02" and facts.gpus[0].compute_cap is None
    assert "driver >= 510" in facts.warnings[0]
    filled = detect(nvml=no_nvml, smi=smi_from(rec), gpu_table=table)
    assert filled.gpus[0].compute_cap == "8.6"


def test_mixed_host_lists_both_gpus_in_order():
    facts = from_nvml(FakeNvml(recorded("mixed-535")["nvml"]))
    assert [(g.index, g.name, g.compute_cap) for g in facts.gpus] == [
        (0, "NVIDIA GeForce RTX 4090", "8.9"), (1, "NVIDIA GeForce GTX 1080 Ti", "6.1")]
    assert facts.cuda_driver == "12.2"


def test_no_gpu_host_says_so_plainly():
    rec = recorded("nogpu")
    facts = detect(nvml=lambda: FakeNvml(rec["nvml"]), smi=smi_from(rec))
    assert facts.source == NONE and not facts.has_gpu and facts.gpus == ()
    assert facts.summary() == ("no NVIDIA GPU on this host (NVML: NVML Shared Library Not Found; "
                               "nvidia-smi: not installed)")
    assert facts.to_json()["has_gpu"] is False


def test_driver_not_loaded_reports_both_reasons():
    rec = recorded("driver-not-loaded")
    facts = detect(nvml=lambda: FakeNvml(rec["nvml"]), smi=smi_from(rec))
    assert facts.source == NONE
    assert "Driver Not Loaded" in facts.note and "couldn't communicate with the NVIDIA driver" in facts.note


def test_parse_smi_csv_handles_na_and_rejects_garbage():
    (g,) = parse_smi_csv("NVIDIA A100-SXM4-40GB, 535.104.05, [N/A], [N/A], [N/A]\n")
    assert g.compute_cap is None and g.memory_mib is None and g.uuid is None
    with pytest.raises(ValueError):
        parse_smi_csv("this is not csv from nvidia-smi\n")
    assert isinstance(from_nvidia_smi(lambda cmd: (0, "garbage\n", "")), str)


def test_pynvml_itself_is_used_when_importable(monkeypatch):
    import sys

    fake = FakeNvml(recorded("h100-570")["nvml"])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert detect(smi=lambda cmd: None).driver == "570.124.06"


def test_name_variants_and_matrix_table(mini):
    assert name_variants("NVIDIA GeForce RTX 3090") == ["NVIDIA GeForce RTX 3090", "GeForce RTX 3090", "RTX 3090"]
    lookup = matrix_gpu_table(mini)
    assert lookup("NVIDIA GeForce RTX 3090") == "8.6"
    assert lookup("NVIDIA Unknown Board") is None


def test_what_if_host():
    h = what_if("535.104.05", "8.6", "GeForce RTX 3090")
    assert h.has_gpu and h.source == "what-if" and h.gpus[0].compute_cap == "8.6"
    assert isinstance(h, HostFacts) and "what-if" in h.summary()
