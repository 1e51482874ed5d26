"""``init_project``: the stack given or detected, asked about only where the repository contradicts itself."""

from __future__ import annotations

import pytest

from envman.errors import UserError
from envman.host import HostFacts
from envman.matrix.source import MatrixSource
from envman.project.init import init_project

NOGPU = HostFacts("none", note="no GPU")


@pytest.fixture(autouse=True)
def dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))


def repo(tmp_path, files):
    root = tmp_path / "paper"
    root.mkdir()
    for rel, text in files.items():
        (root / rel).write_text(text)
    return root


CONTRADICTS = {"requirements.txt": "torch==1.9.0\n", "Dockerfile": "FROM pytorch/pytorch:1.10.0-cuda11.3-cudnn8-runtime\n"}


def test_an_unambiguous_repository_is_never_asked_about(tmp_path):
    asked = []
    root = repo(tmp_path, {"requirements.txt": "torch==1.9.0\n"})
    result = init_project(root, MatrixSource(), stack=None, name=None, host=lambda: NOGPU, confirm=asked.append)
    assert asked == [] and not result.asked and (root / "envman.toml").is_file()


def test_a_contradiction_is_asked_about_and_a_no_writes_nothing(tmp_path):
    asked = []
    root = repo(tmp_path, CONTRADICTS)

    def no(summary):
        asked.append(summary)
        return False

    with pytest.raises(UserError) as e:
        init_project(root, MatrixSource(), stack=None, name=None, host=lambda: NOGPU, confirm=no)
    assert "nothing written" in e.value.what and not (root / "envman.toml").exists()
    assert asked and asked[0][0].startswith("torch-1.9.0") and any("set aside" in ln for ln in asked[0])


def test_a_yes_or_no_terminal_writes_the_detected_stack(tmp_path):
    root = repo(tmp_path, CONTRADICTS)
    result = init_project(root, MatrixSource(), stack=None, name=None, host=lambda: NOGPU, confirm=lambda s: True)
    assert result.asked and "torch-1.9.0" in (root / "envman.toml").read_text()
    (root / "envman.toml").unlink()
    result = init_project(root, MatrixSource(), stack=None, name="other", host=lambda: NOGPU, confirm=None)
    assert not result.asked and result.summary[0].startswith("torch-1.9.0")
