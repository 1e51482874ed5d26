"""The rest of the repository's requirements as a layer on its stack: kept, provided, left out
(with the reason) or refused."""

from __future__ import annotations

import pytest

from envman.matrix.load import load_matrix
from envman.project.detect.layer import KEPT, LEFT_OUT, PROVIDED, REFUSED, judge, requirements_layer, requirements_refusal
from envman.stack.resolve import resolve


@pytest.fixture(scope="module")
def torch171():
    return resolve(load_matrix(), "torch-1.7.1-cuda11.0")


@pytest.fixture(scope="module")
def cpu_stack():
    return resolve(load_matrix(), "torch-2.4-cpu")


@pytest.mark.parametrize("req, outcome", [
    ("torch==1.7.1", PROVIDED), ("torch==1.7.1+cu110", PROVIDED), ("torch>=1.7", PROVIDED), ("torch", PROVIDED),
    ("pytorch==1.7.1", PROVIDED), ("torchvision==0.8.2", PROVIDED), ("torchvision", PROVIDED),
    ("torch==1.9.0", REFUSED), ("torch<1.7", REFUSED), ("torch==1.7.1+cu101", REFUSED), ("torchvision==0.10.0", REFUSED),
    ("nvidia-cudnn-cu12==8.9.2.26", REFUSED), ("nvidia-cudnn-cu11==8.6.0.163", LEFT_OUT),
    ("tensorflow==2.4.0", KEPT), ("numpy>=1.19", KEPT), ("einops==0.3.0", KEPT),
    ("pkg @ file:///etc/passwd", LEFT_OUT), ("not valid ===", LEFT_OUT),
])
def test_judge(torch171, req, outcome):
    assert judge(req, torch171)[0] == outcome


def test_refusals_name_the_pin_and_the_stack(torch171):
    outcome, why = judge("torch==1.9.0", torch171)
    assert outcome == REFUSED and why == f"would replace the stack's torch 1.7.1 ({torch171.name})"


def test_a_cuda_library_on_a_cpu_stack_is_left_out(cpu_stack):
    assert judge("nvidia-cublas-cu12==12.1.3.1", cpu_stack) == (LEFT_OUT, "a CUDA library, and the stack is a CPU build")


def test_requirements_file_with_includes_options_and_the_repository_itself(repo, torch171):
    r = repo({"requirements.txt": "-r base.txt\n-f https://download.pytorch.org/whl/torch_stable.html\n"
                                  "torch==1.7.1+cu110\n-e .\n.\n-c constraints.txt\n--pre\n",
              "base.txt": "numpy==1.19.5\nscipy\n"})
    layer = requirements_layer(r, torch171)
    assert layer.source == "requirements.txt"
    assert [(ln.file, ln.text, ln.outcome) for ln in layer.lines] == [
        ("base.txt", "numpy==1.19.5", KEPT), ("base.txt", "scipy", KEPT),
        ("requirements.txt", "-f https://download.pytorch.org/whl/torch_stable.html", LEFT_OUT),
        ("requirements.txt", "torch==1.7.1+cu110", PROVIDED), ("requirements.txt", "-e .", LEFT_OUT),
        ("requirements.txt", ".", LEFT_OUT), ("requirements.txt", "-c constraints.txt", LEFT_OUT),
        ("requirements.txt", "--pre", LEFT_OUT)]
    assert layer.kept == ["numpy==1.19.5", "scipy"]
    assert all(ln.why for ln in layer.lines if ln.outcome == LEFT_OUT)  # no silent drop
    assert requirements_refusal(layer) is None


def test_conda_file_conda_only_packages_say_what_they_are(repo, torch171):
    r = repo({"environment.yml": "dependencies:\n  - python=3.8\n  - pytorch=1.7.1\n  - cudatoolkit=11.0\n"
                                 "  - mkl\n  - scipy=1.5\n  - py-opencv\n  - libgcc-ng\n  - pip:\n    - einops==0.3.0\n"})
    layer = requirements_layer(r, torch171)
    got = {ln.text: (ln.outcome, ln.requirement) for ln in layer.lines}
    assert got == {"python=3.8": (LEFT_OUT, ""), "pytorch=1.7.1": (PROVIDED, ""), "cudatoolkit=11.0": (LEFT_OUT, ""),
                   "mkl": (LEFT_OUT, ""), "scipy=1.5": (KEPT, "scipy==1.5.*"), "py-opencv": (KEPT, "opencv-python"),
                   "libgcc-ng": (LEFT_OUT, ""), "einops==0.3.0": (KEPT, "einops==0.3.0")}
    assert "conda-only" in next(ln.why for ln in layer.lines if ln.text == "mkl")


