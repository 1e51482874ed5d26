"""Putting a run together: preflight, the base image (stack or project image), and the plan.

:func:`prepare_run` raises on the first preflight error and otherwise returns the plan; the
command-line values of ``run`` (mounts, ports, environment) are parsed and checked here (its words are read
with :mod:`envman.run.grammar`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from envman.engine.kindcache import kind_for_run
from envman.errors import EnvmanError, UserError
from envman.paths import WORKSPACE
from envman.engine.values import GpuRequest, Mount
from envman.project.file import Port, ProjectConfig
from envman.project.settings import RunSettings
from envman.stack.names import Stack
from envman.run.plan import ERROR, KEEP_ALIVE, RunPlan, WARNING, container_workdir, sanitize_environment
from envman.run.preflight import ImageState, Problem, preflight
from envman.project.file import parse_mount
from envman.project.file import parse_port

if TYPE_CHECKING:
    from envman.engine.api import EngineFacts, ImageInfo
    from envman.host import HostFacts, HostGpu


# --------------------------------------------------------------------------- putting a run together


@dataclass
class Prepared:
    plan: RunPlan
    stack: Stack
    problems: list[Problem] = field(default_factory=list)
    built: str | None = None  # the project image built for this run, if any
    base_image_id: str | None = None  # the stack's promoted image the run stands on
    stable_id: str | None = None  # the id of the stack's stable tag when the preflight looked


def image_state(engine: EngineFacts, ref: str) -> ImageState:
    return image_state_of(ref, engine.inspect_image(ref))


def image_state_of(ref: str, info: ImageInfo | None) -> ImageState:
    """An inspected image and its smoke verdict (its labels first, else this user's cache)."""
    from envman.images.store import image_verdict

    if info is None:
        return ImageState(ref, None)
    v = image_verdict(info)
    return ImageState(ref, info.id, v.status if v else None, v.reason if v else "")


def choose_base(engine: EngineFacts, project: ProjectConfig, stack: Stack, *,
                update: bool = False) -> tuple[ImageState, Any, str | None]:
    """The stack image this run stands on: the project's pin or the current stable image (see
    :mod:`envman.images.pins`); with the :class:`envman.images.pins.Choice` that says why, and
    the stable tag's image id (``None`` when there is none)."""
    from envman.images.pins import choose, load_pin, project_key
    from envman.images.store import current_user, image_verdict, rootfs_digest
    from envman.state import stable_ref

    ref = stable_ref(stack)
    stable = engine.inspect_image(ref)
    pin = load_pin(project_key(project.name, str(project.root.resolve())))
    # The pinned image is looked up only when the pin applies (it is the stable image when their ids agree).
    pinned = (stable if stable is not None and stable.id == pin.image_id else engine.inspect_image(pin.image_id)) \
        if pin is not None and pin.stack == stack.name and not update else None
    choice = choose(stack.name, stable, pinned, pin, uid=current_user()[0], verdict=image_verdict,
                    rootfs=rootfs_digest, update=update)
    shown = ref if not choice.pinned or choice.info is None else f"{ref} (pinned: {choice.info.id[:19]})"
    return image_state_of(shown, choice.info), choice, (stable.id if stable is not None else None)


def prepare_run(
    project: ProjectConfig,
    settings: RunSettings,
    stack: Stack,
    *,
    engine: EngineFacts,
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
    """Preflight (raising on the first error) and the plan. ``engine`` is any reader of the engine
    (:class:`envman.engine.api.EngineFacts`: the run path's socket client); ``build_image`` builds the project image when needed;
    ``fetch_image`` (when given) pulls a missing promoted stack image from a registry first.
    The run stands on the image id the project is pinned to (see :mod:`envman.images.pins`)."""
    from envman.project.image import prepare_home

    gpus = settings.gpus
    host = detect_host() if gpus is not None else None
    info = engine.info() if gpus is not None else None
    img, choice, stable_id = choose_base(engine, project, stack, update=update)
    if img.image_id is None and fetch_image is not None:
        fetch_image(stack)
        img, choice, stable_id = choose_base(engine, project, stack, update=update)
    problems = preflight(stack, gpus, host=host, engine_info=info, image=img, suggest=suggest)
    if choice.note:
        problems.append(Problem(WARNING, "image", choice.note))
    errors = [p for p in problems if p.level == ERROR]
    if errors:
        more = f" (and {len(errors) - 1} more: envman doctor)" if len(errors) > 1 else ""
        raise PreflightError(errors[0].message + more, problems)
    assert img.image_id is not None  # preflight refused a missing image
    if choice.repin and remember_pin:
        from envman.images.pins import project_key, save_pin

        save_pin(project_key(project.name, str(project.root.resolve())), stack.name, img.image_id)
    image, built = img.image_id, None
    if project.needs_image:
        from envman.images.provenance import built_image_id
        from envman.project.image import project_image_ref, vouched_image

        ref = project_image_ref(project, stack.name, img.image_id)
        # only an image this user built on this stack image: anyone on the engine can set the tag
        found = None if rebuild else vouched_image(engine, ref, img.image_id)
        if found is None:
            from envman.project.detect.layer import replacing_requirement

            replacing = replacing_requirement(project.requirements, stack)
            if replacing:
                raise UserError(replacing, where=str(project.file), fix="drop or relax that requirement (the stack provides "
                                "its framework and CUDA libraries), or bind the project to a stack that has it")
            built = build_image(project, stack, img.image_id)
            # the ID this user's build recorded, never what the tag names a moment later (a dry
            # run builds nothing and records nothing: it names the tag)
            made = built_image_id(built, base=img.image_id)
            found = engine.inspect_image(made) if made else None
        image = found.id if found else (built or ref)  # pinned by id: a tag moved meanwhile changes nothing
    mech = info.gpu_mechanism() if info is not None else None
    engine_kind, engine_url = _engine_kind(engine)
    home = prepare_home(project)
    withheld = settings.withheld_line(project.file)
    if withheld:
        problems.append(Problem(WARNING, "project", withheld))
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
        cdi_devices=gpus.cdi_devices if gpus is not None and mech == "cdi" else (),
        engine=engine_kind.kind,  # the engine's own word, as info() would give it
        engine_url=engine_url,
        rootless=bool(engine_kind.rootless),
        shm_size=settings.shm_size,
        tty=tty and not detach,
        interactive=interactive and not detach,
        workdir=container_workdir(project.root, cwd if cwd is not None else Path.cwd()),
        env_name=env_name,
        detach=detach,
        network=settings.network,
    )
    if detach and not plan.command:  # a named environment waits for `envman exec` until `envman stop`
        plan = replace(plan, command=KEEP_ALIVE)
    return Prepared(plan, stack, problems, built, img.image_id, stable_id)


def _engine_kind(engine: EngineFacts) -> tuple[Any, str | None]:
    """(EngineKind, the URL the podman CLI must use) of the engine a run goes to (kept per socket:
    :mod:`envman.engine.kindcache`)."""
    kind = kind_for_run(engine)
    return kind, (engine.url if kind.kind == "podman" else None)


class PreflightError(EnvmanError):
    """A run that would fail: the first problem as the message, all of them attached."""

    def __init__(self, message: str, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__(message)


def check_project_root(project: ProjectConfig) -> None:
    """The project root is mounted at /workspace: it may not be a protected path (a project file
    in a home directory itself, or in /, would hand the container the home or the host)."""
    from envman.project.policy import forbidden_reason

    why = forbidden_reason(str(project.root))
    if why:
        raise UserError(f"the project root cannot be mounted at {WORKSPACE}: {why}", where=str(project.file),
                        fix="keep envman.toml in a directory of its own (e.g. ~/code/PROJECT), not in a home or system directory")


def parse_cli_mounts(values: Iterable[str], *, allow_dangerous: bool = False) -> tuple[Mount, ...]:
    return tuple(parse_mount(v, base=None, where="--mount", key="--mount", from_file=False,
                             allow_dangerous=allow_dangerous) for v in _cli_paths(values))


def _cli_paths(values: Iterable[str]) -> list[str]:
    """Relative ``--mount`` sources are relative to the current directory (as for docker)."""
    out = []
    for v in values:
        src, sep, rest = v.partition(":")
        if sep and src and not src.startswith("~"):  # an absolute src stays itself in os.path.join
            src = os.path.join(os.getcwd(), src)
        out.append(src + sep + rest)
    return out


def parse_cli_ports(values: Iterable[str]) -> tuple[Port, ...]:
    return tuple(parse_port(v, where="--port", key="--port") for v in values)


def parse_cli_env(values: Iterable[str], environ: Mapping[str, str] | None = None) -> tuple[tuple[str, str], ...]:
    """``-e NAME=VALUE``, or ``-e NAME`` for the value of ``NAME`` in envman's own environment
    (as docker does; it keeps a secret off every command line, envman's included)."""
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
        try:
            val.encode()  # str.encode's codec is always UTF-8
        except UnicodeEncodeError:
            raise UserError(f"the value of {k} is not UTF-8 text, which the engine's environment file cannot carry",
                            where="--env-var", fix="pass it as UTF-8 text, or in a file in the project") from None
        out[k] = val
    return tuple(sorted(out.items()))


def allocated_gpus(env: Mapping[str, str]) -> GpuRequest:
    """The GPUs Slurm allocated to the job (or step) this process runs in, as host device indexes.

    ``SLURM_STEP_GPUS`` (inside an ``srun`` step), else ``SLURM_JOB_GPUS`` (the batch script),
    else ``CUDA_VISIBLE_DEVICES``. Never "all": a job without allocated GPUs is an error.
    """
    for var in ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES"):
        raw = env.get(var, "").strip()
        if not raw:
            continue
        ids = tuple(x.strip() for x in raw.split(","))
        if not all(re.fullmatch(r"[0-9]{1,4}", x) for x in ids):
            raise UserError(f"{var}={raw!r} is not a list of GPU indexes", where="--gpus slurm",
                            fix="the node's gres.conf must give GPUs device files (File=/dev/nvidia[0-3])")
        return GpuRequest("devices", devices=tuple(dict.fromkeys(ids)))
    raise UserError("Slurm allocated no GPUs to this job (SLURM_JOB_GPUS and CUDA_VISIBLE_DEVICES are unset)",
                    where="--gpus slurm", fix="submit with --gpus N (envman submit --gpus 1), or run with --no-gpu")
