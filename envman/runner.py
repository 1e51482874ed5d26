"""``envman run``: preflight, then hand the terminal to ``docker run``.

The run itself is the ``docker`` CLI, ``exec``-ed with an argv built by the pure function
:func:`docker_argv`: the CLI already does what an interactive run needs exactly like
``docker run`` (TTY and raw mode, Ctrl-C forwarding, exit codes, removal of the container),
and envman adds no process in between, so a run costs what ``docker run`` costs plus envman's
own start-up.

The hot path imports no Docker SDK: the few facts a preflight needs (the image's id, whether the
engine has an NVIDIA runtime) are read by :class:`DockerFacts` from the engine that same
``docker`` CLI will run on: one request on its Unix socket when that is the local engine, else the
CLI itself (``docker context``, ``DOCKER_HOST``). Only a project image build goes through
:mod:`envman.engine`.

Preflight (:func:`preflight`, pure): the engine answers; when GPUs are requested the engine has
the NVIDIA runtime or a CDI spec and the host has a driver and GPUs; the stack's verdict on every
GPU the run will see (``jit_only`` warns, ``driver_too_old`` / ``arch_unsupported`` fail with a
stack that would work); the promoted image exists and its smoke test passed. A run that asked for
GPUs and cannot get them fails; a CPU run is asked for with ``--no-gpu``.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from .errors import EngineError, EnvmanError, UserError
from .labels import run_labels
from .project import (
    CONTAINER_HOME,
    WORKSPACE,
    GpuRequest,
    Mount,
    Port,
    ProjectConfig,
    RunSettings,
)
from .runcache import (
    ENV_FILE_SLOT, NoAnswer, api_get, cache_key, exec_docker, image_path, local_socket, record_run, terminal_flags,
    with_terminal,
)
from .stack import Stack

if TYPE_CHECKING:
    import subprocess

    from .host import HostFacts, HostGpu

ERROR, WARNING = "error", "warning"
#: The command of a detached environment that has none of its own: it waits until stopped.
KEEP_ALIVE = ("sleep", "infinity")
#: Smoke outcomes a run accepts (``envman.build`` PASS / CPU_ONLY).
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
    engine: str = "docker"  # docker | podman (see envman.engine_select)
    engine_url: str | None = None  # podman: the service the podman CLI talks to (--remote --url)
    rootless: bool = False  # podman rootless: --userns keep-id, so files in the project stay the user's

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["gpus"] = str(self.gpus) if self.gpus else None
        return d


def container_name(uid: int, env_name: str) -> str:
    """The container name of a detached environment not named by ``--name`` (per user: two users'
    ``envman run --detach alpha`` do not collide)."""
    return f"envman-{uid}-{env_name}"


def container_workdir(root: Path, cwd: Path) -> str:
    """Where a run starts: the directory under /workspace matching ``cwd`` when ``cwd`` is inside
    the project root ``root``, else /workspace itself (both compared after resolving links)."""
    try:
        rel = cwd.resolve().relative_to(root.resolve())
    except (ValueError, OSError):
        return WORKSPACE
    return WORKSPACE if rel == Path(".") else f"{WORKSPACE}/{rel.as_posix()}"


def _mount_flag(source: str, target: str, read_only: bool = False) -> str:
    """``--mount`` value; CSV-quoted so a comma or quote in a path cannot add options."""
    fields = ["type=bind", f"source={source}", f"target={target}"]
    if read_only:
        fields.append("readonly")
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow(fields)
    return buf.getvalue()


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
    127.0.0.1; ``-t`` only when envman's own stdin and stdout are terminals (``plan.tty``).
    On Podman the ``podman`` CLI runs it through the selected service, and GPUs are always CDI
    devices (Podman's Docker API ignores ``--gpus`` requests without a word).

    The user's environment values never appear here: with ``env_file`` (the slot
    :func:`envman.runcache.exec_docker` fills with a private in-memory file) they are read from
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
        "--mount", _mount_flag(plan.root, WORKSPACE),
        "--mount", _mount_flag(plan.home, CONTAINER_HOME),
        "--workdir", plan.workdir,
        "--env", f"HOME={CONTAINER_HOME}",
        "--env", f"ENVMAN_PROJECT={plan.project}",
        "--env", f"ENVMAN_STACK={plan.stack}",
        "--shm-size", plan.shm_size,
    ]
    for m in plan.mounts:
        argv += ["--mount", _mount_flag(m.source, m.target, m.read_only)]
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


def cdi_devices(g: GpuRequest) -> tuple[str, ...]:
    """CDI device names for a request (CDI has no "N GPUs": a count takes indexes 0..N-1)."""
    if g.kind == "all":
        return ("all",)
    if g.kind == "count":
        return tuple(str(i) for i in range(g.count or 0))
    return g.devices


# --------------------------------------------------------------------------- engine facts via the CLI


class DockerFacts:
    """The two engine facts a run needs, from the engine the ``docker`` CLI will run on.

    Same shapes as :meth:`envman.engine.Engine.info` / ``inspect_image`` so preflight code takes
    either. With ``socket`` (see :func:`local_socket`) a fact is one HTTP request on the engine's
    Unix socket (~1 ms); without it, or whenever the socket gives no clean answer, it is the
    ``docker`` CLI (~15 ms), which follows ``docker context`` and ``DOCKER_HOST`` and words the
    errors. The Docker SDK (~100 ms to import) stays off this path.
    """

    def __init__(self, docker: str = "docker",
                 runner: Callable[[list[str]], subprocess.CompletedProcess] | None = None,
                 socket: str | None = None, source: str = "") -> None:
        self.docker = docker
        self._run = runner or self._subprocess
        self.socket = socket
        self.source = source  # how the engine was selected (envman.engine_select)
        self._kind: Any = None

    def kind(self) -> Any:
        """The engine's :class:`envman.engine_select.EngineKind` (Docker unless it says Podman)."""
        from .engine_select import PODMAN, EngineKind, kind_from

        if self._kind is None:
            version = info = libpod = None
            try:
                status, version = api_get(self.socket, "/version")
                if status == 200 and isinstance(version, dict) and any(
                        c.get("Name") == "Podman Engine" for c in version.get("Components") or () if isinstance(c, dict)):
                    status, libpod = api_get(self.socket, "/v4.0.0/libpod/info")
                else:
                    status, info = api_get(self.socket, "/info")
            except NoAnswer:
                pass
            self._kind = kind_from(version if isinstance(version, dict) else None,
                                   info if isinstance(info, dict) else None, libpod if isinstance(libpod, dict) else None)
            if self._kind.kind != PODMAN and not version:
                self._kind = EngineKind("docker", "", False)
        return self._kind

    def _subprocess(self, args: list[str]) -> subprocess.CompletedProcess:
        exe = shutil.which(self.docker)
        if exe is None:
            raise EngineError("the docker CLI is not installed", fix="install docker-ce-cli (or docker.io)")
        import subprocess

        return subprocess.run([exe, *args], capture_output=True, text=True, timeout=60)

    def _unreachable(self, p: subprocess.CompletedProcess) -> EngineError:
        from .engine import UNREACHABLE_FIX

        line = next((ln.strip() for ln in (p.stderr or p.stdout or "").splitlines() if ln.strip()), f"exit {p.returncode}")
        return EngineError(f"Docker engine not reachable: {line}", fix=UNREACHABLE_FIX)

    def inspect_image(self, ref: str) -> dict[str, Any] | None:
        try:
            status, body = api_get(self.socket, image_path(ref))
            if status == 200 and isinstance(body, dict):
                return body
            if status == 404:
                return None
        except NoAnswer:
            pass
        p = self._run(["image", "inspect", "--format", "{{json .}}", ref])
        if p.returncode != 0:
            if "no such image" in p.stderr.lower() or "no such object" in p.stderr.lower():
                return None
            raise self._unreachable(p)
        return json.loads(p.stdout)

    def info(self) -> dict[str, Any]:
        raw: dict[str, Any] = {}
        try:
            status, body = api_get(self.socket, "/info")
            if status == 200 and isinstance(body, dict) and body.get("ServerVersion"):
                raw = body
        except NoAnswer:
            pass
        if not raw:
            p = self._run(["info", "--format", "{{json .}}"])
            try:
                raw = json.loads(p.stdout) if p.stdout.strip() else {}
            except json.JSONDecodeError:
                pass
            if p.returncode != 0 or raw.get("ServerErrors") or not raw.get("ServerVersion"):
                if raw.get("ServerErrors"):
                    import subprocess

                    p = subprocess.CompletedProcess(p.args, p.returncode, "", "; ".join(raw["ServerErrors"]))
                raise self._unreachable(p)
        runtimes = sorted((raw.get("Runtimes") or {}).keys())
        out = {
            "server_version": raw.get("ServerVersion", ""),
            "runtimes": runtimes,
            "default_runtime": raw.get("DefaultRuntime", ""),
            "nvidia_runtime": "nvidia" in runtimes,
            "os": raw.get("OperatingSystem", ""),
        }
        if raw.get("CDISpecDirs") is not None:
            out["cdi_spec_dirs"] = list(raw["CDISpecDirs"])
        return with_engine_kind(out, self.kind(), url=f"unix://{self.socket}" if self.socket else None,
                                source=self.source, local=self.socket is not None)


