"""No output shows an ``[environment]`` value: by rule, over every command that prints a project's
settings or its run (text and ``--json``), and every refusal of a mistyped value, from the project
file, the user config and ``-e`` on the command line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.cli import run_envman

SECRET = "sk-proj-5ECRET0value"
#: Mistyped values: each holds the secret where a careless message would echo it.
MISTYPED = {
    "a list": f'["{SECRET}"]',
    "a table": f'{{ v = "{SECRET}" }}',
    "a list of tables": f'[{{ v = "{SECRET}" }}]',
}


@pytest.fixture
def env(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    e = dict(os.environ)
    e.update(HOME=str(home), ENVMAN_CONFIG_DIR=str(tmp_path / "cfg"), ENVMAN_STATE_DIR=str(tmp_path / "state"),
             ENVMAN_RUN_CACHE="0", CLI_SECRET=SECRET)
    (tmp_path / "cfg").mkdir()
    return e


def _project(root: Path, body: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "envman.toml").write_text('name = "p"\nstack = "torch-2.4-cuda12.4"\ngpus = "none"\n' + body)
    return root


OUTPUTS = [
    ["project", "show", "{root}"],
    ["project", "show", "{root}", "--json"],
    ["project", "trust", "{root}"],
    ["run", "{root}", "--dry-run", "-e", f"CLI={SECRET}", "-e", "CLI_SECRET", "--", "true"],
    ["run", "{root}", "--dry-run", "--json", "-e", f"CLI={SECRET}", "-e", "CLI_SECRET", "--", "true"],
    ["submit", "{root}", "--dry-run"],
    ["export", "compose", "{root}", "-o", "-"],
    ["export", "devcontainer", "{root}", "-o", "-"],
]


@pytest.mark.parametrize("where", ["project file", "user config"])
def test_no_command_prints_an_environment_value(tmp_path, env, where):
    if where == "project file":
        root = _project(tmp_path / "proj", f'[environment]\nAPI_KEY = "{SECRET}"\n')
    else:
        root = _project(tmp_path / "proj", "")
        (tmp_path / "cfg" / "config.toml").write_text(f'[run.environment]\nAPI_KEY = "{SECRET}"\n')
        os.chmod(tmp_path / "cfg" / "config.toml", 0o600)
    assert run_envman(["project", "trust", str(root)], env=env).returncode == 0
    for words in OUTPUTS:
        r = run_envman([w.replace("{root}", str(root)) for w in words], env=env, cwd=tmp_path)
        assert SECRET not in r.stdout and SECRET not in r.stderr, (words, r.stdout[-400:], r.stderr[-400:])


@pytest.mark.parametrize("kind", MISTYPED)
@pytest.mark.parametrize("where", ["project file", "user config"])
def test_a_mistyped_value_is_refused_without_showing_it(tmp_path, env, where, kind):
    value = MISTYPED[kind]
    if where == "project file":
        root = _project(tmp_path / "proj", f"[environment]\nAPI_KEY = {value}\n")
        words = ["project", "show", str(root)]
    else:
        root = _project(tmp_path / "proj", "")
        (tmp_path / "cfg" / "config.toml").write_text(f"[run.environment]\nAPI_KEY = {value}\n")
        os.chmod(tmp_path / "cfg" / "config.toml", 0o600)
        words = ["run", str(root), "--dry-run", "--", "true"]
    r = run_envman(words, env=env, cwd=tmp_path)
    assert r.returncode == 2 and "API_KEY" in r.stderr and kind.split(" of ")[0] in r.stderr, r.stderr
    assert SECRET not in r.stderr and SECRET not in r.stdout, r.stderr


@pytest.mark.parametrize("value", [f'"{SECRET}"', f'["API_KEY={SECRET}"]'])
def test_an_environment_that_is_not_a_table_is_refused_without_showing_it(tmp_path, env, value):
    root = _project(tmp_path / "proj", f"environment = {value}\n")
    r = run_envman(["project", "show", str(root)], env=env, cwd=tmp_path)
    assert r.returncode == 2 and SECRET not in r.stderr, r.stderr
