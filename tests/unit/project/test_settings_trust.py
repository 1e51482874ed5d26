"""The user config's ``[run] environment`` and ``[run] mounts`` reach only project files the user
trusts: by rule over every way settings are merged (trusted or not × what the config holds) and
over every command that hands a project's settings to a container, a file or a job."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import pytest

from envman.engine.api import ImageInfo
from envman.project.file import Mount, load_project
from envman.project.settings import CliOverrides, UserConfig, merge_settings

from tests.support.fake_engine import FakeEngine
from tests.unit.run.test_plan import dirs, write_report  # noqa: F401 (its autouse fixture)

TOKEN = "cfg-5ECRET-token"
CONFIG = f'[run.environment]\nCFG_TOKEN = "{TOKEN}"\n[run]\nmounts = ["{{data}}:/cfgdata"]\n'
MATRIX = [a for f in sorted((Path(__file__).parents[2] / "data").glob("mini*.toml")) for a in ("--matrix", str(f))]


def _project(root: Path, body: str = "") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "envman.toml").write_text('name = "p"\nstack = "torch-2.4-cpu"\ngpus = "none"\n' + body)
    return root


# --------------------------------------------------------------------------- merge_settings, by rule


USER_PARTS = {"environment": (("CFG_TOKEN", TOKEN),), "mounts": (Mount("/srv/cfg", "/cfgdata"),)}


@pytest.mark.parametrize("trusted", [True, False])
@pytest.mark.parametrize("parts", [c for n in range(3) for c in itertools.combinations(USER_PARTS, n)], ids=str)
def test_the_config_environment_and_mounts_reach_trusted_files_only(tmp_path, trusted, parts):
    proj = load_project(_project(tmp_path / "p", '[environment]\nOWN = "1"\n'))
    user = UserConfig(**{k: USER_PARTS[k] for k in parts})
    cli = CliOverrides(environment=(("CLI", "2"),), mounts=(Mount("/srv/cli", "/cli"),))
    s = merge_settings(proj, user, cli, trusted=trusted)
    env, targets = dict(s.environment), {m.target for m in s.mounts}
    # the file's own and the command line's are given whatever the trust
    assert env["OWN"] == "1" and env["CLI"] == "2" and "/cli" in targets
    assert ("CFG_TOKEN" in env) == (trusted and "environment" in parts)
    assert ("/cfgdata" in targets) == (trusted and "mounts" in parts)
    assert [w.split(" ")[0] for w in s.withheld] == ([] if trusted else [p for p in USER_PARTS if p in parts])
    assert TOKEN not in " ".join(s.withheld) and TOKEN not in json.dumps(s.to_json())  # names, never values
    line = s.withheld_line(proj.file)
    assert (line is None) == (trusted or not parts)
    if line is not None:
        assert "\n" not in line and "envman project trust" in line
        assert ("CFG_TOKEN" in line) == ("environment" in parts) and ("/cfgdata" in line) == ("mounts" in parts)


def test_the_default_is_untrusted(tmp_path):
    proj = load_project(_project(tmp_path / "p"))
    s = merge_settings(proj, UserConfig(environment=USER_PARTS["environment"]), CliOverrides())
    assert "CFG_TOKEN" not in dict(s.environment) and s.withheld


# --------------------------------------------------------------------------- every command that passes them on


class AnyStable(FakeEngine):
    def inspect_image(self, ref):
        return ImageInfo("sha256:stable") if ":latest" in ref else None


def _main(words, capsys) -> str:
    from envman.cli import main

    with pytest.raises(SystemExit) as e:
        main([*MATRIX, *words])
    out, err = capsys.readouterr()
    assert e.value.code in (0, None), err
    return out + err


def _run_json(root, capsys) -> tuple[set[str], set[str]]:
    text = _main(["run", str(root), "--dry-run", "--json", "--", "true"], capsys)
    doc = json.loads(text[text.index("{"):text.rindex("}") + 1])
    return set(doc["plan"]["environment"]), {m["target"] for m in doc["plan"]["mounts"]}


def _show_json(root, capsys) -> tuple[set[str], set[str]]:
    text = _main(["project", "show", str(root), "--json"], capsys)
    doc = json.loads(text[text.index("{"):text.rindex("}") + 1])
    return set(doc["settings"]["environment"]), {m.split(":")[1] for m in doc["settings"]["mounts"]}


def _cached_env(root, capsys) -> tuple[set[str], set[str]]:
    from envman.run.command import cached_run_environment

    return {k for k, _ in cached_run_environment(str(root / "envman.toml"), [])}, set()


def _text(words):
    def names(root, capsys) -> tuple[set[str], set[str]]:
        text = _main([w.replace("{root}", str(root)) for w in words], capsys)
        text = "\n".join(ln for ln in text.splitlines() if "not given to" not in ln)  # the warning names them
        return {"CFG_TOKEN"} if "CFG_TOKEN" in text else set(), {"/cfgdata"} if "/cfgdata" in text else set()
    return names


#: Each command that hands a project's settings on, and how to read which variables and mount
#: targets it handed on.
CONSUMERS = {
    "run": _run_json,
    "project show": _show_json,
    "cached run": _cached_env,
    "export compose": _text(["export", "compose", "{root}", "-o", "-"]),
    "submit apptainer": _text(["submit", "{root}", "--runtime", "apptainer", "--dry-run", "--", "true"]),
}


@pytest.mark.parametrize("trusted", [True, False], ids=["trusted", "untrusted"])
@pytest.mark.parametrize("consumer", sorted(CONSUMERS))
def test_every_consumer_gives_the_config_to_trusted_files_only(tmp_path, monkeypatch, capsys, consumer, trusted):
    from envman.project.trust import trust

    monkeypatch.setattr("envman.run.command.docker_facts", lambda: AnyStable())
    write_report("sha256:stable")
    data = tmp_path / "data"
    data.mkdir()
    cfg = Path(os.environ["ENVMAN_CONFIG_DIR"])
    cfg.mkdir(parents=True, exist_ok=True)
    (cfg / "config.toml").write_text(CONFIG.replace("{data}", str(data)))
    os.chmod(cfg / "config.toml", 0o600)
    root = _project(tmp_path / "clone")
    monkeypatch.chdir(root)
    if trusted:
        p = load_project(root)
        trust(p.real_file, p.digest, root=p.root)
    env, targets = CONSUMERS[consumer](root, capsys)
    assert ("CFG_TOKEN" in env) == trusted, (consumer, env)
    if consumer != "cached run":  # the cached run works out the environment only
        assert ("/cfgdata" in targets) == trusted, (consumer, targets)


@pytest.mark.parametrize("config", [True, False])
def test_project_add_says_what_its_trust_gives_the_project_from_the_config(tmp_path, monkeypatch, capsys, config):
    cfg = Path(os.environ["ENVMAN_CONFIG_DIR"])
    cfg.mkdir(parents=True, exist_ok=True)
    if config:
        (tmp_path / "data").mkdir()
        (cfg / "config.toml").write_text(CONFIG.replace("{data}", str(tmp_path / "data")))
        os.chmod(cfg / "config.toml", 0o600)
    root = _project(tmp_path / "clone")
    out = _main(["project", "add", str(root)], capsys)
    assert ("it gets your config's [run] environment (CFG_TOKEN) and mounts" in out) == config
    assert TOKEN not in out
