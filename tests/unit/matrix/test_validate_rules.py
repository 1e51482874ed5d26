"""One negative test per rule of ``envman matrix validate``.

The small hand-written matrix validates clean; each case corrupts it once and asserts that
exactly the one expected problem is reported, and nothing else.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

import pytest
from packaging.version import Version

from envman.matrix.model import Arch, BaseImage, Download, DriverVersion, Gpu, Matrix, NgcRelease
from envman.matrix.validate import (
    Problem,
    allowed_cudnn_majors,
    cudnn_token,
    expected_tag,
    validate,
)

V = Version


@pytest.fixture(scope="module")
def clean(mini) -> Matrix:
    assert validate(mini) == []
    return mini


def _swap(seq, pick: Callable, change: Callable):
    out = []
    hit = 0
    for x in seq:
        if pick(x):
            hit += 1
            out.append(change(x))
        else:
            out.append(x)
    assert hit == 1, "the corruption must touch exactly one row"
    return tuple(out)


def cuda(m, key, **kw):
    return replace(m, cuda=_swap(m.cuda, lambda r: r.key == key, lambda r: replace(r, **kw)))


def image(m, ref, **kw):
    return replace(m, images=_swap(m.images, lambda i: i.ref == ref, lambda i: replace(i, **kw)))


def build(m, name, **kw):
    return replace(m, builds=_swap(m.builds, lambda b: b.name == name, lambda b: replace(b, **kw)))


def os_(m, name, **kw):
    return replace(m, oses=_swap(m.oses, lambda o: o.name == name, lambda o: replace(o, **kw)))


def cudnn_image(tag: str, cuda_patch: str, cudnn: str | None, flavour: str = "cudnn-runtime",
                os_name: str = "ubuntu22.04", repository: str = "nvidia/cuda") -> BaseImage:
    v = V(cuda_patch)
    return BaseImage(repository=repository, tag=tag, cuda=V(f"{v.major}.{v.minor}"), cuda_patch=v,
                     flavour=flavour, cudnn=cudnn, os=os_name, status="published", source=("test",))


def recipe(m, tag, **kw):
    return replace(m, recipes=_swap(m.recipes, lambda r: r.tag == tag, lambda r: replace(r, **kw)))


def gpu(m, gpu_id, **kw):
    return replace(m, gpus=_swap(m.gpus, lambda g: g.id == gpu_id, lambda g: replace(g, **kw)))


#: An NGC release as NVIDIA's contents list gives it, every figure present: the mini matrix has none.
NGC = NgcRelease(repository="nvcr.io/nvidia/pytorch", release="24.05", tags=("24.05-py3",), framework="torch",
                 framework_version="2.4.0a0+07cecf4", cuda=V("12.4.1"), cudnn="9.1.0.70", python=V("3.10"),
                 os="ubuntu22.04", min_driver="545", source=("test",), status="confirmed")


def ngc(m, *rows):
    return replace(m, ngc=m.ngc + rows)


B12 = "torch-2.4.1-cuda12.4"
B10 = "torch-1.0.1-cuda10.0"
CPU = "torch-2.4.1-cpu"
IMG12 = "nvidia/cuda:12.4.1-base-ubuntu22.04"
ARM = ("linux/amd64", "linux/arm64")

CASES = [
    # --- CUDA releases
    ("release also never released",
     lambda m: replace(m, never_released=m.never_released + (("12.4", "test"),)),
     "cuda 12.4", "listed both as a release and as never released"),
    ("CUDA >= 11 without a floor",
     lambda m: cuda(m, "11.8", minor_compat_driver=None),
     "cuda 11.8", "CUDA >= 11 has minor-version compatibility: minor_compat_driver is missing"),
    ("CUDA < 11 with a floor",
     lambda m: cuda(m, "10.0", minor_compat_driver=DriverVersion.parse("400.1")),
     "cuda 10.0", "CUDA < 11 has no minor-version compatibility: remove minor_compat_driver"),
    ("empty sm list",
     lambda m: cuda(m, "10.0", sm=()),
     "cuda 10.0", "sm (compute capabilities nvcc targets) is empty"),
    ("toolkit drivers go backwards",
     lambda m: cuda(m, "12.4", toolkit_driver=DriverVersion.parse("520.61.04")),
     "cuda 12.4", "toolkit_driver 520.61.04 is older than CUDA 11.8's 520.61.05"),
    # --- OS
    ("default python not on apt",
     lambda m: os_(m, "ubuntu22.04", python_default=V("3.12")),
     "os ubuntu22.04", "python_default must be listed in python_apt"),
    # --- images
    ("duplicate image",
     lambda m: replace(m, images=m.images + (next(i for i in m.images if i.ref == IMG12),)),
     f"image {IMG12}", "duplicate image row"),
    ("image on an unknown OS",
     lambda m: image(m, "ubuntu:22.04", os="ubuntu99.04"),
     "image ubuntu:22.04", "os 'ubuntu99.04' is not in the os matrix"),
    ("image of an unknown CUDA",
     lambda m: replace(m, images=m.images + (cudnn_image("12.6.3-base-ubuntu22.04", "12.6.3", None, "base"),)),
     "image nvidia/cuda:12.6.3-base-ubuntu22.04", "CUDA 12.6 is not a release in the matrix"),
    ("non-nvidia repository",
     lambda m: replace(m, images=m.images + (cudnn_image("12.4.1-base-ubuntu22.04", "12.4.1", None, "base",
                                                         repository="example/cuda"),)),
     "image example/cuda:12.4.1-base-ubuntu22.04", "non-custom CUDA images must come from nvidia/cuda (mark a private base custom = true)"),
    ("tag of the wrong era",
     lambda m: image(m, IMG12, tag="12.4-base-ubuntu22.04"),
     "image nvidia/cuda:12.4-base-ubuntu22.04", "tag does not follow the naming rules of its era: expected '12.4.1-base-ubuntu22.04'"),
    ("cudnn flavour without cudnn",
     lambda m: replace(m, images=m.images + (cudnn_image("12.4.1-cudnn-runtime-ubuntu22.04", "12.4.1", None),)),
     "image nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04", "a cudnn flavour needs cudnn (the major version)"),
    ("cudnn never shipped with that CUDA",
     lambda m: replace(m, images=m.images + (cudnn_image("12.4.1-cudnn-runtime-ubuntu22.04", "12.4.1", "8"),)),
     "image nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04", "cuDNN 8 was not shipped in nvidia/cuda images of CUDA 12.4"),
    ("cudnn on a flavour without it",
     lambda m: image(m, IMG12, cudnn="9"),
     f"image {IMG12}", "cudnn is set but the flavour has no cuDNN"),
    # --- framework builds
    ("duplicate build",
     lambda m: replace(m, builds=m.builds + (next(b for b in m.builds if b.name == "torch-2.4.1-cuda11.8"),)),
     "torch 2.4.1 cu118", "duplicate build row"),
    ("unpinned package",
     lambda m: build(m, B12, packages=("torch>=2",)),
     "torch 2.4.1 cu124", "package 'torch>=2' is not a pinned requirement (name==version)"),
    ("bare package",
     lambda m: build(m, B12, packages=("torch==2.4.1", "torchvision")),
     "torch 2.4.1 cu124", "package 'torchvision' is not a pinned requirement (name==version)"),
    ("wildcard pin",
     lambda m: build(m, B12, packages=("torch==2.4.*",)),
     "torch 2.4.1 cu124", "package 'torch==2.4.*' is not a pinned requirement (name==version)"),
    ("cudnn flavour without cudnn, older tag era",
     lambda m: replace(m, images=m.images + (cudnn_image("11.8.0-cudnn8-runtime-ubuntu22.04", "11.8.0", None),)),
     "image nvidia/cuda:11.8.0-cudnn8-runtime-ubuntu22.04", "a cudnn flavour needs cudnn (the major version)"),
    ("CPU build with archs",
     lambda m: build(m, CPU, sass=(Arch(8, 0),)),
     "torch 2.4.1 cpu", "a CPU build cannot carry GPU architectures"),
    ("CPU build with PTX",
     lambda m: build(m, CPU, ptx=(Arch(8, 0),)),
     "torch 2.4.1 cpu", "a CPU build cannot carry GPU architectures"),
    ("CPU build needs system CUDA",
     lambda m: build(m, CPU, system_cuda=True),
     "torch 2.4.1 cpu", "a CPU build cannot need system CUDA/cuDNN"),
    ("CPU build needs system cuDNN",
     lambda m: build(m, CPU, system_cudnn=True),
     "torch 2.4.1 cpu", "a CPU build cannot need system CUDA/cuDNN"),
    ("build of an unknown CUDA",
     lambda m: build(m, B12, cuda=V("12.6")),
     "torch 2.4.1 cu124", "CUDA 12.6 is not a release in the matrix"),
    ("CUDA build without archs",
     lambda m: build(m, B12, sass=(), ptx=()),
     "torch 2.4.1 cu124", "a CUDA build must list its architectures (sass and/or ptx)"),
    ("SASS the toolkit cannot build",
     lambda m: build(m, B12, sass=(Arch(8, 0), Arch(10, 0))),
     "torch 2.4.1 cu124", "SASS sm_100 cannot be built by CUDA 12.4 (nvcc targets 5.0, 6.0, 7.0, 7.5, 8.0, 8.6, 8.9, 9.0)"),
    ("PTX the toolkit cannot build",
     lambda m: build(m, B12, ptx=(Arch(3, 5),)),
     "torch 2.4.1 cu124", "PTX compute_35 cannot be built by CUDA 12.4"),
    ("build restricted to an unknown OS",
     lambda m: build(m, B12, os=("ubuntu99.04",)),
     "torch 2.4.1 cu124", "os 'ubuntu99.04' is not in the os matrix"),
    ("no base image of the flavour the build needs",
     lambda m: build(m, B12, system_cudnn=True, cudnn="9.1.0"),
     "torch 2.4.1 cu124", "no cudnn-runtime base image for CUDA 12.4 in the image matrix"),
    ("two default variants",
     lambda m: build(m, "torch-2.4.1-cuda11.8", default=True),
     "torch 2.4.1", "more than one variant marked default"),
    # --- GPUs
    ("duplicate GPU id",
     lambda m: replace(m, gpus=m.gpus + (replace(m.gpus[0], name="another"),)),
     "gpu rtx3090", "duplicate id"),
    ("GPU name of brand words only",
     lambda m: gpu(m, "h100-sxm", aliases=("h100", "NVIDIA GPU")),
     "gpu h100-sxm", "name 'NVIDIA GPU' has no word that identifies a GPU"),
    ("GPU alias that reads as another GPU's name",
     lambda m: gpu(m, "h100-sxm", aliases=("h100", "nvidia geforce rtx-3090")),
     "gpu h100-sxm", "'nvidia geforce rtx-3090' reads the same as a name of gpu rtx3090: one of them can never be found"),
    # --- builds: arm64 packages, URLs, CUDA libraries
    ("arm64 packages on a row without arm64",
     lambda m: build(m, B12, packages_arm64=("torch==2.4.1",)),
     "torch 2.4.1 cu124", "packages_arm64 given but linux/arm64 is not in platforms"),
    ("empty arm64 package list",
     lambda m: build(image(m, IMG12, platforms=ARM, platform_source=("test",)), B12, platforms=ARM,
                     platform_source=("test",), packages_arm64=()),
     "torch 2.4.1 cu124", "packages_arm64 is empty: omit it to install packages on linux/arm64 too"),
    ("plain-http index URL",
     lambda m: build(m, B12, index_url="http://example.com/simple"),
     "torch 2.4.1 cu124", "index_url 'http://example.com/simple' is plain http:// to a host that is not this machine: "
                          "packages (and any credentials) would cross the network unencrypted"),
    ("plain-http find-links URL, the last URL key",
     lambda m: build(m, B12, find_links="http://example.com/wheels"),
     "torch 2.4.1 cu124", "find_links 'http://example.com/wheels' is plain http:// to a host that is not this machine: "
                          "packages (and any credentials) would cross the network unencrypted"),
    ("CUDA libraries without their source",
     lambda m: build(m, B12, cuda_libs=("nvidia-cudnn-cu12==9.1.0.70",)),
     "torch 2.4.1 cu124", "cuda_libs needs a cuda_libs_source (the wheel whose metadata pins them)"),
    ("CPU row with CUDA libraries",
     lambda m: build(m, CPU, cuda_libs=("nvidia-cudnn-cu12==9.1.0.70",), cuda_libs_source=("test",)),
     "torch 2.4.1 cpu", "a CPU row has cuda_libs"),
    # --- X.Y.Z-era image rows that give no update
    ("X.Y.Z-era image row without an update",
     lambda m: image(m, IMG12, tag="12.4-base-ubuntu22.04", cuda_patch=V("12.4")),
     "image nvidia/cuda:12.4-base-ubuntu22.04", "tag does not follow the naming rules of its era: expected '12.4.N-base-ubuntu22.04'"),
    # --- base recipes
    ("recipe installs cuDNN its tag does not name",
     lambda m: recipe(m, "10.0-base-ubuntu18.04", packages=("cuda-cudart-10-0=10.0.130-1", "cuda-compat-10-0",
                                                            "libcudnn7=7.6.5.32-1+cuda10.0")),
     "recipe nvidia/cuda:10.0-base-ubuntu18.04 (linux/amd64)",
     "installs libcudnn7=7.6.5.32-1+cuda10.0 but its tag names no cuDNN"),
    ("recipe downloads a file no apt package pins",
     lambda m: recipe(m, "10.0-base-ubuntu18.04", downloads=(Download(
         "https://example.com/repo/libnccl2_2.4.8-1+cuda10.0_amd64.deb", "0" * 64),)),
     "recipe nvidia/cuda:10.0-base-ubuntu18.04 (linux/amd64)",
     "downloads libnccl2_2.4.8-1+cuda10.0_amd64.deb but installs no package of that name with apt (the pin it serves)"),
    # --- NGC releases
    ("two NGC releases share a tag",
     lambda m: ngc(m, NGC, replace(NGC, release="24.06", tags=("24.06-py3", "24.05-py3"))),
     "ngc nvcr.io/nvidia/pytorch:24.06", "tag 24.05-py3 is also release 24.05's"),
    ("two rows of one NGC release share a tag",  # the loader keeps both: their tag lists differ
     lambda m: ngc(m, NGC, replace(NGC, tags=("24.05-py3-igpu", "24.05-py3"))),
     "ngc nvcr.io/nvidia/pytorch:24.05", "tag 24.05-py3 is listed by another row of this release"),
    ("NGC release of a CUDA the matrix lacks",
     lambda m: ngc(m, replace(NGC, cuda=V("12.6.2"))),
     "ngc nvcr.io/nvidia/pytorch:24.05", "CUDA 12.6.2 is not a release of the matrix's CUDA table"),
    ("confirmed NGC release without any figure",
     lambda m: ngc(m, replace(NGC, framework_version=None, cuda=None, cudnn=None, python=None, os=None)),
     "ngc nvcr.io/nvidia/pytorch:24.05", "confirmed, but gives no framework_version, cuda, cudnn, python, os: "
                                         "mark it partially confirmed or add the figures"),
] + [
    (f"confirmed NGC release without {field}",
     lambda m, field=field: ngc(m, replace(NGC, **{field: None})),
     "ngc nvcr.io/nvidia/pytorch:24.05", f"confirmed, but gives no {field}: mark it partially confirmed or add the figures")
    for field in ("framework_version", "cuda", "cudnn", "python", "os")
]


@pytest.mark.parametrize("case, corrupt, where, what", CASES, ids=[c[0] for c in CASES])
def test_each_rule_reports_exactly_its_problem(clean, case, corrupt, where, what):
    problems = validate(corrupt(clean))
    assert len(problems) == 1, [str(p) for p in problems]
    assert (problems[0].where, problems[0].what) == (where, what)


def test_problem_text():
    assert str(Problem("cuda 12.4", "x")) == "cuda 12.4: x"


def test_a_problem_line_clips_where_at_120_characters_and_what_at_300():
    """A matrix file's row names and values are the user's: a problem line stays one readable line."""
    assert str(Problem("w" * 120, "x" * 300)) == "w" * 120 + ": " + "x" * 300
    assert str(Problem("w" * 121, "x" * 301)) == "w" * 120 + "… (1 more characters): " + "x" * 300 + "… (1 more characters)"


# --- rules that must stay quiet at their edges ---------------------------------------------------

def test_pinned_base_image_needs_no_flavour_image(clean):
    own = replace(cudnn_image("cudnn9", "12.4.1", "9", repository="example/base"), custom=True)
    m = build(replace(clean, images=clean.images + (own,)), B12, system_cudnn=True, cudnn="9.1.0", base_image=own.ref)
    assert validate(m) == []


def test_toolkit_drivers_equal_is_fine(clean):
    m = cuda(clean, "12.4", toolkit_driver=DriverVersion.parse("520.61.05"))
    assert validate(m) == []


def test_custom_images_skip_the_nvidia_rules(clean):
    custom = replace(cudnn_image("anything", "12.6.3", "7", "cudnn-devel", repository="example/cuda"), custom=True)
    assert validate(replace(clean, images=clean.images + (custom,))) == []


def test_cpu_images_skip_the_cuda_rules(clean):
    cpu = BaseImage(repository="debian", tag="12", cuda=None, cuda_patch=None, flavour="base", cudnn=None,
                    os="ubuntu22.04", status="published", source=("test",))
    assert validate(replace(clean, images=clean.images + (cpu,))) == []


def test_a_valid_cudnn_image_passes(clean):
    ok = cudnn_image("12.4.1-cudnn-runtime-ubuntu22.04", "12.4.1", "9")
    assert validate(replace(clean, images=clean.images + (ok,))) == []


def test_extras_in_a_pinned_package_are_fine(clean):
    m = build(clean, B12, packages=("tensorflow[and-cuda]==2.15.0.post1", "jax[cuda12]==0.4.30"))
    assert validate(m) == []


def test_a_new_gpu_with_a_fresh_id_is_fine(clean):
    g = Gpu(id="new", name="New", aliases=(), cc=Arch(9, 0), memory_gb=None, bandwidth_gb_s=None,
            fp32_tflops=None, fp16_tflops=None, source=("test",), status="confirmed")
    assert validate(replace(clean, gpus=clean.gpus + (g,))) == []


def test_several_problems_are_all_reported(clean):
    m = build(cuda(clean, "10.0", sm=()), B12, packages=("torch",))
    assert {p.where for p in validate(m)} == {"cuda 10.0", "torch 2.4.1 cu124"}


# --- the naming rules of nvidia/cuda tags, at each era's edge ------------------------------------

@pytest.mark.parametrize(
    "cuda, cudnn_major, token",
    [("12.3", "9", "cudnn9"), ("12.4", "9", "cudnn"), ("12.5", "9", "cudnn"), ("11.8", "8", "cudnn8"),
     ("12.4", None, "cudnn"), ("12.3", None, None)],
)
def test_cudnn_token_edge(cuda, cudnn_major, token):
    assert cudnn_token(V(cuda), cudnn_major) == token


@pytest.mark.parametrize(
    "cuda, majors",
    [("8.0", {"5", "6", "7"}), ("9.0", {"7"}), ("9.2", {"7"}), ("10.0", {"7"}), ("10.1", {"7", "8"}), ("10.2", {"7", "8"}), ("11.0", {"8"}),
     ("12.2", {"8"}), ("12.3", {"9"}), ("13.0", {"9"})],
)
def test_allowed_cudnn_majors_edges(cuda, majors):
    assert allowed_cudnn_majors(V(cuda)) == majors


@pytest.mark.parametrize(
    "patch, flavour, cudnn, os_name, tag",
    [
        ("11.0", "base", None, "ubuntu20.04", "11.0-base-ubuntu20.04"),  # last legacy (two-part) tag
        ("11.0.3", "base", None, "ubuntu20.04", "11.0.3-base-ubuntu20.04"),  # 11.0 was also tagged by patch
        ("11.1.1", "base", None, "ubuntu20.04", "11.1.1-base-ubuntu20.04"),  # first patch-tagged era
        ("10.0.130", "runtime", None, "ubuntu18.04", "10.0-runtime-ubuntu18.04"),
        ("11.8.0", "cudnn-runtime", "8", "ubuntu22.04", "11.8.0-cudnn8-runtime-ubuntu22.04"),
        ("12.3.2", "cudnn-devel", "9", "ubuntu22.04", "12.3.2-cudnn9-devel-ubuntu22.04"),
        ("12.4.1", "cudnn-devel", "9", "ubuntu22.04", "12.4.1-cudnn-devel-ubuntu22.04"),
        ("12.4.1", "devel", None, "ubuntu22.04", "12.4.1-devel-ubuntu22.04"),
    ],
)
def test_expected_tag_by_era(patch, flavour, cudnn, os_name, tag):
    assert expected_tag(cudnn_image("x", patch, cudnn, flavour, os_name)) == tag


def test_expected_tag_needs_a_patch():
    img = replace(cudnn_image("x", "12.4.1", None, "base"), cuda_patch=None)
    assert expected_tag(img) is None


# --- boundaries and order: a rule must neither stop early nor fire one step too soon -------------

def _release_11_0(m: Matrix, floor):
    r = next(r for r in m.cuda if r.key == "11.8")
    r110 = replace(r, version=V("11.0"), toolkit_driver=DriverVersion.parse("450.51.05"), minor_compat_driver=floor)
    return replace(m, cuda=tuple(sorted(m.cuda + (r110,), key=lambda r: r.version)))


def test_cuda_11_0_is_the_first_release_with_a_floor(clean):
    assert validate(_release_11_0(clean, DriverVersion.parse("450.80.02"))) == []
    assert [str(p) for p in validate(_release_11_0(clean, None))] == [
        "cuda 11.0: CUDA >= 11 has minor-version compatibility: minor_compat_driver is missing"]


def test_image_rules_go_on_after_a_custom_image(clean):
    custom = replace(cudnn_image("anything", "12.4.1", None, "base", repository="example/cuda"), custom=True)
    m = replace(clean, images=(custom,) + clean.images)
    m = image(m, "ubuntu:22.04", os="ubuntu99.04")
    assert [p.where for p in validate(m)] == ["image ubuntu:22.04"]


def test_build_rules_go_on_after_a_build_of_an_unknown_cuda(clean):
    m = build(build(clean, B10, cuda=V("12.6")), B12, packages=("torch",))
    assert [p.where for p in validate(m)] == ["torch 1.0.1 cu100", "torch 2.4.1 cu124"]


@pytest.mark.parametrize("sass, ptx", [((Arch(8, 0),), ()), ((), (Arch(8, 0),))])
def test_sass_or_ptx_alone_is_enough(clean, sass, ptx):
    assert validate(build(clean, B12, sass=sass, ptx=ptx)) == []


def test_a_flavour_image_of_another_cuda_does_not_count(clean):
    other = cudnn_image("11.8.0-runtime-ubuntu22.04", "11.8.0", None, "runtime")
    m = build(replace(clean, images=clean.images + (other,)), B12, system_cuda=True)
    assert [str(p) for p in validate(m)] == [
        "torch 2.4.1 cu124: no runtime base image for CUDA 12.4 in the image matrix"]
    own = cudnn_image("12.4.1-runtime-ubuntu22.04", "12.4.1", None, "runtime")
    assert validate(replace(m, images=m.images + (own,))) == []


# --- the newer rules' helpers, where a looser version would still pass the rule tests -------------

from envman.matrix.validate import _check_cudnn, _check_wheel_python, _published_hint  # noqa: E402


def test_published_hint_lists_only_the_same_release_flavour_and_os_in_version_order():
    img = cudnn_image("12.4.2-cudnn-runtime-ubuntu22.04", "12.4.2", "9")
    published = frozenset({
        "12.4.10-cudnn-runtime-ubuntu22.04", "12.4.9-cudnn-runtime-ubuntu22.04",  # numeric, not text order
        "12.40.0-cudnn-runtime-ubuntu22.04",  # another release that only shares the text prefix
        "12.4.1-cudnn-devel-ubuntu22.04", "12.4.1-runtime-ubuntu22.04",  # other flavours
        "12.4.1-cudnn-runtime-ubuntu20.04", "13.4.1-cudnn-runtime-ubuntu22.04",  # other OS, release
    })
    assert _published_hint(img, published) == (
        " (published for this release, flavour and OS: 12.4.9-cudnn-runtime-ubuntu22.04, "
        "12.4.10-cudnn-runtime-ubuntu22.04)")
    assert _published_hint(img, frozenset({"12.3.2-cudnn-runtime-ubuntu22.04"})) == ""
    nopatch = replace(img, cuda_patch=None)
    assert _published_hint(nopatch, frozenset({"12.4.1-cudnn-runtime-ubuntu22.04"})) == ""


def test_published_hint_names_the_x_y_tags_of_a_release_published_before_x_y_z():
    """CUDA 10.2's tags are ``10.2-...``: a row that writes the full patch version is pointed at them."""
    img = cudnn_image("10.2.89-cudnn7-runtime-ubuntu18.04", "10.2.89", "7", os_name="ubuntu18.04")
    published = frozenset({"10.2-cudnn7-runtime-ubuntu18.04", "10.2-cudnn7-devel-ubuntu18.04",
                           "10.1-cudnn7-runtime-ubuntu18.04", "10.20-cudnn7-runtime-ubuntu18.04"})
    assert _published_hint(img, published) == " (published for this release, flavour and OS: 10.2-cudnn7-runtime-ubuntu18.04)"


