"""envman.project.trust: the trust record's lock and its mode."""

from __future__ import annotations

import os
import stat

import pytest

from envman.errors import EnvmanError

# --------------------------------------------------------------------------- the trust record


def test_a_held_trust_lock_is_one_error_line_not_a_hang(tmp_path, monkeypatch):
    from filelock import FileLock

    from envman.project import trust as T

    record = tmp_path / "cfg" / "trust.json"
    T.trust("/x/envman.toml", "a" * 64, record)
    monkeypatch.setattr(T, "LOCK_TIMEOUT", 0.05)
    held = FileLock(str(record.with_name("trust.json.lock")))
    with held:
        with pytest.raises(EnvmanError) as e:
            T.untrust("/x/envman.toml", record)
    assert (e.value.what, e.value.where, e.value.fix, e.value.exit_code) == (
        "another envman process has held the trust record's lock for 0 s", str(record) + ".lock",
        "wait for it to finish, or remove the lock file if no envman process is running", 1)
    assert T.is_trusted("/x/envman.toml", "a" * 64, record)  # nothing changed
    assert T.untrust("/x/envman.toml", record) and not T.untrust("/x/envman.toml", record)


def test_the_trust_record_is_private_whatever_the_umask(tmp_path):
    from envman.project import trust as T

    old = os.umask(0)
    try:
        T.trust("/x/envman.toml", "a" * 64, tmp_path / "cfg" / "trust.json")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "cfg" / "trust.json").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(tmp_path / "cfg").st_mode) == 0o700
