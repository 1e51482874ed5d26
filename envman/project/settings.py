"""The user config's ``[run]`` and ``[project]`` tables and the precedence of settings.

Settings come from, in order of precedence: the command line, the project file, the user config
(``<config dir>/config.toml``), then envman's defaults (:func:`merge_settings`, a pure function).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable
import shlex

from envman.errors import UserError, clip_list
from envman.engine.values import GpuRequest, Mount
from envman.project.file import NETWORK_NONE, NETWORK_PROJECT, Port, ProjectConfig, type_error, check_shm, check_stack_name, default_shm_size, mount_text, parse_environment, parse_gpus, parse_mount

if sys.version_info >= (3, 11):
    pass
else:  # pragma: no cover
    pass

# --------------------------------------------------------------------------- user config


@dataclass(frozen=True)
class UserConfig:
    """The ``[run]`` and ``[project]`` tables of ``<config dir>/config.toml`` (other tables belong
    to other commands and are left alone)."""

    stack: str | None = None
    gpus: GpuRequest | None = None
    gpus_set: bool = False
    shm_size: str | None = None
    environment: tuple[tuple[str, str], ...] = ()
    mounts: tuple[Mount, ...] = ()
    file: str | None = None


def user_config_path() -> Path:
    """The user config file (``config.toml`` in the config directory)."""
    from envman.config import config_path

    return config_path()


def load_user_config(path: Path | None = None) -> UserConfig:
    """The ``[run]`` and ``[project]`` tables of the user config (read by ``envman.config``)."""
    from envman.config import read_config

    file = read_config(path)
    if not file.found:
        return UserConfig()
    where = str(file.path)
    cfg = UserConfig(file=where)
    run = file.table("run")
    proj = file.table("project")
    if "stack" in proj:
        if not isinstance(proj["stack"], str):
            raise type_error("project.stack", "a stack name", proj["stack"], where)
        check_stack_name(proj["stack"], where=where, key="project.stack")
        cfg = replace(cfg, stack=proj["stack"])
    if "gpus" in run:
        cfg = replace(cfg, gpus=parse_gpus(run["gpus"], where=where, key="run.gpus"), gpus_set=True)
    if "shm_size" in run:
        cfg = replace(cfg, shm_size=check_shm(run["shm_size"], where=where, key="run.shm_size"))
    if "environment" in run:
        cfg = replace(cfg, environment=parse_environment(run["environment"], where=where, key="run.environment"))
    if "mounts" in run:
        mounts = run["mounts"]
        if not isinstance(mounts, list):
            raise type_error("run.mounts", "a list of strings", mounts, where)
        cfg = replace(cfg, mounts=tuple(parse_mount(m, base=None, where=where, key="run.mounts") for m in mounts))
    return cfg


# --------------------------------------------------------------------------- precedence


@dataclass(frozen=True)
class CliOverrides:
    """What the command line said; ``None`` / empty means "not given"."""

    stack: str | None = None
    gpus: GpuRequest | None = None
    gpus_set: bool = False  # --gpus given (or --no-gpu, which sets gpus=None)
    shm_size: str | None = None
    environment: tuple[tuple[str, str], ...] = ()
    mounts: tuple[Mount, ...] = ()
    ports: tuple[Port, ...] = ()
    command: tuple[str, ...] = ()
    network: str | None = None


@dataclass(frozen=True)
class RunSettings:
    """The effective settings of one run, each with where it came from (for ``project show``)."""

    stack: str
    gpus: GpuRequest | None
    shm_size: str
    environment: tuple[tuple[str, str], ...]
    mounts: tuple[Mount, ...]
    ports: tuple[Port, ...]
    command: tuple[str, ...]
    origin: tuple[tuple[str, str], ...] = field(default=())  # (setting, "cli" | "project" | "user" | "default")
    network: str = NETWORK_PROJECT  # envman.project.file.NETWORK_MODES
    #: What the user config would have given but an untrusted project file does not get
    #: (``"environment: A, B"``, ``"mounts: ..."``; names, never values): see :func:`merge_settings`.
    withheld: tuple[str, ...] = ()

    def withheld_line(self, project_file: str | Path) -> str | None:
        """One warning line naming what the user config did not give ``project_file``, or ``None``."""
        if not self.withheld:
            return None
        return (f"your config's [run] {' and '.join(self.withheld)} not given to {project_file}: it is not trusted "
                f"(read it, then trust it to pass them: envman project trust {shlex.quote(str(project_file))})")

    def to_json(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "gpus": str(self.gpus) if self.gpus else "none",
            "shm_size": self.shm_size,
            "environment": sorted(k for k, _ in self.environment),  # names: values may be secrets
            "mounts": [mount_text(m) for m in self.mounts],
            "ports": [f"127.0.0.1:{p.host}:{p.container}" for p in self.ports],
            "command": list(self.command),
            "network": self.network,
            "origin": dict(self.origin),
            "withheld": list(self.withheld),
        }


def merge_settings(
    project: ProjectConfig,
    user: UserConfig,
    cli: CliOverrides,
    *,
    trusted: bool = False,
    stack_is_cpu: Callable[[str], bool] | None = None,
    total_ram: int | None = None,
) -> RunSettings:
    """CLI > project file > user config > defaults, setting by setting.

    Tables and lists add up in the same order (a later source wins per variable / per mount
    target). The GPU default is every GPU for a CUDA stack and none for a CPU stack
    (``stack_is_cpu``); a CPU run of a CUDA stack is always asked for (``--no-gpu``).

    The user config's ``[run] environment`` and ``[run] mounts`` (tokens, datasets) go only to a
    project file the user trusts as it is now (``trusted``, :func:`envman.project.trust.project_trusted`):
    a cloned repository's code, which runs in its container, gets neither until it is trusted;
    what is left out is named in ``withheld``. The command line's ``-e`` and ``--mount`` are
    given whatever the file (the user named them for this run).
    """
    origin: dict[str, str] = {}

    def pick(setting: str, *candidates: tuple[bool, Any, str]) -> Any:
        for present, value, src in candidates:
            if present:
                origin[setting] = src
                return value
        raise AssertionError("the last candidate is always present")  # pragma: no cover

    stack = pick(
        "stack",
        (cli.stack is not None, cli.stack, "cli"),
        (project.stack is not None, project.stack, "project"),
        (user.stack is not None, user.stack, "user"),
        (True, None, "default"),
    )
    if stack is None:
        raise UserError("no stack for this project", where=str(project.file),
                        fix='add stack = "torch-2.4-cuda12" (list them: envman matrix ls), or pass --stack')
    cpu = bool(stack_is_cpu and stack_is_cpu(stack))
    gpus = pick(
        "gpus",
        (cli.gpus_set, cli.gpus, "cli"),
        (project.gpus_set, project.gpus, "project"),
        (user.gpus_set, user.gpus, "user"),
        (True, None if cpu else GpuRequest("all"), "default"),
    )
    shm = pick(
        "shm_size",
        (cli.shm_size is not None, cli.shm_size, "cli"),
        (project.shm_size is not None, project.shm_size, "project"),
        (user.shm_size is not None, user.shm_size, "user"),
        (True, default_shm_size(total_ram), "default"),
    )
    command = pick(
        "command",
        (bool(cli.command), cli.command, "cli"),
        (bool(project.command), project.command, "project"),
        (True, (), "default"),
    )
    user_env, user_mounts, withheld = user_for_project(user, trusted)
    env: dict[str, str] = {}
    for src in (user_env, project.environment, cli.environment):
        env.update(src)
    mounts: dict[str, Mount] = {}
    for mount_src in (user_mounts, project.mounts, cli.mounts):
        mounts.update((m.target, m) for m in mount_src)
    ports: dict[int, Port] = {}
    for port_src in (project.ports, cli.ports):
        ports.update((p.host, p) for p in port_src)
    network = pick(
        "network",
        (cli.network is not None, cli.network, "cli"),
        (project.network is not None, project.network, "project"),
        (True, NETWORK_PROJECT, "default"),
    )
    if network == NETWORK_NONE and ports:
        said = "--network none" if origin["network"] == "cli" else 'network = "none"'
        raise UserError(f"{said} and published ports ({ports[min(ports)].host}) contradict each other: a container "
                        "without a network publishes nothing", where=str(project.file),
                        fix='drop the ports, or use the project\'s own network (network = "project", the default)')
    return RunSettings(
        stack=stack, gpus=gpus, shm_size=shm, environment=tuple(sorted(env.items())),
        mounts=tuple(sorted(mounts.values(), key=lambda m: m.target)),
        ports=tuple(sorted(ports.values(), key=lambda p: p.host)), command=tuple(command),
        origin=tuple(sorted(origin.items())), withheld=withheld, network=network,
    )


def user_for_project(user: UserConfig, trusted: bool
                     ) -> tuple[tuple[tuple[str, str], ...], tuple[Mount, ...], tuple[str, ...]]:
    """(the user config's environment, its mounts, what is withheld) for a project file that is
    ``trusted`` or not: an untrusted file gets neither, and the names say what it missed."""
    if trusted:
        return user.environment, user.mounts, ()
    withheld = []
    if user.environment:
        withheld.append("environment (" + clip_list([k for k, _ in user.environment]) + ")")
    if user.mounts:
        withheld.append("mounts (" + clip_list([mount_text(m) for m in user.mounts]) + ")")
    return (), (), tuple(withheld)


