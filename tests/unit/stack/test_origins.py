"""Tests of ``envman/stack/origins.py``, moved unchanged from the former ``test_daily_use.py``
(which tested several modules)."""

from __future__ import annotations

from pathlib import Path

from tests.unit.run.test_envs import envman_helper  # noqa: F401 (shared with that file)


def test_ls_says_why_a_stack_from_a_user_matrix_file_is_unknown(tmp_path):
    data = Path(__file__).resolve().parents[2] / "data" / "standin-torch.toml"
    m = tmp_path / "my[matrix].toml"
    m.write_text(data.read_text().replace("2.13.0", "0.0.9"))
    proj = tmp_path / "p"
    proj.mkdir()
    (proj / "envman.toml").write_text('stack = "torch-0.0.9-cpu"\nname = "orig"\n')
    env = {"ENVMAN_CONFIG_DIR": str(tmp_path / "c"), "ENVMAN_STATE_DIR": str(tmp_path / "s"),
           "DOCKER_HOST": "unix:///nonexistent.sock", "COLUMNS": "300"}
    assert envman_helper("project", "add", str(proj), env=env).returncode == 0
    with_file = envman_helper("ls", env={**env, "ENVMAN_MATRIX": str(m)})
    assert "torch-0.0.9-cpu-py3.11" in with_file.stdout and "error" not in with_file.stdout, with_file.stdout
    without = envman_helper("ls", env=env)
    assert "invalid" in without.stdout
    why = [ln for ln in without.stdout.splitlines() if ln.startswith("error: orig:")]
    assert len(why) == 1 and "unknown to the loaded matrix" in why[0] and str(m) in why[0], without.stdout
    js = envman_helper("ls", "--json", env=env)
    (row,) = __import__("json").loads(js.stdout)
    assert str(m) in row["problems"][0]["message"]
    # loaded again (through --matrix): no hint, it resolves
    again = envman_helper("--matrix", str(m), "ls", env=env)
    assert "invalid" not in again.stdout and "error" not in again.stdout


def test_origins_record_only_user_files(tmp_path, monkeypatch):
    from envman.stack import origins

    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "c"))
    monkeypatch.delenv("ENVMAN_MATRIX", raising=False)
    origins.record("x-1", "x-1.0-cpu", [])
    assert not (tmp_path / origins.ORIGINS_FILE).exists()  # shipped files only: nothing to say later
    origins.record("x-1", "x-1.0-cpu", [str(tmp_path / "a.toml")])
    assert origins.missing_files_hint("x-1", [str(tmp_path / "a.toml")]) is None  # still loaded
    hint = origins.missing_files_hint("x-1")
    assert hint and str(tmp_path / "a.toml") in hint and "x-1.0-cpu" in hint
    assert origins.missing_files_hint("other") is None
    (tmp_path / origins.ORIGINS_FILE).write_text("[not a dict")
    assert origins.missing_files_hint("x-1") is None  # a broken record is no hint, never an error
