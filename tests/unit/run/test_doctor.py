"""Tests of ``envman/run/doctor.py``, moved unchanged from the former ``test_runner.py``
(which tested several modules)."""

from __future__ import annotations

import json

import pytest

from envman.run.doctor import doctor_report, project_rows
from envman.project.settings import UserConfig
from envman.project.file import load_project
from envman.project.registry import register
from envman.stack.resolve import resolve
from envman.run.preflight import suggest_stack

from tests.support.fake_engine import FakeEngine

from tests.unit.run.test_plan import NOGPU, NVIDIA, dirs, host, write_report  # noqa: F401 (shared with that file)


def test_doctor_json_shape(tmp_path, mini):
    for name, text in (("gpu", 'stack = "torch-2.4-cuda12.4"\n'), ("cpu", 'stack = "torch-2.4-cpu"\n'),
                       ("broken", 'stack = "torch-2.4-cuda12.4"\n')):
        (tmp_path / name).mkdir()
        (tmp_path / name / "envman.toml").write_text(f'name = "{name}"\n' + text)
        register(load_project(tmp_path / name))
    (tmp_path / "broken" / "envman.toml").write_text("gpus = 'lots'\n")
    stable = "envman/torch-2.4.1-cuda12.4-py3.10:latest"
    write_report("sha256:stable")
    engine = FakeEngine.with_images({stable: "sha256:stable"}, engine_info=NVIDIA)
    h = host("rtx3090-470")
    from envman.project.registry import read_registry

    resolve_name = lambda n: resolve(mini, n)  # noqa: E731
    rows = project_rows(read_registry(), engine=engine, host=h, resolve_name=resolve_name, user=UserConfig(),
                        suggest_for=lambda s, hh, g: suggest_stack(mini, s, hh, g))
    report = doctor_report(host=h, engine=engine, engine_error=None, rows=rows)
    assert set(report) == {"host", "engine", "problems", "projects", "ok"}
    assert report["host"]["driver"] == "470.57.02" and report["host"]["gpus"][0]["compute_cap"] == "8.6"
    assert report["engine"] == {"reachable": True, "error": None, "server_version": "27.0", "runtimes": ["nvidia", "runc"],
                                "nvidia_runtime": True, "cdi_nvidia": False, "gpu_mechanism": "runtime",
                                "engine": "docker", "engine_version": "27.0", "rootless": False, "url": None,
                                "selected_by": None}
    by = {r["name"]: r for r in report["projects"]}
    assert set(by["gpu"]) == {"name", "root", "stack", "stack_query", "image", "image_status", "smoke", "verdict", "gpus",
                              "verdicts", "problems"}
    assert by["gpu"]["stack"] == "torch-2.4.1-cuda12.4-py3.10" and by["gpu"]["image_status"] == "present"
    assert by["gpu"]["smoke"] == "pass" and by["gpu"]["verdict"] == "driver_too_old" and by["gpu"]["gpus"] == "all"
    assert "torch-2.4.1-cuda11.8" in by["gpu"]["problems"][0]["message"]
    assert by["cpu"]["verdict"] == "cpu" and by["cpu"]["image_status"] == "missing" and by["cpu"]["gpus"] == "none"
    assert by["broken"]["stack"] is None and "key gpus" in by["broken"]["problems"][0]["message"]
    assert report["ok"] is False
    json.dumps(report)  # serialisable as is


def test_doctor_on_a_host_without_gpu_says_so(mini):
    report = doctor_report(host=NOGPU, engine=FakeEngine.with_images({}), engine_error=None, rows=[])
    (p,) = report["problems"]
    assert p["level"] == "warning" and p["message"].startswith("no NVIDIA GPU on this host")
    assert report["ok"] is True and report["host"]["has_gpu"] is False


def test_doctor_with_unreachable_engine():
    report = doctor_report(host=NOGPU, engine=None, engine_error="Docker engine not reachable: x — start dockerd", rows=[])
    assert report["engine"]["reachable"] is False and report["ok"] is False


