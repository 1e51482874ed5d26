"""``matrix update`` discovers CUDA releases on the index (cuda-toolkit) the way it discovers
framework releases, says what it could not fill (an update's driver, images), and ``--check``
reports new CUDA releases and a stale GPU list."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.version import Version
from typer.testing import CliRunner

from envman.errors import MatrixError
from envman.matrix.load import load_files, load_matrix
from tests.support.index_server import IndexServer

V = Version


@pytest.fixture(scope="module")
def shipped():
    return load_matrix()


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
