"""linux/amd64 and linux/arm64: the grammar's platform part, the resolver's choice of rows and
images per platform, the notes and sources a non-default platform adds, and the validator's
platform rules — each checked where exactly one platform fact differs."""

from __future__ import annotations

from dataclasses import replace

import pytest
from packaging.version import Version

from envman.errors import ResolveError, UserError
from envman.matrix.model import Arch, Matrix
from envman.matrix.validate import validate
from envman.stack.resolve import resolve, resolve_row
from envman.stack.names import DEFAULT_PLATFORM, Stack, parse_platform

V = Version
ARM = "linux/arm64"
AMD = "linux/amd64"
BOTH = (AMD, ARM)
B12 = "torch-2.4.1-cuda12.4"
IMG12 = "nvidia/cuda:12.4.1-base-ubuntu22.04"


def set_build(m: Matrix, name: str, **kw) -> Matrix:
    return replace(m, builds=tuple(replace(b, **kw) if b.name == name else b for b in m.builds))


def set_image(m: Matrix, ref: str, **kw) -> Matrix:
    return replace(m, images=tuple(replace(i, **kw) if i.ref == ref else i for i in m.images))


@pytest.fixture
def arm(mini) -> Matrix:
    """The mini matrix with torch 2.4.1 cu124 and its base image published for arm64 too."""
    m = set_build(mini, B12, platforms=BOTH, platform_source=("wheel-index",))
    return set_image(m, IMG12, platforms=BOTH, platform_source=("manifest",))


# --- the --platform option ---------------------------------------------------------------------

@pytest.mark.parametrize("text, platform", [("linux/arm64", ARM), ("arm64", ARM), ("aarch64", ARM),
                                            (" LINUX/ARM64 ", ARM), ("linux/amd64", AMD), ("amd64", AMD),
                                            ("x86_64", AMD), ("linux/x86_64", AMD)])
def test_parse_platform(text, platform):
    assert parse_platform(text) == platform


@pytest.mark.parametrize("text", ["", "arm", "linux/arm", "windows/amd64", "linux/arm64/v8", "darwin/arm64", "linux/"])
def test_parse_platform_refuses(text):
    with pytest.raises(UserError) as e:
        parse_platform(text)
    assert e.value.what == f"unknown platform {text!r}"
    assert e.value.where == "--platform" and e.value.fix == "use linux/amd64 or linux/arm64"


# --- resolving on a platform --------------------------------------------------------------------

def test_default_platform_is_amd64_and_not_named(arm):
    s = resolve(arm, "torch-2.4-cuda12")
    assert s.platform == AMD and s.name == "torch-2.4.1-cuda12.4-py3.10"
    assert "platform" not in s.to_json()  # amd64 stacks keep their JSON and render hash
    assert Stack.from_json(s.to_json()) == s


def test_arm64_by_name_or_option(arm):
    by_name = resolve(arm, "torch-2.4-cuda12-arm64")
    by_option = resolve(arm, "torch-2.4-cuda12", platform=ARM)
    assert by_name == by_option
    assert by_name.platform == ARM and by_name.name == "torch-2.4.1-cuda12.4-py3.10-arm64"
    assert by_name.to_json()["platform"] == ARM
    assert resolve(arm, by_name.name) == by_name
    assert Stack.from_json(by_name.to_json()) == by_name


def test_name_and_option_must_agree(arm):
    assert resolve(arm, "torch-2.4-cuda12-arm64", platform=ARM).platform == ARM
    with pytest.raises(ResolveError) as e:
        resolve(arm, "torch-2.4-cuda12-arm64", platform=AMD)
    assert e.value.what == "stack name 'torch-2.4-cuda12-arm64' names platform linux/arm64, --platform says linux/amd64"
    assert e.value.fix == "give the platform once (in the name or with --platform)"


