"""The network a run joins: one per user and project, made by envman, never the default bridge.

On the engine's default bridge every container reaches every other one (inter-container traffic is
on), so on a shared server an untrusted clone's code could reach another user's TensorBoard,
Jupyter or debugger directly. Each run instead joins ``envman-<uid>-<project>-<hash of the root>``
(:func:`envman.run.plan.network_name`): a user-defined bridge the engine isolates from every other
bridge, shared only by the same user's runs of the same project (which then reach each other by
container name). ``network = "none"`` in the project file gives no network at all.

The network is created on first use with envman's labels, under a per-user lock; one that exists
but is not envman's network of this project for this uid is refused, not joined. When the engine
has no free address pool left for another bridge, this user's own idle envman networks are removed
once and the creation tried again.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING
import time

from envman import labels as L
from envman.errors import EngineError, UserError

if TYPE_CHECKING:
    from envman.engine.api import NetworkInfo
    from envman.engine.facts import DockerFacts
    from envman.run.plan import RunPlan

#: How the engines say every address pool is in use (Docker: "could not find an available,
#: non-overlapping IPv4 address pool among the defaults to assign to the network"; Podman:
#: "could not find free subnet from subnet pools").
POOL_EXHAUSTED = ("non-overlapping", "address pool", "free subnet")
#: A network of this user's created less than this long ago may be about to get its first
#: container (another run of theirs between creating it and ``docker run``): never removed.
IDLE_AFTER_S = 600
LOCK_TIMEOUT_S = 60.0


def network_labels(plan: RunPlan) -> dict[str, str]:
    """What envman's network of ``plan``'s project carries (and is checked for before it is joined)."""
    return labels_of(plan.uid, plan.project, plan.root)


def labels_of(uid: int, project: str, root: str) -> dict[str, str]:
    """The labels of envman's network of ``project`` (at ``root``) for ``uid``."""
    from envman.project.file import project_identity

    return {L.MANAGED: L.TRUE, L.ROLE: L.ROLE_NETWORK, L.UID: str(uid), L.PROJECT: project,
            L.PROJECT_ID: project_identity(project, root)}


def create_command(uid: int, project: str, root: str) -> str:
    """A shell line that makes envman's network of ``project`` for ``uid`` unless it exists (what a
    Dev Container runs first: ``devcontainer up`` makes no network of its own)."""
    import shlex

    from envman.run.plan import network_name

    name = shlex.quote(network_name(uid, project, root))
    labels = " ".join(f"--label {shlex.quote(f'{k}={v}')}" for k, v in labels_of(uid, project, root).items())
    return f"docker network inspect {name} >/dev/null 2>&1 || docker network create --driver bridge {labels} {name}"


def network_problem(info: NetworkInfo, plan: RunPlan) -> str | None:
    """Why the existing network ``info`` is not envman's network of ``plan``'s project for its
    user (``None``: it is). Anyone who can reach the engine can make a network of that name."""
    want = network_labels(plan)
    wrong = sorted(k for k, v in want.items() if info.labels.get(k) != v)
    if wrong:
        return f"its labels {', '.join(wrong)} are not envman's for uid {plan.uid} and project {plan.project}"
    if info.driver != "bridge":
        return f"its driver is {info.driver!r}, not bridge"
    return None


def ensure_network(engine: DockerFacts, plan: RunPlan) -> str | None:
    """Make sure the network ``plan`` names exists and is envman's network of its project and
    user; its id (``None`` for ``network = "none"``). One line on any problem."""
    name = plan.network_name
    if name == "none":
        return None
    # The lock orders creators only: a network that exists is checked below without it (every
    # run after the first), and one that does not is looked up again once the lock is held.
    info = engine.inspect_network(name)
    if info is None:
        info = _create_locked(engine, plan)
    if info is None:
        raise EngineError(f"network {name} was created but the engine does not show it", fix="run again")
    why = network_problem(info, plan)
    if why is not None:
        raise UserError(f"network {name} exists but is not envman's network of this project: {why}",
                        where="envman run", fix=f"remove it (docker network rm {name}) and run again, or set "
                        'network = "none" in the project file')
    return info.id


def _create_locked(engine: DockerFacts, plan: RunPlan) -> NetworkInfo | None:
    """Under the network's lock: the network as the engine shows it, created first if it is not
    there (another envman process may have made it while this one waited)."""
    from filelock import FileLock, Timeout

    from envman.state import locks_dir

    name = plan.network_name
    locks_dir().mkdir(parents=True, exist_ok=True)
    try:
        with FileLock(str(locks_dir() / f"network-{name}.lock"), timeout=LOCK_TIMEOUT_S):
            info = engine.inspect_network(name)
            if info is None:
                _create(engine, plan)
                info = engine.inspect_network(name)
    except Timeout:
        raise UserError(f"another envman process has held the lock of network {name} for {LOCK_TIMEOUT_S:.0f} s",
                        where="envman run", fix="wait for it to finish, then run again") from None
    return info


def _create(engine: DockerFacts, plan: RunPlan) -> None:
    name = plan.network_name
    if _created(engine, plan) or (remove_idle_networks(engine, plan.uid, keep=name) and _created(engine, plan)):
        return
    raise UserError(f"the engine has no free address range for network {name} (each project gets a network of "
                    "its own; your idle ones were removed)", where="envman run",
                    fix="ask the engine's administrator for more \"default-address-pools\" in daemon.json (docker "
                    'network ls shows who holds them), or set network = "none" in the project file')


def _created(engine: DockerFacts, plan: RunPlan) -> bool:
    """Create the network; ``False`` when the engine has no address range left for it."""
    try:
        engine.create_network(plan.network_name, network_labels(plan))
    except EngineError as exc:
        if any(w in str(exc) for w in POOL_EXHAUSTED):
            return False
        raise
    return True


def remove_idle_networks(engine: DockerFacts, uid: int | None = None, *, keep: str = "",
                         now: float | None = None) -> list[str]:
    """Remove this user's envman networks that no container uses (created more than
    :data:`IDLE_AFTER_S` ago, all but ``keep``); the names removed. A network in use is left (the
    engine refuses to remove it)."""
    uid = os.getuid() if uid is None else uid
    now = time.time() if now is None else now
    removed = []
    for net in engine.list_networks({L.MANAGED: L.TRUE, L.ROLE: L.ROLE_NETWORK, L.UID: str(uid)}):
        if net.name == keep or now - net.created < IDLE_AFTER_S:
            continue
        current = engine.inspect_network(net.name)
        if current is None or current.containers or current.labels.get(L.UID) != str(uid):
            continue
        if engine.remove_network(net.name):
            removed.append(net.name)
    return removed
