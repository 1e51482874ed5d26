"""`envman export` on the command line (envman/cli/export.py): files written or printed with ``-o -``
(nothing written then), an existing file kept unless --force, and a name with control characters
said escaped."""

from __future__ import annotations

import pytest

from envman.cli.export import write_output
from envman.errors import UserError


def test_dash_prints_every_file_and_writes_none(tmp_path, capsys):
    files = {tmp_path / "a.yaml": "a: 1\n", tmp_path / "b.yaml": "b: 2\n"}
    assert write_output(files, "-", force=False) == []
    assert capsys.readouterr().out == "a: 1\nb: 2\n"
    assert not list(tmp_path.iterdir())


def test_files_are_written_and_an_existing_one_kept_unless_forced(tmp_path):
    target = tmp_path / "job.yaml"
    assert write_output({target: "x: 1\n"}, str(target), force=False) == [target]
    assert target.read_text() == "x: 1\n"
    with pytest.raises(UserError):
        write_output({target: "x: 2\n"}, str(target), force=False)
    assert target.read_text() == "x: 1\n"
    write_output({target: "x: 2\n"}, str(target), force=True)
    assert target.read_text() == "x: 2\n"


def test_a_hostile_project_is_refused_before_anything_is_written(tmp_path, monkeypatch, capsys):
    from envman.cli import main

    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "s"))
    with pytest.raises(SystemExit) as e:
        main(["export", "compose", str(tmp_path / "no\x1bsuch"), "-o", str(tmp_path / "out.yaml")])
    out, err = capsys.readouterr()
    assert e.value.code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "\x1b" not in err
    assert not (tmp_path / "out.yaml").exists()
