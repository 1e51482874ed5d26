"""Releases that papers pin and that the matrix first lacked: every TensorFlow patch release PyPI
serves, TensorFlow 0.12-1.11 on CUDA 8.0/9.0, torch 0.4.x from PyTorch's wheel index, and the
CUDA 8.0 images those need (NVIDIA published no ``base`` flavour for 8.0)."""

from dataclasses import replace

import pytest
from packaging.version import Version

from envman.errors import ResolveError
from envman.matrix.load import load_matrix
from envman.matrix.model import BaseImage
from envman.matrix.validate import validate
from envman.stack.resolve import resolve


@pytest.fixture(scope="module")
def shipped():
    return load_matrix()


@pytest.mark.parametrize(
    "query, name, package, base",
    [
        ("tf-1.15.4", "tensorflow-1.15.4-cuda10.0-py3.6", "tensorflow-gpu==1.15.4", "nvidia/cuda:10.0-cudnn7-runtime-ubuntu18.04"),
        ("tf-1.15.2", "tensorflow-1.15.2-cuda10.0-py3.6", "tensorflow-gpu==1.15.2", "nvidia/cuda:10.0-cudnn7-runtime-ubuntu18.04"),
        ("tf-1.8.0", "tensorflow-1.8.0-cuda9.0-py3.5", "tensorflow-gpu==1.8.0", "nvidia/cuda:9.0-cudnn7-runtime-ubuntu16.04"),
        ("tf-1.4.1", "tensorflow-1.4.1-cuda8.0-py3.5", "tensorflow-gpu==1.4.1", "nvidia/cuda:8.0-cudnn6-runtime-ubuntu16.04"),
        ("tf-1.2.1", "tensorflow-1.2.1-cuda8.0-py3.5", "tensorflow-gpu==1.2.1", "nvidia/cuda:8.0-cudnn5-runtime-ubuntu16.04"),
        ("tf-0.12.1", "tensorflow-0.12.1-cuda8.0-py3.5", "tensorflow-gpu==0.12.1", "nvidia/cuda:8.0-cudnn5-runtime-ubuntu16.04"),
        ("tf-2.12.1", "tensorflow-2.12.1-cuda11.8-py3.10", "tensorflow==2.12.1", "nvidia/cuda:11.8.0-cudnn8-runtime-ubuntu22.04"),
        ("tf-2.16.2", "tensorflow-2.16.2-cuda12.3-py3.10", "tensorflow[and-cuda]==2.16.2", "nvidia/cuda:12.3.2-base-ubuntu22.04"),
        ("tf-1.8.0-cpu", "tensorflow-1.8.0-cpu-py3.6", "tensorflow==1.8.0", "ubuntu:18.04"),
        ("tf-0.12.0-cpu", "tensorflow-0.12.0-cpu-py3.5", "tensorflow==0.12.0", "ubuntu:16.04"),
        ("tf-1.15.0-cpu", "tensorflow-1.15.0-cpu-py3.6", "tensorflow-cpu==1.15.0", "ubuntu:18.04"),
        ("torch-0.4.1", "torch-0.4.1-cuda9.0-py3.5", "torch==0.4.1", "nvidia/cuda:9.0-base-ubuntu16.04"),
        ("torch-0.4.1-cuda9.2", "torch-0.4.1-cuda9.2-py3.6", "torch==0.4.1", "nvidia/cuda:9.2-base-ubuntu18.04"),
        ("torch-0.4.0-cuda8.0", "torch-0.4.0-cuda8.0-py3.5", "torch==0.4.0", "nvidia/cuda:8.0-runtime-ubuntu16.04"),
        ("torch-0.3.1", "torch-0.3.1-cuda9.0-py3.5", "torch==0.3.1", "nvidia/cuda:9.0-base-ubuntu16.04"),
        ("torch-0.3", "torch-0.3.1-cuda9.0-py3.5", "torch==0.3.1", "nvidia/cuda:9.0-base-ubuntu16.04"),
        ("torch-0.3.1-cuda8.0-py3.6", "torch-0.3.1-cuda8.0-py3.6", "torch==0.3.1", "nvidia/cuda:8.0-runtime-ubuntu16.04"),
        ("torch-0.3.0-cuda8", "torch-0.3.0-cuda8.0-py3.5", "torch==0.3.0.post4", "nvidia/cuda:8.0-runtime-ubuntu16.04"),
        ("torch-0.3.0", "torch-0.3.0-cuda9.0-py3.5", "torch==0.3.0.post4", "nvidia/cuda:9.0-base-ubuntu16.04"),
        ("torch-0.3.0-cpu", "torch-0.3.0-cpu-py3.6", "torch==0.3.0.post4", "ubuntu:18.04"),
    ],
)
def test_pinned_releases_name_a_stack(shipped, query, name, package, base):
    s = resolve(shipped, query)
    assert (s.name, s.packages[0], s.base_image) == (name, package, base)
    assert resolve(shipped, s.name) == s  # the canonical name resolves to itself


