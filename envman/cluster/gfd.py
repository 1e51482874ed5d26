"""The nodes a stack may run on, as NVIDIA GPU Feature Discovery's node labels tell: a Kubernetes
required node affinity (``nodeSelectorTerms``) computed from the matrix row's driver floor and
its SASS and PTX architectures (:func:`gfd_node_terms`), for the Job ``envman export k8s`` writes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from envman.errors import UserError
from envman.matrix.model import Arch, DriverVersion
from envman.stack.names import Stack

# NVIDIA GPU Feature Discovery node labels (string values; the numeric ones hold decimal integers).
GFD_DRIVER_MAJOR = "nvidia.com/cuda.driver.major"
GFD_DRIVER_MINOR = "nvidia.com/cuda.driver.minor"
GFD_DRIVER_REV = "nvidia.com/cuda.driver.rev"
GFD_COMPUTE_MAJOR = "nvidia.com/gpu.compute.major"
GFD_COMPUTE_MINOR = "nvidia.com/gpu.compute.minor"

Expr = dict[str, Any]
Term = list[Expr]


def _gt(key: str, value: int) -> Expr:
    return {"key": key, "operator": "Gt", "values": [str(value)]}


def _lt(key: str, value: int) -> Expr:
    return {"key": key, "operator": "Lt", "values": [str(value)]}


def _in(key: str, values: Sequence[int]) -> Expr:
    return {"key": key, "operator": "In", "values": [str(v) for v in sorted(set(values))]}


def _equals_int(key: str, value: int) -> Term:
    """``label == value`` compared as integers (``Gt v-1`` and ``Lt v+1``): GFD copies the
    driver's minor and revision as the version string prints them, so they may carry a leading
    zero ("05") that a string ``In`` would miss."""
    return [_gt(key, value - 1), _lt(key, value + 1)]


def driver_at_least(version: DriverVersion) -> list[Term]:
    """Terms (OR-ed) that hold exactly on nodes whose driver is ``>= version``.

    ``major > M``, or ``major == M and minor > m``, or ``major == M and minor == m and rev >= r``
    (no rev condition when r is 0: every revision of M.m qualifies, as ``DriverVersion``
    compares a missing revision as 0; an empty rev label then still matches)."""
    major, minor, rev = version.parts + (0,) * (3 - len(version.parts))
    same_major = _in(GFD_DRIVER_MAJOR, [major])  # a driver's major is never zero-padded
    terms: list[Term] = [[_gt(GFD_DRIVER_MAJOR, major)], [same_major, _gt(GFD_DRIVER_MINOR, minor)]]
    last = [same_major, *_equals_int(GFD_DRIVER_MINOR, minor)]
    if rev > 0:
        last.append(_gt(GFD_DRIVER_REV, rev - 1))
    terms.append(last)
    return terms


def sass_archs_terms(sass: Sequence[Arch]) -> list[Term]:
    """Terms for GPUs that can run one of ``sass`` natively: same major, minor at least the
    smallest built for that major (majors sharing that smallest minor share one term)."""
    lowest: dict[int, int] = {}
    for a in sass:
        lowest[a.major] = min(a.minor, lowest.get(a.major, a.minor))
    by_minor: dict[int, list[int]] = {}
    for major, minor in lowest.items():
        by_minor.setdefault(minor, []).append(major)
    terms = []
    for minor, majors in sorted(by_minor.items()):
        term = [_in(GFD_COMPUTE_MAJOR, majors)]
        if minor > 0:
            term.append(_gt(GFD_COMPUTE_MINOR, minor - 1))
        terms.append(term)
    return terms


def arch_at_least_terms(arch: Arch) -> list[Term]:
    """Terms for GPUs of compute capability ``>= arch`` (what PTX for ``arch`` can be JIT-ed for)."""
    same = [_in(GFD_COMPUTE_MAJOR, [arch.major])]
    if arch.minor > 0:
        same.append(_gt(GFD_COMPUTE_MINOR, arch.minor - 1))
    return [[_gt(GFD_COMPUTE_MAJOR, arch.major)], same]


def _product(a: list[Term], b: list[Term]) -> list[Term]:
    return [x + y for x in a for y in b]


def gfd_node_terms(stack: Stack) -> list[Term]:
    """``nodeSelectorTerms`` (OR of ANDs) admitting exactly the nodes on which
    :func:`envman.stack.verdict.verdict` says ``ok`` or ``jit_only`` for ``stack``, as far as GFD's
    labels tell (driver version, and the compute capability of the node's GPUs):

    * ``ok``: driver ``>=`` the stack's floor (minor-version compatibility, or the toolkit's own
      driver without it) and native code (SASS) for the GPU's major with a minor ``<=`` the GPU's;
    * ``jit_only``: driver ``>=`` the floor and ``>=`` the toolkit's own driver (minor-version
      compatibility does not cover PTX JIT), and a GPU at least as new as the oldest PTX.

    A CPU stack needs no GPU node: no terms."""
    if stack.cuda is None:
        return []
    floor = DriverVersion.parse(cast(str, stack.min_driver))  # a CUDA stack names its driver floor
    toolkit = DriverVersion.parse(stack.toolkit_driver or cast(str, stack.min_driver))
    terms: list[Term] = []
    sass = [Arch.parse(a) for a in stack.sass_archs]
    if sass:
        terms += _product(driver_at_least(floor), sass_archs_terms(sass))
    ptx = [Arch.parse(a) for a in stack.ptx_archs]
    if ptx:
        terms += _product(driver_at_least(max(floor, toolkit)), arch_at_least_terms(min(ptx)))
    if not terms:
        raise UserError(f"{stack.name} lists no GPU architecture (no SASS, no PTX): no node could run it",
                        where="matrix", fix="fix the row's sass/ptx lists, or use a CPU stack")
    return terms