def with_engine_kind(info: dict[str, Any], kind: Any, *, url: str | None, source: str, local: bool) -> dict[str, Any]:
    """``info`` plus which engine it is. On Podman, GPUs are CDI devices only (its Docker API
    ignores GPU requests), read from the spec directories Podman itself reads when it is local."""
    from .engine_select import PODMAN, PODMAN_CDI_DIRS, cdi_gpu_devices

    out = {**info, "engine": kind.kind, "engine_version": kind.version or info.get("server_version", ""),
           "rootless": kind.rootless, "engine_url": url, "engine_source": source}
    if kind.kind == PODMAN:
        out["nvidia_runtime"] = False
        out["cdi_spec_dirs"] = list(PODMAN_CDI_DIRS) if local else []
        out["cdi_gpu_devices"] = sorted(cdi_gpu_devices(PODMAN_CDI_DIRS)) if local else []
    return out


def docker_facts() -> DockerFacts:
    """The engine facts of the engine a run will use: ``DOCKER_HOST`` or a Docker context as the
    ``docker`` CLI reads them, else the ``[engine] host`` of config.toml, the Docker socket, or
    this user's rootless Podman socket (see :mod:`envman.engine_select`)."""
    from .engine_select import config_engine_host, select_engine, socket_path

    sock = local_socket()
    if os.environ.get("DOCKER_HOST"):
        return DockerFacts(socket=sock, source="DOCKER_HOST")
    if sock is None:  # a Docker context other than the default: only the CLI knows where it is
        return DockerFacts(socket=None, source="docker context")
    addr = select_engine(config_host=config_engine_host())
    return DockerFacts(socket=socket_path(addr.url), source=addr.source)


def cdi_has_nvidia(dirs: Iterable[str]) -> bool:
    """Whether a CDI spec for NVIDIA GPUs is in one of the engine's spec dirs (local engine)."""
    for d in dirs:
        p = Path(d)
        try:
            if p.is_dir() and any("nvidia" in f.name for f in p.iterdir()):
                return True
        except OSError:
            continue
    return False


def gpu_mechanism(info: Mapping[str, Any]) -> str | None:
    """How this engine gives containers GPUs: ``runtime``, ``cdi`` or ``None``."""
    if info.get("nvidia_runtime"):
        return "runtime"
    if cdi_has_nvidia(info.get("cdi_spec_dirs") or ()):
        return "cdi"
    return None


# --------------------------------------------------------------------------- preflight


