"""Named, long-lived environments: ``envman run --detach/--name``, ``exec``, ``ps``, ``stop``; the shell of ``shell``.

A named environment is an ``envman run`` container labelled ``envman.env=<name>`` and
``envman.uid=<uid>`` (every run container carries ``envman.role=run``, ``envman.project`` and
``envman.name``, the stack) and called ``<name>`` (``--name``) or ``envman-<uid>-<project>``
(``--detach`` alone, so two users' detached runs of a project do not collide). Lookups are by
label among the caller's own containers: the ones whose ID this user's envman recorded when it
started them (:mod:`envman.run.cidfile`), as labels are anyone's to write. ``envman exec`` enters one with the rules of a run (the caller's uid and gid, HOME at
/home/envman, the directory under /workspace that matches the caller's), through ``docker exec``
exec-ed like ``docker run`` is. The facts come from the engine the ``docker`` CLI talks to: its
Unix socket when that is the local engine, else the CLI itself.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from envman import labels as L
from envman.errors import UserError, shell_join
from envman.paths import CONTAINER_HOME, WORKSPACE
from envman.engine.api import ContainerInfo
from envman.engine.facts import DockerFacts
from envman.engine.handoff import ENV_FILE_SLOT, exec_docker, terminal_flags, with_terminal
from envman.engine.socket import local_socket
from envman.run import grammar
from envman.run.cidfile import started_here, started_ids

RUN_ROLE = f"{L.ROLE}={L.ROLE_RUN}"
#: What ``envman shell`` and a bare ``envman exec NAME`` start: bash when the image has it, else sh;
#: interactive, with the start-up files a login shell reads, and then the image's own PATH (the
#: stack's venv first) put back in front: a base image's /etc/profile (Debian's and Ubuntu's set
#: PATH outright) or a user's ~/.bashrc may not hide the stack's python. The start-up file comes
#: on fd 3 (a here-document), so nothing is written into the image or the container.
_SHELL_RC = """[ -r /etc/profile ] && . /etc/profile
[ -r "$HOME/{rc}" ] && . "$HOME/{rc}"
PATH="$ENVMAN_IMAGE_PATH:$PATH"; export PATH; unset ENVMAN_IMAGE_PATH
"""
SHELL_COMMAND = ("/bin/sh", "-c", "ENVMAN_IMAGE_PATH=\"$PATH\"; export ENVMAN_IMAGE_PATH\n"
                 "if command -v bash >/dev/null 2>&1; then exec bash --rcfile /dev/fd/3 -i 3<<'ENVMAN_RC'\n"
                 + _SHELL_RC.format(rc=".bashrc") + "ENVMAN_RC\n"
                 "else ENV=/dev/fd/3 exec sh -i 3<<'ENVMAN_RC'\n"
                 + _SHELL_RC.format(rc=".profile") + "ENVMAN_RC\nfi\n")


@dataclass(frozen=True)
class EnvContainer:
    """One run container of envman, as the engine reports it."""

    id: str
    name: str  # the container's name (without the leading /)
    env: str | None  # envman.env: the environment's name, if it was given one
    project: str
    stack: str
    uid: int | None
    state: str  # running, exited, ...
    created: str
    image: str
    root: str | None  # the host directory mounted at /workspace

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id[:12], "name": self.env, "container": self.name, "project": self.project,
                "stack": self.stack, "uid": self.uid, "state": self.state, "created": self.created,
                "image": self.image, "root": self.root}


def env_container(c: ContainerInfo) -> EnvContainer:
    """An :class:`EnvContainer` from the engine's facts about a container."""
    uid = c.labels.get(L.UID, "")
    return EnvContainer(
        id=c.id, name=c.name, env=c.labels.get(L.ENV), project=c.labels.get(L.PROJECT, ""),
        stack=c.labels.get(L.NAME, ""), uid=int(uid) if uid.isdigit() else None, state=c.state,
        created=time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(c.created)) if c.created else "", image=c.image,
        root=c.mount_source(WORKSPACE),
    )


def from_inspect(doc: dict[str, Any]) -> EnvContainer:
    """An :class:`EnvContainer` from ``docker inspect``'s JSON of a container."""
    return env_container(ContainerInfo.from_api(doc))


def _engine() -> DockerFacts:
    """The engine the ``docker`` CLI talks to: its Unix socket when local, else the CLI."""
    return DockerFacts(socket=local_socket())


def list_containers(*, uid: int | None = None, include_stopped: bool = False) -> list[EnvContainer]:
    """envman's run containers (``uid``: only those labelled as that user's), oldest first."""
    labels = [RUN_ROLE] + ([f"{L.UID}={uid}"] if uid is not None else [])
    out = [env_container(c) for c in _engine().list_containers(labels, all=include_stopped)]
    return sorted(out, key=lambda c: (c.created, c.name))