def _cudnn_problems(m: Matrix, needed: str, release_cudnn: tuple[str, ...], *images: BaseImage) -> list[str]:
    b = replace(next(b for b in m.builds if b.name == B12), system_cudnn=True, cudnn=needed)
    rel = replace(next(r for r in m.cuda if r.key == "12.4"), cudnn=release_cudnn)
    m = replace(m, images=m.images + images)
    out: list[str] = []
    _check_cudnn(m, b, rel, lambda where, what: out.append(what))
    return out


C9 = cudnn_image("12.4.1-cudnn-runtime-ubuntu22.04", "12.4.1", "9")


def test_cudnn_major_is_the_first_part_of_a_three_part_version(clean):
    assert _cudnn_problems(clean, "9.1.0", ("9.1.0.70",), C9) == []
    assert _cudnn_problems(clean, "8.9.7", ("9.1.0.70",), C9) == [
        "needs system cuDNN 8.9.7, but the cudnn images of CUDA 12.4 ship cuDNN 9"]


def test_every_cudnn_the_images_of_the_release_ship_is_named_once_in_order(clean):
    c8 = cudnn_image("12.4.1-cudnn8-runtime-ubuntu22.04", "12.4.1", "8")
    c9_devel = cudnn_image("12.4.1-cudnn-devel-ubuntu22.04", "12.4.1", "9", flavour="cudnn-devel")
    assert _cudnn_problems(clean, "7.6", ("9.1.0.70",), C9, c8, c9_devel) == [
        "needs system cuDNN 7.6, but the cudnn images of CUDA 12.4 ship cuDNN 8, cuDNN 9"]


