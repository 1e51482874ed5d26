"""`envman base make` (envman/cli/base.py): the release and mirror handed to the base maker, its
steps on stderr and its report on stdout, each printed as text, never as markup."""

from __future__ import annotations

import pytest

from envman.images import localbase


def test_base_make_hands_on_its_options_and_prints_steps_and_report_as_text(monkeypatch, capsys, tmp_path):
    from envman.cli import main

    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "s"))
    calls = []

    def make_here(release, mirror, *, connect, extra, on_step):
        calls.append((release, mirror, extra))
        on_step("debootstrap [bold]trixie[/bold]")
        return "made"

    monkeypatch.setattr(localbase, "make_here", make_here)
    monkeypatch.setattr(localbase, "report", lambda made: [f"{made}: envman/base-[red]x[/red]:1", "second line"])
    with pytest.raises(SystemExit) as e:
        main(["base", "make", "--release", "trixie", "--mirror", "http://deb.example/debian"])
    out, err = capsys.readouterr()
    assert (e.value.code or 0) == 0
    assert calls == [("trixie", "http://deb.example/debian", ())]
    assert "base make: debootstrap [bold]trixie[/bold]" in err
    assert out.splitlines() == ["made: envman/base-[red]x[/red]:1", "second line"]


def test_base_make_without_options_takes_this_machines_release_and_archive(monkeypatch, capsys, tmp_path):
    from envman.cli import main

    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "c"))
    calls = []
    monkeypatch.setattr(localbase, "make_here", lambda release, mirror, **k: calls.append((release, mirror)) or "m")
    monkeypatch.setattr(localbase, "report", lambda made: [])
    with pytest.raises(SystemExit):
        main(["base", "make"])
    assert calls == [(None, None)]
