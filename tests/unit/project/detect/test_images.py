"""Dockerfiles: base images that carry their stack in the name, NGC releases, installs in RUN."""

from __future__ import annotations

from pathlib import Path

import pytest

from envman.matrix.load import load_files
from envman.project.detect.images import command_facts, image_facts, ngc_spec, read_dockerfile
from envman.project.detect.facts import IMAGE
from tests.unit.project.detect.conftest import means

NGC = """\
schema = 1
kind = "ngc"

[[release]]
repository = "nvcr.io/nvidia/pytorch"
release = "20.12"
tags = ["20.12-py3"]
framework = "torch"
framework_version = "1.8.0a0+1606899"
cuda = "11.1.1"
cudnn = "8.0.5"
python = "3.8"
os = "ubuntu20.04"
source = ["https://docs.nvidia.com/deeplearning/frameworks/pytorch-release-notes/rel_20-12.html"]
status = "confirmed"

[[release]]
repository = "nvcr.io/nvidia/tensorflow"
release = "21.03"
tags = ["21.03-tf1-py3"]
framework = "tensorflow"
framework_version = "1.15.5+nv"
cuda = "11.2.1"
python = "3.8"
source = ["https://docs.nvidia.com/deeplearning/frameworks/tensorflow-release-notes/rel_21-03.html"]
status = "partially confirmed"

[[release]]
repository = "nvcr.io/nvidia/jax"
release = "23.10"
tags = ["23.10-py3"]
framework = "jax"
source = ["https://docs.nvidia.com/deeplearning/frameworks/jax-release-notes/index.html"]
status = "unconfirmed"
"""


@pytest.fixture(scope="module")
def ngc(tmp_path_factory):
    p = Path(tmp_path_factory.mktemp("ngc")) / "ngc.toml"
    p.write_text(NGC)
    return load_files([p])


@pytest.mark.parametrize("ref, want", [
    ("nvidia/cuda:10.0-cudnn7-devel-ubuntu18.04", ["CUDA 10.0", "cuDNN 7"]),
    ("nvidia/cuda:11.3.1-cudnn8-runtime-ubuntu20.04", ["CUDA 11.3", "cuDNN 8"]),
    ("docker.io/nvidia/cuda:12.6.3-base-ubuntu24.04", ["CUDA 12.6"]),
    ("nvidia/cudagl:10.1-devel-ubuntu18.04", ["CUDA 10.1"]),
    ("pytorch/pytorch:1.7.1-cuda11.0-cudnn8-runtime", ["torch ==1.7.1", "CUDA 11.0", "cuDNN 8"]),
    ("pytorch/pytorch:1.0-cuda10.0-cudnn7-devel", ["torch ==1.0.*", "CUDA 10.0", "cuDNN 7"]),
    ("pytorch/pytorch:0.4.1-cuda9-cudnn7-devel", ["torch ==0.4.1", "CUDA 9", "cuDNN 7"]),
    ("pytorch/pytorch:latest", []),
    ("tensorflow/tensorflow:1.14.0-gpu-py3", ["tensorflow ==1.14.0 (GPU build)"]),
    ("tensorflow/tensorflow:2.4.1-gpu", ["tensorflow ==2.4.1 (GPU build)"]),
    ("tensorflow/tensorflow:1.12.0-py3", ["tensorflow ==1.12.0 (CPU build)"]),
    ("tensorflow/tensorflow:latest-gpu", ["tensorflow (GPU build)"]),
    ("python:3.7-slim", ["Python ==3.7.*"]), ("python:2.7", ["Python 2, which envman does not build"]),
    ("ubuntu:18.04", []),
    # a release after the table's last: at least that release's framework, its CUDA major and Python
    ("nvcr.io/nvidia/pytorch:99.99-py3", ["torch >=1.7 (GPU build)", "CUDA 11", "Python ==3.8.*"]),
])
def test_image_facts(ref, want, ngc):
    assert [f.means() for f in image_facts(ref, ngc)[0]] == want


def test_ngc_images_read_against_the_release_table(ngc):
    facts, what = image_facts("nvcr.io/nvidia/pytorch:20.12-py3", ngc)
    assert [f.means() for f in facts] == ["torch >=1.7,<1.9 (GPU build)", "CUDA 11", "Python ==3.8.*", "cuDNN 8.0.5"]
    assert what == "NGC pytorch 20.12: torch 1.8.0a0+1606899, CUDA 11.1.1, Python 3.8"
    facts, what = image_facts("nvcr.io/nvidia/tensorflow:21.03-tf1-py3", ngc)
    assert [f.means() for f in facts] == ["tensorflow ==1.15.* (GPU build)", "CUDA 11", "Python ==3.8.*"]
    assert what.endswith("; partially confirmed in the matrix")
    facts, what = image_facts("nvcr.io/nvidia/jax:23.10-py3", ngc)
    assert [f.means() for f in facts] == ["jax (GPU build)"] and "contents unknown" in what


