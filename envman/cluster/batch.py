"""The batch script of ``envman submit``: a project's command as a Slurm batch job.

The job runs the project's command in its image on the node Slurm allocates, with exactly the
GPUs Slurm allocated to it, after the same checks ``envman run`` makes there:

* ``docker`` (the default runtime): the batch script runs ``envman run ROOT --gpus slurm --name
  envman-job-<id>`` on the node. ``--gpus slurm`` (:func:`envman.run.prepare.allocated_gpus`) turns the job's
  ``SLURM_JOB_GPUS`` (or ``SLURM_STEP_GPUS`` / ``CUDA_VISIBLE_DEVICES``) into ``--gpus
  '"device=0,1"'``; the run's preflight (driver, architecture verdict per allocated GPU, the
  promoted image and its smoke test) is ``envman run``'s own. ``scancel`` signals the job's
  processes, which kills the ``docker`` client but not the container: the script traps TERM and
  removes the container it named after the job.
* ``podman``: the same ``envman run``, against a Podman service the job starts for itself
  (``DOCKER_HOST`` names its socket): envman sees Podman and gives the container the allocated
  GPUs as CDI devices (``--device nvidia.com/gpu=1``); the trap removes the container there.
* ``pyxis``, ``apptainer``, ``charliecloud``: for nodes without Docker. The script first runs
  ``envman node-check`` (the driver and architecture verdict on the allocated GPUs), then
  ``srun --container-image`` / ``apptainer exec [--nv]`` / ``ch-convert`` + ``ch-run`` with the
  project mounted at ``/workspace`` and its HOME at ``/home/envman``; those runtimes see the
  node's GPUs themselves and honour the ``CUDA_VISIBLE_DEVICES`` Slurm set.

Every value that reaches the script is validated here or quoted with :func:`envman.errors.shell_quote`;
``sbatch`` gets an argv list. The job's output goes to ``<state dir>/slurm/logs/job-<id>.log``,
and a record of each job to ``<state dir>/slurm/jobs/<id>.json``: ``envman jobs`` and
``envman logs`` only ever show jobs recorded there (the user's own envman jobs).
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterable

from envman.errors import UserError, shell_quote
from envman.paths import CONTAINER_HOME, WORKSPACE
from envman.engine.values import Mount
from envman.errors import clip_list

RUNTIMES = ("docker", "podman", "pyxis", "apptainer", "charliecloud")
DEFAULT_RUNTIME = "docker"
SLURM_CONFIG_KEYS = {"runtime": "one of " + ", ".join(RUNTIMES), "partition": "a partition name"}
#: How ``docker`` jobs name their container (the job id completes it inside the script).
CONTAINER_PREFIX = "envman-job-"

_PARTITION_RE = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}"
_MEM_RE = r"(?i)([1-9][0-9]{0,8})([KMGT]?)"
JOB_ID_RE = r"[1-9][0-9]{0,9}"
_ENV_KEY_RE = r"[A-Za-z_][A-Za-z0-9_]*"
_MAX_COUNT = 100_000
SubmitRunner = Callable[[list[str]], "subprocess.CompletedProcess[str]"]


# --------------------------------------------------------------------------- validation


def check_partition(value: str, *, where: str = "--partition") -> str:
    """A partition name, or a comma-separated list of them (Slurm takes the first that fits)."""
    parts = value.split(",")
    if not value or not all(re.fullmatch(_PARTITION_RE, p) for p in parts):
        raise UserError(f"{value!r} is not a partition name", where=where,
                        fix="letters, digits and _.- (several: p1,p2); list them with sinfo -s")
    return value


def check_time(value: str, *, where: str = "--time") -> str:
    """A Slurm time limit: ``M``, ``M:S``, ``H:M:S``, ``D-H``, ``D-H:M``, ``D-H:M:S`` (fields in
    range, not zero), or ``UNLIMITED``. Returned as given (upper-cased keyword)."""
    bad = UserError(f"{value!r} is not a time limit", where=where,
                    fix="minutes (90), H:MM:SS (1:30:00), D-HH[:MM[:SS]] (2-12) or UNLIMITED")
    v = value.strip()
    if v.upper() in ("UNLIMITED", "INFINITE"):
        return v.upper()
    m = re.fullmatch(r"(?:([0-9]{1,4})-)?([0-9]{1,7})(?::([0-9]{1,2}))?(?::([0-9]{1,2}))?", v)
    if not m or v != value:
        raise bad
    days, first, second, third = m.groups()
    nums = [int(x) for x in (first, second, third) if x is not None]
    # Every field after the first is minutes or seconds; after "D-", the first is hours (two digits).
    if any(n > 59 for n in nums[1:]) or (days is not None and (nums[0] > 23 or len(first) > 2)):
        raise bad
    if not any(nums) and not int(days or 0):
        raise UserError(f"{value!r} is a time limit of zero", where=where, fix="give a positive limit, or UNLIMITED")
    return v


def check_mem(value: str, *, where: str = "--mem") -> str:
    """Memory per node as Slurm's ``--mem`` takes it: a positive number with K, M (default), G or T."""
    m = re.fullmatch(_MEM_RE, value.strip())
    if not m or value.strip() != value:
        raise UserError(f"{value!r} is not a memory size", where=where, fix="e.g. 16G, 512M or 2048 (megabytes)")
    return m.group(1) + m.group(2).upper()


