"""The run plan: everything ``docker run`` is told, and the pure function that turns it into argv.

:func:`docker_argv` builds the argv the ``docker`` (or ``podman``) CLI is ``exec``-ed with: mounts,
the GPU request (``--gpus`` or CDI devices), the environment (through an env file, never argv),
labels, and the hardening every run gets.
"""

from __future__ import annotations

import csv
import io
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable

from envman.labels import run_labels
from envman.paths import CONTAINER_HOME, WORKSPACE
from envman.engine.values import GpuRequest, Mount
from envman.project.file import NETWORK_NONE, NETWORK_PROJECT, Port, project_identity
from envman.engine.handoff import with_terminal


ERROR, WARNING = "error", "warning"
#: The command of a detached environment that has none of its own: it waits until stopped.
KEEP_ALIVE = ("sleep", "infinity")
#: Smoke outcomes a run accepts (``envman.images.build`` PASS / CPU_ONLY).
RUNNABLE_SMOKE = ("pass", "cpu-only")


# --------------------------------------------------------------------------- the run plan


@dataclass(frozen=True)
class RunPlan:
    """Everything ``docker run`` is told; :func:`docker_argv` turns it into argv."""

    image: str
    project: str
    stack: str
    root: str  # host path mounted at /workspace
    home: str  # host path mounted at /home/envman
    uid: int
    gid: int
    command: tuple[str, ...] = ()
    environment: tuple[tuple[str, str], ...] = ()
    mounts: tuple[Mount, ...] = ()
    ports: tuple[Port, ...] = ()
    gpus: GpuRequest | None = None
    gpu_mechanism: str = "runtime"  # runtime (--gpus, NVIDIA runtime hook) | cdi (--device nvidia.com/gpu=...)
    cdi_devices: tuple[str, ...] = ()  # for cdi: the device names (indexes or UUIDs, or "all")
    shm_size: str = "8g"
    tty: bool = False
    interactive: bool = False
    container_name: str | None = None  # --name (a Slurm job names its container to stop it on cancel)
    workdir: str = WORKSPACE  # /workspace, or the subdirectory matching the caller's
    env_name: str | None = None  # a named environment (envman run --name/--detach): label envman.env
    detach: bool = False
    inherit_env: tuple[str, ...] = ()  # variables passed by name (--env NAME): the value never on an argv
    engine: str = "docker"  # docker | podman (see envman.engine.select)
    engine_url: str | None = None  # podman: the service the podman CLI talks to (--remote --url)
    rootless: bool = False  # podman rootless: --userns keep-id, so files in the project stay the user's
    network: str = NETWORK_PROJECT  # project: the network of this user's runs of this project (network_name); none

    @property
    def network_name(self) -> str:
        """What ``--network`` names: :func:`network_name` of this run, or ``none``."""
        return NETWORK_NONE if self.network == NETWORK_NONE else network_name(self.uid, self.project, self.root)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["gpus"] = str(self.gpus) if self.gpus else None
        d["environment"] = [k for k, _ in self.environment]  # names: values may be secrets
        return d


def container_name(uid: int, env_name: str) -> str:
    """The container name of a detached environment not named by ``--name`` (per user: two users'
    ``envman run --detach alpha`` do not collide)."""
    return f"envman-{uid}-{env_name}"


def network_name(uid: int, project: str, root: str) -> str:
    """``envman-<uid>-<project>-<hash of the real root>``: the network every run of this project by
    this user joins, and nothing else does (another project's, another user's or an untrusted
    clone's containers are on networks of their own, which the engine keeps apart)."""
    return f"envman-{uid}-{project_identity(project, root)}"


def container_workdir(root: Path, cwd: Path) -> str:
    """Where a run starts: the directory under /workspace matching ``cwd`` when ``cwd`` is inside
    the project root ``root``, else /workspace itself (both compared after resolving links)."""
    try:
        rel = cwd.resolve().relative_to(root.resolve())
    except (ValueError, OSError):
        return WORKSPACE
    return WORKSPACE if rel == Path(".") else f"{WORKSPACE}/{rel.as_posix()}"


def mount_flag(source: str, target: str, read_only: bool = False) -> str:
    """``--mount`` value; CSV-quoted so a comma, quote or line break in a path cannot add or drop
    options (the engine reads the first CSV record only: an unquoted line break ended it early,
    dropping ``readonly``). The writer quotes a field holding any character of its line terminator,
    so the default ``\r\n`` is kept and cut off the end."""
    fields = ["type=bind", f"source={source}", f"target={target}"]
    if read_only:
        fields.append("readonly")
    buf = io.StringIO()
    csv.writer(buf).writerow(fields)
    return buf.getvalue().removesuffix("\r\n")


