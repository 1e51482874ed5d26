"""The plan of a layer on an envman image: a project's own image (its apt packages, then its
requirements or its lock) and the notebook layer (JupyterLab), each ``FROM`` the image it extends,
pinned by id. Their sections are those of :mod:`envman.render.plan`; what differs from a stack
image is what reaches them (a project file's values, checked again here, whole) and how their
steps reach the network (:func:`layer_network`). Standard library only (and the plan): the run
path builds project plans."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from envman.errors import RenderError
from envman.render.sections import (
    BaseImage, BuilderOptions, DockerfilePlan, NetworkOptions, OsPackages, PipPackages, Project, Requirements,
)
from envman.render.imagepaths import (
    CA_MERGED, CA_MOUNT, CA_STEP_ENV, LOCK_CONTEXT_FILE, NO_PIP_CACHE, PROJECT_DIR, VENV_PYTHON,
)
from envman.stack.names import APT_PACKAGE_PATTERN, PROJECT_NAME_PATTERN, STACK_NAME_PATTERN
from envman.state import stable_ref

if TYPE_CHECKING:
    from envman.render.options import RenderOptions

# What may reach a project image's Dockerfile. The project file's parser checks the same; these
# are checked again here, whole (a ``$`` in ``re.match`` also accepts a trailing newline).
_PROJECT_NAME_RE = re.compile(PROJECT_NAME_PATTERN)
_STACK_NAME_RE = re.compile(STACK_NAME_PATTERN)
_APT_RE = re.compile(APT_PACKAGE_PATTERN)
_IMAGE_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9:._-]{0,127}")


def _checked(value: str, pattern: re.Pattern[str], what: str, where: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise RenderError(f"{what} {value!r} cannot go into a Dockerfile", where=where,
                          fix="fix the project file (envman project validate names what it accepts)")
    return value


#: pip's options in a layer on an envman image (a project's requirements, the notebook layer).
LAYER_PIP_OPTIONS = ("--no-cache-dir", "--disable-pip-version-check")


def project_requirements(locked: bool, report_path: str) -> Requirements:
    """The requirements layer: with a lock, exactly its pins with their hashes, then the check that
    the lock names nothing the requirements do not need; without, a resolve that leaves pip's
    install report at ``report_path`` for the next lock."""
    if locked:
        return Requirements(
            copy=("requirements.txt", LOCK_CONTEXT_FILE, "lockcheck.py"),
            dest=f"{PROJECT_DIR}/",
            python=VENV_PYTHON,
            pip_options=LAYER_PIP_OPTIONS,
            install=("--require-hashes", "-r", f"{PROJECT_DIR}/{LOCK_CONTEXT_FILE}"),
            check=(VENV_PYTHON, f"{PROJECT_DIR}/lockcheck.py", f"{PROJECT_DIR}/requirements.txt",
                   f"{PROJECT_DIR}/{LOCK_CONTEXT_FILE}"),
        )
    return Requirements(
        copy=("requirements.txt",),
        dest=f"{PROJECT_DIR}/requirements.txt",
        python=VENV_PYTHON,
        pip_options=LAYER_PIP_OPTIONS,
        install=("--report", report_path, "-r", f"{PROJECT_DIR}/requirements.txt"),
    )


#: The network options a layer on an envman image (a project image, the notebook layer) has no use
#: for: it is built FROM a local image id (no registry is asked), installs no framework and no
#: Python, and resolves its requirements through an index (no wheelhouse).
LAYER_UNUSED_OPTIONS = frozenset({"registry_mirror", "framework_index", "python_install_mirror", "wheelhouse", "offline"})


@dataclass(frozen=True)
class LayerNetwork:
    """How a layer's RUN steps reach the network (--ca-bundle, --pip-index, --pip-extra-index,
    --apt-mirror), for the classic builder: the bundle is copied in and merged with the system
    store at the start of each step; the indexes are exported for that step only."""

    builder: BuilderOptions
    network: NetworkOptions | None
    apt_get: tuple[str, ...]
    apt_mirror: str | None


def layer_network(options: RenderOptions | None) -> LayerNetwork:
    """A layer's network settings from ``options`` (``None``: none). An index URL that carries
    credentials is left out: the classic builder would keep it in the image's history, and a
    secret never goes into a layer; pip then uses the stack image's own index settings."""
    plain = LayerNetwork(BuilderOptions("classic", NO_PIP_CACHE), None, ("apt-get",), None)
    if options is None:
        return plain
    secret = options.credentials()
    ca = options.ca_bundle is not None
    exports: list[tuple[str, str]] = list(CA_STEP_ENV) if ca else []
    for key, var in (("pip_index", "PIP_INDEX_URL"), ("pip_extra_index", "PIP_EXTRA_INDEX_URL")):
        value = getattr(options, key)
        if value and key not in secret:
            exports.append((var, value))
    if not ca and not exports and not options.apt_mirror:
        return plain
    return LayerNetwork(
        builder=BuilderOptions("classic", NO_PIP_CACHE, ca_source=CA_MOUNT if ca else None, step_env=tuple(exports)),
        network=NetworkOptions(ca_copy_dest=CA_MOUNT) if ca else None,
        apt_get=("apt-get", "-o", f"Acquire::https::CAInfo={CA_MERGED}") if ca else ("apt-get",),
        apt_mirror=options.apt_mirror,
    )


