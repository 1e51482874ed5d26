"""``envman export k8s|devcontainer|compose``: a project's run as files other tools read."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Mapping, Optional

import typer

from envman.cli._out import emit_line, emit_text
from envman.cli.complete import complete_project

Output = Annotated[Optional[str], typer.Option("--output", "-o", help="Where to write ('-': stdout).", show_default=False)]
Force = Annotated[bool, typer.Option("--force", help="Overwrite existing files.")]


def _inputs(target: str, *, image: str | None = None, need_local_image: bool = True):
    """The project, its effective settings and stack, as an ExportInput (image: given, or the
    local run image when ``need_local_image``)."""
    from envman.cluster.export import ExportInput
    from envman.project.settings import CliOverrides, load_user_config, merge_settings
    from envman.project.registry import locate
    from envman.project.trust import project_trusted, require_trust
    from envman.cli import matrix_source

    from envman.run.plan import sanitize_environment
    from envman.run.prepare import check_project_root

    project = locate(target)
    # An export carries the file's mounts, ports, variables and command to another tool: the
    # same trust as a run, and the same project-root rule (the root is mounted at /workspace).
    require_trust(project)
    check_project_root(project)
    matrix = matrix_source()
    settings = merge_settings(project, load_user_config(), CliOverrides(), trusted=project_trusted(project),
                              stack_is_cpu=lambda s: matrix.resolve(s).is_cpu)
    withheld = settings.withheld_line(project.file)
    if withheld:
        _say(f"warning: {withheld}")
    stack = matrix.resolve(settings.stack)
    environment, dropped = sanitize_environment(settings.environment, settings.gpus)
    if dropped:
        _say(f"warning: not exported: {', '.join(dropped)} (envman sets the GPU variables from the project's gpus)")
    if image is None and need_local_image:
        image = _local_run_image(project, stack)
    return project, ExportInput(
        project=project.name, root=project.root.resolve(), stack=stack, image=image or "", command=settings.command,
        environment=environment, mounts=settings.mounts, ports=settings.ports, gpus=settings.gpus,
        shm_size=settings.shm_size, network=settings.network,
    )


def _local_run_image(project, stack) -> str:
    """What ``envman run`` runs: the promoted stack image, or the project image (built if missing)."""
    from envman.errors import UserError
    from envman.state import stable_ref

    if not project.needs_image:
        return stable_ref(stack)
    from envman.engine.docker import Engine
    from envman.project.image import build_project_image

    with Engine.connect() as engine:
        base = engine.inspect_image(stable_ref(stack))
        if base is None:
            raise UserError(f"no promoted image {stable_ref(stack)} for the project image of {project.name}",
                            where=str(project.file), fix=f"envman build {stack.name} (or envman pull {stack.name})")
        return build_project_image(engine, project, stack.name, base.id, on_warning=_say)


def _env_file(project, environment, *, shell: bool = False) -> str | None:
    """Write the project's variables to ``<state dir>/exports/<project identity>.env`` (``.sh``
    with ``shell``: export lines), mode 0600 in a 0700 folder, for the exported file (or the
    user) to name; ``None`` when it sets none."""
    from envman.cluster.export import env_file_text, shell_env_file_text
    from envman.paths import state_dir
    from envman.safefile import private_dir
    from envman.state import atomic_write

    if not environment:
        return None
    folder = private_dir(state_dir() / "exports")
    path = folder / f"{project.identity}.{'sh' if shell else 'env'}"
    atomic_write(path, (shell_env_file_text if shell else env_file_text)(environment), mode=0o600)
    return str(path.absolute())


def _shown(path: Path) -> str:
    """``path`` relative to the current directory when it is below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _inside(path: Path, root: Path) -> bool:
    import os

    from envman.safefile import is_within

    return is_within(os.path.realpath(path), os.path.realpath(root))


def write_output(files: Mapping[Path, str], dest: str, *, force: bool) -> list[Path]:
    """``files`` written (:func:`envman.cluster.export.write_files`), or with ``dest`` ``-``
    printed to stdout instead; the paths written."""
    from envman.cluster.export import write_files

    if dest == "-":
        for text in files.values():
            emit_text(text)
        return []
    return write_files(files, force=force)


def _say(line: str) -> None:
    from envman.errors import printable

    emit_line(printable(line), err=True)  # paths and names as they are, control characters escaped


