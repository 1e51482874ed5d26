"""What one requirement says: the forms real repositories pin their framework and CUDA with."""

from __future__ import annotations

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envman.project.detect.facts import CUDA, FRAMEWORK, PYTHON, UNSUPPORTED, Fact
from envman.project.detect.pins import (
    cuda_of_index, cuda_of_tag, exact_version, public_spec, release_meets, requirement_facts,
)


@pytest.mark.parametrize("tag, cuda", [
    ("cu92", "9.2"), ("cu80", "8.0"), ("cu90", "9.0"), ("cu100", "10.0"), ("cu101", "10.1"), ("cu113", "11.3"),
    ("cu118", "11.8"), ("cu121", "12.1"), ("cu130", "13.0"), ("+cu113", "11.3"),
    ("cuda111", "11.1"), ("cuda110", "11.0"), ("cuda101", "10.1"), ("cuda11", "11"), ("cuda12", "12"),
    ("cuda11x", "11"), ("cuda12x", "12"), ("cuda12_pip", "12"), ("cuda11_cudnn86", "11"), ("cuda11.cudnn82", "11"),
    ("cuda12.cudnn89", "12"), ("cuda11.8", "11.8"), ("cupy-cuda102", "10.2"), ("mxnet-cu101", "10.1"),
    ("cuda-12", "12"),
    ("cudnn82", None), ("cpu", None), ("accuracy10", None), ("focus12", None), ("", None), ("rocm5.6", None),
])
def test_cuda_of_tag(tag, cuda):
    assert cuda_of_tag(tag) == cuda


@pytest.mark.parametrize("url, found", [
    ("https://download.pytorch.org/whl/cu113", ("11.3", True)),
    ("https://download.pytorch.org/whl/cu118/torch_stable.html", ("11.8", True)),
    ("https://download.pytorch.org/whl/nightly/cu121", ("12.1", True)),
    ("https://download.pytorch.org/whl/cpu", (None, False)),
    ("https://download.pytorch.org/whl/torch_stable.html", None),
    ("https://download.pytorch.org/whl/rocm5.6", None),
    ("https://pypi.org/simple", None),
])
def test_cuda_of_index(url, found):
    assert cuda_of_index(url) == found


def facts(text):
    return list(requirement_facts(text))