def test_cudnn_minor_against_the_newest_shipped_release_numerically(clean):
    # 9.10 is newer than 9.2: text order would call 9.2 the newest and refuse 9.3
    assert _cudnn_problems(clean, "9.3", ("9.2.1.18", "9.10.2.21"), C9) == []
    assert _cudnn_problems(clean, "9.11.0", ("9.2.1.18", "9.10.2.21"), C9) == [
        "needs system cuDNN 9.11.0, but the images of CUDA 12.4 ship cuDNN 9.10.2.21"]
    assert _cudnn_problems(clean, "9.10", ("9.10.2.21",), C9) == []  # exactly the shipped minor
    assert _cudnn_problems(clean, "9", ("9.10.2.21",), C9) == []  # a major alone names no minor


def test_pinned_base_without_cudnn_is_named(clean):
    b = replace(next(b for b in clean.builds if b.name == B12), system_cudnn=True, cudnn="9.1.0", base_image=IMG12)
    out: list[str] = []
    _check_cudnn(clean, b, next(r for r in clean.cuda if r.key == "12.4"), lambda w, x: out.append(x))
    assert out == [f"needs system cuDNN 9.1.0, but its base image {IMG12} ships no cuDNN"]


def _wheel_problems(row, **kw) -> list[str]:
    base = dict(packages=("torch==2.4.1", "torchvision==0.19.1"), python=(V("3.10"), V("3.11")),
                wheel_python_source=("pypi",))
    base.update(kw)
    out: list[str] = []
    _check_wheel_python(replace(row, **base), lambda where, what: out.append(what))
    return out


