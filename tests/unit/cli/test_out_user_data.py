"""Tests of ``envman/cli``, moved unchanged from the former ``test_daily_use.py``
(which tested several modules)."""

from __future__ import annotations

from tests.unit.run.test_envs import envman_helper  # noqa: F401 (shared with that file)


def test_markup_like_user_data_prints_as_is_in_every_read_command(tmp_path):
    """Square brackets in data (extras, paths, errors) are text, never rich markup."""
    root = tmp_path / "p[red]x[/red]" / "[bold]audit"
    root.mkdir(parents=True)
    (root / "envman.toml").write_text('stack = "tf-2.15-py3.11"\nname = "audit"\nrequirements = ["pkg[extra]==1"]\n')
    broken = tmp_path / "b[u]roken"
    broken.mkdir()
    (broken / "envman.toml").write_text('stack = "tf-2.15-py3.11"\nname = "broken"\n')
    env = {"ENVMAN_CONFIG_DIR": str(tmp_path / "c"), "ENVMAN_STATE_DIR": str(tmp_path / "s"),
           "DOCKER_HOST": "unix:///nonexistent.sock", "COLUMNS": "400"}
    for d in (root, broken):
        assert envman_helper("project", "add", str(d), env=env).returncode == 0
    (broken / "envman.toml").write_text('stack = "[bold]nope["\n')  # now it fails to load, its error names the path

    show = envman_helper("matrix", "show", "tf-2.15.0-py3.11", env=env)
    assert show.returncode == 0 and "tensorflow[and-cuda]==2.15.0.post1" in show.stdout, show.stdout
    ls = envman_helper("matrix", "ls", "--framework", "tensorflow", env=env)
    assert ls.returncode == 0 and "\\[" not in ls.stdout
    pls = envman_helper("project", "ls", env=env)
    assert str(root) in pls.stdout and "b[u]roken" in pls.stdout, pls.stdout
    pshow = envman_helper("project", "show", "audit", env=env)
    assert str(root) in pshow.stdout, pshow.stdout
    top = envman_helper("ls", env=env)
    assert "audit" in top.stdout and "invalid" in top.stdout, top.stdout
    doc = envman_helper("doctor", env=env)
    assert "b[u]roken" in doc.stdout, doc.stdout
    for p in (show, ls, pls, pshow, top, doc):
        assert "\\[" not in p.stdout  # nothing escaped twice either