@pytest.mark.parametrize("text, want", [
    ("torch==1.7.1", [Fact(FRAMEWORK, framework="torch", spec="==1.7.1")]),
    ("torch==1.10.0+cu113", [Fact(CUDA, version="11.3"), Fact(FRAMEWORK, framework="torch", spec="==1.10.0", gpu=True)]),
    ("torch==1.13.1+cpu", [Fact(FRAMEWORK, framework="torch", spec="==1.13.1", gpu=False)]),
    ("pytorch==0.4.1", [Fact(FRAMEWORK, framework="torch", spec="==0.4.1")]),
    ("torch>=1.7,<2", [Fact(FRAMEWORK, framework="torch", spec=">=1.7,<2")]),
    ("torch", [Fact(FRAMEWORK, framework="torch", spec="")]),
    ('torch>=1.7.0,!=1.12.0; python_version >= "3.8"', [Fact(FRAMEWORK, framework="torch", spec="!=1.12.0,>=1.7.0")]),
    ("tensorflow-gpu==1.15.4", [Fact(FRAMEWORK, framework="tensorflow", spec="==1.15.4", gpu=True)]),
    ("tensorflow-cpu==2.11.0", [Fact(FRAMEWORK, framework="tensorflow", spec="==2.11.0", gpu=False)]),
    ("tensorflow==2.12.1", [Fact(FRAMEWORK, framework="tensorflow", spec="==2.12.1")]),
    ("jax[cuda12]>=0.4.20", [Fact(CUDA, version="12"), Fact(FRAMEWORK, framework="jax", spec=">=0.4.20", gpu=True)]),
    ("jax[cuda12_pip]==0.4.23", [Fact(CUDA, version="12"), Fact(FRAMEWORK, framework="jax", spec="==0.4.23", gpu=True)]),
    ("jax[cuda]", [Fact(FRAMEWORK, framework="jax", spec="", gpu=True)]),
    ("jax[tpu]==0.4.1", [Fact(FRAMEWORK, framework="jax", spec="==0.4.1", gpu=None)]),
    ("jax[cpu]==0.4.1", [Fact(FRAMEWORK, framework="jax", spec="==0.4.1", gpu=False)]),
    ("jax[tpu,cuda12]==0.4.30", [Fact(CUDA, version="12"), Fact(FRAMEWORK, framework="jax", spec="==0.4.30", gpu=True)]),
    ("mindspore-gpu==1.8.1", [Fact(UNSUPPORTED, framework="mindspore")]),
    ("MLX>=0.5", [Fact(UNSUPPORTED, framework="mlx")]),
    ("jaxlib==0.1.69+cuda111", [Fact(CUDA, version="11.1"), Fact(FRAMEWORK, framework="jax", gpu=True, companion="jaxlib==0.1.69")]),
    ("jaxlib==0.4.26+cuda12.cudnn89", [Fact(CUDA, version="12"), Fact(FRAMEWORK, framework="jax", gpu=True, companion="jaxlib==0.4.26")]),
    ("torchvision==0.2.1", [Fact(FRAMEWORK, framework="torch", companion="torchvision==0.2.1")]),
    ("torchvision==0.8.2+cu110", [Fact(CUDA, version="11.0"), Fact(FRAMEWORK, framework="torch", companion="torchvision==0.8.2")]),
    ("torchvision>=0.8", []),
    ("onnxruntime-gpu==1.16.0", [Fact(FRAMEWORK, framework="onnxruntime", spec="==1.16.0", gpu=True)]),
    ("onnxruntime", [Fact(FRAMEWORK, framework="onnxruntime", spec="", gpu=False)]),
    ("cupy-cuda11x", [Fact(CUDA, version="11")]),
    ("cupy-cuda102==9.0", [Fact(CUDA, version="10.2")]),
    ("nvidia-cudnn-cu11==8.6.0.163", [Fact(CUDA, version="11")]),
    ("jax-cuda12-plugin==0.4.30", [Fact(FRAMEWORK, framework="jax", spec="", gpu=True), Fact(CUDA, version="12")]),
    ("mxnet-cu101==1.6.0", [Fact(UNSUPPORTED, framework="mxnet"), Fact(CUDA, version="10.1")]),
    ("Theano==1.0.4", [Fact(UNSUPPORTED, framework="theano")]),
    ("Lasagne", [Fact(UNSUPPORTED, framework="theano")]),
    ("torch @ https://download.pytorch.org/whl/cu111/torch-1.9.0%2Bcu111-cp38-cp38-linux_x86_64.whl",
     [Fact(CUDA, version="11.1"), Fact(FRAMEWORK, framework="torch", spec="==1.9.0", gpu=True), Fact(PYTHON, spec="==3.8.*")]),
    ("numpy==1.19.5", []),
    ("tensorboard==2.4.0", []),
    ("not a requirement ===", []),
    ("", []),
])
def test_requirement_facts(text, want):
    assert facts(text) == want


@pytest.mark.parametrize("spec, version", [
    ("==1.7.1", "1.7.1"), ("===1.7.1", "1.7.1"), ("==1.10.0+cu113", "1.10.0"), ("==1.7.*", None), (">=1.7", None),
    ("==1.7.1,==1.7.2", None), ("", None), ("==1.7.1,<2", "1.7.1"),
])
def test_exact_version(spec, version):
    assert exact_version(spec) == version


@pytest.mark.parametrize("spec, meets", [
    ("==0.3.0", True), ("==0.3.0.post4", True), ("===0.3.0.post4", True), ("==0.3.*", True), (">=0.3,<0.4", True),
    ("==0.3.0.post3", False), ("==0.3.0.post5", False), ("!=0.3.0", False), ("!=0.3.0.post4", False),
    (">0.3.0", False), ("<0.3.0", False), ("<=0.3.0", True), (">=0.3.0.post4", True), (">=0.3.0.post5", False),
    ("", True), ("!=0.3.1", True),
])
def test_a_pin_meets_a_release_or_the_post_release_its_row_installs(spec, meets):
    assert release_meets(SpecifierSet(spec), Version("0.3.0"), (Version("0.3.0.post4"),)) is meets


def test_an_installed_version_of_another_release_is_no_stand_in():
    # a jax row of 0.2.17 installs jaxlib 0.1.68: a pin of jax 0.1.68 names no such row
    assert not release_meets(SpecifierSet("==0.1.68"), Version("0.2.17"), (Version("0.1.68"),))
    assert not release_meets(SpecifierSet("==0.3.0.post4"), Version("0.3.0"))


def test_public_spec_drops_the_local_label_and_keeps_it_apart():
    from packaging.specifiers import SpecifierSet

    assert public_spec(SpecifierSet("==1.10.0+cu113")) == ("==1.10.0", "cu113")
    assert public_spec(SpecifierSet(">=1.7,<2")) == (">=1.7,<2", None)


from hypothesis import given, settings, strategies as st  # noqa: E402