#: The NVIDIA container runtime reads these from a container's environment to pick devices and
#: driver capabilities: only envman's own GPU request may set them.
NVIDIA_PREFIX = "NVIDIA_"
GPU_SELECTION_VARS = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
                      "GPU_DEVICE_ORDINAL")


def sanitize_environment(env: Iterable[tuple[str, str]], gpus: GpuRequest | None
                         ) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """(the user environment a run may pass, the names dropped). ``NVIDIA_VISIBLE_DEVICES`` is
    always envman's (the GPU request decides the devices); without a GPU request every
    ``NVIDIA_*`` and GPU-selection variable is dropped, so a CPU run stays a CPU run."""
    kept, dropped = [], []
    for k, v in env:
        if k == "NVIDIA_VISIBLE_DEVICES" or (gpus is None and (k.startswith(NVIDIA_PREFIX) or k in GPU_SELECTION_VARS)):
            dropped.append(k)
        else:
            kept.append((k, v))
    return tuple(kept), tuple(dropped)


def docker_argv(plan: RunPlan, docker: str = "docker", env_file: str | None = None) -> list[str]:
    """The ``docker run`` command line for ``plan`` (pure; unit-tested flag by flag).

    Never ``--privileged``, never the Docker socket, ``--cap-drop ALL`` (the entrypoint runs as
    the caller's uid and needs no capability), always ``no-new-privileges``; ports only on
    127.0.0.1; never the engine's default bridge: the project's own network (created by
    :func:`envman.run.network.ensure_network`) or none; ``-t`` only when envman's own stdin and
    stdout are terminals (``plan.tty``).
    On Podman the ``podman`` CLI runs it through the selected service, and GPUs are always CDI
    devices (Podman's Docker API ignores ``--gpus`` requests without a word).

    The user's environment values never appear here: with ``env_file`` (the slot
    :func:`envman.engine.handoff.exec_docker` fills with a private in-memory file) they are read from
    that file, else (``--dry-run``) only their names are shown. A run without GPUs sets
    ``NVIDIA_VISIBLE_DEVICES=void``, so an engine whose default runtime is NVIDIA's attaches none.
    """
    if plan.engine == "podman":
        argv = ["podman", *(["--remote", "--url", plan.engine_url] if plan.engine_url else []), "run", "--rm"]
        if plan.rootless:
            argv += ["--userns", "keep-id"]
    else:
        argv = [docker, "run", "--rm"]
    if plan.container_name:
        argv += ["--name", plan.container_name]
    argv += [
        "--pull", "never",  # an envman image that is missing must not be fetched from a registry
        "--init",  # PID 1 forwards signals (Ctrl-C) and reaps zombies whatever the command
        "--cap-drop", "ALL",
        "--security-opt", "no-new-privileges",
        "--user", f"{plan.uid}:{plan.gid}",
        *(a for k, v in run_labels(plan.project, plan.stack, plan.uid, plan.env_name).items() for a in ("--label", f"{k}={v}")),
        "--mount", mount_flag(plan.root, WORKSPACE),
        "--mount", mount_flag(plan.home, CONTAINER_HOME),
        "--workdir", plan.workdir,
        "--env", f"HOME={CONTAINER_HOME}",
        "--env", f"ENVMAN_PROJECT={plan.project}",
        "--env", f"ENVMAN_STACK={plan.stack}",
        "--shm-size", plan.shm_size,
        "--network", plan.network_name,
    ]
    for m in plan.mounts:
        argv += ["--mount", mount_flag(m.source, m.target, m.read_only)]
    if plan.gpus is None:
        argv += ["--env", "NVIDIA_VISIBLE_DEVICES=void"]
    if plan.environment:
        if env_file is not None:
            argv += ["--env-file", env_file]
        else:
            for k, _ in plan.environment:
                argv += ["--env", k]
    for k in plan.inherit_env:  # the docker CLI copies the value from its own environment
        argv += ["--env", k]
    for p in plan.ports:
        argv += ["--publish", f"127.0.0.1:{p.host}:{p.container}"]
    if plan.gpus is not None:
        if plan.gpu_mechanism == "cdi" or plan.engine == "podman":
            for d in plan.cdi_devices:
                argv += ["--device", f"nvidia.com/gpu={d}"]
        else:
            argv += ["--gpus", _gpus_flag(plan.gpus)]
    if plan.detach:
        argv.append("--detach")
    argv.append(plan.image)
    argv += list(plan.command)
    if plan.detach:
        return argv
    return with_terminal(argv, plan.tty, plan.interactive)


def _gpus_flag(g: GpuRequest) -> str:
    if g.kind == "all":
        return "all"
    if g.kind == "count":
        return str(g.count)
    # The CLI parses --gpus as CSV: a device list needs the quotes ('"device=0,2"').
    return '"device=' + ",".join(g.devices) + '"'


