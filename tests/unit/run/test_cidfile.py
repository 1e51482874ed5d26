"""The record of the containers this user's envman started (envman/run/cidfile.py): ``--cidfile``
on every run hand-off, only regular files of the user's believed, stale records swept."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from envman.run.cidfile import GRACE_S, containers_dir, started_here, started_ids, with_cidfile
from tests.unit.run.test_envs import record_started, run_container


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))


def test_the_record_of_started_containers_believes_only_my_regular_files_and_sweeps_old_ones(tmp_path):
    """A record is a regular file of mine holding one container ID: a symbolic link or a malformed
    file is no record. A record whose container is not listed is removed once older than the grace
    time (one being created is not listed yet), never before; one whose container is listed is
    kept however old."""
    live, gone, young = run_container("a", "x"), run_container("b", "y"), run_container("c", "z")
    p_live = record_started(live, age=10 * GRACE_S)
    p_gone = record_started(gone, age=GRACE_S + 5)
    p_young = record_started(young, age=GRACE_S - 5)
    junk = Path(containers_dir(), "junk.cid")
    junk.write_text("not an id\n")
    os.utime(junk, (0, 0))
    target = tmp_path / "elsewhere"
    target.write_text("d" * 64)
    link = os.path.join(containers_dir(), "link.cid")
    os.symlink(target, link)
    assert started_ids([live.id]) == {live.id, young.id}
    assert os.path.exists(p_live) and os.path.exists(p_young) and not os.path.exists(p_gone)
    assert not junk.exists() and not os.path.lexists(link) and target.exists()


def test_no_record_folder_or_one_not_mine_gives_no_ids(tmp_path, monkeypatch):
    assert started_ids(["a" * 64]) == frozenset()
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "other"))
    (tmp_path / "other").mkdir()
    os.symlink(tmp_path / "state", tmp_path / "other" / "containers")
    assert started_ids() == frozenset()


@pytest.mark.parametrize(("cid", "listed", "mine"), [
    ("a" * 64, "a" * 64, True), ("a" * 64, "a" * 12, True), ("a" * 64, "a" * 11, False),
    ("a" * 64, "b" * 64, False), ("a" * 64, "", False),
])
def test_a_listed_id_is_mine_in_full_or_as_twelve_digits_at_least(cid, listed, mine):
    assert started_here(listed, {cid}) is mine


@pytest.mark.parametrize(("argv", "at"), [
    (["docker", "run", "--rm", "img"], 2),
    (["podman", "run", "--rm", "img"], 2),
    (["podman", "--remote", "--url", "run", "run", "--rm", "img"], 5),
])
def test_every_run_hand_off_gets_a_new_cidfile_of_mine_after_its_run_word(argv, at):
    got = with_cidfile(argv)
    assert got[at - 1] == "run" and got[at] == "--cidfile" and got[:at] + got[at + 2:] == argv
    path = got[at + 1]
    assert os.path.dirname(path) == containers_dir() and not os.path.exists(path)  # the engine's CLI writes it
    assert os.stat(containers_dir()).st_mode & 0o777 == 0o700
    assert with_cidfile(argv)[at + 1] != path  # a new file per run
    assert with_cidfile(["docker", "exec", "c", "sh"]) == ["docker", "exec", "c", "sh"]


def test_a_planted_records_folder_is_refused_in_one_line(tmp_path):
    from envman.errors import UserError

    os.makedirs(tmp_path / "state")
    os.symlink(tmp_path, tmp_path / "state" / "containers")
    with pytest.raises(UserError, match="not a directory of yours"):
        with_cidfile(["docker", "run", "img"])
