"""The smoke verdict of an image, kept on the image itself so every user of the engine reads it.

Image tags are engine-wide, but ``~/.local/state/envman`` is one user's: a verdict kept only
there is invisible to a colleague who runs the image another user promoted. So after a smoke test
envman builds a *verdict image*: ``FROM <tested image id>`` plus the ``envman.smoke.*`` labels
(status, reason, the report's digest, a summary of the checks, who ran it and when, and the digest
of the tested layers). Labels add no layer, so it costs no disk; the tags that pointed at the
tested image (the content-addressed candidate tag, the stable tag) move to it. The full report
stays in the user's state directory as a cache, keyed by both image ids.

A verdict is believed only for the layers it was taken on: :func:`image_verdict` checks
``envman.smoke.rootfs`` against the image's own layers, so an image built ``FROM`` a tested one
does not inherit its verdict.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from envman.digest import sha256
from envman.images.events import BuildStream
from envman import labels as L
from envman.state import load_report, repository, save_report_json

if TYPE_CHECKING:
    from envman.engine.api import ContainerEngine, ImageInfo

#: The Dockerfile of a verdict image: nothing but the base (labels come with the build request).
_VERDICT_DOCKERFILE = "FROM {image_id}\n"


def current_user() -> tuple[int, str]:
    """(uid, login name) of the invoking user; the name is the uid when it has no passwd entry."""
    import pwd

    uid = os.getuid()
    try:
        return uid, pwd.getpwuid(uid).pw_name
    except KeyError:
        return uid, str(uid)


def builder_labels() -> dict[str, str]:
    """``envman.built-by.*`` for the invoking user."""
    return L.builder_labels(*current_user())


#: A report's bookkeeping, which changes after the smoke test: not part of its digest.
_BOOKKEEPING = frozenset({"promoted", "verdict_image_id"})


def report_digest(report: Mapping[str, Any]) -> str:
    """``sha256:`` over the report (its smoke result, not its bookkeeping) as canonical JSON."""
    body = {k: v for k, v in report.items() if k not in _BOOKKEEPING}
    canon = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + sha256(canon.encode()).hexdigest()


def rootfs_digest(info: ImageInfo | None) -> str | None:
    """``sha256:`` over an inspected image's layer digests, or ``None`` when the engine gave none."""
    if info is None or not info.layers:
        return None
    return "sha256:" + sha256("\n".join(info.layers).encode()).hexdigest()


def checks_summary(probe: Mapping[str, Any] | None) -> str:
    """``name=status`` for each probe check, space-separated."""
    checks = probe.get("checks") if isinstance(probe, Mapping) else None  # a cached report's may be anything
    if not isinstance(checks, list):
        return ""
    return " ".join(f"{c.get('name')}={c.get('status')}" for c in checks if isinstance(c, Mapping))


def verdict_of_report(report: Mapping[str, Any], *, rootfs: str | None, uid: int, user: str,
                      at: int | None = None) -> L.SmokeVerdict:
    """The verdict labels a smoke report (``SmokeReport.to_json()``) gives its image."""
    return L.SmokeVerdict(
        status=str(report.get("overall")),
        reason=str(report.get("reason") or ""),
        report_digest=report_digest(report),
        checks=checks_summary(report.get("probe")),
        gpus_requested=bool(report.get("gpus_requested")),
        image_id=str(report.get("image_id") or "") or None,
        by_uid=uid,
        by_user=user,
        at=int(time.time()) if at is None else at,
        rootfs=rootfs,
    )


def image_verdict(info: ImageInfo | None) -> L.SmokeVerdict | None:
    """The smoke verdict of an inspected image: its labels first when they are about these very
    layers (``envman.smoke.rootfs`` present and equal to the image's own layers: a blank or
    missing one, or an image with a layer added on top, proves nothing), else this user's cached
    report for its id; ``None`` when neither has one."""
    if not info:
        return None
    verdict = L.parse_smoke(info.labels)
    if verdict is not None and (verdict.rootfs is None or verdict.rootfs != rootfs_digest(info)):
        verdict = None
    return newest(verdict, cached_verdict(info.id))


