"""Resolver and verdict behaviour on a small hand-written matrix."""

import pytest
from hypothesis import given, strategies as st
from packaging.version import Version

from envman.errors import ResolveError
from envman.matrix.model import Arch, DriverVersion
from envman.stack.resolve import parse_name, resolve, version_matches
from envman.stack.verdict import verdict


def test_partial_version_picks_newest_patch_and_cuda(mini):
    s = resolve(mini, "torch-1.0-cuda10")
    assert (s.framework_version, s.cuda) == ("1.0.1", "10.0")
    assert s.base_image == "nvidia/cuda:10.0-base-ubuntu18.04"  # the OS whose python3 torch 1.0 supports
    assert s.python == "3.6" and s.python_strategy == "apt"
    assert s.base_image_status == "deleted"
    assert any("deleted" in n for n in s.notes)


def test_no_cuda_given_takes_the_pip_default_variant(mini):
    assert resolve(mini, "pytorch-2.4").cuda == "12.4"
    assert resolve(mini, "torch-2.4-cuda11").cuda == "11.8"
    assert resolve(mini, "torch-2.4-cu118").variant == "cu118"
    assert resolve(mini, "torch-2.4-cpu").cuda is None


def test_python_suffix_and_strategy(mini):
    s = resolve(mini, "torch-2.4-cuda12-py3.11")
    assert s.python == "3.11" and s.python_strategy == "apt"
    s = resolve(mini, "torch-2.4-cuda12-py3.12")
    assert s.python == "3.12" and s.python_strategy == "standalone"
    with pytest.raises(ResolveError, match="does not support Python 3.4"):
        resolve(mini, "torch-2.4-cuda12-py3.4")


def test_flavour_override_and_canonical_name(mini):
    s = resolve(mini, "torch-2.4-cuda12-devel")
    assert s.flavour == "devel" and s.base_image.endswith("12.4.1-devel-ubuntu22.04")
    assert s.name == "torch-2.4.1-cuda12.4-py3.10-devel"
    assert resolve(mini, s.name) == s


def test_canonical_name_resolves_to_itself(mini):
    for b in mini.builds:
        from envman.stack.resolve import resolve_row

        s = resolve_row(mini, b)
        assert resolve(mini, s.name) == s


def test_driver_floors(mini):
    s10 = resolve(mini, "torch-1.0-cuda10")
    assert (s10.min_driver, s10.toolkit_driver, s10.minor_compat) == ("410.48", "410.48", False)
    s12 = resolve(mini, "torch-2.4-cuda12")
    assert (s12.min_driver, s12.toolkit_driver, s12.minor_compat) == ("525.60.13", "550.54.14", True)


def test_never_released_cuda_is_named(mini):
    with pytest.raises(ResolveError, match="CUDA 12.7 was never released"):
        resolve(mini, "torch-2.4-cuda12.7")


def test_unknown_names_suggest_close_ones(mini):
    with pytest.raises(ResolveError) as e:
        resolve(mini, "torch-1.0-cuda12")
    assert "torch-1.0.1-cuda10.0" in e.value.line()
    with pytest.raises(ResolveError, match="cannot parse"):
        parse_name("torch")
    with pytest.raises(ResolveError, match="no torch release matches"):
        resolve(mini, "torch-9.9")


@pytest.mark.parametrize(
    "driver,sm,expected",
    [
        ("535.104.05", "8.6", "ok"),  # SASS sm_86
        ("535.104.05", "8.9", "ok"),  # sm_86 cubin runs on 8.9 (same major)
        ("560.35.03", "10.0", "jit_only"),  # only compute_90 PTX, driver >= toolkit's
        ("535.104.05", "10.0", "driver_too_old"),  # PTX JIT needs 550.54.14; minor compat doesn't cover JIT
        ("470.57.02", "8.6", "driver_too_old"),  # below the 12.x floor
        ("535.104.05", "3.7", "arch_unsupported"),  # Kepler: no SASS, PTX 9.0 is newer than the GPU
    ],
)
def test_verdict_rules(mini, driver, sm, expected):
    s = resolve(mini, "torch-2.4-cuda12")
    v = verdict(s, driver, sm)
    assert v.verdict == expected, v.reasons
    assert v.reasons


def test_verdict_minor_compat_and_its_absence(mini):
    s12 = resolve(mini, "torch-2.4-cuda12")
    v = verdict(s12, "530.30.02", "8.0")  # below 12.4's own driver, above the 12.x floor
    assert v.verdict == "ok" and "minor-version compatibility" in " ".join(v.reasons)
    s10 = resolve(mini, "torch-1.0-cuda10")
    v = verdict(s10, "400.1", "7.5")
    assert v.verdict == "driver_too_old" and "no minor-version compatibility" in v.reasons[0]


def test_verdict_cpu_stack_is_ok_anywhere(mini):
    assert verdict(resolve(mini, "torch-2.4-cpu"), "1.0", "3.0").verdict == "ok"


def test_arch_and_driver_parsing():
    assert Arch.parse("sm_86") == Arch(8, 6) == Arch.parse("8.6")
    assert Arch.parse("compute_120") == Arch(12, 0)
    assert DriverVersion.parse("535.104.05") > DriverVersion.parse("535.54.03")
    assert DriverVersion.parse("550") >= DriverVersion.parse("550.0.0")
    assert str(DriverVersion.parse("535.104.05")) == "535.104.05"
    for bad in ("", "x", "8", "8.6.1"):
        with pytest.raises(ValueError):
            Arch.parse(bad)


# --- properties ---------------------------------------------------------------------------

versions = st.lists(st.integers(0, 30), min_size=1, max_size=3).map(lambda p: ".".join(map(str, p)))


@given(versions, versions)
def test_version_prefix_property(prefix, rest):
    v = Version(prefix + "." + rest)
    assert version_matches(prefix, v)


@given(st.tuples(st.integers(0, 999), st.integers(0, 200), st.integers(0, 99)),
       st.tuples(st.integers(0, 999), st.integers(0, 200), st.integers(0, 99)))
def test_driver_order_is_numeric(a, b):
    da = DriverVersion.parse(".".join(map(str, a)))
    db = DriverVersion.parse(".".join(map(str, b)))
    assert (da < db) == (a < b) and (da >= db) == (a >= b)


fw = st.sampled_from(["torch", "pytorch", "tf", "tensorflow", "jax", "ort", "onnxruntime-gpu"])
target = st.one_of(st.just(""), st.just("-cpu"), versions.map(lambda v: "-cuda" + v.split(".")[0]),
                   st.sampled_from(["-cu118", "-cu92", "-cu128"]))
py = st.one_of(st.just(""), st.sampled_from(["-py3.6", "-py3.12"]))
flav = st.one_of(st.just(""), st.sampled_from(["-base", "-runtime", "-cudnn-runtime", "-devel", "-cudnn-devel"]))


@given(fw, versions, target, py, flav)
def test_parse_name_roundtrip(f, v, t, p, fl):
    q = parse_name(f"{f}-{v}{t}{p}{fl}")
    assert q.version == v
    assert q.cpu == (t == "-cpu")
    assert (q.python or "") == p.removeprefix("-py")
    assert (q.flavour or "") == fl.removeprefix("-")
    if t.startswith("-cu1") or t.startswith("-cu9"):
        assert q.cuda == {"-cu118": "11.8", "-cu92": "9.2", "-cu128": "12.8"}[t]


@given(st.text(max_size=40))
def test_parse_name_never_crashes(text):
    try:
        parse_name(text)
    except ResolveError as exc:
        assert "\n" not in exc.line()
