"""Tests of ``envman/run/clean.py``, moved unchanged from the former ``test_daily_use.py``
(which tested several modules)."""

from __future__ import annotations

import re
from pathlib import Path

from envman.run.envs import one
from tests.unit.run.test_envs import plan  # noqa: F401 (shared with that file)


def test_clean_plan_names_only_envmans_entries(tmp_path, monkeypatch):
    from envman.run.clean import apply, plan

    state, config = tmp_path / "state", tmp_path / "config"
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(state))
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(config))
    (state / "homes" / "p" / "ro").mkdir(parents=True)
    (state / "homes" / "p" / "ro" / "f").write_text("x")
    (state / "homes" / "p" / "ro").chmod(0o500)  # a read-only folder in a home still goes
    (state / "reports").mkdir()
    (state / "mine.txt").write_text("keep")
    config.mkdir()
    (config / "config.toml").write_text("")
    (config / "other").write_text("keep")
    p = plan()
    assert sorted(x.name for x in p.paths) == ["homes", "reports"] and not p.images
    p = plan(config=True)
    assert "config.toml" in {x.name for x in p.paths}
    apply(p)
    assert not (state / "homes").exists() and (state / "mine.txt").exists() and (config / "other").exists()
    assert plan(config=True).empty


def test_clean_removes_the_wheel_store_from_the_cache_folder(tmp_path, monkeypatch):
    from envman.images.wheelstore import default_root
    from envman.run.clean import apply, plan

    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ENVMAN_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "state").mkdir()
    store = default_root()
    assert store == tmp_path / "cache" / "wheels"
    (store / "sha256" / ("a" * 64)).mkdir(parents=True)
    (store / "sha256" / ("a" * 64) / "x-1-py3-none-any.whl").write_bytes(b"w")
    (tmp_path / "cache" / "mine.txt").write_text("keep")
    p = plan()
    assert store in p.paths
    apply(p)
    assert not store.exists() and (tmp_path / "cache" / "mine.txt").exists()


def test_clean_knows_every_file_and_folder_envman_writes_for_a_user():
    """clean left Charliecloud's converted images and trust.json behind. Every name the code
    joins onto the state or config directory must be one clean removes."""
    from envman.run.clean import CONFIG_ENTRIES, STATE_ENTRIES

    root = Path(__file__).resolve().parents[3] / "envman"
    state, config = set(), set()
    for f in root.rglob("*.py"):
        text = f.read_text(encoding="utf-8")
        state |= set(re.findall(r'(?:state_dir\(\)|Path\(state_dir\)|spec\.state_dir\)?) / "([^"/]+)"', text))
        config |= set(re.findall(r'config_dir\(\) / "([^"/]+)"', text))
        for const in re.findall(r'^(?:ORIGINS_FILE|TRUST_FILE|REGISTRY_FILE)\s*=\s*"([^"]+)"', text, re.M):
            (config if const in ("trust.json", "projects.json") else state).add(const)
    assert state and config
    assert state <= set(STATE_ENTRIES), state - set(STATE_ENTRIES)
    assert config <= set(CONFIG_ENTRIES), config - set(CONFIG_ENTRIES)
    assert {"charliecloud", "matrix-origins.json"} <= state and "trust.json" in config


def test_clean_removes_an_image_after_those_built_on_it_and_keeps_one_others_build_on(tmp_path):
    """clean --images failed on a rebuilt base listed before its stacks ("image has dependent
    child images"): children go first, and a base another user's image still stands on is kept."""
    from envman.errors import EngineError
    from envman.run.clean import CleanPlan, apply

    children = {"sha256:base": {"sha256:stack"}, "sha256:shared": {"sha256:theirs"}}
    removed = []

    class Engine:
        def remove_image(self, ref, force=False):
            if children.get(ref, set()) - set(removed):
                raise EngineError(f"remove image {ref}: conflict: unable to delete (cannot be forced) - "
                                  "image has dependent child images")
            removed.append(ref)

    plan = CleanPlan(images=(("sha256:base", "envman/base:10.0", 1), ("sha256:stack", "envman/s:latest", 1),
                             ("sha256:shared", "envman/base:11.0", 1)))
    kept: list[str] = []
    assert apply(plan, Engine(), kept=kept) == []
    assert removed == ["sha256:stack", "sha256:base"]
    assert kept == ["envman/base:11.0: other images are built on it"]


def test_making_a_folder_writable_never_follows_a_symlink_or_touches_another_users_folder(tmp_path):
    """``clean`` chmods the parent of what it could not remove; a container that shares the folder
    may have swapped it for a symlink by then: the symlink's target keeps its mode."""
    import os

    from envman.run.clean import _make_writable

    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o500)
    target.chmod(0o500)
    swapped = tmp_path / "swapped"
    swapped.symlink_to(target)
    _make_writable(str(swapped))
    assert target.stat().st_mode & 0o777 == 0o500
    mine = tmp_path / "mine"
    mine.mkdir()
    mine.chmod(0o500)
    _make_writable(str(mine))
    assert mine.stat().st_mode & 0o777 == 0o700
    _make_writable(str(tmp_path / "gone"))  # vanished meanwhile: nothing to do, no error
    if os.geteuid() == 0:
        theirs = tmp_path / "theirs"
        theirs.mkdir()
        theirs.chmod(0o500)
        os.chown(theirs, 65534, 65534)
        _make_writable(str(theirs))
        assert theirs.stat().st_mode & 0o777 == 0o500


def test_an_entry_that_cannot_be_removed_is_one_line_naming_it(tmp_path, monkeypatch):
    import errno
    import shutil

    import pytest

    from envman.errors import EnvmanError
    from envman.run import clean

    folder = tmp_path / "homes"
    (folder / "p").mkdir(parents=True)
    (folder / "p" / "f").write_text("x")

    def rmtree(path, onerror):
        onerror(lambda p: (_ for _ in ()).throw(PermissionError(errno.EACCES, "Permission denied", p)),
                str(folder / "p" / "f"), None)

    monkeypatch.setattr(shutil, "rmtree", rmtree)
    with pytest.raises(EnvmanError) as e:
        clean._remove(folder)
    assert str(e.value) == (f"envman clean: cannot remove {folder / 'p' / 'f'}: Permission denied — stop the containers "
                            "that use it (envman ps), then run envman clean again")
    assert e.value.exit_code == 1


def test_clean_without_a_terminal_refuses_before_it_lists_anything(tmp_path):
    """It printed "remove ..." lines, then refused: read quickly, that looked done."""
    import os

    from tests.support.cli import run_envman

    env = {**os.environ, "ENVMAN_STATE_DIR": str(tmp_path / "state"), "ENVMAN_CONFIG_DIR": str(tmp_path / "config")}
    (tmp_path / "state" / "reports").mkdir(parents=True)
    from envman.errors import counted

    listed = run_envman(["clean", "--dry-run"], env=env)
    n = listed.stdout.count("would remove ")
    assert listed.returncode == 0 and n >= 1
    r = run_envman(["clean"], env=env)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and f"not confirmed: {counted(n, 'path')} and 0 images would be removed" in r.stderr
    assert (tmp_path / "state" / "reports").exists()
    done = run_envman(["clean", "--yes"], env=env)
    assert done.returncode == 0 and f"removed {counted(n, 'path')}, 0 images" in done.stdout
    assert not (tmp_path / "state" / "reports").exists()
