"""Security by rule: trust.

Each table is the list the code uses (imported, not copied), so an entry dropped from the code fails here."""

from __future__ import annotations

import os

import pytest

from envman.errors import UserError
from envman.project.file import load_project

from tests.support.security_rules import trusted_project


@pytest.mark.parametrize("body", ['mounts = ["./data:/d"]\n', 'command = ["python", "x.py"]\n', "ports = [8888]\n",
                                  '[environment]\nDB_PASS = "s3cret"\n', 'gpus = "all"\n'])
def test_trust_is_not_lent_through_a_symlink_from_another_directory(home, tmp_path, body):
    from envman.project.trust import require_trust

    good = trusted_project(tmp_path, body)
    (good / "data").mkdir(exist_ok=True)
    require_trust(load_project(good))
    evil = tmp_path / "evil"
    (evil / "data").mkdir(parents=True)
    (evil / "envman.toml").symlink_to(good / "envman.toml")
    with pytest.raises(UserError, match="not trusted"):
        require_trust(load_project(evil))


def test_a_trust_record_others_can_write_is_not_believed(home, tmp_path):
    from envman.project.trust import records, require_trust, trust_path

    good = trusted_project(tmp_path, "ports = [1]\n")
    os.chmod(trust_path(), 0o620)
    assert records() == {}
    with pytest.raises(UserError):
        require_trust(load_project(good))