def newest(on_image: L.SmokeVerdict | None, cached: L.SmokeVerdict | None) -> L.SmokeVerdict | None:
    """The image's own verdict, unless this user's report for the same image is a later one (a
    smoke test rerun on a promoted image, which is never re-labelled: see ``smoke_image``)."""
    if on_image is None:
        return cached
    if (cached is not None and cached.at is not None and on_image.at is not None and cached.at >= on_image.at
            and cached.report_digest != on_image.report_digest):
        return cached
    return on_image


def cached_verdict(image_id: str) -> L.SmokeVerdict | None:
    """This user's cached report for ``image_id`` as a verdict."""
    rep = load_report(image_id) if image_id else None
    if not rep or not isinstance(rep.get("overall"), str) or rep["overall"] not in L.SMOKE_STATUSES:
        return None
    created = rep.get("created")
    return L.SmokeVerdict(status=rep["overall"], reason=str(rep.get("reason") or ""),
                          report_digest=report_digest(rep), checks=checks_summary(rep.get("probe")),
                          gpus_requested=bool(rep.get("gpus_requested")), image_id=image_id,
                          at=unix_time(created))


def unix_time(value: object) -> int | None:
    """A cached report's ``created`` as whole seconds, or ``None`` when it is not a finite number
    (NaN and infinities are JSON to Python's reader, and no integer)."""
    import math

    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return int(value)


def labels_verdict(labels: Mapping[str, str] | None, image_id: str) -> L.SmokeVerdict | None:
    """A verdict from a listed image's labels (no layers to check against), else the cache."""
    return newest(L.parse_smoke(labels), cached_verdict(image_id))


def same_repository(tag: str, repo: str) -> bool:
    """Whether ``tag`` is in ``repo`` (Podman may show ``localhost/`` or ``docker.io/library/``)."""
    for prefix in ("", "localhost/", "docker.io/library/", "docker.io/"):
        if tag.startswith(prefix + repo + ":"):
            return True
    return False


def record_verdict(engine: ContainerEngine, stack_name: str, report: Mapping[str, Any], *, move_tags: bool = True) -> str:
    """Put ``report``'s verdict on the engine: build the verdict image on the tested image and
    move the stack's tags that pointed at the tested image to it (with ``move_tags=False``, none:
    the verdict image gets a tag of its own, e.g. to be pushed). Returns the verdict image's id;
    the report is cached under both ids."""
    from envman.engine.context import deterministic_tar

    tested = str(report["image_id"])
    info = engine.inspect_image(tested)
    if info is None:
        return tested
    uid, user = current_user()
    verdict = verdict_of_report(report, rootfs=rootfs_digest(info), uid=uid, user=user)
    labels = {**L.builder_labels(uid, user), **verdict.to_labels()}
    for k, v in info.labels.items():
        if k in (L.BUILT_BY_UID, L.BUILT_BY_USER) and v:
            labels[k] = v  # who built the layers stays who built them
    repo = repository(stack_name)
    moving = [t for t in info.tags if same_repository(t, repo)] if move_tags else []
    files = {"Dockerfile": _VERDICT_DOCKERFILE.format(image_id=info.id).encode()}
    target = moving[0] if moving else f"{repo}:verdict-{report_digest(report)[7:23]}"
    new_id = BuildStream().read(engine.build(deterministic_tar(files), target, labels=labels)).image_id
    if new_id is None:
        built = engine.inspect_image(target)
        new_id = built.id if built is not None and built.id else tested
    for tag in moving[1:]:
        now = engine.inspect_image(tag)
        if now is not None and now.id == info.id:  # not moved by someone meanwhile
            engine.tag(new_id, tag)
    from envman.images.provenance import built_record, record_built

    tested_record = built_record(info.id)
    if tested_record is not None and new_id != info.id:  # a label on this user's image is this user's too
        record_built(new_id, target, base=str(tested_record.get("base", "")))
    save_report_json(tested, report)
    save_report_json(new_id, report)
    return new_id
