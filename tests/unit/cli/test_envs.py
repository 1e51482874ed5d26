"""`envman ps`, `stop` and `clean` (envman/cli/envs.py): containers listed as text, never markup;
clean without a terminal refused before anything is listed or removed, --dry-run and --yes."""

from __future__ import annotations

import json

import pytest

from envman.run import envs as run_envs


@pytest.fixture
def cli(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "s"))

    def run(*argv: str) -> tuple[int, str, str]:
        from envman.cli import main

        with pytest.raises(SystemExit) as e:
            main(list(argv))
        out, err = capsys.readouterr()
        return (e.value.code or 0), out, err

    return run


class Row:
    def __init__(self, **doc):
        self.doc = doc

    def to_json(self):
        return self.doc


def test_ps_prints_user_data_as_text_and_json_as_given(cli, monkeypatch):
    row = {"name": "[bold]x\x1b[31m", "project": "p[red]", "stack": "s", "state": "running", "created": "now", "uid": 1}
    monkeypatch.setattr(run_envs, "own_containers", lambda **kw: ([Row(**row)], []))
    code, out, _ = cli("ps")
    assert code == 0 and "[bold]x" in out and "p[red]" in out and "\x1b" not in out
    code, out, _ = cli("ps", "--json")
    assert json.loads(out) == [row]


def test_ps_with_nothing_running_says_how_to_start_one(cli, monkeypatch):
    monkeypatch.setattr(run_envs, "own_containers", lambda **kw: ([], []))
    code, out, _ = cli("ps")
    assert code == 0 and "no running envman environments" in out


def test_clean_without_a_terminal_is_refused_before_anything_is_removed(cli, tmp_path, monkeypatch):
    (tmp_path / "s" / "logs").mkdir(parents=True)
    (tmp_path / "s" / "logs" / "x.log").write_text("x")
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    code, out, err = cli("clean")
    assert code == 2 and out == "" and "not confirmed" in err and "--yes" in err
    assert (tmp_path / "s" / "logs" / "x.log").exists()
    code, out, _ = cli("clean", "--dry-run", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["removed"] is False and any("logs" in p for p in doc["paths"])
    assert (tmp_path / "s" / "logs" / "x.log").exists()
    code, out, _ = cli("clean", "--yes", "--json")
    assert code == 0 and json.loads(out)["removed"] is True and not (tmp_path / "s" / "logs" / "x.log").exists()
