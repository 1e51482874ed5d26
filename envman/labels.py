"""Every ``envman.*`` label name, and its parsing, in one place.

Everything envman creates on an engine (stack images, project images, smoke and run containers)
carries labels in the ``envman.`` namespace; other modules import the names from here instead of
spelling them out, and read an object's labels through :func:`parse`.

Label values are strings on every engine; :class:`EnvmanLabels` gives them types (``managed`` is a
bool) and tolerates anything: labels are written by whoever built an image, so a value that does
not parse reads as absent rather than raising.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from envman.errors import UserError

PREFIX = "envman."

# --- names -------------------------------------------------------------------------------------

MANAGED = "envman.managed"  # "true" on everything envman made
NAME = "envman.name"  # the stack name
STACK = "envman.stack"  # the resolved stack, as JSON (stack images)
VERSION = "envman.version"  # the envman version that rendered the image
RENDER_HASH = "envman.render-hash"  # sha256 of the build context (the candidate tag)
CONTENT_HASH = "envman.content-hash"  # the image's identity: its render without network options (pull checks it)
ROLE = "envman.role"  # what the object is for, one of ROLES
PROJECT = "envman.project"  # the project a project image or run container belongs to
PROJECT_HASH = "envman.project-hash"  # the project image's recipe hash (its tag)
PROJECT_ID = "envman.project-id"  # the project's identity: its name and a hash of its real root
BUILT_BY_UID = "envman.built-by.uid"  # who built the image: numeric uid on the engine's host
BUILT_BY_USER = "envman.built-by.user"  # ... and that uid's login name (informative only)
# A base rebuilt from NVIDIA's recipe (envman.images.base); images built on it inherit both.
BASE_RECIPE = "envman.base.recipe"  # sha256 of the base's Dockerfile: what the image was built from
BASE_SOURCE = "envman.base.source"  # NVIDIA's recipe files, "<path> @ <commit>" each

# The smoke verdict, carried by the image it is about (see envman.images.store): every user of the
# engine reads it, whoever ran the smoke test.
SMOKE_STATUS = "envman.smoke.status"  # pass | cpu-only | fail
SMOKE_REASON = "envman.smoke.reason"  # one line, at most SMOKE_REASON_MAX characters
SMOKE_REPORT_DIGEST = "envman.smoke.report-digest"  # sha256 of the full report (canonical JSON)
SMOKE_CHECKS = "envman.smoke.checks"  # "name=status ..." for each probe check
SMOKE_GPU = "envman.smoke.gpu"  # "true" when the probe ran with GPUs requested
SMOKE_IMAGE = "envman.smoke.image"  # the id of the image the probe ran in
SMOKE_BY_UID = "envman.smoke.by-uid"  # who ran the smoke test (and so promoted the image)
SMOKE_BY_USER = "envman.smoke.by-user"
SMOKE_AT = "envman.smoke.at"  # when, Unix seconds
SMOKE_ROOTFS = "envman.smoke.rootfs"  # sha256 over the tested image's layer digests: what was tested
SMOKE_LABELS = (SMOKE_STATUS, SMOKE_REASON, SMOKE_REPORT_DIGEST, SMOKE_CHECKS, SMOKE_GPU, SMOKE_IMAGE,
                SMOKE_BY_UID, SMOKE_BY_USER, SMOKE_AT, SMOKE_ROOTFS)
SMOKE = SMOKE_STATUS  # the name envman.images.remote knows it by
SMOKE_REASON_MAX = 300
SMOKE_CHECKS_MAX = 2000
UID = "envman.uid"  # the uid an `envman run` container runs as (whose it is)
ENV = "envman.env"  # a named environment's name (envman run --name/--detach)
SMOKE_RUN = "envman.smoke-run"  # a smoke container's run: the lock its build holds while the probe runs

# --- values ------------------------------------------------------------------------------------

TRUE = "true"
ROLE_CANDIDATE = "candidate"  # a built stack image, before or after promotion
ROLE_SMOKE = "smoke"  # the container the probe runs in
ROLE_RUN = "run"  # an `envman run` container
ROLE_PROJECT = "project"  # a project image (stack image + the project's packages)
ROLE_RELEASE = "release"  # a promoted image with its smoke verdict, as pushed to a registry
ROLE_BASE = "base"  # an nvidia/cuda base rebuilt from NVIDIA's recipe (envman/base:<tag>)
ROLE_LOCAL_BASE = "local-base"  # a base made from the distribution's mirror (envman/local-base:<os>)
ROLE_NETWORK = "network"  # the network of one user's runs of one project (envman.run.network)
ROLES = frozenset({ROLE_CANDIDATE, ROLE_SMOKE, ROLE_RUN, ROLE_PROJECT, ROLE_RELEASE, ROLE_BASE, ROLE_LOCAL_BASE,
                   ROLE_NETWORK})
SMOKE_STATUSES = frozenset({"pass", "cpu-only", "fail"})

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
    built_by_uid: int | None = None
    built_by_user: str | None = None
    smoke: SmokeVerdict | None = None
    base_recipe: str | None = None


@dataclass(frozen=True)
class SmokeVerdict:
    """The smoke verdict an image carries in its ``envman.smoke.*`` labels."""

    status: str  # pass | cpu-only | fail
    reason: str = ""
    report_digest: str | None = None
    checks: str = ""
    gpus_requested: bool = False
    image_id: str | None = None  # the image the probe ran in
    by_uid: int | None = None
    by_user: str | None = None
    at: int | None = None  # Unix seconds
    rootfs: str | None = None  # digest of the tested layers (see SMOKE_ROOTFS)

    def to_labels(self) -> dict[str, str]:
        """The labels that carry this verdict (an absent field is an empty value: labels are
        inherited, so a derived image must be able to clear them)."""
        return {
            SMOKE_STATUS: self.status,
            SMOKE_REASON: one_line(self.reason, SMOKE_REASON_MAX),
            SMOKE_REPORT_DIGEST: self.report_digest or "",
            SMOKE_CHECKS: one_line(self.checks, SMOKE_CHECKS_MAX),
            SMOKE_GPU: TRUE if self.gpus_requested else "false",
            SMOKE_IMAGE: self.image_id or "",
            SMOKE_BY_UID: "" if self.by_uid is None else str(self.by_uid),
            SMOKE_BY_USER: self.by_user or "",
            SMOKE_AT: "" if self.at is None else str(self.at),
            SMOKE_ROOTFS: self.rootfs or "",
        }


def _text(labels: Mapping[str, str], key: str) -> str | None:
    value = labels.get(key)
    return value if isinstance(value, str) and value != "" else None


def one_line(text: str, limit: int) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _uint(labels: Mapping[str, str], key: str) -> int | None:
    value = _text(labels, key)
    return int(value) if value is not None and value.isascii() and value.isdigit() and len(value) <= 12 else None


def parse_smoke(labels: Mapping[str, str] | None) -> SmokeVerdict | None:
    """The smoke verdict in ``labels``, or ``None`` (no verdict, or one that does not parse)."""
    got = dict(labels or {})
    status = _text(got, SMOKE_STATUS)
    if status not in SMOKE_STATUSES:
        return None
    digest, rootfs = _text(got, SMOKE_REPORT_DIGEST), _text(got, SMOKE_ROOTFS)
    return SmokeVerdict(
        status=status,
        reason=_text(got, SMOKE_REASON) or "",
        report_digest=digest if digest and re.fullmatch(r"sha256:[0-9a-f]{64}", digest) else None,
        checks=_text(got, SMOKE_CHECKS) or "",
        gpus_requested=got.get(SMOKE_GPU) == TRUE,
        image_id=_text(got, SMOKE_IMAGE),
        by_uid=_uint(got, SMOKE_BY_UID),
        by_user=_text(got, SMOKE_BY_USER),
        at=_uint(got, SMOKE_AT),
        rootfs=rootfs if rootfs and re.fullmatch(r"sha256:[0-9a-f]{64}", rootfs) else None,
    )


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
        built_by_uid=_uint(got, BUILT_BY_UID),
        built_by_user=_text(got, BUILT_BY_USER),
        smoke=parse_smoke(got),
        base_recipe=_text(got, BASE_RECIPE),
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


def builder_labels(uid: int, user: str) -> dict[str, str]:
    """Who built an image."""
    return {BUILT_BY_UID: str(uid), BUILT_BY_USER: user}


def cleared_smoke_labels() -> dict[str, str]:
    """Empty smoke labels: an image built FROM a smoke-tested one must not inherit its verdict."""
    return {k: "" for k in SMOKE_LABELS}


def candidate_labels(stack_name: str, render_hash: str, uid: int, user: str) -> dict[str, str]:
    """What a built stack image says about itself (on top of the Dockerfile's own labels)."""
    return {MANAGED: TRUE, NAME: stack_name, RENDER_HASH: render_hash, ROLE: ROLE_CANDIDATE,
            **builder_labels(uid, user)}


def project_labels(project: str, stack_name: str, project_hash: str, uid: int, user: str) -> dict[str, str]:
    """What a project image says about itself (it inherits its stack image's labels otherwise)."""
    return {MANAGED: TRUE, PROJECT: project, NAME: stack_name, ROLE: ROLE_PROJECT, PROJECT_HASH: project_hash,
            **builder_labels(uid, user), **cleared_smoke_labels()}




def run_labels(project: str, stack_name: str, uid: int | None = None, env_name: str | None = None) -> dict[str, str]:
    """What an ``envman run`` container carries (``docker run --label`` pairs, in this order)."""
    out = {MANAGED: TRUE, ROLE: ROLE_RUN, PROJECT: project, NAME: stack_name}
    if uid is not None:
        out[UID] = str(uid)
    if env_name is not None:
        out[ENV] = env_name
    return out


def smoke_labels(stack_name: str) -> dict[str, str]:
    """What a smoke-test container carries (the engine adds :data:`MANAGED`)."""
    return {ROLE: ROLE_SMOKE, NAME: stack_name}