def test_a_minor_resolves_to_its_newest_patch(shipped):
    assert resolve(shipped, "tf-1.15").framework_version == "1.15.5"
    assert resolve(shipped, "tf-2.15").framework_version == "2.15.1"
    assert resolve(shipped, "tf-2.15.0").packages == ("tensorflow[and-cuda]==2.15.0.post1",)


def test_patch_rows_take_pythons_from_the_wheels_pypi_serves(shipped):
    by = {(str(b.version), b.variant): b for b in shipped.builds if b.framework == "tensorflow"}
    # 1.15.5 has cp36/cp37 wheels only; 1.15.4 has cp35 too; 2.4.x starts at cp36
    assert [str(p) for p in by[("1.15.5", "gpu")].python] == ["3.6", "3.7"]
    assert [str(p) for p in by[("1.15.4", "gpu")].python] == ["3.5", "3.6", "3.7"]
    assert [str(p) for p in by[("2.4.4", "gpu")].python] == ["3.6", "3.7", "3.8"]
    # a patch row states how far its CUDA is confirmed
    assert by[("1.15.4", "gpu")].status == "partially confirmed"
    assert by[("2.16.2", "gpu")].status == "confirmed"  # its wheel's [and-cuda] extra pins the CUDA wheels


def test_plain_tensorflow_is_the_gpu_package_from_1_15(shipped):
    cpu = [b for b in shipped.builds if b.framework == "tensorflow" and b.cuda is None]
    for b in cpu:
        (pkg,) = b.packages
        name = pkg.split("==")[0]
        if b.version >= Version("1.15") and b.version != Version("2.0.0") and b.version.release[:2] != (2, 0):
            assert name == "tensorflow-cpu", b.name
        else:
            assert name == "tensorflow", b.name


def test_cuda_8_0_has_no_base_flavour_so_a_wheel_build_takes_runtime(shipped):
    s = resolve(shipped, "torch-0.4.1-cuda8.0")
    assert (s.flavour, s.name) == ("runtime", "torch-0.4.1-cuda8.0-py3.5")
    with pytest.raises(ResolveError, match="flavour 'base' is too small"):
        resolve(shipped, "torch-0.4.1-cuda8.0-base")


def test_a_base_image_wins_once_the_release_has_one(shipped):
    base = BaseImage(repository="nvidia/cuda", tag="8.0-base-ubuntu16.04", cuda=Version("8.0"),
                     cuda_patch=Version("8.0"), flavour="base", cudnn=None, os="ubuntu16.04", status="published",
                     source=("test",))
    m = replace(shipped, images=shipped.images + (base,))
    s = resolve(m, "torch-0.4.1-cuda8.0")
    assert (s.flavour, s.base_image) == ("base", "nvidia/cuda:8.0-base-ubuntu16.04")


def test_without_any_image_of_its_cuda_a_build_is_still_refused(shipped):
    m = replace(shipped, images=tuple(i for i in shipped.images if i.cuda != Version("8.0")))
    with pytest.raises(ResolveError, match="no CUDA 8.0 base base image"):
        resolve(m, "torch-0.4.1-cuda8.0")
    assert "torch 0.4.1 cu80: no base base image for CUDA 8.0 in the image matrix" in [str(p) for p in validate(m)]


def test_cuda_8_0_images_with_a_cudnn_nvidia_never_paired_are_refused(shipped):
    bad = BaseImage(repository="nvidia/cuda", tag="8.0-cudnn8-runtime-ubuntu16.04", cuda=Version("8.0"),
                    cuda_patch=Version("8.0"), flavour="cudnn-runtime", cudnn="8", os="ubuntu16.04", status="deleted",
                    source=("test",))
    problems = [str(p) for p in validate(replace(shipped, images=shipped.images + (bad,)))]
    assert "image nvidia/cuda:8.0-cudnn8-runtime-ubuntu16.04: cuDNN 8 was not shipped in nvidia/cuda images of CUDA 8.0" in problems


