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


# --- the hints of a name that resolves to nothing --------------------------------------------------

_NEWEST = "the newest torch release in the matrix is 2.4.1: "
_UPDATE = "; newer releases: envman matrix update"


def _refusal(matrix, name):
    with pytest.raises(ResolveError) as e:
        resolve(matrix, name)
    return e.value


@pytest.mark.parametrize("name, fix", [
    # the asked CUDA X.Y where the newest release has it, else its major, which resolves
    ("torch-9-cuda11.8", _NEWEST + "torch-2.4.1-cuda11.8 (torch-2.4.1-cuda11.8)" + _UPDATE),
    ("torch-9-cuda12.9", _NEWEST + "torch-2.4.1-cuda12 (torch-2.4.1-cuda12.4)" + _UPDATE),
    ("torch-9-cu129", _NEWEST + "torch-2.4.1-cuda12 (torch-2.4.1-cuda12.4)" + _UPDATE),
    # a CUDA major no build has ("cuda1" is not the start of "cuda12"): every build, no CUDA part
    ("torch-9-cuda1", _NEWEST + "torch-2.4.1 (torch-2.4.1-cpu, torch-2.4.1-cuda11.8, torch-2.4.1-cuda12.4)" + _UPDATE),
    ("torch-9-cuda13", _NEWEST + "torch-2.4.1 (torch-2.4.1-cpu, torch-2.4.1-cuda11.8, torch-2.4.1-cuda12.4)" + _UPDATE),
    ("torch-9-cpu", _NEWEST + "torch-2.4.1-cpu (torch-2.4.1-cpu)" + _UPDATE),
])
def test_a_release_newer_than_the_matrix_is_offered_the_newest_in_the_asked_target(mini, name, fix):
    assert _refusal(mini, name).fix == fix


def test_the_cpu_build_of_the_newest_release_is_offered_only_where_there_is_one(mini):
    from dataclasses import replace

    gpu_only = replace(mini, builds=tuple(b for b in mini.builds if b.cuda is not None))
    assert _refusal(gpu_only, "torch-9-cpu").fix == (
        _NEWEST + "torch-2.4.1 (torch-2.4.1-cuda11.8, torch-2.4.1-cuda12.4)" + _UPDATE)


_TARGETS = ("", "-cpu", "-cuda1", "-cuda11", "-cuda11.8", "-cuda12", "-cuda12.4", "-cuda12.5", "-cuda12.9", "-cuda13",
            "-cuda13.0", "-cu128")


def test_the_newest_release_a_hint_offers_resolves_to_the_target_it_names():
    """Every framework of the shipped matrix, every kind of target: the name offered resolves."""
    from envman.matrix.load import load_matrix

    matrix = load_matrix()
    for framework in sorted({b.framework for b in matrix.builds}):
        for target in _TARGETS:
            fix = _refusal(matrix, f"{framework}-999{target}").fix
            offered = fix.split(": ", 1)[1].split(" (", 1)[0]
            stack = resolve(matrix, offered)
            q = parse_name(offered)
            assert stack.framework == framework, (target, fix)
            if q.cpu:
                assert stack.cuda is None, (target, fix)
            if q.cuda:
                assert version_matches(q.cuda, Version(stack.cuda)), (target, fix)


_CLOSEST = "closest valid names: "
_ALL = " (all: envman matrix ls)"


@pytest.mark.parametrize("name, fix", [
    # older than every release: the names closest in spelling to the name asked, its target included
    ("torch-0.9", _CLOSEST + "torch-2.4.1-cpu, torch-1.0.1-cuda10.0, torch-1.0.0-cuda10.0" + _ALL),
    ("torch-0.9-cpu", _CLOSEST + "torch-2.4.1-cpu, torch-1.0.1-cuda10.0, torch-1.0.0-cuda10.0, torch-2.4.1-cuda12.4, "
                                 "torch-2.4.1-cuda11.8" + _ALL),
    ("torch-0.0-cpu", _CLOSEST + "torch-2.4.1-cpu, torch-1.0.0-cuda10.0, torch-2.4.1-cuda12.4, torch-2.4.1-cuda11.8, "
                                 "torch-1.0.1-cuda10.0" + _ALL),
    ("torch-0.9-cuda12.4", _CLOSEST + "torch-2.4.1-cuda12.4, torch-1.0.1-cuda10.0, torch-1.0.0-cuda10.0, "
                                      "torch-2.4.1-cuda11.8, torch-2.4.1-cpu" + _ALL),
    # a name exactly half alike (difflib's ratio 0.5) is still close; one zero more and none is:
    # then the framework's last five names
    ("torch-0." + "0" * 11 + "1", _CLOSEST + "torch-1.0.0-cuda10.0" + _ALL),
    ("torch-0." + "0" * 12 + "1", _CLOSEST + "torch-1.0.0-cuda10.0, torch-1.0.1-cuda10.0, torch-2.4.1-cpu, "
                                             "torch-2.4.1-cuda11.8, torch-2.4.1-cuda12.4" + _ALL),
])
def test_a_release_older_than_the_matrix_is_offered_the_names_closest_in_spelling(mini, name, fix):
    assert _refusal(mini, name).fix == fix


