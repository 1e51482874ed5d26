"""Resolver decisions where candidates tie or differ only in the key under test.

Each test starts from the small hand-written matrix and changes one thing, so that exactly one
ranking key decides: the default variant against the newest CUDA, image status, Python strategy,
OS, CUDA patch, a pinned base image, an OS restriction, the cuDNN an image carries, the Python
fallbacks, and flavours too small or exactly right.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from packaging.version import Version

from envman.errors import ResolveError
from envman.matrix.model import BaseRecipe, BaseImage, Matrix, OsInfo
from envman.stack.resolve import resolve, resolve_row, version_matches

V = Version


def img(tag: str, *, cuda: str | None = "12.4.1", flavour: str = "base", os_name: str = "ubuntu22.04",
        status: str = "published", cudnn: str | None = None, repository: str = "nvidia/cuda",
        custom: bool = False) -> BaseImage:
    cv = V(cuda) if cuda else None
    return BaseImage(repository=repository, tag=tag, cuda=V(f"{cv.major}.{cv.minor}") if cv else None,
                     cuda_patch=cv, flavour=flavour, cudnn=cudnn, os=os_name, status=status,
                     source=("test",), custom=custom)


def only_images(m: Matrix, *images: BaseImage) -> Matrix:
    return replace(m, images=tuple(images))


def with_builds(m: Matrix, change) -> Matrix:
    return replace(m, builds=tuple(change(b) for b in m.builds))


def set_build(m: Matrix, name: str, **kw) -> Matrix:
    return with_builds(m, lambda b: replace(b, **kw) if b.name == name else b)


OS_24 = OsInfo(name="ubuntu24.04", python_default=V("3.12"), python_apt=(V("3.12"),), source=("test",),
               status="confirmed")
OS_20 = OsInfo(name="ubuntu20.04", python_default=V("3.8"), python_apt=(V("3.8"), V("3.9")), source=("test",),
               status="confirmed")


# --- which variant ------------------------------------------------------------------------------

def test_default_variant_wins_over_newest_cuda(mini):
    m = set_build(set_build(mini, "torch-2.4.1-cuda12.4", default=False), "torch-2.4.1-cuda11.8", default=True)
    s = resolve(m, "torch-2.4")
    assert (s.cuda, s.variant) == ("11.8", "cu118")
    # an explicit CUDA still selects the newest match, whatever the default
    assert resolve(m, "torch-2.4-cuda12").cuda == "12.4"
    assert resolve(m, "torch-2.4-cpu").cuda is None


def test_without_a_default_the_newest_gpu_variant_wins_over_cpu(mini):
    m = set_build(mini, "torch-2.4.1-cuda12.4", default=False)
    assert resolve(m, "torch-2.4").cuda == "12.4"


def test_a_cpu_default_is_taken_without_target(mini):
    m = set_build(set_build(mini, "torch-2.4.1-cuda12.4", default=False), "torch-2.4.1-cpu", default=True)
    assert resolve(m, "torch-2.4").cuda is None


def test_only_cpu_rows_resolve_without_target(mini):
    m = replace(mini, builds=tuple(b for b in mini.builds if not (str(b.version) == "2.4.1" and b.cuda is not None)))
    assert resolve(m, "torch-2.4").cuda is None


def test_newest_release_among_partial_matches(mini):
    assert resolve(mini, "torch-1.0").framework_version == "1.0.1"
    assert resolve(mini, "torch-1.0.0").framework_version == "1.0.0"
    assert resolve(mini, "torch-1").framework_version == "1.0.1"
    assert resolve(mini, "torch-2").framework_version == "2.4.1"


def test_partial_cuda_picks_the_newest_matching_cuda(mini):
    extra = replace(next(b for b in mini.builds if b.name == "torch-2.4.1-cuda11.8"), cuda=V("11.0"), variant="cu110",
                    default=False)
    m = replace(mini, builds=mini.builds + (extra,))
    # 11.0 has no release row, but the selection is by the build's CUDA: cuda11 -> 11.8 (newest 11.x)
    with pytest.raises(ResolveError):
        resolve(m, "torch-2.4-cuda11.0")  # no CUDA 11.0 base image
    assert resolve(m, "torch-2.4-cuda11").cuda == "11.8"


# --- which image --------------------------------------------------------------------------------

def test_published_image_wins_over_deleted_even_on_an_older_os(mini):
    m = replace(mini, oses=mini.oses + (OS_24,))
    m = only_images(m, img("12.4.1-base-ubuntu24.04", os_name="ubuntu24.04", status="deleted"),
                    img("12.4.1-base-ubuntu22.04"))
    assert resolve(m, "torch-2.4-cuda12").base_image.endswith("ubuntu22.04")


def recipe(tag: str, parent: str | None = None) -> BaseRecipe:
    """A recipe that rebuilds ``nvidia/cuda:<tag>`` (from plain Ubuntu unless ``parent``)."""
    return BaseRecipe(
        tag=tag, platform="linux/amd64", parent=parent, from_image=None if parent else "ubuntu:22.04",
        path="dist/x/Dockerfile", commit="0" * 40, repositories=() if parent else ("https://example.invalid/repo",),
        setup_packages=(), key_url=None if parent else "https://example.invalid/repo/k.pub",
        key_fingerprint=None if parent else "A" * 40, replaced_key=None, env=(), labels=(), packages=("x",),
        downloads=(), hold=(), symlinks=(), ld_so_conf=(), omitted=(), os_archive=None,
        os_archive_status="confirmed", source=("test",), status="confirmed")


def with_recipes(m: Matrix, *recipes: BaseRecipe) -> Matrix:
    return replace(m, recipes=tuple(recipes))


@pytest.mark.parametrize("status", ["unknown", "deleted"])
def test_a_base_that_is_not_served_is_chosen_only_when_a_recipe_rebuilds_it(mini, status):
    gone = img("12.4.1-base-ubuntu22.04", status=status)
    m = with_recipes(only_images(mini, gone))
    with pytest.raises(ResolveError, match=r"is served or can be rebuilt from NVIDIA's recipe .*no longer served"):
        resolve(m, "torch-2.4-cuda12")
    m = with_recipes(only_images(mini, gone), recipe("12.4.1-base-ubuntu22.04"))
    s = resolve(m, "torch-2.4-cuda12")
    assert (s.base_image, s.base_image_status) == ("nvidia/cuda:12.4.1-base-ubuntu22.04", status)
    assert any("rebuilds it from NVIDIA's recipe" in n for n in s.notes)


def test_a_recipe_chain_with_a_missing_link_rebuilds_nothing(mini):
    m = with_recipes(only_images(mini, img("12.4.1-runtime-ubuntu22.04", flavour="runtime", status="deleted")),
                     recipe("12.4.1-runtime-ubuntu22.04", parent="12.4.1-base-ubuntu22.04"))
    assert not m.rebuildable(m.images[0])
    m = with_recipes(m, *m.recipes, recipe("12.4.1-base-ubuntu22.04"))
    assert m.rebuildable(m.images[0]) and [r.tag for r in m.recipe_chain("12.4.1-runtime-ubuntu22.04")] == [
        "12.4.1-base-ubuntu22.04", "12.4.1-runtime-ubuntu22.04"]
    loop = with_recipes(m, recipe("12.4.1-runtime-ubuntu22.04", parent="12.4.1-runtime-ubuntu22.04"))
    assert loop.recipe_chain("12.4.1-runtime-ubuntu22.04") is None


def test_a_served_base_wins_over_a_rebuilt_one_even_of_an_older_patch(mini):
    m = with_recipes(only_images(mini, img("12.4.1-base-ubuntu22.04", status="unknown"),
                                 img("12.4.0-base-ubuntu22.04", cuda="12.4.0", status="published")),
                     recipe("12.4.1-base-ubuntu22.04"))
    assert resolve(m, "torch-2.4-cuda12").base_image == "nvidia/cuda:12.4.0-base-ubuntu22.04"
    # between two rebuildable bases the newer patch wins, whatever their status says
    m = with_recipes(only_images(mini, img("12.4.1-base-ubuntu22.04", status="deleted"),
                                 img("12.4.0-base-ubuntu22.04", cuda="12.4.0", status="unknown")),
                     recipe("12.4.1-base-ubuntu22.04"), recipe("12.4.0-base-ubuntu22.04"))
    assert resolve(m, "torch-2.4-cuda12").base_image == "nvidia/cuda:12.4.1-base-ubuntu22.04"


def test_a_pinned_or_custom_base_is_taken_as_the_row_says(mini):
    mine = img("mine", repository="example/base", custom=True, status="unknown")
    m = set_build(only_images(mini, mine), "torch-2.4.1-cuda12.4", base_image=mine.ref)
    assert resolve(m, "torch-2.4-cuda12").base_image == mine.ref
    # a mirror of a base NVIDIA no longer serves, pinned by the row: not custom, no recipe, taken
    mirror = img("12.4.1-base-ubuntu22.04", repository="mirror.example/nvidia/cuda", status="deleted")
    m = set_build(with_recipes(only_images(mini, mirror)), "torch-2.4.1-cuda12.4", base_image=mirror.ref)
    assert resolve(m, "torch-2.4-cuda12").base_image == mirror.ref


def test_apt_python_wins_over_a_newer_os_needing_standalone(mini):
    # torch 1.0 supports 3.5-3.7: ubuntu18.04 has 3.6 on apt, ubuntu22.04 would need standalone
    s = resolve(mini, "torch-1.0-cuda10")
    assert s.os == "ubuntu18.04" and s.python_strategy == "apt"


def test_newest_os_wins_when_both_have_apt_python(mini):
    m = replace(mini, oses=mini.oses + (OS_24,))
    m = set_build(m, "torch-2.4.1-cuda12.4", python=(V("3.10"), V("3.12")))
    m = only_images(m, img("12.4.1-base-ubuntu22.04"), img("12.4.1-base-ubuntu24.04", os_name="ubuntu24.04"))
    s = resolve(m, "torch-2.4-cuda12")
    assert (s.os, s.python) == ("ubuntu24.04", "3.12")


def test_newest_cuda_patch_wins_on_the_same_os(mini):
    m = only_images(mini, img("12.4.0-base-ubuntu22.04", cuda="12.4.0"), img("12.4.1-base-ubuntu22.04"))
    assert resolve(m, "torch-2.4-cuda12").base_image == "nvidia/cuda:12.4.1-base-ubuntu22.04"
    m = only_images(mini, img("12.4.1-base-ubuntu22.04"), img("12.4.0-base-ubuntu22.04", cuda="12.4.0"))
    assert resolve(m, "torch-2.4-cuda12").base_image == "nvidia/cuda:12.4.1-base-ubuntu22.04"


def test_full_tie_is_broken_by_the_reference_deterministically(mini):
    a = img("12.4.1-base-ubuntu22.04")
    b = img("12.4.1-base-ubuntu22.04", repository="nvidia/cudb")
    for order in ((a, b), (b, a)):
        assert resolve(only_images(mini, *order), "torch-2.4-cuda12").base_image == b.ref


def test_custom_images_are_never_chosen_unless_pinned(mini):
    custom = img("mine", repository="example/base", custom=True)
    m = only_images(mini, custom, img("12.4.1-base-ubuntu22.04"))
    assert resolve(m, "torch-2.4-cuda12").base_image == "nvidia/cuda:12.4.1-base-ubuntu22.04"
    m2 = set_build(m, "torch-2.4.1-cuda12.4", base_image=custom.ref)
    s = resolve(m2, "torch-2.4-cuda12")
    assert s.base_image == custom.ref and s.base_image_custom


def test_pinned_base_image_must_exist(mini):
    m = set_build(mini, "torch-2.4.1-cuda12.4", base_image="example/missing:1")
    with pytest.raises(ResolveError, match="pins base image 'example/missing:1', which no \\[\\[image\\]\\] row"):
        resolve(m, "torch-2.4-cuda12")


def test_pinned_base_image_ignores_flavour_and_cuda_filters(mini):
    m = set_build(mini, "torch-2.4.1-cuda12.4", base_image="nvidia/cuda:12.4.1-devel-ubuntu22.04")
    s = resolve(m, "torch-2.4-cuda12")
    assert s.base_image == "nvidia/cuda:12.4.1-devel-ubuntu22.04" and s.flavour == "devel"
    assert s.name.endswith("-devel")


def test_os_restriction_is_obeyed(mini):
    m = replace(mini, oses=mini.oses + (OS_24,))
    m = set_build(m, "torch-2.4.1-cuda12.4", os=("ubuntu22.04",), python=(V("3.10"), V("3.12")))
    m = only_images(m, img("12.4.1-base-ubuntu22.04"), img("12.4.1-base-ubuntu24.04", os_name="ubuntu24.04"))
    assert resolve(m, "torch-2.4-cuda12").os == "ubuntu22.04"
    m = set_build(m, "torch-2.4.1-cuda12.4", os=("ubuntu24.04",))
    assert resolve(m, "torch-2.4-cuda12").os == "ubuntu24.04"


def test_cpu_builds_use_cpu_images_only(mini):
    s = resolve(mini, "torch-2.4-cpu")
    assert s.base_image == "ubuntu:22.04" and s.cuda is None and s.min_driver is None


def test_cuda_builds_never_take_a_cpu_image(mini):
    m = only_images(mini, img("22.04", cuda=None, repository="ubuntu"))
    with pytest.raises(ResolveError, match="no CUDA 12.4 base base image in the matrix"):
        resolve(m, "torch-2.4-cuda12")


def test_no_cpu_image_is_a_clear_error(mini):
    m = only_images(mini, img("12.4.1-base-ubuntu22.04"))
    with pytest.raises(ResolveError, match="no CPU base image in the matrix for torch-2.4.1-cpu"):
        resolve(m, "torch-2.4-cpu")


# --- cuDNN -------------------------------------------------------------------------------------

def test_cudnn_comes_from_the_build_else_from_the_image(mini):
    m = set_build(mini, "torch-2.4.1-cuda12.4", system_cudnn=True, cudnn=None)
    m = replace(m, images=m.images + (img("12.4.1-cudnn-runtime-ubuntu22.04", flavour="cudnn-runtime", cudnn="9"),))
    s = resolve(m, "torch-2.4-cuda12")
    assert (s.flavour, s.cudnn) == ("cudnn-runtime", "9")
    assert s.name == "torch-2.4.1-cuda12.4-py3.10"  # the build's own flavour: no suffix
    m2 = set_build(m, "torch-2.4.1-cuda12.4", cudnn="9.1.0.70")
    assert resolve(m2, "torch-2.4-cuda12").cudnn == "9.1.0.70"


def test_no_cudnn_when_neither_has_one(mini):
    assert resolve(mini, "torch-2.4-cuda12").cudnn is None


# --- flavours -----------------------------------------------------------------------------------

def test_flavour_too_small_is_refused_with_the_allowed_ones(mini):
    m = set_build(mini, "torch-2.4.1-cuda12.4", system_cuda=True)
    with pytest.raises(ResolveError, match="flavour 'base' is too small for torch-2.4.1-cuda12.4: it needs runtime") as e:
        resolve(m, "torch-2.4-cuda12-base")
    assert "runtime, cudnn-runtime, devel, cudnn-devel" in e.value.line()


def test_flavour_exactly_right_has_no_suffix(mini):
    m = set_build(mini, "torch-2.4.1-cuda12.4", system_cuda=True)
    m = replace(m, images=m.images + (img("12.4.1-runtime-ubuntu22.04", flavour="runtime"),))
    s = resolve(m, "torch-2.4-cuda12-runtime")
    assert s.flavour == "runtime" and s.name == "torch-2.4.1-cuda12.4-py3.10"
    assert resolve(m, "torch-2.4-cuda12") == s


def test_bigger_flavour_is_named(mini):
    s = resolve(mini, "torch-2.4-cuda12-devel")
    assert s.flavour == "devel" and s.name.endswith("-py3.10-devel")
    assert resolve(mini, s.name) == s


def test_cudnn_flavours_need_cudnn_content(mini):
    m = set_build(mini, "torch-2.4.1-cuda12.4", system_cudnn=True)
    with pytest.raises(ResolveError, match="needs cudnn-runtime") as e:
        resolve(m, "torch-2.4-cuda12-devel")
    assert "use one of cudnn-runtime, cudnn-devel" in e.value.line()


def test_requested_flavour_without_an_image(mini):
    with pytest.raises(ResolveError, match="no CUDA 12.4 runtime base image"):
        resolve(mini, "torch-2.4-cuda12-runtime")


# --- Python -------------------------------------------------------------------------------------

def test_os_default_python_first(mini):
    s = resolve(mini, "torch-2.4-cuda12")
    assert (s.python, s.python_strategy) == ("3.10", "apt")


def test_newest_apt_python_when_the_default_is_not_supported(mini):
    m = set_build(mini, "torch-2.4.1-cuda12.4", python=(V("3.11"), V("3.12")))
    s = resolve(m, "torch-2.4-cuda12")
    assert (s.python, s.python_strategy) == ("3.11", "apt")


def test_standalone_newest_python_when_the_os_has_none(mini):
    m = set_build(mini, "torch-2.4.1-cuda12.4", python=(V("3.8"), V("3.9")))
    s = resolve(m, "torch-2.4-cuda12")
    assert (s.python, s.python_strategy) == ("3.9", "standalone")


def test_requested_python_on_apt_or_standalone(mini):
    assert resolve(mini, "torch-2.4-cuda12-py3.11").python_strategy == "apt"
    assert resolve(mini, "torch-2.4-cuda12-py3.9").python_strategy == "standalone"
    with pytest.raises(ResolveError, match="does not support Python 3.13") as e:
        resolve(mini, "torch-2.4-cuda12-py3.13")
    assert "3.8, 3.9, 3.10, 3.11, 3.12" in e.value.line()


def test_requested_python_prefers_the_os_that_has_it(mini):
    # 3.6 is on ubuntu18.04's apt, not 16.04's: both images are deleted, same CUDA
    s = resolve(mini, "torch-1.0-cuda10-py3.6")
    assert s.os == "ubuntu18.04" and s.python_strategy == "apt"
    s = resolve(mini, "torch-1.0-cuda10-py3.5")
    assert s.os == "ubuntu16.04" and s.python_strategy == "apt"


def test_image_os_missing_from_os_matrix_falls_back_to_standalone(mini):
    m = only_images(mini, img("12.4.1-base-rocky9", os_name="rocky9"))
    s = resolve(m, "torch-2.4-cuda12")
    assert (s.os, s.python, s.python_strategy) == ("rocky9", "3.12", "standalone")


# --- the stack it builds ------------------------------------------------------------------------

def test_stack_fields_come_from_the_right_rows(mini):
    s = resolve(mini, "torch-2.4-cuda11")
    assert (s.row, s.variant, s.cuda, s.min_driver, s.toolkit_driver) == (
        "torch-2.4.1-cuda11.8", "cu118", "11.8", "450.80.02", "520.61.05")
    assert s.index_url == "https://download.pytorch.org/whl/cu118"
    assert s.packages == ("torch==2.4.1+cu118",)
    assert s.sass_archs[-1] == "9.0" and s.ptx_archs == ("9.0",)
    assert s.minor_compat and s.minor_compat_status == "confirmed"
    assert s.status == "confirmed"


def test_status_is_partial_when_the_build_or_cuda_is_not_confirmed(mini):
    m = set_build(mini, "torch-2.4.1-cuda12.4", status="unconfirmed")
    assert resolve(m, "torch-2.4-cuda12").status == "partially confirmed"
    m = replace(mini, cuda=tuple(replace(r, status="partially confirmed") if r.key == "12.4" else r for r in mini.cuda))
    assert resolve(m, "torch-2.4-cuda12").status == "partially confirmed"
    assert resolve(m, "torch-2.4-cuda11").status == "confirmed"


def test_notes_for_deleted_image_unconfirmed_arch_and_floor(mini):
    s = resolve(mini, "torch-1.0-cuda10")
    assert any("deleted from Docker Hub" in n for n in s.notes)
    m = set_build(mini, "torch-2.4.1-cuda12.4", arch_status="unconfirmed", note="row note")
    m = replace(m, cuda=tuple(replace(r, minor_compat_status="unconfirmed") if r.key == "12.4" else r for r in m.cuda))
    s = resolve(m, "torch-2.4-cuda12")
    assert s.notes[0] == "row note"
    assert any("architecture list is unconfirmed" in n for n in s.notes)
    assert any("minor-version-compatibility floor 525.60.13 is unconfirmed" in n for n in s.notes)
    assert s.minor_compat_status == "unconfirmed"
    assert resolve(mini, "torch-2.4-cuda12").notes == ()


def test_no_minor_compat_status_without_a_floor(mini):
    s = resolve(mini, "torch-1.0-cuda10")
    assert s.minor_compat is False and s.minor_compat_status is None and s.min_driver == s.toolkit_driver


def test_every_row_resolves_to_its_canonical_name(mini):
    for b in mini.builds:
        s = resolve_row(mini, b)
        assert resolve(mini, s.name) == s
        assert s.row == b.name


# --- errors -------------------------------------------------------------------------------------

def test_error_names_the_span_of_known_releases(mini):
    with pytest.raises(ResolveError, match=r"no torch release matches '3' \(the matrix has 1.0.0 to 2.4.1\)"):
        resolve(mini, "torch-3")


def test_error_for_a_missing_target(mini):
    with pytest.raises(ResolveError, match="torch 1.0 has no a CPU build|torch 1.0 has no CPU build"):
        resolve(mini, "torch-1.0-cpu")
    with pytest.raises(ResolveError, match="torch 1.0 has no .*CUDA 11 build"):
        resolve(mini, "torch-1.0-cuda11")


def test_error_for_a_framework_with_no_rows(mini):
    with pytest.raises(ResolveError, match="no jax release matches '0.4'$|no jax release matches '0.4'"):
        resolve(mini, "jax-0.4")


def test_never_released_is_matched_on_major_minor_only(mini):
    with pytest.raises(ResolveError, match="CUDA 12.7 was never released"):
        resolve(mini, "torch-2.4-cuda12.7")
    with pytest.raises(ResolveError) as e:
        resolve(mini, "torch-2.4-cuda12.6")
    assert "never released" not in e.value.line()


def test_suggestions_list_the_newest_release_of_the_asked_version(mini):
    with pytest.raises(ResolveError) as e:
        resolve(mini, "torch-2.4-cuda10")
    line = e.value.line()
    assert "torch-2.4.1-cuda11.8" in line and "torch-2.4.1-cuda12.4" in line and "torch-1.0" not in line


# --- version prefixes ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    "partial, version, ok",
    [
        ("1.0", "1.0.1", True), ("1.0", "1.0", True), ("1.0.0", "1.0", True), ("1.0.0.0", "1.0", True),
        ("1.0.1", "1.0", False), ("1.1", "1.10.0", False), ("1", "10.0", False), ("2", "2.4.1", True),
        ("2.4.1", "2.4.1", True), ("2.4.1", "2.4.10", False), ("12", "12.4", True), ("12.4", "12.4", True),
        ("12.4", "12.40", False),
    ],
)
def test_version_matches(partial, version, ok):
    assert version_matches(partial, V(version)) is ok


# --- keys that a looser ranking would get right only by accident ----------------------------------

def test_os_rank_is_numeric_not_alphabetical(mini):
    old = OsInfo(name="ubuntu9.10", python_default=V("3.10"), python_apt=(V("3.10"),), source=("t",), status="confirmed")
    new = OsInfo(name="ubuntu10.04", python_default=V("3.10"), python_apt=(V("3.10"),), source=("t",), status="confirmed")
    m = replace(mini, oses=mini.oses + (old, new))
    m = only_images(m, img("12.4.1-base-ubuntu9.10", os_name="ubuntu9.10"), img("12.4.1-base-ubuntu10.04", os_name="ubuntu10.04"))
    assert resolve(m, "torch-2.4-cuda12").os == "ubuntu10.04"


def test_an_os_name_without_a_version_ranks_lowest(mini):
    plain = OsInfo(name="rolling", python_default=V("3.10"), python_apt=(V("3.10"),), source=("t",), status="confirmed")
    m = replace(mini, oses=mini.oses + (plain,))
    m = only_images(m, img("12.4.1-base-rolling", os_name="rolling"), img("12.4.1-base-ubuntu22.04"))
    assert resolve(m, "torch-2.4-cuda12").os == "ubuntu22.04"
    assert resolve(only_images(m, img("12.4.1-base-rolling", os_name="rolling")), "torch-2.4-cuda12").os == "rolling"


def test_cuda_patch_rank_is_numeric_not_alphabetical(mini):
    m = only_images(mini, img("12.4.9-base-ubuntu22.04", cuda="12.4.9"), img("12.4.10-base-ubuntu22.04", cuda="12.4.10"))
    assert resolve(m, "torch-2.4-cuda12").base_image == "nvidia/cuda:12.4.10-base-ubuntu22.04"


def test_newest_cuda_is_numeric_not_by_variant_name(mini):
    # cu92 sorts after cu100 as text; CUDA 10.0 is the newer
    b = next(b for b in mini.builds if b.name == "torch-1.0.1-cuda10.0")
    cu92 = replace(b, cuda=V("9.2"), variant="cu92")
    m = replace(mini, builds=mini.builds + (cu92,))
    s = resolve(m, "torch-1.0.1")
    assert (s.cuda, s.variant) == ("10.0", "cu100")


def test_an_explicit_partial_cuda_ignores_the_default(mini):
    b = next(b for b in mini.builds if b.name == "torch-2.4.1-cuda12.4")
    cu121 = replace(b, cuda=V("12.1"), variant="cu121", default=True)
    m = replace(mini, builds=tuple(replace(x, default=False) if x.name == b.name else x for x in mini.builds) + (cu121,))
    assert resolve(m, "torch-2.4-cuda12").variant == "cu124"
    assert resolve(m, "torch-2.4-cu124").variant == "cu124"


def test_stack_carries_every_field_of_its_rows(mini):
    m = set_build(mini, "torch-2.4.1-cuda12.4", extra_index_url="https://example.invalid/extra",
                  find_links="https://example.invalid/links", arch_status="partially confirmed",
                  source=("build-src", "shared"))
    m = replace(m, images=tuple(replace(i, source=("image-src", "shared")) for i in m.images))
    m = replace(m, cuda=tuple(replace(r, source=("cuda-src",)) for r in m.cuda))
    s = resolve(m, "torch-2.4-cuda12")
    assert s.framework == "torch" and s.framework_version == "2.4.1"
    assert s.extra_index_url == "https://example.invalid/extra"
    assert s.find_links == "https://example.invalid/links"
    assert s.arch_status == "partially confirmed"
    assert s.sources == ("build-src", "shared", "image-src", "cuda-src")  # in order, deduplicated
    assert resolve(m, "torch-2.4-cpu").sources == ("test", "image-src", "shared")  # no CUDA row for a CPU build


def test_cpu_stack_name_and_status(mini):
    s = resolve(mini, "torch-2.4-cpu")
    assert s.name == "torch-2.4.1-cpu-py3.10"
    assert s.status == "confirmed"
    assert (s.min_driver, s.toolkit_driver, s.minor_compat, s.minor_compat_status) == (None, None, False, None)
    assert s.sass_archs == () and s.ptx_archs == ()


def test_error_texts(mini):
    with pytest.raises(ResolveError) as e:
        resolve(mini, "jax-0.4")
    assert str(e.value.what) == "no jax release matches '0.4'"
    m = set_build(mini, "torch-2.4.1-cuda12.4", base_image="example/missing:1")
    with pytest.raises(ResolveError) as e:
        resolve(m, "torch-2.4-cuda12")
    assert e.value.fix == "add an [[image]] row for it to your matrix file (custom = true for a private base)"
    with pytest.raises(ResolveError) as e:
        resolve(mini, "torch-2.4-cuda12-py3.13")
    assert e.value.fix == "choose one of 3.8, 3.9, 3.10, 3.11, 3.12"
    with pytest.raises(ResolveError) as e:
        resolve(mini, "torch-2.4-cuda12-runtime")
    assert e.value.fix == "add an [[image]] row (a mirror or a custom base) with --matrix, or pick another CUDA variant"
    note = resolve(mini, "torch-1.0-cuda10").notes[0]
    assert note == ("base image nvidia/cuda:10.0-base-ubuntu18.04 was deleted from Docker Hub (end of life): envman "
                    "rebuilds it from NVIDIA's recipe (--base pull: pull it, e.g. through --registry-mirror)")


@pytest.mark.parametrize(
    "name, fix",
    [
        # a version that exists: every build of its newest release
        ("torch-2.4-cuda10", "closest valid names: torch-2.4.1-cpu, torch-2.4.1-cuda11.8, torch-2.4.1-cuda12.4 "
                             "(all: envman matrix ls)"),
        # no such version: the nearest names by spelling, closest first, at most five
        ("torch-1.1-cuda10.0", "closest valid names: torch-1.0.1-cuda10.0, torch-1.0.0-cuda10.0, torch-2.4.1-cuda12.4, "
                               "torch-2.4.1-cuda11.8, torch-2.4.1-cpu (all: envman matrix ls)"),
        # newer than every release: the newest release, in the asked target where it has one
        ("torch-9.9", "the newest torch release in the matrix is 2.4.1: torch-2.4.1 (torch-2.4.1-cuda11.8, "
                      "torch-2.4.1-cuda12.4); newer releases: envman matrix update"),
        # the target counts in the spelling: the CPU or the CUDA build comes first
        ("torch-1.1-cpu", "closest valid names: torch-2.4.1-cpu, torch-1.0.1-cuda10.0, torch-2.4.1-cuda12.4, "
                          "torch-2.4.1-cuda11.8, torch-1.0.0-cuda10.0 (all: envman matrix ls)"),
        ("torch-2.5-cuda11", "the newest torch release in the matrix is 2.4.1: torch-2.4.1-cuda11 "
                             "(torch-2.4.1-cuda11.8); newer releases: envman matrix update"),
        ("torch-2.5-cpu", "the newest torch release in the matrix is 2.4.1: torch-2.4.1-cpu (torch-2.4.1-cpu); "
                          "newer releases: envman matrix update"),
        ("torch-99999999999999", "the newest torch release in the matrix is 2.4.1: torch-2.4.1 (torch-2.4.1-cuda11.8, "
                                 "torch-2.4.1-cuda12.4); newer releases: envman matrix update"),
        # no rows of the framework at all
        ("jax-0.4", "the matrix has no jax builds (all: envman matrix ls; add rows with --matrix FILE)"),
    ],
)
def test_suggestions(mini, name, fix):
    with pytest.raises(ResolveError) as e:
        resolve(mini, name)
    assert e.value.fix == fix


def test_suggestions_are_at_most_five(mini):
    extra = tuple(replace(b, version=V(f"2.4.{i}"), default=False) for i in range(2, 6)
                  for b in mini.builds if b.name == "torch-2.4.1-cpu")
    m = replace(mini, builds=mini.builds + extra + tuple(replace(b, version=V("2.3.0"), default=False)
                                                        for b in mini.builds if b.name == "torch-2.4.1-cpu"))
    with pytest.raises(ResolveError) as e:
        resolve(m, "torch-2.4.9-cpu")
    assert e.value.fix.startswith("the newest torch release in the matrix is 2.4.5: torch-2.4.5-cpu (torch-2.4.5-cpu)")
    with pytest.raises(ResolveError) as e:
        resolve(m, "torch-0.9-cpu")  # older than every release: the closest by spelling, at most five
    names = e.value.fix.removeprefix("closest valid names: ").removesuffix(" (all: envman matrix ls)").split(", ")
    assert len(names) == 5 and set(names) <= {b.name for b in m.builds}


# --- images skipped for one reason must not hide later candidates ---------------------------------

def test_an_image_without_the_platform_does_not_hide_a_later_one(mini):
    amd = replace(img("12.4.1-base-ubuntu22.04", os_name="ubuntu22.04"), repository="nvidia/cuda")
    both = replace(img("12.4.1-base-ubuntu22.04", repository="nvidia/cudb"), platforms=("linux/amd64", "linux/arm64"),
                   platform_source=("t",))
    m = only_images(mini, amd, both)
    m = replace(m, builds=tuple(replace(b, platforms=("linux/amd64", "linux/arm64"), platform_source=("t",))
                                if b.name == "torch-2.4.1-cuda12.4" else b for b in m.builds))
    assert resolve(m, "torch-2.4-cuda12", platform="linux/arm64").base_image == both.ref


def _system_cudnn(mini, needed: str, *images):
    m = set_build(mini, "torch-2.4.1-cuda12.4", system_cudnn=True, cudnn=needed)
    return only_images(m, *images)


def test_system_cudnn_takes_the_image_whose_major_fits(mini):
    # c8 would win every tie-break (its reference sorts last): only the cuDNN major rules it out
    c8 = img("12.4.1-cudnn-runtime-ubuntu22.04", flavour="cudnn-runtime", cudnn="8", repository="nvidia/cudz")
    c9 = img("12.4.1-cudnn-runtime-ubuntu22.04", flavour="cudnn-runtime", cudnn="9")
    for order in ((c8, c9), (c9, c8)):
        s = resolve(_system_cudnn(mini, "9.1.0", *order), "torch-2.4-cuda12")
        assert s.base_image == c9.ref and s.cudnn == "9.1.0"


def test_system_cudnn_refuses_an_image_of_another_major(mini):
    c8 = img("12.4.1-cudnn-runtime-ubuntu22.04", flavour="cudnn-runtime", cudnn="8")
    with pytest.raises(ResolveError, match=r"no CUDA 12.4 cudnn-runtime \(cuDNN 9\) base image"):
        resolve(_system_cudnn(mini, "9.1.0", c8), "torch-2.4-cuda12")
    # an image of the right major is fine, whatever the minor the build names
    assert resolve(_system_cudnn(mini, "8.9.7", c8), "torch-2.4-cuda12").base_image == c8.ref


def test_without_system_cudnn_the_image_cudnn_does_not_matter(mini):
    m = set_build(mini, "torch-2.4.1-cuda12.4", cudnn="9.1.0")
    c8 = img("12.4.1-cudnn-devel-ubuntu22.04", flavour="cudnn-devel", cudnn="8")
    m = replace(m, images=m.images + (c8,))
    assert resolve(m, "torch-2.4-cuda12-cudnn-devel").base_image == c8.ref


def test_an_exact_release_wins_over_a_longer_one_it_prefixes(mini):
    b = next(b for b in mini.builds if b.name == "torch-2.4.1-cuda12.4")
    four = replace(b, version=V("2.4.1.1"))
    m = replace(mini, builds=tuple(x for x in mini.builds if x.name != b.name) + (b, four))
    assert resolve(m, "torch-2.4.1-cuda12").framework_version == "2.4.1"
    assert resolve(m, "torch-2.4.1.1-cuda12").framework_version == "2.4.1.1"
    assert resolve(m, "torch-2.4-cuda12").framework_version == "2.4.1.1"  # a prefix takes the newest


def test_the_line_for_bases_none_serves_or_rebuilds_names_three_and_how_to_fix(mini):
    """The whole line: what, the first three bases that are gone (with "is" for one, "are" for
    more), and the fix."""
    gone = [img("12.4.1-base-ubuntu22.04", status="deleted", repository=f"nvidia/cud{c}") for c in "abcd"]
    with pytest.raises(ResolveError) as one:
        resolve(with_recipes(only_images(mini, gone[0])), "torch-2.4-cuda12")
    assert one.value.what == (f"no CUDA 12.4 base base image in the matrix for torch-2.4.1-cuda12.4 is served or can be "
                              f"rebuilt from NVIDIA's recipe ({gone[0].ref} is no longer served and no [[recipe]] "
                              "rebuilds them)")
    assert one.value.fix == ("add a [[recipe]] or an [[image]] row (a mirror, a custom base) with --matrix, or pick another "
                             "CUDA variant")
    with pytest.raises(ResolveError) as four:
        resolve(with_recipes(only_images(mini, *gone)), "torch-2.4-cuda12")
    listed = ", ".join(i.ref for i in gone[:3])
    assert f"({listed} are no longer served and no [[recipe]] rebuilds them)" in four.value.what
    assert gone[3].ref not in four.value.what
    assert four.value.fix == one.value.fix


def test_a_base_that_must_carry_cudnn_without_a_cudnn_release_named_is_said_without_one(mini):
    """A build that loads cuDNN from the image but names no cuDNN release: the line names the
    flavour and no cuDNN major (there is none to name)."""
    m = only_images(set_build(mini, "torch-2.4.1-cuda12.4", system_cudnn=True, cudnn=None),
                    img("12.4.1-base-ubuntu22.04"))
    with pytest.raises(ResolveError) as e:
        resolve(m, "torch-2.4-cuda12")
    assert e.value.what.startswith("no CUDA 12.4 cudnn-runtime base image in the matrix for torch-2.4.1-cuda12.4")
    assert "cuDNN" not in e.value.what


# --- a Python the base's OS cannot give ----------------------------------------------------------
# A Python the OS does not package comes from python-build-standalone, which starts at 3.8: on a
# base whose OS packages neither, the stack would resolve and then never render.

def test_a_standalone_python_starts_exactly_at_3_8(mini):
    m = set_build(mini, "torch-2.4.1-cuda12.4", python=(V("3.7"), V("3.8")))
    s = resolve(m, "torch-2.4-cuda12-py3.8")
    assert (s.python, s.python_strategy) == ("3.8", "standalone")
    with pytest.raises(ResolveError) as e:
        resolve(m, "torch-2.4-cuda12-py3.7")
    line = e.value.line()
    assert "can give Python 3.7" in line and "python-build-standalone starts at 3.8" in line
    assert "ubuntu22.04 packages 3.10" in line and "choose Python 3.8 or another CUDA variant" in line


def test_without_a_python_asked_the_newest_standalone_one_from_3_8(mini):
    m = set_build(mini, "torch-2.4.1-cuda12.4", python=(V("3.6"), V("3.7"), V("3.8")))
    assert resolve(m, "torch-2.4-cuda12").python == "3.8"
    m = set_build(mini, "torch-2.4.1-cuda12.4", python=(V("3.6"), V("3.7")))
    with pytest.raises(ResolveError, match="can give a Python of its") as e:
        resolve(m, "torch-2.4-cuda12")
    assert "choose another release or another CUDA variant" in e.value.line()


def test_a_python_no_base_gives_names_the_os_and_what_it_packages(mini):
    m = only_images(mini, img("10.0-base-ubuntu16.04", cuda="10.0", os_name="ubuntu16.04"))
    assert resolve(m, "torch-1.0-cuda10-py3.5").python_strategy == "apt"
    with pytest.raises(ResolveError) as e:
        resolve(m, "torch-1.0-cuda10-py3.6")
    line = e.value.line()
    assert "no base image of torch-1.0.1-cuda10.0 can give Python 3.6: ubuntu16.04 packages 3.5 and" in line
    assert "choose Python 3.5 or another CUDA variant" in line


def _old_bases(mini: Matrix, cu118_os: str) -> Matrix:
    """torch 2.4.1 as an old release: Pythons 3.5-3.7, its default CUDA 12.4 build on ubuntu16.04
    (3.5 only), its CUDA 11.8 build on ``cu118_os``."""
    m = only_images(mini, img("12.4.1-base-ubuntu16.04", os_name="ubuntu16.04"),
                    img("11.8.0-base-x", cuda="11.8.0", os_name=cu118_os), img("22.04", cuda=None, repository="ubuntu"))
    return with_builds(m, lambda b: replace(b, python=(V("3.5"), V("3.6"), V("3.7"))) if b.version == V("2.4.1") else b)


def test_a_python_named_without_cuda_takes_another_build_whose_base_gives_it(mini):
    m = _old_bases(mini, "ubuntu18.04")
    s = resolve(m, "torch-2.4-py3.6")
    assert (s.row, s.python, s.python_strategy, s.os) == ("torch-2.4.1-cuda11.8", "3.6", "apt", "ubuntu18.04")
    assert any("Python 3.6: the CUDA 11.8 build, as the default torch-2.4.1-cuda12.4 has no base image" in n
               for n in s.notes)
    assert resolve(m, "torch-2.4-py3.5").row == "torch-2.4.1-cuda12.4"  # the default gives it
    assert not any("the default" in n for n in resolve(m, "torch-2.4-py3.5").notes)
    with pytest.raises(ResolveError, match="no base image of torch-2.4.1-cuda12.4 can give Python 3.6"):
        resolve(m, "torch-2.4-cuda12-py3.6")  # a CUDA named: that build or nothing
    with pytest.raises(ResolveError, match="no base image of torch-2.4.1-cuda12.4 can give Python 3.6"):
        resolve(m, "torch-2.4-py3.6", cuda_patch=V("12.4.1"))  # likewise one update of CUDA 12.4


def test_when_no_build_gives_the_python_the_default_build_says_why(mini):
    m = _old_bases(mini, "ubuntu16.04")
    with pytest.raises(ResolveError, match="no base image of torch-2.4.1-cuda12.4 can give Python 3.6"):
        resolve(m, "torch-2.4-py3.6")


def _with_os(m: Matrix, *oses: OsInfo) -> Matrix:
    return replace(m, oses=tuple(m.oses) + oses)


def _os(name: str, *apt: str) -> OsInfo:
    return OsInfo(name=name, python_default=V(apt[0]) if apt else V("3.5"), python_apt=tuple(V(p) for p in apt),
                  source=("test",), status="confirmed")


def test_the_line_names_every_os_of_the_bases_and_what_they_package(mini):
    m = _with_os(only_images(mini, img("10.0-base-a", cuda="10.0", os_name="osa"),
                             img("10.0-base-b", cuda="10.0", os_name="osb")), _os("osa", "3.5", "3.7"), _os("osb"))
    with pytest.raises(ResolveError) as e:
        resolve(m, "torch-1.0-cuda10-py3.6")
    assert "can give Python 3.6: osa, osb package 3.5, 3.7 and python-build-standalone starts at 3.8" in e.value.line()
    assert "choose Python 3.5, 3.7 or another CUDA variant" in e.value.line()
    m = _with_os(only_images(mini, img("10.0-base-b", cuda="10.0", os_name="osb")), _os("osb"))
    with pytest.raises(ResolveError, match="can give Python 3.6: osb packages none and python-build-standalone"):
        resolve(m, "torch-1.0-cuda10-py3.6")


def test_an_os_that_packages_the_python_wins_over_one_that_would_need_standalone(mini):
    # both give 3.9; the apt one is older (its OS ranks lower), so only the apt key can pick it
    m = _with_os(only_images(mini, img("12.4.1-base-old", os_name="old1"), img("12.4.1-base-new", os_name="new9")),
                 _os("old1", "3.9"), _os("new9", "3.12"))
    s = resolve(m, "torch-2.4-cuda12-py3.9")
    assert (s.os, s.python_strategy) == ("old1", "apt")


def _three_cudas(mini: Matrix, cu118_os: str) -> Matrix:
    """torch 2.4.1 with a third GPU build: the default CUDA 12.4 build's base on ubuntu16.04 (3.5
    only), CUDA 12.1's on ubuntu18.04, CUDA 11.8's on ``cu118_os``; Pythons 3.5-3.7."""
    extra = replace(next(b for b in mini.builds if b.name == "torch-2.4.1-cuda11.8"), variant="cu121", cuda=V("12.1"),
                    default=False)
    m = replace(mini, builds=tuple(mini.builds) + (extra,))
    m = only_images(m, img("12.4.1-base-ubuntu16.04", os_name="ubuntu16.04"),
                    img("12.1.1-base-x", cuda="12.1.1", os_name="ubuntu18.04"),
                    img("11.8.0-base-x", cuda="11.8.0", os_name=cu118_os), img("22.04", cuda=None, repository="ubuntu"))
    return with_builds(m, lambda b: replace(b, python=(V("3.5"), V("3.6"), V("3.7"))) if b.version == V("2.4.1") else b)


def test_the_other_builds_are_tried_newest_cuda_first(mini):
    assert resolve(_three_cudas(mini, "ubuntu18.04"), "torch-2.4-py3.6").row == "torch-2.4.1-cuda12.1"


def test_an_other_build_that_cannot_give_the_python_is_passed_over(mini):
    m = _three_cudas(mini, "ubuntu18.04")
    m = only_images(m, *[i for i in m.images if i.cuda != V("12.1")])  # CUDA 12.1 has no base at all now
    assert resolve(m, "torch-2.4-py3.6").row == "torch-2.4.1-cuda11.8"


def test_the_flavour_asked_holds_for_the_other_build_too(mini):
    m = _old_bases(mini, "ubuntu18.04")  # base flavour images only
    with pytest.raises(ResolveError):
        resolve(m, "torch-2.4-py3.6-devel")


def test_the_other_build_keeps_the_platform_asked(mini):
    arm = ("linux/amd64", "linux/arm64")
    m = _old_bases(mini, "ubuntu18.04")
    m = replace(m, images=tuple(replace(i, platforms=arm) for i in m.images))
    m = with_builds(m, lambda b: replace(b, platforms=arm) if b.version == V("2.4.1") else b)
    s = resolve(m, "torch-2.4-py3.6", platform="linux/arm64")
    assert (s.row, s.platform) == ("torch-2.4.1-cuda11.8", "linux/arm64") and s.name.endswith("-arm64")


def test_a_free_threaded_python_named_without_cuda_on_another_build_stays_free_threaded(mini):
    m = with_builds(mini, lambda b: replace(b, python_freethreaded=(V("3.13"),), python=b.python + (V("3.13"),))
                    if b.version == V("2.4.1") else b)
    m = only_images(m, *[i for i in m.images if i.cuda != V("12.4")])  # the default CUDA 12.4 build has no base
    s = resolve(m, "torch-2.4-py3.13t")
    assert (s.row, s.python, s.freethreaded) == ("torch-2.4.1-cuda11.8", "3.13", True)


def test_stack_pythons_are_the_wheels_pythons_a_base_gives(mini):
    from envman.stack.resolve import stack_pythons

    m = _old_bases(mini, "ubuntu18.04")
    default = next(b for b in m.builds if b.name == "torch-2.4.1-cuda12.4")
    cu118 = next(b for b in m.builds if b.name == "torch-2.4.1-cuda11.8")
    assert stack_pythons(m, default) == (V("3.5"),)  # ubuntu16.04: 3.5; 3.6 and 3.7 are under 3.8
    assert stack_pythons(m, cu118) == (V("3.6"), V("3.7"))  # ubuntu18.04's apt: 3.6, 3.7, 3.8
    assert stack_pythons(m, cu118) is stack_pythons(m, cu118)  # kept per row and platform
    assert stack_pythons(m, cu118, "linux/arm64") == ()  # no arm64 base
    m2 = set_build(mini, "torch-2.4.1-cuda12.4", python=(V("3.8"), V("3.12")))
    assert stack_pythons(m2, next(b for b in m2.builds if b.name == "torch-2.4.1-cuda12.4")) == (V("3.8"), V("3.12"))