@pytest.mark.parametrize(
    "query, name, jaxlib, base",
    [
        ("jax-0.2.17", "jax-0.2.17-cuda11.1-py3.8", "jaxlib==0.1.68+cuda111", "nvidia/cuda:11.1.1-cudnn8-devel-ubuntu20.04"),
        ("jax-0.2.17-cuda10.1", "jax-0.2.17-cuda10.1-py3.6", "jaxlib==0.1.68+cuda101", "nvidia/cuda:10.1-cudnn7-devel-ubuntu18.04"),
        ("jax-0.3.25", "jax-0.3.25-cuda11.1-py3.8", "jaxlib==0.3.25+cuda11.cudnn82", "nvidia/cuda:11.1.1-cudnn8-devel-ubuntu20.04"),
        ("jax-0.4.1", "jax-0.4.1-cuda11.4-py3.8", "jaxlib==0.4.1+cuda11.cudnn86", "nvidia/cuda:11.4.3-cudnn8-devel-ubuntu20.04"),
    ],
)
def test_old_jax_takes_its_jaxlib_cuda_wheel_and_a_devel_base(shipped, query, name, jaxlib, base):
    s = resolve(shipped, query)
    assert (s.name, s.packages[1], s.base_image, s.flavour) == (name, jaxlib, base, "cudnn-devel")
    assert s.find_links and s.find_links.startswith("https://storage.googleapis.com/jax-releases/")


def test_jax_cuda102_wheels_are_left_out_for_want_of_a_rebuildable_base(shipped):
    assert not [b for b in shipped.builds if b.framework == "jax" and b.variant == "cuda102"]
    with pytest.raises(ResolveError):
        resolve(shipped, "jax-0.2.17-cuda10.2")


# --- wheels as PyPI serves them: TensorFlow's aarch64 CPU wheels, per-platform packages --------


def test_tensorflow_cpu_on_arm64_installs_the_tensorflow_wheels_pypi_serves_for_aarch64(shipped):
    arm = resolve(shipped, "tf-2.16.2-cpu-arm64")
    amd = resolve(shipped, "tf-2.16.2-cpu")
    assert (arm.packages, arm.platform) == (("tensorflow==2.16.2",), "linux/arm64")
    assert amd.packages == ("tensorflow-cpu==2.16.2",)
    assert "tensorflow-2.16.2-cpu" == arm.row == amd.row


def test_tensorflow_cpu_before_aarch64_wheels_has_no_arm64_stack(shipped):
    with pytest.raises(ResolveError, match="linux/arm64"):
        resolve(shipped, "tf-2.9.0-cpu-arm64")


@pytest.mark.parametrize("change, problem", [
    ({"packages_arm64": ("tensorflow==2.16.2",), "platforms": ("linux/amd64",)},
     "packages_arm64 given but linux/arm64 is not in platforms"),
    ({"packages_arm64": ()}, "packages_arm64 is empty: omit it to install packages on linux/arm64 too"),
    ({"packages_arm64": ("tensorflow>=2.16",)}, "package 'tensorflow>=2.16' is not a pinned requirement (name==version)"),
    ({"packages_arm64": ("tensorflow-aarch64==2.16.2",)}, "wheel_python has no entry for tensorflow-aarch64, which the row installs"),
])
def test_packages_arm64_rules(shipped, change, problem):
    b = next(b for b in shipped.builds if b.name == "tensorflow-2.16.2-cpu" and b.packages_arm64)
    m = replace(shipped, builds=tuple(replace(x, **change) if x is b else x for x in shipped.builds))
    assert f"tensorflow 2.16.2 cpu: {problem}" in [str(p) for p in validate(m)]


@pytest.mark.parametrize("query, pip, base_from", [
    ("tf-1.8.0", "tensorflow-gpu==1.8.0", "ubuntu:16.04"),  # CUDA 9.0 base rebuilt from NVIDIA's recipe
    ("tf-1.4.1", "tensorflow-gpu==1.4.1", "ubuntu:16.04"),  # CUDA 8.0 cuDNN 6, rebuilt
    ("tf-0.12.0-cpu", "tensorflow==0.12.0", None),  # Python 3.5 on ubuntu:16.04
    ("torch-0.4.1-cuda8.0", "torch==0.4.1", "ubuntu:16.04"),  # 8.0's runtime image, rebuilt
    ("jax-0.2.17", "jaxlib==0.1.68+cuda111", None),  # a served cudnn-devel base
    ("tf-2.16.2-cpu-arm64", "tensorflow==2.16.2", None),
])
def test_a_row_of_each_new_family_renders(shipped, query, pip, base_from):
    from envman.render.base import rebuilt_base
    from envman.render.dockerfile import render_stack
    from envman.render.options import RenderOptions

    stack = resolve(shipped, query)
    base = rebuilt_base(shipped, stack, registry_mirror=None, apt_mirror=None, ca_bundle=None)
    ctx = render_stack(stack, RenderOptions(), probe=b"probe", builder="classic", base=base)
    assert pip in ctx.dockerfile
    if base_from is None:
        assert base is None
    else:
        assert base is not None and f"FROM {base_from}" in base.dockerfile