def test_rows_without_the_platform_are_skipped(arm):
    # cu118 has no arm64 wheels: torch-2.4-cuda11 on arm64 has nothing to offer
    with pytest.raises(ResolveError) as e:
        resolve(arm, "torch-2.4-cuda11", platform=ARM)
    assert e.value.what == ("torch 2.4 has no linux/arm64 build in the matrix (CUDA 11 builds up to 2.4.1 exist for "
                            "linux/amd64 only)")
    assert e.value.fix == ("build it for linux/amd64, or pick a release with linux/arm64 wheels "
                           "(envman matrix ls --platform linux/arm64)")
    with pytest.raises(ResolveError) as e:
        resolve(arm, "torch-1.0", platform=ARM)
    assert "torch 1.0 has no linux/arm64 build in the matrix (any builds up to 1.0.1" in e.value.what
    with pytest.raises(ResolveError) as e:
        resolve(arm, "torch-2.4-cpu", platform=ARM)
    assert "(CPU builds up to 2.4.1 exist for linux/amd64 only)" in e.value.what


def test_an_older_release_with_the_platform_is_taken_when_the_newest_has_none(arm):
    newer = replace(next(b for b in arm.builds if b.name == "torch-2.4.1-cuda11.8"), version=V("2.4.2"), default=False)
    m = replace(arm, builds=arm.builds + (newer,))
    assert resolve(m, "torch-2.4-cuda12", platform=ARM).framework_version == "2.4.1"
    assert resolve(m, "torch-2.4-cuda11").framework_version == "2.4.2"


def test_images_without_the_platform_are_skipped(arm):
    amd_only = set_image(arm, IMG12, platforms=(AMD,))
    with pytest.raises(ResolveError) as e:
        resolve(amd_only, "torch-2.4-cuda12", platform=ARM)
    assert e.value.what == "no CUDA 12.4 base base image on linux/arm64 in the matrix for torch-2.4.1-cuda12.4"
    with pytest.raises(ResolveError) as e:
        resolve(set_image(arm, IMG12, platforms=(ARM,)), "torch-2.4-cuda12")
    assert e.value.what == "no CUDA 12.4 base base image in the matrix for torch-2.4.1-cuda12.4"


def test_a_pinned_base_image_must_have_the_platform(arm):
    m = set_build(arm, B12, base_image="nvidia/cuda:12.4.1-devel-ubuntu22.04")
    with pytest.raises(ResolveError):
        resolve(m, "torch-2.4-cuda12", platform=ARM)
    m = set_image(m, "nvidia/cuda:12.4.1-devel-ubuntu22.04", platforms=BOTH, platform_source=("x",))
    assert resolve(m, "torch-2.4-cuda12", platform=ARM).base_image == "nvidia/cuda:12.4.1-devel-ubuntu22.04"


def test_arm64_archs_are_the_rows_arm64_lists(arm):
    m = set_build(arm, B12, sass_arm64=(Arch(8, 0), Arch(9, 0)), ptx_arm64=(Arch(9, 0),))
    a = resolve(m, "torch-2.4-cuda12-arm64")
    assert (a.sass_archs, a.ptx_archs) == (("8.0", "9.0"), ("9.0",))
    x = resolve(m, "torch-2.4-cuda12")
    assert x.sass_archs == ("5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0") and x.ptx_archs == ("9.0",)
    # no arm64 lists: the amd64 ones stand for both
    assert resolve(arm, "torch-2.4-cuda12-arm64").sass_archs == x.sass_archs
    only_sass = set_build(arm, B12, sass_arm64=(Arch(9, 0),), ptx_arm64=None)
    assert resolve(only_sass, "torch-2.4-cuda12-arm64").ptx_archs == ()


