"""Whose files count as the user's own, and when the user config may apply to a project, by rule:
``_trusted_owners`` for every ``SUDO_UID`` shape, ``unsafe_reason``'s mode and owner bits,
``project_trusted`` for every combination of record, content and directory, and the kinds and
default names a refusal prints."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from envman.project import file as F
from envman.project import trust as T
from envman.project.file import load_project
from tests.support.refusal import refusal

STACK = 'stack = "torch-2.4-cuda12.4"\n'
root_only = pytest.mark.skipif(os.getuid() != 0, reason="needs root to give files to other uids")


@pytest.fixture
def home(tmp_path, monkeypatch):
    h = tmp_path / "home" / "me"
    h.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "cfg"))
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    return h


# --------------------------------------------------------------------------- whose files


@pytest.mark.parametrize(("sudo", "owners"), [
    (None, {0}), ("", {0}), ("1000", {0, 1000}), ("0", {0}), ("65534", {0, 65534}),
    ("abc", {0}), ("-1", {0}), ("1e3", {0}), (" 1000", {0}), ("\u0661\u0662", {0}),  # Arabic-Indic digits
])
def test_root_also_trusts_the_user_sudo_came_from_when_sudo_uid_is_a_plain_number(monkeypatch, sudo, owners):
    monkeypatch.setattr(os, "getuid", lambda: 0)
    if sudo is None:
        monkeypatch.delenv("SUDO_UID", raising=False)
    else:
        monkeypatch.setenv("SUDO_UID", sudo)
    assert F._trusted_owners() == owners


@pytest.mark.parametrize("sudo", [None, "0", "1001"])
@pytest.mark.parametrize("uid", [1, 1000])
def test_anyone_but_root_trusts_only_themselves_whatever_sudo_uid_says(monkeypatch, uid, sudo):
    monkeypatch.setattr(os, "getuid", lambda: uid)
    if sudo is None:
        monkeypatch.delenv("SUDO_UID", raising=False)
    else:
        monkeypatch.setenv("SUDO_UID", sudo)
    assert F._trusted_owners() == {uid}


@pytest.mark.parametrize(("mode", "theirs"), [
    *[(m, False) for m in (0o600, 0o644, 0o755, 0o705, 0o611, 0o655, 0o4755)],  # any read and execute bits
    *[(m, True) for m in (0o620, 0o602, 0o622, 0o666, 0o777, 0o660, 0o646)],  # a write bit for others
], ids=oct)
def test_a_file_is_the_user_s_exactly_while_no_one_else_can_write_it(tmp_path, mode, theirs):
    f = tmp_path / "envman.toml"
    f.write_text(STACK)
    f.chmod(mode)
    tmp_path.chmod(0o755)
    assert F.unsafe_reason(f) == ("others can write it (group/world-writable)" if theirs else None)


@pytest.mark.parametrize("make", [os.mkdir, os.mkfifo])
def test_what_is_not_a_regular_file_is_not(tmp_path, make):
    make(tmp_path / "envman.toml")
    assert F.unsafe_reason(tmp_path / "envman.toml") == "it is not a regular file"


@root_only
@pytest.mark.parametrize("dir_uid", [
    0,  # a root-owned folder (/srv, /data) holds users' projects
    4242,  # the user's own
    4243,  # someone else's
])
def test_the_folder_of_a_user_s_file_may_be_the_user_s_or_root_s_only(tmp_path, monkeypatch, dir_uid):
    monkeypatch.setattr(os, "getuid", lambda: 4242)
    monkeypatch.delenv("SUDO_UID", raising=False)
    d = tmp_path / "proj"
    d.mkdir(mode=0o755)
    f = d / "envman.toml"
    f.write_text(STACK)
    os.chown(f, 4242, 4242)
    os.chown(d, dir_uid, dir_uid)
    got = F.unsafe_reason(f)
    if dir_uid in (0, 4242):
        assert got is None
    else:
        assert got == f"its directory {d} belongs to {F._user_name(4243)}"


# --------------------------------------------------------------------------- trust of a project


def _trusted_project(root: Path, *, roots: list[str] | None, digest_same: bool = True):
    root.mkdir(parents=True, exist_ok=True)
    (root / "envman.toml").write_text(STACK + "[environment]\nX = '1'\n")
    proj = load_project(root)
    entry = {"sha256": proj.digest if digest_same else "0" * 64, "trusted": "2026-01-01T00:00:00Z"}
    if roots is not None:
        entry["roots"] = roots
    T.trust_path().parent.mkdir(parents=True, exist_ok=True)
    T.trust_path().write_text(json.dumps({"schema": 1, "files": {proj.real_file: entry}}))
    T.trust_path().chmod(0o600)
    return proj


@pytest.mark.parametrize(("roots", "digest_same", "trusted"), [
    ("own", True, True),
    ("own+other", True, True),
    ("other", True, False),  # trusted only as another folder's file
    ("own", False, False),  # changed since
    (None, True, True),  # a record from before roots: its own folder
    (None, False, False),
    ("none", True, False),  # no record at all
])
def test_project_trusted_is_the_record_for_this_content_and_this_folder(home, roots, digest_same, trusted):
    root = home / "p"
    own = os.path.realpath(root) if root.exists() else str(root)
    table = {"own": [own], "own+other": ["/elsewhere", own], "other": ["/elsewhere"], None: None, "none": None}
    proj = _trusted_project(root, roots=table[roots], digest_same=digest_same)
    if roots == "none":
        T.trust_path().write_text(json.dumps({"schema": 1, "files": {}}))
    assert T.project_trusted(proj) is trusted


def test_a_file_trusted_from_its_own_folder_is_not_trusted_through_a_symlink_elsewhere(home):
    proj = _trusted_project(home / "p", roots=None)
    other = home / "q"
    other.mkdir()
    (other / "envman.toml").symlink_to(home / "p" / "envman.toml")
    lent = load_project(other)
    assert lent.real_file == proj.real_file and lent.digest == proj.digest
    assert T.project_trusted(proj) is True and T.project_trusted(lent) is False
    line = refusal(lambda: T.require_trust(lent))
    assert line[1].startswith(f"it is not trusted (trusted only as the project file of {home / 'p'}) and asks for ")


# --------------------------------------------------------------------------- what a refusal prints


@pytest.mark.parametrize(("value", "word"), [
    (True, "a boolean"), (False, "a boolean"), (0, "a number"), (-3, "a number"), (1.5, "a number"),
    (float("nan"), "a number"), ("x", "a string"), ([], "a list"), ({}, "a table"), (None, "no value"),
])
def test_each_kind_of_value_is_named(value, word):
    assert F.kind_of(value) == word


@pytest.mark.parametrize(("value", "word"), [(b"x", "a bytes"), ((1,), "a tuple"), (object(), "a object")])
def test_a_kind_no_toml_file_holds_is_named_by_its_type(value, word):
    assert F.kind_of(value) == word


@pytest.mark.parametrize(("folder", "name"), [
    ("My Project", "my-project"), ("-x-", "x"), (".x.", "x"), ("_x_", "x"), ("--a..b__", "a..b"),
    ("x" * 70, "x" * 63), ("é" * 3 + "a", "a"), ("A_B.c-d", "a_b.c-d"),
])
def test_a_folder_s_default_name_is_lower_case_trimmed_and_63_characters_at_most(folder, name):
    assert F.default_name(Path("/srv") / folder) == name


def test_a_new_content_forgets_the_folders_the_old_one_was_trusted_from(home):
    proj = _trusted_project(home / "p", roots=None)
    other = home / "q"
    other.mkdir()
    T.trust(proj.real_file, proj.digest, root=other)
    assert T.records()[proj.real_file]["roots"] == sorted([os.path.realpath(home / "p"), os.path.realpath(other)])
    (home / "p" / "envman.toml").write_text(STACK)
    changed = load_project(home / "p")
    T.trust(changed.real_file, changed.digest, root=other)
    assert T.records()[proj.real_file]["roots"] == [os.path.realpath(other)]
    assert T.records()[proj.real_file]["uid"] == os.stat(proj.real_file).st_uid


def test_a_record_made_by_another_owner_is_one_exact_refusal(home):
    proj = _trusted_project(home / "p", roots=[os.path.realpath(home / "p")])
    doc = json.loads(T.trust_path().read_text())
    doc["files"][proj.real_file]["uid"] = os.getuid() + 4242
    T.trust_path().write_text(json.dumps(doc))
    assert refusal(lambda: T.require_trust(proj)) == (
        "UserError", "it is not trusted (its owner is not the one it had when you trusted it) and asks for "
        + "; ".join(T.trust_asks(proj)), str(proj.file),
        f"read it, then trust it: envman project trust {proj.file}")