@pytest.mark.parametrize("version, spec", [
    ("1.8.0a0+1606899", ">=1.7,<1.9"), ("2.0.0a0+1716905", "==2.0.*"), ("1.15.5+nv", "==1.15.*"),
    ("2.3.0+cc6f2c7", "==2.3.*"), ("1.13.0a0+d0d6b1f", ">=1.12,<1.14"), (None, ""), ("not a version", ""),
])
def test_ngc_spec(version, spec):
    assert ngc_spec(version) == spec


def test_dockerfile_args_stages_and_runs(repo, ngc):
    r = repo({"docker/Dockerfile": """\
        # syntax comment
        ARG BASE_IMAGE=nvcr.io/nvidia/pytorch:20.12-py3
        ARG CUDA=10.1
        FROM nvidia/cuda:${CUDA}-cudnn7-devel-ubuntu18.04 AS build
        RUN pip install --no-cache-dir torch==1.4.0 torchvision==0.5.0 \\
            -f https://download.pytorch.org/whl/cu101/torch_stable.html && \\
            conda install -y -c pytorch cudatoolkit=10.1 && pip install -r requirements.txt
        FROM build
        FROM $BASE_IMAGE
        ENV PYTHON_VERSION=3.7
        """})
    assert [m for _, _, m in means(read_dockerfile(r, "docker/Dockerfile", ngc))] == [
        "CUDA 10.1", "cuDNN 7", "torch ==1.4.0", "torch as torchvision==0.5.0 needs it", "CUDA 10.1 (of torch)", "CUDA 10.1",
        "torch >=1.7,<1.9 (GPU build)", "CUDA 11", "Python ==3.8.*", "cuDNN 8.0.5", "Python ==3.7.*"]


@pytest.mark.parametrize("command, want", [
    ("pip install torch==1.4.0 -f https://download.pytorch.org/whl/torch_stable.html", ["torch ==1.4.0"]),
    ("python -m pip install 'jax[cuda12_pip]==0.4.23' -f https://storage.googleapis.com/jax-releases/jax_cuda_releases.html",
     ["CUDA 12", "jax ==0.4.23 (GPU build)"]),
    ("pip3 install torch --index-url https://download.pytorch.org/whl/cu121", ["torch", "CUDA 12.1 (of torch)"]),
    ("conda install pytorch==1.7.1 torchvision cudatoolkit=11.0 -c pytorch", ["torch ==1.7.1", "CUDA 11.0"]),
    ("conda create -n env python=3.7 -y && conda activate env", ["Python ==3.7.*"]),
    ("pip install -r requirements.txt -e .", []),
    ("make install", []),
])
def test_command_facts(command, want):
    assert [f.means() for _, f in command_facts(command)] == want


def test_an_ngc_release_the_table_lacks_is_read_between_its_neighbours(tmp_path):
    rows = NGC + """
[[release]]
repository = "nvcr.io/nvidia/pytorch"
release = "21.03"
tags = ["21.03-py3"]
framework = "torch"
framework_version = "1.9.0a0+df837d0"
cuda = "11.2.1"
python = "3.8"
source = ["https://docs.nvidia.com/deeplearning/frameworks/pytorch-release-notes/rel_21-03.html"]
status = "confirmed"

[[release]]
repository = "nvcr.io/nvidia/tensorflow"
release = "20.11"
tags = ["20.11-tf2-py3"]
framework = "tensorflow"
framework_version = "2.3.1"
cuda = "11.1.0"
python = "3.6"
source = ["https://docs.nvidia.com/deeplearning/frameworks/tensorflow-release-notes/rel_20-11.html"]
status = "confirmed"
"""
    p = tmp_path / "ngc.toml"
    p.write_text(rows)
    m = load_files([p])
    facts, what = image_facts("nvcr.io/nvidia/pytorch:21.01-py3", m)
    assert [f.means() for f in facts] == ["torch >=1.7,<1.10 (GPU build)", "CUDA 11", "Python ==3.8.*"]
    assert "between 20.12 (torch 1.8.0a0+1606899) and 21.03 (torch 1.9.0a0+df837d0)" in what
    facts, _ = image_facts("nvcr.io/nvidia/tensorflow:21.01-tf1-py3", m)  # the tf1 line, not the tf2 row before it
    assert [f.means() for f in facts] == ["tensorflow <1.16 (GPU build)", "CUDA 11", "Python ==3.8.*"]
    facts, what = image_facts("nvcr.io/nvidia/jax:23.11-py3", m)
    assert [f.means() for f in facts] == ["jax (GPU build)"] and "contents unknown" in what


