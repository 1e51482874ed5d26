"""``envman submit`` / ``envman jobs`` / ``envman logs``: a project's command submitted as a Slurm
batch job (its script: :mod:`envman.cluster.batch`), and the records of the user's jobs.

The job's output goes to ``<state dir>/slurm/logs/job-<id>.log``, and a record of each job to
``<state dir>/slurm/jobs/<id>.json``: ``envman jobs`` and ``envman logs`` only ever show jobs
recorded there (the user's own envman jobs).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence
import codecs

from envman.errors import EnvmanError, UserError
from envman.project.file import cluster_gpu_count

if TYPE_CHECKING:
    from envman.matrix.source import MatrixSource
# The job spec, its script and their checks (envman.cluster.batch), named here too for callers of the job records.
from envman.cluster.batch import (
    RUNTIMES, DEFAULT_RUNTIME, SLURM_CONFIG_KEYS, CONTAINER_PREFIX, JOB_ID_RE, SubmitRunner, check_partition,
    check_time, check_mem, check_count, check_runtime, check_job_id, SlurmConfig, load_slurm_config, Resources,
    JobSpec, SCRIPT_RUNTIMES, JOB_ENV_NAMES, PYXIS_HOST_NAMES, PYXIS_HOST_PREFIXES, pyxis_host_names, env_file_text,
    charliecloud_image_dir, render_script, sbatch_argv,
)
from envman.errors import stderr_line
from envman.paths import config_dir, state_dir
from envman.paths import state_dir


# --------------------------------------------------------------------------- submitting


def slurm_dir() -> Path:
    return state_dir() / "slurm"


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    import shutil

    if shutil.which(argv[0]) is None:
        raise EnvmanError(f"{argv[0]} is not installed here", where="envman",
                          fix="run envman submit/jobs/logs on a Slurm login node (Slurm's client commands on PATH)")
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise EnvmanError(f"{argv[0]} did not answer within 60 s", where="envman",
                          fix="check the cluster: scontrol ping") from None


def _first_error(p: subprocess.CompletedProcess[str]) -> str:
    lines = [ln.strip() for ln in (p.stderr or p.stdout or "").splitlines() if ln.strip()]
    # sbatch says "error: <specific>" then "Batch job submission failed: <generic>": keep the last.
    return (lines[-1] if lines else f"exit {p.returncode}").removeprefix("sbatch: error: ")


def check_partition_exists(partition: str, run: SubmitRunner = _run) -> None:
    """A clean error before submitting to a partition the cluster does not have."""
    p = run(["sinfo", "--noheader", "--format=%P"])
    if p.returncode != 0:
        raise EnvmanError(f"sinfo failed: {_first_error(p)}", where="envman submit", fix="check the cluster: scontrol ping")
    have = [ln.strip().rstrip("*") for ln in p.stdout.splitlines() if ln.strip()]
    for name in partition.split(","):
        if name not in have:
            raise UserError(f"partition {name!r} does not exist on this cluster", where="--partition",
                            fix="partitions here: " + (", ".join(have) or "none"))


@dataclass(frozen=True)
class JobRecord:
    """What envman remembers of a job it submitted (``<state dir>/slurm/jobs/<id>.json``)."""

    id: str
    project: str
    stack: str
    runtime: str
    log: str
    script: str
    submitted: float
    gpus: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _jobs_dir() -> Path:
    return slurm_dir() / "jobs"


def submit(spec: JobSpec, run: SubmitRunner = _run, *, now: Callable[[], float] = time.time) -> JobRecord:
    """Write the script, check the partition, ``sbatch`` it and record the job."""
    from envman.state import atomic_write

    script_text = render_script(spec)  # raises on what the runtime cannot express, before anything is written
    if spec.resources.partition:
        check_partition_exists(spec.resources.partition, run)
    base = slurm_dir()
    logs = str(base.absolute() / "logs")
    if "\\" in logs:  # sbatch would then take the whole path literally, "%j" included
        raise UserError(f"envman's state directory {logs} contains a backslash, which sbatch's --output cannot carry",
                        where="envman submit", fix="set ENVMAN_STATE_DIR to a path without one")
    log_pattern = logs.replace("%", "%%") + "/job-%j.log"  # "%%" is sbatch's literal "%"
    (base / "logs").mkdir(parents=True, exist_ok=True, mode=0o700)
    scripts = base / "scripts"
    stamp = f"{spec.project}-{int(now() * 1000)}-{os.getpid()}"
    script = scripts / f"{stamp}.sh"
    env_text = env_file_text(spec)
    if env_text:
        from envman.safefile import private_dir

        private_dir(Path(spec.env_file).parent)
        atomic_write(Path(spec.env_file), env_text, mode=0o600)
    atomic_write(script, script_text)
    p = run(sbatch_argv(script, log_pattern))
    if p.returncode != 0:
        script.unlink(missing_ok=True)
        if env_text:
            Path(spec.env_file).unlink(missing_ok=True)
        why = _first_error(p)
        bad_request = any(w in why.lower() for w in ("invalid", "not available", "requested", "time limit"))
        cls = UserError if bad_request else EnvmanError
        raise cls(f"sbatch refused the job: {why}", where="envman submit",
                  fix="check --partition/--gpus/--time/--cpus/--mem against sinfo -s and scontrol show partition")
    job_id = p.stdout.strip().split(";")[0]
    if not re.fullmatch(JOB_ID_RE, job_id):
        raise EnvmanError(f"sbatch printed no job id ({p.stdout.strip()[:80]!r})", where="envman submit")
    final = scripts / f"job-{job_id}.sh"
    os.replace(script, final)
    record = JobRecord(job_id, spec.project, spec.stack, spec.runtime, f"{logs}/job-{job_id}.log", str(final),
                       now(), spec.resources.gpus)
    atomic_write(_jobs_dir() / f"{job_id}.json", json.dumps(record.to_json(), indent=2, sort_keys=True) + "\n")
    return record


# --------------------------------------------------------------------------- jobs and logs


def load_records() -> list[JobRecord]:
    """The user's envman jobs, newest first (unreadable records are skipped)."""
    out = []
    d = _jobs_dir()
    for f in d.glob("*.json") if d.is_dir() else ():
        from envman.safefile import read_state_json

        rec = _job_record(read_state_json(f, what="job record", limit=64 * 1024))
        if rec is not None:
            out.append(rec)
    return sorted(out, key=lambda r: (r.submitted, int(r.id)), reverse=True)  # ids restart when a cluster is reset


