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
    image_id = ""
    if image is None and need_local_image:
        from envman.cluster.k8s import local_run

        image_id, image = local_run(project, stack, on_warning=_say)
    return project, ExportInput(
        project=project.name, root=project.root.resolve(), stack=stack, image=image or "", command=settings.command,
        environment=environment, mounts=settings.mounts, ports=settings.ports, gpus=settings.gpus,
        shm_size=settings.shm_size, network=settings.network, image_id=image_id,
    )


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
    from envman.cluster.k8s import K8sRequest, export_k8s

    request = K8sRequest(gpus, image, runtime_class, registry, uid, gid, push, git, git_image, git_ref, output, force)
    proj, x = _inputs(project, image=image, need_local_image=False)
    result = export_k8s(proj, x, request, say=_say)
    if result.dest == "-":
        emit_text(result.text)
    for line in result.notes:
        _say(line)


def devcontainer_cmd(
    project: Annotated[str, typer.Argument(help="Project: registered name or path.", autocompletion=complete_project)],
    output: Annotated[Optional[str], typer.Option("--output", "-o", help="Folder to write devcontainer.json and Dockerfile to ('-': print devcontainer.json).", show_default=False)] = None,
    force: Force = False,
) -> None:
    """.devcontainer/devcontainer.json (+ Dockerfile) on the project's run image."""
    import json

    from envman.cluster.export import devcontainer
    from envman.cluster.k8s import export_env_file

    import os

    from envman.errors import UserError

    proj, x = _inputs(project)
    folder = Path(output) if output not in (None, "-") else proj.root / ".devcontainer"
    if output is None and (os.path.islink(folder) or not _inside(folder, proj.root)):
        # A .devcontainer that is a symlink (planted in a cloned project) would have envman write
        # into whatever folder it points at.
        raise UserError(f"{folder} is a symbolic link or leads outside the project", where="envman export devcontainer",
                        fix="remove it, or choose the folder with -o")
    doc, dockerfile = devcontainer(x, export_env_file(proj, x.environment))
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
    from envman.cluster.k8s import export_env_file
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
            sources.append((name, [k for k, _ in x.environment], export_env_file(proj, x.environment, shell=True)))
    dest = output or "compose.yaml"
    write_output({Path(dest): to_yaml(compose(services))}, dest, force=force)
    if dest != "-":
        _say(f"wrote {dest}: services {', '.join(services)}")
    for name, keys, path in sources:
        import shlex

        from envman.cluster.export import COMPOSE_ENV_PREFIX

        _say(f"service {name} reads {', '.join(keys)} from the shell compose runs in (as {COMPOSE_ENV_PREFIX}NAME): "
             f"set -a; . {shlex.quote(path or '')}; set +a (a file only you can read)")

