"""``envman run``: preflight, then hand the terminal to ``docker run``.

The run itself is the ``docker`` CLI, ``exec``-ed with an argv built by the pure function
:func:`envman.run.plan.docker_argv`: the CLI already does what an interactive run needs exactly
like ``docker run`` (TTY and raw mode, Ctrl-C forwarding, exit codes, removal of the container),
and envman adds no process in between, so a run costs what ``docker run`` costs plus envman's
own start-up.

The hot path imports no Docker SDK: the few facts a preflight needs come from
:class:`envman.engine.facts.DockerFacts`. Only a project image build goes through
:mod:`envman.engine.docker`.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence
import shlex

from envman.errors import UserError, shell_join, stderr_line
from envman.project.file import ProjectConfig
from envman.engine.handoff import ENV_FILE_SLOT, exec_docker, terminal_flags
from envman.run.cidfile import with_cidfile
from envman.run.fastpath import cache_key, record_run
from envman.stack.names import Stack
from envman.engine.facts import DockerFacts, docker_facts
from envman.run.plan import RunPlan, WARNING, container_name, docker_argv, sanitize_environment
from envman.run.network import ensure_network
from envman.run.preflight import suggest_stack
from envman.run import grammar
from envman.run.prepare import (Prepared, allocated_gpus, check_project_root, parse_cli_env, parse_cli_mounts, parse_cli_ports,
                                prepare_run)
from envman.errors import EnvmanError
from envman.paths import matrices_dir
from envman.project.file import PROJECT_FILE
from envman.project.file import check_network, check_shm, check_stack_name, parse_gpus
from envman.project.file import load_project
from envman.project.settings import CliOverrides, load_user_config, merge_settings
from envman.project.settings import load_user_config, user_for_project
from envman.project.settings import user_config_path

if TYPE_CHECKING:
    from envman.engine.values import GpuRequest
    from envman.host import HostFacts, HostGpu
    from envman.matrix.source import MatrixSource
    from envman.render.options import RenderOptions


# --------------------------------------------------------------------------- the `envman run` command


def detect_host(matrix: MatrixSource) -> HostFacts:
    from envman.host import detect, matrix_gpu_table

    # The matrix (its GPU table) is loaded only for a GPU whose compute capability the driver
    # could not report (nvidia-smi before driver 510).
    return detect(gpu_table=lambda name: matrix_gpu_table(matrix.matrix)(name))


def suggester(matrix: MatrixSource) -> Callable[[Stack, HostFacts, Sequence[HostGpu]], str | None]:
    """``suggest`` for :func:`prepare_run`: a stack of ``matrix`` that would run on this host."""
    def suggest(s: Stack, host: HostFacts, gpus: Sequence[HostGpu]) -> str | None:
        return suggest_stack(matrix.matrix, s, host, gpus)

    return suggest


_CONTAINER_NAME_RE = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"


def check_container_name(name: str) -> str:
    """A container name Docker accepts (its own rule), else a one-line error."""
    if not re.fullmatch(_CONTAINER_NAME_RE, name):
        raise UserError(f"{name!r} is not a container name", where="--name",
                        fix="use letters, digits and _.- (starting with a letter or digit, at most 128)")
    return name


def _locate_or_offer_command(project: str | None, command: Sequence[str]):
    """The project ``envman run`` names; when the word is no project (``envman run pwd``), the
    error offers it as the command: ``envman run -- pwd``."""
    from envman.project.registry import locate

    try:
        return locate(project)
    except UserError as exc:
        if project is None or project.startswith("-") or not exc.what.startswith("no project named"):
            raise
        try:
            here = locate(None)
        except EnvmanError:
            here = None
        as_command = shlex.join(["envman", "run", "--", project, *command])
        offer = (f"to run {project!r} in {here.name} (the project here): {as_command}" if here is not None
                 else f"a command goes after the project, or after -- inside a project folder: {as_command}")
        # a registered project of a close name is the likelier meaning: it comes first
        close, sep, rest = (exc.fix or "").partition("? ")
        if close.startswith("did you mean ") and sep:
            raise UserError(exc.what, where=exc.where, fix=f"{close}? or, {offer}; {rest}") from None
        raise UserError(exc.what, where=exc.where, fix=f"{offer}; {exc.fix}") from None


def run_cli(args: Sequence[str], command: Sequence[str], matrix: MatrixSource, *,
            words: grammar.Grammar = grammar.RUN) -> None:
    """``envman run``: ``args`` are the words before ``--``, ``command`` the words after it.
    Execs ``docker run`` (does not return) unless ``--dry-run``. ``words``: the grammar the
    words are read with (``envman shell`` has run's options, under its own name)."""
    from envman.project.trust import project_trusted, require_trust

    args, bare = grammar.split(words, args)
    if bare and command:
        raise UserError(f"two commands given: {shlex.join(bare)!r} and {shlex.join(command)!r} after --",
                        where="envman run", fix="give the command once, after the project name or after --")
    command = list(command) or bare
    a = grammar.parse(words, args)
    if a.no_gpu and a.gpus is not None:
        raise UserError("--gpus and --no-gpu contradict each other", where="envman run", fix="give one of them")
    ca_bundle = checked_ca_bundle(a.ca_bundle)
    if a.stack is not None:
        check_stack_name(a.stack, where="--stack", key="--stack")
    if a.name is not None:
        check_container_name(a.name)
    proj = _locate_or_offer_command(a.project, command)
    require_trust(proj)
    check_project_root(proj)
    asked: GpuRequest | None
    if a.gpus is not None and a.gpus.strip().lower() == "slurm":
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
        network=check_network(a.network, where="envman run", key="--network") if a.network is not None else None,
    )
    settings = merge_settings(proj, load_user_config(), cli, trusted=project_trusted(proj),
                              stack_is_cpu=lambda s: matrix.resolve(s).is_cpu)
    for m in settings.mounts:
        if not os.path.exists(m.source):
            raise UserError(f"mount source {m.source} does not exist", where=f"mount {m.target}",
                            fix="create it, or fix the path (docker would refuse the run)")
    stack = matrix.resolve(settings.stack)

    build_image = project_image_builder(a.rebuild, ca_bundle=ca_bundle) if not a.dry_run else image_not_built
    tty, interactive = terminal_flags()
    engine = docker_facts()
    prepared = prepare_run(
        proj, settings, stack, engine=engine, detect_host=lambda: detect_host(matrix), suggest=suggester(matrix),
        build_image=build_image, fetch_image=None if a.dry_run else pull_on_run_fetcher(), rebuild=a.rebuild,
        update=a.update, remember_pin=not a.dry_run, tty=tty and not a.dry_run, interactive=interactive and not a.dry_run,
        env_name=env_name, detach=a.detach,
    )
    if cname is not None:
        prepared.plan = replace(prepared.plan, container_name=cname)
    for p in prepared.problems:
        if p.level == WARNING:
            stderr_line(f"envman: warning: {p.message}")
    argv = docker_argv(prepared.plan, env_file=ENV_FILE_SLOT if prepared.plan.environment else None)
    if a.dry_run:
        argv = docker_argv(prepared.plan)
        if a.as_json:
            out = {"plan": prepared.plan.to_json(), "argv": argv, "problems": [p.to_json() for p in prepared.problems]}
            sys.stdout.write(json.dumps(out, indent=2) + "\n")
        else:
            sys.stdout.write(shell_join(argv) + "\n")
        return
    if cname is not None:
        check_name_free(prepared.plan)
    network = ensure_network(engine, prepared.plan)
    if prepared.plan.gpus is None and not a.rebuild and cname is None and engine.socket is not None:
        remember_run(prepared, proj, key=cache_key(list(matrix.extra), args, command),
                     found_from=None if a.project is not None else Path.cwd(), matrix=matrix, network=network)
    exec_docker(with_cidfile(argv), prepared.plan.environment)  # its ID recorded: envman exec enters only it