def test_the_fallback_names_are_the_framework_s_last_five(mini):
    from dataclasses import replace

    extra = tuple(replace(b, version=Version(f"2.4.{i}"), default=False) for i in (2, 3) for b in mini.builds
                  if b.name == "torch-2.4.1-cpu")
    assert _refusal(replace(mini, builds=mini.builds + extra), "torch-0." + "0" * 12 + "1").fix == (
        _CLOSEST + "torch-2.4.1-cpu, torch-2.4.1-cuda11.8, torch-2.4.1-cuda12.4, torch-2.4.2-cpu, torch-2.4.3-cpu" + _ALL)


@pytest.mark.parametrize("never, name, what", [
    ("12.7", "torch-2.4-cuda12.7", "CUDA 12.7 was never released: why"),
    ("12.7.0", "torch-2.4-cuda12.7", "CUDA 12.7.0 was never released: why"),  # 12.7.0 is 12.7
    ("12.7", "torch-2.4-cu127", "CUDA 12.7 was never released: why"),
    # another release of the same major, or of the same X.Y prefix, was released
    ("12", "torch-2.4-cuda12.7", "torch 2.4 has no CUDA 12.7 build in the matrix"),
    ("12.7.1", "torch-2.4-cuda12.7", "torch 2.4 has no CUDA 12.7 build in the matrix"),
    ("12.7", "torch-2.4-cuda12.8", "torch 2.4 has no CUDA 12.8 build in the matrix"),
])
def test_a_cuda_that_was_never_released_is_named_only_for_its_own_x_y(mini, never, name, what):
    from dataclasses import replace

    assert _refusal(replace(mini, never_released=((never, "why"),)), name).what == what


@pytest.mark.parametrize("name, patch, what, fix", [
    ("torch-2.4-cuda12", "12.4.0", "no CUDA 12.4.0 base base image in the matrix for torch-2.4.1-cuda12.4",
     "add an [[image]] row (a mirror or a custom base) with --matrix, or pick another CUDA variant"),
    ("torch-2.4-cuda12", "11.8.0", "torch-2.4.1-cuda12.4 is CUDA 12.4, not CUDA 11.8.0",
     "name a stack of CUDA 11.8 (e.g. -cuda11.8) or drop --cuda"),
    ("torch-2.4-cpu", "12.4.1", "torch-2.4.1-cpu is a CPU build, not CUDA 12.4.1",
     "name a stack of CUDA 12.4 (e.g. -cuda12.4) or drop --cuda"),
])
def test_resolve_takes_the_asked_cuda_update_or_refuses_it(mini, name, patch, what, fix):
    assert resolve(mini, "torch-2.4-cuda12", cuda_patch=Version("12.4.1")).base_image == "nvidia/cuda:12.4.1-base-ubuntu22.04"
    with pytest.raises(ResolveError) as e:
        resolve(mini, name, cuda_patch=Version(patch))
    assert (e.value.what, e.value.fix) == (what, fix)


def test_a_free_threaded_python_the_row_has_no_wheels_for_is_refused_with_what_it_has(mini):
    from dataclasses import replace

    e = _refusal(mini, "torch-2.4-cuda12-py3.12t")
    assert (e.what, e.fix) == ("torch-2.4.1-cuda12.4 has no free-threaded Python 3.12t wheels",
                               "drop the t (py3.12) for the GIL build")
    ft = replace(mini, builds=tuple(replace(b, python_freethreaded=(Version("3.11"), Version("3.12")))
                                    if b.name == "torch-2.4.1-cuda12.4" else b for b in mini.builds))
    e = _refusal(ft, "torch-2.4-cuda12-py3.10t")
    assert (e.what, e.fix) == ("torch-2.4.1-cuda12.4 has no free-threaded Python 3.10t wheels (it has 3.11t, 3.12t)",
                               "choose py3.12t")
    stack = resolve(ft, "torch-2.4-cuda12-py3.12t")
    assert (stack.name, stack.python, stack.freethreaded) == ("torch-2.4.1-cuda12.4-py3.12t", "3.12", True)


