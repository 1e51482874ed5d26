"""envman's state directory (envman.state): where reports, logs and locks go, what a state file's
name may hold, how a write replaces a file whole, and which engine tags are stable ones."""

from __future__ import annotations

import json
import os
import time

import pytest

from envman import state
from envman.state import (
    STALE_TEMP_SECONDS, atomic_write, is_stable_tag, load_report, locks_dir, logs_dir, read_json_object,
    report_path, reports_dir, safe_name, save_report_json, sweep_stale_temps,
)

ID = "sha256:" + "ab" * 32


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))


# --------------------------------------------------------------------------- stable tags


@pytest.mark.parametrize(("ref", "stable"), [
    ("envman/torch-2.4-cuda12:latest", True),
    ("localhost:5000/envman/torch-2.4-cuda12:latest", True),  # a registry with a port
    ("envman/torch-2.4-cuda12:latest-0123456789ab", True),
    ("envman/torch-2.4-cuda12:latest-0123456789AB", False),  # envman writes its keys in lowercase
    ("envman/torch-2.4-cuda12:latest-0123456789a", False),  # 11 digits
    ("envman/torch-2.4-cuda12:latest-0123456789abc", False),  # 13 digits
    ("envman/torch-2.4-cuda12:0123456789abcdef", False),  # a candidate
    ("ubuntu:latest", True),  # a tag without a repository path: another name of an envman image
    ("ubuntu:22.04", False),
])
def test_a_stable_tag_is_latest_or_latest_and_twelve_lowercase_hex_digits(ref, stable):
    assert is_stable_tag(ref) is stable


# --------------------------------------------------------------------------- where state goes


def test_reports_logs_and_locks_live_in_their_folders_of_the_state_directory(tmp_path):
    root = tmp_path / "state"
    assert (reports_dir(), logs_dir(), locks_dir()) == (root / "reports", root / "logs", root / "locks")


def test_a_report_is_kept_under_the_bare_image_id_whichever_form_it_was_given_in(tmp_path, capsys):
    path = save_report_json(ID, {"b": 1, "a": [2]})
    assert path == tmp_path / "state" / "reports" / f"{'ab' * 32}.json"
    assert load_report(ID) == load_report("ab" * 32) == {"a": [2], "b": 1}
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(("name", "kept"), [
    ("../../etc/passwd", ".._.._etc_passwd"),
    ("a b\tc:d", "a_b_c_d"),
    ("Base-12.4_x.lock", "Base-12.4_x.lock"),
    ("é", "é"),
])
def test_a_file_name_keeps_letters_digits_dot_dash_underscore_and_nothing_else(name, kept):
    assert safe_name(name) == kept


def test_an_image_id_never_names_a_report_outside_the_reports_folder():
    assert report_path("sha256:../../x").parent == reports_dir()
    assert report_path("sha256:../../x").name == ".._.._x.json"


def test_a_report_is_written_the_same_whatever_the_order_its_keys_were_made_in():
    save_report_json(ID, {"status": "passed", "checks": {"torch": "ok", "cuda": "ok"}})
    first = report_path(ID).read_bytes()
    save_report_json(ID, {"checks": {"cuda": "ok", "torch": "ok"}, "status": "passed"})
    assert report_path(ID).read_bytes() == first


def test_a_report_that_is_not_a_json_object_is_no_report():
    report_path(ID).parent.mkdir(parents=True)
    report_path(ID).write_text("[1, 2]")
    os.chmod(report_path(ID), 0o600)
    assert load_report(ID) is None


def test_a_report_others_can_write_is_ignored_in_one_warning_that_names_it(capsys):
    save_report_json(ID, {"ok": True})
    os.chmod(report_path(ID), 0o666)
    assert load_report(ID) is None
    err = capsys.readouterr().err
    assert err.startswith(f"envman: warning: ignoring the cached smoke report {report_path(ID)}: ")


def test_a_state_file_others_can_write_is_read_as_empty_in_one_warning_that_names_it(tmp_path, capsys):
    path = tmp_path / "state" / "runs.json"
    atomic_write(path, json.dumps({"x": 1}), mode=0o666)
    assert read_json_object(path) == {}
    assert capsys.readouterr().err.startswith(f"envman: warning: ignoring the state file runs.json {path}: ")


# --------------------------------------------------------------------------- writes


def test_a_state_file_is_written_private_by_default(tmp_path):
    atomic_write(tmp_path / "f.json", "{}")
    assert oct(os.stat(tmp_path / "f.json").st_mode & 0o7777) == "0o600"


def test_a_write_that_finds_no_free_temporary_name_says_beside_which_file(tmp_path, monkeypatch):
    def taken(*a, **kw):  # every name tried exists already
        raise FileExistsError(17, "File exists")

    monkeypatch.setattr(state.os, "open", taken)
    with pytest.raises(FileExistsError) as e:
        atomic_write(tmp_path / "f.json", "{}")
    assert str(e.value) == f"no free temporary name beside {tmp_path / 'f.json'}"
    assert not (tmp_path / "f.json").exists()


def test_a_write_that_fails_keeps_the_old_file_removes_its_temp_and_says_why(tmp_path, monkeypatch):
    target = tmp_path / "f.json"
    target.write_text("old")

    def refused(src, dst):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(state.os, "replace", refused)
    with pytest.raises(PermissionError):
        atomic_write(target, "new")
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"] and target.read_text() == "old"


def test_a_temp_file_exactly_as_old_as_the_limit_is_left_one_second_older_is_removed(tmp_path, monkeypatch):
    now = 2_000_000_000
    monkeypatch.setattr(state.time, "time", lambda: now)
    at_limit, past = tmp_path / ".f.json.aa.tmp", tmp_path / ".f.json.bb.tmp"
    for p, age in ((at_limit, STALE_TEMP_SECONDS), (past, STALE_TEMP_SECONDS + 1)):
        p.write_text("half")
        os.utime(p, (now - age, now - age))
    assert sweep_stale_temps(tmp_path / "f.json") == [past]
    assert at_limit.exists()


def test_a_link_to_an_old_file_of_this_user_is_no_temp_file_to_remove(tmp_path):
    old = time.time() - STALE_TEMP_SECONDS - 60
    victim = tmp_path / "victim"
    victim.write_text("keep")
    os.utime(victim, (old, old))
    link = tmp_path / ".f.json.aa.tmp"
    link.symlink_to(victim)
    assert sweep_stale_temps(tmp_path / "f.json") == []
    assert link.is_symlink() and victim.read_text() == "keep"


def test_a_temp_file_that_cannot_be_removed_does_not_stop_the_sweep_of_the_others(tmp_path, monkeypatch):
    old = time.time() - STALE_TEMP_SECONDS - 60
    names = [tmp_path / f".f.json.{i}.tmp" for i in range(5)]
    for p in names:
        p.write_text("half")
        os.utime(p, (old, old))
    real_unlink, refused = os.unlink, []

    def unlink(path, *a, **kw):
        if not refused:  # the first one the sweep meets, whichever that is
            refused.append(path)
            raise PermissionError(13, "Permission denied")
        return real_unlink(path, *a, **kw)

    monkeypatch.setattr(state.os, "unlink", unlink)
    removed = sweep_stale_temps(tmp_path / "f.json")
    assert len(refused) == 1 and sorted(removed) == sorted(p for p in names if str(p) != str(refused[0]))