def print_step(ev: Any) -> None:
    """A build's steps on stderr, one short line each (what a run shows while it builds); the
    classic builder's steps for the image's labels (one LABEL step per label given to the build)
    say nothing a user acts on and are left out."""
    if ev.kind == "step" and not _LABEL_STEP.match(ev.text):
        stderr_line(f"  {ev.text[:120]}")


#: ``Step 7/22 : LABEL envman.managed=true`` (the classic builder), ``Step 3/5 : LABEL ...`` (BuildKit's, as parsed).
_LABEL_STEP = re.compile(r"Step \S+ : LABEL\b", re.IGNORECASE)


def checked_ca_bundle(value: str | None) -> Path | None:
    """``--ca-bundle FILE`` of run, shell and notebook, checked at once (a PEM file); ``None``
    when not given."""
    if value is None:
        return None
    from envman.config import Invalid, check_ca_bundle

    try:
        return check_ca_bundle(value)
    except Invalid as exc:
        raise UserError(exc.what, where="--ca-bundle", fix=exc.fix) from None


def build_network(ca_bundle: Path | None = None) -> RenderOptions:
    """The network options of a build a run makes (project image, notebook layer): ``[network]``
    of config.toml, with ``ca_bundle`` (``--ca-bundle``) over its own."""
    from envman.render.options import RenderOptions

    return RenderOptions.from_config({"ca_bundle": ca_bundle})


