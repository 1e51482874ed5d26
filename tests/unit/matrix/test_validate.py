"""Correctness rules of `envman matrix validate`: each test corrupts one fact of a small, valid
matrix and asserts that exactly that problem is reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from envman.errors import MatrixError
from envman.matrix.load import load_matrix
from envman.matrix.validate import validate
from envman.stack.resolve import resolve

CUDA = """
schema = 1
kind = "cuda"

[[release]]
version = "10.1"
toolkit_driver = "418.39"
sm = ["3.0", "5.0", "6.0", "7.0", "7.5"]
cudnn = ["7.6.5.32", "8.0.5.39"]
source = ["t"]
status = "confirmed"

[[release]]
version = "11.0"
toolkit_driver = "450.36.06"
minor_compat_driver = "450.80.02"
sm = ["3.5", "5.0", "6.0", "7.0", "7.5", "8.0"]
cudnn = ["8.0.5.39"]
source = ["t"]
status = "confirmed"

[[release]]
version = "12.2"
toolkit_driver = "535.54.03"
minor_compat_driver = "525.60.13"
sm = ["5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"]
cudnn = ["8.9.4.25"]
source = ["t"]
status = "confirmed"

[[release]]
version = "12.4"
toolkit_driver = "550.54.14"
minor_compat_driver = "525.60.13"
sm = ["5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"]
cudnn = ["9.1.0.70"]
source = ["t"]
status = "confirmed"
"""

OS = """
schema = 1
kind = "os"

[[os]]
name = "ubuntu18.04"
python_default = "3.6"
python_apt = ["3.6", "3.7", "3.8"]
source = ["t"]
status = "confirmed"

[[os]]
name = "ubuntu20.04"
python_default = "3.8"
python_apt = ["3.8", "3.9"]
source = ["t"]
status = "confirmed"

[[os]]
name = "ubuntu22.04"
python_default = "3.10"
python_apt = ["3.10", "3.11"]
source = ["t"]
status = "confirmed"
"""


def _image(tag: str, cuda: str, flavour: str, os_: str, cudnn: str | None = None) -> str:
    line = f'cudnn = "{cudnn}"\n' if cudnn else ""
    return (f'[[image]]\nrepository = "nvidia/cuda"\ntag = "{tag}"\ncuda = "{cuda}"\nflavour = "{flavour}"\n{line}'
            f'os = "{os_}"\nstatus = "published"\nsource = ["t"]\n\n')


IMAGES = "schema = 1\nkind = \"images\"\n\n" + "".join([
    _image("10.1-cudnn7-runtime-ubuntu18.04", "10.1", "cudnn-runtime", "ubuntu18.04", "7"),
    _image("10.1-cudnn8-runtime-ubuntu18.04", "10.1", "cudnn-runtime", "ubuntu18.04", "8"),
    _image("11.0-base-ubuntu20.04", "11.0", "base", "ubuntu20.04"),
    _image("12.2.2-cudnn8-runtime-ubuntu22.04", "12.2.2", "cudnn-runtime", "ubuntu22.04", "8"),
    _image("12.4.1-cudnn-runtime-ubuntu22.04", "12.4.1", "cudnn-runtime", "ubuntu22.04", "9"),
])

TAGS = """
schema = 1
kind = "tags"

[[repository]]
name = "nvidia/cuda"
source = ["t"]
status = "confirmed"
tags = [
  "10.1-cudnn7-runtime-ubuntu18.04", "10.1-cudnn8-runtime-ubuntu18.04",
  "11.0-base-ubuntu20.04", "11.0.3-base-ubuntu20.04",
  "12.2.2-cudnn8-runtime-ubuntu22.04",
  "12.4.0-cudnn-runtime-ubuntu22.04", "12.4.1-cudnn-runtime-ubuntu22.04",
]
"""

TF = """
schema = 1
kind = "framework"
framework = "tensorflow"

[[build]]
version = "2.3.0"
variant = "gpu"
cuda = "10.1"
cudnn = "7.6"
python = ["3.6", "3.7", "3.8"]
packages = ["tensorflow==2.3.0"]
system_cuda = true
system_cudnn = true
sass = ["3.0", "5.0", "6.0", "7.0"]
ptx = ["7.0"]
source = ["t"]
status = "confirmed"
"""

ORT = """
schema = 1
kind = "framework"
framework = "onnxruntime"

[[build]]
version = "1.18.1"
variant = "cuda12"
cuda = "12.4"
cudnn = "9"
python = ["3.10", "3.11"]
packages = ["onnxruntime-gpu==1.18.1"]
system_cuda = true
system_cudnn = true
sass = ["8.0"]
source = ["t"]
status = "confirmed"
"""

TORCH = """
schema = 1
kind = "framework"
framework = "torch"

