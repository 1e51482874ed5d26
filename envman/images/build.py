"""Build → smoke → promote.

* **Content-addressed**: a stack's candidate image is tagged ``envman/<stack>:<render hash>``.
  If that image exists, ``build`` does no Docker build at all.
* **One build per stack at a time**: a file lock per stack (``filelock``) makes a second
  ``envman build`` of the same stack wait, then reuse the image the first one built.
* **Promotion**: the stable tag ``envman/<stack>:latest`` moves only when the smoke test passes
  (or is ``cpu-only`` and the caller accepted that). A failing smoke leaves the previous stable
  image untouched; its report is kept.

Everything here talks to Docker through ``envman.engine.docker`` only.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable
import dataclasses

from envman.images.events import BuildStream
from envman.images.smokerun import held_run, remove_smoke_leftovers
# the listing and pruning of envman's images (envman.images.prune) stay importable from here
from envman.images.prune import ImageRow, PruneScope, images_in_use, list_envman_images, prune, prune_selection  # noqa: F401
from envman import labels as L
from envman.errors import BuildError, EnvmanError
from envman.engine.values import GpuRequest
from envman.state import (
    candidate_ref, load_report, locks_dir, logs_dir, safe_name, save_report_json, stable_ref,
)
from envman.probe import IN_IMAGE_PROBE, IN_IMAGE_STACK, parse_output
from envman.stack.names import Stack
from envman.stack.names import DEFAULT_PLATFORM

if TYPE_CHECKING:
    from envman.engine.api import BuildEvent, ContainerEngine, EngineFacts, ImageInfo
    from envman.engine.builder import Builder
    from envman.images.base import BaseResult
    from envman.render.base import BaseBuild
    from envman.render.dockerfile import BuildContext
    from envman.render.options import RenderOptions

#: Smoke outcomes, from the probe's ``overall``.
PASS, CPU_ONLY, FAIL = "pass", "cpu-only", "fail"


# --- build -----------------------------------------------------------------------------------


@dataclass
class BuildResult:
    stack: Stack
    ref: str  # candidate tag
    image_id: str
    render_hash: str
    cached: bool
    seconds: float
    log_path: str | None = None
    base: BaseResult | None = None  # the rebuilt base, when the stack has one


def _render(stack: Stack, options: RenderOptions | None, builder: str = "classic",
            base: BaseBuild | None = None) -> BuildContext:
    from envman.render.dockerfile import render_stack
    from envman.render.options import RenderOptions

    return render_stack(stack, options or RenderOptions(), builder=builder, base=base)


def _builder(engine: ContainerEngine, builder: Builder | None) -> Builder:
    """``builder``, or the engine's classic builder."""
    from envman.engine.builder import ClassicBuilder

    return builder if builder is not None else ClassicBuilder(engine)