def project_image_builder(rebuild: bool = False, *, ca_bundle: Path | None = None) -> Callable[[ProjectConfig, Stack, str], str]:
    """``build_image`` for :func:`prepare_run`: builds the project image through the configured
    network options (``ca_bundle`` over config.toml's), its steps on stderr."""
    def build_image(p: ProjectConfig, s: Stack, base_id: str) -> str:
        from envman.engine.docker import Engine
        from envman.project.image import build_project_image

        network = build_network(ca_bundle)
        stderr_line(f"envman: building the project image of {p.name} on {s.name} (apt packages, then requirements)")
        with Engine.connect() as engine:
            return build_project_image(engine, p, s.name, base_id, on_event=print_step, nocache=rebuild,
                                       network=network, on_warning=stderr_line)

    return build_image


def image_not_built(p: ProjectConfig, s: Stack, base_id: str) -> str:
    """``build_image`` for a dry run: nothing is built (the project's apt packages and
    requirements run nothing on a dry run); the line says which image a run would build, and the
    printed command names it."""
    from envman.project.image import project_image_ref

    ref = project_image_ref(p, s.name, base_id)
    stderr_line(f"envman: a run would first build the project image {ref} of {p.name} on {s.name} "
                "(apt packages, then requirements); --dry-run builds nothing")
    return ref


def pull_on_run_fetcher() -> Callable[[Stack], None] | None:
    """With ``[registry] pull_on_run = true`` and a default registry: a function that pulls a
    stack's missing promoted image from it (checked as ``envman pull`` checks it)."""
    from envman.config import read_config

    cfg = read_config()
    if not cfg.table("registry"):  # nothing set: the registry code stays unloaded
        return None
    from envman.images.remote import load_registry_settings

    settings = load_registry_settings(cfg=cfg)  # the file read once
    if not settings.pull_on_run or settings.default is None:
        return None
    registry = settings.default

    def fetch(stack: Stack) -> None:
        from envman.engine.docker import Engine
        from envman.images.remote import pull_stack

        stderr_line(f"envman: no promoted image of {stack.name} here: pulling it from {registry}")
        with Engine.connect() as engine:
            pulled = pull_stack(engine, stack, registry, allow_http=settings.allow_http,
                                trust_registry=settings.trust_registry)
        if pulled.note:
            stderr_line(f"envman: warning: {pulled.note}")
        stderr_line(f"envman: pulled {pulled.ref} (smoke: {pulled.smoke}; digest: {pulled.vouched_by})")

    return fetch