@dataclass(frozen=True)
class Problem:
    level: str  # error | warning
    check: str  # engine | gpu-runtime | host-gpu | verdict | image | smoke | project
    message: str  # one line: what is wrong, then what to do

    def to_json(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class ImageState:
    """The stack's promoted image as the engine and envman's reports see it."""

    ref: str
    image_id: str | None  # None: not on the engine
    smoke: str | None = None  # pass | cpu-only | fail | None (no report)
    smoke_reason: str = ""


@dataclass(frozen=True)
class GpuVerdict:
    gpu: HostGpu
    verdict: str  # ok | jit_only | driver_too_old | arch_unsupported | unknown
    reasons: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"gpu": self.gpu.index, "name": self.gpu.name, "compute_cap": self.gpu.compute_cap,
                "verdict": self.verdict, "reasons": list(self.reasons)}


def selected_gpus(host: HostFacts, gpus: GpuRequest) -> tuple[list[HostGpu], str | None]:
    """The host GPUs a request gives the container, or the reason it cannot be met."""
    if gpus.kind == "all":
        return list(host.gpus), None
    if gpus.kind == "count":
        n = gpus.count or 0
        if n > len(host.gpus):
            return [], f"{n} GPUs requested but this host has {len(host.gpus)}"
        return list(host.gpus[:n]), None
    chosen = []
    for d in gpus.devices:
        hit = next((g for g in host.gpus if str(g.index) == d or (g.uuid and g.uuid == d)), None)
        if hit is None:
            have = ", ".join(str(g.index) for g in host.gpus)
            return [], f"GPU device {d} does not exist on this host (devices: {have})"
        chosen.append(hit)
    return chosen, None


def gpu_verdicts(stack: Stack, host: HostFacts, gpus: Sequence[HostGpu]) -> list[GpuVerdict]:
    from .matrix.model import DriverVersion
    from .verdict import DRIVER_TOO_OLD, verdict

    out = []
    for g in gpus:
        if g.compute_cap is None:
            # Without the architecture only the driver floor can be checked.
            if stack.cuda and host.driver and DriverVersion.parse(host.driver) < DriverVersion.parse(stack.min_driver):
                out.append(GpuVerdict(g, DRIVER_TOO_OLD, (f"driver {host.driver} is older than {stack.min_driver}",)))
            else:
                out.append(GpuVerdict(g, "unknown", (f"compute capability of {g.name} unknown: architecture not checked",)))
            continue
        v = verdict(stack, host.driver, g.compute_cap)
        out.append(GpuVerdict(g, v.verdict, v.reasons))
    return out


def preflight(
    stack: Stack,
    gpus: GpuRequest | None,
    *,
    host: HostFacts | None,
    engine_info: Mapping[str, Any] | None,
    image: ImageState,
    suggest: Callable[[Stack, HostFacts, Sequence[HostGpu]], str | None] = lambda s, h, g: None,
    what_if: bool = False,
) -> list[Problem]:
    """Everything that would make ``envman run`` fail or surprise, each one line with its fix.

    Pure: the caller gathers ``host`` (only needed when ``gpus``), ``engine_info`` (``None``
    when no GPU was requested) and ``image``. ``suggest`` names a stack that would work.
    """
    problems: list[Problem] = []
    cpu_fix = CPU_FIX
    if gpus is not None:
        problems += gpu_problems(stack, gpus, host, suggest)
    if gpus is not None and not what_if and engine_info is not None and gpu_mechanism(engine_info) is None:
        from .engine import NVIDIA_TOOLKIT_FIX

        runtimes = ", ".join(engine_info.get("runtimes") or ()) or "none"
        if engine_info.get("engine") == "podman":
            problems.append(Problem(ERROR, "gpu-runtime",
                                    f"GPUs requested (--gpus {gpus}) but Podman has no CDI spec for nvidia.com/gpu in "
                                    f"{', '.join(engine_info.get('cdi_spec_dirs') or ()) or 'its CDI directories'} "
                                    "(Podman's Docker API would start the container without a GPU): run "
                                    f"`nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml` as root; {cpu_fix}"))
        else:
            problems.append(Problem(ERROR, "gpu-runtime",
                                    f"GPUs requested (--gpus {gpus}) but the Docker engine has no NVIDIA runtime or CDI "
                                    f"spec (runtimes: {runtimes}): {NVIDIA_TOOLKIT_FIX}; {cpu_fix}"))
    elif gpus is not None and not what_if and engine_info is not None and engine_info.get("cdi_gpu_devices") is not None \
            and gpu_mechanism(engine_info) == "cdi":
        known = set(engine_info["cdi_gpu_devices"])
        missing = [d for d in cdi_devices(gpus) if d not in known]
        if missing:
            problems.append(Problem(ERROR, "gpu-runtime",
                                    f"the CDI spec has no device nvidia.com/gpu={missing[0]} (it has: "
                                    f"{', '.join(sorted(known)) or 'none'}): ask for one of those, or regenerate it with "
                                    f"`nvidia-ctk cdi generate`; {cpu_fix}"))
    if image.image_id is None:
        problems.append(Problem(ERROR, "image", f"no promoted image {image.ref} for stack {stack.name}: "
                                f"build it with envman build {stack.name}"))
    elif image.smoke is None:
        problems.append(Problem(ERROR, "smoke", f"no smoke report for {image.ref} ({image.image_id[:19]}): "
                                f"run envman smoke {stack.name}"))
    elif image.smoke not in RUNNABLE_SMOKE:
        reason = f" ({image.smoke_reason})" if image.smoke_reason else ""
        problems.append(Problem(ERROR, "smoke", f"the smoke test of {image.ref} says {image.smoke}{reason}: "
                                f"rebuild it with envman build {stack.name}, then envman smoke {stack.name}"))
    elif image.smoke == "cpu-only" and gpus is not None and stack.cuda:
        problems.append(Problem(WARNING, "smoke", f"{image.ref} was smoke-tested without a GPU: its GPU kernels are "
                                f"untested; run envman smoke {stack.name} --require-gpu on this host"))
    return problems


CPU_FIX = "or run with --no-gpu for an explicit CPU run"


