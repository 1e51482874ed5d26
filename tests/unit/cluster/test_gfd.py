"""The node affinity of a stack (envman/cluster/gfd.py) against the verdict: a Kubernetes scheduler
reading GPU Feature Discovery's labels admits a node exactly when envman.stack.verdict says the stack
runs there, on the shipped rows and on any SASS/PTX lists and driver floors."""

from __future__ import annotations

import functools
import json
from dataclasses import replace

import pytest
from hypothesis import given, settings, strategies as st

from envman.cluster.gfd import (
    GFD_COMPUTE_MAJOR, GFD_COMPUTE_MINOR, GFD_DRIVER_MAJOR, GFD_DRIVER_MINOR, GFD_DRIVER_REV, gfd_node_terms,
)
from envman.matrix.load import load_matrix
from envman.stack.resolve import resolve, resolve_row
from envman.stack.verdict import verdict



@functools.cache  # the same few label values, millions of times
def _int(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64) as the scheduler applies it to Gt/Lt."""
    t = text[1:] if text[:1] in "+-" else text
    return int(text) if t.isdigit() else None


def expr_matches(expr: dict, labels: dict[str, str]) -> bool:
    key, op, values = expr["key"], expr["operator"], expr.get("values", [])
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        assert len(values) == 1 and _int(values[0]) is not None, expr  # the API server rejects anything else
        if not present or _int(labels[key]) is None:
            return False
        return _int(labels[key]) > _int(values[0]) if op == "Gt" else _int(labels[key]) < _int(values[0])
    raise AssertionError(f"unknown operator {op}")


def node_admitted(terms: list[list[dict]], labels: dict[str, str]) -> bool:
    return any(term and all(expr_matches(e, labels) for e in term) for term in terms)


@functools.cache
def gfd_labels(driver: str, sm: str) -> dict[str, str]:
    """The labels GPU Feature Discovery puts on a node: the driver's fields as printed."""
    parts = driver.split(".")
    major, minor = sm.split(".")
    return {GFD_DRIVER_MAJOR: parts[0], GFD_DRIVER_MINOR: parts[1], GFD_DRIVER_REV: parts[2] if len(parts) > 2 else "",
            GFD_COMPUTE_MAJOR: major, GFD_COMPUTE_MINOR: minor, "nvidia.com/gpu.family": "any"}


DRIVERS = ["384.81", "396.26", "410.48", "418.39", "418.40.04", "440.33.01", "450.36.06", "450.80.01", "450.80.02",
           "450.80.03", "455.23.05", "460.27.04", "470.57.02", "495.29.05", "510.39.01", "515.43.04", "520.61.05",
           "525.60.12", "525.60.13", "525.60.14", "525.61.01", "525.85.12", "530.30.02", "535.104.05", "545.23.06",
           "550.54.14", "550.54.15", "555.42.02", "560.28.03", "570.86.10", "575.51.03", "580.65.06", "590.44.01",
           "600.10", "600.10.00"]
ARCHS = ["3.0", "3.5", "3.7", "5.0", "5.2", "5.3", "6.0", "6.1", "6.2", "7.0", "7.1", "7.2", "7.5", "8.0", "8.6", "8.7",
         "8.8", "8.9", "9.0", "9.1", "10.0", "10.1", "10.3", "11.0", "12.0", "12.1", "13.0"]


def _neighbours(version: str | None) -> list[str]:
    """A driver floor and the versions just around it (each field one up and one down)."""
    if not version:
        return []
    parts = [int(p) for p in version.split(".")] + [0] * (3 - len(version.split(".")))
    out = {version}
    for i in range(3):
        for d in (-1, 1):
            p = list(parts)
            p[i] = max(0, p[i] + d)
            out.add(f"{p[0]}.{p[1]}.{p[2]:02d}")
    return sorted(out)


@pytest.fixture(scope="module")
def shipped_stacks():
    m = load_matrix()
    return [resolve_row(m, b) for b in m.builds if b.cuda is not None]