#: The latest submission time a job record may hold (9999-12-31T23:59:59Z; ``sacct --starttime`` is
#: given a day before it), and the most GPUs: a record with anything else is not believed.
MAX_SUBMITTED = 253402300799
MAX_GPUS = 1 << 16


def _job_record(doc: object) -> JobRecord | None:
    """A job record read back, or ``None`` unless every field has its type (an id Slurm gives)."""
    if not isinstance(doc, dict):
        return None
    strings = ("id", "project", "stack", "runtime", "log", "script")
    if not all(isinstance(doc.get(k), str) for k in strings) or not re.fullmatch(JOB_ID_RE, doc["id"]):
        return None
    submitted, gpus = doc.get("submitted"), doc.get("gpus", 0)
    if isinstance(submitted, bool) or not isinstance(submitted, (int, float)) or isinstance(gpus, bool) \
            or not isinstance(gpus, int):
        return None
    if not 0 <= submitted <= MAX_SUBMITTED or not 0 <= gpus <= MAX_GPUS:  # NaN compares false
        return None
    return JobRecord(doc["id"], doc["project"], doc["stack"], doc["runtime"], doc["log"], doc["script"],
                     float(submitted), gpus)


def record(job_id: str) -> JobRecord:
    job_id = check_job_id(job_id)
    for r in load_records():
        if r.id == job_id:
            return r
    raise UserError(f"job {job_id} is not one of your envman jobs", where="envman logs",
                    fix="list them with envman jobs (other jobs: scontrol show job)")


