"""Will this stack run on that host?  A pure function of (Stack, driver, GPU arch).

CUDA's rules (NVIDIA's CUDA Compatibility guide and the Blackwell/Hopper compatibility guides):

* SASS (a cubin) built for sm_X.y runs on a GPU of compute capability X.z with z >= y, never
  across major versions.
* PTX for compute_X.y is JIT-compiled by the driver for any GPU of capability >= X.y — but only by
  a driver at least as new as the toolkit that produced the PTX. Minor-version compatibility does
  not cover PTX JIT.
* With minor-version compatibility (CUDA 11.x, 12.x, 13.x) an application built with any toolkit
  of the major runs on a driver at or above the major's floor; without it (<= 10.2) the driver
  must be at least the toolkit's own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from envman.matrix.model import Arch, DriverVersion
from envman.stack.names import Stack

OK = "ok"
JIT_ONLY = "jit_only"
DRIVER_TOO_OLD = "driver_too_old"
ARCH_UNSUPPORTED = "arch_unsupported"
VERDICTS = (OK, JIT_ONLY, DRIVER_TOO_OLD, ARCH_UNSUPPORTED)


@dataclass(frozen=True)
class Verdict:
    verdict: str
    reasons: tuple[str, ...] = field(default=())

    @property
    def runs(self) -> bool:
        return self.verdict in (OK, JIT_ONLY)

    def to_json(self) -> dict[str, object]:
        return {"verdict": self.verdict, "reasons": list(self.reasons)}


def sass_match(sass: list[Arch] | tuple[Arch, ...], gpu: Arch) -> Arch | None:
    """The best cubin arch that runs on ``gpu`` (same major, minor <= GPU's), or None."""
    fits = [a for a in sass if a.major == gpu.major and a.minor <= gpu.minor]
    return max(fits) if fits else None


def ptx_match(ptx: list[Arch] | tuple[Arch, ...], gpu: Arch) -> Arch | None:
    """The newest PTX arch the driver can JIT for ``gpu`` (any arch <= the GPU's), or None."""
    fits = [a for a in ptx if a <= gpu]
    return max(fits) if fits else None


def verdict(stack: Stack, driver: DriverVersion | str, gpu: Arch | str) -> Verdict:
    """Verdict for ``stack`` on a host with ``driver`` and a GPU of compute capability ``gpu``."""
    drv = driver if isinstance(driver, DriverVersion) else DriverVersion.parse(driver)
    arch = gpu if isinstance(gpu, Arch) else Arch.parse(gpu)
    reasons: list[str] = []
    if stack.cuda is None:
        return Verdict(OK, (f"{stack.name} is a CPU build: it uses no GPU and needs no driver",))

    # a CUDA stack names both drivers (the resolver sets them with its CUDA version)
    min_driver = DriverVersion.parse(cast(str, stack.min_driver))
    toolkit_driver = DriverVersion.parse(cast(str, stack.toolkit_driver))
    if drv < min_driver:
        how = (
            f"minor-version compatibility of CUDA {stack.cuda.split('.')[0]}.x needs at least {min_driver}"
            if stack.minor_compat
            else f"CUDA {stack.cuda} has no minor-version compatibility and needs its toolkit driver {min_driver}"
        )
        reasons.append(f"driver {drv} is older than {min_driver}: {how}; upgrade the driver or pick a stack with an older CUDA")
        if stack.minor_compat_status and stack.minor_compat_status != "confirmed":
            reasons.append(f"the floor {min_driver} is {stack.minor_compat_status} in the matrix")
        return Verdict(DRIVER_TOO_OLD, tuple(reasons))

    sass = [Arch.parse(a) for a in stack.sass_archs]
    ptx = [Arch.parse(a) for a in stack.ptx_archs]
    caveat = (
        f"the build's architecture list is {stack.arch_status} in the matrix"
        if stack.arch_status != "confirmed"
        else None
    )
    hit = sass_match(sass, arch)
    if hit is not None:
        reasons.append(f"native code (SASS) for {hit.sm} runs on {arch.sm}")
        if drv < toolkit_driver:
            reasons.append(
                f"driver {drv} is below CUDA {stack.cuda}'s own {toolkit_driver}: runs through "
                "minor-version compatibility; features that need a newer driver or PTX JIT will fail"
            )
        return _with_caveat(OK, reasons, caveat)

    jit = ptx_match(ptx, arch)
    built = ", ".join(a.sm for a in sass) or "none"
    if jit is not None:
        if drv < toolkit_driver:
            reasons.append(
                f"no native code for {arch.sm} (SASS: {built}); PTX for compute_{jit.major}{jit.minor} "
                f"needs JIT by a driver >= {toolkit_driver} (CUDA {stack.cuda}'s own), but the driver is {drv}: "
                "minor-version compatibility does not cover PTX JIT; upgrade the driver or pick a build with native code"
            )
            return _with_caveat(DRIVER_TOO_OLD, reasons, caveat)
        reasons.append(
            f"no native code for {arch.sm} (SASS: {built}); runs by JIT-compiling PTX for "
            f"compute_{jit.major}{jit.minor} (slow first start, possibly slower kernels)"
        )
        return _with_caveat(JIT_ONLY, reasons, caveat)

    ptx_txt = ", ".join(f"compute_{a.major}{a.minor}" for a in ptx) or "none"
    reasons.append(
        f"no kernel image for {arch.sm}: SASS {built}, PTX {ptx_txt} — "
        "'no kernel image is available for execution on the device'; pick a build that lists this GPU"
    )
    return _with_caveat(ARCH_UNSUPPORTED, reasons, caveat)


def _with_caveat(status: str, reasons: list[str], caveat: str | None) -> Verdict:
    """The verdict with its reasons, the arch-data caveat (when there is one) last."""
    return Verdict(status, tuple([*reasons, caveat] if caveat else reasons))