def k8s(
    project: Annotated[str, typer.Argument(help="Project: registered name or path.", autocompletion=complete_project)],
    gpus: Annotated[Optional[int], typer.Option("--gpus", min=0, help="GPUs per pod (default: the project's; 'all' counts as 1).", show_default=False)] = None,
    image: Annotated[Optional[str], typer.Option("--image", help="REPO@sha256:... (default: what envman push printed for the stack).", show_default=False)] = None,
    runtime_class: Annotated[Optional[str], typer.Option("--runtime-class", help="runtimeClassName, e.g. nvidia.", show_default=False)] = None,
    registry: Annotated[Optional[str], typer.Option("--registry", help="Take the digest pushed to this registry.", show_default=False)] = None,
    uid: Annotated[int, typer.Option("--uid", help="Non-root uid the pod runs as.")] = 1000,
    gid: Annotated[int, typer.Option("--gid", help="Its gid (and fsGroup).")] = 1000,
    push: Annotated[bool, typer.Option("--push", help="Push the image the project runs on (the stack's, or the project image) to --registry (or \\[registry] default) first, and use its digest.")] = False,
    git: Annotated[Optional[str], typer.Option("--git", help="https URL of the project's repository: an init container clones it into /workspace (default: /workspace is empty).", show_default=False)] = None,
    git_image: Annotated[Optional[str], typer.Option("--git-image", help="REPO@sha256:... of the clone init container (default: alpine/git:v2.30.2, a tag).", show_default=False)] = None,
    git_ref: Annotated[Optional[str], typer.Option("--git-ref", help="Branch, tag or commit to check out (default: the project folder's current commit).", show_default=False)] = None,
    output: Output = None,
    force: Force = False,
) -> None:
    """A batch/v1 Job: the pushed image by digest, GPU limits, node affinity from the matrix."""
    from envman.errors import UserError
    from envman.project.file import cluster_gpu_count
    from envman.cluster.export import check_git, k8s_job, k8s_name, to_yaml
    from envman.images.remote import digest_ref, load_registry_settings, parse_registry

    proj, x = _inputs(project, image=image, need_local_image=False)
    workspace = None
    if git is not None:
        workspace = check_git(git, git_ref or _head_commit(proj.root))
    elif git_ref is not None or git_image is not None:
        raise UserError(f"{'--git-ref' if git_ref is not None else '--git-image'} needs --git URL",
                        where="--git-ref" if git_ref is not None else "--git-image", fix="add --git https://HOST/PATH")
    if push:
        if image is not None:
            raise UserError("--push and --image both name the image", where="--push",
                            fix="drop --image to push what the project runs on, or drop --push")
        from dataclasses import replace

        x = replace(x, image=_push_run_image(proj, x.stack, registry))
    elif image is None:
        if proj.needs_image:
            raise UserError(f"project {proj.name} runs on its own project image, which no registry has yet",
                            where="envman export k8s",
                            fix="add --push (with --registry HOST[/PREFIX]) to push it, or pass --image REPO@sha256:...")
        reg = parse_registry(registry, where="--registry") if registry else load_registry_settings().default
        ref = digest_ref(x.stack, registry=reg)
        if ref is None:
            try:
                from envman.engine.docker import Engine

                with Engine.connect() as engine:
                    ref = digest_ref(x.stack, registry=reg, engine=engine)
            except UserError:
                raise
            except Exception:  # no engine here: only the push record could have told
                ref = None
        if ref is None:
            raise UserError(f"no pushed image of {x.stack.name}" + (f" in {reg}" if reg else ""), where="envman export k8s",
                            fix="add --push (with --registry HOST[/PREFIX]) to push it now, or pass --image REPO@sha256:...")
        from dataclasses import replace

        x = replace(x, image=ref)
    count = cluster_gpu_count(x.gpus) if gpus is None else gpus
    if gpus is None and x.stack.cuda is None:
        count = 0
    job, secret_keys = k8s_job(x, gpus=count, runtime_class=runtime_class, uid=uid, gid=gid, git=workspace,
                               git_image=git_image)
    dest = output or f"{k8s_name(x.project)}.job.yaml"
    # The Secret's env file first: a Job written without it would name a Secret nothing can create.
    env_file = _env_file(proj, [(k, v) for k, v in x.environment if k in secret_keys]) if secret_keys else None
    write_output({Path(dest): to_yaml(job)}, dest, force=force)
    if dest != "-":
        _say(f"wrote {dest}: Job {job['metadata']['name']} on {x.image}, {count} GPU(s)")
    if workspace is None:
        _say("its /workspace starts empty (an emptyDir): clone the code there with --git URL [--git-ref REF], "
             "or pass --image with an image that holds the code")
    else:
        _say(f"an init container clones {workspace[0]} at {workspace[1]} into /workspace")
        if git_image is None:
            from envman.cluster.export import GIT_IMAGE

            _say(f"warning: the clone image {GIT_IMAGE} is a tag its publisher can move: pin one with "
                 "--git-image REPO@sha256:...")
    if secret_keys:
        import shlex

        _say(f"the Job reads {', '.join(secret_keys)} from the Secret {job['metadata']['name']}-env: create it with "
             f"kubectl create secret generic {job['metadata']['name']}-env --from-env-file={shlex.quote(env_file or '')}")


