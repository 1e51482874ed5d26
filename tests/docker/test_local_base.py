"""``envman base make`` on the real engine, then a real stack built and run on the base it made,
with no container registry: debootstrap of this machine's release from its own apt archive,
``docker import``, the user matrix files it registers, ``envman build`` of a small CPU row
(onnxruntime from the package index), ``envman project init`` and ``envman run``.

Everything runs in a temporary config and state folder; the images it made (the base, the stack's
candidate and promoted images) are removed at the end. A few minutes: debootstrap (minbase) and
one wheel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envman.images import localbase
from tests.docker.conftest import host_ca_bundle

pytestmark = [pytest.mark.docker, pytest.mark.slow]

STACK = "onnxruntime-1.20.1-cpu"
ROW = """schema = 1
kind = "framework"
framework = "onnxruntime"

[[build]]
version = "1.20.1"
variant = "cpu"
python = ["3.9", "3.10", "3.11", "3.12", "3.13"]
packages = ["onnxruntime==1.20.1"]
source = ["https://pypi.org/project/onnxruntime/1.20.1/"]
status = "confirmed"
"""


def _envman(config: Path, state: Path, *args: str, cwd: Path, extra: Path | None = None):
    env = {k: v for k, v in os.environ.items() if k != "ENVMAN_MATRIX"}
    env.update(ENVMAN_CONFIG_DIR=str(config), ENVMAN_STATE_DIR=str(state), PYTHONDONTWRITEBYTECODE="1")
    if extra is not None:
        env["ENVMAN_MATRIX"] = str(extra)
    return subprocess.run([sys.executable, "-m", "envman", *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=900)


def _images(*filters: str) -> list[str]:
    argv = ["docker", "images", "-q", "--no-trunc"] + [a for f in filters for a in ("--filter", f)]
    return sorted(set(subprocess.run(argv, capture_output=True, text=True, check=True).stdout.split()))


@pytest.fixture
def folders(tmp_path):
    try:
        rel = localbase.host_release()
    except Exception as exc:  # not a Debian/Ubuntu release debootstrap knows
        pytest.skip(f"this machine's release: {exc}")
    config, state, project = tmp_path / "config", tmp_path / "state", tmp_path / "project"
    for d in (config, state, project):
        d.mkdir(mode=0o700)
    (config / "config.toml").write_text(f'[network]\nca_bundle = "{host_ca_bundle()}"\n')
    extra = tmp_path / "onnxruntime-cpu.toml"
    extra.write_text(ROW)
    ref = localbase.base_ref(rel)
    before = _images(f"reference={ref}")
    yield rel, config, state, project, extra
    made = _images(f"label=envman.name={STACK}-py{rel.python}")
    for image in made + [ref]:
        subprocess.run(["docker", "rmi", "-f", image], capture_output=True)
    assert before or not _images(f"reference={ref}")


def test_base_make_then_build_and_run_with_no_registry(folders):
    rel, config, state, project, extra = folders
    r = _envman(config, state, "base", "make", cwd=project, extra=extra)
    assert r.returncode == 0, r.stderr + r.stdout
    ref = localbase.base_ref(rel)
    labels = json.loads(subprocess.run(["docker", "image", "inspect", ref, "--format", "{{json .Config.Labels}}"],
                                       capture_output=True, text=True, check=True).stdout)
    assert labels["envman.managed"] == "true" and labels["envman.role"] == "local-base"
    assert "next: envman build " in r.stdout and STACK in r.stdout  # the row of ENVMAN_MATRIX was copied too
    assert "not on this base" in r.stdout and "tensorflow" in r.stdout
    cfg = (config / "config.toml").read_text()
    assert f"local-base-{rel.os_name}-framework.toml" in cfg and "ca_bundle" in cfg

    # No ENVMAN_MATRIX from here on: the registered files alone name the row and its base.
    r = _envman(config, state, "build", STACK, cwd=project)
    assert r.returncode == 0, r.stderr + r.stdout
    base_id = subprocess.run(["docker", "image", "inspect", ref, "--format", "{{.Id}}"], capture_output=True, text=True,
                             check=True).stdout.strip()
    # built on the very image base make recorded, named by its ID (a tag is anyone's to move)
    assert base_id.split(":")[-1] in r.stderr + r.stdout or f"FROM docker.io/{ref}" in r.stderr + r.stdout
    r = _envman(config, state, "project", "init", "--env", STACK, cwd=project)
    assert r.returncode == 0, r.stderr
    r = _envman(config, state, "run", "--", "python", "-c",
                "import onnxruntime, sys; print(sys.version_info[:2], onnxruntime.__version__)", cwd=project)
    assert r.returncode == 0, r.stderr
    major, minor = rel.python.split(".")
    assert r.stdout.strip() == f"({major}, {minor}) 1.20.1"
