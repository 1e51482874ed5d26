"""``scripts/gpu-evidence`` on a machine without a GPU: the bundle is packed for real (Debian's
packages, NVIDIA's CUDA runtime wheel from PyPI, runc and ch-run), and the same containers that
passed on an H200 (docs/gpu-evidence.md) end here in the probe's clean GPU failure, never a pass.

Needs root, runc, ch-run, apt-get and PyPI: .ci/run installs them; this fails in CI when one is
missing and skips elsewhere."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import in_ci

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu-evidence"
pytestmark = [pytest.mark.pypi, pytest.mark.slow]


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root (runc and ch-run start containers from a root-owned file system)"
    for tool in ("runc", "ch-run", "apt-get", "dpkg-deb", "ldd"):
        if not (shutil.which(tool) or os.path.exists(f"/usr/sbin/{tool}")):
            return f"{tool} is not installed"
    if Path("/proc/driver/nvidia/gpus").is_dir():
        return "this machine has an NVIDIA GPU: the no-GPU failure cannot be shown here"
    return None


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    reason = _missing()
    if reason:
        if in_ci():
            pytest.fail(f"CI needs this for the GPU-evidence bundle: {reason}")
        pytest.skip(reason)
    path = tmp_path_factory.mktemp("evidence") / "bundle"
    r = subprocess.run([sys.executable, str(SCRIPT), "pack", "--bundle", str(path)], capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("bundle: ") and "runtimes runc version" in r.stdout
    return path


def run(bundle: Path, out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "run", "--bundle", str(bundle), "--out", str(out), *args],
                          capture_output=True, text=True, timeout=600)


def test_the_bundle_fits_its_budget_and_names_what_it_holds(bundle):
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["total_bytes"] <= 50 << 20
    assert set(manifest["files"]) >= {"rootfs.tar.xz", "bin/runc", "bin/ch-run", "lib/libseccomp.so.2"}
    assert not any(n.startswith("lib/libc.so") or "ld-linux" in n for n in manifest["files"])  # the machine's own
    assert manifest["stack"]["cuda"] == "13.0" and manifest["cudart_wheel"].startswith("nvidia_cuda_runtime-13.0.96-")
    assert {"python3.11-minimal", "libc6"} <= set(manifest["debian_packages"])


def test_without_a_gpu_both_runtimes_end_in_the_probes_clean_failure(bundle, tmp_path):
    r = run(bundle, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr  # both runtimes produced a document
    assert "no CDI spec: no NVIDIA GPU found" in r.stderr
    assert not (tmp_path / "cdi-nvidia.json").exists()
    for runtime in ("runc", "ch-run"):
        record = json.loads((tmp_path / f"{runtime}.json").read_text())
        ev, doc = record["evidence"], record["probe"]
        assert ev["runtime"] == runtime and ev["cdi_device"] is None and ev["gpus"] == []
        assert doc["overall"] == "fail" and doc["gpus"] == [], doc["reason"]
        assert doc["host"]["in_container"] is True
        assert any(s.startswith("root is the folder $WORK/") for s in doc["host"]["container_signals"])
        status = {c["name"]: (c["status"], c["reason"]) for c in doc["checks"]}
        for name in ("driver", "kernel", "bench"):
            assert status[name][0] == "fail" and status[name][1].startswith("libcuda.so.1 not found"), status
        assert f"{runtime}: fail: driver: libcuda.so.1 not found" in r.stdout
        # no machine path in what is recorded
        text = (tmp_path / f"{runtime}.json").read_text() + (tmp_path / f"{runtime}.log").read_text()
        assert str(ROOT) not in text and "/tmp/envman-evidence-" not in text


def test_the_control_run_is_named_apart(bundle, tmp_path):
    r = run(bundle, tmp_path, "--no-cdi", "--runtimes", "runc")
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runc-no-cdi.json", "runc-no-cdi.log"]
    assert json.loads((tmp_path / "runc-no-cdi.json").read_text())["evidence"]["cdi_error"].startswith("--no-cdi")


def test_a_changed_bundle_is_refused_in_one_line(bundle, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(bundle, copy)
    with open(copy / "bin" / "runc", "r+b") as f:  # one byte flipped
        f.seek(4096)
        b = f.read(1)
        f.seek(4096)
        f.write(bytes([b[0] ^ 0xFF]))
    r = run(copy, tmp_path / "out")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        f"gpu-evidence: {copy}/bin/runc: missing or changed since it was packed: pack the bundle again"]
    r = run(tmp_path / "nothing", tmp_path / "out")
    assert r.returncode == 2 and "no manifest.json" in r.stderr


def test_bad_usage_is_one_line(bundle, tmp_path):
    r = run(bundle, tmp_path, "--runtimes", "docker")
    assert r.returncode == 2
    assert r.stderr.strip() == "gpu-evidence: --runtimes: unknown docker (known: runc, ch-run)"


def _script():
    import importlib.machinery
    import importlib.util

    loader = importlib.machinery.SourceFileLoader("gpu_evidence_script", str(SCRIPT))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[loader.name] = module
    loader.exec_module(module)
    return module


WRITE_ATTEMPT = ("python3", "-c", "import sys\ntry:\n    open('/usr/local/nvidia/lib64/libcuda.so.1', 'w').write('x')\n"
                 "    print('WROTE')\nexcept OSError as e:\n    print('REFUSED', e.errno)\n")


@pytest.mark.parametrize("runtime", ["runc", "ch-run"])
def test_the_driver_files_a_spec_mounts_are_read_only_in_both_runtimes(bundle, tmp_path, runtime):
    """A spec that leaves out 'ro' (or a runtime that binds read-write, as ch-run 0.31 does) never
    lets the container write the host's driver files."""
    ge = _script()
    from envman.engine import cdi

    host_file = tmp_path / "libcuda.so.580.0"
    host_file.write_text("host's driver")
    spec = {"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu",
            "devices": [{"name": "all", "containerEdits": {"deviceNodes": [{"path": "/dev/null"}]}}],
            "containerEdits": {"mounts": [{"hostPath": str(host_file),
                                           "containerPath": "/usr/local/nvidia/lib64/libcuda.so.1", "options": ["bind"]}]}}
    work = tmp_path / "work"
    rootfs = work / "rootfs"
    rootfs.mkdir(parents=True)
    ge.unpack_rootfs(bundle, rootfs)
    run = ge.run_runc if runtime == "runc" else ge.run_ch_run
    cmd, detail, rc, out, err = run(bundle, rootfs, work, cdi, cdi.check_spec(spec), "all", 120, args=WRITE_ATTEMPT)
    assert rc == 0, err
    assert out.strip() == "REFUSED 30"  # EROFS
    assert host_file.read_text() == "host's driver"
    mounts = subprocess.run(["findmnt", "-rn", "-o", "TARGET"], capture_output=True, text=True).stdout
    assert str(work) not in mounts  # the read-only views are unmounted again