def _head_commit(root: Path) -> str:
    """The commit the project folder has checked out, for ``--git`` without ``--git-ref``."""
    import subprocess

    from envman.errors import UserError

    try:
        res = subprocess.run(["git", "-C", str(root), "rev-parse", "--verify", "HEAD^{commit}"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        res = None
    if res is None or res.returncode != 0:
        raise UserError(f"{root} is not a git checkout with a commit", where="--git",
                        fix="pass --git-ref BRANCH|TAG|COMMIT")
    return res.stdout.strip()


def _push_run_image(proj, stack, registry: str | None) -> str:
    """Push what ``envman run`` runs the project on (the promoted stack image with its verdict,
    or the project image) and return it as REPO@sha256:..."""
    from envman.cluster.export import k8s_name
    from envman.engine.docker import Engine
    from envman.errors import UserError
    from envman.images.remote import check_transport, load_registry_settings, parse_registry, push_stack

    settings = load_registry_settings()
    reg = parse_registry(registry, where="--registry") if registry else settings.default
    if reg is None:
        raise UserError("--push: no registry to push to", where="envman export k8s",
                        fix="pass --registry HOST[:PORT][/PREFIX], or set default under [registry] in config.toml")
    if not proj.needs_image:
        with Engine.connect() as engine:
            pushed = push_stack(engine, stack, reg, allow_http=settings.allow_http)
        _say(f"pushed {pushed.ref}")
        return pushed.ref
    local = _local_run_image(proj, stack)
    repo = f"{reg}/envman/project-{k8s_name(proj.name)}"
    with Engine.connect() as engine:
        check_transport(reg, *engine.insecure_registries(), allow_http=settings.allow_http)
        tag = f"{repo}:{local.rsplit(':', 1)[1]}"
        engine.tag(local, tag)
        ref = f"{repo}@{engine.push(tag)}"
    _say(f"pushed {ref}")
    return ref


def devcontainer_cmd(
    project: Annotated[str, typer.Argument(help="Project: registered name or path.", autocompletion=complete_project)],
    output: Annotated[Optional[str], typer.Option("--output", "-o", help="Folder to write devcontainer.json and Dockerfile to ('-': print devcontainer.json).", show_default=False)] = None,
    force: Force = False,
) -> None:
    """.devcontainer/devcontainer.json (+ Dockerfile) on the project's run image."""
    import json

    from envman.cluster.export import devcontainer

    import os

    from envman.errors import UserError

    proj, x = _inputs(project)
    folder = Path(output) if output not in (None, "-") else proj.root / ".devcontainer"
    if output is None and (os.path.islink(folder) or not _inside(folder, proj.root)):
        # A .devcontainer that is a symlink (planted in a cloned project) would have envman write
        # into whatever folder it points at.
        raise UserError(f"{folder} is a symbolic link or leads outside the project", where="envman export devcontainer",
                        fix="remove it, or choose the folder with -o")
    doc, dockerfile = devcontainer(x, _env_file(proj, x.environment))
    text = json.dumps(doc, indent=2) + "\n"
    if output == "-":
        write_output({Path("devcontainer.json"): text}, "-", force=force)
        return
    written = write_output({folder / "devcontainer.json": text, folder / "Dockerfile": dockerfile}, str(folder), force=force)
    _say(f"wrote {', '.join(_shown(p) for p in written)} (image {x.image})")


def compose_cmd(
    projects: Annotated[list[str], typer.Argument(help="Projects: registered names or paths (one service each).", autocompletion=complete_project)],
    output: Output = None,
    force: Force = False,
) -> None:
    """compose.yaml: one service per project, GPUs as device reservations."""
    import os

    from envman.errors import UserError
    from envman.cluster.export import compose, compose_service, k8s_name, to_yaml
    from envman.project.image import prepare_home

    services = {}
    sources: list[tuple[str, list[str], str | None]] = []
    for target in projects:
        proj, x = _inputs(target)
        name = k8s_name(x.project, what="compose service name")
        if name in services:
            raise UserError(f"project {x.project} is given twice (or two names make service {name})", where="envman export compose")
        home = prepare_home(proj)  # the HOME envman run mounts for this project
        services[name] = compose_service(x, uid=os.getuid(), gid=os.getgid(), home=str(home.resolve()))
        if x.environment:
            sources.append((name, [k for k, _ in x.environment], _env_file(proj, x.environment, shell=True)))
    dest = output or "compose.yaml"
    write_output({Path(dest): to_yaml(compose(services))}, dest, force=force)
    if dest != "-":
        _say(f"wrote {dest}: services {', '.join(services)}")
    for name, keys, path in sources:
        import shlex

        from envman.cluster.export import COMPOSE_ENV_PREFIX

        _say(f"service {name} reads {', '.join(keys)} from the shell compose runs in (as {COMPOSE_ENV_PREFIX}NAME): "
             f"set -a; . {shlex.quote(path or '')}; set +a (a file only you can read)")

