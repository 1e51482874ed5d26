"""Smoke containers of builds that are over are removed by the next smoke test of their user, and
no others (envman.images.smokerun; docs/security.md, "Smoke verdicts")."""

from __future__ import annotations

import pytest

from envman import labels as L
from envman.engine.api import ContainerInfo
from envman.images import smokerun as S
from envman.state import locks_dir


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))


class _Containers:
    """Just the two engine calls ``remove_smoke_leftovers`` makes."""

    def __init__(self, containers):
        self.containers, self.removed = list(containers), []

    def list_containers(self, labels, *, all=True):  # noqa: A002  (the engine's name)
        want = dict(labels)
        return [c for c in self.containers if not [k for k, v in want.items() if c.labels.get(k) != v]]

    def remove_container(self, cid, force=False):
        self.removed.append(cid)


def _smoke_container(cid: str, state: str, age: float, token: str | None = None):
    import os
    import time

    labels = {**L.smoke_labels("torch-2.4.1-cpu-py3.12"), L.BUILT_BY_UID: str(os.getuid()),
              **({L.SMOKE_RUN: token} if token is not None else {})}
    return ContainerInfo(cid, f"c-{cid}", "envman/x:1", state, labels, created=int(time.time() - age))


def test_a_concurrent_build_s_just_finished_probe_container_is_not_swept_before_it_is_read():
    """Fault (issue 35 item 5, "stale smoke containers … removed by the next run"): the engine's
    ``run`` reads a probe's logs *after* ``wait`` returns, then removes the container. Another build
    of the same user (``envman build --jobs 2``, a second terminal) that starts its smoke test in
    that window calls ``remove_smoke_leftovers``, which removes every *stopped* smoke container of
    this uid, however young: the first build's ``logs`` call then fails and a good stack is reported
    as failed. A leftover must be one whose build is over (older than the longest smoke timeout, or
    its build's lock free), not any stopped one."""
    import os

    engine = _Containers([_smoke_container("fresh", "exited", age=0.5)])
    S.remove_smoke_leftovers(engine, str(os.getuid()))
    assert engine.removed == [], "a live build's just-exited probe container was removed"


def test_a_probe_container_left_running_by_a_killed_build_is_removed_once_past_any_timeout():
    """Fault (issue 35 item 5): the smoke timeout is enforced by envman's own process (``wait`` with
    a client-side timeout, then ``kill``). After ``kill -9`` of that process a probe that hangs
    (a stuck GPU call) runs forever, holding the GPU, and ``remove_smoke_leftovers`` never removes
    it: it skips every running container. One running for days, far past any smoke timeout, is a
    leftover too."""
    import os

    engine = _Containers([_smoke_container("stuck", "running", age=3 * 24 * 3600)])
    S.remove_smoke_leftovers(engine, str(os.getuid()))
    assert engine.removed == ["stuck"]


@pytest.mark.parametrize("state, age, removed", [
    ("exited", S.STOPPED_LEFTOVER_S - 5, False), ("exited", S.STOPPED_LEFTOVER_S + 5, True),
    ("created", S.STOPPED_LEFTOVER_S - 5, False), ("created", S.STOPPED_LEFTOVER_S + 5, True),
    ("running", S.STOPPED_LEFTOVER_S + 5, False), ("running", S.RUNNING_LEFTOVER_S - 5, False),
    ("running", S.RUNNING_LEFTOVER_S + 5, True), ("paused", S.STOPPED_LEFTOVER_S + 5, True),
])
def test_a_smoke_container_naming_no_run_lock_is_a_leftover_only_past_its_age(state, age, removed):
    """Boundaries of a container that names no run lock (made before envman held one, or with a
    label that is no token): stopped, a leftover after :data:`STOPPED_LEFTOVER_S`; running, after
    :data:`RUNNING_LEFTOVER_S`, not before."""
    import os

    for token in (None, "", "A" * 32, "a" * 31, "a" * 33, "../" + "a" * 29):
        engine = _Containers([_smoke_container("c", state, age=age, token=token)])
        S.remove_smoke_leftovers(engine, str(os.getuid()))
        assert engine.removed == (["c"] if removed else []), token


@pytest.mark.parametrize("state", ["running", "exited"])
def test_a_smoke_container_whose_build_holds_its_run_lock_stays_and_one_whose_build_died_goes(state):
    """Whatever its state and age: kept while a process holds its run's lock (its build still
    needs it), removed once none does, the build killed with ``kill -9`` included (the kernel drops
    the lock with the process)."""
    import multiprocessing
    import os
    import signal

    from filelock import FileLock

    token = "c" * 32
    locks_dir().mkdir(parents=True, exist_ok=True)
    path = S.run_lock_path(token)
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()

    def hold():
        lock = FileLock(str(path))
        lock.acquire()
        ready.set()
        signal.pause()
        lock.release()  # never reached: the build is killed

    build = ctx.Process(target=hold)
    build.start()
    try:
        assert ready.wait(10)
        for age in (0.5, 3 * 24 * 3600):
            engine = _Containers([_smoke_container("c", state, age=age, token=token)])
            S.remove_smoke_leftovers(engine, str(os.getuid()))
            assert engine.removed == [], age
    finally:
        os.kill(build.pid, signal.SIGKILL)
        build.join(10)
    engine = _Containers([_smoke_container("c", state, age=0.5, token=token)])
    S.remove_smoke_leftovers(engine, str(os.getuid()))
    assert engine.removed == ["c"] and not path.exists()