def gpu_problems(stack: Stack, gpus: GpuRequest, host: HostFacts | None,
                 suggest: Callable[[Stack, HostFacts, Sequence[HostGpu]], str | None]) -> list[Problem]:
    """The host's side of a GPU run: a driver and GPUs, the requested devices, the stack's
    verdict on each (``envman run``'s preflight, and ``envman node-check`` on a Slurm node)."""
    if host is None or not host.has_gpu:
        why = host.summary() if host is not None else "no NVIDIA GPU on this host"
        return [Problem(ERROR, "host-gpu", f"GPUs requested (--gpus {gpus}) but {why}: "
                        f"install the NVIDIA driver, {CPU_FIX}")]
    problems = []
    chosen, why = selected_gpus(host, gpus)
    if why:
        problems.append(Problem(ERROR, "host-gpu", f"{why}: ask for fewer (--gpus all / --gpus device=0), {CPU_FIX}"))
    problems += verdict_problems(stack, host, gpu_verdicts(stack, host, chosen), suggest)
    problems += [Problem(WARNING, "host-gpu", w) for w in host.warnings]
    return problems


def verdict_problems(stack: Stack, host: HostFacts, verdicts: Sequence[GpuVerdict],
                     suggest: Callable[[Stack, HostFacts, Sequence[HostGpu]], str | None]) -> list[Problem]:
    from .matrix.model import DriverVersion
    from .verdict import ARCH_UNSUPPORTED, DRIVER_TOO_OLD, JIT_ONLY

    out: list[Problem] = []
    bad = [v for v in verdicts if v.verdict in (DRIVER_TOO_OLD, ARCH_UNSUPPORTED)]
    good = [v for v in verdicts if v.verdict not in (DRIVER_TOO_OLD, ARCH_UNSUPPORTED)]
    alt = suggest(stack, host, [v.gpu for v in verdicts]) if bad else None
    use_alt = f" or use {alt}" if alt else ""
    devices = f"; or use only --gpus device={','.join(str(v.gpu.index) for v in good)}" if bad and good else ""
    below_floor = bool(stack.cuda and host.driver
                       and DriverVersion.parse(host.driver) < DriverVersion.parse(stack.min_driver))
    if below_floor:
        out.append(Problem(ERROR, "verdict", f"driver {host.driver} is older than {stack.min_driver} that CUDA "
                           f"{stack.cuda} needs: upgrade the driver{use_alt}"))
        return out
    for v in bad:
        if v.verdict == DRIVER_TOO_OLD:  # no SASS for this GPU, and PTX JIT needs the toolkit's driver
            out.append(Problem(ERROR, "verdict", f"{v.gpu.label}: {stack.name} has no native code for it and its PTX "
                               f"needs driver {stack.toolkit_driver} or newer (this host: {host.driver}): "
                               f"upgrade the driver{use_alt}{devices}"))
        else:
            sass = ", ".join(f"sm_{a.replace('.', '')}" for a in stack.sass_archs) or "none"
            ptx = ", ".join(f"compute_{a.replace('.', '')}" for a in stack.ptx_archs) or "none"
            out.append(Problem(ERROR, "verdict", f"{v.gpu.label}: {stack.name} has no kernel image for it (SASS {sass}; "
                               f"PTX {ptx}): use{(' ' + alt) if alt else ' a stack built for this GPU'}{devices}"))
    for v in good:
        if v.verdict == JIT_ONLY:
            out.append(Problem(WARNING, "verdict", f"{v.gpu.label}: no native code in {stack.name}; it runs by "
                               "JIT-compiling PTX (slow first start, possibly slower kernels)"))
        elif v.verdict == "unknown":
            out.append(Problem(WARNING, "verdict", f"{v.gpu.label}: " + v.reasons[0]))
    return out


def suggest_stack(matrix, stack: Stack, host: HostFacts, gpus: Sequence[HostGpu]) -> str | None:
    """A stack of the same framework that the verdict accepts on these GPUs: preferably the same
    framework version (another CUDA), then the newest older release, then the oldest newer one."""
    from packaging.version import Version

    from .errors import ResolveError
    from .resolve import resolve_row
    from .verdict import OK, verdict

    current = Version(stack.framework_version)
    best = None
    for b in matrix.builds:
        if b.framework != stack.framework or b.cuda is None or b.name == stack.row:
            continue
        try:
            cand = resolve_row(matrix, b)
        except ResolveError:
            continue
        vs = [verdict(cand, host.driver, g.compute_cap) for g in gpus if g.compute_cap]
        if not vs or not all(v.runs for v in vs):
            continue
        older = b.version <= current
        # Older releases: the newest first; newer ones: the oldest first (closest to what the code uses).
        rank = tuple(b.version.release) if older else tuple(-p for p in b.version.release)
        key = (all(v.verdict == OK for v in vs), b.version == current, older, rank, b.cuda.release)
        if best is None or key > best[0]:
            best = (key, b.name)
    return best[1] if best else None


# --------------------------------------------------------------------------- stacks, cached


def resolve_stack(name: str, matrix_files: Sequence[str | os.PathLike[str]], load: Callable[[], Any]) -> Stack:
    """``resolve(matrix, name)`` through a cache keyed by the matrix files' sizes and mtimes, so a
    run does not parse the whole matrix (~100 ms) to learn what it learnt last time."""
    key = _matrix_fingerprint(matrix_files)
    cache = _cache_file()
    data: dict[str, Any] = {}
    if key is not None:
        try:
            data = json.loads(cache.read_text())
        except (OSError, ValueError):
            data = {}
        if data.get("key") == key and name in data.get("stacks", {}):
            try:
                return Stack.from_json(data["stacks"][name])
            except (TypeError, ValueError):
                pass
    from .resolve import resolve

    stack = resolve(load(), name)
    if key is not None:
        if data.get("key") != key:
            data = {"key": key, "stacks": {}}
        data["stacks"][name] = stack.to_json()
        try:
            from .state import atomic_write

            atomic_write(cache, json.dumps(data, sort_keys=True))
        except OSError:
            pass  # a cache that cannot be written only costs time
    return stack


def _cache_file() -> Path:
    from .paths import state_dir

    return state_dir() / "cache" / "stacks.json"


