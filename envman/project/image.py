"""A project's own image, and the HOME it runs with.

A project with apt packages or Python requirements gets its own image, built ``FROM`` the stack's
promoted image and tagged by content (:func:`project_image_ref`); a project without them runs the
stack's image itself and adds no image at all. A project image found under its tag is reused only
when this user built it on that very stack image (:mod:`envman.images.provenance`): every user of
the engine sees, and can set, the tag. HOME is a per-project directory in the user's
state, keyed by the project's name and a hash of its real root.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from envman.digest import sha256
from envman import labels
from envman.errors import BuildError, EnvmanError
from envman.images.events import BuildStream
from envman.paths import state_dir, templates_dir
from envman.project.file import PROJECT_RECIPE, ProjectConfig, load_project
from envman.project.registry import read_registry
from envman.project.settings import CliOverrides, UserConfig, load_user_config, merge_settings
from envman.render import rendercache
from envman.render.imagepaths import CA_CONTEXT_FILE, LOCK_CONTEXT_FILE

if TYPE_CHECKING:
    from envman.engine.api import BuildEvent, ContainerEngine, EngineFacts, ImageInfo
    from envman.engine.builder import Builder
    from envman.project.lock import Lock
    from envman.render.options import RenderOptions
    from envman.stack.names import Stack

# --------------------------------------------------------------------------- project image


def project_repository(project: ProjectConfig) -> str:
    """``envman/project-<name>-<hash of the real root>`` (:attr:`ProjectConfig.identity`)."""
    return f"envman/project-{project.identity}"


def project_dockerfile(project: ProjectConfig, stack_name: str, base_image_id: str, lock: Lock | None = None,
                       network: RenderOptions | None = None) -> str:
    """The project image's Dockerfile (see :func:`envman.render.layerplan.project_plan`): apt layer,
    then requirements layer, on the stack's promoted image pinned by id. With ``lock`` (an
    ``envman.lock`` that matches), the requirements layer installs exactly its pins with
    ``--require-hashes`` and checks that it names nothing the requirements do not need; without,
    it resolves and leaves pip's install report for the next lock. ``network``: the CA bundle,
    indexes and apt mirror its steps go through. Without ``network`` (how every command works
    out the image's tag), the text comes from the user's render cache when these values and this
    envman rendered it before, without building the plan (:func:`envman.render.rendercache.inputs_key`)."""
    from envman.project.lock import REPORT_PATH

    requirements = bool(project.requirements.strip())
    values = {"name": project.name, "stack_name": stack_name, "base_image_id": base_image_id, "apt": list(project.apt),
              "requirements": requirements, "locked": lock is not None,
              "report_path": REPORT_PATH, "where": str(project.file)}
    key = rendercache.inputs_key("project_plan", "project.Dockerfile.j2", values, str(templates_dir())) \
        if network is None else None
    text = rendercache.lookup(key) if key is not None else None
    if text is not None:
        return text
    from envman.render.layerplan import project_plan
    from envman.render.template import render_dockerfile

    plan = project_plan(project.name, stack_name, base_image_id, apt=project.apt,
                        requirements=requirements, locked=lock is not None,
                        report_path=REPORT_PATH, where=str(project.file), network=network)
    text = render_dockerfile(plan)
    if key is not None:
        rendercache.store(key, text)
    return text


def project_lock(project: ProjectConfig, stack_name: str, base_image_id: str) -> Lock | None:
    """The project's ``envman.lock`` when it matches its requirements and this stack image, else
    None (the build re-resolves and rewrites it)."""
    from envman.project.lock import read_lock, usable

    if not project.requirements.strip():
        return None
    lock = read_lock(project.root)
    return lock if usable(lock, project.requirements, stack_name, base_image_id) else None


def project_context(project: ProjectConfig, stack_name: str, base_image_id: str, *, relock: bool = False,
                    network: RenderOptions | None = None) -> dict[str, bytes]:
    """The build context; ``relock`` ignores the project's lock (``envman lock --upgrade``);
    ``network``: the CA bundle (copied in), indexes and apt mirror the build goes through. The
    image's tag is the hash of the context without them (:func:`project_image_ref`): they say how
    the packages are fetched, not which, so every command that finds a project's image by its tag
    (run, clean, doctor) finds it whatever the network settings of the build were."""
    from envman.project.lock import closure_check

    lock = None if relock else project_lock(project, stack_name, base_image_id)
    files = {"Dockerfile": project_dockerfile(project, stack_name, base_image_id, lock, network).encode()}
    ca = network.ca_bytes() if network is not None else None
    if ca is not None:
        files[CA_CONTEXT_FILE] = ca
    if project.requirements.strip():
        files["requirements.txt"] = project.requirements.encode()
    if lock is not None:
        files[LOCK_CONTEXT_FILE] = lock.requirements_text().encode()
        files["lockcheck.py"] = closure_check()
    return files


def project_image_hash(files: Mapping[str, bytes]) -> str:

    h = sha256(f"envman-project-recipe:{PROJECT_RECIPE}\0".encode())
    for name in sorted(files):
        h.update(name.encode() + b"\0" + sha256(files[name]).hexdigest().encode() + b"\0")
    return h.hexdigest()


def project_image_ref(project: ProjectConfig, stack_name: str, base_image_id: str, *, relock: bool = False) -> str:
    """``envman/project-<name>:<hash>``: the hash covers the recipe, the base image id, the apt
    packages, the requirements and the lock in use, so any change gives a new tag and an
    unchanged project reuses its image."""
    digest = project_image_hash(project_context(project, stack_name, base_image_id, relock=relock))
    return f"{project_repository(project)}:{digest[:16]}"


def project_labels(project: ProjectConfig, stack_name: str, ref: str) -> dict[str, str]:
    from envman.images.store import current_user

    out = labels.project_labels(project.name, stack_name, ref.rsplit(":", 1)[1], *current_user())
    out[labels.PROJECT_ID] = project.identity  # the registered identity (name + real root)
    return out


def project_images_in_use(engine: EngineFacts, resolve_name: Callable[[str], Stack], registry: Mapping[str, Path] | None = None,
                          user: UserConfig | None = None) -> tuple[set[str], set[str]]:
    """What ``envman prune`` must keep for the registered projects: (the refs of the project images
    they run on now, the names of projects whose image cannot be worked out).

    A project's image is the one its current file, stack and promoted stack image give; older ones
    (other requirements, a re-promoted stack) are no longer used. A project whose file does not
    load, whose stack does not resolve or whose stack image is missing keeps every image it has:
    the user may be halfway through a fix.
    """
    from envman.images.pins import read_pins
    from envman.render.rendercache import batched

    pins = read_pins()  # read once: a pin per project
    refs: set[str] = set()
    unsure: set[str] = set()
    stable_ids: dict[str, str | None] = {}  # one inspect per stack image, however many projects use it
    user = user if user is not None else load_user_config()
    with batched():  # every project's render read from one load of the render cache, written once
        for name, root in (read_registry() if registry is None else registry).items():
            _keep(engine, resolve_name, user, pins, name, root, stable_ids, refs, unsure)
    return refs, unsure


def _keep(engine: EngineFacts, resolve_name: Callable[[str], Stack], user: UserConfig, pins: Mapping[str, Any], name: str,
          root: Path, stable_ids: dict[str, str | None], refs: set[str], unsure: set[str]) -> None:
    """One registered project's part of :func:`project_images_in_use`."""
    from envman.images.pins import load_pin, project_key
    from envman.state import stable_ref

    try:
        project = load_project(root)
        settings = merge_settings(project, user, CliOverrides(), stack_is_cpu=lambda s: resolve_name(s).is_cpu)
        stack = resolve_name(settings.stack)
    except EnvmanError:
        unsure.add(name)
        return
    if not project.needs_image:
        return
    pin = load_pin(project_key(project.name, str(project.root.resolve())), pins)
    base_ids = {pin.image_id} if pin is not None and pin.stack == stack.name else set()
    if stack.name not in stable_ids:
        base = engine.inspect_image(stable_ref(stack))
        stable_ids[stack.name] = base.id if base is not None else None
    stable_id = stable_ids[stack.name]
    if stable_id is not None:
        base_ids.add(stable_id)
    if not base_ids:
        unsure.add(name)
        return
    try:
        refs.update(project_image_ref(project, stack.name, b) for b in base_ids)
    except EnvmanError:  # a malformed envman.lock: keep its images until it is fixed
        unsure.add(name)


def vouched_image(engine: EngineFacts, ref: str, base_image_id: str) -> ImageInfo | None:
    """The image under ``ref`` when this user's own build made it on ``base_image_id`` (its ID in
    ``built.json``, :func:`envman.images.provenance.built_here`), else ``None``: a tag on a shared
    engine is anyone's to set, so an image this user did not build there is built again (the
    engine's cache makes an identical one cheap)."""
    from envman.images.provenance import built_here

    found = engine.inspect_image(ref)
    return found if found is not None and built_here(found.id, base=base_image_id) else None


def build_project_image(engine: ContainerEngine, project: ProjectConfig, stack_name: str, base_image_id: str, *,
                        on_event: Callable[[BuildEvent], None] | None = None, nocache: bool = False,
                        builder: Builder | None = None,
                        relock: bool = False, network: RenderOptions | None = None,
                        on_warning: Callable[[str], None] | None = None) -> str:
    """Build (or reuse) the project image on ``engine``; its ref.

    An image under the ref is reused only when this user built it on ``base_image_id``
    (:func:`vouched_image`); a build records the image it made as this user's.

    A build that resolved the requirements (no matching lock, or ``relock``) writes
    ``envman.lock`` from pip's report and tags the image under the locked ref as well, so the
    next run reuses it. ``builder`` runs the build; by default the classic one. ``network``:
    the CA bundle, indexes and apt mirror the build goes through (``[network]`` of config.toml
    and the command's options). ``on_warning`` is told what went wrong without failing the build
    (a lock that cannot be written), one line each."""
    from filelock import FileLock

    from envman.engine.builder import ClassicBuilder, from_image_id
    from envman.engine.context import deterministic_tar
    from envman.images.provenance import record_built
    from envman.state import locks_dir

    locks_dir().mkdir(parents=True, exist_ok=True)
    with FileLock(str(locks_dir() / f"project-{project.identity}.lock"), timeout=3600):
        files = project_context(project, stack_name, base_image_id, relock=relock, network=network)
        ref = project_image_ref(project, stack_name, base_image_id, relock=relock)
        resolved = bool(project.requirements.strip()) and LOCK_CONTEXT_FILE not in files
        found = None if nocache or relock else vouched_image(engine, ref, base_image_id)
        if found is not None:
            # an image that resolved its requirements holds pip's report: a project whose lock
            # went missing (or no longer matched) gets it back without a build
            if resolved:
                ref = record_lock(engine, project, stack_name, base_image_id, ref, on_warning, image_id=found.id)
                record_built(found.id, ref, base=base_image_id)  # the ref a run names it by now
            return ref
        try:
            run = builder if builder is not None else ClassicBuilder(engine)
            with from_image_id(engine, run, files, base_image_id) as buildable:
                stream = BuildStream(on_event=on_event)
                stream.read(run.build(
                    deterministic_tar(buildable), ref, labels=project_labels(project, stack_name, ref),
                    nocache=nocache or relock))
        except BuildError as exc:
            said = build_reason(exc.log_tail)
            raise BuildError(
                f"project image of {project.name} failed to build: {said or exc.what}", log_tail=exc.log_tail,
                where=str(project.file),
                fix="envman lock --upgrade" if said and "envman.lock" in said else
                "check the apt packages, requirements and envman.lock (the failing step and its error lines follow)",
            ) from None
        image_id = stream.image_id
        if image_id is None:  # an engine that did not say: the tag, a moment after the build
            info = engine.inspect_image(ref)
            image_id = info.id if info is not None else ref
        if resolved:
            ref = record_lock(engine, project, stack_name, base_image_id, ref, on_warning, image_id=image_id)
        record_built(image_id, ref, base=base_image_id)
    return ref


def build_reason(log_tail: str) -> str | None:
    """The last line envman's own build steps printed (``envman: ...``, e.g. the lock check's
    "names packages the requirements do not need"), without the prefix: the reason a user must
    see in the one error line, not only in a log tail that ``envman run`` does not print."""
    for line in reversed((log_tail or "").splitlines()):
        s = line.strip()
        at = s.find("envman: ")
        if at >= 0:
            return s[at + len("envman: "):].strip() or None
    return None


def record_lock(engine: ContainerEngine, project: ProjectConfig, stack_name: str, base_image_id: str, ref: str,
                on_warning: Callable[[str], None] | None = None, *, image_id: str | None = None) -> str:
    """Write ``envman.lock`` from the install report inside the freshly built ``ref`` (the image
    ``image_id`` when given: read and tagged by ID, so a tag moved meanwhile changes nothing) and
    tag the image under the ref the lock gives; that ref. A lock that cannot be written is told to
    ``on_warning`` and leaves ``ref`` as it is."""
    from envman.project.lock import REPORT_PATH, make_lock, pins_from_report, write_lock

    image = image_id or ref
    res = engine.run(image, ["cat", REPORT_PATH], network="none", timeout=120)
    try:
        report = json.loads(res.stdout) if res.exit_code == 0 else None
    except ValueError:
        report = None
    if report is None:
        raise BuildError(f"cannot read pip's install report from {ref}", where=str(project.file),
                         fix="use a stack image whose venv has pip >= 22.2")
    lock = make_lock(stack_name, base_image_id, project.requirements, pins_from_report(report, where=ref))
    try:
        write_lock(project.root, lock)
    except OSError as exc:  # a read-only checkout still builds and runs, without a lock
        if on_warning is not None:
            on_warning(f"envman: warning: cannot write {project.root / 'envman.lock'}: {exc.strerror or exc}"
                       " (the next build resolves the requirements again)")
        return ref
    locked = project_image_ref(project, stack_name, base_image_id)
    engine.tag(image, locked)
    return locked


def home_dir(project: ProjectConfig) -> Path:
    """The host directory mounted as the container's HOME for this project:
    ``<state dir>/homes/<name>-<hash of the real root>`` (:attr:`ProjectConfig.identity`), never
    a directory picked by the ``name`` a file claims."""
    return state_dir() / "homes" / project.identity


def prepare_home(project: ProjectConfig, registry: Mapping[str, Path] | None = None) -> Path:
    """Create the project's HOME (0700). A registered project whose HOME still has the older
    name-only key (``homes/<name>``) gets it moved to the new one once, so ``pip install
    --user`` and dotfiles survive; only the project registered under that name at this root
    may claim it."""
    from envman.safefile import private_dir

    home = home_dir(project)
    if not os.path.lexists(home):
        legacy = state_dir() / "homes" / project.name
        if os.path.isdir(legacy) and not os.path.islink(legacy):
            projects = read_registry() if registry is None else registry
            reg = projects.get(project.name)
            if reg is not None and os.path.realpath(reg) == os.path.realpath(project.root):
                private_dir(home.parent)
                os.rename(legacy, home)
    private_dir(home.parent)
    return private_dir(home)