def test_a_pin_that_would_replace_the_framework_is_one_refusal_line(repo, torch171):
    r = repo({"requirements.txt": "numpy\ntorch==1.9.0\ntorchvision==0.10.0\n"})
    line = requirements_refusal(requirements_layer(r, torch171))
    assert line == f"requirements.txt:2: 'torch==1.9.0' would replace the stack's torch 1.7.1 ({torch171.name}) (and 1 more)"


def test_the_package_own_dependencies_when_there_is_no_requirements_file(repo, torch171):
    r = repo({"pyproject.toml": '[project]\nname = "x"\ndependencies = ["torch>=1.7", "einops"]\n'})
    layer = requirements_layer(r, torch171)
    assert layer.source == "pyproject.toml" and layer.kept == ["einops"]


@pytest.mark.parametrize("req, outcome", [
    ("torch==0.3.0", PROVIDED), ("torch==0.3.0.post4", PROVIDED), ("pytorch==0.3.0", PROVIDED), ("torch>=0.3,<0.4", PROVIDED),
    ("torch==0.3.0.post3", REFUSED), ("torch!=0.3.0", REFUSED), ("torch!=0.3.0.post4", REFUSED), ("torch==0.3.1", REFUSED),
])
def test_a_pin_of_the_release_is_met_by_the_post_release_the_stack_installs(req, outcome):
    stack = resolve(load_matrix(), "torch-0.3.0")  # installs torch==0.3.0.post4, which pip's ==0.3.0 would refuse
    assert judge(req, stack)[0] == outcome


@pytest.mark.parametrize("req, outcome", [
    ("torch==0.2.0", PROVIDED), ("torch==0.2.0.post3", PROVIDED), ("torch>=0.2,<0.3", PROVIDED), ("torchvision==0.1.9", PROVIDED),
    ("torch==0.2.0.post2", REFUSED), ("torch==0.2.0.post4", REFUSED), ("torch!=0.2.0.post3", REFUSED),
    ("torchvision==0.2.0", REFUSED),
])
def test_a_torch_0_2_pin_is_met_by_the_0_2_0_post3_the_stack_installs(req, outcome):
    stack = resolve(load_matrix(), "torch-0.2.0")
    assert judge(req, stack)[0] == outcome


def test_a_2018_conda_file_on_its_torch_0_3_stack_installs_only_what_the_stack_lacks(repo):
    stack = resolve(load_matrix(), "torch-0.3.0-cuda8.0-py3.5")
    r = repo({"environment.yml": "dependencies:\n  - python=3.5\n  - pytorch=0.3.0\n  - torchvision=0.2.0\n  - cuda80\n"
                                 "  - scipy=1.0.0\n"})
    got = {ln.text: ln.outcome for ln in requirements_layer(r, stack).lines}
    assert got == {"python=3.5": LEFT_OUT, "pytorch=0.3.0": PROVIDED, "torchvision=0.2.0": PROVIDED, "cuda80": LEFT_OUT,
                   "scipy=1.0.0": KEPT}
    assert "CUDA build brings its own" in next(ln.why for ln in requirements_layer(r, stack).lines if ln.text == "cuda80")


@pytest.mark.parametrize("query, req, outcome", [
    # jaxlib's releases are its own: a pin names the jaxlib the stack installs, not the jax release
    ("jax-0.2.5-cuda11.0", "jaxlib==0.1.56+cuda110", PROVIDED), ("jax-0.2.5-cuda11.0", "jaxlib==0.1.56", PROVIDED),
    ("jax-0.2.5-cuda11.0", "jaxlib>=0.1.55", PROVIDED), ("jax-0.2.5-cuda11.0", "jaxlib", PROVIDED),
    ("jax-0.2.5-cuda11.0", "jax==0.2.5", PROVIDED),
    ("jax-0.2.5-cuda11.0", "jaxlib==0.1.55+cuda110", REFUSED), ("jax-0.2.5-cuda11.0", "jaxlib==0.1.56+cuda101", REFUSED),
    ("jax-0.2.5-cuda11.0", "jaxlib==0.2.5", REFUSED), ("jax-0.2.5-cuda11.0", "jax==0.1.56", REFUSED),
    ("jax-0.4.1", "jaxlib==0.4.1+cuda11.cudnn86", PROVIDED), ("jax-0.4.1", "jaxlib==0.4.2", REFUSED),
    ("jax-0.4.1", "jaxlib==0.4.1+cuda12.cudnn88", REFUSED),  # the major names the stack's CUDA 11.4 or not at all
])
def test_a_jaxlib_pin_is_judged_against_the_jaxlib_the_stack_installs(query, req, outcome):
    assert judge(req, resolve(load_matrix(), query))[0] == outcome
