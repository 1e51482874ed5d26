"""``envman cdi generate``: the spec of a (fake) host's GPUs, printed or written; one-line errors."""

from __future__ import annotations

import json
import os
import stat

import pytest

from envman.engine import cdi
from tests.support.cli import run_envman
from tests.unit.engine.test_cdi import UUID0, UUID1, fake_stat, make_host


@pytest.fixture
def fake_host(tmp_path, monkeypatch):
    root = make_host(tmp_path / "host")
    real = cdi.discover
    monkeypatch.setattr(cdi, "discover", lambda r: real(str(root), fake_stat(root)) if r == "/" else pytest.fail(r))
    return root


def test_without_a_gpu_it_says_so_in_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(cdi, "discover", lambda r: cdi.Discovery(None, (), (), (), ()))
    r = run_envman(["cdi", "generate", "-o", str(tmp_path / "x.json")])
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [
        "envman: error: cdi generate: no NVIDIA GPU found (no /proc/driver/nvidia/gpus entry or /dev/nvidia<N> "
        "device node): is the NVIDIA driver loaded on this host?"]
    assert not (tmp_path / "x.json").exists()


def test_it_prints_a_valid_spec(fake_host):
    r = run_envman(["cdi", "generate"])
    assert r.returncode == 0, r.stderr
    spec = cdi.check_spec(json.loads(r.stdout))
    assert [d["name"] for d in spec["devices"]] == ["0", UUID1, "1", UUID0, "all"]


def test_it_writes_a_world_readable_spec_and_names_the_devices(fake_host, tmp_path):
    out = tmp_path / "cdi" / "envman-nvidia.json"
    r = run_envman(["cdi", "generate", "--output", str(out)])
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o644
    assert cdi.load_spec(str(out))["kind"] == "nvidia.com/gpu"
    assert r.stderr.strip() == f"wrote {out}: nvidia.com/gpu=0, nvidia.com/gpu={UUID1}, nvidia.com/gpu=1, " \
                               f"nvidia.com/gpu={UUID0}, nvidia.com/gpu=all"
    assert [p.name for p in out.parent.iterdir()] == ["envman-nvidia.json"]  # no temporary file left


@pytest.mark.parametrize("name, needle", [("spec.yaml", "must end in .json"), ("spec", "must end in .json"),
                                          ("adir.json/", "is a folder")])
def test_bad_outputs_are_refused_in_one_line(fake_host, tmp_path, name, needle):
    (tmp_path / "adir.json").mkdir()
    r = run_envman(["cdi", "generate", "-o", str(tmp_path / name)])
    assert r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_an_unwritable_place_is_one_line(fake_host, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    r = run_envman(["cdi", "generate", "-o", str(blocker / "x.json")])
    assert r.returncode == 2 and "cannot write" in r.stderr and len(r.stderr.strip().splitlines()) == 1