def check_name_free(plan: RunPlan) -> None:
    """Refuse a named run whose name this user already has running (one line, not the engine's)."""
    from envman.run.envs import find_container

    if plan.container_name is not None and find_container(plan.container_name) is not None:
        raise UserError(f"environment {plan.env_name!r} already exists", where="envman run --name",
                        fix=f"use it: envman exec {plan.env_name} -- CMD; or stop it: envman stop {plan.env_name}")


def run_dependencies(project: ProjectConfig, *, found_from: Path | None, report: Path | None,
                     matrix: MatrixSource) -> list[str]:
    """Every file a run's plan was made from (see :mod:`envman.run.fastpath`): the project file, the
    ``envman.toml`` files that do not exist between ``found_from`` and the project (a new one
    there would be found first), the registry, the user config, the requirements file, the matrix
    files and their folder (a new file there), and the smoke report."""
    from envman.images.pins import pins_file
    from envman.project.registry import registry_path
    from envman.project.trust import trust_path

    deps = [project.file, registry_path(), user_config_path(), pins_file(), trust_path(), matrices_dir(),
            *matrix.files]
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


def remember_run(prepared: Prepared, project: ProjectConfig, *, key: str,
                 found_from: Path | None, matrix: MatrixSource, network: str | None = None) -> None:
    """Record a CPU run that passed its preflight, for :func:`envman.run.fastpath.try_cached_run`
    (``network``: the id of the network it joins; a network removed or made anew is a miss)."""
    from envman.state import report_path, stable_ref

    base_id, stable_id = prepared.base_image_id, prepared.stable_id
    if base_id is None or stable_id is None:
        return
    # The stable tag as the preflight saw it (a move since is a miss: the full path says a newer
    # one exists), the pinned base and the project image by id (gone is a miss).
    images = [(stable_ref(prepared.stack), stable_id), (base_id, base_id)]
    if prepared.plan.image != base_id:
        images.append((prepared.plan.image, prepared.plan.image))
    plan = replace(prepared.plan, tty=False, interactive=False)
    record_run(key, deps=run_dependencies(project, found_from=found_from, report=report_path(base_id),
                                          matrix=matrix),
               images=images, argv=docker_argv(plan, env_file=ENV_FILE_SLOT if plan.environment else None),
               home=plan.home, sources=[plan.root, plan.home, *(m.source for m in plan.mounts)], environment=plan.environment, project_file=str(project.file),
               warnings=[p.message for p in prepared.problems if p.level == WARNING],
               networks=[(plan.network_name, network)] if network is not None else [])


def cached_run_environment(project_file: str, args: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """The environment values of a cached run, worked out again (the cache keeps only their
    names and hashes): the user config (for a trusted file only), the project file, then ``-e``
    options, as on the full path, filtered the same way (cached runs never request GPUs)."""
    from envman.project.trust import project_trusted

    a = grammar.parse(grammar.RUN, args)
    project = load_project(project_file)
    env: dict[str, str] = {}
    for src in (user_for_project(load_user_config(), project_trusted(project))[0], project.environment,
                parse_cli_env(a.env_var)):
        env.update(src)
    return sanitize_environment(sorted(env.items()), None)[0]


def shell_cli(args: Sequence[str], command: Sequence[str], matrix: MatrixSource) -> None:
    """``envman shell [OPTIONS] [PROJECT]``: an interactive shell (bash, else sh) in the project's stack,
    with every option of ``envman run``."""
    from envman.run.envs import SHELL_COMMAND

    _, bare = grammar.split(grammar.SHELL, args)
    if bare or command:
        extra = " ".join([*bare, *command])
        raise UserError(f"envman shell takes no command (got {extra!r})", where="envman shell",
                        fix="run a command with: envman run PROJECT CMD ARGS...")
    run_cli(args, SHELL_COMMAND, matrix, words=grammar.SHELL)
