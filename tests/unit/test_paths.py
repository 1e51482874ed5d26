"""Where envman's data lives (envman/paths.py): the shipped data beside the package, the user's
config and state under the variables that move them, the cache folder and its switch."""

from __future__ import annotations

import os
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
    ({"XDG_CACHE_HOME": "  ", "ENVMAN_CACHE_DIR": "", "HOME": "/h"}, "/h/.cache/envman"),  # blank: the home's .cache
    ({"XDG_CACHE_HOME": "rel/cache", "HOME": "/h"}, "/h/.cache/envman"),  # relative: ignored, as the XDG spec says
])
def test_the_cache_folder_is_the_first_variable_set(environ, expected):
    assert paths.cache_dir(environ) == expected


#: (XDG variable value, HOME value): unset (None), empty, blank, relative, absolute, with a slash at the end, "/".
XDG_CASES = [None, "", "  ", "rel/dir", "/abs/dir", "/abs/dir/"]
HOME_CASES = [None, "", "relative", "/home/u", "/home/u/", "/"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="envman reads the XDG variables itself on Linux only")
@pytest.mark.parametrize("xdg", XDG_CASES)
@pytest.mark.parametrize("home", HOME_CASES)
def test_config_and_state_folders_are_platformdirs_own(xdg, home, monkeypatch):
    """Read without platformdirs (every run's path), the folders are still the ones platformdirs
    names, for every shape of the XDG variable and of HOME."""
    import platformdirs

    for name in ("ENVMAN_CONFIG_DIR", "ENVMAN_STATE_DIR", "XDG_CONFIG_HOME", "XDG_STATE_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in (("XDG_CONFIG_HOME", xdg), ("XDG_STATE_HOME", xdg), ("HOME", home)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    assert str(paths.config_dir()) == str(Path(platformdirs.user_config_dir("envman", appauthor=False)))
    assert str(paths.state_dir()) == str(Path(platformdirs.user_state_dir("envman", appauthor=False)))


def test_a_home_that_is_not_absolute_is_the_password_databases(monkeypatch):
    import pwd

    own = pwd.getpwuid(os.getuid()).pw_dir
    assert paths.xdg_home("XDG_CACHE_HOME", ".cache", {"HOME": "relative"}) == os.path.join(own, ".cache")
    assert paths.xdg_home("XDG_CACHE_HOME", ".cache", {}) == os.path.join(own, ".cache")
    assert paths.xdg_home("XDG_CACHE_HOME", ".cache", {"HOME": "/h", "XDG_CACHE_HOME": "/x"}) == "/x"


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
