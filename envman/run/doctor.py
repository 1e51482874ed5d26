"""``envman doctor`` and ``envman ls``: every registered project's stack, image, smoke and verdict
on this host (or on a host the user describes), and the host and engine facts behind them.

Pure over what the caller gathers (host facts, an engine or ``None``, a stack resolver); the
checks themselves are :func:`envman.run.preflight.preflight`'s, so ``doctor`` says what ``run`` would.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from envman.engine.gpurequests import NVIDIA_TOOLKIT_FIX
from envman.errors import EnvmanError, ResolveError, UserError
from envman.project.file import load_project
from envman.project.settings import CliOverrides, merge_settings
from envman.run.plan import ERROR, WARNING
from envman.run.preflight import ImageState, Problem, gpu_verdicts, preflight, selected_gpus
from envman.run.prepare import choose_base, image_state
from envman.stack.names import Stack

if TYPE_CHECKING:
    import datetime

    from envman.engine.api import EngineFacts
    from envman.host import HostFacts, HostGpu
    from envman.matrix.model import Matrix
    from envman.matrix.source import MatrixSource
    from envman.project.settings import UserConfig


@dataclass
class ProjectRow:
    name: str
    root: str
    stack: str | None = None  # canonical stack name
    stack_query: str | None = None  # as written in the project file
    image: str | None = None  # what a run uses: the project image or the stack's promoted image
    image_status: str = "unknown"  # present | missing | builds on first run | unknown
    smoke: str | None = None
    verdict: str | None = None  # worst over the GPUs a default run uses; "cpu" for CPU runs
    gpus: str | None = None
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["problems"] = [p.to_json() for p in self.problems]
        return d


_WORST = ("arch_unsupported", "driver_too_old", "no-gpu", "unknown", "jit_only", "ok", "cpu")


def project_rows(
    registry: Mapping[str, Path],
    *,
    engine: EngineFacts | None,
    host: HostFacts,
    resolve_name: Callable[[str], Stack],
    user: UserConfig,
    suggest_for: Callable[[Stack, HostFacts, Sequence[HostGpu]], str | None],
    what_if: bool = False,
    missing_files_hint: Callable[[str], str | None] = lambda query: None,
) -> list[ProjectRow]:
    """One row per registered project: its stack, image, smoke and verdict on ``host``.

    ``engine`` may be ``None`` (unreachable): image columns then say ``unknown``. A stack name
    that does not resolve says why when ``missing_files_hint`` knows (``MatrixSource``'s).
    """
    from envman.project.image import project_image_ref
    from envman.state import stable_ref

    info = None
    if engine is not None and not what_if:
        try:
            info = engine.info()
        except EnvmanError:
            info = None
    rows = []
    for name, root in registry.items():
        row = ProjectRow(name=name, root=str(root))
        rows.append(row)
        try:
            proj = load_project(root)
            row.stack_query = proj.stack
            settings = merge_settings(proj, user, CliOverrides(), stack_is_cpu=lambda s: _is_cpu(resolve_name, s))
            row.stack_query = settings.stack
            stack = resolve_name(settings.stack)
        except EnvmanError as exc:
            row.problems.append(Problem(ERROR, "project", _why_invalid(exc, row.stack_query, missing_files_hint)))
            continue
        row.stack = stack.name
        row.gpus = str(settings.gpus) if settings.gpus else "none"
        img = ImageState(stable_ref(stack), None)
        if engine is not None:
            try:
                img = choose_base(engine, proj, stack)[0]  # what a run would stand on (its pin)
            except EnvmanError as exc:
                row.problems.append(Problem(ERROR, "engine", exc.line()))
                engine = None
        row.image, row.smoke = img.ref, img.smoke
        if engine is None:
            row.image_status = "unknown"
        elif img.image_id is None:
            row.image_status = "missing"
        else:
            row.image_status = "present"
            if proj.needs_image:
                row.image = project_image_ref(proj, stack.name, img.image_id)
                row.image_status = "present" if engine.inspect_image(row.image) else "builds on first run"
        if settings.gpus is None:
            row.verdict = "cpu"
        elif not host.has_gpu:
            row.verdict = "no-gpu"
        else:
            chosen, _ = selected_gpus(host, settings.gpus)
            vs = gpu_verdicts(stack, host, chosen)
            row.verdicts = [v.to_json() for v in vs]
            row.verdict = min((v.verdict for v in vs), key=_WORST.index, default="unknown")
        probs = preflight(stack, settings.gpus, host=host, engine_info=info, image=img,
                          suggest=suggest_for, what_if=what_if)
        if engine is None:
            probs = [p for p in probs if p.check not in ("image", "smoke")]
        row.problems += probs
    return rows


def _why_invalid(exc: EnvmanError, query: str | None, missing_files_hint: Callable[[str], str | None]) -> str:
    """The error of a project whose stack does not resolve, with the matrix file it came from
    when one was recorded and is not loaded now (:mod:`envman.stack.origins`)."""
    hint = missing_files_hint(query) if isinstance(exc, ResolveError) and query else None
    if hint is None:
        return exc.line()
    return f"stack {query!r} is unknown to the loaded matrix: {hint}"


def what_if_host(real: HostFacts, matrix: MatrixSource, *, driver: str | None = None, gpu: str | None = None,
                 sm: str | None = None) -> HostFacts:
    """The host ``doctor --driver/--gpu/--sm`` asks about: ``real`` with another driver, or a
    hypothetical GPU (a GPU of ``matrix`` by name, or a compute capability) on a driver."""
    from envman.host import what_if
    from envman.matrix.model import Arch, DriverVersion

    if driver is not None:
        try:
            DriverVersion.parse_option(driver)
        except ValueError as exc:
            raise UserError(str(exc), where="--driver", fix="e.g. --driver 535.104.05") from None
    if gpu is not None and sm is not None:
        raise UserError("give --gpu or --sm, not both", where="envman doctor", fix="drop one of them")
    name, cc = None, None
    if sm is not None:
        try:
            cc = str(Arch.parse(sm))
        except ValueError as exc:
            raise UserError(str(exc), where="--sm", fix="e.g. --sm 8.6") from None
        name = "hypothetical GPU"
    elif gpu is not None:
        from envman.matrix.gpus import unknown_gpu

        m = matrix.matrix
        g = m.gpu(gpu)
        if g is None:
            what, fix = unknown_gpu(m.gpu_index, gpu)
            raise UserError(what, where="--gpu", fix=fix)
        name, cc = g.name, str(g.cc)
    drv = driver or real.driver
    if cc is None:  # --driver alone: this host's GPUs with another driver
        assert drv is not None  # --driver was given
        if not real.has_gpu:
            raise UserError("this host has no GPU to ask about", where="--driver", fix="add --gpu NAME or --sm X.Y")

        return replace(real, driver=drv, source="what-if", cuda_driver=None, note="this host's GPUs with driver " + drv)
    if drv is None:
        raise UserError("this host has no NVIDIA driver to assume", where="envman doctor", fix="add --driver VERSION")
    assert name is not None  # set with cc, by --gpu or --sm
    return what_if(drv, cc, name)


def _is_cpu(resolve_name: Callable[[str], Stack], name: str) -> bool:
    return resolve_name(name).is_cpu


def matrix_freshness(matrix: Matrix, today: datetime.date, updates: Mapping[str, list[str]] | None = None,
                     update_error: str | None = None) -> dict[str, Any]:
    """How old the matrix is: the newest release date its rows record, per framework and in
    all, and (when asked) what the index has that is newer."""
    import datetime

    newest: dict[str, tuple[str, str]] = {}  # framework -> (date, version)
    for b in matrix.builds:
        if b.released and (b.framework not in newest or b.released > newest[b.framework][0]):
            newest[b.framework] = (b.released, str(b.version))
    latest = max((d for d, _ in newest.values()), default=None)
    age = (today - datetime.date.fromisoformat(latest)).days if latest else None
    return {
        "newest_release": latest,
        "age_days": age,
        "frameworks": {fw: {"released": d, "version": v} for fw, (d, v) in sorted(newest.items())},
        "newest_version": {fw: str(max(b.version for b in matrix.builds if b.framework == fw))
                           for fw in sorted({b.framework for b in matrix.builds})},
        "updates": dict(updates) if updates is not None else None,
        "update_error": update_error,
    }


def matrix_problems(fresh: Mapping[str, Any]) -> list[Problem]:
    """What ``doctor`` says about the matrix's freshness (:func:`matrix_freshness`): warnings only."""
    out = []
    if fresh.get("update_error"):
        out.append(Problem(WARNING, "matrix", f"could not check the index for newer releases: {fresh['update_error']}"))
    for fw, versions in (fresh.get("updates") or {}).items():
        out.append(Problem(WARNING, "matrix", f"{fw} {', '.join(versions)} on the index, newer than the matrix: "
                           "envman matrix update -o FILE adds them (and [matrix] files in config.toml keeps FILE loaded)"))
    return out


def doctor_report(
    *,
    host: HostFacts,
    engine: EngineFacts | None,
    engine_error: str | None,
    rows: Sequence[ProjectRow],
    what_if: bool = False,
    matrix: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``envman doctor --json`` document (shape documented in docs/projects.md)."""
    engine_json: dict[str, Any] = {"reachable": engine is not None and engine_error is None, "error": engine_error}
    problems: list[Problem] = []
    if engine_error:
        problems.append(Problem(ERROR, "engine", engine_error))
    elif engine is not None:
        try:
            info = engine.info()
            mech = info.gpu_mechanism()
            engine_json.update(server_version=info.server_version, runtimes=list(info.runtimes),
                               nvidia_runtime=info.nvidia_runtime, cdi_nvidia=mech == "cdi",
                               gpu_mechanism=mech, engine=info.kind,
                               engine_version=info.version or info.server_version,
                               rootless=info.rootless, url=info.url, selected_by=info.source or None)
            if mech is None and host.has_gpu and not what_if:

                problems.append(Problem(ERROR, "gpu-runtime", "this host has NVIDIA GPUs but the Docker engine has no "
                                        f"NVIDIA runtime or CDI spec: {NVIDIA_TOOLKIT_FIX}"))
        except EnvmanError as exc:
            engine_json.update(reachable=False, error=exc.line())
            problems.append(Problem(ERROR, "engine", exc.line()))
    if matrix is not None:
        problems += matrix_problems(matrix)
    if not host.has_gpu:
        problems.append(Problem(WARNING, "host-gpu", f"{host.summary()}: GPU runs will fail; "
                                "run projects with --no-gpu (CPU) here"))
    ok = not any(p.level == ERROR for p in problems) and not any(
        p.level == ERROR for r in rows for p in r.problems)
    return {
        "host": {**host.to_json(), "summary": host.summary(), "what_if": what_if},
        "engine": engine_json,
        "problems": [p.to_json() for p in problems],
        "projects": [r.to_json() for r in rows],
        **({"matrix": dict(matrix)} if matrix is not None else {}),
        "ok": ok,
    }
