"""Tests of ``envman/project/settings.py``, moved unchanged from the former ``test_project.py``
(which tested several modules)."""

from __future__ import annotations

import pytest

from envman.errors import UserError
from envman.project.settings import CliOverrides, UserConfig, load_user_config, merge_settings
from envman.project.file import GpuRequest, Mount, Port, load_project
from tests.unit.project.test_file import dirs, proj, write_project  # noqa: F401 (shared with that file)


def test_cli_beats_project_beats_user(tmp_path):
    root = write_project(tmp_path / "p", 'stack = "torch-2.4-cuda12"\ngpus = 2\nshm_size = "2g"\n'
                         'mounts = ["/srv/a:/data"]\n[environment]\nA = "project"\nB = "project"\n', req=None)
    proj = load_project(root)
    user = UserConfig(stack="torch-1.0", gpus=GpuRequest("all"), gpus_set=True, shm_size="1g",
                      environment=(("A", "user"), ("U", "user")), mounts=(Mount("/srv/u", "/data"), Mount("/srv/x", "/x")))
    # project over user (the user config's variables and mounts go to a trusted file only)
    s = merge_settings(proj, user, CliOverrides(), trusted=True)
    assert (s.stack, s.gpus, s.shm_size) == ("torch-2.4-cuda12", GpuRequest("count", count=2), "2g")
    assert dict(s.environment) == {"A": "project", "B": "project", "U": "user"}
    assert {m.target: m.source for m in s.mounts} == {"/data": "/srv/a", "/x": "/srv/x"}
    assert dict(s.origin) == {"stack": "project", "gpus": "project", "shm_size": "project", "command": "default",
                              "network": "default"}
    # CLI over project
    cli = CliOverrides(stack="torch-2.4-cpu", gpus=None, gpus_set=True, shm_size="32g", environment=(("B", "cli"),),
                       mounts=(Mount("/srv/c", "/data"),), ports=(Port(1, 2),), command=("bash",), network="project")
    s = merge_settings(proj, user, cli, trusted=True)
    assert (s.stack, s.gpus, s.shm_size, s.command) == ("torch-2.4-cpu", None, "32g", ("bash",))
    assert dict(s.environment)["B"] == "cli" and {m.target: m.source for m in s.mounts}["/data"] == "/srv/c"
    assert set(dict(s.origin).values()) == {"cli"}


def test_user_config_fills_what_the_project_leaves_open(tmp_path):
    cfg = tmp_path / "config" / "config.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text('[run]\ngpus = "none"\nshm_size = "12g"\n[project]\nstack = "torch-2.4-cpu"\n'
                   '[render]\nanything = "belongs to another command"\n')
    user = load_user_config()
    proj = load_project(write_project(tmp_path / "p", 'name = "p"\n', req=None))
    s = merge_settings(proj, user, CliOverrides())
    assert (s.stack, s.gpus, s.shm_size) == ("torch-2.4-cpu", None, "12g")
    assert dict(s.origin)["stack"] == "user"


def test_gpu_default_follows_the_stack(tmp_path):
    proj = load_project(write_project(tmp_path / "p", 'stack = "torch-2.4"\n', req=None))
    assert merge_settings(proj, UserConfig(), CliOverrides(), stack_is_cpu=lambda s: False).gpus == GpuRequest("all")
    assert merge_settings(proj, UserConfig(), CliOverrides(), stack_is_cpu=lambda s: True).gpus is None
    s = merge_settings(proj, UserConfig(), CliOverrides(), total_ram=4 * 1024**3)
    assert s.shm_size == "2g" and dict(s.origin)["shm_size"] == "default"


def test_no_stack_anywhere_is_an_error(tmp_path):
    proj = load_project(write_project(tmp_path / "p", 'name = "p"\n', req=None))
    with pytest.raises(UserError, match="no stack for this project"):
        merge_settings(proj, UserConfig(), CliOverrides())


def test_user_config_is_validated(tmp_path):
    cfg = tmp_path / "config" / "config.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text("[run]\ngpu = 1\n")
    with pytest.raises(UserError, match=r"unknown key run\.gpu.*known keys in \[run\]"):
        load_user_config()
    cfg.write_text('[run]\nmounts = ["relative:/x"]\n')
    with pytest.raises(UserError, match="absolute source"):
        load_user_config()
    assert load_user_config(tmp_path / "missing.toml") == UserConfig()