_WORDS = st.sampled_from(["torch", "tensorflow-gpu", "jax[cuda12]", "jaxlib", "torchvision", "cupy-cuda", "mxnet-cu",
                          "nvidia-cudnn-cu1", "==", ">=", "+cu", "+cuda", ".", ",", ";", "@", "https://", "[", "]", "9", "1",
                          "12", "0", " ", "\n", "\x00", "é", "\u202e", "*"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_WORDS, max_size=20).map("".join) | st.text(max_size=200))
def test_any_requirement_text_gives_facts_or_nothing_never_an_error(text):
    for f in requirement_facts(text):
        assert f.kind in ("framework", "cuda", "unsupported")
        assert f.version is None or len(f.version) <= 8
    assert cuda_of_tag(text) is None or len(cuda_of_tag(text)) <= 8


@pytest.mark.parametrize("text, spec", [
    ("keras==2.2.4", "<2.0"), ("keras==2.3.1", "<2.2"), ("keras==2.4.3", ">=2.2,<2.6"), ("keras==2.6.0", "==2.6.*"),
    ("keras==2.15.0", "==2.15.*"), ("keras==2.16.0", None), ("keras==3.3.3", None), ("keras>=2.2", None), ("keras", None),
])
def test_a_pinned_standalone_keras_bounds_tensorflow(text, spec):
    tf = [f.spec for f in requirement_facts(text) if f.framework == "tensorflow"]
    assert tf == ([spec] if spec else [])


@pytest.mark.parametrize("text, spec", [
    ("tensorflow-gpu==2.3.0rc0", "==2.3.*"), ("torch==2.0.0a0", "==2.0.*"), ("torch==1.14.0.dev20221027", "==1.14.*"),
    ("torch==1.13.1", "==1.13.1"),
])
def test_a_prerelease_pin_stands_for_its_release(text, spec):
    assert [f.spec for f in requirement_facts(text) if f.kind == FRAMEWORK] == [spec]


@pytest.mark.parametrize("text, facts_", [
    ("torch==1.4.0; sys_platform == 'darwin'", 0), ("torch==1.4.0; platform_system == 'Windows'", 0),
    ("torch==1.4.0; python_version < '3'", 0), ("torch==1.4.0; python_version >= '3.8'", 1),
    ("torch==1.4.0; sys_platform == 'linux' and platform_machine == 'x86_64'", 1), ("torch==1.4.0; extra == 'gpu'", 0),
])
def test_markers_are_evaluated_for_a_linux_stack(text, facts_):
    assert len([f for f in requirement_facts(text) if f.kind == FRAMEWORK]) == facts_


@pytest.mark.parametrize("word, want", [
    ("https://download.pytorch.org/whl/cu90/torch-1.0.0-cp35-cp35m-linux_x86_64.whl",
     ["torch ==1.0.0", "CUDA 9.0", "Python ==3.5.*"]),
    ("https://download.pytorch.org/whl/cu101/torch-1.4.0%2Bcu101-cp37-cp37m-linux_x86_64.whl",
     ["CUDA 10.1", "torch ==1.4.0 (GPU build)", "Python ==3.7.*"]),
    ("torch-1.7.1+cu110-cp38-cp38-linux_x86_64.whl", ["CUDA 11.0", "torch ==1.7.1 (GPU build)", "Python ==3.8.*"]),
    ("https://download.pytorch.org/whl/cpu/torch-1.4.0-cp36-cp36m-linux_x86_64.whl", ["torch ==1.4.0", "no CUDA (a CPU build)", "Python ==3.6.*"]),
    ("https://example.com/einops-0.3.0-py3-none-any.whl", []),
    # Google's jax releases keep each CUDA's wheels in a folder of its name, the version bare before 0.1.55
    ("https://storage.googleapis.com/jax-releases/cuda101/jaxlib-0.1.52-cp37-none-manylinux2010_x86_64.whl",
     ["jax as jaxlib==0.1.52 needs it", "CUDA 10.1", "Python ==3.7.*"]),
    ("https://storage.googleapis.com/jax-releases/cuda110/jaxlib-0.1.55+cuda110-cp38-none-manylinux2010_x86_64.whl",
     ["CUDA 11.0", "jax as jaxlib==0.1.55 needs it", "Python ==3.8.*"]),
    ("https://example.com/mycuda101/jaxlib-0.1.52-cp37-none-manylinux2010_x86_64.whl",
     ["jax as jaxlib==0.1.52 needs it", "Python ==3.7.*"]),  # a folder that only contains the word
    ("https://example.com/cuda1010/jaxlib-0.1.52-cp37-none-manylinux2010_x86_64.whl",
     ["jax as jaxlib==0.1.52 needs it", "Python ==3.7.*"]),  # four digits name no CUDA
    ("https://example.com/cu92/jaxlib-0.1.52-cp37-none-manylinux2010_x86_64.whl",
     ["jax as jaxlib==0.1.52 needs it", "CUDA 9.2", "Python ==3.7.*"]),
    ("./torch-1.0-bad.whl", []),
    ("torch.whl", []),
])
def test_a_wheel_named_by_file_or_address_states_its_release_cuda_and_python(word, want):
    assert [f.means() for f in requirement_facts(word)] == want