_GRAMMAR = ("expected <framework>-<version>[-cuda<X.Y>|-cu<NNN>|-cpu][-py<X.Y>[t]][-<flavour>][-arm64|-amd64], "
            "e.g. torch-2.4-cuda12 or tf-2.15-cpu (list them: envman matrix ls)")


@pytest.mark.parametrize("name, platform, fix", [
    ("torhc-2.4-cuda12", None, "did you mean torch-2.4-cuda12 (torch-2.4.1-cuda12.4-py3.10)? (" + _GRAMMAR + ")"),
    # each fix that resolves, once per stack it resolves to, in the order of closeness
    ("torch-2.4-pu-devel", None, "did you mean torch-2.4-cpu-devel (torch-2.4.1-cpu-py3.10) or torch-2.4-devel "
                                 "(torch-2.4.1-cuda12.4-py3.10-devel)? (" + _GRAMMAR + ")"),
    # the closest fix (cudnn-devel) has no image here: the next one that resolves is offered
    ("torch-2.4-cudn12-devel", None, "did you mean torch-2.4-cuda12-devel (torch-2.4.1-cuda12.4-py3.10-devel)? ("
                                     + _GRAMMAR + ")"),
    # a fix is resolved on the platform asked: no torch row here has arm64 wheels
    ("torch-2.4-cudn12-devel", "linux/arm64", _GRAMMAR),
])
def test_a_misspelt_name_is_offered_the_fixes_that_resolve(mini, name, platform, fix):
    with pytest.raises(ResolveError) as e:
        resolve(mini, name, platform=platform)
    assert (e.value.what, e.value.where, e.value.fix) == (f"cannot parse stack name {name!r}", None, fix)


@pytest.mark.parametrize("name, version", [("torch-2.4.1.0-cpu", "2.4.1"), ("torch-1.0.0.0-cuda10", "1.0.0"),
                                           ("torch-2.4.1-cpu", "2.4.1"), ("torch-2.4-cpu", "2.4.1")])
def test_a_release_asked_with_trailing_zeros_is_that_release(mini, name, version):
    assert resolve(mini, name).framework_version == version


def test_a_release_one_past_with_a_fourth_part_is_not_one_of_the_matrix(mini):
    assert _refusal(mini, "torch-2.4.1.1-cpu").what == "no torch release matches '2.4.1.1' (the matrix has 1.0.0 to 2.4.1)"


def test_a_deleted_base_is_taken_only_on_a_platform_its_recipe_rebuilds_it_for(mini):
    """The mini matrix's recipes of the CUDA 10.0 bases are for linux/amd64 alone."""
    from dataclasses import replace

    both = ("linux/amd64", "linux/arm64")
    m = replace(mini, builds=tuple(replace(b, platforms=both) for b in mini.builds),
                images=tuple(replace(i, platforms=both) for i in mini.images))
    assert resolve(m, "torch-1.0-cuda10", platform="linux/amd64").base_image == "nvidia/cuda:10.0-base-ubuntu18.04"
    assert _refusal(m, "torch-1.0-cuda10-arm64").what == (
        "no CUDA 10.0 base base image on linux/arm64 in the matrix for torch-1.0.1-cuda10.0 is served or can be rebuilt "
        "from NVIDIA's recipe (nvidia/cuda:10.0-base-ubuntu18.04, nvidia/cuda:10.0-base-ubuntu16.04 are no longer "
        "served and no [[recipe]] rebuilds them)")


_B18 = "nvidia/cuda:10.0-base-ubuntu18.04"
_REBUILD = " envman rebuilds it from NVIDIA's recipe (--base pull: pull it, e.g. through --registry-mirror)"


def _cuda10_stack(mini, platform=None, pin=False, **image):
    """torch 1.0 on CUDA 10.0 with its ubuntu18.04 base changed by ``image``; both platforms."""
    from dataclasses import replace

    both = ("linux/amd64", "linux/arm64")
    m = replace(mini, builds=tuple(replace(b, platforms=both, base_image=_B18 if pin else b.base_image)
                                   for b in mini.builds),
                images=tuple(replace(i, platforms=both, **(image if i.ref == _B18 else {})) for i in mini.images))
    stack = resolve(m, "torch-1.0-cuda10", platform=platform)
    assert stack.base_image == _B18
    return [n for n in stack.notes if n.startswith("base image ")]