def own_containers(*, include_stopped: bool = False) -> tuple[list[EnvContainer], list[EnvContainer]]:
    """(the caller's run containers: labelled with their uid *and* started by their envman, the
    ones only labelled so): a label is anyone's to write, the recorded ID is not."""
    labelled = list_containers(uid=os.getuid(), include_stopped=include_stopped)
    started = started_ids(c.id for c in labelled)
    mine = [c for c in labelled if started_here(c.id, started)]
    return mine, [c for c in labelled if not started_here(c.id, started)]


def not_started_here(foreign: Sequence[EnvContainer], target: str, *, action: str,
                     mine: Sequence[EnvContainer] = ()) -> None:
    """Refuse, in one line, when ``target`` names only a container labelled as the caller's that
    their envman did not start (another user of the engine can label one so); when it names one
    of ``mine`` too, the caller's own error about those stands."""
    if any(target in (c.env, c.project) for c in mine):
        return
    named = [c for c in foreign if target in (c.env, c.project)]
    if named:
        raise UserError(f"container {named[0].name} is labelled as your {target!r} but your envman did not start it: "
                        f"not {'entered' if action == 'exec' else 'touched'}", where=f"envman {action}",
                        fix=f"check who did (docker inspect {named[0].id[:12]}); start your own: "
                            f"envman run --detach --name NAME PROJECT")


def find_container(name: str) -> EnvContainer | None:
    """The container called ``name`` if it exists (any state), else ``None``."""
    found = _engine().inspect_container(name)
    return env_container(found) if found is not None else None


def select(containers: Sequence[EnvContainer], target: str, *, action: str) -> list[EnvContainer]:
    """The containers ``target`` names: the environment called so, else every one of that project."""
    named = [c for c in containers if c.env == target]
    if named:
        return named
    of_project = [c for c in containers if c.project == target]
    if of_project:
        return of_project
    running = sorted({c.env or c.project for c in containers})
    raise UserError(f"no running environment or project named {target!r}", where=f"envman {action}",
                    fix=("running: " + ", ".join(running) + "; " if running else "")
                    + "start one: envman run --detach PROJECT")


def one(containers: Sequence[EnvContainer], target: str) -> EnvContainer:
    """The one container ``envman exec TARGET`` enters."""
    found = [c for c in select(containers, target, action="exec") if c.state == "running"]
    if len(found) > 1:
        names = ", ".join(c.env or c.name for c in found)
        raise UserError(f"project {target!r} has {len(found)} running environments ({names})", where="envman exec",
                        fix="name one: envman exec NAME -- CMD")
    if not found:
        raise UserError(f"environment {target!r} is not running", where="envman exec",
                        fix=f"start it: envman run --detach --name {target} PROJECT")
    return found[0]


def exec_argv(c: EnvContainer, command: Sequence[str], *, uid: int, gid: int, workdir: str,
              environment: Sequence[tuple[str, str]] = (), tty: bool = False, interactive: bool = False,
              docker: str = "docker", env_file: str | None = None) -> list[str]:
    """The ``docker exec`` command line (pure): the caller's uid:gid, HOME, workdir, extra env.
    Environment values never appear on it: ``env_file`` (the slot
    :func:`envman.engine.handoff.exec_docker` fills) carries them, else only the names are shown."""
    argv = [docker, "exec", "--user", f"{uid}:{gid}", "--workdir", workdir, "--env", f"HOME={CONTAINER_HOME}"]
    if environment and env_file is not None:
        argv += ["--env-file", env_file]
    elif environment:
        for k, _ in environment:
            argv += ["--env", k]
    argv += [c.id, *(command or SHELL_COMMAND)]
    return with_terminal(argv, tty, interactive)


def exec_cli(args: Sequence[str], command: Sequence[str]) -> None:
    """``envman exec``: run a command (default: a shell) in a running environment of this user."""
    from envman.run.plan import container_workdir
    from envman.run.prepare import parse_cli_env

    opts, bare = grammar.split(grammar.EXEC, args)
    if bare and command:
        raise UserError("two commands given", where="envman exec", fix="give the command once, after NAME or after --")
    a = grammar.parse(grammar.EXEC, opts)
    mine, foreign = own_containers()
    try:
        c = one(mine, a.target)
    except UserError:
        not_started_here(foreign, a.target, action="exec", mine=mine)
        raise
    workdir = container_workdir(Path(c.root), Path.cwd()) if c.root else WORKSPACE
    tty, interactive = terminal_flags()
    environment = parse_cli_env(a.env_var)
    argv = exec_argv(c, list(command) or bare, uid=os.getuid(), gid=os.getgid(), workdir=workdir,
                     environment=environment, tty=tty and not a.dry_run,
                     interactive=interactive and not a.dry_run, env_file=None if a.dry_run else ENV_FILE_SLOT)
    if a.dry_run:
        sys.stdout.write(shell_join(argv) + "\n")
        return
    exec_docker(argv, environment)


def stop(containers: Sequence[EnvContainer], timeout: int = 10) -> list[EnvContainer]:
    """Stop (and so remove: runs are ``--rm``) these containers; the ones stopped."""
    if not containers:
        return []
    _engine().stop_containers([c.id for c in containers], timeout)
    return list(containers)