def _matrix_fingerprint(extra: Sequence[str | os.PathLike[str]]) -> str | None:
    from . import __version__
    from .paths import matrix_files

    parts = [__version__]
    for f in matrix_files(extra):
        try:
            st = os.stat(f)
        except OSError:
            return None  # let the real load report the missing file
        parts.append(f"{os.path.abspath(f)}:{st.st_size}:{st.st_mtime_ns}")
    return "|".join(parts)


# --------------------------------------------------------------------------- putting a run together


@dataclass
class Prepared:
    plan: RunPlan
    stack: Stack
    problems: list[Problem] = field(default_factory=list)
    built: str | None = None  # the project image built for this run, if any
    base_image_id: str | None = None  # the stack's promoted image the run stands on


def image_state(engine, ref: str) -> ImageState:
    return image_state_of(ref, engine.inspect_image(ref))


def image_state_of(ref: str, info: Mapping[str, Any] | None) -> ImageState:
    """An inspected image and its smoke verdict (its labels first, else this user's cache)."""
    from .smokestore import image_verdict

    if info is None:
        return ImageState(ref, None)
    v = image_verdict(info)
    return ImageState(ref, info["Id"], v.status if v else None, v.reason if v else "")


def choose_base(engine, project: ProjectConfig, stack: Stack, *, update: bool = False) -> tuple[ImageState, Any]:
    """The stack image this run stands on: the project's pin or the current stable image (see
    :mod:`envman.pins`); with the :class:`envman.pins.Choice` that says why."""
    from .pins import choose, load_pin, project_key
    from .smokestore import current_user, image_verdict, rootfs_digest
    from .state import stable_ref

    ref = stable_ref(stack.name)
    stable = engine.inspect_image(ref)
    pin = load_pin(project_key(project.name, str(project.root.resolve())))
    pinned = None
    if pin is not None and pin.stack == stack.name and not update:
        pinned = stable if stable is not None and stable.get("Id") == pin.image_id else engine.inspect_image(pin.image_id)
    choice = choose(stack.name, stable, pinned, pin, uid=current_user()[0], verdict=image_verdict,
                    rootfs=rootfs_digest, update=update)
    shown = ref if not choice.pinned or choice.info is None else f"{ref} (pinned: {str(choice.info['Id'])[:19]})"
    return image_state_of(shown, choice.info), choice


def prepare_run(
    project: ProjectConfig,
    settings: RunSettings,
    stack: Stack,
    *,
    engine,
    detect_host: Callable[[], HostFacts],
    suggest: Callable[[Stack, HostFacts, Sequence[HostGpu]], str | None],
    build_image: Callable[[ProjectConfig, Stack, str], str],
    fetch_image: Callable[[Stack], None] | None = None,
    rebuild: bool = False,
    update: bool = False,
    remember_pin: bool = True,
    uid: int | None = None,
    gid: int | None = None,
    tty: bool = False,
    interactive: bool = False,
    cwd: Path | None = None,
    env_name: str | None = None,
    detach: bool = False,
) -> Prepared:
    """Preflight (raising on the first error) and the plan. ``engine`` is a :class:`DockerFacts`
    or an :class:`envman.engine.Engine`; ``build_image`` builds the project image when needed;
    ``fetch_image`` (when given) pulls a missing promoted stack image from a registry first.
    The run stands on the image id the project is pinned to (see :mod:`envman.pins`)."""
    from .project import prepare_home

    gpus = settings.gpus
    host = detect_host() if gpus is not None else None
    info = engine.info() if gpus is not None else None
    img, choice = choose_base(engine, project, stack, update=update)
    if img.image_id is None and fetch_image is not None:
        fetch_image(stack)
        img, choice = choose_base(engine, project, stack, update=update)
    problems = preflight(stack, gpus, host=host, engine_info=info, image=img, suggest=suggest)
    if choice.note:
        problems.append(Problem(WARNING, "image", choice.note))
    errors = [p for p in problems if p.level == ERROR]
    if errors:
        more = f" (and {len(errors) - 1} more: envman doctor)" if len(errors) > 1 else ""
        raise PreflightError(errors[0].message + more, problems)
    assert img.image_id is not None  # preflight refused a missing image
    if choice.repin and remember_pin:
        from .pins import project_key, save_pin

        save_pin(project_key(project.name, str(project.root.resolve())), stack.name, img.image_id)
    image, built = img.image_id, None
    if project.needs_image:
        from .project import project_image_ref

        ref = project_image_ref(project, stack.name, img.image_id)
        found = None if rebuild else engine.inspect_image(ref)
        if found is None:
            built = build_image(project, stack, img.image_id)
            found = engine.inspect_image(built)
        image = str(found["Id"]) if found else (built or ref)  # pinned by id: a tag moved meanwhile changes nothing
    mech = gpu_mechanism(info) if info is not None else None
    engine_kind, engine_url = _engine_kind(engine)
    home = prepare_home(project)
    environment, dropped = sanitize_environment(settings.environment, gpus)
    if dropped:
        problems.append(Problem(WARNING, "project", f"not passed to the container: {', '.join(dropped)} "
                                "(GPU selection is envman's: use --gpus / --no-gpu)"))
    plan = RunPlan(
        image=image,
        project=project.name,
        stack=stack.name,
        root=str(project.root.resolve()),
        home=str(home.resolve()),
        uid=os.getuid() if uid is None else uid,
        gid=os.getgid() if gid is None else gid,
        command=settings.command,
        environment=environment,
        mounts=settings.mounts,
        ports=settings.ports,
        gpus=gpus,
        gpu_mechanism=mech or "runtime",
        cdi_devices=cdi_devices(gpus) if gpus is not None and mech == "cdi" else (),
        engine=str((info or {}).get("engine") or engine_kind.kind),
        engine_url=engine_url,
        rootless=bool(engine_kind.rootless),
        shm_size=settings.shm_size,
        tty=tty and not detach,
        interactive=interactive and not detach,
        workdir=container_workdir(project.root, cwd if cwd is not None else Path.cwd()),
        env_name=env_name,
        detach=detach,
    )
    if detach and not plan.command:  # a named environment waits for `envman exec` until `envman stop`
        plan = replace(plan, command=KEEP_ALIVE)
    return Prepared(plan, stack, problems, built, img.image_id)