def build_stack(
    engine: ContainerEngine,
    stack: Stack,
    options: RenderOptions | None = None,
    *,
    nocache: bool = False,
    pull: bool = False,
    on_event: Callable[[BuildEvent], None] | None = None,
    lock_timeout: float = 3600,
    builder: Builder | None = None,
    base: BaseBuild | None = None,
) -> BuildResult:
    """Render and build ``stack`` unless its content-addressed candidate already exists.

    ``builder`` (``envman.engine.builder.select_builder``) picks the Dockerfile dialect and runs the
    build; by default the engine's classic builder. Its secrets (index credentials) go to the
    builder only, never to the log or the context. ``base`` (``envman.render.base.rebuilt_base``):
    the stack's base rebuilt from NVIDIA's recipe, built first unless the engine has it
    (``envman.images.base``); ``pull`` then applies to the base's own plain OS image."""
    from filelock import FileLock, Timeout

    t0 = time.perf_counter()
    run = _builder(engine, builder)
    ctx = _render(stack, options, run.kind, base)
    ref = candidate_ref(stack.name, ctx.render_hash)
    locks_dir().mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(locks_dir() / f"{safe_name(stack.name)}.lock"))
    try:
        lock.acquire(timeout=lock_timeout)
    except Timeout:
        raise EnvmanError(
            f"another envman build of {stack.name} has held its lock for {lock_timeout:.0f} s",
            where=str(lock.lock_file),
            fix="wait for it to finish, or remove the lock file if no envman process is running",
        )
    try:
        from envman.images.provenance import built_here, pinned_context, record_built, upstream_pins

        base_result = None
        if base is not None:  # first: the base's image ID is part of the stack's cache key
            from envman.images.base import ensure_base

            base_result = ensure_base(engine, run, base, nocache=nocache, pull=pull, on_event=on_event)
            pull = False  # the stack starts FROM the local envman/base image: nothing to pull
        # the images the stack starts FROM that envman did not build here: each used by its digest or
        # ID when vouched for, else pulled (a local tag of that name is anyone's)
        skip = (base_result.ref,) if base_result is not None else ()
        upstream = upstream_pins(engine, ctx.dockerfile, skip=skip)
        base_id = " ".join([base_result.image_id] if base_result is not None else upstream.ids)
        existing = engine.inspect_image(ref)
        # reused only when this user built it on this base: anyone on the engine can tag an image
        if existing and not nocache and not upstream.planted and L.parse(existing.labels).render_hash == ctx.render_hash \
                and built_here(existing.id, base=base_id):
            return BuildResult(stack, ref, existing.id, ctx.render_hash, True, time.perf_counter() - t0,
                               base=base_result)
        logs_dir().mkdir(parents=True, exist_ok=True)
        log_path = logs_dir() / f"{safe_name(stack.name)}-{ctx.render_hash[:16]}.log"
        from envman.images.store import current_user

        labels = {**L.candidate_labels(stack.name, ctx.render_hash, *current_user()), **L.cleared_smoke_labels()}
        if getattr(ctx, "content_hash", ""):
            labels[L.CONTENT_HASH] = ctx.content_hash  # the identity a pull checks (network options aside)
        from envman.images.wheelstore import served
        from envman.render.options import RenderOptions

        with open(log_path, "w") as log, served(run, stack, options or RenderOptions()) as (run_with_store, store):
            for line in [*(f"wheel store: fetched {f}" for f in store.fetched), *store.notes]:
                log.write(f"envman: {line}\n")
            stream = BuildStream(log=log, on_event=on_event)  # its step: the one running when a build fails
            # FROM the base's ID: its tag is anyone's to move between ensure_base and the FROM step
            pins = {**upstream.pins, **({base_result.ref: base_result.image_id} if base_result is not None else {})}
            try:
                with pinned_context(engine, run, {n: (d, ctx.modes[n]) for n, d in ctx.files.items()}, pins) as tar:
                    stream.read(run_with_store.build(tar, ref, labels=labels, nocache=nocache, pull=pull or upstream.pull,
                                                     secrets=ctx.secrets, **_platform_kw(stack)))
            except BuildError as exc:
                log.write(f"\nenvman: build failed: {exc.what}\n")
                failed = BuildError(
                    f"build of {stack.name} failed: {exc.what}",
                    log_tail=exc.log_tail,
                    where=str(log_path),
                    fix="the failing step and its error lines follow (the full log is this file); fix the matrix "
                        "row or network options and rerun" + (UNVOUCHED_FIX if upstream.planted and not pull else ""),
                )
                failed.step = stream.step
                raise failed from None
        image_id = stream.image_id
        if image_id is None:
            info = engine.inspect_image(ref)
            image_id = info.id if info else ref
        if base_result is not None:
            _check_built_on(engine, image_id, base_result.image_id, base_result.ref)
        elif upstream.pull:  # pulled by the build: its ID is known now
            base_id = " ".join(upstream_pins(engine, ctx.dockerfile).ids)
        record_built(image_id, ref, base=base_id)
        return BuildResult(stack, ref, image_id, ctx.render_hash, False, time.perf_counter() - t0, str(log_path),
                           base=base_result)
    finally:
        lock.release()


#: What a failed build adds to its fix when it had to pull the image it starts from.
UNVOUCHED_FIX = ("; the image it starts FROM was pulled, as the one of that name on this engine was neither "
                 "pulled from its registry nor built or imported by you (envman base make); an image you "
                 "made yourself is used when its ID is in ENVMAN_TRUSTED_IMAGES")


def _check_built_on(engine: ContainerEngine, image_id: str, base_id: str, base_ref: str) -> None:
    """The stack image's layers begin with the layers of the base envman ensured: the stack's
    ``FROM`` names the base by tag, which another engine user could move during the build."""
    image, base = engine.inspect_image(image_id), engine.inspect_image(base_id)
    if image is None or base is None or image.layers[:len(base.layers)] != base.layers:
        raise BuildError(f"the image built was not built on the base envman checked ({base_id[:19]}): "
                         f"{base_ref} was moved during the build", where=base_ref,
                         fix="build again; if it happens again, another user of the engine is re-tagging "
                             f"{base_ref} (docker image inspect {base_ref} names its builder)")


def _platform_kw(stack: Stack) -> dict[str, str]:
    """``platform=`` for the engine's build, only for a stack of a non-default platform (an amd64
    build asks nothing of the engine, as before stacks had platforms)."""
    return {} if stack.platform == DEFAULT_PLATFORM else {"platform": stack.platform}