@dataclass(frozen=True)
class JobState:
    id: str
    state: str  # PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, ... or UNKNOWN
    exit_code: int | None = None  # the job's exit status once it ended
    signal: int | None = None
    reason: str = ""


def parse_squeue(text: str) -> dict[str, JobState]:
    """``squeue --noheader --format=%i|%T|%r`` lines."""
    out = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) >= 2 and re.fullmatch(JOB_ID_RE, parts[0]):
            out[parts[0]] = JobState(parts[0], parts[1], reason=parts[2] if len(parts) > 2 and parts[2] != "None" else "")
    return out


def parse_sacct(text: str) -> dict[str, JobState]:
    """``sacct --noheader --parsable2 --format=JobID,State,ExitCode`` lines (job lines only; the
    last record of an id wins)."""
    out = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 3 or not re.fullmatch(JOB_ID_RE, parts[0]):
            continue  # steps (123.batch) and blank lines
        state = parts[1].split()[0] if parts[1].strip() else "UNKNOWN"  # "CANCELLED by 0"
        code = re.fullmatch(r"([0-9]+):([0-9]+)", parts[2].strip())
        out[parts[0]] = JobState(parts[0], state, int(code.group(1)) if code else None,
                                 int(code.group(2)) if code and int(code.group(2)) else None)
    return out


def job_states(ids: Sequence[str], run: SubmitRunner = _run, since: float | None = None) -> dict[str, JobState]:
    """Live states from ``squeue``, finished ones from ``sacct`` (accounting), or from the
    job completion log (``sacct -c``) where the cluster has no accounting database. ``since``
    (a timestamp: the oldest submission) widens sacct's window, which is "today" by default."""
    if not ids:
        return {}
    user = _user()
    q = run(["squeue", "--noheader", f"--user={user}", "--states=all", "--format=%i|%T|%r"])
    if q.returncode != 0:
        raise EnvmanError(f"squeue failed: {_first_error(q)}", where="envman jobs", fix="check the cluster: scontrol ping")
    live = parse_squeue(q.stdout)
    states = {i: live[i] for i in ids if i in live and live[i].state in ("PENDING", "RUNNING", "CONFIGURING",
                                                                         "COMPLETING", "SUSPENDED", "REQUEUED")}
    rest = [i for i in ids if i not in states]
    if rest:
        fields = ["--noheader", "--parsable2", "--format=JobID,State,ExitCode", f"--jobs={','.join(rest)}"]
        if since is not None:
            fields.append("--starttime=" + time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since - 86400)))
        acct = run(["sacct", "-X", f"--user={user}", *fields])
        if acct.returncode != 0:  # no slurmdbd: read the job completion log
            acct = run(["sacct", "--completion", *fields])
        done = parse_sacct(acct.stdout) if acct.returncode == 0 else {}
        for i in rest:
            states[i] = done.get(i) or live.get(i) or JobState(i, "UNKNOWN")
    return states


def _user() -> str:
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name


def jobs(run: SubmitRunner = _run, limit: int | None = None) -> list[tuple[JobRecord, JobState]]:
    records = load_records()[:limit or None]
    states = job_states([r.id for r in records], run, since=min((r.submitted for r in records), default=None))
    return [(r, states.get(r.id, JobState(r.id, "UNKNOWN"))) for r in records]


#: The most of a job log ``envman logs`` prints (its end), and reads per step of ``--follow``.
LOG_TAIL = 8 << 20


def _open_log(path: str) -> int | None:
    """A descriptor on a job log that is a regular file (not a FIFO, a device or a symlink),
    opened without blocking; ``None`` while it does not exist."""
    from envman.safefile import open_file

    try:
        return open_file(path, what="job log", follow=False,
                         fix="a job log is a regular file envman's job script writes; remove what is there")[0]
    except FileNotFoundError:
        return None