def test_what_if_host_from_a_compute_capability_or_a_matrix_gpu(mini):
    from types import SimpleNamespace

    from envman.run.doctor import what_if_host

    src = SimpleNamespace(matrix=mini)  # what_if_host reads only the source's matrix
    real = host("rtx3090-470")
    h = what_if_host(real, src, driver="570.124.06", sm="12.0")
    assert h.driver == "570.124.06" and [(g.name, g.compute_cap) for g in h.gpus] == [("hypothetical GPU", "12.0")]
    h = what_if_host(real, src, gpu="h100-sxm")  # by id, on this host's driver
    assert h.driver == real.driver and [(g.name, g.compute_cap) for g in h.gpus] == [("H100 SXM5 80GB", "9.0")]
    assert what_if_host(real, src, gpu="GeForce RTX 3090").gpus[0].compute_cap == "8.6"
    h = what_if_host(real, src, driver="535.104.05")  # this host's GPUs with another driver
    assert h.driver == "535.104.05" and h.source == "what-if" and h.gpus == real.gpus


@pytest.mark.parametrize("kw, where, words", [
    ({"gpu": "GeForce RTX 3900"}, "--gpu", "unknown GPU 'GeForce RTX 3900' — did you mean GeForce RTX 3090"),
    ({"gpu": "zzzz"}, "--gpu", "unknown GPU 'zzzz' — or give --sm X.Y"),
    ({"gpu": "h100-sxm", "sm": "9.0"}, "envman doctor", "give --gpu or --sm, not both"),
    ({"sm": "eight"}, "--sm", "e.g. --sm 8.6"),
    ({"driver": "banana", "sm": "8.0"}, "--driver", "e.g. --driver 535.104.05"),
])
def test_what_if_host_refuses_in_one_line(mini, kw, where, words):
    from types import SimpleNamespace

    from envman.errors import UserError
    from envman.run.doctor import what_if_host

    with pytest.raises(UserError) as e:
        what_if_host(host("rtx3090-470"), SimpleNamespace(matrix=mini), **kw)
    line = e.value.line()
    assert line.startswith(f"{where}: ") and words in line and "\n" not in line and " — " in line


def test_what_if_host_needs_a_gpu_or_a_driver(mini):
    from types import SimpleNamespace

    from envman.errors import UserError
    from envman.run.doctor import what_if_host

    src = SimpleNamespace(matrix=mini)
    with pytest.raises(UserError, match="this host has no GPU to ask about"):
        what_if_host(NOGPU, src, driver="535.104.05")
    with pytest.raises(UserError, match="no NVIDIA driver to assume"):
        what_if_host(NOGPU, src, sm="8.6")


@pytest.mark.parametrize("inside", [True, False])
def test_run_with_a_word_that_is_no_project_offers_it_as_the_command(tmp_path, monkeypatch, capsys, inside):
    """`envman run pwd` said only "no project named 'pwd'": the words are now offered as the
    command (`envman run -- ls /tmp`)."""
    from envman.cli import main

    proj = tmp_path / "p"
    proj.mkdir()
    (proj / "envman.toml").write_text('name = "p"\nstack = "torch-2.4-cpu"\n')
    monkeypatch.chdir(proj if inside else tmp_path)
    with pytest.raises(SystemExit) as e:
        main(["run", "ls", "/tmp"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1
    assert "no project named 'ls'" in err and "envman run -- ls /tmp" in err
    assert ("in p (the project here)" in err) == inside


def test_a_mistyped_project_suggests_the_project_first_then_the_command(tmp_path, monkeypatch, capsys):
    """`envman run visoin` first offered `envman run -- visoin`, and only then the project vision."""
    from envman.cli import main
    from envman.project.file import load_project
    from envman.project.registry import register

    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "cfg"))
    proj = tmp_path / "vision"
    proj.mkdir()
    (proj / "envman.toml").write_text('name = "vision"\nstack = "torch-2.4-cpu"\n')
    register(load_project(proj))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        main(["run", "visoin"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1
    assert "did you mean vision?" in err and "envman run -- visoin" in err
    assert err.index("did you mean vision?") < err.index("envman run -- visoin")


@pytest.mark.parametrize("command", ["run", "shell"])
@pytest.mark.parametrize("typed, meant", [("--stak", "--stack"), ("--no-gpus", "--no-gpu"), ("--dry-rn", "--dry-run"),
                                          ("--ca-bundel=x", "--ca-bundle")])
def test_a_mistyped_run_option_gets_a_did_you_mean(capsys, command, typed, meant):
    from envman.cli import main

    with pytest.raises(SystemExit) as e:
        main([command, typed])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and f"did you mean {meant}?" in err


def test_an_option_like_nothing_known_gets_no_guess(capsys):
    from envman.cli import main

    with pytest.raises(SystemExit):
        main(["run", "--frobnicate-everything"])
    assert "did you mean" not in capsys.readouterr().err
