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


class _Engine:
    """The local engine's answer to a listing of this user's running run containers."""

    def __init__(self, monkeypatch, listed=(), *, socket="/engine.sock", fail=False):
        import envman.engine.socket as sock

        self.asked: list[str] = []
        self.listed = list(listed)
        self.fail = fail
        monkeypatch.setattr(sock, "local_socket", lambda environ=None: socket)
        monkeypatch.setattr(sock, "api_get", self.get)

    def get(self, socket_path, path, timeout=60):
        from envman.engine.socket import NoAnswer

        self.asked.append(path)
        if self.fail:
            raise NoAnswer()
        return 200, [{"Id": c} for c in self.listed]


def _fill(count, *, age):
    """``count`` records of containers that are gone, ``age`` seconds old."""
    from envman.engine.api import ContainerInfo

    return [record_started(ContainerInfo(f"{i:064x}", "c", "img", "running", {}), age=age) for i in range(count)]


def _records():
    return sorted(n for n in os.listdir(containers_dir()) if n.endswith(".cid"))


def test_a_run_sweeps_the_records_once_they_pass_the_limit_so_a_user_who_only_runs_keeps_none_forever(monkeypatch):
    """Boundary: at SWEEP_AT files a run's hand-off asks nothing; one past it, it asks the local
    engine for this user's running run containers and removes the old records of the others."""
    from envman import labels as L
    from envman.run.cidfile import SWEEP_AT

    engine = _Engine(monkeypatch)
    _fill(SWEEP_AT - 1, age=2 * GRACE_S)
    with_cidfile(["docker", "run", "--rm", "img"])  # a path only: the folder still holds SWEEP_AT - 1
    live = run_container("a", "x")
    record_started(live, age=3 * GRACE_S)
    assert len(os.listdir(containers_dir())) == SWEEP_AT
    with_cidfile(["docker", "run", "--rm", "img"])
    assert engine.asked == [] and len(_records()) == SWEEP_AT
    young = record_started(run_container("b", "y"), age=GRACE_S - 60)
    engine.listed = [live.id]
    with_cidfile(["docker", "run", "--rm", "img"])
    assert len(engine.asked) == 1
    asked = engine.asked[0]
    from urllib.parse import unquote

    assert asked.startswith("/containers/json?") and f"{L.ROLE}={L.ROLE_RUN}" in unquote(asked) \
        and f"{L.UID}={os.getuid()}" in unquote(asked)
    assert sorted(Path(containers_dir(), n).read_text() for n in _records()) == [live.id, "b" * 64]
    assert os.path.exists(young) and started_ids([live.id]) == {live.id, "b" * 64}


def test_a_runs_sweep_waits_its_interval_and_never_stops_the_run(monkeypatch):
    import time

    from envman.run.cidfile import SWEEP_AT, SWEEP_EVERY_S

    engine = _Engine(monkeypatch)
    _fill(SWEEP_AT + 1, age=2 * GRACE_S)
    with_cidfile(["docker", "run", "img"])
    assert len(engine.asked) == 1 and _records() == []
    _fill(SWEEP_AT + 1, age=2 * GRACE_S)
    with_cidfile(["docker", "run", "img"])  # swept a moment ago: not again
    assert len(engine.asked) == 1 and len(_records()) == SWEEP_AT + 1
    stamp = Path(containers_dir(), ".swept")
    at = time.time() - SWEEP_EVERY_S + 30
    os.utime(stamp, (at, at))
    with_cidfile(["docker", "run", "img"])
    assert len(engine.asked) == 1
    at = time.time() - SWEEP_EVERY_S - 1
    os.utime(stamp, (at, at))
    with_cidfile(["docker", "run", "img"])
    assert len(engine.asked) == 2 and _records() == []
    # no local engine to ask, or one that does not answer: the records stay, the run goes on
    _fill(SWEEP_AT + 1, age=2 * GRACE_S)
    os.utime(stamp, (0, 0))
    _Engine(monkeypatch, socket=None)
    assert "--cidfile" in with_cidfile(["docker", "run", "img"])
    failing = _Engine(monkeypatch, fail=True)
    assert "--cidfile" in with_cidfile(["docker", "run", "img"])
    assert len(failing.asked) == 1 and len(_records()) == SWEEP_AT + 1