@pytest.mark.parametrize("image, pin, platform, notes", [
    ({}, False, None, [f"base image {_B18} was deleted from Docker Hub (end of life):" + _REBUILD]),
    ({"status": "unconfirmed"}, False, None, [f"base image {_B18} is not confirmed served:" + _REBUILD]),
    # served today, though a recipe could rebuild it: pulled, nothing to say
    ({"status": "published"}, False, None, []),
    # a custom base is the user's own: never rebuilt
    ({"custom": True}, True, None, []),
    # the recipe rebuilds it for linux/amd64 only: an arm64 stack pinned to it pulls it
    ({}, True, "linux/arm64", []),
])
def test_a_stack_says_its_base_is_rebuilt_exactly_when_it_is(mini, image, pin, platform, notes):
    assert _cuda10_stack(mini, platform, pin, **image) == notes


def test_an_amd64_stack_carries_its_row_s_hashed_cuda_libraries_and_its_arm64_twin_none():
    """They are read from the Linux x86_64 wheel: another platform's pins may differ."""
    from envman.matrix.load import load_matrix

    matrix = load_matrix()
    rows = [b for b in matrix.builds if b.cuda_libs and b.cuda_libs_sha256 and "linux/arm64" in b.platforms]
    assert rows
    for b in rows[:3]:
        amd = resolve(matrix, b.name)
        assert amd.cuda_libs and all(" --hash=sha256:" in pin for pin in amd.cuda_libs), b.name
        assert resolve(matrix, b.name + "-arm64").cuda_libs == (), b.name


def test_an_arm64_stack_installs_the_row_s_arm64_packages():
    from envman.matrix.load import load_matrix

    matrix = load_matrix()
    rows = [b for b in matrix.builds if b.packages_arm64 is not None and b.packages_arm64 != b.packages]
    assert rows
    for b in rows[:3]:
        assert resolve(matrix, b.name + "-arm64").packages == b.packages_arm64, b.name
        assert resolve(matrix, b.name).packages == b.packages, b.name


@pytest.mark.parametrize("first", [
    {"custom": True, "repository": "registry.example/cuda"},  # a custom base is taken only when a row pins it
    {"tag": "12.4.0-base-ubuntu22.04", "cuda_patch": Version("12.4.0")},  # another update than the one asked
])
def test_a_base_skipped_for_its_kind_or_update_does_not_hide_the_next_one(mini, first):
    from dataclasses import replace

    c124 = next(i for i in mini.images if i.ref == "nvidia/cuda:12.4.1-base-ubuntu22.04")
    m = replace(mini, images=(replace(c124, **first),) + mini.images)
    stack = resolve(m, "torch-2.4-cuda12", cuda_patch=Version("12.4.1"))
    assert stack.base_image == "nvidia/cuda:12.4.1-base-ubuntu22.04"


@pytest.mark.parametrize("cudnn, want", [("", None), (None, None), ("9", "9")])
def test_a_stack_s_cudnn_is_its_base_s_where_the_row_names_none_and_an_empty_one_is_none(mini, cudnn, want):
    from dataclasses import replace

    m = replace(mini, images=tuple(replace(i, cudnn=cudnn) if i.ref == "nvidia/cuda:12.4.1-base-ubuntu22.04" else i
                                   for i in mini.images))
    assert resolve(m, "torch-2.4-cuda12").cudnn == want


def test_without_minor_version_compatibility_a_stack_needs_the_driver_of_its_base_s_update(mini):
    from dataclasses import replace

    cuda = tuple(replace(r, minor_compat_driver=None, updates=((Version("12.4.1"), DriverVersion.parse("550.54.15")),))
                 if r.key == "12.4" else r for r in mini.cuda)
    stack = resolve(replace(mini, cuda=cuda), "torch-2.4-cuda12", cuda_patch=Version("12.4.1"))
    assert (stack.min_driver, stack.toolkit_driver) == ("550.54.15", "550.54.15")


def test_a_cuda_library_marked_for_some_pythons_is_installed_for_exactly_those():
    from packaging.markers import Marker

    from envman.matrix.load import load_matrix

    matrix = load_matrix()
    rows = [b for b in matrix.builds if any("python_version" in line for line in b.cuda_libs)]
    assert rows
    for b in rows:
        for line in (x for x in b.cuda_libs if "python_version" in x):
            pin, _, marker = line.partition(";")
            for py in b.python:
                stack = resolve(matrix, f"{b.name}-py{py}")
                held = any(p.split(" ")[0] == pin.strip() for p in stack.cuda_libs)
                env = {"python_version": str(py), "python_full_version": f"{py}.0", "platform_system": "Linux",
                       "sys_platform": "linux", "platform_machine": "x86_64"}
                assert held == Marker(marker.strip()).evaluate(env), (b.name, py, line)
