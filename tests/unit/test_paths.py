"""Where envman's data lives (envman/paths.py): the shipped data beside the package, the user's
config and state under the variables that move them, the cache folder and its switch."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from envman import paths


def test_the_shipped_templates_and_matrices_are_found():
    assert (paths.templates_dir() / "Dockerfile.j2").is_file()
    assert any(paths.matrices_dir().glob("*.toml"))
    assert paths.package_dir() == Path(paths.__file__).resolve().parent


def test_an_installed_data_folder_wins_over_the_source_checkouts(tmp_path, monkeypatch):
    pkg = tmp_path / "site" / "envman"
    (pkg / "_data" / "matrices").mkdir(parents=True)
    (tmp_path / "site" / "matrices").mkdir()
    monkeypatch.setattr(paths, "package_dir", lambda: pkg)
    assert paths.data_dir("matrices") == pkg / "_data" / "matrices"
    assert paths.data_dir("templates") == tmp_path / "site" / "templates"  # not installed: beside the package


def test_config_and_state_follow_their_variables(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "s"))
    assert (paths.config_dir(), paths.state_dir()) == (tmp_path / "c", tmp_path / "s")
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", "")  # empty: as if unset
    monkeypatch.delenv("ENVMAN_STATE_DIR")
    assert paths.config_dir().name == "envman" and paths.state_dir().name == "envman"


@pytest.mark.skipif(sys.platform == "darwin", reason="macOS keeps caches in ~/Library/Caches")
@pytest.mark.parametrize("environ, expected", [
    ({"ENVMAN_CACHE_DIR": "/c", "ENVMAN_STATE_DIR": "/s", "XDG_CACHE_HOME": "/x"}, "/c"),
    ({"ENVMAN_STATE_DIR": "/s", "XDG_CACHE_HOME": "/x"}, "/s/cache"),
    ({"XDG_CACHE_HOME": "/x"}, "/x/envman"),
    ({"XDG_CACHE_HOME": "  ", "ENVMAN_CACHE_DIR": ""}, None),  # blank: the home's .cache
])
def test_the_cache_folder_is_the_first_variable_set(environ, expected):
    import os

    assert paths.cache_dir(environ) == (expected or os.path.join(os.path.expanduser("~/.cache"), "envman"))


@pytest.mark.parametrize("value, on", [(None, True), ("1", True), ("yes", True), ("", True), ("0", False),
                                       ("false", False), (" OFF ", False), ("No", False)])
def test_caches_are_on_unless_their_switch_says_no(value, on):
    environ = {} if value is None else {"ENVMAN_RUN_CACHE": value}
    assert paths.caches_enabled(environ) is on
    assert paths.caches_enabled({"ENVMAN_PARSE_CACHE": "0"}, switch="ENVMAN_PARSE_CACHE") is False
    assert paths.caches_enabled({"ENVMAN_PARSE_CACHE": "0"}) is True  # another switch


def test_the_container_paths_are_absolute_and_distinct():
    assert paths.WORKSPACE.startswith("/") and paths.CONTAINER_HOME.startswith("/")
    assert paths.WORKSPACE != paths.CONTAINER_HOME