@pytest.mark.parametrize("text, spec, gpu", [
    # a distribution name with a dash is written with an underscore in its wheel's file name (PEP 427)
    ("tensorflow-gpu @ https://files.example/wheels/tensorflow_gpu-2.4.0-cp38-cp38-manylinux2010_x86_64.whl", "==2.4.0", True),
    # and the file name's case is free
    ("torch @ file:///wheels/Torch-1.9.0%2Bcpu-cp38-cp38-linux_x86_64.whl", "==1.9.0", False),
    ("torch @ https://files.example/whl/torch-1.9.0-cp38-cp38-linux_x86_64.whl", "==1.9.0", None),
    # a bare file name, no "/" in it
    ("torch @ torch-1.9.0-cp38-cp38-linux_x86_64.whl", "==1.9.0", None),
])
def test_a_wheel_url_pins_the_release_its_file_names(text, spec, gpu):
    assert [(f.spec, f.gpu) for f in requirement_facts(text) if f.kind == FRAMEWORK] == [(spec, gpu)]


def test_markers_are_evaluated_for_a_linux_x86_64_stack_on_any_host(monkeypatch):
    """Detection on a Mac (or an arm64 machine) reads a repository's markers as the stack will."""
    import packaging.markers

    mac = {"sys_platform": "darwin", "platform_system": "Darwin", "os_name": "nt", "platform_machine": "arm64",
           "implementation_name": "pypy", "platform_python_implementation": "PyPy", "platform_release": "23.0",
           "platform_version": "Darwin", "python_version": "3.12", "python_full_version": "3.12.1",
           "implementation_version": "3.12.1"}
    monkeypatch.setattr(packaging.markers, "default_environment", lambda: dict(mac))
    for marker in ("sys_platform == 'linux'", "platform_system == 'Linux'", "os_name == 'posix'",
                   "platform_machine == 'x86_64'", "implementation_name == 'cpython'",
                   "platform_python_implementation == 'CPython'"):
        assert len([f for f in requirement_facts(f"torch==1.4.0; {marker}") if f.kind == FRAMEWORK]) == 1, marker
    for marker in ("sys_platform == 'darwin'", "platform_system == 'Darwin'", "os_name == 'nt'", "platform_machine == 'arm64'",
                   "implementation_name == 'pypy'", "platform_python_implementation == 'PyPy'"):
        assert [f for f in requirement_facts(f"torch==1.4.0; {marker}") if f.kind == FRAMEWORK] == [], marker


@pytest.mark.parametrize("spec, read", [
    (">=1.7" + " " * (4096 - 5), ">=1.7"), (">=1.7" + " " * (4097 - 5), ""),  # at the 4096-character bound, one past
    ("==1.123456789012", "==1.123456789012"), ("==1.1234567890123", ""),  # twelve digits, thirteen
    (None, ""), (17, ""), ("not a specifier", ""),
])
def test_a_specifier_given_apart_is_read_within_its_bounds(spec, read):
    """Poetry, Pipfile and conda give the name and the specifier apart; an overlong one, a number no
    release has, or a value that is not text names the framework with no release."""
    from envman.project.detect.pins import named_facts

    assert [(f.framework, f.spec) for f in named_facts("torch", spec)] == [("torch", read)]


@pytest.mark.parametrize("text", ["torch@https://jax[cuda12]", "torch @ https://[not-an-ip]/torch-1.9.0-cp38-cp38-linux_x86_64.whl"])
def test_an_address_with_a_bracketed_host_that_is_no_ip_is_read_without_an_error(text):
    facts = list(requirement_facts(text))  # no ValueError from the address's host
    assert all(f.kind == FRAMEWORK and f.framework == "torch" for f in facts)


@pytest.mark.parametrize("url", ["https://jax[cuda12]", "https://[cuda]/torch-2.0.0-cp311-cp311-linux_x86_64.whl"])
def test_an_unparsable_address_has_no_path_and_no_wheel_facts(url):
    from envman.project.detect.pins import url_path, wheel_facts

    assert url_path(url) == "" and list(wheel_facts(url)) == []
    assert url_path("https://[::1]/w/torch-2.0.0-cp311-cp311-linux_x86_64.whl") == "/w/torch-2.0.0-cp311-cp311-linux_x86_64.whl"