[[build]]
version = "2.5.1"
variant = "cpu"
python = ["3.10", "3.11"]
packages = ["torch==2.5.1", "torchvision==0.20.1"]
wheel_python = { torch = ["3.9", "3.10", "3.11", "3.12", "3.13"], torchvision = ["3.9", "3.10", "3.11", "3.12"] }
wheel_python_source = ["t"]
source = ["t"]
status = "confirmed"
"""


def _load(tmp_path: Path, **replace: str):
    files = {"cuda": CUDA, "os": OS, "images": IMAGES, "tags": TAGS, "tf": TF, "ort": ORT, "torch": TORCH}
    files.update(replace)
    paths = []
    for name, text in files.items():
        p = tmp_path / f"{name}.toml"
        p.write_text(text)
        paths.append(p)
    return load_matrix(paths, shipped=False)


def _problems(tmp_path: Path, **replace: str) -> list[str]:
    return [str(p) for p in validate(_load(tmp_path, **replace))]


def test_the_small_matrix_is_valid(tmp_path):
    assert _problems(tmp_path) == []


# --- (a) cuDNN of the image vs the cuDNN the build needs ---------------------------------------


def test_system_cudnn9_build_on_a_cuda_whose_images_ship_cudnn8(tmp_path):
    assert _problems(tmp_path, ort=ORT.replace('cuda = "12.4"', 'cuda = "12.2"')) == [
        "onnxruntime 1.18.1 cuda12: needs system cuDNN 9, but the cudnn images of CUDA 12.2 ship cuDNN 8"
    ]


def test_cudnn_7_6_build_resolves_to_the_cudnn7_image_not_the_cudnn8_one(tmp_path):
    s = resolve(_load(tmp_path), "tf-2.3-cuda10.1")
    assert s.base_image == "nvidia/cuda:10.1-cudnn7-runtime-ubuntu18.04"
    # without the cudnn7 image there is no fitting base: validate names it
    images = IMAGES.replace(_image("10.1-cudnn7-runtime-ubuntu18.04", "10.1", "cudnn-runtime", "ubuntu18.04", "7"), "")
    assert _problems(tmp_path, images=images) == [
        "tensorflow 2.3.0 gpu: needs system cuDNN 7.6, but the cudnn images of CUDA 10.1 ship cuDNN 8",
    ]


def test_cudnn_minor_newer_than_what_the_images_ship(tmp_path):
    assert _problems(tmp_path, tf=TF.replace('cudnn = "7.6"', 'cudnn = "7.7"')) == [
        "tensorflow 2.3.0 gpu: needs system cuDNN 7.7, but the images of CUDA 10.1 ship cuDNN 7.6.5.32"
    ]


def test_pinned_base_image_with_the_wrong_cudnn(tmp_path):
    tf = TF.replace('status = "confirmed"', 'base_image = "nvidia/cuda:10.1-cudnn8-runtime-ubuntu18.04"\nstatus = "confirmed"')
    assert _problems(tmp_path, tf=tf) == [
        "tensorflow 2.3.0 gpu: needs system cuDNN 7.6, but its base image nvidia/cuda:10.1-cudnn8-runtime-ubuntu18.04 ships cuDNN 8"
    ]


def test_system_cudnn_without_a_cudnn_version(tmp_path):
    assert _problems(tmp_path, ort=ORT.replace('cudnn = "9"\n', "")) == [
        "onnxruntime 1.18.1 cuda12: needs system cuDNN (system_cudnn) but does not say which (cudnn)"
    ]


# --- (b) base tags NVIDIA published ------------------------------------------------------------


def test_a_tag_nvidia_never_published_names_the_published_one(tmp_path):
    images = IMAGES.replace("12.4.1-cudnn-runtime-ubuntu22.04", "12.4.2-cudnn-runtime-ubuntu22.04").replace(
        'cuda = "12.4.1"', 'cuda = "12.4.2"')
    assert _problems(tmp_path, images=images) == [
        "image nvidia/cuda:12.4.2-cudnn-runtime-ubuntu22.04: NVIDIA never published this tag (published for this "
        "release, flavour and OS: 12.4.0-cudnn-runtime-ubuntu22.04, 12.4.1-cudnn-runtime-ubuntu22.04)"
    ]


def test_a_release_tagged_only_with_its_full_patch_version(tmp_path):
    tags = TAGS.replace('"11.0-base-ubuntu20.04", ', "")
    assert _problems(tmp_path, tags=tags) == [
        "image nvidia/cuda:11.0-base-ubuntu20.04: NVIDIA never published this tag (published for this release, "
        "flavour and OS: 11.0.3-base-ubuntu20.04)"
    ]
    # pinning the published full-patch tag is valid (11.0 had both forms)
    images = IMAGES.replace('tag = "11.0-base-ubuntu20.04"\ncuda = "11.0"', 'tag = "11.0.3-base-ubuntu20.04"\ncuda = "11.0.3"')
    assert _problems(tmp_path, tags=tags, images=images) == []


def test_tags_of_other_repositories_and_custom_bases_are_not_checked(tmp_path):
    images = IMAGES + ('[[image]]\nrepository = "registry.example/cuda"\ntag = "12.4-mine"\ncuda = "12.4.1"\n'
                       'flavour = "cudnn-runtime"\ncudnn = "9"\nos = "ubuntu22.04"\nstatus = "unknown"\nsource = ["t"]\ncustom = true\n')
    assert _problems(tmp_path, images=images) == []


def test_tags_file_schema(tmp_path):
    with pytest.raises(MatrixError, match=r"repository\[0\]\.tags"):
        _load(tmp_path, tags=TAGS.replace("tags = [", "tags = []\nx = [").replace("]\n\"\"\"", "]"))


# --- (c) wheels for every claimed Python of every installed package ---------------------------


def test_python_without_a_wheel_of_the_pairing_package(tmp_path):
    torch = TORCH.replace('python = ["3.10", "3.11"]', 'python = ["3.10", "3.11", "3.13"]')
    assert _problems(tmp_path, torch=torch) == [
        "torch 2.5.1 cpu: claims Python 3.13, but torchvision==0.20.1 has no wheel for it (wheels: 3.9, 3.10, 3.11, 3.12)"
    ]


def test_wheel_python_must_cover_every_installed_package(tmp_path):
    torch = TORCH.replace(', torchvision = ["3.9", "3.10", "3.11", "3.12"]', "")
    assert _problems(tmp_path, torch=torch) == [
        "torch 2.5.1 cpu: wheel_python has no entry for torchvision, which the row installs"
    ]
    torch = TORCH.replace('torch = ["3.9"', 'torchaudio = ["3.10"], torch = ["3.9"')
    assert _problems(tmp_path, torch=torch) == [
        "torch 2.5.1 cpu: wheel_python lists torchaudio, which the row does not install"
    ]


def test_pure_python_wheels_fit_every_python(tmp_path):
    torch = TORCH.replace('torchvision = ["3.9", "3.10", "3.11", "3.12"]', 'torchvision = ["any"]').replace(
        'python = ["3.10", "3.11"]', 'python = ["3.10", "3.11", "3.13"]')
    assert _problems(tmp_path, torch=torch) == []


def test_wheel_python_needs_its_source(tmp_path):
    assert _problems(tmp_path, torch=TORCH.replace('wheel_python_source = ["t"]\n', "")) == [
        "torch 2.5.1 cpu: wheel_python needs a wheel_python_source"
    ]


# --- the shipped matrix obeys the rules -------------------------------------------------------


def test_shipped_rows_record_wheel_pythons_and_system_cudnn_rows_fit_their_images():
    m = load_matrix()
    assert validate(m) == []
    torch_rows = [b for b in m.builds if b.framework == "torch"]
    assert torch_rows and all(b.wheel_python for b in torch_rows)
    for b in m.builds:
        if b.system_cudnn:
            from envman.stack.resolve import resolve_row

            s = resolve_row(m, b)
            img = next(i for i in m.images if i.ref == s.base_image)
            assert img.cudnn == b.cudnn.split(".")[0], (b.name, img.ref)


def test_shipped_cuda_13_2_and_13_3_with_drivers_cudnn_and_images():
    m = load_matrix()
    for key, driver, cudnn, patch in (("13.2", "595.45.04", "9.20.0.48", "13.2.1"), ("13.3", "610.43.02", "9.24.0.43", "13.3.1")):
        rel = m.cuda_release(key)
        assert rel is not None and str(rel.toolkit_driver) == driver and rel.cudnn == (cudnn,)
        assert rel.source and rel.status != "confirmed" or rel.note  # sourced, with what is carried over said
        imgs = [i for i in m.images if i.cuda_patch is not None and str(i.cuda_patch) == patch]
        assert {i.flavour for i in imgs} == {"base", "runtime", "cudnn-runtime", "devel", "cudnn-devel"}
        assert all("linux/arm64" in i.platforms and i.platform_source for i in imgs)
        assert all(i.tag in m.published_tags("nvidia/cuda") for i in imgs)
    assert [str(r.version) for r in m.cuda][-4:] == ["13.2", "13.3", "13.4", "13.5"]


@pytest.mark.parametrize(
    "query, cc",
    [("RTX PRO 6000", "12.0"), ("dgx spark", "12.1"), ("GB300", "10.3"), ("jetson thor", "11.0"),
     ("rtx 5070 ti", "12.0"), ("rtx 5090 laptop", "12.0")],
)
def test_shipped_gpu_table_has_the_blackwell_generation(query, cc):
    g = load_matrix().gpu(query)
    assert g is not None and str(g.cc) == cc and g.source


def test_gpu_ids_and_aliases_are_unambiguous():
    m = load_matrix()
    seen: dict[str, str] = {}
    for g in m.gpus:
        for key in {g.id, g.name, *g.aliases}:
            k = "".join(ch for ch in key.lower() if ch.isalnum())
            assert seen.setdefault(k, g.id) == g.id, (key, g.id, seen[k])


def test_a_row_made_in_code_that_could_not_render_is_one_problem_where_it_is(mini):
    """The loader refuses such rows; validation names them too, each at its row."""
    from dataclasses import replace

    bad = replace(next(b for b in mini.builds if b.name == "torch-2.4.1-cpu"), variant="c/x")
    problems = validate(replace(mini, builds=tuple(bad if b.name == "torch-2.4.1-cpu" else b for b in mini.builds)))
    assert [(p.where, p.what) for p in problems] == [
        ("torch 2.4.1 c/x", "variant 'c/x' is not 1-64 letters, digits or ._+-")]