# --- smoke -------------------------------------------------------------------------------------


@dataclass
class SmokeReport:
    stack: str
    image: str
    image_id: str
    overall: str  # pass | cpu-only | fail
    reason: str
    gpus_requested: bool
    probe: dict | None
    exit_code: int
    stderr_tail: str
    created: float = field(default_factory=time.time)
    promoted: bool = False
    verdict_image_id: str | None = None  # the image that carries this verdict in its labels

    @property
    def promotable_id(self) -> str:
        return self.verdict_image_id or self.image_id

    def to_json(self) -> dict:
        return asdict(self)


def gpu_mode(engine: EngineFacts, require_gpu: bool) -> bool:
    """Whether to request GPUs: when the engine can provide them, or when the user insists
    (then the engine's own error says how to install the NVIDIA runtime)."""
    return require_gpu or engine.info().gpu_mechanism() is not None


def smoke_image(
    engine: ContainerEngine,
    stack: Stack,
    image: str,
    image_id: str | None = None,
    *,
    require_gpu: bool = False,
    bench: bool = False,
    timeout: float = 900,
) -> SmokeReport:
    """Run the probe inside ``image``; the report goes into this user's cache and, for an image not
    yet promoted, the verdict onto the engine (a verdict image that the image's stack tags move
    to, see :mod:`envman.images.store`). A promoted image is never re-labelled: that would change
    the id its projects were built and locked on.

    The probe's container starts from the image ID the verdict is written for (``image_id``, else
    the one ``image`` names now), never from the tag: anyone on the engine can move a tag between
    the build and the probe, and a verdict is believed only for the layers it was taken on.
    ``image`` is kept for messages and the report."""
    if image_id is None:
        info = engine.inspect_image(image)
        image_id = info.id if info else image
    gpus = gpu_mode(engine, require_gpu)
    owner = str(os.getuid())
    cmd = ["python", IN_IMAGE_PROBE, "--expect", IN_IMAGE_STACK]
    if require_gpu:
        cmd.append("--require-gpu")
    if bench:
        cmd.append("--bench")
    with held_run() as token:  # held while the probe's container exists: another build's sweep leaves it
        remove_smoke_leftovers(engine, owner)
        res = engine.run(
            image_id,
            cmd,
            gpus=GpuRequest("all") if gpus else None,
            labels={**L.smoke_labels(stack.name), L.BUILT_BY_UID: owner, L.SMOKE_RUN: token},
            timeout=timeout,
            network="none",
        )
    overall, reason, probe = judge_probe(stack, res.stdout, res.stderr, res.exit_code,
                                         timed_out=res.timed_out, timeout=timeout)
    report = SmokeReport(
        stack=stack.name,
        image=image,
        image_id=image_id,
        overall=overall,
        reason=reason,
        gpus_requested=gpus,
        probe=probe,
        exit_code=res.exit_code,
        stderr_tail="\n".join(res.stderr.strip().splitlines()[-20:]),
    )
    from envman.images.store import record_verdict

    stable = engine.inspect_image(stable_ref(stack))
    if stable is None or stable.id != image_id:
        verdict_id = record_verdict(engine, stack.name, report.to_json())
        report.verdict_image_id = verdict_id if verdict_id != image_id else None
    # else: a promoted image keeps its id (project images and their locks are built FROM it):
    # its new verdict is this user's report, which readers take when it is newer than the labels
    save_report(report)
    return report


#: The stack fields the probe's expectations must agree on with the stack being smoke-tested.
EXPECT_KEYS = ("framework", "framework_version", "cuda")


def judge_probe(stack: Stack, stdout: str, stderr: str, exit_code: int, *, timed_out: bool = False,
                timeout: float = 0) -> tuple[str, str, dict | None]:
    """``(overall, reason, document)`` of one probe run in ``stack``'s image.

    The probe's own verdict counts only when it ran against this stack's expectations: a
    document that says they were not found, or found for another stack, is a failure, since
    then the runtime and framework checks compared against nothing.
    """
    if timed_out:
        return FAIL, f"probe timed out after {timeout:.0f} s", None
    try:
        probe = parse_output(stdout)
    except ValueError as exc:
        tail = (stderr.strip().splitlines() or ["no output"])[-1]
        return FAIL, f"probe printed no result (exit {exit_code}): {exc}; stderr: {tail}", None
    overall, reason = probe["overall"], str(probe.get("reason", ""))
    raw_expect = probe.get("expect")
    expect: dict[str, Any] = raw_expect if isinstance(raw_expect, dict) else {}
    if not expect.get("found"):
        return FAIL, (f"the probe ran without the stack's expectations ({expect.get('path') or 'none given'}): "
                      "nothing was checked against the stack; rebuild the image"), probe
    raw_found = expect.get("stack")
    found: dict[str, Any] = raw_found if isinstance(raw_found, dict) else {}
    want = stack.to_json()
    differ = [k for k in EXPECT_KEYS if found.get(k) != want[k]]
    if differ:
        what = ", ".join(f"{k} {found.get(k)!r} (not {want[k]!r})" for k in differ)
        return FAIL, f"the probe's expectations are for another stack: {what}; rebuild the image", probe
    return overall, reason, probe


