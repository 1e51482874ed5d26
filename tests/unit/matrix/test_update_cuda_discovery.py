"""``matrix update`` discovers CUDA releases on the index (cuda-toolkit) the way it discovers
framework releases, says what it could not fill (an update's driver, images), and ``--check``
reports new CUDA releases and a stale GPU list."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace
from pathlib import Path

import pytest
from packaging.version import Version
from typer.testing import CliRunner

from envman.errors import MatrixError
from envman.matrix.load import load_files, load_matrix
from envman.matrix.model import Arch, DriverVersion
from envman.matrix.gaps import GPU_LIST_MAX_AGE, cuda_report, gpu_list_age
from tests.support.index_server import IndexServer

V = Version


@pytest.fixture(scope="module")
def shipped():
    return load_matrix()


def test_a_cuda_release_the_matrix_lacks_is_new_and_says_what_is_unknown(shipped):
    new, unfilled = cuda_report(shipped, {V("99.1.0"): "2030-01-01"})
    assert new == ["99.1.0"]
    assert unfilled == ["CUDA 99.1.0 (released 2030-01-01): no [[release]] 99.1 in cuda.toml: its toolkit driver "
                        "(NVIDIA's release notes, Table 3), nvcc's compute capabilities and images are not known"]


def test_an_update_without_its_driver_is_reported_never_guessed(shipped):
    new, unfilled = cuda_report(shipped, {V("13.2.0"): None, V("13.2.1"): None, V("13.2.2"): "2026-07-16"})
    assert new == []
    assert ("CUDA 13.2.2 (released 2026-07-16): no toolkit driver recorded for this update (updates of cuda.toml 13.2); "
            "stacks on its images use 595.58.03, a lower bound") in unfilled
    assert not any("13.2.1" in u and "driver" in u for u in unfilled)  # 13.2 Update 1's driver is recorded
    assert not any(u.startswith("CUDA 13.2.0") for u in unfilled)  # the GA carries toolkit_driver


def test_images_are_asked_of_the_newest_patch_only(shipped):
    _, unfilled = cuda_report(shipped, {V("13.3.0"): None, V("13.3.1"): None})
    assert unfilled == []  # 13.3.1 has image rows; 13.3.0's are not expected
    _, unfilled = cuda_report(shipped, {V("13.3.0"): None, V("13.3.1"): None, V("13.3.2"): None})
    assert any(u.startswith("CUDA 13.3.2") and "no nvidia/cuda image row" in u for u in unfilled)


def test_a_ga_versioned_with_a_third_digit_needs_no_update_driver(shipped):
    _, unfilled = cuda_report(shipped, {V("13.4.1"): None, V("13.4.2"): None})
    assert not any(u.startswith("CUDA 13.4.1") and "driver" in u for u in unfilled)  # 13.4's GA is 13.4.1
    assert any(u.startswith("CUDA 13.4.2") and "driver" in u for u in unfilled)


def test_gpu_list_age_and_staleness(shipped):
    day = dt.date.fromisoformat(shipped.gpus_checked)
    assert gpu_list_age(shipped, day) == (0, [])
    age, why = gpu_list_age(shipped, day + dt.timedelta(days=GPU_LIST_MAX_AGE + 1))
    assert age == GPU_LIST_MAX_AGE + 1 and "days ago" in why[0]
    assert gpu_list_age(replace(shipped, gpus_checked=None), day)[1][0].startswith("the GPU list records no date")


def test_a_cuda_release_targeting_a_capability_above_every_gpu_makes_the_list_stale(shipped):
    newest = max(shipped.cuda, key=lambda r: r.version)
    grown = replace(newest, version=V("99.0"), sm=newest.sm + (Arch(15, 0),))
    m = replace(shipped, cuda=shipped.cuda + (grown,))
    why = gpu_list_age(m, dt.date.fromisoformat(shipped.gpus_checked))[1]
    assert why == ["CUDA 99.0 targets compute capability 15.0, above every GPU of the list (the newest: 12.1)"]


def test_a_malformed_checked_date_is_rejected(tmp_path):
    p = tmp_path / "g.toml"
    p.write_text('schema = 1\nkind = "gpus"\nchecked = "last week"\n')
    with pytest.raises(MatrixError) as exc:
        load_files([p])
    assert "checked" in str(exc.value)


def _cuda_index(srv: IndexServer, versions: list[str]) -> None:
    files = [{"filename": f"cuda_toolkit-{v}-py2.py3-none-any.whl", "url": f"/f/ct-{v}.whl", "hashes": {},
              "upload-time": "2030-01-02T03:04:05Z"} for v in versions]
    srv.add("/simple/cuda-toolkit/", json.dumps({"files": files}), "application/vnd.pypi.simple.v1+json")
    for fw in ("torch", "jax", "onnxruntime-gpu", "onnxruntime", "tensorflow", "torchvision", "jaxlib"):
        srv.add(f"/simple/{fw}/", json.dumps({"files": []}), "application/vnd.pypi.simple.v1+json")


def _run(*args: str) -> tuple[int, str]:
    from envman.cli import app

    res = CliRunner().invoke(app, list(args))
    return res.exit_code, res.output


def test_check_reports_a_new_cuda_release_from_the_index(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    with IndexServer() as srv:
        _cuda_index(srv, ["13.3.1", "13.9.0", "13.9.0rc1", "13.3.1.0"])
        rc, text = _run("matrix", "update", "--check", "--no-torch-index", "--pip-index", srv.url + "/simple", "--json")
    assert rc == 1, text
    assert json.loads(text)["new_releases"]["cuda"] == ["13.9.0"]  # pre-releases and repackagings are not releases


def test_update_prints_what_it_could_not_fill(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    with IndexServer() as srv:
        _cuda_index(srv, ["13.9.0"])
        rc, text = _run("matrix", "update", "--no-torch-index", "--pip-index", srv.url + "/simple", "--json")
    assert rc == 0, text
    d = json.loads(text)
    assert d["new_releases"]["cuda"] == ["13.9.0"] and any(u.startswith("CUDA 13.9.0 (released 2030-01-02)") for u in d["unfilled"])
