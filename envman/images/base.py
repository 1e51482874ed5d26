"""Build a rebuilt ``nvidia/cuda`` base once, and share it.

A :class:`~envman.render.base.BaseBuild` is built as ``envman/base:<nvidia tag>`` with the recipe's
hash in its labels. :func:`ensure_base` reuses the image there only when it has that hash and this
user's own build produced it (:mod:`envman.images.provenance`: labels and tags are anyone's on a
shared engine), and builds it otherwise (the engine's build cache makes that cheap when the image
there is what the recipe gives), under a machine-wide per-tag lock so that concurrent builds of
stacks on the same base, by any user, build it once at a time. A changed recipe gives a new hash
and so a new build.

The image carries the same owner labels as a stack image (``envman.built-by.*``) and the role
``base``; ``envman prune`` removes a base only when no envman image built on it is left.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from envman.images.events import BuildStream
from envman import labels as L
from envman.errors import BuildError, EnvmanError
from envman.state import logs_dir, safe_name

if TYPE_CHECKING:
    from envman.engine.api import BuildEvent, ContainerEngine
    from envman.engine.builder import Builder
    from envman.render.base import BaseBuild

#: A base's lines that say why its build failed (apt, dpkg, curl, envman's own checks).
_CAUSE_RE = re.compile(r"^(?:envman: |E: |dpkg: error|curl: \(\d+\)|W: GPG error|gpg: |sha256sum: )")


@dataclass
class BaseResult:
    ref: str
    image_id: str
    cached: bool
    seconds: float
    log_path: str | None = None


def base_labels(base: BaseBuild, uid: int, user: str) -> dict[str, str]:
    """What a rebuilt base says about itself."""
    return {L.MANAGED: L.TRUE, L.ROLE: L.ROLE_BASE, L.NAME: base.nvidia_ref, L.BASE_RECIPE: base.recipe_hash,
            L.BASE_SOURCE: " ; ".join(base.sources)[:1000], **L.builder_labels(uid, user)}


def ensure_base(engine: ContainerEngine, builder: Builder, base: BaseBuild, *, nocache: bool = False,
                pull: bool = False, on_event: Callable[[BuildEvent], None] | None = None,
                lock_timeout: float = 3600) -> BaseResult:
    """``base`` (a :class:`~envman.render.base.BaseBuild`) as an image on ``engine``: the one there
    when its recipe hash matches, else built now with ``builder``."""
    from envman.images.provenance import built_here, machine_lock, pinned_context, record_built, upstream_pins
    from envman.images.store import current_user

    t0 = time.perf_counter()
    with machine_lock(f"base-{base.tag}", timeout=lock_timeout, what=base.ref):
        existing = engine.inspect_image(base.ref)
        # reused only when this user built it: anyone on the engine can tag an image with these labels
        if existing and not nocache and existing.labels.get(L.BASE_RECIPE) == base.recipe_hash and built_here(existing.id):
            return BaseResult(base.ref, existing.id, True, time.perf_counter() - t0)
        logs_dir().mkdir(parents=True, exist_ok=True)
        log_path = logs_dir() / f"base-{safe_name(base.tag)}-{base.recipe_hash[:16]}.log"
        files = base.context()
        # its plain OS image by digest or ID when vouched for, else pulled: a local tag is anyone's
        upstream = upstream_pins(engine, files.get("Dockerfile", b"").decode("utf-8", "replace"))
        with open(log_path, "w") as log:
            stream = BuildStream(log=log, on_event=on_event)
            try:
                with pinned_context(engine, builder, {n: (d, 0o644) for n, d in files.items()}, upstream.pins) as context:
                    stream.read(builder.build(context, base.ref, labels=base_labels(base, *current_user()),
                                              nocache=nocache, pull=pull or upstream.pull))
            except BuildError as exc:
                log.write(f"\nenvman: build failed: {exc.what}\n")
                raise BuildError(
                    f"rebuilding {base.nvidia_ref} from NVIDIA's recipe failed: {failure_cause(exc)}",
                    log_tail=exc.log_tail,
                    where=str(log_path),
                    fix=failure_fix(exc),
                ) from None
        image_id = stream.image_id
        if image_id is None:
            info = engine.inspect_image(base.ref)
            image_id = info.id if info else base.ref
        record_built(image_id, base.ref)
        return BaseResult(base.ref, image_id, False, time.perf_counter() - t0, str(log_path))


def failure_cause(exc: BuildError) -> str:
    """The line of a failed base build that says why: envman's own check, else the first error apt,
    dpkg, curl or gpg printed."""
    lines = [_strip_step(ln.strip()) for ln in (exc.log_tail or "").splitlines()]
    causes = [ln for ln in lines if _CAUSE_RE.search(ln)]
    ours = [ln for ln in causes if ln.startswith("envman: ")]
    # envman's own check says it best; else apt's first error (the later ones sum it up)
    return (ours or causes or [exc.what])[0]


def _strip_step(line: str) -> str:
    """A log line without terminal colours and BuildKit's ``#12 0.345`` prefix."""
    return re.sub(r"^#\d+ \d+(?:\.\d+)? ", "", re.sub(r"\x1b\[[0-9;]*m", "", line)).strip()


def failure_fix(exc: BuildError) -> str:
    """What to do about a failed base build: the hint of its error class (envman.images.failure,
    which reads the log's output lines, never the RUN commands it echoes)."""
    from envman.images.failure import summarize

    why = summarize(failure_cause(exc), exc.log_tail or "")
    return why.hint or "read the log tail above / the full log; --base pull with --registry-mirror pulls the tag instead"


__all__ = ["BaseResult", "base_labels", "ensure_base", "failure_cause", "failure_fix"]
