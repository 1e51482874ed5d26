"""Preflight (:func:`preflight`, pure): what would make ``envman run`` fail or surprise.

The engine answers; when GPUs are requested the engine has the NVIDIA runtime or a CDI spec and
the host has a driver and GPUs; the stack's verdict on every GPU the run will see (``jit_only``
warns, ``driver_too_old`` / ``arch_unsupported`` fail with a stack that would work); the promoted
image exists and its smoke test passed. A run that asked for GPUs and cannot get them fails; a
CPU run is asked for with ``--no-gpu``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence, cast

from envman.engine.gpurequests import NVIDIA_TOOLKIT_FIX
from envman.engine.values import GpuRequest
from envman.errors import ResolveError
from envman.run.plan import ERROR, RUNNABLE_SMOKE, WARNING
from envman.stack.names import Stack

if TYPE_CHECKING:
    from envman.engine.api import EngineInfo
    from envman.host import HostFacts, HostGpu
    from envman.matrix.model import Matrix


# --------------------------------------------------------------------------- preflight


@dataclass(frozen=True)
class Problem:
    level: str  # error | warning
    check: str  # engine | gpu-runtime | host-gpu | verdict | image | smoke | project
    message: str  # one line: what is wrong, then what to do

    def to_json(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class ImageState:
    """The stack's promoted image as the engine and envman's reports see it."""

    ref: str
    image_id: str | None  # None: not on the engine
    smoke: str | None = None  # pass | cpu-only | fail | None (no report)
    smoke_reason: str = ""


@dataclass(frozen=True)
class GpuVerdict:
    gpu: HostGpu
    verdict: str  # ok | jit_only | driver_too_old | arch_unsupported | unknown
    reasons: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"gpu": self.gpu.index, "name": self.gpu.name, "compute_cap": self.gpu.compute_cap,
                "verdict": self.verdict, "reasons": list(self.reasons)}


def selected_gpus(host: HostFacts, gpus: GpuRequest) -> tuple[list[HostGpu], str | None]:
    """The host GPUs a request gives the container, or the reason it cannot be met."""
    if gpus.kind == "all":
        return list(host.gpus), None
    if gpus.kind == "count":
        n = gpus.count or 0
        if n > len(host.gpus):
            return [], f"{n} GPUs requested but this host has {len(host.gpus)}"
        return list(host.gpus[:n]), None
    chosen = []
    for d in gpus.devices:
        hit = next((g for g in host.gpus if str(g.index) == d or (g.uuid and g.uuid == d)), None)
        if hit is None:
            have = ", ".join(str(g.index) for g in host.gpus)
            return [], f"GPU device {d} does not exist on this host (devices: {have})"
        chosen.append(hit)
    return chosen, None


def gpu_verdicts(stack: Stack, host: HostFacts, gpus: Sequence[HostGpu]) -> list[GpuVerdict]:
    from envman.matrix.model import DriverVersion
    from envman.stack.verdict import DRIVER_TOO_OLD, verdict

    out = []
    driver = cast(str, host.driver)  # asked only of a host with a GPU (has_gpu: it has a driver)
    for g in gpus:
        if g.compute_cap is None:
            # Without the architecture only the driver floor can be checked.
            if stack.cuda and host.driver and DriverVersion.parse(host.driver) < DriverVersion.parse(cast(str, stack.min_driver)):
                out.append(GpuVerdict(g, DRIVER_TOO_OLD, (f"driver {host.driver} is older than {stack.min_driver}",)))
            else:
                out.append(GpuVerdict(g, "unknown", (f"compute capability of {g.name} unknown: architecture not checked",)))
            continue
        v = verdict(stack, driver, g.compute_cap)
        out.append(GpuVerdict(g, v.verdict, v.reasons))
    return out


def preflight(
    stack: Stack,
    gpus: GpuRequest | None,
    *,
    host: HostFacts | None,
    engine_info: EngineInfo | None,
    image: ImageState,
    suggest: Callable[[Stack, HostFacts, Sequence[HostGpu]], str | None] = lambda s, h, g: None,
    what_if: bool = False,
) -> list[Problem]:
    """Everything that would make ``envman run`` fail or surprise, each one line with its fix.

    Pure: the caller gathers ``host`` (only needed when ``gpus``), ``engine_info`` (``None``
    when no GPU was requested) and ``image``. ``suggest`` names a stack that would work.
    """
    problems: list[Problem] = []
    cpu_fix = CPU_FIX
    if gpus is not None:
        problems += gpu_problems(stack, gpus, host, suggest)
    mech = engine_info.gpu_mechanism() if gpus is not None and not what_if and engine_info is not None else None
    if gpus is not None and not what_if and engine_info is not None and mech is None:

        runtimes = ", ".join(engine_info.runtimes) or "none"
        if engine_info.kind == "podman":
            from envman.engine.cdi import GENERATE_FIX

            problems.append(Problem(ERROR, "gpu-runtime",
                                    f"GPUs requested (--gpus {gpus}) but Podman has no CDI spec for nvidia.com/gpu in "
                                    f"{', '.join(engine_info.cdi_spec_dirs) or 'its CDI directories'} "
                                    "(Podman's Docker API would start the container without a GPU): "
                                    f"{GENERATE_FIX}; {cpu_fix}"))
        else:
            problems.append(Problem(ERROR, "gpu-runtime",
                                    f"GPUs requested (--gpus {gpus}) but the Docker engine has no NVIDIA runtime or CDI "
                                    f"spec (runtimes: {runtimes}): {NVIDIA_TOOLKIT_FIX}; {cpu_fix}"))
    elif gpus is not None and engine_info is not None and engine_info.cdi_gpu_devices is not None and mech == "cdi":
        known = set(engine_info.cdi_gpu_devices)
        missing = [d for d in gpus.cdi_devices if d not in known]
        if missing:
            from envman.engine.cdi import DEFAULT_SPEC_PATH

            problems.append(Problem(ERROR, "gpu-runtime",
                                    f"the CDI spec has no device nvidia.com/gpu={missing[0]} (it has: "
                                    f"{', '.join(sorted(known)) or 'none'}): ask for one of those, or regenerate it "
                                    f"(envman cdi generate -o {DEFAULT_SPEC_PATH}); {cpu_fix}"))
    if image.image_id is None:
        problems.append(Problem(ERROR, "image", f"no promoted image {image.ref} for stack {stack.name}: "
                                f"build it with envman build {stack.name}"))
    elif image.smoke is None:
        problems.append(Problem(ERROR, "smoke", f"no smoke report for {image.ref} ({image.image_id[:19]}): "
                                f"run envman smoke {stack.name}"))
    elif image.smoke not in RUNNABLE_SMOKE:
        reason = f" ({image.smoke_reason})" if image.smoke_reason else ""
        problems.append(Problem(ERROR, "smoke", f"the smoke test of {image.ref} says {image.smoke}{reason}: "
                                f"rebuild it with envman build {stack.name}, then envman smoke {stack.name}"))
    elif image.smoke == "cpu-only" and gpus is not None and stack.cuda:
        problems.append(Problem(WARNING, "smoke", f"{image.ref} was smoke-tested without a GPU: its GPU kernels are "
                                f"untested; run envman smoke {stack.name} --require-gpu on this host"))
    return problems


CPU_FIX = "or run with --no-gpu for an explicit CPU run"


def gpu_problems(stack: Stack, gpus: GpuRequest, host: HostFacts | None,
                 suggest: Callable[[Stack, HostFacts, Sequence[HostGpu]], str | None]) -> list[Problem]:
    """The host's side of a GPU run: a driver and GPUs, the requested devices, the stack's
    verdict on each (``envman run``'s preflight, and ``envman node-check`` on a Slurm node)."""
    if host is None or not host.has_gpu:
        state = host.summary() if host is not None else "no NVIDIA GPU on this host"
        return [Problem(ERROR, "host-gpu", f"GPUs requested (--gpus {gpus}) but {state}: "
                        f"install the NVIDIA driver, {CPU_FIX}")]
    problems = []
    chosen, why = selected_gpus(host, gpus)
    if why:
        problems.append(Problem(ERROR, "host-gpu", f"{why}: ask for fewer (--gpus all / --gpus device=0), {CPU_FIX}"))
    problems += verdict_problems(stack, host, gpu_verdicts(stack, host, chosen), suggest)
    problems += [Problem(WARNING, "host-gpu", w) for w in host.warnings]
    return problems


def verdict_problems(stack: Stack, host: HostFacts, verdicts: Sequence[GpuVerdict],
                     suggest: Callable[[Stack, HostFacts, Sequence[HostGpu]], str | None]) -> list[Problem]:
    from envman.matrix.model import DriverVersion
    from envman.stack.verdict import ARCH_UNSUPPORTED, DRIVER_TOO_OLD, JIT_ONLY

    out: list[Problem] = []
    bad = [v for v in verdicts if v.verdict in (DRIVER_TOO_OLD, ARCH_UNSUPPORTED)]
    good = [v for v in verdicts if v.verdict not in (DRIVER_TOO_OLD, ARCH_UNSUPPORTED)]
    alt = suggest(stack, host, [v.gpu for v in verdicts]) if bad else None
    use_alt = f" or use {alt}" if alt else ""
    devices = f"; or use only --gpus device={','.join(str(v.gpu.index) for v in good)}" if bad and good else ""
    below_floor = bool(stack.cuda and host.driver
                       and DriverVersion.parse(host.driver) < DriverVersion.parse(cast(str, stack.min_driver)))
    if below_floor:
        out.append(Problem(ERROR, "verdict", f"driver {host.driver} is older than {stack.min_driver} that CUDA "
                           f"{stack.cuda} needs: upgrade the driver{use_alt}"))
        return out
    for v in bad:
        if v.verdict == DRIVER_TOO_OLD:  # no SASS for this GPU, and PTX JIT needs the toolkit's driver
            out.append(Problem(ERROR, "verdict", f"{v.gpu.label}: {stack.name} has no native code for it and its PTX "
                               f"needs driver {stack.toolkit_driver} or newer (this host: {host.driver}): "
                               f"upgrade the driver{use_alt}{devices}"))
        else:
            sass = ", ".join(f"sm_{a.replace('.', '')}" for a in stack.sass_archs) or "none"
            ptx = ", ".join(f"compute_{a.replace('.', '')}" for a in stack.ptx_archs) or "none"
            out.append(Problem(ERROR, "verdict", f"{v.gpu.label}: {stack.name} has no kernel image for it (SASS {sass}; "
                               f"PTX {ptx}): use{(' ' + alt) if alt else ' a stack built for this GPU'}{devices}"))
    for v in good:
        if v.verdict == JIT_ONLY:
            out.append(Problem(WARNING, "verdict", f"{v.gpu.label}: no native code in {stack.name}; it runs by "
                               "JIT-compiling PTX (slow first start, possibly slower kernels)"))
        elif v.verdict == "unknown":
            out.append(Problem(WARNING, "verdict", f"{v.gpu.label}: " + v.reasons[0]))
    return out


def suggest_stack(matrix: Matrix, stack: Stack, host: HostFacts, gpus: Sequence[HostGpu]) -> str | None:
    """A stack of the same framework that the verdict accepts on these GPUs: preferably the same
    framework version (another CUDA), then the newest older release, then the oldest newer one."""
    from packaging.version import Version

    from envman.stack.resolve import resolve_row
    from envman.stack.verdict import OK, verdict

    current = Version(stack.framework_version)
    best = None
    for b in matrix.builds:
        if b.framework != stack.framework or b.cuda is None or b.name == stack.row:
            continue
        try:
            cand = resolve_row(matrix, b)
        except ResolveError:
            continue
        vs = [verdict(cand, cast(str, host.driver), g.compute_cap) for g in gpus if g.compute_cap]
        if not vs or not all(v.runs for v in vs):
            continue
        older = b.version <= current
        # Older releases: the newest first; newer ones: the oldest first (closest to what the code uses).
        rank = tuple(b.version.release) if older else tuple(-p for p in b.version.release)
        key = (all(v.verdict == OK for v in vs), b.version == current, older, rank, b.cuda.release)
        if best is None or key > best[0]:
            best = (key, b.name)
    return best[1] if best else None