def _ngc_row(release: str, **figures: str) -> str:
    """One pytorch row of an NGC table; ``figures``: framework_version, cuda, python."""
    lines = [f'{k} = "{v}"' for k, v in figures.items()]
    return "\n".join(["[[release]]", 'repository = "nvcr.io/nvidia/pytorch"', f'release = "{release}"',
                      f'tags = ["{release}-py3"]', 'framework = "torch"', *lines,
                      'source = ["https://example.org/row"]', 'status = "partially confirmed"', ""])


def test_an_ngc_row_without_its_framework_version_keeps_its_own_cuda_and_python(tmp_path):
    # the neighbours disagree with the row itself (CUDA 10 and 12 around a CUDA 11 release, other
    # Pythons): the row's own figures decide; a row that gives neither falls back to the neighbours
    rows = "\n".join([NGC, _ngc_row("30.01", framework_version="1.4.0", cuda="10.2.89", python="3.6"),
                      _ngc_row("30.05", cuda="11.3.1", python="3.8"), _ngc_row("30.06"),
                      _ngc_row("30.09", framework_version="2.1.0", cuda="12.1.0", python="3.10")])
    p = tmp_path / "ngc.toml"
    p.write_text(rows)
    m = load_files([p])
    facts, what = image_facts("nvcr.io/nvidia/pytorch:30.05-py3", m)
    assert [f.means() for f in facts] == ["torch >=1.4,<2.2 (GPU build)", "CUDA 11", "Python ==3.8.*"]
    assert "between 30.01" in what
    facts, _ = image_facts("nvcr.io/nvidia/pytorch:30.06-py3", m)  # neither: the neighbours disagree, nothing
    assert [f.means() for f in facts] == ["torch >=1.4,<2.2 (GPU build)"]


def test_an_ngc_row_with_its_framework_version_alone_borrows_cuda_and_python_around_it(tmp_path):
    rows = "\n".join([NGC, _ngc_row("40.01", framework_version="1.10.0a0+1", cuda="11.5.0", python="3.8"),
                      _ngc_row("40.04", framework_version="1.12.0a0+bd13bc6"),
                      _ngc_row("40.06", framework_version="1.13.0a0+2", cuda="11.7.0", python="3.8"),
                      _ngc_row("40.08", framework_version="1.13.0a0+3", cuda="12.0.0", python="3.10"),
                      _ngc_row("40.10", framework_version="2.0.0a0+4")])
    p = tmp_path / "ngc.toml"
    p.write_text(rows)
    m = load_files([p])
    facts, _ = image_facts("nvcr.io/nvidia/pytorch:40.04-py3", m)
    assert [f.means() for f in facts] == ["torch >=1.11,<1.13 (GPU build)", "CUDA 11", "Python ==3.8.*"]
    # the newest release has a neighbour on one side only: it borrows that one's
    facts, _ = image_facts("nvcr.io/nvidia/pytorch:40.10-py3", m)
    assert [f.means() for f in facts] == ["torch ==2.0.* (GPU build)", "CUDA 12", "Python ==3.10.*"]


def test_a_compose_files_service_images_speak_as_from_lines(repo):
    """``image:`` of each service (a default of ``${VAR:-default}`` taken; one made of another
    variable, a comment or a build-only service gives nothing), at most two folders down."""
    from envman.project.detect.images import COMPOSE, read_compose

    text = ("services:\n  train:\n    image: ${IMAGE:-nvcr.io/nvidia/pytorch:21.08-py3}\n    runtime: nvidia\n"
            "  tb:\n    image: \"tensorflow/tensorflow:2.4.1-gpu\"  # tensorboard\n"
            "  other:\n    image: ${OTHER}\n  built:\n    build: .\n# image: pytorch/pytorch:1.0-cuda10.0-cudnn7-runtime\n")
    r = repo({"docker/docker-compose.gpu.yml": text, "a/b/c/compose.yaml": text, "compose.yml": "x: 1\n"})
    assert [p for p in r.matching(COMPOSE)] == ["compose.yml", "docker/docker-compose.gpu.yml"]
    from envman.matrix.load import load_matrix

    got = read_compose(r, "docker/docker-compose.gpu.yml", load_matrix())
    assert {s.line for s in got} == {3, 6} and all(s.source == "compose" and s.strength == IMAGE for s in got)
    assert {"tensorflow ==2.4.1 (GPU build)"} <= {s.fact.means() for s in got}