def read_log(job_id: str) -> tuple[JobRecord, str]:
    """The log of one of the user's envman jobs (empty while the job has not started): its last
    :data:`LOG_TAIL` bytes, said so when there was more."""
    rec = record(job_id)
    fd = _open_log(rec.log)
    if fd is None:
        return rec, ""
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > LOG_TAIL:
            fh.seek(size - LOG_TAIL)
        data = fh.read(LOG_TAIL)
    note = f"[envman: the first {size - LOG_TAIL} bytes of {rec.log} are not shown]\n" if size > LOG_TAIL else ""
    return rec, note + data.decode(errors="replace")


ENDED = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
                   "DEADLINE", "PREEMPTED", "UNKNOWN"})


def follow_log(job_id: str, write: Callable[[str], None], run: SubmitRunner = _run, *, interval: float = 1.0,
               sleep: Callable[[float], None] = time.sleep) -> JobState:
    """Print a job's log as it grows until the job has ended; its final state."""
    rec = record(job_id)
    offset = 0
    # one decoder for the whole log: a character split between two reads is written whole
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    while True:
        state = job_states([rec.id], run, since=rec.submitted)[rec.id]
        fd = _open_log(rec.log)
        chunk = b""
        if fd is not None:
            with os.fdopen(fd, "rb") as fh:
                fh.seek(offset)
                chunk = fh.read(LOG_TAIL)
        if chunk:
            offset += len(chunk)
            text = decoder.decode(chunk)
            if text:
                write(text)
        elif state.state in ENDED:
            rest = decoder.decode(b"", final=True)  # a log that ends inside a character
            if rest:
                write(rest)
            return state
        else:
            sleep(interval)


# --------------------------------------------------------------------------- building a spec


@dataclass(frozen=True)
class SubmitRequest:
    """``envman submit``'s command line, validated."""

    target: str | None
    resources: Resources
    runtime: str | None = None
    image: str | None = None
    command: tuple[str, ...] = ()
    matrix_files: tuple[str, ...] = field(default=())


def check_image(value: str, runtime: str) -> str:
    if not value or len(value) > 512 or any(c.isspace() or not c.isprintable() for c in value) or value.startswith("-"):
        raise UserError(f"{value!r} is not an image reference", where="--image",
                        fix="a registry reference (host/repo:tag or @sha256:...), or a path the runtime reads")
    if runtime in ("docker", "podman"):
        raise UserError("--image applies to the pyxis, apptainer and charliecloud runtimes", where="--image",
                        fix=f"{runtime} jobs run the project's promoted image (envman run on the node)")
    return value


def default_image(runtime: str, ref: str) -> str:
    """The project's image as each runtime reads it from the node's Docker engine."""
    return {"apptainer": f"docker-daemon:{ref}", "pyxis": f"dockerd://{ref}"}.get(runtime, ref)