def save_report(report: SmokeReport) -> Path:
    """This user's cached copy of a report, under the tested image's id and the verdict image's."""
    if report.verdict_image_id:
        save_report_json(report.verdict_image_id, report.to_json())
    return save_report_json(report.image_id, report.to_json())


#: The type of each field of a cached report as :meth:`SmokeReport.to_json` writes it.
_REPORT_TYPES: dict[str, tuple[type, ...]] = {
    "stack": (str,), "image": (str,), "image_id": (str,), "overall": (str,), "reason": (str,),
    "gpus_requested": (bool,), "probe": (dict, type(None)), "exit_code": (int,), "stderr_tail": (str,),
    "created": (int, float), "promoted": (bool,), "verdict_image_id": (str, type(None)),
}


def report_from_json(data: object) -> SmokeReport | None:
    """A cached report read back, or ``None`` unless it has every field :class:`SmokeReport` needs,
    each of its type (a finite ``created``): the cache is this user's copy, never the truth."""
    import math

    if not isinstance(data, dict):
        return None
    fields = SmokeReport.__dataclass_fields__
    kept = {k: v for k, v in data.items() if k in fields}
    for k, types in _REPORT_TYPES.items():
        if k not in kept:
            f = fields[k]
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                return None  # a field the report cannot be made without
            continue
        v = kept[k]
        if not isinstance(v, types) or (isinstance(v, bool) and bool not in types):
            return None
    if "created" in kept and not math.isfinite(kept["created"]):
        return None
    return SmokeReport(**kept)


# --- promote -----------------------------------------------------------------------------------


def promote(engine: ContainerEngine, report: SmokeReport, *, accept_cpu_only: bool = False,
            stable_tag: str | None = None) -> bool:
    """Move the stable tag (``stable_tag``: the stack's :func:`~envman.state.stable_ref`; by default
    that of a shipped stack of the report's name) to the smoke-tested image when its result allows it."""
    ok = report.overall == PASS or (report.overall == CPU_ONLY and accept_cpu_only)
    if not ok:
        return False
    ref = stable_tag or stable_ref(report.stack)
    stable = engine.inspect_image(ref)
    if stable is not None and stable.id == report.promotable_id:
        if not report.promoted:
            report.promoted = True
            save_report(report)
        return True  # already there: a no-op build writes nothing
    engine.tag(report.promotable_id, ref)
    report.promoted = True
    save_report(report)
    return True


def stable_image(engine: EngineFacts, stack: Stack | str) -> ImageInfo | None:
    return engine.inspect_image(stable_ref(stack))


@dataclass
class PipelineResult:
    build: BuildResult
    smoke: SmokeReport | None
    promoted: bool

    @property
    def ok(self) -> bool:
        return self.smoke is not None and self.smoke.overall != FAIL


def build_smoke_promote(engine: ContainerEngine, stack: Stack, options: RenderOptions | None = None,
                        **keywords: Any) -> PipelineResult:
    """Build (or reuse) the candidate, smoke-test it unless a kept report still holds, promote it
    when the result allows (the keywords: :func:`run_pipeline`'s). ``on_event`` gets the build's
    events, ``on_phase`` each phase as it starts: ``build``, then ``cached`` or ``built``, then
    ``smoke`` when the probe runs. Raises the error that stopped it (:func:`run_pipeline` records
    it instead)."""
    return run_pipeline(engine, stack, options, **keywords).result()


#: The stages of :func:`run_pipeline`, in order: where a :class:`PipelineRun` stopped.
STAGES = ("build", "smoke", "promote")


