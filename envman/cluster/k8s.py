"""``envman export k8s``: a project's run as a Kubernetes Job. The image the Job runs, by digest
(given, pushed now, or the one ``envman push`` recorded), the clone of the project's repository
into ``/workspace``, and the Secret's env file; the Job itself is
:func:`envman.cluster.export.k8s_job`. The command line parses its flags into a
:class:`K8sRequest` and prints the :class:`K8sExport` returned."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from envman.errors import EngineError, UserError

if TYPE_CHECKING:
    from envman.cluster.export import ExportInput
    from envman.project.file import ProjectConfig
    from envman.stack.names import Stack


@dataclass(frozen=True)
class K8sRequest:
    """``envman export k8s``'s options (``None``: not given)."""

    gpus: int | None = None
    image: str | None = None
    runtime_class: str | None = None
    registry: str | None = None
    uid: int = 1000
    gid: int = 1000
    push: bool = False
    git: str | None = None
    git_image: str | None = None
    git_ref: str | None = None
    output: str | None = None
    force: bool = False


@dataclass
class K8sExport:
    """What was written, and the lines that tell the user what to do next."""

    dest: str
    job: dict[str, Any]
    text: str  # the Job as YAML
    notes: list[str] = field(default_factory=list)


def local_run(project: ProjectConfig, stack: Stack, on_warning: Callable[[str], None] | None = None) -> tuple[str, str]:
    """What ``envman run`` runs, as (its image ID, the tag it is known by): the stack image the
    project is pinned to or the promoted one (:func:`envman.run.prepare.choose_base`, with its
    verdict and pin rules), or the project image built on it (built if missing or not this user's;
    ``on_warning`` hears what the build warns of). The ID is what an export that runs on this host
    should name: a tag is anyone's on a shared engine to move."""
    from envman.engine.docker import Engine
    from envman.images.provenance import built_image_id
    from envman.project.image import build_project_image
    from envman.run.prepare import choose_base
    from envman.state import stable_ref

    def by_tag(why: str) -> tuple[str, str]:
        """A project that runs on the stack image, exported by its tag when there is no image to
        check yet: the file is still of use once it is built or pulled, and says nothing false."""
        if on_warning is not None:
            on_warning(f"warning: {why}: the export names the tag {stable_ref(stack)}, which anyone on the engine can move")
        return "", stable_ref(stack)

    try:
        connected = Engine.connect()
    except EngineError:
        if project.needs_image:
            raise
        return by_tag("no engine to check the image on")
    with connected as engine:
        img, _, _ = choose_base(engine, project, stack)
        if img.image_id is None:
            if not project.needs_image:
                return by_tag(f"no promoted image {stable_ref(stack)} yet")
            raise UserError(f"no promoted image {stable_ref(stack)} for the project image of {project.name}",
                            where=str(project.file), fix=f"envman build {stack.name} (or envman pull {stack.name})")
        if not project.needs_image:
            return img.image_id, stable_ref(stack)
        ref = build_project_image(engine, project, stack.name, img.image_id, on_warning=on_warning)
        made = built_image_id(ref, base=img.image_id)
        if made is None:  # pragma: no cover - build_project_image records what it builds or reuses
            raise UserError(f"the project image {ref} of {project.name} is not one this user built",
                            where=str(project.file), fix="envman run --rebuild once, then export again")
        return made, ref


def local_run_image(project: ProjectConfig, stack: Stack, on_warning: Callable[[str], None] | None = None) -> str:
    """The image ID ``envman run`` runs the project on (:func:`local_run`)."""
    return local_run(project, stack, on_warning)[0]


def export_env_file(project: ProjectConfig, environment: Sequence[tuple[str, str]], *, shell: bool = False) -> str | None:
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