def test_affinity_admits_exactly_the_nodes_the_verdict_accepts(shipped_stacks):
    """Every CUDA row of the shipped matrix, on a grid of drivers (the stack's own floors and
    their neighbours included, with zero-padded and missing revisions) and GPU architectures:
    the scheduler's reading of the affinity equals ``verdict(...).runs``."""
    assert len(shipped_stacks) > 100
    checked = 0
    # The scheduler's answer depends on the terms and the node's labels only, and many stacks
    # share their terms: each (terms, driver, arch) is evaluated once, compared for every stack.
    admitted: dict[tuple[str, str, str], bool] = {}
    for stack in shipped_stacks:
        terms = [t["matchExpressions"] for t in
                 [{"matchExpressions": e} for e in gfd_node_terms(stack)]]
        same = json.dumps(terms, sort_keys=True)
        drivers = DRIVERS + _neighbours(stack.min_driver) + _neighbours(stack.toolkit_driver)
        archs = ARCHS + list(stack.sass_archs) + list(stack.ptx_archs)
        for driver in drivers:
            for sm in archs:
                want = verdict(stack, driver, sm).runs
                got = admitted.get((same, driver, sm))
                if got is None:
                    got = admitted[(same, driver, sm)] = node_admitted(terms, gfd_labels(driver, sm))
                assert got == want, (stack.name, driver, sm, verdict(stack, driver, sm))
                checked += 1
    assert checked > 100_000


def test_affinity_of_a_ptx_stack_covers_newer_gpus_only_with_the_toolkit_driver():
    """A stack with SASS 8.0/9.0 and PTX 9.0 on CUDA 12.4: an sm_120 GPU runs it by JIT, which
    minor-version compatibility does not cover: the driver floor for that GPU is that of 12.4
    Update 1 (550.54.15), the release of its 12.4.1 image."""
    m = load_matrix()
    stack = replace(resolve(m, "torch-2.4-cuda12.4"), sass_archs=("8.0", "9.0"), ptx_archs=("9.0",))
    terms = gfd_node_terms(stack)
    assert node_admitted(terms, gfd_labels("535.104.05", "8.6"))  # SASS 8.0 runs on 8.6 via compat
    assert not node_admitted(terms, gfd_labels("535.104.05", "12.0"))  # PTX JIT needs 550.54.15
    assert not node_admitted(terms, gfd_labels("550.54.14", "12.0"))  # the GA's driver is not enough
    assert node_admitted(terms, gfd_labels("550.54.15", "12.0"))
    assert not node_admitted(terms, gfd_labels("550.54.14", "7.5"))  # older than every arch
    assert not node_admitted(terms, gfd_labels("525.60.12", "9.0"))  # below the 12.x floor
    ops = {e["operator"] for t in terms for e in t}
    assert ops <= {"In", "Gt", "Lt"}
    for t in terms:
        for e in t:
            if e["operator"] in ("Gt", "Lt"):
                assert len(e["values"]) == 1 and int(e["values"][0]) >= -1


def test_cpu_stack_needs_no_gpu_node():
    m = load_matrix()
    assert gfd_node_terms(resolve(m, "torch-2.4-cpu")) == []


# --------------------------------------------------------------------------- the Job


_ARCH = st.builds(lambda major, minor: f"{major}.{minor}", st.integers(3, 13), st.integers(0, 9))


_DRIVER = st.builds(lambda a, b, c: f"{a}.{b}.{c:02d}", st.integers(384, 600), st.integers(0, 120), st.integers(0, 20))


@settings(max_examples=300, deadline=None)
@given(sass=st.lists(_ARCH, max_size=4, unique=True), ptx=st.lists(_ARCH, max_size=2, unique=True),
       floor=_DRIVER, toolkit=_DRIVER, nodes=st.lists(st.tuples(_DRIVER, _ARCH), min_size=1, max_size=25))
def test_affinity_admits_exactly_the_nodes_the_verdict_accepts_for_any_arch_list_and_floor(sass, ptx, floor, toolkit,
                                                                                             nodes):
    """Beyond the shipped rows: any SASS and PTX lists (SASS only, PTX only, minors of 0 and
    above), any driver floor and toolkit driver, on GPUs and drivers around them, the node
    affinity the scheduler reads admits a node exactly when the verdict says the stack runs."""
    from envman.matrix.model import DriverVersion

    if not sass and not ptx:
        sass = ["8.0"]
    lo, hi = sorted([floor, toolkit], key=DriverVersion.parse)
    base = resolve(load_matrix(), "torch-2.4-cuda12.4")
    stack = replace(base, sass_archs=tuple(sass), ptx_archs=tuple(ptx), min_driver=lo, toolkit_driver=hi)
    terms = gfd_node_terms(stack)
    around = [(d, a) for a in (*sass, *ptx) for d in {*_neighbours(lo), *_neighbours(hi)}]
    around += [(d, f"{a.split('.')[0]}.{int(a.split('.')[1]) + k}") for d, a in around for k in (-1, 1)
               if 0 <= int(a.split(".")[1]) + k <= 9]
    around += [(d, f"{int(a.split('.')[0]) + 1}.0") for d, a in around]
    for driver, sm in [*nodes, *around]:
        assert node_admitted(terms, gfd_labels(driver, sm)) == verdict(stack, driver, sm).runs, (driver, sm)