@pytest.fixture
def row(clean):
    return next(b for b in clean.builds if b.name == B12)


def test_wheel_python_checks_every_package_after_one_without_data(row):
    wp = (("torchvision", (V("3.10"),)),)  # no entry for torch, then a gap for torchvision
    assert _wheel_problems(row, wheel_python=wp) == [
        "wheel_python has no entry for torch, which the row installs",
        "claims Python 3.11, but torchvision==0.19.1 has no wheel for it (wheels: 3.10)"]


def test_wheel_python_pure_python_package_then_a_gap(row):
    wp = (("torch", ()), ("torchvision", (V("3.10"),)))  # torch pure-Python: every Python
    assert _wheel_problems(row, wheel_python=wp) == [
        "claims Python 3.11, but torchvision==0.19.1 has no wheel for it (wheels: 3.10)"]


def test_wheel_python_lists_every_missing_python_and_every_extra(row):
    wp = (("torch", (V("3.9"),)), ("torchvision", (V("3.10"), V("3.11"))), ("numpy", ()), ("pillow", ()))
    assert _wheel_problems(row, wheel_python=wp) == [
        "claims Python 3.10, 3.11, but torch==2.4.1 has no wheel for it (wheels: 3.9)",
        "wheel_python lists numpy, pillow, which the row does not install"]


