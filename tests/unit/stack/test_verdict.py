"""Every threshold of ``envman.stack.verdict`` tested at, just below and just above its edge.

The stacks are built by hand (no matrix), so each case states exactly the driver floors and
architecture lists it depends on; each case asserts the verdict *and* the reason that decided it.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from envman.matrix.model import Arch, DriverVersion
from envman.stack.verdict import (
    ARCH_UNSUPPORTED,
    DRIVER_TOO_OLD,
    JIT_ONLY,
    OK,
    VERDICTS,
    Verdict,
    ptx_match,
    sass_match,
    verdict,
)
from envman.stack.names import Stack

from tests.unit.render.test_dockerfile import make_stack


def stack(**kw) -> Stack:
    """The render tests' CUDA 12.4 stack (minor-version compatibility, floor 525.60.13, toolkit
    driver 550.54.14) with SASS for sm_70/sm_80/sm_86/sm_90 and PTX for compute_90, unless
    overridden: every field a verdict reads is stated here."""
    base = dict(cuda="12.4", min_driver="525.60.13", toolkit_driver="550.54.14", minor_compat=True,
                minor_compat_status="confirmed", sass_archs=("7.0", "8.0", "8.6", "9.0"), ptx_archs=("9.0",),
                arch_status="confirmed")
    base.update(kw)
    return make_stack(**base)


S12 = stack()
#: CUDA 10.0: no minor-version compatibility, the floor is the toolkit's own driver.
S10 = stack(cuda="10.0", min_driver="410.48", toolkit_driver="410.48", minor_compat=False,
                 minor_compat_status=None, sass_archs=("6.0", "6.1", "7.0", "7.5"), ptx_archs=("7.5",))
CPU = stack(cuda=None, min_driver=None, toolkit_driver=None, minor_compat=False,
                 minor_compat_status=None, sass_archs=(), ptx_archs=(), variant="cpu")


def check(stack: Stack, driver: str, sm: str, expected: str, needle: str) -> Verdict:
    v = verdict(stack, driver, sm)
    assert v.verdict == expected, v.reasons
    assert any(needle in r for r in v.reasons), (needle, v.reasons)
    return v


# --- the driver floor ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    "driver, expected, needle",
    [
        ("525.60.12", DRIVER_TOO_OLD, "driver 525.60.12 is older than 525.60.13"),
        ("525.60.13", OK, "runs through minor-version compatibility"),  # exactly at the floor
        ("525.60.14", OK, "runs through minor-version compatibility"),
        ("525.60", DRIVER_TOO_OLD, "older than 525.60.13"),  # 525.60 == 525.60.0
        ("525", DRIVER_TOO_OLD, "older than 525.60.13"),
        ("526", OK, "native code (SASS) for sm_86"),
        ("1.0", DRIVER_TOO_OLD, "minor-version compatibility of CUDA 12.x needs at least 525.60.13"),
    ],
)
def test_minor_compat_floor(driver, expected, needle):
    check(S12, driver, "8.6", expected, needle)


@pytest.mark.parametrize(
    "driver, expected, compat_note",
    [
        ("550.54.13", OK, True),  # just below the toolkit's own driver: through minor compat
        ("550.54.14", OK, False),  # exactly the toolkit's driver: no caveat
        ("550.54.15", OK, False),
        ("999.99.99", OK, False),
    ],
)
def test_toolkit_driver_edge_with_native_code(driver, expected, compat_note):
    v = check(S12, driver, "8.0", expected, "native code (SASS) for sm_80 runs on sm_80")
    assert any("minor-version compatibility" in r for r in v.reasons) is compat_note
    assert len(v.reasons) == (2 if compat_note else 1)


@pytest.mark.parametrize(
    "driver, expected, needle",
    [
        ("410.47", DRIVER_TOO_OLD, "CUDA 10.0 has no minor-version compatibility and needs its toolkit driver 410.48"),
        ("410.48", OK, "native code (SASS) for sm_75"),
        ("410.49", OK, "native code (SASS) for sm_75"),
    ],
)
def test_no_minor_compat_floor_is_the_toolkit_driver(driver, expected, needle):
    v = check(S10, driver, "7.5", expected, needle)
    if expected == OK:
        assert not any("minor-version" in r for r in v.reasons)


def test_floor_status_caveat_only_when_not_confirmed():
    shaky = replace(S12, minor_compat_status="unconfirmed")
    v = check(shaky, "525.60.12", "8.6", DRIVER_TOO_OLD, "the floor 525.60.13 is unconfirmed in the matrix")
    assert len(v.reasons) == 2
    v = verdict(S12, "525.60.12", "8.6")
    assert len(v.reasons) == 1
    # no minor compat: no status caveat even if a status string is present
    assert len(verdict(replace(S10, minor_compat_status="unconfirmed"), "400", "7.5").reasons) == 2
    assert len(verdict(replace(S10, minor_compat_status=None), "400", "7.5").reasons) == 1


def test_driver_below_floor_wins_over_architecture():
    # even a GPU with no kernel image at all is reported as a driver problem first
    check(S12, "470.57.02", "3.7", DRIVER_TOO_OLD, "older than 525.60.13")


# --- SASS: same major, minor <= the GPU's --------------------------------------------------------

@pytest.mark.parametrize(
    "sm, expected, needle",
    [
        ("8.0", OK, "SASS) for sm_80 runs on sm_80"),  # exactly the cubin
        ("8.5", OK, "SASS) for sm_80 runs on sm_85"),  # just above 8.0 but below 8.6
        ("8.6", OK, "SASS) for sm_86 runs on sm_86"),  # best match is the newest that fits
        ("8.9", OK, "SASS) for sm_86 runs on sm_89"),
        ("7.0", OK, "SASS) for sm_70 runs on sm_70"),
        ("7.5", OK, "SASS) for sm_70 runs on sm_75"),
        ("9.0", OK, "SASS) for sm_90 runs on sm_90"),
        ("9.9", OK, "SASS) for sm_90 runs on sm_99"),
    ],
)
def test_sass_edges(sm, expected, needle):
    check(S12, "560", sm, expected, needle)


def test_sass_never_crosses_a_major():
    only_80 = replace(S12, sass_archs=("8.0",), ptx_archs=())
    check(only_80, "560", "9.0", ARCH_UNSUPPORTED, "no kernel image for sm_90: SASS sm_80, PTX none")
    check(only_80, "560", "7.5", ARCH_UNSUPPORTED, "no kernel image for sm_75")
    check(only_80, "560", "8.0", OK, "sm_80 runs on sm_80")


def test_sass_below_the_lowest_minor_of_a_major_is_not_native():
    s = replace(S12, sass_archs=("8.6",), ptx_archs=())
    check(s, "560", "8.0", ARCH_UNSUPPORTED, "SASS sm_86, PTX none")
    check(s, "560", "8.6", OK, "sm_86 runs on sm_86")


# --- PTX: any GPU >= the PTX arch, and only with a driver >= the toolkit's own -----------------

@pytest.mark.parametrize(
    "driver, expected, needle",
    [
        ("550.54.13", DRIVER_TOO_OLD, "needs JIT by a driver >= 550.54.14"),
        ("550.54.14", JIT_ONLY, "runs by JIT-compiling PTX for compute_90"),  # exactly the toolkit driver
        ("550.54.15", JIT_ONLY, "runs by JIT-compiling PTX for compute_90"),
        ("525.60.13", DRIVER_TOO_OLD, "minor-version compatibility does not cover PTX JIT"),
    ],
)
def test_ptx_needs_the_toolkit_driver(driver, expected, needle):
    check(S12, driver, "10.0", expected, needle)


@pytest.mark.parametrize(
    "sm, expected, needle",
    [
        ("6.1", ARCH_UNSUPPORTED, "no kernel image for sm_61"),  # below the PTX arch, no SASS
        ("9.0", OK, "sm_90 runs on sm_90"),  # SASS wins over PTX
        ("10.0", JIT_ONLY, "compute_90"),
        ("12.0", JIT_ONLY, "compute_90"),
    ],
)
def test_ptx_edges(sm, expected, needle):
    check(S12, "560", sm, expected, needle)


def test_ptx_only_gpu_between_ptx_arches_takes_the_newest_that_fits():
    s = replace(S12, sass_archs=(), ptx_archs=("5.0", "8.0"))
    check(s, "560", "7.5", JIT_ONLY, "compute_50")
    check(s, "560", "8.0", JIT_ONLY, "compute_80")
    check(s, "560", "8.9", JIT_ONLY, "compute_80")
    check(s, "560", "3.7", ARCH_UNSUPPORTED, "SASS none, PTX compute_50, compute_80")


def test_jit_reason_names_the_native_arches():
    v = verdict(S12, "560", "10.0")
    assert "no native code for sm_100 (SASS: sm_70, sm_80, sm_86, sm_90)" in v.reasons[0]
    assert "slow first start" in v.reasons[0]


# --- arch-list caveat --------------------------------------------------------------------------

@pytest.mark.parametrize("sm, expected", [("8.6", OK), ("10.0", JIT_ONLY), ("6.1", ARCH_UNSUPPORTED)])
def test_unconfirmed_arch_list_is_said_in_every_verdict(sm, expected):
    s = replace(S12, arch_status="unconfirmed")
    v = check(s, "560", sm, expected, "the build's architecture list is unconfirmed in the matrix")
    assert verdict(S12, "560", sm).reasons == v.reasons[:-1]


def test_unconfirmed_arch_caveat_also_with_a_jit_driver_problem():
    s = replace(S12, arch_status="partially confirmed")
    v = check(s, "525.60.13", "10.0", DRIVER_TOO_OLD, "partially confirmed")
    assert len(v.reasons) == 2


def test_unconfirmed_arch_caveat_with_minor_compat_note():
    s = replace(S12, arch_status="unconfirmed")
    v = verdict(s, "530", "8.6")
    assert v.verdict == OK and len(v.reasons) == 3


# --- CPU stacks and the Verdict type -----------------------------------------------------------

@pytest.mark.parametrize("driver, sm", [("1.0", "3.0"), ("999", "12.0"), ("0", "1.0")])
def test_cpu_stack_is_ok_anywhere(driver, sm):
    check(CPU, driver, sm, OK, "is a CPU build: it uses no GPU and needs no driver")


def test_verdict_runs_and_json():
    assert VERDICTS == (OK, JIT_ONLY, DRIVER_TOO_OLD, ARCH_UNSUPPORTED)
    assert [Verdict(v).runs for v in VERDICTS] == [True, True, False, False]
    assert Verdict(OK, ("a",)).to_json() == {"verdict": "ok", "reasons": ["a"]}


def test_typed_and_text_inputs_agree():
    a = verdict(S12, DriverVersion.parse("550.54.14"), Arch(10, 0))
    b = verdict(S12, "550.54.14", "sm_100")
    assert a == b and a.verdict == JIT_ONLY


# --- the matchers ------------------------------------------------------------------------------

A = Arch.parse


@pytest.mark.parametrize(
    "sass, gpu, hit",
    [
        (["8.0", "8.6"], "8.6", "8.6"),
        (["8.0", "8.6"], "8.5", "8.0"),
        (["8.0", "8.6"], "8.9", "8.6"),
        (["8.6"], "8.0", None),
        (["8.0"], "9.0", None),
        (["9.0"], "8.9", None),
        ([], "8.0", None),
    ],
)
def test_sass_match(sass, gpu, hit):
    got = sass_match([A(x) for x in sass], A(gpu))
    assert (str(got) if got else None) == hit


@pytest.mark.parametrize(
    "ptx, gpu, hit",
    [
        (["9.0"], "9.0", "9.0"),
        (["9.0"], "8.9", None),
        (["9.0"], "9.1", "9.0"),
        (["5.0", "8.0"], "7.9", "5.0"),
        (["5.0", "8.0"], "12.0", "8.0"),
        ([], "9.0", None),
    ],
)
def test_ptx_match(ptx, gpu, hit):
    got = ptx_match([A(x) for x in ptx], A(gpu))
    assert (str(got) if got else None) == hit


# --- parsing the inputs of a verdict -----------------------------------------------------------

@pytest.mark.parametrize(
    "text, arch",
    [
        ("8.6", (8, 6)), ("sm_86", (8, 6)), ("SM_86", (8, 6)), ("sm86", (8, 6)), (" 9.0 ", (9, 0)),
        ("compute_90", (9, 0)), ("sm_100", (10, 0)), ("compute_120", (12, 0)), ("sm_35", (3, 5)),
        ("12.1", (12, 1)),
    ],
)
def test_arch_parse_accepts(text, arch):
    assert (Arch.parse(text).major, Arch.parse(text).minor) == arch


@pytest.mark.parametrize("text", ["", "x", "8", "8.6.1", "sm_", "sm_8", "8.x", "-1.0", "8.-1", "8..6", ".6"])
def test_arch_parse_rejects(text):
    with pytest.raises(ValueError):
        Arch.parse(text)


def test_arch_order_and_names():
    assert A("8.9") < A("9.0") < A("10.0") < A("12.0")
    assert not A("9.0") < A("9.0")
    assert A("10.0").sm == "sm_100" and str(A("10.0")) == "10.0"


@pytest.mark.parametrize("text", ["", "x", "1.2.3.4", "535.x", "535..1", " ", "-"])
def test_driver_parse_rejects(text):
    with pytest.raises(ValueError):
        DriverVersion.parse(text)


@pytest.mark.parametrize(
    "a, op, b",
    [
        ("525.60.13", "==", "525.60.13"),
        ("525.60.13", "<", "525.60.14"),
        ("525.60", "==", "525.60.0"),
        ("525", "==", "525.0.0"),
        ("535.104.05", ">", "535.54.03"),  # numeric, not lexical
        ("1000", ">", "999.99.99"),
    ],
)
def test_driver_order(a, op, b):
    da, db = DriverVersion.parse(a), DriverVersion.parse(b)
    if op == "==":
        assert da <= db and da >= db and not da < db and not da > db
    elif op == "<":
        assert da < db and da <= db and not da >= db and not da > db and db > da
    else:
        assert da > db and da >= db and not da <= db and not da < db


@pytest.mark.parametrize("text, shown", [("535.104.05", "535.104.05"), ("550.54.4", "550.54.04"),
                                          ("550", "550"), ("525.60", "525.60")])
def test_driver_text_keeps_nvidia_padding(text, shown):
    assert str(DriverVersion.parse(text)) == shown


# --- the full reason of each verdict (what users read) -------------------------------------------

def test_full_reasons():
    assert verdict(S12, "525.60.12", "8.6").reasons == (
        "driver 525.60.12 is older than 525.60.13: minor-version compatibility of CUDA 12.x needs at least "
        "525.60.13; upgrade the driver or pick a stack with an older CUDA",)
    assert verdict(S10, "410.47", "7.5").reasons == (
        "driver 410.47 is older than 410.48: CUDA 10.0 has no minor-version compatibility and needs its "
        "toolkit driver 410.48; upgrade the driver or pick a stack with an older CUDA",)
    assert verdict(S12, "530", "8.6").reasons == (
        "native code (SASS) for sm_86 runs on sm_86",
        "driver 530 is below CUDA 12.4's own 550.54.14: runs through minor-version compatibility; features "
        "that need a newer driver or PTX JIT will fail",)
    assert verdict(S12, "530", "10.0").reasons == (
        "no native code for sm_100 (SASS: sm_70, sm_80, sm_86, sm_90); PTX for compute_90 needs JIT by a "
        "driver >= 550.54.14 (CUDA 12.4's own), but the driver is 530: minor-version compatibility does not "
        "cover PTX JIT; upgrade the driver or pick a build with native code",)
    assert verdict(S12, "560", "10.0").reasons == (
        "no native code for sm_100 (SASS: sm_70, sm_80, sm_86, sm_90); runs by JIT-compiling PTX for "
        "compute_90 (slow first start, possibly slower kernels)",)
    assert verdict(S12, "560", "6.1").reasons == (
        "no kernel image for sm_61: SASS sm_70, sm_80, sm_86, sm_90, PTX compute_90 — 'no kernel image is "
        "available for execution on the device'; pick a build that lists this GPU",)
    assert verdict(CPU, "1", "1.0").reasons == (
        "torch-2.4.1-cuda12.4-py3.10 is a CPU build: it uses no GPU and needs no driver",)
