"""envman's images on the engine, listed (``envman images``) and pruned (``envman prune``): whose
they are, which verdict each carries, and which ones ``prune`` may remove."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Iterable

from envman import labels as L
from envman.images.store import labels_verdict
from envman.state import is_stable_tag, report_path

if TYPE_CHECKING:
    from envman.engine.api import ContainerEngine, EngineFacts


@dataclass
class ImageRow:
    stack: str
    tags: tuple[str, ...]
    image_id: str
    size: int
    created: int
    stable: bool
    smoke: str  # pass | cpu-only | fail | untested
    project: str | None = None
    built_by_uid: int | None = None  # None: an image from before envman recorded its builder
    built_by_user: str | None = None
    role: str | None = None
    base_recipe: str | None = None  # the rebuilt base the image is (role base) or is built on


def list_envman_images(engine: EngineFacts) -> list[ImageRow]:
    """envman's images; the smoke column is the image's own verdict label, else this user's cache."""
    rows = []
    for img in engine.list_images(L.MANAGED_LABELS):
        labels = L.parse(img.labels)
        base = labels.role in (L.ROLE_BASE, L.ROLE_LOCAL_BASE)
        verdict = labels_verdict(img.labels, img.id) if labels.role != L.ROLE_PROJECT and not base else None
        rows.append(
            ImageRow(
                stack=labels.name or "?",
                tags=tuple(img.tags),
                image_id=img.id,
                size=img.size,
                created=img.created,
                stable=any(is_stable_tag(t) for t in img.tags),
                smoke=verdict.status if verdict else "base" if base else "untested",
                project=labels.project,
                built_by_uid=labels.built_by_uid,
                built_by_user=labels.built_by_user,
                role=labels.role,
                base_recipe=labels.base_recipe,
            )
        )
    rows.sort(key=lambda r: (r.stack, -r.created))
    return rows


@dataclass(frozen=True)
class PruneScope:
    """Whose images ``prune`` may remove and what it must keep."""

    uid: int  # the invoking user
    all_users: bool = False  # root's --all-users: every user's images are candidates
    keep: frozenset[str] = frozenset()  # refs the user's registered projects run on
    keep_projects: frozenset[str] = frozenset()  # projects whose images cannot be worked out: keep all
    keep_ids: frozenset[str] = frozenset()  # image ids the user's projects are pinned to
    in_use: frozenset[str] = frozenset()  # image ids and refs any container (any user, any state) uses


def prune_selection(rows: Iterable[ImageRow], scope: PruneScope) -> list[ImageRow]:
    """The images ``prune`` removes: built by the invoking user (any user's with ``all_users``),
    not stable, not used by any container, not what a registered project of the user runs on or
    is pinned to. An image that records no builder is never the invoking user's. A rebuilt base
    (role ``base``) goes only with the last envman image built on it; a base ``envman base make``
    made (role ``local-base``) never: the user's matrix files name it."""
    rows = list(rows)
    out = []
    for row in rows:
        if row.role == L.ROLE_LOCAL_BASE:
            continue
        if row.stable or row.image_id in scope.in_use or any(t in scope.in_use for t in row.tags):
            continue
        if not scope.all_users and row.built_by_uid != scope.uid:
            continue
        if row.image_id in scope.keep_ids or any(t in scope.keep for t in row.tags):
            continue
        if row.project and row.project in scope.keep_projects:
            continue
        out.append(row)
    going = {r.image_id for r in out}
    still_on = {r.base_recipe for r in rows if r.role != L.ROLE_BASE and r.image_id not in going and r.base_recipe}
    return [r for r in out if not (r.role == L.ROLE_BASE and r.base_recipe in still_on)]


def images_in_use(engine: EngineFacts) -> frozenset[str]:
    """Image ids (and refs) of every container on the engine, running or stopped, whoever made it."""
    used: set[str] = set()
    for c in engine.list_containers(()):
        used.update(x for x in (c.image, c.image_id) if x)
    return frozenset(used)


def prune(engine: ContainerEngine, scope: PruneScope, *, dry_run: bool = False) -> list[ImageRow]:
    """Remove what :func:`prune_selection` selects (``dry_run``: only say so)."""
    scope = replace(scope, in_use=scope.in_use | images_in_use(engine))
    removed = []
    for row in prune_selection(list_envman_images(engine), scope):
        if not dry_run:
            for t in row.tags or (row.image_id,):
                engine.remove_image(t)  # never forced: the engine refuses an image a container uses
            report = report_path(row.image_id)
            report.unlink(missing_ok=True)
        removed.append(row)
    return removed


__all__ = ["ImageRow", "PruneScope", "images_in_use", "list_envman_images", "prune", "prune_selection"]
