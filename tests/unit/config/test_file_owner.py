"""The user config applies its mounts, environment and index to every run: it is believed only
while it is the user's own — a regular file (or a symlink to one) owned by the user that neither
its group nor others can write. Anything else is one line, exit 2, and nothing of it applies."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.cli import run_envman

PLANTED = '[run]\nmounts = ["/srv/planted:/opt/x"]\n'
OTHER_UID = 65534


def _plant(cfg: Path, tmp_path: Path, case: str) -> None:
    cfg.mkdir(parents=True, exist_ok=True)
    target = cfg / "config.toml"
    if case.startswith("symlink"):
        real = tmp_path / "elsewhere.toml"
        real.write_text(PLANTED)
        os.chmod(real, 0o600)
        target.symlink_to(real)
        target = real
    else:
        target.write_text(PLANTED)
        os.chmod(target, 0o600)
    if case.endswith("other uid"):
        if os.getuid() != 0:
            pytest.skip("giving a file to another uid needs root")
        os.chown(target, OTHER_UID, -1)
    for mode in (0o620, 0o602, 0o666, 0o660):
        if case.endswith(oct(mode)):
            os.chmod(target, mode)


REFUSED = ["other uid", "symlink to other uid", *(f"mode {oct(m)}" for m in (0o620, 0o602, 0o666, 0o660)),
           *(f"symlink to mode {oct(m)}" for m in (0o620, 0o602))]
BELIEVED = ["own 0o600", "symlink to own 0o600"]


@pytest.mark.parametrize("case", REFUSED + BELIEVED)
def test_the_config_is_believed_only_while_it_is_the_users_own(tmp_path, case):
    cfg = tmp_path / "cfg"
    _plant(cfg, tmp_path, case)
    env = dict(os.environ, ENVMAN_CONFIG_DIR=str(cfg), ENVMAN_STATE_DIR=str(tmp_path / "state"),
               HOME=str(tmp_path), ENVMAN_RUN_CACHE="0")
    root = tmp_path / "proj"
    root.mkdir()
    (root / "envman.toml").write_text('stack = "torch-2.4-cuda12.4"\n')
    r = run_envman(["project", "show", str(root)], env=env, cwd=tmp_path)
    if case in BELIEVED:
        assert r.returncode == 0, r.stderr
        assert "/srv/planted" in r.stdout
    else:
        assert r.returncode == 2 and "config file" in r.stderr and "not believed" in r.stderr, r.stderr
        assert r.stderr.count("\n") == 1 and "/srv/planted" not in r.stdout