def _engine_kind(engine) -> tuple[Any, str | None]:
    """(EngineKind, the URL the podman CLI must use) of the engine a run goes to."""
    from .engine_select import EngineKind

    kind = engine.kind() if hasattr(engine, "kind") else EngineKind("docker", "", False)
    sock = getattr(engine, "socket", None)
    return kind, (f"unix://{sock}" if kind.kind == "podman" and sock else None)


class PreflightError(EnvmanError):
    """A run that would fail: the first problem as the message, all of them attached."""

    def __init__(self, message: str, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__(message)


def check_project_root(project: ProjectConfig) -> None:
    """The project root is mounted at /workspace: it may not be a protected path (a project file
    in a home directory itself, or in /, would hand the container the home or the host)."""
    from .policy import forbidden_reason

    why = forbidden_reason(str(project.root))
    if why:
        raise UserError(f"the project root cannot be mounted at {WORKSPACE}: {why}", where=str(project.file),
                        fix="keep envman.toml in a directory of its own (e.g. ~/code/PROJECT), not in a home or system directory")


def parse_cli_mounts(values: Iterable[str], *, allow_dangerous: bool = False) -> tuple[Mount, ...]:
    from .project import parse_mount

    return tuple(parse_mount(v, base=None, where="--mount", key="--mount", from_file=False,
                             allow_dangerous=allow_dangerous) for v in _cli_paths(values))


def _cli_paths(values: Iterable[str]) -> list[str]:
    """Relative ``--mount`` sources are relative to the current directory (as for docker)."""
    out = []
    for v in values:
        src, sep, rest = v.partition(":")
        if sep and src and not src.startswith(("/", "~")):
            src = os.path.join(os.getcwd(), src)
        out.append(src + sep + rest)
    return out


def parse_cli_ports(values: Iterable[str]) -> tuple[Port, ...]:
    from .project import parse_port

    return tuple(parse_port(v, where="--port", key="--port") for v in values)


def parse_cli_env(values: Iterable[str], environ: Mapping[str, str] | None = None) -> tuple[tuple[str, str], ...]:
    """``-e NAME=VALUE``, or ``-e NAME`` for the value of ``NAME`` in envman's own environment
    (as docker does; it keeps a secret off every command line, envman's included)."""
    import re

    env = os.environ if environ is None else environ
    out = {}
    for v in values:
        k, sep, val = v.partition("=")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,254}", k):
            raise UserError(f"{k[:100]!r} is not a variable name (letters, digits, _)", where="--env-var",
                            fix="e.g. -e WANDB_MODE=offline, or -e HF_TOKEN to pass it from your environment")
        if not sep:
            if k not in env:
                raise UserError(f"{k} is not set in your environment", where="--env-var",
                                fix=f"export {k}=... first, or give -e {k}=VALUE")
            val = env[k]
        if "\0" in val or "\n" in val or "\r" in val:
            raise UserError(f"the value of {k} contains a NUL byte or a line break, which cannot be passed to a container",
                            where="--env-var", fix="put multi-line data in a file in the project and read it")
        out[k] = val
    return tuple(sorted(out.items()))


# --------------------------------------------------------------------------- the `envman run` command


def stack_resolver(matrix_files: Sequence[str | os.PathLike[str]]) -> Callable[[str], Stack]:
    """name → Stack for one invocation (matrix: shipped + ENVMAN_MATRIX + ``matrix_files``)."""
    memo: dict[str, Stack] = {}

    def load() -> Any:  # only when the stack cache misses
        from .matrix.load import get_matrix

        return get_matrix(matrix_files)

    def resolve_name(name: str) -> Stack:
        if name not in memo:
            memo[name] = resolve_stack(name, matrix_files, load)
            from .origins import record

            record(name, memo[name].name, matrix_files)  # for a later "unknown stack" to say why
        return memo[name]

    return resolve_name


def detect_host(matrix_files: Sequence[str | os.PathLike[str]] = ()) -> HostFacts:
    from .host import detect, matrix_gpu_table
    from .matrix.load import get_matrix

    # The matrix (its GPU table) is loaded only for a GPU whose compute capability the driver
    # could not report (nvidia-smi before driver 510).
    return detect(gpu_table=lambda name: matrix_gpu_table(get_matrix(matrix_files))(name))


_CONTAINER_NAME_RE = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"


def check_container_name(name: str) -> str:
    """A container name Docker accepts (its own rule), else a one-line error."""
    import re

    if not re.fullmatch(_CONTAINER_NAME_RE, name):
        raise UserError(f"{name!r} is not a container name", where="--name",
                        fix="use letters, digits and _.- (starting with a letter or digit, at most 128)")
    return name


RUN_USAGE = "envman run [OPTIONS] [PROJECT] [CMD ARGS...]"


class _RunArgumentParser(argparse.ArgumentParser):
    def error(self, message: str):  # one line and exit 2, like every other bad input
        raise UserError(message, where="envman run", fix="see envman run --help")


