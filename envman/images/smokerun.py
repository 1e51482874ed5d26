"""The smoke test's containers: which run each belongs to, and which are left over.

A smoke test holds a lock of its run (:func:`held_run`, an ``flock`` in this user's own locks
folder, dropped by the kernel when the process ends, however it ends) from before its probe's
container is made until it is removed, and labels the container with the run's token. A smoke
container whose run lock is free belongs to a build that is over: it is removed by the next smoke
test of that user (:func:`remove_smoke_leftovers`), stopped or still running.
"""

from __future__ import annotations

import re
import secrets
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from envman import labels as L
from envman.errors import EnvmanError
from envman.state import locks_dir

if TYPE_CHECKING:
    from envman.engine.api import ContainerEngine, ContainerInfo


@contextmanager
def held_run() -> Iterator[str]:
    """A new smoke run's token, its lock held within: the container labelled with it is this run's."""
    from filelock import FileLock

    token = secrets.token_hex(16)
    locks_dir().mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(run_lock_path(token)))
    lock.acquire()
    try:
        yield token
    finally:
        run_lock_path(token).unlink(missing_ok=True)
        lock.release()


#: A smoke container that names no run lock (one made before envman held one) is a leftover once
#: stopped this long (its build reads its logs within seconds of its end) ...
STOPPED_LEFTOVER_S = 600
#: ... or once running this long: far past the smoke test's time limit, by default 900 s.
RUNNING_LEFTOVER_S = 24 * 3600
RUN_TOKEN = re.compile(r"[0-9a-f]{32}")


def run_lock_path(token: str) -> Path:
    """The lock a smoke test holds while its probe's container exists (in this user's own locks)."""
    return locks_dir() / f"smoke-{token}.lock"


def run_over(path: Path) -> bool:
    """Whether no process holds the smoke run's lock ``path`` (its build ended, however it ended:
    ``flock`` is dropped by the kernel with the process); a free one is removed."""
    from filelock import FileLock, Timeout

    if not path.exists():
        return True
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return False
    try:
        path.unlink(missing_ok=True)
    finally:
        lock.release()
    return True


def is_leftover(c: ContainerInfo, now: float) -> bool:
    """Whether the smoke container ``c`` is one whose build is over: its run lock is free, or (no
    lock named) it has been stopped or running longer than any build of it can still need it."""
    token = c.labels.get(L.SMOKE_RUN, "")
    if RUN_TOKEN.fullmatch(token):
        return run_over(run_lock_path(token))
    age = now - c.created
    return age > (RUNNING_LEFTOVER_S if c.state == "running" else STOPPED_LEFTOVER_S)


def remove_smoke_leftovers(engine: ContainerEngine, owner: str) -> list[str]:
    """Remove the smoke-test containers of this user (uid ``owner``) whose build is over: a build
    killed mid-probe (``kill -9``) leaves its container behind, stopped or, when the probe hangs,
    running (the time limit is kept by the killed process). A container whose build still runs
    (another build of this user's, about to read its probe's logs) is left alone, as are other
    users' containers."""
    gone = []
    now = time.time()
    for c in engine.list_containers({L.ROLE: L.ROLE_SMOKE, L.BUILT_BY_UID: owner}, all=True):
        if c.labels.get(L.BUILT_BY_UID) == owner and is_leftover(c, now):
            try:
                engine.remove_container(c.id, force=True)
                gone.append(c.id)
            except EnvmanError:
                continue  # removed meanwhile
    return gone


__all__ = ["RUNNING_LEFTOVER_S", "RUN_TOKEN", "STOPPED_LEFTOVER_S", "held_run", "is_leftover", "remove_smoke_leftovers",
           "run_lock_path", "run_over"]