# --- system_nvcc: the CUDA compiler tools of the base image ---------------------------------------


def test_system_nvcc_takes_a_devel_flavour(clean):
    b = next(b for b in clean.builds if b.name == B12)
    assert replace(b, system_cuda=True, system_cudnn=True, cudnn="9", system_nvcc=True).flavour_needed == "cudnn-devel"
    assert replace(b, system_cuda=True, system_nvcc=True).flavour_needed == "devel"
    assert replace(b, system_cuda=True).flavour_needed == "runtime"


def test_system_nvcc_without_system_cuda_is_refused(clean):
    problems = [str(p) for p in validate(build(clean, B12, system_nvcc=True))]
    assert "torch 2.4.1 cu124: needs the CUDA compiler tools of its base image (system_nvcc) but not its CUDA (system_cuda)" in problems


def test_a_cpu_build_cannot_need_system_nvcc(clean):
    cpu = next(b for b in clean.builds if b.cuda is None)
    problems = [str(p) for p in validate(build(clean, cpu.name, system_nvcc=True))]
    assert any(p.endswith("a CPU build cannot need system CUDA/cuDNN") for p in problems), problems


def _arm64_only_chain(m: Matrix, keep_amd64_parents: bool) -> tuple[Matrix, str]:
    """The shipped matrix with one recipe chain moved to linux/arm64 (its leaf always; its parents
    too, unless ``keep_amd64_parents``), and the leaf's nvidia/cuda image row on arm64 only."""
    leaf = next(r for r in m.recipes if r.parent is not None and m.recipe_chain(r.tag, r.platform))
    chain = m.recipe_chain(leaf.tag, leaf.platform)
    assert chain is not None and len(chain) >= 2
    moved = {leaf.tag} if keep_amd64_parents else {r.tag for r in chain}
    recipes = tuple(r for r in m.recipes if r.tag not in moved) + tuple(
        replace(r, platform="linux/arm64") for r in chain if r.tag in moved)
    images = tuple(replace(i, platforms=("linux/arm64",)) if i.repository == "nvidia/cuda" and i.tag == leaf.tag else i
                   for i in m.images)
    return replace(m, recipes=recipes, images=images), f"recipe nvidia/cuda:{leaf.tag} (linux/arm64)"