@dataclass
class PipelineRun:
    """What :func:`run_pipeline` did for one stack, stage by stage, up to the error that stopped it
    (a stack's own failure is recorded here, never raised)."""

    build: BuildResult | None = None
    smoke: SmokeReport | None = None
    promoted: bool = False
    error: EnvmanError | None = None
    stage: str | None = None  # one of STAGES: where ``error`` stopped the pipeline
    seconds: dict[str, float] = field(default_factory=dict)  # per stage that ran (no probe run: no "smoke")

    def result(self) -> PipelineResult:
        """The finished pipeline's result; raises the error that stopped it."""
        if self.error is not None:
            raise self.error
        assert self.build is not None  # no error: every stage ran
        return PipelineResult(self.build, self.smoke, self.promoted)


def run_pipeline(
    engine: ContainerEngine,
    stack: Stack,
    options: RenderOptions | None = None,
    *,
    nocache: bool = False,
    pull: bool = False,
    require_gpu: bool = False,
    accept_cpu_only: bool = False,
    on_event: Callable[[BuildEvent], None] | None = None,
    on_phase: Callable[[str], None] | None = None,
    builder: Builder | None = None,
    base: BaseBuild | None = None,
    retest: bool = False,
    smoke_timeout: float | None = None,
) -> PipelineRun:
    """:func:`build_smoke_promote`, stage by stage: the build, the smoke test (always with
    ``retest``, never trusting a verdict the cached image carries; killed after ``smoke_timeout``
    seconds) and the promotion, each recorded as it ends; an :class:`~envman.errors.EnvmanError`
    stops it and is recorded with its stage."""
    phase = on_phase or _unheard
    run = PipelineRun()
    t0 = time.perf_counter()
    try:
        run.stage = "build"
        phase("build")
        b = run.build = build_stack(engine, stack, options, nocache=nocache, pull=pull, on_event=on_event,
                                    builder=builder, base=base)
        run.seconds["build"] = b.seconds
        phase("cached" if b.cached else "built")
        run.stage, t0 = "smoke", time.perf_counter()
        rep = kept_report(engine, b) if b.cached and not retest else None
        if rep is None or rep.overall == FAIL or (require_gpu and rep.overall != PASS):
            phase("smoke")
            rep = smoke_image(engine, stack, b.ref, b.image_id, require_gpu=require_gpu) if smoke_timeout is None \
                else smoke_image(engine, stack, b.ref, b.image_id, require_gpu=require_gpu, timeout=smoke_timeout)
            run.seconds["smoke"] = time.perf_counter() - t0
        run.smoke = rep
        run.stage = "promote"
        run.promoted = promote(engine, rep, accept_cpu_only=accept_cpu_only, stable_tag=stable_ref(stack))
    except EnvmanError as exc:
        run.error = exc
        if run.stage in ("build", "smoke"):
            run.seconds.setdefault(run.stage, time.perf_counter() - t0)
        return run
    run.stage = None
    return run


def _unheard(phase: str) -> None:
    """Where the phases go when no one listens."""


def expected_render_hashes(stack: Stack, options: RenderOptions | None = None) -> frozenset[str]:
    """The render hashes this host gives ``stack`` with ``options`` (default: the user config's),
    in each builder dialect: what a pulled image's ``envman.render-hash`` must be one of to be
    the image this host would build (the same recipe, envman version and network options)."""
    return frozenset(_render(stack, options, kind).render_hash for kind in ("classic", "buildkit"))


def expected_content_hash(stack: Stack) -> str:
    """The identity this host gives ``stack``'s image (:func:`envman.render.dockerfile.content_hash`):
    what a pulled image's ``envman.content-hash`` must be, whatever network options built it."""
    return _render(stack, None, "classic").content_hash


def kept_report(engine: EngineFacts, b: BuildResult) -> SmokeReport | None:
    """The verdict a cached candidate already carries (its labels, whoever ran the smoke test;
    else this user's cached report), as a report; ``None`` when it has none."""
    from envman.images.store import image_verdict

    info = engine.inspect_image(b.image_id)
    verdict = image_verdict(info)
    if verdict is None:
        return None
    cached = load_report(b.image_id)
    kept = report_from_json(cached) if cached and cached.get("overall") == verdict.status else None
    if kept is not None:
        rep = kept
    else:
        rep = SmokeReport(stack=b.stack.name, image=b.ref, image_id=verdict.image_id or b.image_id,
                          overall=verdict.status, reason=verdict.reason, gpus_requested=verdict.gpus_requested,
                          probe=None, exit_code=0 if verdict.status != FAIL else 1, stderr_tail="")
    if verdict.image_id and verdict.image_id != b.image_id:
        rep.verdict_image_id = b.image_id
    if rep.promotable_id != b.image_id and engine.inspect_image(rep.promotable_id) is None:
        # A cached report naming a verdict image that was removed since: not a verdict to keep
        # (promoting it would fail with "No such image" on every retry); test again.
        return None
    return rep
