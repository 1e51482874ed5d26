"""``envman doctor`` and ``envman ls`` (envman/cli/doctor.py): the host, an unreachable engine, the
registered projects, and each one's problem, as JSON and as lines; a doctor that finds a problem
exits 1."""

from __future__ import annotations

import json

import pytest

from envman.host import HostFacts
from tests.unit.run.test_plan import dirs  # noqa: F401 (shared with that file)

NOGPU = HostFacts("none", note="no NVIDIA driver")


@pytest.fixture
def offline(dirs, monkeypatch):  # noqa: F811
    """No engine, no GPU: doctor and ls answer from the registry and the matrix alone."""
    import envman.run.command

    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/envman-test.sock")
    monkeypatch.setattr(envman.run.command, "detect_host", lambda matrix: NOGPU)


def _main(capsys, *argv: str) -> tuple[int, str, str]:
    from envman.cli import main

    with pytest.raises(SystemExit) as e:
        main(list(argv))
    out, err = capsys.readouterr()
    return (e.value.code or 0), out, err


def _register(tmp_path, capsys, name: str, body: str):
    root = tmp_path / name
    root.mkdir()
    (root / "envman.toml").write_text(body)
    assert _main(capsys, "project", "add", str(root))[0] == 0
    return root


def test_ls_with_no_project_says_how_to_make_one(offline, capsys):
    code, out, _ = _main(capsys, "ls")
    assert code == 0 and "no registered projects" in out and "envman project init" in out
    assert _main(capsys, "ls", "--json")[1:] == ("[]\n", "")


def test_ls_json_has_one_row_per_project_with_its_problems(offline, tmp_path, capsys):
    _register(tmp_path, capsys, "good", 'stack = "torch-2.4-cpu"\nname = "good"\n')
    broken = _register(tmp_path, capsys, "broken", 'stack = "torch-2.4-cpu"\nname = "broken"\n')
    (broken / "envman.toml").write_text('stack = "no-such-stack-[x]"\n')
    code, out, _ = _main(capsys, "ls", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert code == 0 and set(rows) == {"good", "broken"}
    assert set(rows["good"]) == {"name", "root", "stack", "stack_query", "image", "image_status", "smoke", "verdict",
                                 "gpus", "verdicts", "problems"}
    assert rows["good"]["stack"] == "torch-2.4.1-cpu-py3.12" and rows["good"]["image_status"] != "present"  # no engine
    assert rows["broken"]["stack"] is None and rows["broken"]["problems"]


def test_ls_prints_why_an_invalid_row_is_invalid_as_text_never_markup(offline, tmp_path, capsys):
    broken = _register(tmp_path, capsys, "b[u]roken", 'stack = "torch-2.4-cpu"\nname = "broken"\n')
    (broken / "envman.toml").write_text('stack = "[bold]nope["\n')
    code, out, _ = _main(capsys, "ls")
    assert code == 0 and "invalid" in out and "error: broken:" in out and "b[u]roken" in out


def test_doctor_reports_an_unreachable_engine_and_exits_1(offline, capsys):
    code, out, err = _main(capsys, "doctor", "--json")
    report = json.loads(out)
    assert code == 1 and not report["ok"] and err == ""
    assert report["engine"]["reachable"] is False and "envman-test.sock" in report["engine"]["error"]
    assert report["projects"] == [] and report["matrix"]["newest_version"]


def test_doctor_in_lines_names_the_engine_the_matrix_and_the_empty_registry(offline, capsys):
    code, out, _ = _main(capsys, "doctor")
    lines = out.splitlines()
    assert code == 1
    assert lines[0].startswith("host ") and any(l.startswith("engine  not reachable: ") for l in lines)
    assert any(l.startswith("matrix  ") for l in lines)
    assert "no registered projects" in out


def test_doctor_answers_for_the_host_a_what_if_asks_about(offline, capsys):
    code, out, _ = _main(capsys, "doctor", "--driver", "550.54.15", "--sm", "8.6", "--json")
    report = json.loads(out)
    assert code == 1 and report["host"]["what_if"] is True  # the engine is still unreachable
    assert "550.54.15" in report["host"]["summary"]


@pytest.mark.parametrize("argv, says", [
    (["--gpu", "No Such GPU 9000"], "--gpu: unknown GPU 'No Such GPU 9000'"),
    (["--sm", "8.6"], "no NVIDIA driver to assume"),  # a GPU without a driver on a host that has none
])
def test_doctor_refuses_a_what_if_it_cannot_answer_in_one_line(offline, capsys, argv, says):
    code, out, err = _main(capsys, "doctor", *argv, "--json")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and says in err and "Traceback" not in err