@pytest.mark.parametrize("keep_amd64_parents, broken", [(False, False), (True, True)])
def test_a_recipes_chain_is_followed_on_the_recipes_own_platform(keep_amd64_parents, broken):
    """An arm64 recipe's parents are arm64 recipes: a whole arm64 chain is not broken, and one whose
    parents exist only for amd64 is."""
    from envman.matrix.load import load_matrix

    m, where = _arm64_only_chain(load_matrix(), keep_amd64_parents)
    said = [p.what for p in validate(m) if p.where == where]
    assert any("parent chain is broken" in w for w in said) is broken, said


# --- NGC releases, GPU names and recipes: what stays quiet, and each row's own platform -----------


def test_a_complete_confirmed_ngc_release_and_a_partial_one_are_fine(clean):
    partial = replace(NGC, release="24.06", tags=("24.06-py3",), cudnn=None, python=None, status="partially confirmed")
    assert validate(ngc(clean, NGC, partial)) == []


def test_a_recipe_download_whose_package_apt_installs_is_fine(clean):
    m = recipe(clean, "10.0-base-ubuntu18.04", downloads=(Download(
        "https://example.com/repo/cuda-compat-10-0_410.129-1_amd64.deb", "0" * 64),))
    assert validate(m) == []


def test_a_base_neither_served_nor_rebuildable_is_named_on_the_platform_that_lacks_it(clean):
    """The 10.0 bases are deleted and their recipes are amd64 ones: a row that also lists arm64
    is reported for arm64 alone."""
    m = clean
    for tag in ("10.0-base-ubuntu16.04", "10.0-base-ubuntu18.04"):
        m = image(m, f"nvidia/cuda:{tag}", platforms=ARM, platform_source=("test",))
    m = build(m, "torch-1.0.1-cuda10.0", platforms=ARM, platform_source=("test",))
    assert [(p.where, p.what) for p in validate(m)] == [(
        "torch 1.0.1 cu100",
        "on linux/arm64: no CUDA 10.0 base base image on linux/arm64 in the matrix for torch-1.0.1-cuda10.0 is "
        "served or can be rebuilt from NVIDIA's recipe (nvidia/cuda:10.0-base-ubuntu18.04, "
        "nvidia/cuda:10.0-base-ubuntu16.04 are no longer served and no [[recipe]] rebuilds them)")]
