"""Many stacks at once: which ones (names or every row), the base each stands on, and each one
rendered, or built, smoke-tested and promoted. ``envman build``, ``envman render`` and
``envman ci run`` call these; the command line parses flags and prints what they return.

* :func:`select_stacks` resolves names (through the stack cache, as a run does) or every row of a
  platform.
* :func:`plan_stacks` gives each stack its base (:func:`stack_base`): pulled, or rebuilt from
  NVIDIA's recipe under ``--base``, with the line that says so when that is news.
* :func:`build_stacks` builds the plans on a thread pool (``--jobs``), each through
  :func:`envman.images.build.run_pipeline`, and returns one :class:`StackBuild` per stack, in
  order: what each stage did and the error that stopped it (a stack's own failure is its result,
  never an exception; a base that could not be pulled is told apart, :attr:`StackBuild.unpulled_base`).
  ``envman ci run`` builds its rows through it, one at a time on its engine.
* :func:`render_stacks` writes every plan's build context, one directory each.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence
from contextlib import nullcontext

from envman.errors import EnvmanError, UserError

if TYPE_CHECKING:
    from envman.config import BaseMode
    from envman.engine.api import BuildEvent, ContainerEngine
    from envman.engine.builder import Builder
    from envman.images.build import PipelineResult, PipelineRun
    from envman.matrix.model import Matrix
    from envman.matrix.source import MatrixSource
    from envman.render.base import BaseBuild
    from envman.render.options import RenderOptions
    from envman.stack.names import Stack


def select_stacks(source: MatrixSource, names: Sequence[str], all_: bool, platform: str | None = None) -> list[Stack]:
    """The stacks ``names`` name, or every row of ``platform`` (default: amd64) with ``all_``:
    exactly one of them. Named stacks of the default platform resolve through the stack cache (no
    matrix load when it answers)."""
    from envman.stack.names import DEFAULT_PLATFORM
    from envman.stack.resolve import resolve, resolve_row

    if bool(names) == bool(all_):
        raise UserError("give stack names or --all, not both and not neither", where="envman build", fix="e.g. envman build torch-2.4-cuda12")
    if all_:
        m = source.matrix
        on = platform or DEFAULT_PLATFORM
        return [resolve_row(m, b, on) for b in m.builds if on in b.platforms]
    if platform is None:  # through the stack cache, as a run resolves: no matrix load when it answers
        return [source.resolve(n) for n in names]
    return [resolve(source.matrix, n, platform) for n in names]


def stack_base(matrix: Matrix | Callable[[], Matrix], stack: Stack, mode: BaseMode,
               options: RenderOptions | None) -> BaseBuild | None:
    """The base ``stack`` is rebuilt as under ``mode`` with ``options``' mirrors and CA bundle, or
    ``None`` when it is pulled (:func:`envman.render.base.rebuilt_base`)."""
    from envman.render.base import rebuilt_base

    return rebuilt_base(matrix, stack, mode, registry_mirror=getattr(options, "registry_mirror", None),
                        apt_mirror=getattr(options, "apt_mirror", None), ca_bundle=getattr(options, "ca_bundle", None))


@dataclass(frozen=True)
class StackPlan:
    """A stack and the base it stands on."""

    stack: Stack
    base: BaseBuild | None  # rebuilt from NVIDIA's recipe; None: pulled
    note: str | None  # how it gets its base, when that is news (envman.render.base.base_line)


def plan_stacks(stacks: Sequence[Stack], matrix: Matrix | Callable[[], Matrix], mode: BaseMode,
                options: RenderOptions) -> list[StackPlan]:
    """Each stack with its base under ``mode``. ``matrix`` may be a function that loads it: it is
    called only when a recipe is looked up."""
    from envman.render.base import base_line

    plans = []
    for stack in stacks:
        base = stack_base(matrix, stack, mode, options)
        plans.append(StackPlan(stack, base, base_line(stack, base, mode, registry_mirror=options.registry_mirror)))
    return plans


def render_stacks(plans: Sequence[StackPlan], options: RenderOptions, builder: str, root: Path) -> int:
    """Each plan's build context written to ``root/<stack>`` (one probe archive on disk, hard-linked
    into every context); two rows resolving to one stack are rendered once, two different stacks
    of one name are an error. Returns the number of contexts written."""
    from envman.render.dockerfile import render_stack

    seen: dict[str, Stack] = {}
    shared: dict[Any, Any] = {}  # one probe archive on disk, hard-linked into every context
    for plan in plans:
        stack = plan.stack
        if stack.name in seen:
            if seen[stack.name] == stack:  # two rows resolving to one stack: render it once
                continue
            raise UserError(
                f"rows {seen[stack.name].row} and {stack.row} both resolve to the stack name {stack.name}",
                where="envman render --all",
                fix="make the rows differ in version, CUDA or Python (envman matrix validate)",
            )
        seen[stack.name] = stack
        render_stack(stack, options, builder=builder, base=plan.base).write(root / stack.name, shared)
    return len(seen)


@dataclass(frozen=True)
class BuildRequest:
    """What ``envman build`` and ``envman ci run`` ask of every stack."""

    options: RenderOptions
    builder: str  # auto | buildkit | classic (envman.engine.builder.select_builder)
    nocache: bool = False
    pull: bool = False
    require_gpu: bool = False
    accept_cpu_only: bool = False
    jobs: int = 1
    retest: bool = False  # smoke-test a cached image even when it carries a verdict (ci run: each run its own)
    smoke_timeout: float | None = None  # seconds before the probe is killed; None: the smoke test's default


class BuildListener(Protocol):
    """Who hears the builds as they go: each stack's build events and phases (``build``,
    ``cached``/``built``, ``smoke``, then ``done`` or ``failed``), from the build threads."""

    def event(self, name: str, event: BuildEvent) -> None: ...

    def phase(self, name: str, phase: str) -> None: ...


@dataclass(frozen=True)
class StackBuild:
    """One stack's outcome: what the pipeline did, stage by stage, up to the error that stopped it."""

    plan: StackPlan
    run: PipelineRun

    @property
    def result(self) -> PipelineResult | None:
        """The finished pipeline's result; ``None`` when an error stopped it."""
        return None if self.run.error is not None else self.run.result()

    @property
    def error(self) -> EnvmanError | None:
        return self.run.error

    @property
    def failed(self) -> bool:
        """A failed build, a failed smoke test, or an image that was not promoted."""
        from envman.images.build import FAIL

        if self.result is None:
            return True
        smoke = self.result.smoke
        return smoke is None or smoke.overall == FAIL or not self.result.promoted

    @property
    def unpulled_base(self) -> str | None:
        """One line on why this stack could not be attempted here, when its build stopped because
        the image it starts from could not be pulled (no registry reachable: the build log's
        error lines are of the ``registry`` class, :mod:`envman.images.failure`); else ``None``."""
        from envman.images.failure import CLASSES, summarize

        exc = self.run.error
        if exc is None or self.run.stage != "build":
            return None
        why = summarize(getattr(exc, "what", ""), getattr(exc, "log_tail", ""), getattr(exc, "step", None))
        if why.error_class != "registry":
            return None
        cls = next(c for c in CLASSES if c.name == "registry")
        base = self.plan.base
        image = f"base image {self.plan.stack.base_image}" if base is None else f"the OS image {base.ref} is rebuilt from"
        return f"{image} could not be pulled: {cls.hint}"  # the hint begins with the reason

    def row(self) -> dict[str, Any]:
        """The stack's result as ``envman build --json`` prints it."""
        from envman.state import stable_ref

        stack = self.plan.stack
        if self.result is None:
            return _failure_row(stack.name, self.error)
        res, smoke = self.result, self.result.smoke
        assert smoke is not None  # build_smoke_promote always smoke-tests or keeps a verdict
        return {
            "name": stack.name, "image": res.build.ref, "image_id": res.build.image_id, "cached": res.build.cached,
            "build_seconds": round(res.build.seconds, 2), "smoke": smoke.overall, "reason": smoke.reason,
            "promoted": res.promoted, "stable": stable_ref(stack) if res.promoted else None,
            "log": res.build.log_path,
            **({"base": res.build.base.ref, "base_cached": res.build.base.cached,
                "base_seconds": round(res.build.base.seconds, 2)} if res.build.base is not None else {}),
        }