def test_arm64_notes_and_sources(arm):
    m = set_build(arm, B12, platform_status="unconfirmed", platform_note="arm64 wheels since 2.4")
    m = set_image(m, IMG12, platform_status="partially confirmed")
    s = resolve(m, "torch-2.4-cuda12-arm64")
    assert s.notes == (
        "arm64 wheels since 2.4",
        "linux/arm64 support of torch-2.4.1-cuda12.4 wheels is unconfirmed",
        f"linux/arm64 support of base image {IMG12} is partially confirmed",
    )
    assert s.sources == ("test", "wheel-index", "manifest")
    amd = resolve(m, "torch-2.4-cuda12")
    assert amd.notes == () and amd.sources == ("test",)
    confirmed = resolve(arm, "torch-2.4-cuda12-arm64")
    assert confirmed.notes == () and confirmed.sources == ("test", "wheel-index", "manifest")


def test_resolve_row_on_a_platform(arm):
    b = next(b for b in arm.builds if b.name == B12)
    assert resolve_row(arm, b, ARM).name == "torch-2.4.1-cuda12.4-py3.10-arm64"
    assert resolve_row(arm, b).platform == DEFAULT_PLATFORM
    cu118 = next(b for b in arm.builds if b.name == "torch-2.4.1-cuda11.8")
    with pytest.raises(ResolveError) as e:
        resolve_row(arm, cu118, ARM)
    assert e.value.what == "torch-2.4.1-cuda11.8 has no linux/arm64 build (it has linux/amd64)"
    assert e.value.fix == "choose a row with wheels for that platform (envman matrix ls --platform ...)"
    amd_img = set_image(arm, IMG12, platforms=(AMD,))
    with pytest.raises(ResolveError, match="on linux/arm64"):
        resolve_row(amd_img, next(b for b in amd_img.builds if b.name == B12), ARM)


# --- the validator's platform rules -------------------------------------------------------------

def test_platform_rows_validate_clean(arm):
    assert validate(arm) == []


@pytest.mark.parametrize(
    "corrupt, where, what",
    [
        (lambda m: set_build(m, B12, platform_source=()), "torch 2.4.1 cu124",
         "platforms beyond linux/amd64 need a platform_source"),
        (lambda m: set_image(m, IMG12, platform_source=()), f"image {IMG12}",
         "platforms beyond linux/amd64 need a platform_source"),
        (lambda m: set_build(m, "torch-2.4.1-cuda11.8", sass_arm64=(Arch(8, 0),)), "torch 2.4.1 cu118",
         "sass_arm64/ptx_arm64 given but linux/arm64 is not in platforms"),
        (lambda m: set_build(m, "torch-2.4.1-cuda11.8", ptx_arm64=(Arch(8, 0),)), "torch 2.4.1 cu118",
         "sass_arm64/ptx_arm64 given but linux/arm64 is not in platforms"),
        (lambda m: set_build(m, B12, sass_arm64=(Arch(10, 0),)), "torch 2.4.1 cu124",
         "SASS sm_100 cannot be built by CUDA 12.4 (nvcc targets 5.0, 6.0, 7.0, 7.5, 8.0, 8.6, 8.9, 9.0)"),
        (lambda m: set_build(m, B12, ptx_arm64=(Arch(3, 5),)), "torch 2.4.1 cu124",
         "PTX compute_35 cannot be built by CUDA 12.4"),
        (lambda m: set_image(m, IMG12, platforms=(AMD,), platform_source=()), "torch 2.4.1 cu124",
         "no base base image for CUDA 12.4 on linux/arm64 (the row lists linux/arm64)"),
    ],
)
def test_each_platform_rule(arm, corrupt, where, what):
    problems = validate(corrupt(arm))
    assert [(p.where, p.what) for p in problems] == [(where, what)]


def test_custom_images_need_no_platform_source(arm):
    custom = replace(next(i for i in arm.images if i.ref == IMG12), repository="example/base", custom=True,
                     platform_source=())
    assert validate(replace(arm, images=arm.images + (custom,))) == []


def test_arm64_lists_with_arm64_in_platforms_are_fine(arm):
    assert validate(set_build(arm, B12, sass_arm64=(Arch(9, 0),), ptx_arm64=(Arch(9, 0),))) == []