# --- torch 0.3.x: PyTorch's wheel index, 0.3.0 published as 0.3.0.post4 --------------------------


def test_torch_0_3_rows_follow_the_0_4_rows_and_the_wheels_of_their_release(shipped):
    rows = {(str(b.version), b.variant): b for b in shipped.builds if b.framework == "torch" and b.version.release[:2] == (0, 3)}
    assert sorted(rows) == [("0.3.0", "cpu"), ("0.3.0", "cu80"), ("0.3.0", "cu90"),
                            ("0.3.1", "cpu"), ("0.3.1", "cu80"), ("0.3.1", "cu90")]  # no cu75/cu91: no find-links page
    for (version, variant), b in rows.items():
        assert [str(p) for p in b.python] == ["3.5", "3.6"]
        assert b.packages[1] == "torchvision==0.2.0"
        assert b.find_links == f"https://download.pytorch.org/whl/{variant}/torch_stable.html"
        assert not (b.system_cuda or b.system_cudnn or b.default)
        assert b.status == "partially confirmed"
    assert rows[("0.3.0", "cu80")].packages[0] == "torch==0.3.0.post4"
    # 0.3.1's binaries dropped sm_30 and sm_50 (pytorch/pytorch#4841); 5.2 carries the PTX in both
    assert [str(a) for a in rows[("0.3.0", "cu90")].sass] == ["3.0", "3.5", "5.0", "5.2", "6.0", "6.1", "7.0"]
    assert [str(a) for a in rows[("0.3.1", "cu80")].sass] == ["3.5", "5.2", "6.0", "6.1"]
    assert [str(a) for a in rows[("0.3.1", "cu90")].ptx] == ["5.2"]


@pytest.mark.parametrize(("version", "variant", "sass", "commit"), [
    # pytorch/builder manywheel/build.sh of each release: "3.5;5.0+PTX" and, per CUDA version,
    # 8.0: 6.0;6.1; 0.4.0's 9.0 (and 9.1): 6.0;6.1;7.0; 0.4.1's 9.0: 6.0;7.0 (6.1 dropped), 9.2: 6.0;6.1;7.0
    ("0.4.0", "cu80", ["3.5", "5.0", "6.0", "6.1"], "d5e62b676b5d3b6c5dba35a4b5ac227bd6d3563b"),
    ("0.4.0", "cu90", ["3.5", "5.0", "6.0", "6.1", "7.0"], "d5e62b676b5d3b6c5dba35a4b5ac227bd6d3563b"),
    ("0.4.1", "cu80", ["3.5", "5.0", "6.0", "6.1"], "027edf5baba37fc7961c05bf6f712926f8863cf9"),
    ("0.4.1", "cu90", ["3.5", "5.0", "6.0", "7.0"], "027edf5baba37fc7961c05bf6f712926f8863cf9"),
    ("0.4.1", "cu92", ["3.5", "5.0", "6.0", "6.1", "7.0"], "027edf5baba37fc7961c05bf6f712926f8863cf9"),
])
def test_torch_0_4_arch_lists_are_those_of_the_wheel_build_script_of_their_release(shipped, version, variant, sass, commit):
    (b,) = [b for b in shipped.builds if b.framework == "torch" and str(b.version) == version and b.variant == variant]
    assert [str(a) for a in b.sass] == sass and [str(a) for a in b.ptx] == ["5.0"]
    assert b.arch_status == "partially confirmed"  # the script, not the wheels, was read
    assert f"https://github.com/pytorch/builder/blob/{commit}/manywheel/build.sh" in b.source


def test_the_oldest_torch_release_is_0_3_0(shipped):
    assert min(b.version for b in shipped.builds if b.framework == "torch") == Version("0.3.0")
    with pytest.raises(ResolveError):
        resolve(shipped, "torch-0.2.0")