def run_parser() -> argparse.ArgumentParser:
    p = _RunArgumentParser(
        prog="envman run", usage=RUN_USAGE,
        description="Run a command in a project's stack. PROJECT is a registered name or a path; without it, the "
                    "envman.toml in the current directory or a parent. Everything after PROJECT (or after --) is "
                    "the command (default: the project's command, else the image's). The command starts in the "
                    "directory under /workspace that matches the current one when that is inside the project.",
    )
    p.add_argument("project", nargs="?", help="registered project name or path")
    p.add_argument("--stack", help="run on this stack instead of the project's")
    p.add_argument("--gpus", help='"all", a count, "device=0,2", or "slurm" (exactly the GPUs Slurm allocated to the '
                   'job this runs in) (default: all for a CUDA stack, none for a CPU stack)')
    p.add_argument("--no-gpu", action="store_true", help="run on the CPU only (skips the GPU preflight)")
    p.add_argument("--shm-size", help="size of /dev/shm (default: 8g, at most half the RAM)")
    p.add_argument("-p", "--port", action="append", default=[], help="publish PORT or HOST:CONTAINER on 127.0.0.1 "
                   "(the service must listen on 0.0.0.0 inside)")
    p.add_argument("-v", "--mount", action="append", default=[], help="extra bind mount SOURCE:TARGET[:ro]")
    p.add_argument("--allow-dangerous-mount", action="store_true",
                   help="let --mount give the container a protected path (engine socket, system directory, home, "
                        "credentials); never possible from a file")
    p.add_argument("-e", "--env-var", action="append", default=[],
                   help="environment variable NAME=VALUE, or NAME to pass its value from your environment")
    p.add_argument("--name", help="name this environment and its container (letters, digits, _.-): envman exec NAME, "
                   "envman stop NAME; envman submit's jobs name theirs after the job")
    p.add_argument("--rebuild", action="store_true", help="rebuild the project image without the cache")
    p.add_argument("--update", action="store_true", help="move the project to the stack's current stable image "
                   "(runs stay on the image id they were pinned to when another user promotes a newer one)")
    p.add_argument("--dry-run", action="store_true", help="preflight, then print the docker command instead of running it")
    p.add_argument("--json", dest="as_json", action="store_true", help="with --dry-run: the plan and argv as JSON")
    p.add_argument("-d", "--detach", action="store_true", help="start in the background (named after the project "
                   "unless --name) and print the container's id; without a command it waits for envman exec")
    return p


def split_bare_command(parser: argparse.ArgumentParser, words: Sequence[str]) -> tuple[list[str], list[str]]:
    """``envman run [OPTIONS] PROJECT CMD ARGS...``: (the options and PROJECT, the command).

    The command starts at the second word that is neither an option nor an option's value;
    options that take a value are known from ``parser``. Words that do not fit are left with the
    options, for the parser to reject.
    """
    words = list(words)
    i, positionals = 0, 0
    while i < len(words):
        w = words[i]
        if w.startswith("-") and w != "-":
            name = w.split("=", 1)[0] if w.startswith("--") else w[:2]
            action = parser._option_string_actions.get(name)
            attached = "=" in w if w.startswith("--") else len(w) > 2
            i += 1 if action is None or action.nargs == 0 or attached else 2
            continue
        positionals += 1
        if positionals == 2:
            return words[:i], words[i:]
        i += 1
    return words, []


def run_cli(args: Sequence[str], command: Sequence[str], matrix_files: Sequence[str | os.PathLike[str]] = ()) -> None:
    """``envman run``: ``args`` are the words before ``--``, ``command`` the words after it.
    Execs ``docker run`` (does not return) unless ``--dry-run``."""
    import shlex

    from .project import (
        CliOverrides, check_shm, check_stack_name, load_user_config, locate, merge_settings,
        parse_gpus, require_trust,
    )

    parser = run_parser()
    args, bare = split_bare_command(parser, args)
    if bare and command:
        raise UserError(f"two commands given: {shlex.join(bare)!r} and {shlex.join(command)!r} after --",
                        where="envman run", fix="give the command once, after the project name or after --")
    command = list(command) or bare
    a = parser.parse_args(list(args))
    if a.no_gpu and a.gpus is not None:
        raise UserError("--gpus and --no-gpu contradict each other", where="envman run", fix="give one of them")
    if a.stack is not None:
        check_stack_name(a.stack, where="--stack", key="--stack")
    if a.name is not None:
        check_container_name(a.name)
    proj = locate(a.project)
    require_trust(proj)
    check_project_root(proj)
    if a.gpus is not None and a.gpus.strip().lower() == "slurm":
        from .slurm import allocated_gpus

        asked = allocated_gpus(os.environ)
    else:
        asked = parse_gpus(a.gpus, where="--gpus", key="--gpus") if a.gpus is not None else None
    env_name = a.name if a.name is not None else (proj.name if a.detach else None)
    cname = a.name if a.name is not None else (container_name(os.getuid(), proj.name) if a.detach else None)
    cli = CliOverrides(
        stack=a.stack,
        gpus=None if a.no_gpu else asked,
        gpus_set=a.no_gpu or a.gpus is not None,
        shm_size=check_shm(a.shm_size, where="--shm-size", key="--shm-size") if a.shm_size is not None else None,
        environment=parse_cli_env(a.env_var),
        mounts=parse_cli_mounts(a.mount, allow_dangerous=a.allow_dangerous_mount),
        ports=parse_cli_ports(a.port),
        command=tuple(command),
    )
    resolve_name = stack_resolver(matrix_files)
    settings = merge_settings(proj, load_user_config(), cli, stack_is_cpu=lambda s: resolve_name(s).is_cpu)
    for m in settings.mounts:
        if not os.path.exists(m.source):
            raise UserError(f"mount source {m.source} does not exist", where=f"mount {m.target}",
                            fix="create it, or fix the path (docker would refuse the run)")
    stack = resolve_name(settings.stack)

    build_image = project_image_builder(a.rebuild)

    def suggest(s: Stack, host: HostFacts, gpus: Sequence[HostGpu]) -> str | None:
        from .matrix.load import get_matrix

        return suggest_stack(get_matrix(matrix_files), s, host, gpus)

    tty, interactive = terminal_flags()
    engine = docker_facts()
    prepared = prepare_run(
        proj, settings, stack, engine=engine, detect_host=lambda: detect_host(matrix_files), suggest=suggest,
        build_image=build_image, fetch_image=pull_on_run_fetcher(), rebuild=a.rebuild, update=a.update,
        remember_pin=not a.dry_run, tty=tty and not a.dry_run, interactive=interactive and not a.dry_run,
        env_name=env_name, detach=a.detach,
    )
    if cname is not None:
        prepared.plan = replace(prepared.plan, container_name=cname)
    for p in prepared.problems:
        if p.level == WARNING:
            _err(f"envman: warning: {p.message}")
    argv = docker_argv(prepared.plan, env_file=ENV_FILE_SLOT if prepared.plan.environment else None)
    if a.dry_run:
        argv = docker_argv(prepared.plan)
        if a.as_json:
            out = {"plan": prepared.plan.to_json(), "argv": argv, "problems": [p.to_json() for p in prepared.problems]}
            sys.stdout.write(json.dumps(out, indent=2) + "\n")
        else:
            sys.stdout.write(shlex.join(argv) + "\n")
        return
    if cname is not None:
        check_name_free(prepared.plan)
    if prepared.plan.gpus is None and not a.rebuild and cname is None and engine.socket is not None:
        remember_run(prepared, proj, engine=engine, key=cache_key(list(map(str, matrix_files)), args, command),
                     found_from=None if a.project is not None else Path.cwd(), matrix_files=matrix_files)
    exec_docker(argv, prepared.plan.environment)