def build_spec(req: SubmitRequest, *, envman_argv: Sequence[str] | None = None) -> JobSpec:
    """Locate the project, merge its settings like ``envman run`` does and make the job."""
    from envman.matrix.source import MatrixSource
    from envman.project.settings import CliOverrides, load_user_config, merge_settings
    from envman.project.image import home_dir
    from envman.project.registry import locate
    from envman.project.trust import project_trusted, require_trust
    from envman.state import stable_ref
    from envman.cluster.export import checked_mounts
    from envman.run.plan import sanitize_environment
    from envman.run.prepare import check_project_root

    cfg = load_slurm_config()
    runtime = req.runtime or cfg.runtime
    image = check_image(req.image, runtime) if req.image is not None else None
    project = locate(req.target)
    require_trust(project)
    check_project_root(project)  # mounted at /workspace by every runtime, as by envman run
    matrix = MatrixSource.of(req.matrix_files)
    settings = merge_settings(project, load_user_config(), CliOverrides(command=req.command),
                              trusted=project_trusted(project), stack_is_cpu=lambda s: matrix.resolve(s).is_cpu)
    withheld = settings.withheld_line(project.file)
    if withheld:
        stderr_line(f"envman: warning: {withheld}")
    stack = matrix.resolve(settings.stack)
    res = req.resources
    if res.partition is None and cfg.partition:
        res = replace(res, partition=cfg.partition)
    if res.gpus < 0:
        res = replace(res, gpus=cluster_gpu_count(settings.gpus))
    if res.gpus and stack.is_cpu:
        raise UserError(f"{stack.name} is a CPU stack: it cannot use GPUs", where="--gpus", fix="submit with --gpus 0")
    if settings.network == "none" and runtime in SCRIPT_RUNTIMES:
        # pyxis (enroot) and Charliecloud share the node's network; apptainer's --network needs setup
        # this cannot check: a job that asked for none would silently get the node's network
        raise UserError(f'the project asks for no network (network = "none"), which runtime {runtime} does not give '
                        "a job", where="envman submit", fix="submit with --runtime docker or podman (envman run on "
                        'the node gives none), or drop network = "none"')
    if image is None:
        ref = stable_ref(stack)
        if project.needs_image:
            if runtime not in ("docker", "podman"):
                raise UserError(f"project {project.name} has its own image (requirements/apt), which only the docker "
                                f"runtime builds on the node", where="envman submit",
                                fix="pass --image with the project image pushed to a registry, or use docker/podman")
        image = default_image(runtime, ref)
    home = home_dir(project)
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    return JobSpec(
        project=project.name, root=str(project.root.resolve()), stack=stack.name, image=image, runtime=runtime,
        resources=res, envman=tuple(envman_argv or (sys.executable, "-m", "envman")), command=settings.command,
        matrix_files=tuple(os.path.abspath(f) for f in req.matrix_files),
        # envman run's rule: GPU variables are envman's (the job's allocation decides the devices).
        environment=sanitize_environment(settings.environment, None if not res.gpus else settings.gpus)[0],
        mounts=checked_mounts(settings.mounts), home=str(home.resolve()), state_dir=str(state_dir().absolute()),
        config_dir=str(config_dir().absolute()),
        matrix_env=os.pathsep.join(str(p.absolute()) for p in MatrixSource().user_files),
        env_file=str(slurm_dir().absolute() / "env" / f"{project.name}-{int(time.time() * 1000)}-{os.getpid()}.env"),
        job_env=_job_env(),
    )


def _job_env() -> tuple[tuple[str, str], ...]:
    """The submitter's :data:`JOB_ENV_NAMES` (USER from the password database when unset)."""
    env = {k: os.environ[k] for k in JOB_ENV_NAMES if os.environ.get(k)}
    env.setdefault("USER", _user())
    env.setdefault("PATH", os.defpath)
    return tuple((k, env[k]) for k in JOB_ENV_NAMES if k in env)


# --------------------------------------------------------------------------- node check (non-docker runtimes)


def node_check(target: str, gpus_slurm: bool, matrix: MatrixSource) -> list[str]:
    """The driver and architecture checks of ``envman run`` on this node, for the runtimes that
    do not run through ``envman run``: raises the first error, returns the warnings."""
    from envman.project.settings import CliOverrides, load_user_config, merge_settings
    from envman.project.registry import locate
    from envman.run.plan import ERROR
    from envman.run.prepare import PreflightError, allocated_gpus
    from envman.run.command import detect_host, suggester
    from envman.run.preflight import gpu_problems

    project = locate(target)
    settings = merge_settings(project, load_user_config(), CliOverrides())  # its stack: the GPUs are Slurm's
    stack = matrix.resolve(settings.stack)
    if not gpus_slurm:
        return []
    gpus = allocated_gpus(os.environ)
    problems = gpu_problems(stack, gpus, detect_host(matrix), suggester(matrix))
    errors = [p for p in problems if p.level == ERROR]
    if errors:
        raise PreflightError(errors[0].message, problems)
    return [p.message for p in problems]
