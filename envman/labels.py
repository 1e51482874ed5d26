"""Every ``envman.*`` label name, and its parsing, in one place.

Everything envman creates on an engine (stack images, project images, smoke and run containers)
carries labels in the ``envman.`` namespace; other modules import the names from here instead of
spelling them out, and read an object's labels through :func:`parse`.

Label values are strings on every engine; :class:`EnvmanLabels` gives them types (``managed`` is a
bool) and tolerates anything: labels are written by whoever built an image, so a value that does
not parse reads as absent rather than raising.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .errors import UserError

PREFIX = "envman."

# --- names -------------------------------------------------------------------------------------

MANAGED = "envman.managed"  # "true" on everything envman made
NAME = "envman.name"  # the stack name
STACK = "envman.stack"  # the resolved stack, as JSON (stack images)
VERSION = "envman.version"  # the envman version that rendered the image
RENDER_HASH = "envman.render-hash"  # sha256 of the build context (the candidate tag)
ROLE = "envman.role"  # what the object is for, one of ROLES
PROJECT = "envman.project"  # the project a project image or run container belongs to
PROJECT_HASH = "envman.project-hash"  # the project image's recipe hash (its tag)
# A pushed image carries its smoke verdict (envman.registry): the report stays on the host that
# ran the probe, so the verdict travels as labels.
SMOKE = "envman.smoke"  # pass | cpu-only | fail
SMOKE_REASON = "envman.smoke-reason"  # the probe's one-line reason
SMOKE_GPU = "envman.smoke-gpu"  # "true" when the probe ran with GPUs
SMOKE_IMAGE = "envman.smoke-image"  # the id of the image the probe ran in

# --- values ------------------------------------------------------------------------------------

TRUE = "true"
ROLE_CANDIDATE = "candidate"  # a built stack image, before or after promotion
ROLE_SMOKE = "smoke"  # the container the probe runs in
ROLE_RUN = "run"  # an `envman run` container
ROLE_PROJECT = "project"  # a project image (stack image + the project's packages)
ROLE_RELEASE = "release"  # a promoted image with its smoke verdict, as pushed to a registry
ROLES = frozenset({ROLE_CANDIDATE, ROLE_SMOKE, ROLE_RUN, ROLE_PROJECT, ROLE_RELEASE})

#: The filter / label set that marks an object as envman's.
MANAGED_LABELS: Mapping[str, str] = {MANAGED: TRUE}


@dataclass(frozen=True)
class EnvmanLabels:
    """The ``envman.*`` labels of one image or container, typed."""

    managed: bool = False
    name: str | None = None
    role: str | None = None
    project: str | None = None
    project_hash: str | None = None
    render_hash: str | None = None
    version: str | None = None
    stack_json: str | None = None


def _text(labels: Mapping[str, str], key: str) -> str | None:
    value = labels.get(key)
    return value if isinstance(value, str) and value != "" else None


def parse(labels: Mapping[str, str] | None) -> EnvmanLabels:
    """The envman labels in ``labels`` (an engine's label map; ``None`` reads as empty)."""
    got = dict(labels or {})
    return EnvmanLabels(
        managed=got.get(MANAGED) == TRUE,
        name=_text(got, NAME),
        role=_text(got, ROLE),
        project=_text(got, PROJECT),
        project_hash=_text(got, PROJECT_HASH),
        render_hash=_text(got, RENDER_HASH),
        version=_text(got, VERSION),
        stack_json=_text(got, STACK),
    )


def namespaced(labels: Mapping[str, str] | None) -> dict[str, str]:
    """``labels`` as a dict, refusing any key outside the ``envman.`` namespace."""
    out = dict(labels or {})
    foreign = sorted(k for k in out if not k.startswith(PREFIX))
    if foreign:
        raise UserError(f"label {foreign[0]!r} is outside the {PREFIX}* namespace")
    return out


def with_managed(labels: Mapping[str, str] | None) -> dict[str, str]:
    """``labels`` (namespaced) plus :data:`MANAGED_LABELS`."""
    return {**namespaced(labels), **MANAGED_LABELS}


def candidate_labels(stack_name: str, render_hash: str) -> dict[str, str]:
    """What a built stack image says about itself (on top of the Dockerfile's own labels)."""
    return {MANAGED: TRUE, NAME: stack_name, RENDER_HASH: render_hash, ROLE: ROLE_CANDIDATE}


def project_labels(project: str, stack_name: str, project_hash: str) -> dict[str, str]:
    """What a project image says about itself."""
    return {MANAGED: TRUE, PROJECT: project, NAME: stack_name, ROLE: ROLE_PROJECT, PROJECT_HASH: project_hash}


def run_labels(project: str, stack_name: str) -> dict[str, str]:
    """What an ``envman run`` container carries (``docker run --label`` pairs, in this order)."""
    return {MANAGED: TRUE, ROLE: ROLE_RUN, PROJECT: project, NAME: stack_name}


def smoke_labels(stack_name: str) -> dict[str, str]:
    """What a smoke-test container carries (the engine adds :data:`MANAGED`)."""
    return {ROLE: ROLE_SMOKE, NAME: stack_name}