def head_commit(root: Path) -> str:
    """The commit the project folder has checked out, for ``--git`` without ``--git-ref``."""
    import subprocess

    try:
        res = subprocess.run(["git", "-C", str(root), "rev-parse", "--verify", "HEAD^{commit}"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        res = None
    if res is None or res.returncode != 0:
        raise UserError(f"{root} is not a git checkout with a commit", where="--git",
                        fix="pass --git-ref BRANCH|TAG|COMMIT")
    return res.stdout.strip()


def push_run_image(proj: ProjectConfig, stack: Stack, registry: str | None,
                   on_warning: Callable[[str], None] | None = None) -> str:
    """Push what ``envman run`` runs the project on (the promoted stack image with its verdict,
    or the project image) and return it as REPO@sha256:..."""
    from envman.cluster.export import k8s_name
    from envman.engine.docker import Engine
    from envman.images.remote import check_transport, load_registry_settings, parse_registry, push_stack

    settings = load_registry_settings()
    reg = parse_registry(registry, where="--registry") if registry else settings.default
    if reg is None:
        raise UserError("--push: no registry to push to", where="envman export k8s",
                        fix="pass --registry HOST[:PORT][/PREFIX], or set default under [registry] in config.toml")
    if not proj.needs_image:
        with Engine.connect() as engine:
            pushed = push_stack(engine, stack, reg, allow_http=settings.allow_http)
        return pushed.ref
    local_id, local = local_run(proj, stack, on_warning)
    repo = f"{reg}/envman/project-{k8s_name(proj.name)}"
    with Engine.connect() as engine:
        check_transport(reg, *engine.insecure_registries(), allow_http=settings.allow_http)
        tag = f"{repo}:{local.rsplit(':', 1)[1]}"
        engine.tag(local_id, tag)  # by ID: the project's tag may have been moved meanwhile
        ref = f"{repo}@{engine.push(tag)}"
    return ref


def clone_source(proj: ProjectConfig, request: K8sRequest) -> tuple[str, str] | None:
    """(URL, ref) the init container clones into ``/workspace``, or ``None`` without ``--git``."""
    from envman.cluster.export import check_git

    if request.git is not None:
        return check_git(request.git, request.git_ref or head_commit(proj.root))
    if request.git_ref is not None or request.git_image is not None:
        raise UserError(f"{'--git-ref' if request.git_ref is not None else '--git-image'} needs --git URL",
                        where="--git-ref" if request.git_ref is not None else "--git-image", fix="add --git https://HOST/PATH")
    return None


def pushed_image(proj: ProjectConfig, stack: Stack, registry: str | None) -> str:
    """The digest ``envman push`` recorded for ``stack`` (or the registry answers for it)."""
    from envman.images.remote import digest_ref, load_registry_settings, parse_registry

    if proj.needs_image:
        raise UserError(f"project {proj.name} runs on its own project image, which no registry has yet",
                        where="envman export k8s",
                        fix="add --push (with --registry HOST[/PREFIX]) to push it, or pass --image REPO@sha256:...")
    reg = parse_registry(registry, where="--registry") if registry else load_registry_settings().default
    ref = digest_ref(stack, registry=reg)
    if ref is None:
        try:
            from envman.engine.docker import Engine

            with Engine.connect() as engine:
                ref = digest_ref(stack, registry=reg, engine=engine)
        except UserError:
            raise
        except Exception:  # no engine here: only the push record could have told
            ref = None
    if ref is None:
        raise UserError(f"no pushed image of {stack.name}" + (f" in {reg}" if reg else ""), where="envman export k8s",
                        fix="add --push (with --registry HOST[/PREFIX]) to push it now, or pass --image REPO@sha256:...")
    return ref


def export_k8s(proj: ProjectConfig, x: ExportInput, request: K8sRequest,
               say: Callable[[str], None] = lambda line: None) -> K8sExport:
    """The Job written (to ``request.output``, default ``<project>.job.yaml``; ``-``: left to the caller), after
    the Secret's env file it names; ``say`` hears what is pushed as it is."""
    from envman.cluster.export import GIT_IMAGE, k8s_job, k8s_name, to_yaml, write_files
    from envman.project.file import cluster_gpu_count

    workspace = clone_source(proj, request)
    if request.push:
        if request.image is not None:
            raise UserError("--push and --image both name the image", where="--push",
                            fix="drop --image to push what the project runs on, or drop --push")
        x = replace(x, image=push_run_image(proj, x.stack, request.registry, say))
        say(f"pushed {x.image}")
    elif request.image is None:
        x = replace(x, image=pushed_image(proj, x.stack, request.registry))
    count = cluster_gpu_count(x.gpus) if request.gpus is None else request.gpus
    if request.gpus is None and x.stack.cuda is None:
        count = 0
    job, secret_keys = k8s_job(x, gpus=count, runtime_class=request.runtime_class, uid=request.uid, gid=request.gid,
                               git=workspace, git_image=request.git_image)
    dest = request.output or f"{k8s_name(x.project)}.job.yaml"
    # The Secret's env file first: a Job written without it would name a Secret nothing can create.
    env_file = export_env_file(proj, [(k, v) for k, v in x.environment if k in secret_keys]) if secret_keys else None
    text = to_yaml(job)
    if dest != "-":  # with -o -, the command prints it
        write_files({Path(dest): text}, force=request.force)
    out = K8sExport(dest, job, text)
    if dest != "-":
        out.notes.append(f"wrote {dest}: Job {job['metadata']['name']} on {x.image}, {count} GPU(s)")
    if workspace is None:
        out.notes.append("its /workspace starts empty (an emptyDir): clone the code there with --git URL [--git-ref REF], "
                         "or pass --image with an image that holds the code")
    else:
        out.notes.append(f"an init container clones {workspace[0]} at {workspace[1]} into /workspace")
        if request.git_image is None:
            out.notes.append(f"warning: the clone image {GIT_IMAGE} is a tag its publisher can move: pin one with "
                             "--git-image REPO@sha256:...")
    if secret_keys:
        import shlex

        name = job["metadata"]["name"]
        out.notes.append(f"the Job reads {', '.join(secret_keys)} from the Secret {name}-env: create it with "
                         f"kubectl create secret generic {name}-env --from-env-file={shlex.quote(env_file or '')}")
    return out


__all__ = ["K8sExport", "K8sRequest", "clone_source", "export_env_file", "export_k8s", "head_commit", "local_run", "local_run_image",
           "push_run_image", "pushed_image"]
