"""Build real stacks through the real templates on stand-in bases; smoke; promote or refuse.

The bases are stand-ins (no registry here), everything after FROM is real: apt installs the
Python, pip installs torch 2.13.0 (CPU) from a wheelhouse and its dependencies from the index
through the custom-CA feature, and the probe multiplies matrices inside the image.
"""

import json
import os
import ssl
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
MATRIX = ROOT / "tests" / "data" / "standin-torch.toml"


def host_ca_bundle() -> str:
    paths = ssl.get_default_verify_paths()
    for p in (os.environ.get("SSL_CERT_FILE"), paths.cafile, paths.openssl_cafile):
        if p and Path(p).is_file():
            return p
    pytest.skip("no CA bundle on this host")


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory):
    d = tmp_path_factory.mktemp("wheelhouse")
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "torch==2.13.0", "--no-deps", "--only-binary=:all:",
         "--python-version", "3.11", "--platform", "manylinux_2_28_x86_64", "-d", str(d), "-q"],
        check=True,
    )
    assert list(d.glob("torch-2.13.0*.whl"))
    return d


@pytest.fixture(scope="module")
def state(tmp_path_factory):
    return tmp_path_factory.mktemp("state")


def envman(state, *args, check=None, timeout=1800):
    env = {**os.environ, "ENVMAN_STATE_DIR": str(state), "ENVMAN_CONFIG_DIR": str(state / "config")}
    p = subprocess.run([sys.executable, "-m", "envman", "--matrix", str(MATRIX), *args],
                       capture_output=True, text=True, env=env, timeout=timeout)
    if check is not None:
        assert p.returncode == check, f"exit {p.returncode}\nstdout:\n{p.stdout[-3000:]}\nstderr:\n{p.stderr[-3000:]}"
    return p


@pytest.fixture(scope="module")
def bases(docker_engine, standin):
    standin("ubuntu:22.04")
    standin("nvidia/cuda:12.8.1-base-ubuntu22.04")


def test_cpu_torch_from_wheelhouse_builds_smokes_and_promotes(bases, docker_engine, wheelhouse, state):
    args = ["build", "torch-2.13.0-cpu", "--wheelhouse", str(wheelhouse), "--ca-bundle", host_ca_bundle(),
            "--accept-cpu-only", "--json"]
    first = json.loads(envman(state, *args, check=0).stdout)[0]
    assert first["smoke"] == "cpu-only" and first["promoted"] and not first["cached"]
    assert first["name"] == "torch-2.13.0-cpu-py3.11"
    report = json.loads((state / "reports" / (first["image_id"].split(":")[-1] + ".json")).read_text())
    probe = report["probe"]
    assert probe["overall"] == "cpu-only"  # never "pass" without a GPU
    assert probe["python"].startswith("3.11")  # not Ubuntu 22.04's default 3.10: provisioned by envman
    fw = next(c for c in probe["checks"] if c["name"] == "framework")
    assert fw["status"] == "pass", fw
    # the stable tag points at the smoke-tested image
    assert docker_engine.inspect_image("envman/torch-2.13.0-cpu-py3.11:latest")["Id"] == first["image_id"]

    second = json.loads(envman(state, *args, check=0).stdout)[0]
    assert second["cached"] and second["image_id"] == first["image_id"]


def test_broken_stack_fails_smoke_and_is_not_promoted(bases, docker_engine, wheelhouse, state):
    p = envman(state, "build", "torch-2.13.0-cuda12.8", "--wheelhouse", str(wheelhouse),
               "--ca-bundle", host_ca_bundle(), "--accept-cpu-only", "--json")
    assert p.returncode == 1, p.stderr
    row = json.loads(p.stdout)[0]
    assert row["smoke"] == "fail" and not row["promoted"]
    assert docker_engine.inspect_image("envman/torch-2.13.0-cuda12.8-py3.11:latest") is None
    report = json.loads((state / "reports" / (row["image_id"].split(":")[-1] + ".json")).read_text())
    failing = [c for c in report["probe"]["checks"] if c["status"] == "fail"]
    assert failing, report["probe"]


def test_images_and_prune(bases, docker_engine, state):
    rows = json.loads(envman(state, "images", "--json", check=0).stdout)
    cpu = [r for r in rows if r["stack"] == "torch-2.13.0-cpu-py3.11" and r["stable"]]
    assert cpu and cpu[0]["smoke"] == "cpu-only"
    assert any(r["stack"] == "torch-2.13.0-cuda12.8-py3.11" and r["smoke"] == "fail" for r in rows)
    gone = json.loads(envman(state, "prune", "--json", check=0).stdout)
    assert "torch-2.13.0-cuda12.8-py3.11" in {g["stack"] for g in gone}
    assert "torch-2.13.0-cpu-py3.11" not in {g["stack"] for g in gone if any(t.endswith(":latest") for t in g["tags"])}
    assert docker_engine.inspect_image("envman/torch-2.13.0-cpu-py3.11:latest") is not None
    assert docker_engine.image_exists("ubuntu:22.04")  # a stand-in, not envman's: untouched