def check_count(value: int, *, where: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= _MAX_COUNT:
        raise UserError(f"{value!r} is not a count of at least {minimum}", where=where,
                        fix=f"give a whole number from {minimum} to {_MAX_COUNT}")
    return value


def check_runtime(value: str, *, where: str = "--runtime") -> str:
    v = value.strip().lower()
    if v not in RUNTIMES:
        raise UserError(f"unknown runtime {value!r}", where=where, fix="one of " + ", ".join(RUNTIMES))
    return v


def check_job_id(value: str, *, where: str = "envman logs") -> str:
    if not re.fullmatch(JOB_ID_RE, value.strip()):
        raise UserError(f"{value!r} is not a Slurm job id", where=where, fix="a job number, as envman jobs lists them")
    return value.strip()


# --------------------------------------------------------------------------- GPUs on the node


# --------------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class SlurmConfig:
    """``[slurm]`` in the user config: defaults for ``envman submit``."""

    runtime: str = DEFAULT_RUNTIME
    partition: str | None = None


def load_slurm_config(path: Path | None = None) -> SlurmConfig:
    from envman.config import read_config

    file = read_config(path)
    table = file.table("slurm")
    cfg = SlurmConfig()
    for key in SLURM_CONFIG_KEYS:
        if key in table and not isinstance(table[key], str):
            raise UserError(f"key slurm.{key}: expected {SLURM_CONFIG_KEYS[key]}", where=file.where("slurm", key),
                            fix=f'write {key} = "..." in [slurm]')
    if "runtime" in table:
        cfg = replace(cfg, runtime=check_runtime(table["runtime"], where=file.where("slurm", "runtime")))
    if "partition" in table:
        cfg = replace(cfg, partition=check_partition(table["partition"], where=file.where("slurm", "partition")))
    return cfg


# --------------------------------------------------------------------------- the job


@dataclass(frozen=True)
class Resources:
    """What the job asks Slurm for (validated)."""

    partition: str | None = None
    gpus: int = 0
    time: str | None = None
    cpus: int | None = None
    mem: str | None = None

    def directives(self, job_name: str) -> list[str]:
        out = [f"--job-name={job_name}"]
        if self.partition:
            out.append(f"--partition={self.partition}")
        if self.gpus:
            out.append(f"--gres=gpu:{self.gpus}")
        if self.time:
            out.append(f"--time={self.time}")
        if self.cpus:
            out.append(f"--cpus-per-task={self.cpus}")
        if self.mem:
            out.append(f"--mem={self.mem}")
        return out


@dataclass(frozen=True)
class JobSpec:
    """Everything a batch script is made from (pure data; :func:`render_script` renders it)."""

    project: str
    root: str  # absolute project root (the node reaches it through the shared filesystem)
    stack: str
    image: str  # the image the job runs (for runtimes other than docker; docker's run finds its own)
    runtime: str
    resources: Resources
    envman: tuple[str, ...]  # how the node starts this envman: (python, "-m", "envman")
    command: tuple[str, ...] = ()
    matrix_files: tuple[str, ...] = ()
    environment: tuple[tuple[str, str], ...] = ()  # the project's variables (non-docker runtimes)
    mounts: tuple[Mount, ...] = ()  # the project's extra mounts (non-docker runtimes)
    home: str = ""  # host directory mounted at the container's HOME (non-docker runtimes)
    state_dir: str = ""
    config_dir: str = ""
    matrix_env: str = ""  # ENVMAN_MATRIX as the submitter had it (absolute paths)
    #: The file (mode 0600, in the user's private state directory) that carries the container's
    #: environment to the pyxis, apptainer and charliecloud runtimes: values never appear on a
    #: command line (``ps`` on the node, ch-run's syslog line) nor in the batch script.
    env_file: str = ""
    #: What the job script itself needs from the submitter's environment (PATH to find the
    #: runtime, HOME for its caches, USER, DOCKER_HOST to read the node's engine): pyxis,
    #: apptainer and charliecloud jobs start with ``--export=NONE`` and set exactly these.
    job_env: tuple[tuple[str, str], ...] = ()

    @property
    def job_name(self) -> str:
        return f"envman-{self.project}"


def _q(words: Iterable[str]) -> str:
    return " ".join(shell_quote(w) for w in words)


#: Runtimes whose container is started by the job script itself (not by ``envman run`` on the
#: node): they get none of the submitter's environment (``--export=NONE``), only ``job_env``.
SCRIPT_RUNTIMES = ("pyxis", "apptainer", "charliecloud")
#: The submitter's variables a script runtime's job needs for itself (never passed on to the container).
JOB_ENV_NAMES = ("PATH", "HOME", "USER", "DOCKER_HOST")


def _header(spec: JobSpec) -> list[str]:
    lines = ["#!/bin/bash"]
    lines += [f"#SBATCH {d}" for d in spec.resources.directives(spec.job_name)]
    if spec.runtime in SCRIPT_RUNTIMES:
        # Slurm's default (--export=ALL) copies the submitting shell's whole environment into the
        # job; these runtimes would hand it on to the container.
        lines.append("#SBATCH --export=NONE")
    gpus = f"{spec.resources.gpus} GPU(s)" if spec.resources.gpus else "no GPU"
    lines += [
        f"# envman submit: project {spec.project}, stack {spec.stack}, runtime {spec.runtime}, {gpus}.",
        "# The job's exit code is envman's (the command's, or 1/2 when a check fails on the node).",
        "set -uo pipefail",
    ]
    if spec.runtime in SCRIPT_RUNTIMES:
        pairs = [(k, v) for k, v in spec.job_env if k in JOB_ENV_NAMES]
        if pairs:
            lines.append("export " + " ".join(f"{k}={shell_quote(v)}" for k, v in pairs))
        # The values file holds secrets: remove it when the job ends, however it ends.
        if spec.env_file:
            lines.append(f"trap {shell_quote('rm -f ' + shell_quote(spec.env_file))} EXIT")
            lines.append("trap 'exit 143' TERM INT HUP  # scancel: end through the EXIT trap")
    lines += [
        f"export ENVMAN_STATE_DIR={shell_quote(spec.state_dir)} ENVMAN_CONFIG_DIR={shell_quote(spec.config_dir)}",
    ]
    if spec.matrix_env:
        lines.append(f"export ENVMAN_MATRIX={shell_quote(spec.matrix_env)}")
    matrix = [w for f in spec.matrix_files for w in ("--matrix", f)]
    lines.append(f"envman() {{ {_q(spec.envman + tuple(matrix))} \"$@\"; }}")
    return lines


def _gpu_flag(spec: JobSpec) -> str:
    return "--gpus slurm" if spec.resources.gpus else "--no-gpu"


def _command_tail(spec: JobSpec) -> str:
    return (" -- " + _q(spec.command)) if spec.command else ""


def _docker_body(spec: JobSpec) -> list[str]:
    return [
        f'container="{CONTAINER_PREFIX}${{SLURM_JOB_ID}}"',
        "# scancel signals the job's processes: that kills the docker client, not the container.",
        "# Remove the container named after the job, then end as cancelled.",
        "trap 'docker rm -f \"$container\" >/dev/null 2>&1; exit 143' TERM INT HUP",
        "# envman run: the same preflight as on a workstation (driver, verdict on each allocated GPU,",
        "# promoted image and its smoke test), then docker run with exactly the GPUs Slurm allocated.",
        f"envman run {shell_quote(spec.root)} {_gpu_flag(spec)} --name \"$container\"{_command_tail(spec)} &",
        'wait "$!"',
    ]


def _podman_body(spec: JobSpec) -> list[str]:
    """``envman run`` against a Podman service the job starts for itself (nodes rarely run one):
    envman sees a Podman engine there and gives the container the allocated GPUs as CDI devices."""
    return [
        "# A Podman service for this job only, in a private folder; envman run finds it through DOCKER_HOST.",
        'sockdir=$(mktemp -d) || exit 1',
        'podman system service --time=0 "unix://$sockdir/podman.sock" &',
        'service=$!',
        'export DOCKER_HOST="unix://$sockdir/podman.sock"',
        'for _ in $(seq 100); do [ -S "$sockdir/podman.sock" ] && break; sleep 0.1; done',
        f'container="{CONTAINER_PREFIX}${{SLURM_JOB_ID}}"',
        'stop_service() { kill "$service" 2>/dev/null; wait "$service" 2>/dev/null; rm -rf "$sockdir"; }',
        "# scancel signals every process of the job (the service too) and kills the podman client, not the",
        "# container: remove it by name with the podman CLI itself (same storage), then end as cancelled.",
        "trap 'podman rm -f \"$container\" >/dev/null 2>&1; stop_service; exit 143' TERM INT HUP",
        f"envman run {shell_quote(spec.root)} {_gpu_flag(spec)} --name \"$container\"{_command_tail(spec)} &",
        'wait "$!"',
        "rc=$?",
        "stop_service",
        'exit "$rc"',
    ]


def _node_check(spec: JobSpec) -> str:
    return f"envman node-check {shell_quote(spec.root)} {_gpu_flag(spec)} || exit $?"


def _needs_command(spec: JobSpec) -> None:
    if not spec.command:
        raise UserError(f"runtime {spec.runtime} needs a command", where="envman submit",
                        fix='give one after --, or set command = [...] in envman.toml')


def _check_bind_path(path: str, runtime: str) -> str:
    if any(c in path for c in ",:\n"):
        raise UserError(f"path {path!r} contains ',' or ':', which {runtime} bind specifications cannot carry",
                        where="envman submit", fix="move the project or mount to a path without them")
    return path


def _binds(spec: JobSpec) -> list[Mount]:
    return [Mount(spec.root, WORKSPACE), Mount(spec.home, CONTAINER_HOME), *spec.mounts]


def job_environment(spec: JobSpec) -> list[tuple[str, str]]:
    # A CPU job sets NVIDIA_VISIBLE_DEVICES=void, as envman run does: the image's "all" (nvidia/cuda
    # bases set it) would otherwise have an NVIDIA hook (enroot's) attach every GPU of the node.
    void = [("NVIDIA_VISIBLE_DEVICES", "void")] if not spec.resources.gpus else []
    return [("HOME", CONTAINER_HOME), ("ENVMAN_PROJECT", spec.project), ("ENVMAN_STACK", spec.stack), *void,
            *spec.environment]


#: Names that act on the host when the batch shell of a pyxis job holds them. A pyxis job passes
#: the project's variables through the environment of the shell that runs ``srun`` (``srun
#: --export=NAMES --container-env=NAMES``), so one that the shell, the dynamic loader, ``srun`` or
#: pyxis/enroot read would act outside the container (``PATH`` picks the ``srun`` that runs,
#: ``LD_PRELOAD`` loads code into it). Refused for pyxis: glibc's list of the variables it drops
#: for setuid programs (``unsecvars.h``), the shell's start-up and parsing variables, ``srun``'s
#: ``--export`` keywords, and below the prefixes of the loader's variables, exported shell
#: functions, Slurm's input variables (``SLURM_*``, ``SRUN_*``; srun's man page), pyxis's and
#: enroot's settings (``ENROOT_*``, and ``MELLANOX_*`` that enroot's standard hook reads to add
#: InfiniBand devices, as ``NVIDIA_*`` adds GPUs: those are envman's, dropped already) and the XDG
#: folders enroot reads its configuration and hooks from (``ENROOT_CONFIG_PATH`` is
#: ``${XDG_CONFIG_HOME}/enroot`` by default, enroot's configuration documentation).
PYXIS_HOST_NAMES = frozenset((
    "PATH", "IFS", "ENV", "BASH_ENV", "SHELLOPTS", "BASHOPTS", "PS4", "CDPATH", "GLOBIGNORE", "PROMPT_COMMAND",
    "GCONV_PATH", "GETCONF_DIR", "GLIBC_TUNABLES", "HOSTALIASES", "LOCALDOMAIN", "LOCPATH", "MALLOC_TRACE", "NIS_PATH",
    "NLSPATH", "RESOLV_HOST_CONF", "RES_OPTIONS", "TMPDIR", "TZDIR", "ALL", "NONE", "NIL",
))
PYXIS_HOST_PREFIXES = ("LD_", "BASH_FUNC_", "SLURM_", "SRUN_", "SBATCH_", "SALLOC_", "SPANK_", "_SLURM", "PYXIS_",
                       "ENROOT_", "MELLANOX_", "MALLOC_", "XDG_")


def pyxis_host_names(names: Iterable[str]) -> list[str]:
    """Those of ``names`` a pyxis job cannot pass: :data:`PYXIS_HOST_NAMES` (the ``--export``
    keywords in any case), or starting with one of :data:`PYXIS_HOST_PREFIXES`."""
    return [k for k in names
            if k in PYXIS_HOST_NAMES or k.upper() in PYXIS_HOST_NAMES or k.startswith(PYXIS_HOST_PREFIXES)]


def _pyxis_env(spec: JobSpec) -> list[tuple[str, str]]:
    # HOME stays the host's on this side (enroot keeps its cache under it); inside, the image's
    # HOME (/home/envman in envman's images) holds the project's home directory.
    return [(k, v) for k, v in job_environment(spec) if k != "HOME"]


def env_file_text(spec: JobSpec) -> str:
    """What :attr:`JobSpec.env_file` holds for ``spec``'s runtime (empty for docker and podman,
    whose ``envman run`` on the node reads the project's variables itself): shell ``export``
    lines the script sources for pyxis (``--container-env`` then passes them by name) and
    apptainer (``APPTAINERENV_*``), ``NAME='value'`` lines for ch-run's ``--set-env=FILE`` (it
    strips one pair of single quotes and, after ``--env-no-expand``, expands nothing)."""
    if spec.runtime == "pyxis":
        return "".join(f"export {k}={shell_quote(v)}\n" for k, v in _pyxis_env(spec))
    if spec.runtime == "apptainer":
        return "".join(f"export APPTAINERENV_{k}={shell_quote(v)}\n" for k, v in job_environment(spec))
    if spec.runtime == "charliecloud":
        return "".join(f"{k}='{v}'\n" for k, v in job_environment(spec))
    return ""


def _source_env(spec: JobSpec, names: Iterable[str]) -> list[str]:
    if not spec.env_file:
        raise UserError(f"runtime {spec.runtime} needs an environment file", where="envman submit")
    return [f"# The container's environment ({', '.join(names)}): values in a file only you can read.",
            f". {shell_quote(spec.env_file)} || exit 1",
            f"rm -f {shell_quote(spec.env_file)}  # its values are exported in this shell now"]


def _pyxis_body(spec: JobSpec) -> list[str]:
    _needs_command(spec)
    mounts = ",".join(f"{_check_bind_path(m.source, 'pyxis')}:{_check_bind_path(m.target, 'pyxis')}"
                      + (":ro" if m.read_only else "") for m in _binds(spec))
    env = _pyxis_env(spec)
    host = pyxis_host_names(k for k, _ in spec.environment if k != "HOME")
    if host:
        raise UserError(f"environment {clip_list(host)}: a pyxis job passes the project's variables through the shell "
                        "that runs srun, where the shell, the loader, srun or enroot would obey "
                        f"{'it' if len(host) == 1 else 'them'} on the host", where="envman submit",
                        fix="rename the variable, or use --runtime apptainer, charliecloud or docker "
                            "(they set it in the container only)")
    lines = [_node_check(spec)]
    lines += _source_env(spec, [k for k, _ in env])
    names = ",".join(k for k, _ in env)
    # The step gets the project's variables by name and Slurm's own, nothing else of the job's
    # environment (pyxis hands the step's environment to the container).
    srun = ["srun", "--ntasks=1", f"--export={names}", f"--container-image={spec.image}",
            f"--container-mounts={mounts}", f"--container-workdir={WORKSPACE}", "--no-container-mount-home",
            f"--container-env={names}"]
    lines.append(_q(srun) + " " + _q(spec.command))
    return lines


def _apptainer_body(spec: JobSpec) -> list[str]:
    _needs_command(spec)
    lines = [_node_check(spec)]
    # APPTAINERENV_X sets X in the container whatever its value holds (no comma splitting).
    lines += _source_env(spec, [k for k, _ in job_environment(spec)])
    argv = ["apptainer", "exec"]
    if spec.resources.gpus:
        argv.append("--nv")  # the node's driver libraries and devices; CUDA_VISIBLE_DEVICES selects Slurm's GPUs
    # --cleanenv: only the APPTAINERENV_* variables reach the container; --containall: no host
    # /tmp, /var/tmp, HOME or working directory, private PID and IPC namespaces (like a docker run).
    argv += ["--cleanenv", "--containall", "--no-home", "--pwd", WORKSPACE]
    for m in _binds(spec):
        argv += ["--bind", f"{_check_bind_path(m.source, 'apptainer')}:{_check_bind_path(m.target, 'apptainer')}"
                 + (":ro" if m.read_only else "")]
    if spec.resources.gpus:
        lines.append('export APPTAINERENV_CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-}"')
    lines.append(_q([*argv, spec.image, *spec.command]))
    return lines


def charliecloud_image_dir(state_dir: str, image: str) -> str:
    """Where a job keeps the Charliecloud copies of a Docker image (directory images: ch-run can
    create the bind targets in them, which a read-only squashfs image cannot). The job adds the
    image id it converted (``<dir>_<id>``): a tag that moves (a new promotion of ``:latest``) is
    converted again, never run from a stale copy."""
    from envman.state import safe_name

    return str(Path(state_dir) / "charliecloud" / safe_name(image))


def _charliecloud_body(spec: JobSpec) -> list[str]:
    _needs_command(spec)
    if any(m.read_only for m in spec.mounts):
        raise UserError("charliecloud cannot bind a mount read-only", where="envman submit",
                        fix="drop :ro from the project's mounts, or use --runtime apptainer")
    img = charliecloud_image_dir(spec.state_dir, spec.image)
    image = shell_quote(spec.image)
    inspect = f"docker image inspect --format '{{{{.Id}}}}' {image}"
    lines = [
        _node_check(spec),
        'export USER="${USER:-$(id -un)}"  # the ch-* tools need it',
        "# The copy is keyed by the image id the tag names now: a new promotion is converted again.",
        f"id=$({inspect}) || exit 1",
        'id="${id#sha256:}"',
        'case "$id" in ""|*[!0-9a-f]*) echo "envman: no image id for the image of the job" >&2; exit 1;; esac',
        f'img={shell_quote(img)}"_$id"',
        "# Convert it from the node's Docker engine once; jobs after it reuse the copy of that id.",
        'if [ ! -d "$img" ]; then',
        '  mkdir -p "${img%/*}" || exit 1',
        f'  ch-convert -i docker {image} "$img.$SLURM_JOB_ID" || exit 1',
        "  # The tag may have moved while it was converted: keep the copy only under the id it has.",
        f'  if [ "$({inspect})" != "sha256:$id" ]; then',
        '    rm -rf "$img.$SLURM_JOB_ID"; echo "envman: the image changed during its conversion; submit again" >&2; exit 1',
        "  fi",
        f'  mkdir -p "$img.$SLURM_JOB_ID"{WORKSPACE} "$img.$SLURM_JOB_ID"{CONTAINER_HOME}',
        '  mv -T "$img.$SLURM_JOB_ID" "$img" 2>/dev/null || rm -rf "$img.$SLURM_JOB_ID"',
        "fi",
    ]
    argv = ["ch-run"]
    for m in _binds(spec):
        argv.append(f"--bind={_check_bind_path(m.source, 'charliecloud')}:{_check_bind_path(m.target, 'charliecloud')}")
    # A bare --set-env loads the image's own ENV (kept by ch-convert, already expanded), then the
    # project's from a file only the user can read, taken literally (ch-run would otherwise expand
    # "$X" in the values). Never --set-env=NAME=VALUE: ch-run logs its argv to syslog.
    if not spec.env_file:
        raise UserError("runtime charliecloud needs an environment file", where="envman submit")
    lines.insert(1, f"# The container's environment ({', '.join(k for k, _ in job_environment(spec))}): values in "
                    "a file only you can read.")
    # ch-run applies --unset-env/--set-env in order: first nothing of the job's environment, then
    # the image's ENV, then the project's. --private-tmp: the host's /tmp stays outside.
    argv += [f"--cd={WORKSPACE}", "--private-tmp", "--unset-env=*", "--env-no-expand", "--set-env",
             f"--set-env={spec.env_file}"]
    lines.append(_q(argv) + ' "$img" -- ' + _q(spec.command))
    return lines


_BODIES = {"docker": _docker_body, "podman": _podman_body, "pyxis": _pyxis_body, "apptainer": _apptainer_body,
           "charliecloud": _charliecloud_body}


def render_script(spec: JobSpec) -> str:
    """The batch script for ``spec`` (pure: unit-tested for every runtime)."""
    return "\n".join(_header(spec) + _BODIES[spec.runtime](spec)) + "\n"


def sbatch_argv(script: Path, log: str) -> list[str]:
    """``sbatch`` as an argv list: the script carries the resources, the argv the log path."""
    return ["sbatch", "--parsable", f"--output={log}", f"--error={log}", str(script)]