def print_step(ev: Any) -> None:
    """A build's steps on stderr, one short line each (what a run shows while it builds)."""
    if ev.kind == "step":
        _err(f"  {ev.text[:120]}")


def project_image_builder(rebuild: bool = False) -> Callable[[ProjectConfig, Stack, str], str]:
    """``build_image`` for :func:`prepare_run`: builds the project image, its steps on stderr."""
    def build_image(p: ProjectConfig, s: Stack, base_id: str) -> str:
        from .engine import Engine
        from .project import build_project_image

        _err(f"envman: building the project image of {p.name} on {s.name} (apt packages, then requirements)")
        with Engine.connect() as engine:
            return build_project_image(engine, p, s.name, base_id, on_event=print_step, nocache=rebuild)

    return build_image


def pull_on_run_fetcher() -> Callable[[Stack], None] | None:
    """With ``[registry] pull_on_run = true`` and a default registry: a function that pulls a
    stack's missing promoted image from it (checked as ``envman pull`` checks it)."""
    from .registry import load_registry_settings

    settings = load_registry_settings()
    if not settings.pull_on_run or settings.default is None:
        return None

    def fetch(stack: Stack) -> None:
        from .engine import Engine
        from .registry import pull_stack

        _err(f"envman: no promoted image of {stack.name} here: pulling it from {settings.default}")
        with Engine.connect() as engine:
            pulled = pull_stack(engine, stack, settings.default, allow_http=settings.allow_http)
        _err(f"envman: pulled {pulled.ref} (smoke: {pulled.smoke})")

    return fetch


def check_name_free(plan: RunPlan) -> None:
    """Refuse a named run whose name this user already has running (one line, not the engine's)."""
    from .envs import find_container

    if plan.container_name is not None and find_container(plan.container_name) is not None:
        raise UserError(f"environment {plan.env_name!r} already exists", where="envman run --name",
                        fix=f"use it: envman exec {plan.env_name} -- CMD; or stop it: envman stop {plan.env_name}")


def run_dependencies(project: ProjectConfig, *, found_from: Path | None, report: Path | None,
                     matrix_files: Sequence[str | os.PathLike[str]]) -> list[str]:
    """Every file a run's plan was made from (see :mod:`envman.runcache`): the project file, the
    ``envman.toml`` files that do not exist between ``found_from`` and the project (a new one
    there would be found first), the registry, the user config, the requirements file, the matrix
    files and their folder (a new file there), and the smoke report."""
    from .paths import matrices_dir
    from .paths import matrix_files as all_matrix_files
    from .pins import pins_file
    from .project import PROJECT_FILE, registry_path, user_config_path
    from .trust import trust_path

    deps = [project.file, registry_path(), user_config_path(), pins_file(), trust_path(), matrices_dir(),
            *all_matrix_files(matrix_files)]
    if found_from is not None:
        root = project.file.parent.absolute()
        for d in (found_from.absolute(), *found_from.absolute().parents):
            if d == root:
                break
            deps.append(d / PROJECT_FILE)
    if project.requirements_source:
        deps.append(project.root / project.requirements_source)
    if report is not None:
        deps.append(report)
    return [os.path.abspath(p) for p in deps]


def remember_run(prepared: Prepared, project: ProjectConfig, *, engine: DockerFacts, key: str,
                 found_from: Path | None, matrix_files: Sequence[str | os.PathLike[str]]) -> None:
    """Record a CPU run that passed its preflight, for :func:`envman.runcache.try_cached_run`."""
    from dataclasses import replace

    from .state import report_path, stable_ref

    base_id = prepared.base_image_id
    if base_id is None:
        return
    stable = engine.inspect_image(stable_ref(prepared.stack.name))
    if stable is None:
        return
    # The stable tag as it is now (a move is a miss: the full path says a newer one exists), the
    # pinned base and the project image by id (gone is a miss).
    images = [(stable_ref(prepared.stack.name), str(stable["Id"])), (base_id, base_id)]
    if prepared.plan.image != base_id:
        images.append((prepared.plan.image, prepared.plan.image))
    plan = replace(prepared.plan, tty=False, interactive=False)
    record_run(key, deps=run_dependencies(project, found_from=found_from, report=report_path(base_id),
                                          matrix_files=matrix_files),
               images=images, argv=docker_argv(plan, env_file=ENV_FILE_SLOT if plan.environment else None),
               home=plan.home, environment=plan.environment, project_file=str(project.file),
               warnings=[p.message for p in prepared.problems if p.level == WARNING])


def cached_run_environment(project_file: str, args: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """The environment values of a cached run, worked out again (the cache keeps only their
    names and hashes): the user config, the project file, then ``-e`` options, as on the full
    path, filtered the same way (cached runs never request GPUs)."""
    from .project import load_project, load_user_config

    a = run_parser().parse_args(list(args))
    env: dict[str, str] = {}
    for src in (load_user_config().environment, load_project(project_file).environment, parse_cli_env(a.env_var)):
        env.update(src)
    return sanitize_environment(sorted(env.items()), None)[0]


def _err(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