def test_the_old_stack_bundle_carries_cuda_11_2_s_runtime_and_fails_cleanly_without_a_gpu(tmp_path):
    """``pack --cuda 11.2``: NVIDIA's CUDA 11.2.2 runtime from Debian bullseye's non-free archive
    (this machine's mirror, checked against the index), found and asked inside both runtimes;
    with no GPU the runtime answers "insufficient driver" and the probe fails, never passes."""
    reason = _missing()
    if reason:
        if in_ci():
            pytest.fail(f"CI needs this for the GPU-evidence bundle: {reason}")
        pytest.skip(reason)
    bundle = tmp_path / "old"
    r = subprocess.run([sys.executable, str(SCRIPT), "pack", "--cuda", "11.2", "--bundle", str(bundle)],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("old: CUDA runtime 11.2.152, ")
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["stack"]["cuda"] == "11.2" and "CUDA_VERSION=11.2" in manifest["image_env"]
    deb = manifest["cudart_deb"]
    assert deb["Package"] == "libcudart11.0" and deb["Version"].startswith("11.2.152~")
    out = tmp_path / "out"
    r = run(bundle, out)
    assert r.returncode == 0, r.stdout + r.stderr
    for runtime in ("runc", "ch-run"):
        doc = json.loads((out / f"{runtime}.json").read_text())["probe"]
        assert doc["overall"] == "fail" and doc["gpus"] == []
        runtime_check = next(c for c in doc["checks"] if c["name"] == "runtime")
        (found,) = runtime_check["data"]["found"]
        assert found["realpath"] == "/usr/local/cuda-11.2/lib64/libcudart.so.11.2.152" and found["version"] == "11.2"
        assert found["query"]["rc"] == 35  # cudaErrorInsufficientDriver: no libcuda in the container