def _failure_row(name: str, exc: EnvmanError | None) -> dict[str, Any]:
    """A stack whose build failed: the error, the failing step and its error lines, and a hint."""
    from envman.images.failure import reason_of, summarize, without_script

    assert exc is not None
    tail = getattr(exc, "log_tail", "")
    why = summarize(getattr(exc, "what", ""), tail, getattr(exc, "step", None)).after(exc.fix) if tail else None
    error = without_script(exc.line())
    if why is not None and why.error_class:
        error = f"{reason_of(why.error_class)}: {error}"
    return {"name": name, "result": "build-failed", "error": error, "log_tail": tail,
            "failing_step": why.step if why else None, "error_lines": list(why.errors) if why else [],
            "error_class": why.error_class if why else None, "hint": why.hint if why else None}


class _Unheard:
    def event(self, name: str, event: BuildEvent) -> None:
        """No one listens."""

    def phase(self, name: str, phase: str) -> None:
        """No one listens."""


def build_stacks(plans: Sequence[StackPlan], request: BuildRequest, *, listener: BuildListener | None = None,
                 started: Callable[[], object] | None = None, engine: ContainerEngine | None = None,
                 builder: Builder | None = None) -> list[StackBuild]:
    """Build, smoke-test and promote every plan (``request.jobs`` at a time), each on its own
    connection to the engine, or all on ``engine`` when one is given. The engine and the builder
    are checked first (one line, before any work), unless ``builder`` was already chosen
    (:func:`choose_builder`); then ``started`` is called, then the builds run. Returns one result
    per plan, in order; a stack's own failure is its result (:class:`StackBuild`)."""
    from concurrent.futures import ThreadPoolExecutor

    from envman.config import load_build_network
    from envman.engine.builder import ClassicBuilder
    from envman.engine.docker import Engine
    from envman.images.build import run_pipeline

    hear = listener or _Unheard()
    network = load_build_network()
    if builder is None:
        with (nullcontext(engine) if engine is not None else Engine.connect()) as first:  # fail fast, one line
            builder = choose_builder(first, request.builder, network=network)
    chosen = builder
    if started is not None:
        started()

    def one(plan: StackPlan) -> StackBuild:
        name = plan.stack.name
        with (nullcontext(engine) if engine is not None else Engine.connect()) as eng:
            run = run_pipeline(
                eng, plan.stack, request.options, nocache=request.nocache, pull=request.pull,
                require_gpu=request.require_gpu, accept_cpu_only=request.accept_cpu_only,
                on_event=lambda ev: hear.event(name, ev), on_phase=lambda ph: hear.phase(name, ph),
                # classic: a builder on this thread's engine
                builder=chosen if chosen.kind == "buildkit" or eng is engine else ClassicBuilder(eng, network=network),
                base=plan.base, retest=request.retest, smoke_timeout=request.smoke_timeout,
            )
        hear.phase(name, "failed" if run.error is not None or not run.result().ok else "done")
        return StackBuild(plan, run)

    with ThreadPoolExecutor(max_workers=request.jobs) as pool:
        return list(pool.map(one, plans))


def choose_builder(engine: ContainerEngine, preference: str, *, network: str | None = None) -> Builder:
    """The builder ``preference`` (auto | buildkit | classic) names on ``engine``, its RUN steps on
    the user config's ``[build] network`` unless ``network`` is given."""
    from envman.config import load_build_network
    from envman.engine.builder import select_builder

    return select_builder(engine, preference, network=network if network is not None else load_build_network())


__all__ = ["BuildListener", "BuildRequest", "StackBuild", "StackPlan", "build_stacks", "choose_builder", "plan_stacks",
           "render_stacks",
           "select_stacks", "stack_base"]