def test_env_values_fill_the_run_lines_after_them(repo):
    r = repo({"Dockerfile": """\
        FROM nvidia/cuda:10.2-devel-ubuntu18.04
        RUN pip install torch==${PYTORCH_VERSION}
        ENV PROJECT=demo
        ENV PYTORCH_VERSION=1.8.1 TORCHVISION_VERSION="0.9.1"
        ARG python=3.6
        ENV PYTHON_VERSION=${python}
        ENV TF_VERSION 2.4.1
        RUN pip install torch==${PYTORCH_VERSION} torchvision==$TORCHVISION_VERSION tensorflow==${TF_VERSION}
        ENV PYTORCH_VERSION=1.9.0
        RUN pip install torch==${PYTORCH_VERSION}
        """})
    got = [(line, m) for _, line, m in means(read_dockerfile(r, "Dockerfile", None))]
    # before its ENV line the variable is unset (``torch==`` says nothing); each ENV holds until the next sets it
    assert got == [(1, "CUDA 10.2"), (6, "Python ==3.6.*"), (8, "torch ==1.8.1"),
                   (8, "torch as torchvision==0.9.1 needs it"), (8, "tensorflow ==2.4.1"), (10, "torch ==1.9.0")]


def test_substitution_adds_at_most_its_limit_to_a_line(repo):
    from envman.project.detect.images import SUBSTITUTION_LIMIT, substitute

    full = "a" * SUBSTITUTION_LIMIT
    assert substitute("$A $A", {"A": full}) == full + " "  # exactly the limit, then nothing more
    assert substitute("${A}", {"A": full + "a"}) == ""  # one past it
    # values that double each other (ENV A1=$A0$A0 ...) cost a bounded time and space
    chain = ["ENV A0=torch"] + [f"ENV A{i}=${{A{i - 1}}}${{A{i - 1}}}" for i in range(1, 60)]
    r = repo({"Dockerfile": "FROM ubuntu\n" + "\n".join(chain) + "\nENV V=1.8.1\nRUN pip install $A59 torch==$V\n"})
    assert [m for _, _, m in means(read_dockerfile(r, "Dockerfile", None))] == ["torch ==1.8.1"]


@pytest.mark.parametrize("command, want", [
    # OpenMMLab's wheel index per CUDA and torch: its wheels are built against that torch minor and CUDA
    ("pip install mmcv-full==1.4.0 -f https://download.openmmlab.com/mmcv/dist/cu111/torch1.9.0/index.html",
     ["torch ==1.9.*", "CUDA 11.1"]),
    ("pip install mmcv==2.0.1 -f https://download.openmmlab.com/mmcv/dist/cu117/torch2.0/index.html", ["torch ==2.0.*", "CUDA 11.7"]),
    ("pip install mmcv-full --find-links https://download.openmmlab.com/mmcv/dist/cpu/torch1.8.0/index.html",
     ["torch ==1.8.*", "no CUDA (a CPU build)"]),
    ("pip install mmcv-full -f https://download.openmmlab.com/mmcv/dist/cu102/torch1.6.0", ["torch ==1.6.*", "CUDA 10.2"]),
    # a template, another index layout or a torch word that is no version: nothing
    ("pip install mmcv-full -f https://download.openmmlab.com/mmcv/dist/{cu_version}/{torch_version}/index.html", []),
    ("pip install mmcv-full -f https://download.openmmlab.com/mmcv/dist/index.html", []),
    ("pip install mmcv-full -f https://download.openmmlab.com/mmcv/dist/cu111/torch1.9.0x/index.html", []),
    ("pip install mmcv-full -f https://example.org/wheels/cu111/torch1.9.0/index.html", []),
])
def test_an_openmmlab_wheel_index_names_the_torch_and_cuda_its_wheels_are_built_for(command, want):
    assert [f.means() for _, f in command_facts(command)] == want


@pytest.mark.parametrize("word", ["${", "$", "a", "'a"])
def test_an_install_command_of_one_huge_word_is_read_in_linear_time(word):
    """shlex builds a word a character at a time, in time quadratic in its length: a word of a
    million characters is no requirement, URL or option, and is dropped before the split; the
    words around it are still read."""
    import time

    start = time.process_time()
    got = command_facts("pip install torch==1.9.0 " + word * (1_000_000 // len(word)) + " torchvision==0.10.0")
    assert time.process_time() - start < 1
    assert [w for w, _ in got] == ["torch==1.9.0", "torchvision==0.10.0"]


def test_a_word_at_the_length_limit_is_kept_and_one_past_it_dropped():
    from envman.project.detect.images import MAX_WORD, _words

    assert _words("a " + "b" * MAX_WORD + " c") == ["a", "b" * MAX_WORD, "c"]
    assert _words("a " + "b" * (MAX_WORD + 1) + " c") == ["a", "c"]