def project_plan(name: str, stack_name: str, base_image_id: str, *, apt: tuple[str, ...] = (),
                 requirements: bool = False, locked: bool = False, report_path: str, where: str,
                 network: RenderOptions | None = None) -> DockerfilePlan:
    """The plan of a project's image on its stack's promoted image, pinned by id (a tag moving
    during a build cannot mix two bases): its ``apt`` packages, then its requirements when it has
    any (``locked``: installed from a matching ``envman.lock``). ``where`` names the project file
    in errors. The project layer (``envman.project.image``) passes its config's values in;
    ``network``: the mirrors, CA bundle and indexes its steps reach the network through."""
    name = _checked(name, _PROJECT_NAME_RE, "project name", where)
    stack_name = _checked(stack_name, _STACK_NAME_RE, "stack name", where)
    base_image_id = _checked(base_image_id, _IMAGE_ID_RE, "base image id", where)
    packages = tuple(_checked(p, _APT_RE, "apt package", f"{where}: apt") for p in apt)
    net = layer_network(network)
    return DockerfilePlan(
        template="project.Dockerfile.j2",
        title=(f"envman project image for {name}: stack {stack_name} ({stable_ref(stack_name)}). Generated.",),
        builder=net.builder,
        base=BaseImage(image=base_image_id, from_image=base_image_id),
        os_packages=OsPackages(apt_get=net.apt_get, packages=packages, mirror=net.apt_mirror,
                               install_env=(("DEBIAN_FRONTEND", "noninteractive"),)) if packages else None,
        network=net.network,
        project=Project(name, stack_name, project_requirements(locked, report_path) if requirements else None),
    )


_PIP_REQUIREMENT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._\[\],<>=!~ -]{0,199}")


def notebook_plan(base_image_id: str, requirement: str, network: RenderOptions | None = None) -> DockerfilePlan:
    """The notebook layer (``envman notebook``): ``requirement`` (JupyterLab) pip-installed into
    the venv of the image a project runs on, pinned by id, through ``network``'s CA bundle and
    indexes."""
    base_image_id = _checked(base_image_id, _IMAGE_ID_RE, "base image id", "envman notebook")
    requirement = _checked(requirement, _PIP_REQUIREMENT_RE, "requirement", "envman notebook")
    net = layer_network(network)
    return DockerfilePlan(
        template="project.Dockerfile.j2",
        title=("envman notebook layer: JupyterLab on top of the project's image. Generated.",),
        builder=net.builder,
        base=BaseImage(image=base_image_id, from_image=base_image_id),
        os_packages=None,
        network=net.network,
        pip_packages=PipPackages(VENV_PYTHON, LAYER_PIP_OPTIONS, (requirement,)),
    )


__all__ = ["LAYER_PIP_OPTIONS", "LAYER_UNUSED_OPTIONS", "LayerNetwork", "layer_network", "notebook_plan",
           "project_plan", "project_requirements"]
