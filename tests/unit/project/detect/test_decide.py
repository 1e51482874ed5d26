"""The precedence rules, each on the forms real repositories use, against the shipped matrix."""

from __future__ import annotations

import pytest
from packaging.version import Version

from envman.host import what_if
from envman.matrix.load import load_matrix
from envman.project.detect import detect
from envman.stack.resolve import resolve
from envman.stack.verdict import verdict


@pytest.fixture(scope="module")
def matrix():
    return load_matrix()


@pytest.fixture
def found(repo, matrix):
    def run(files, host=None):
        r = repo(files)
        return detect(r.root, matrix, host=host)

    return run


def used(d, kind=None):
    return [(s.where, s.fact.means()) for s in d.decision.evidence if s.used and (kind is None or s.fact.kind == kind)]


def aside(d):
    return {s.where: s.why for s in d.decision.evidence if not s.used}


def test_an_exact_pin_beats_a_range_and_prose_refines_a_range(found):
    d = found({"requirements.txt": "torch>=1.7\n", "README.md": "Tested with PyTorch 1.7.1.\n", "a.py": "import torch\n"})
    assert d.decision.stack.framework_version == "1.7.1"
    d = found({"requirements.txt": "torch==1.8.1\n", "setup.py": "setup(install_requires=['torch>=1.4'])\n",
               "README.md": "PyTorch 1.7.1\n"})
    assert d.decision.stack.framework_version == "1.8.1"
    assert "README.md:1" in aside(d) and "contradicts requirements.txt:1" in aside(d)["README.md:1"]


def test_ranges_alone_give_the_newest_release_in_them(found, matrix):
    d = found({"requirements.txt": "torch>=1.7,<1.9\n"})
    newest = max(b.version for b in matrix.builds if b.framework == "torch" and Version("1.7") <= b.version < Version("1.9"))
    assert d.decision.stack.framework_version == str(newest)


def test_a_stated_cuda_beats_the_default_variant(found, matrix):
    d = found({"environment.yml": "dependencies:\n  - pytorch=1.7.1\n  - cudatoolkit=10.1\n"})
    assert (d.decision.stack.framework_version, d.decision.stack.cuda) == ("1.7.1", "10.1")
    d = found({"requirements.txt": "torch==1.7.1\n"})
    assert d.decision.stack.name == resolve(matrix, "torch-1.7.1").name  # no CUDA stated: the default variant


def test_the_framework_the_code_imports_most_beats_a_tool_pinned_beside_it(found):
    d = found({"requirements.txt": "torch==1.7.1\ntensorflow==2.4.0  # FID\nonnxruntime==1.8.0\n",
               "train.py": "import torch\n", "model.py": "import torch.nn\n", "fid.py": "import tensorflow as tf\n"})
    assert d.decision.stack.framework == "torch"
    assert "a tool" in aside(d)["requirements.txt:2"] and "a tool" in aside(d)["requirements.txt:3"]


def test_without_code_a_gpu_framework_beats_a_cpu_only_one_and_onnxruntime_comes_last(found):
    d = found({"requirements.txt": "tensorflow-cpu==2.11.0\njax[cuda12]>=0.4.20\n"})
    assert d.decision.stack.framework == "jax" and d.decision.stack.cuda.startswith("12")
    d = found({"requirements.txt": "onnxruntime-gpu==1.16.0\ntorch==2.1.0\n"})
    assert d.decision.stack.framework == "torch"


def test_a_contradiction_is_a_conflict_the_stronger_statement_wins(found):
    d = found({"requirements.txt": "torch==1.9.0\n", "Dockerfile": "FROM pytorch/pytorch:1.10.0-cuda11.3-cudnn8-runtime\n",
               "a.py": "import torch\n"})
    assert d.decision.stack.framework_version == "1.9.0"
    assert d.decision.conflicts[0]["about"] == "torch release"
    assert "Dockerfile:1" in d.decision.conflicts[0]["set_aside"]
    assert any("Dockerfile:1" in a["why"] for a in d.decision.alternatives)


def test_a_release_the_matrix_lacks_is_unmet_never_replaced(found):
    # PyTorch published 0.1.10 (0.1.10.post2 wheels); the matrix starts at 0.1.12
    d = found({"requirements.txt": "torch==0.1.10\n"})
    assert d.decision is None
    assert "requirements.txt:1 pins torch ==0.1.10" in d.problem.what and "does not have" in d.problem.what
    assert d.problem.fix.startswith("nearest: torch-")


def test_an_unmet_cuda_pin_ends_detection_unmet_prose_is_set_aside(found, matrix):
    d = found({"environment.yml": "dependencies:\n  - pytorch=1.7.1\n  - cudatoolkit=12.1\n"})
    assert d.decision is None and "environment.yml:3 asks for CUDA 12.1" in d.problem.what and "1.7.1" in d.problem.what
    d = found({"requirements.txt": "torch==1.7.1\n", "README.md": "Tested with CUDA 12.1.\n"})
    assert d.decision.stack.name == resolve(matrix, "torch-1.7.1").name
    assert "have no CUDA 12.1 (a README is advice" in aside(d)["README.md:1"]


def test_python_at_the_grain_of_stacks_and_unmet_python_pins(found):
    d = found({"environment.yml": "dependencies:\n  - python=3.8.5\n  - pytorch=1.7.1\n"})
    assert d.decision.stack.python == "3.8"
    d = found({"environment.yml": "dependencies:\n  - python=3.4\n  - pytorch=1.7.1\n"})
    assert d.decision is None and "Python ==3.4.*" in d.problem.what and "has wheels for Python" in d.problem.what
    d = found({"requirements.txt": "torch==1.7.1\n", "README.md": "Python 3.4\n"})
    assert d.decision is not None and "README.md:1" in aside(d)
    d = found({"setup.py": "setup(python_requires='>=3.8', install_requires=['torch==1.7.1'])\n"})
    assert Version(d.decision.stack.python) >= Version("3.8")


@pytest.mark.parametrize("files, name", [
    ({"a.py": "import theano\n", "b.py": "import theano.tensor as T\n", "c.py": "import torch\n"}, "Theano"),
    ({"train.lua": "require 'torch'\n", "README.md": "A Torch7 implementation\n"}, "Lua Torch"),
    ({"net.py": "import caffe\n"}, "Caffe"),
    ({"a.py": "import mxnet as mx\n", "requirements.txt": "mxnet-cu101\n"}, "MXNet"),
    ({".python-version": "2.7.18\n", "requirements.txt": "torch==1.0.0\n"}, "Python 2"),
    ({"requirements.txt": "Theano==1.0.4\n"}, "Theano"),
    ({"a.py": "import mindspore as ms\n", "b.py": "from mindspore import nn\n", "requirements.txt": "numpy\n"}, "MindSpore"),
    ({"requirements.txt": "mindspore-gpu==1.8.1\n"}, "MindSpore"),
    ({"a.py": "import mlx.core as mx\n", "b.py": "import mlx.nn as nn\n", "convert.py": "import torch\n"}, "MLX"),
    # a tie between a framework no stack serves and one envman builds: the code is not the built one's
    ({"a.py": "import mlx.core as mx\n", "convert.py": "import torch\n"}, "MLX"),
    ({"a.py": "import jittor as jt\n"}, "Jittor"),
    ({"a.py": "import megengine\n"}, "MegEngine"),
    ({"a.py": "import oneflow as flow\n"}, "OneFlow"),
    ({"README.md": "Requires MindSpore 2.2 and Python 3.9\n"}, "MindSpore"),
])
def test_frameworks_no_stack_serves_get_one_line(found, files, name):
    d = found(files)
    assert d.decision is None and name in d.problem.what and "does not build" in d.problem.what


def test_a_few_conversion_scripts_of_a_framework_no_stack_serves_leave_the_built_one(found):
    d = found({"a.py": "import torch\n", "b.py": "import torch.nn as nn\n", "to_mlx.py": "import mlx.core as mx\n"})
    assert d.decision is not None and d.decision.stack.framework == "torch"


def test_a_tpu_install_of_jax_is_no_cpu_build(found):
    d = found({"README.md": 'pip install "jax[tpu]>=0.2.16" -f https://storage.googleapis.com/jax-releases/libtpu_releases.html\n',
               "a.py": "import jax\n"})
    assert d.decision is not None and d.decision.stack.framework == "jax" and d.decision.stack.cuda


def test_a_repository_that_names_nothing(found):
    d = found({"README.md": "Hello\n", "x.py": "import numpy\n"})
    assert d.decision is None and d.problem.what.startswith("nothing in the repository names or imports a framework")


# --------------------------------------------------------------------------- the host decides too


def runs(stack, host):
    g = host.gpus[0]
    return verdict(stack, host.driver, g.compute_cap).runs


def test_a_pinned_release_with_no_build_for_this_gpu_names_the_pin_to_relax(found):
    h100 = what_if("580.95.05", "9.0", "NVIDIA H100")
    d = found({"requirements.txt": "torch==1.7.1\n"}, host=h100)
    assert d.decision is None and "does not run here" in d.problem.what
    assert "relax requirements.txt:1 (torch ==1.7.1)" in d.problem.fix and "runs here" in d.problem.fix


def test_another_cuda_build_of_the_same_release_that_runs_here_is_taken(found, matrix):
    rtx5090 = what_if("570.86.10", "12.0", "RTX 5090")
    default = resolve(matrix, "torch-2.7.1")
    d = found({"requirements.txt": "torch==2.7.1\n"}, host=rtx5090)
    assert d.decision.stack.framework_version == "2.7.1" and runs(d.decision.stack, rtx5090)
    if not runs(default, rtx5090):  # the default variant has no sm_120: the note says why another was taken
        assert d.decision.host.first_choice == default.name and d.decision.notes


def test_ranges_and_no_pins_take_the_newest_stack_that_runs_here(found, matrix):
    old_driver = what_if("418.39", "7.5", "Tesla T4")
    for files in ({"requirements.txt": "torch>=1.4\n"}, {"a.py": "import torch\n"}):
        d = found(files, host=old_driver)
        st = d.decision.stack
        assert runs(st, old_driver)
        newer = [b for b in matrix.builds if b.framework == "torch" and b.version > Version(st.framework_version) and b.cuda]
        assert all(not runs(resolve(matrix, b.name), old_driver) for b in newer if b.cuda.major <= 10)


def test_the_cuda_of_a_line_set_aside_goes_with_it(found, matrix):
    d = found({"requirements.txt": "torch==1.7.1\nmxnet-cu92==1.5.0\ntorch==1.10.0+cu113; extra == 'never'\n",
               "a.py": "import torch\n"})
    assert d.decision.stack.cuda != "9.2"
    assert aside(d)["requirements.txt:2"]


def test_a_readme_naming_a_release_the_matrix_lacks_is_set_aside_not_obeyed(found):
    d = found({"docs/installation.md": '```\npip install "jax[cpu]==0.1.0"\n```\n', "a.py": "import jax\n"})
    assert d.decision is not None and d.decision.stack.framework == "jax"
    assert "does not have" in aside(d)["docs/installation.md:2"]


def test_a_readme_cuda_floor_prefers_the_builds_at_or_above_it(found, matrix):
    d = found({"requirements.txt": "torch==1.10.2\n", "README.md": "Requires CUDA 11.3+\n"})
    assert d.decision.stack.cuda == "11.3"
    d = found({"requirements.txt": "torch==1.10.2\n", "README.md": "Requires CUDA 12.0 or later\n"})
    assert d.decision.stack.name == resolve(matrix, "torch-1.10.2").name and "README.md:1" in aside(d)


def test_a_readme_release_whose_builds_lack_the_pinned_cuda_gives_way_to_the_pins(found, matrix):
    d = found({"docs/install.md": '```\npip install "jax[cpu]==0.3.25"\n```\n',
               "requirements.txt": "nvidia-cublas-cu12>=12.1.3.1\n", "a.py": "import jax\n"})
    st = d.decision.stack
    assert st.framework == "jax" and st.cuda.startswith("12.")
    assert "a README is advice" in aside(d)["docs/install.md:2"]


def test_versions_of_thousands_of_digits_are_no_facts(found):
    big = "9" * 5000
    d = found({"requirements.txt": f"torch=={big}\ntorch==1.7.1\n", "README.md": f"PyTorch 1.{big}\n",
               "environment.yml": f"dependencies:\n  - python=3.{big}\n  - cudatoolkit=1{big}\n",
               "setup.py": f"setup(python_requires='>=3.{big}')\n", ".python-version": f"3.{big}\n",
               "Dockerfile": f"FROM pytorch/pytorch:1.{big}-cuda11.0\n"})
    assert d.decision.stack.framework_version == "1.7.1"


# --------------------------------------------------------------------------- hostile and odd forms (a red-team pass)


@pytest.mark.parametrize("files", [
    {"README.md": "PyTorch version" + " " * 20000 + "\n" + "cuda" + " \t" * 20000 + "\n"},
    {"requirements.txt": "".join(f"pkg{i:07d}\n" for i in range(30000)) + "torch==1.7.1\n"},
    {"setup.py": "a = [" + ", ".join('"x"' for _ in range(10000)) + "]\n"
                 "setup(install_requires=" + "(" * 7 + "a" + "+a)" * 7 + ")\n"},
    {"one.py": "x=1;" + "print " * 12000 + "\n", "two.py": "import " * 12000 + "\n"},
    # thousands of statements of one release: each was weighed against every one taken before it
    {"README.md": "pip install torch==1.9.0\n" * 20000},
    {"README.md": "```\n" + "torch==1.9.0\n" * 20000 + "```\n"},
    {"requirements.txt": "torch>=1.0\n" * 10000 + "torch<3\n" * 10000},
    # thousands of CUDA statements, each on a line of its own framework pin: each was looked up
    # among every statement decided and weighed against every CUDA taken before
    {"README.md": "pip install torch==1.10.0+cu113\n" * 10000 + "CUDA 11.3\n" * 10000},
])
def test_files_built_to_be_slow_cost_linear_time(found, files):
    import time

    t = time.process_time()
    found({**files, "a.py": "import torch\n"})
    assert time.process_time() - t < 5  # seconds of CPU: a quadratic reading took minutes


@pytest.mark.parametrize("files", [
    {"pyproject.toml": "[project]\ndependencies = 5\n"},
    {"pyproject.toml": '[project]\ndependencies = "torch numpy"\n'},
    {"pyproject.toml": '[project]\ndependencies = {torch = "1"}\n'},
    {"Pipfile": "[packages]\ntorch = {version = 5}\n"},
    {"Pipfile": '[packages]\ntorch = {version = ["==1.7.1"]}\n'},
    {"pyproject.toml": '[tool.poetry.dependencies]\nfoo = "~1.' + "9" * 5000 + '"\ntorch = "1.13.1"\n'},
])
def test_manifests_with_values_of_the_wrong_type_give_nothing_never_an_error(found, files):
    d = found({**files, "a.py": "import torch\n"})
    assert d.decision is not None
    assert all(len(r) > 1 for r in d.layer.kept)  # never a string read letter by letter


def test_markers_that_never_hold_on_linux_drop_their_line(found):
    d = found({"requirements.txt": "torch==1.4.0; sys_platform == 'darwin'\ntorch==1.8.1+cu111; sys_platform == 'linux'\n"
                                   "torch==1.2.0; python_version < '3'\n"})
    assert (d.decision.stack.framework_version, d.decision.stack.cuda) == ("1.8.1", "11.1")
    assert not d.layer.refused and {ln.outcome for ln in d.layer.lines if "darwin" in ln.text} == {"left out"}


def test_a_prerelease_pin_stands_for_its_release(found):
    d = found({"requirements.txt": "tensorflow-gpu==2.3.0rc0\n"})
    assert d.decision.stack.framework_version.startswith("2.3.")


def test_a_requirements_file_in_utf16_is_read_by_its_bom(found):
    d = found({"requirements.txt": "torch==1.7.1\r\nnumpy\r\n".encode("utf-16")})
    assert d.decision.stack.framework_version == "1.7.1"


def test_a_tools_cuda_goes_with_it(found):
    d = found({"requirements.txt": "torch==1.13.1\njaxlib==0.4.7+cuda12.cudnn88\n", "a.py": "import torch\n"})
    assert d.decision.stack.framework_version == "1.13.1" and d.decision.stack.cuda.startswith("11.")


def test_pytorch_cuda_in_a_jax_repository_is_torchs_cuda_not_jaxs(found):
    d = found({"environment.yml": "dependencies:\n  - python=3.10\n  - pytorch=2.3.0\n  - pytorch-cuda=12.1\n"
                                  "  - pip:\n    - jax[cuda12]==0.4.28\n",
               "a.py": "import jax\n", "b.py": "import jax.numpy as jnp\n", "convert.py": "import torch\n"})
    st = d.decision.stack
    assert (st.framework, st.framework_version, st.cuda.split(".")[0]) == ("jax", "0.4.28", "12")
    assert "a tool here" in aside(d)["environment.yml:4"]


def _two_implementations(torch_files: int, tf_files: int) -> dict[str, str]:
    files = {
        "README.md": "Code in both PyTorch (pytorch/) and TensorFlow (tf/).\n",
        "pytorch/README.md": "## Prerequisite\n\n- Pytorch 0.4: `conda install pytorch torchvision -c pytorch`\n",
        "tf/README.md": "## Prerequisite\n\n- Python 2.7\n- Tensorflow 1.12.0\n",
        "tf/requirements.txt": "tensorflow-gpu==1.12.0\n",
    }
    files.update({f"pytorch/m{i}.py": "import torch\n" for i in range(torch_files)})
    files.update({f"tf/m{i}.py": "import tensorflow as tf\n" for i in range(tf_files)})
    return files


def test_each_implementation_folder_speaks_for_its_own_framework(found):
    d = found(_two_implementations(torch_files=3, tf_files=2))
    assert (d.decision.stack.framework, d.decision.stack.framework_version) == ("torch", "0.4.1")
    assert ("pytorch/README.md:3", "torch ==0.4.*") in used(d)
    why = aside(d)
    for where in ("tf/README.md:3", "tf/README.md:4", "tf/requirements.txt:1"):
        assert why[where] == "speaks for tf/, whose code imports tensorflow: the framework is torch"
    assert d.decision.notes == ("tf/ holds a tensorflow implementation: envman project detect tf reads it alone",)


def test_the_folder_with_more_code_decides_and_the_other_folder_is_set_aside(found):
    d = found(_two_implementations(torch_files=2, tf_files=3))
    assert (d.decision.stack.framework, d.decision.stack.framework_version) == ("tensorflow", "1.12.0")
    assert aside(d)["pytorch/README.md:3"].startswith("speaks for pytorch/, whose code imports torch")
    assert d.decision.notes == ("pytorch/ holds a torch implementation: envman project detect pytorch reads it alone",)


def test_a_folder_whose_code_imports_two_frameworks_speaks_for_the_repository(found):
    files = _two_implementations(torch_files=3, tf_files=0)
    files["tf/m0.py"] = "import tensorflow as tf\nimport torch\n"
    d = found(files)
    assert aside(d)["tf/requirements.txt:1"].startswith("tensorflow serves a tool here: the framework is torch")
    assert d.decision.notes == ()


def test_a_cuda_11_minor_no_build_has_takes_a_build_of_its_major(found):
    d = found({"environment.yml": "dependencies:\n  - python=3.8\n  - pytorch=1.11.0\n  - cudatoolkit=11.1\n"})
    st = d.decision.stack
    assert (st.framework_version, st.cuda.split(".")[0]) == ("1.11.0", "11") and st.cuda != "11.1"
    assert "minor-version compatibility" in next(s.why for s in d.decision.evidence if s.where == "environment.yml:4")
    # before CUDA 11 a minor is not interchangeable: the pin stays unmet
    d = found({"environment.yml": "dependencies:\n  - pytorch=1.0.0\n  - cudatoolkit=10.1\n"})
    assert d.decision is None and "asks for CUDA 10.1" in d.problem.what


def test_each_cuda_11_pin_of_the_same_minor_takes_its_major_in_turn(found):
    """``cudatoolkit=11.1`` and ``cuda-nvcc=11.1`` on two lines: each, unmet, is read as CUDA 11 in
    turn (not the first twice, which ended detection asking for the 'CUDA 11' it had become)."""
    d = found({"environment.yml": "dependencies:\n  - python=3.8\n  - pytorch=1.11.0\n  - cudatoolkit=11.1\n  - cuda-nvcc=11.1\n"})
    assert (d.decision.stack.framework_version, d.decision.stack.cuda.split(".")[0]) == ("1.11.0", "11")
    why = {s.where: s.why for s in d.decision.evidence if s.used}
    assert all("minor-version compatibility" in why[w] for w in ("environment.yml:4", "environment.yml:5"))
    # before CUDA 11 both stay unmet, and the line named is a pin as written
    d = found({"environment.yml": "dependencies:\n  - pytorch=1.0.0\n  - cudatoolkit=10.1\n  - cuda-nvcc=10.1\n"})
    assert d.decision is None and "asks for CUDA 10.1 (- cudatoolkit=10.1)" in d.problem.what


def test_a_base_images_python_gives_way_to_the_release_a_requirements_file_pins(found):
    d = found({"requirements.txt": "tensorflow==2.12.1\n", "Dockerfile": "FROM python:3.7\nRUN pip install -r requirements.txt\n"})
    assert d.decision.stack.framework_version == "2.12.1" and d.decision.stack.python != "3.7"
    assert aside(d)["Dockerfile:1"].startswith("gives way to the release pin")
    assert [c["about"] for c in d.decision.conflicts] == ["Python"]
    # at equal weight (one conda file pins both) the contradiction is the repository's: no stack
    d = found({"environment.yml": "dependencies:\n  - python=3.7\n  - pip:\n    - tensorflow==2.12.1\n"})
    assert d.decision is None


def _routes(conda_tf: str) -> dict[str, str]:
    return {"requirements-gpu.txt": "tensorflow-gpu==2.12.0\n", "train.py": "import tensorflow as tf\n",
            "conda-gpu.yml": "dependencies:\n  - python==3.7\n  - cudatoolkit==10.1.243\n  - pip\n"
                             + (f"  - pip:\n    - tensorflow-gpu=={conda_tf}\n" if conda_tf else "")}


def test_the_cuda_and_python_of_another_install_route_go_with_its_release(found):
    """``conda-gpu.yml`` (TF 2.1, CUDA 10.1, Python 3.7) beside ``requirements-gpu.txt`` (TF 2.12): the
    conda file's release (a pre-release, read as ``==2.1.*``, weighs less than the exact pin) is set
    aside, and its CUDA and Python go with it instead of ending detection."""
    d = found(_routes("2.1.0rc1"))
    st = d.decision.stack
    assert (st.framework_version, st.cuda) == ("2.12.0", "11.8") and st.python != "3.7"
    assert aside(d)["conda-gpu.yml:3"].startswith("gives way to the release pin")
    assert {c["about"] for c in d.decision.conflicts} >= {"CUDA", "Python", "tensorflow release"}
    # where the conda file's release is the one taken, its CUDA and Python are taken with it
    st = found(_routes("2.1.0")).decision.stack
    assert (st.framework_version, st.cuda, st.python) == ("2.1.0", "10.1", "3.7")


@pytest.mark.parametrize("conda_tf", ["2.12.0", ""])
def test_a_cuda_pin_beside_the_release_taken_or_beside_no_release_still_ends_detection(found, conda_tf):
    # the same route (its release is the one taken), or a file that pins no release: its CUDA binds
    d = found(_routes(conda_tf))
    assert d.decision is None and "asks for CUDA 10.1" in d.problem.what


def _envs(readme: str) -> dict[str, str]:
    env = "dependencies:\n  - python=3.11\n  - pytorch={}\n  - pytorch-cuda={}\n"
    return {"environment_pt220cu121.yaml": env.format("2.2.0", "12.1"), "environment_pt240cu124.yaml": env.format("2.4.0", "12.4"),
            "README.md": readme, "a.py": "import torch\n"}


@pytest.mark.parametrize("readme, want", [
    ("```\nconda env create -n x -f environment_pt240cu124.yaml\n```\n", ("2.4.0", "12.4")),
    ("```\nconda env create -n x -f environment_pt220cu121.yaml\n```\n", ("2.2.0", "12.1")),
    ("Install one of the environment files.\n", ("2.2.0", "12.1")),  # none named: file order, as before
    ("```\nconda env create -f environment_pt999.yaml\n```\n", ("2.2.0", "12.1")),  # a file that is not there
])
def test_among_install_files_of_equal_weight_the_one_the_readme_installs_wins(found, readme, want):
    st = found(_envs(readme)).decision.stack
    assert (st.framework_version, st.cuda) == want


def test_a_file_the_readme_names_does_not_outweigh_a_stronger_pin(found):
    files = {"requirements.txt": "torch>=2.0\n", "environment.yml": "dependencies:\n  - pytorch=2.2.0\n",
             "README.md": "```\npip install -r requirements.txt\n```\n", "a.py": "import torch\n"}
    assert found(files).decision.stack.framework_version == "2.2.0"


def test_a_dockerfile_that_installs_no_framework_gives_way_to_the_one_that_names_it(found):
    d = found({"Dockerfile.train": "FROM tensorflow/tensorflow:1.15.4-gpu-py3\n",
               "Dockerfile.build": "FROM nvidia/cuda:10.1-cudnn7-devel-ubuntu18.04\nRUN apt-get update\n",
               "train.py": "import tensorflow as tf\n"})
    assert d.decision.stack.name.startswith("tensorflow-1.15.4-cuda10.0")
    assert aside(d)["Dockerfile.build:1"].startswith("gives way to the release pin")


def test_an_install_commands_cuda_chooses_the_release_when_none_is_named_a_sentence_does_not(found, matrix):
    d = found({"README.md": "- `conda install -y pytorch torchvision cudatoolkit=10.0 -c pytorch`\n", "a.py": "import torch\n"})
    st = d.decision.stack
    newest_cu100 = max((b.version for b in matrix.builds if b.framework == "torch" and b.cuda is not None
                        and (b.cuda.major, b.cuda.minor) == (10, 0)))
    assert (st.cuda, Version(st.framework_version)) == ("10.0", newest_cu100)
    d = found({"README.md": "| CUDA 10.0 | supported |\n", "a.py": "import torch\n"})
    assert Version(d.decision.stack.framework_version) > newest_cu100


def test_tensorflow_1_code_with_an_open_floor_gets_the_last_tensorflow_1(found, matrix):
    d = found({"requirements.txt": "tensorflow-gpu>=1.6.0\n",
               "model.py": "import tensorflow as tf\ncell = tf.contrib.rnn.LSTMCell(3)\n"})
    last_1 = max(b.version for b in matrix.builds if b.framework == "tensorflow" and b.version.major == 1)
    assert Version(d.decision.stack.framework_version) == last_1
    # a pin of TensorFlow 2 beats what the code suggests: the pin is kept, the cap listed as a conflict
    d = found({"requirements.txt": "tensorflow==2.4.1\n", "model.py": "import tensorflow as tf\ntf.Session()\n"})
    assert d.decision.stack.framework_version == "2.4.1" and "model.py" in aside(d)


def test_pins_two_folders_down_are_read_vendored_code_is_not(found):
    d = found({"src/python/requirements.txt": "torch>=1.11.0,<2\n", "src/python/train.py": "import torch\n",
               "third_party/lib/requirements.txt": "torch==2.4.0\n"})
    assert d.decision.stack.framework_version.startswith("1.")
    assert "third_party/lib/requirements.txt:1" not in {s.where for s in d.decision.evidence}


@pytest.mark.parametrize("pin, release", [("0.8.0", "1.7.0"), ("0.8.1", "1.7.0"), ("0.8.2", "1.7.1")])
def test_a_companion_patch_the_rows_do_not_install_goes_with_its_nearest_earlier_patch(found, pin, release):
    d = found({"requirements.txt": f"torchvision=={pin}\n", "a.py": "import torch\n"})
    assert d.decision.stack.framework_version == release


def test_a_companion_minor_no_row_installs_is_set_aside_with_the_reason(found):
    # torchvision 0.1.7 (January 2017) came with torch 0.1.6-0.1.10: no row installs it
    d = found({"requirements.txt": "torchvision==0.1.7\n", "a.py": "import torch\n"})
    assert aside(d)["requirements.txt:1"] == "the matrix has no torch release that torchvision==0.1.7 fits"
    # 0.1.9 is the one the torch 0.2.0 row installs: that row is taken
    d = found({"requirements.txt": "torchvision==0.1.9\n", "a.py": "import torch\n"})
    assert d.decision.stack.name == "torch-0.2.0-cuda8.0-py3.5" and "requirements.txt:1" not in aside(d)


# --- the unmet pin's line, whole, on a hand-written matrix -----------------------------------------


@pytest.fixture
def releases(mini):
    """The small matrix with torch releases 1.0.0, 1.0.1, 1.2.0, 1.4.0 (a CPU and a GPU build) and
    2.4.1 (a CPU build and two GPU builds, CUDA 12.4 the default)."""
    from dataclasses import replace

    one = next(b for b in mini.builds if b.name == "torch-1.0.1-cuda10.0")
    cpu = next(b for b in mini.builds if b.name == "torch-2.4.1-cpu")
    # 1.4.0's CPU build first, and no default among its builds: a release is still named by a GPU build
    more = (replace(cpu, version=Version("1.4.0"), packages=("torch==1.4.0",)),) + tuple(
        replace(one, version=Version(v), packages=(f"torch=={v}",)) for v in ("1.2.0", "1.4.0"))
    return replace(mini, builds=mini.builds + more)


FIX_TAIL = "; give another with --stack, or add the release with a matrix row (envman matrix update, or --matrix FILE)"


@pytest.mark.parametrize("pin, nearest", [
    # at equal distance the newer first, then the next nearest; three at most
    ("1.3.0", "torch-1.4.0-cuda10.0, torch-1.2.0-cuda10.0, torch-1.0.1-cuda10.0"),
    ("1.0.2", "torch-1.0.1-cuda10.0, torch-1.0.0-cuda10.0, torch-1.2.0-cuda10.0"),
    # a release with GPU builds is named by its default GPU build
    ("3.0.0", "torch-2.4.1-cuda12.4, torch-1.4.0-cuda10.0, torch-1.2.0-cuda10.0"),
])
def test_an_unmet_release_names_the_matrix_span_and_the_three_nearest_releases(repo, releases, pin, nearest):
    d = detect(repo({"requirements.txt": f"torch=={pin}\n"}).root, releases)
    assert d.decision is None
    assert d.problem.what == (f"requirements.txt:1 pins torch =={pin} (torch=={pin}), a release the matrix does not have "
                              "(its torch releases: 1.0.0 to 2.4.1)")
    assert d.problem.fix == f"nearest: {nearest}" + FIX_TAIL


def test_an_unmet_release_of_a_framework_the_matrix_lacks_says_none(repo, mini):
    d = detect(repo({"requirements.txt": "jax==0.4.30\n"}).root, mini)
    assert d.problem.what == ("requirements.txt:1 pins jax ==0.4.30 (jax==0.4.30), a release the matrix does not have "
                              "(its jax releases: none)")
    assert d.problem.fix == "nearest: none" + FIX_TAIL


# --- which CUDA statements can both hold: a floor (CUDA 11.1+) against a floor, a release, a major, a CPU build

CPU_INDEX = "--extra-index-url https://download.pytorch.org/whl/cpu\n"


@pytest.mark.parametrize("files, weaker, agrees", [
    ({"README.md": "Requires CUDA 11.3 or higher.\n", "docs/install.md": "CUDA 10.2 or newer works.\n"}, "docs/install.md:1", True),
    ({"README.md": "Requires CUDA 11.1 or higher.\nTested with CUDA 11.3.\n"}, "README.md:2", True),
    ({"README.md": "Requires CUDA 11.3 or higher.\nTested with CUDA 11.3.\n"}, "README.md:2", True),  # at the floor
    ({"README.md": "Requires CUDA 11.4 or higher.\nTested with CUDA 11.3.\n"}, "README.md:2", False),  # just below it
    ({"README.md": "Requires CUDA 11.1 or higher.\nTested with CUDA 10.2.\n"}, "README.md:2", False),
    ({"requirements.txt": "torch==1.10.0+cu113\n", "README.md": "Requires CUDA 11.3 or higher.\n"}, "README.md:1", True),
    ({"requirements.txt": "torch==1.10.0+cu113\n", "README.md": "Requires CUDA 11.4 or higher.\n"}, "README.md:1", False),
    ({"requirements.txt": "torch==1.10.0+cu113\n", "README.md": "Requires CUDA 11 or higher.\n"}, "README.md:1", True),
    ({"requirements.txt": "torch==1.10.0+cu113\n", "README.md": "Requires CUDA 12 or higher.\n"}, "README.md:1", False),
    # a major (cupy-cuda11x: CUDA 11) holds a floor inside it, not one of another major
    ({"requirements.txt": "cupy-cuda11x\n", "README.md": "Requires CUDA 11.4 or higher.\n"}, "README.md:1", True),
    ({"requirements.txt": "cupy-cuda11x\n", "README.md": "Requires CUDA 12.1 or higher.\n"}, "README.md:1", False),
    ({"requirements.txt": "cupy-cuda11x\n", "README.md": "Tested with CUDA 11.3.\n"}, "README.md:1", True),
    ({"requirements.txt": "cupy-cuda11x\n", "README.md": "Tested with CUDA 12.1.\n"}, "README.md:1", False),
    ({"requirements.txt": "torch==1.10.0+cu113\n", "README.md": "Tested with CUDA 11.\n"}, "README.md:1", True),
    # a CPU build's index holds no CUDA at all, floor or release
    ({"requirements.txt": CPU_INDEX, "README.md": "Requires CUDA 11.1 or higher.\n"}, "README.md:1", False),
    ({"requirements.txt": CPU_INDEX, "README.md": "Tested with CUDA 11.3.\n"}, "README.md:1", False),
])
def test_cuda_statements_agree_by_floor_release_and_major(found, files, weaker, agrees):
    files = {**files, "a.py": "import torch\n"}
    files["requirements.txt"] = files.get("requirements.txt", "") + "torch==1.10.0\n" * ("torch==" not in files.get("requirements.txt", ""))
    d = found(files)
    cuda = {s.where: s for s in d.decision.evidence if s.fact.kind == "cuda"}
    conflicts = [c for c in d.decision.conflicts if c["about"] == "CUDA"]
    if agrees:
        assert conflicts == [] and not cuda[weaker].why.startswith("contradicts"), cuda[weaker].why
    else:
        assert [c["set_aside"].split(" ")[0] for c in conflicts] == [weaker]
        assert cuda[weaker].used is False and cuda[weaker].why.startswith("contradicts ")


def test_a_readme_release_that_gives_way_leaves_each_other_statement_decided_once(found):
    """The README's 1.8.0 has no CUDA 12 build: it gives way to the pins, and everything decided
    against it is decided again, so each conflict is listed once and each reason is the last one."""
    d = found({"requirements.txt": "torch>=1.7\n", "Dockerfile": "FROM nvidia/cuda:12.1.1-cudnn8-devel-ubuntu22.04\n",
               "README.md": "Tested with PyTorch 1.8.0.\nIt also works with PyTorch 1.6.0.\nRequires Python 3.6.\n",
               "docs/setup.md": "Tested with CUDA 10.2.\n", "a.py": "import torch\n"})
    assert d.decision.stack.cuda.startswith("12.") and Version(d.decision.stack.framework_version) >= Version("2")
    assert [(c["about"], c["taken"], c["set_aside"]) for c in d.decision.conflicts] == [
        ("torch release", "requirements.txt:1 torch >=1.7", "README.md:2 torch ==1.6.0"),
        ("CUDA", "Dockerfile:1 CUDA 12.1", "docs/setup.md:1 CUDA 10.2"),
    ]
    assert aside(d) == {
        "README.md:1": "names a release whose builds lack the CUDA or Python the pins ask for (a README is advice)",
        "README.md:2": "contradicts requirements.txt:1 (torch >=1.7), which weighs more",
        "README.md:3": "no torch build the pins allow has wheels for Python ==3.6.* on a base image that gives it",
        "docs/setup.md:1": "contradicts Dockerfile:1 (CUDA 12.1), which weighs more",
    }


def test_the_json_of_a_decision_on_a_gpu_host_carries_the_host_verdict(found, matrix):
    rtx5090 = what_if("570.86.10", "12.0", "RTX 5090")
    d = found({"requirements.txt": "torch==2.7.1\n"}, host=rtx5090)
    st = d.decision.stack
    v = verdict(st, rtx5090.driver, rtx5090.gpus[0].compute_cap)
    default = resolve(matrix, "torch-2.7.1")
    assert d.to_json()["host"] == {
        "summary": rtx5090.summary(), "verdict": v.verdict, "runs": True, "reasons": list(v.reasons),
        "first_choice": None if default.name == st.name else default.name,
    }
    assert found({"requirements.txt": "torch==2.7.1\n"}).to_json()["host"] is None  # no GPU known: no judgement


@pytest.mark.parametrize("spec, grain", [
    ("==3.8.5", "==3.8.*"), ("===3.8.5", "==3.8.*"), ("~=3.8.1", "==3.8.*"), ("== 3.8.5", "==3.8.*"),
    (">=3.8.1", ">=3.8"), (">3.8.0", ">=3.8"), (">= 3.10.2", ">=3.10"),
    ("<3.11.0", "<3.11"), ("<3.11.2", "<3.12"), ("<=3.11.0", "<3.12"), ("<=3.9.9", "<3.10"),
    ("!=3.9.0", ""), (">=3.8.1,!=3.9.0,<3.11.0", ">=3.8,<3.11"),
    # already at the grain, or not a release: kept as written
    ("==3.8", "==3.8"), (">=3.8", ">=3.8"), ("==3.8.*", "==3.8.*"), ("<4", "<4"), ("", ""),
])
def test_a_python_pin_is_read_at_the_grain_of_stacks(spec, grain):
    from envman.project.detect.decide import python_minor

    assert python_minor(spec) == grain


RELAX = "no stack within the repository's pins does; relax requirements.txt:1 "


@pytest.mark.parametrize("files, driver, fix", [
    # no build of the pinned release runs on a 418 driver: the newest older release that does is named
    ({"requirements.txt": "torch==2.4.1\n"}, "418.39", RELAX + "(torch ==2.4.1): torch-1.0.1-cuda10.0 runs here"),
    ({"requirements.txt": "torch>=2\n"}, "418.39", RELAX + "(torch >=2): torch-1.0.1-cuda10.0 runs here"),
    # the release has another CUDA build that runs: the CUDA pin is the one to relax
    ({"requirements.txt": "torch==2.4.1+cu124\n"}, "470.57.02", RELAX + "(CUDA 12.4): torch-2.4.1-cuda11.8 runs here"),
    # nothing in the matrix runs on the driver
    ({"a.py": "import torch\n"}, "300.1", "no torch stack in the matrix runs on this GPU and driver; upgrade the driver"),
])
def test_when_no_stack_within_the_pins_runs_here_the_pin_to_relax_and_the_nearest_that_runs_are_named(repo, mini, files, driver, fix):
    host = what_if(driver, "7.5", "Tesla T4")
    d = detect(repo(files).root, mini, host=host)
    first = resolve(mini, "torch-2.4.1-cuda12.4-py3.10")
    assert d.decision is None
    assert d.problem.what == (f"{first.name} does not run here ({host.summary()}): "
                              f"{verdict(first, host.driver, '7.5').reasons[0]}")
    assert d.problem.fix == fix


def test_a_release_with_another_cuda_build_that_runs_here_is_taken_with_a_note(repo, mini):
    host = what_if("470.57.02", "7.5", "Tesla T4")
    d = detect(repo({"requirements.txt": "torch==2.4.1\n"}).root, mini, host=host)
    assert d.decision.stack.name.startswith("torch-2.4.1-cuda11.8")
    assert d.decision.host.first_choice.startswith("torch-2.4.1-cuda12.4")


def test_a_base_image_s_cuda_binds_its_major_for_wheels_with_their_own_cuda_and_its_release_for_system_cuda(found):
    """jax[cuda12] wheels bring CUDA 12 libraries: a 12.6 base gives only the driver, so a build for
    12.3 runs on it; TensorFlow 2.4 takes CUDA from the base image: a 11.2 base is not its 11.0, and
    is taken as CUDA 11 by minor-version compatibility (said in its reason); a 10.2 base gives way to
    the requirements pin, which weighs more, as a conflict."""
    d = found({"requirements.txt": "jax[cuda12]==0.4.30\n", "Dockerfile": "FROM nvidia/cuda:12.6.0-base-ubuntu22.04\n",
               "a.py": "import jax\n"})
    assert d.decision.stack.cuda.startswith("12.") and d.decision.conflicts == ()
    assert "Dockerfile:1" not in aside(d)
    d = found({"requirements.txt": "tensorflow==2.4.1\n", "Dockerfile": "FROM nvidia/cuda:11.2.2-cudnn8-runtime-ubuntu20.04\n",
               "a.py": "import tensorflow\n"})
    assert d.decision.stack.name.startswith("tensorflow-2.4.1-cuda11.0")
    assert "minor-version compatibility" in next(s.why for s in d.decision.evidence if s.where == "Dockerfile:1")
    d = found({"requirements.txt": "tensorflow==2.4.1\n", "Dockerfile": "FROM nvidia/cuda:10.2-cudnn8-runtime-ubuntu18.04\n",
               "a.py": "import tensorflow\n"})
    assert d.decision.stack.name.startswith("tensorflow-2.4.1-cuda11.0")  # the requirements pin weighs more
    assert aside(d)["Dockerfile:1"].startswith("gives way to the release pin")
    assert [c["about"] for c in d.decision.conflicts] == ["CUDA"]
    d = found({"requirements.txt": "tensorflow==2.4.1\n", "Dockerfile": "FROM nvidia/cuda:11.0.3-cudnn8-runtime-ubuntu20.04\n",
               "a.py": "import tensorflow\n"})
    assert d.decision.stack.name.startswith("tensorflow-2.4.1-cuda11.0")


@pytest.mark.parametrize("requires, python", [
    (">=3.8", "3.10"),  # the resolver's own choice for the build (3.10) when the range allows it
    (">=3.11", "3.11"), ("<3.10", "3.9"),  # else the allowed Python nearest to it, not the newest
    (">=3.8,!=3.10.*", "3.11"),  # at equal distance the newer
    ("==3.12.*", "3.12"),
])
def test_a_python_range_takes_the_resolver_s_python_or_the_nearest_allowed(repo, mini, requires, python):
    assert resolve(mini, "torch-2.4.1-cuda12.4").python == "3.10"
    d = detect(repo({"requirements.txt": "torch==2.4.1\n",
                     "pyproject.toml": f'[project]\nname = "x"\nrequires-python = "{requires}"\n'}).root, mini)
    assert d.decision.stack.name == f"torch-2.4.1-cuda12.4-py{python}"


def test_a_line_set_aside_against_a_readme_release_that_gives_way_is_taken_again_whole(found):
    """README line 2 first lost to line 1 (its CUDA with it, as on a line set aside); line 1's
    release has no CUDA 12 build and gives way, so line 2, its release and its CUDA, is taken."""
    d = found({"requirements.txt": "torch>=1.7\n", "Dockerfile": "FROM nvidia/cuda:12.1.1-cudnn8-devel-ubuntu22.04\n",
               "README.md": "Tested with PyTorch 1.8.0 and CUDA 10.2.\nAlso tested with PyTorch 2.1.0 and CUDA 12.1.\n",
               "a.py": "import torch\n"})
    assert d.decision.stack.name.startswith("torch-2.1.0-cuda12.1") and d.decision.conflicts == ()
    assert ("README.md:2", "torch ==2.1.0") in used(d) and ("README.md:2", "CUDA 12.1") in used(d)
    reasons = sorted(s.why for s in d.decision.evidence if not s.used and s.where == "README.md:1")
    assert reasons == ["names a release whose builds lack the CUDA or Python the pins ask for (a README is advice)",
                       "on a line set aside"]


@pytest.mark.parametrize("caps, runs", [
    (("9.0",), True), (("3.5",), False),
    (("9.0", "3.5"), False), (("3.5", "9.0"), False),  # the stack must run on every GPU, in any order
    ((None, "3.5"), False), ((None, "9.0"), True), (("9.0", None), True),  # an unknown GPU is passed over, not the end
])
def test_a_stack_is_judged_on_every_gpu_of_the_host(repo, mini, caps, runs):
    from envman.host import WHAT_IF, HostFacts, HostGpu

    host = HostFacts(WHAT_IF, "550.54.15", None, tuple(HostGpu(i, f"gpu{i}", None, c, None) for i, c in enumerate(caps)),
                     "test host")
    d = detect(repo({"requirements.txt": "torch==2.4.1\n"}).root, mini, host=host)
    if runs:
        assert d.decision.stack.name == "torch-2.4.1-cuda12.4-py3.10" and d.decision.host.verdict == "ok"
    else:
        assert d.decision is None and "no kernel image for sm_35" in d.problem.what


@pytest.mark.parametrize("tag, release, python, cuda", [
    # NVIDIA's own Megatron-LM README: 23.04-py3 is PyTorch 2.1.0a0+fe05266f, CUDA 12.1.0, Python 3.8
    ("23.04-py3", "2.1", "3.8", "12."),
    # 23.05 is PyTorch 2.0.0 on CUDA 12.1.1, but no public 2.0 wheel is built for CUDA 12: the CUDA gives way
    ("23.05-py3", "2.0", "3.10", "11."),
])
def test_an_ngc_base_gives_its_release_and_python(found, tag, release, python, cuda):
    d = found({"Dockerfile": f"FROM nvcr.io/nvidia/pytorch:{tag}\n", "a.py": "import torch\n"})
    s = d.decision.stack
    assert s.framework == "torch" and s.framework_version.startswith(release + ".") and s.python == python
    assert s.cuda.startswith(cuda)


def test_a_companion_no_row_installs_is_no_contradiction_and_keeps_its_lines_cuda(found, matrix):
    """``torchaudio==0.9.1`` beside ``torch==1.9.1+cu111``: no torch row installs torchaudio, so its
    release says nothing of torch's here; the line stands, and its CUDA 11.1 with it."""
    assert not any(p.startswith("torchaudio==") for b in matrix.builds if b.framework == "torch" for p in b.packages)
    line = ("pip install torch==1.9.1+cu111 torchvision==0.10.1+cu111 torchaudio==0.9.1 "
            "-f https://download.pytorch.org/whl/torch_stable.html")
    d = found({"docs/install.md": f"```\n{line}\n```\n", "a.py": "import torch\n"})
    assert (d.decision.stack.framework_version, d.decision.stack.cuda) == ("1.9.1", "11.1")
    assert "docs/install.md:2" not in aside(d)
    # a companion the rows do install still decides: torchvision 0.10.1 is torch 1.9.1's, not 1.7.1's
    d = found({"requirements.txt": "torch==1.7.1\ntorchvision==0.10.1\n", "a.py": "import torch\n"})
    assert "contradicts" in aside(d)["requirements.txt:2"]


def test_advice_naming_a_release_the_matrix_lacks_cannot_outweigh_advice_naming_one_it_has(found):
    """A README's install command for a release the matrix lacks (``pytorch=0.1.10``) is set
    aside before it can knock out the README's own "PyTorch 0.4 is required"."""
    d = found({"README.md": "Python 3 and PyTorch 0.4 are required.\n\nIt was first run with:\n"
                            "`conda install pytorch=0.1.10 -c soumith`\n", "a.py": "import torch\n"})
    assert d.decision.stack.framework_version.startswith("0.4.")
    assert "does not have" in aside(d)["README.md:4"]


@pytest.mark.parametrize("readme, version", [
    # salesforce/awd-lstm-lm of 2017-12 and of today: an earlier version of the codebase needs 0.1.12,
    # a release the matrix has, and its install command still says nothing of this code
    ("## Software Requirements\n\nPython 3 and PyTorch 0.2 are required for the current codebase.\n\n"
     "If you need to use an earlier version of the codebase, the original code and hyper parameters accessible at the "
     "[PyTorch==0.1.12](https://github.com/salesforce/awd-lstm-lm/tree/PyTorch%3D%3D0.1.12) release, with Python 3 and "
     "PyTorch 0.1.12 are required.\nIf you are using Anaconda, installation of PyTorch 0.1.12 can be achieved via:\n"
     "`conda install pytorch=0.1.12 -c soumith`.\n\n## Experiments\n", "0.2.0"),
    ("Python 3 and PyTorch 0.4 are required.\n\nFor the old code:\n\n```\nconda install pytorch=0.1.12 -c soumith\n```\n", "0.4.1"),
    # the sentence before the mention on its line, and the paragraph after, still speak
    ("PyTorch 0.2 is required. For the old code use PyTorch 0.1.12 instead.\n", "0.2.0"),
    ("For the old code use PyTorch 0.4.\n\nPyTorch 0.1.12 is required.\n", "0.1.12"),
    # "the older version of PyTorch" is the framework's, not another version of the code
    ("This codebase requires Python 3 and PyTorch 0.1.12_2.\n`conda install pytorch=0.1.12 -c soumith`.\n"
     "Note the older version of PyTorch - upgrading to later versions would require minor updates.\n", "0.1.12"),
])
def test_what_a_readme_says_of_another_version_of_the_code_is_not_read(found, readme, version):
    d = found({"README.md": readme, "a.py": "import torch\n"})
    assert d.decision.stack.framework_version == version


def test_advice_naming_a_release_the_matrix_lacks_prefers_the_nearest_it_has(found, matrix):
    """Not the newest release: code written for a release older than any in the matrix runs best
    on the oldest ones (and one newer than any on the newest)."""
    known = sorted({b.version for b in matrix.builds if b.framework == "torch"})
    assert Version("0.1.6") < known[0]  # older than any release of the matrix
    d = found({"README.md": "* PyTorch 0.1.6\n", "a.py": "import torch\n"})
    assert Version(d.decision.stack.framework_version) == known[0]
    d = found({"README.md": "* PyTorch 99.1.0\n", "a.py": "import torch\n"})
    assert Version(d.decision.stack.framework_version) == known[-1]
    d = found({"README.md": "* PyTorch 1.7.5\n", "a.py": "import torch\n"})  # between 1.7.1 and 1.8.0
    assert d.decision.stack.framework_version in ("1.7.1", "1.8.0")


def test_a_packages_declared_python_outweighs_a_python_a_subfolders_dockerfile_creates(found):
    """pip refuses a package outside its requires-python: that range weighs like an install
    command, and the root's pyproject beats remote/Dockerfile's conda create at equal weight."""
    d = found({"pyproject.toml": '[project]\nname = "x"\nrequires-python = ">=3.8,<3.10"\ndependencies = ["torch==1.10.2"]\n',
               "remote/Dockerfile": "FROM ubuntu:20.04\nRUN conda create --name rl python=3.7\n", "a.py": "import torch\n"})
    assert d.decision.stack.python in ("3.8", "3.9")
    assert "contradicts" in aside(d)["remote/Dockerfile:2"]


def test_a_readme_naming_python_2_borne_out_by_a_few_files_of_its_code_is_refused(found):
    """One file of six uses print statements: alone it says little, but with the README's
    "Python 2.7" (and nothing naming Python 3) the repository needs Python 2."""
    files = {f"m{i}.py": "import tensorflow as tf\n" for i in range(5)}
    files["main.py"] = "import tensorflow as tf\nprint 'start'\n"
    d = found({**files, "README.md": "* Python 2.7\n"})
    assert d.decision is None and "Python 2" in d.problem.what and "README.md:1" in d.problem.what
    assert found({**files}).decision.stack.framework == "tensorflow"  # the code alone: too little
    d = found({**files, "README.md": "* Python 2.7\n", "requirements.txt": "tensorflow==1.15.0\n",
               "setup.py": "setup(python_requires='>=3.6')\n"})
    assert d.decision.stack.framework == "tensorflow"  # Python 3 is named too


# --- torch 0.3.x: papers of late 2017 to mid 2018 -------------------------------------------------


@pytest.mark.parametrize("files, name", [
    # a README's Python 3.6 is advice: the 0.3 builds' base (ubuntu16.04) gives only 3.5
    ({"README.md": "## Requirements\n\n- PyTorch 0.3.0\n- Python 3.6\n", "train.py": "import torch\n"}, "torch-0.3.0-cuda9.0-py3.5"),
    ({"requirements.txt": "torch==0.3.1\ntorchvision==0.2.0\n", "a.py": "import torch\n"}, "torch-0.3.1-cuda9.0-py3.5"),
    ({"requirements.txt": "torch==0.3.0\n"}, "torch-0.3.0-cuda9.0-py3.5"),
    # the version PyTorch's wheels carry, as pip freeze writes it
    ({"requirements.txt": "torch==0.3.0.post4\n"}, "torch-0.3.0-cuda9.0-py3.5"),
    ({"install.sh": "pip install http://download.pytorch.org/whl/cu80/torch-0.3.0.post4-cp35-cp35m-linux_x86_64.whl\n"},
     "torch-0.3.0-cuda8.0-py3.5"),
])
def test_torch_0_3_repositories_get_their_release(found, files, name):
    d = found(files)
    assert d.decision.stack.name == name
    assert d.decision.stack.python in ("3.5", "3.6")


def test_a_readme_of_2018_that_names_its_torch_and_cuda_in_one_link_gets_that_build(found):
    d = found({"README.md": "# Prerequisites\n* Python (3.6)\n* [PyTorch (0.3.1)/CUDA 8.0](https://pytorch.org/previous-versions/)\n"
                            "* torchvision (0.2.0)\n", "a.py": "import torch\n"})
    assert d.decision.stack.name == "torch-0.3.1-cuda8.0-py3.5"  # README advice: its base has no 3.6


def test_the_conda_cuda_selector_of_pytorch_s_channel_picks_the_variant(found):
    d = found({"environment.yml": "dependencies:\n  - python=3.5\n  - pytorch=0.3.1\n  - cuda80\n"})
    assert d.decision.stack.name == "torch-0.3.1-cuda8.0-py3.5"
    d = found({"install.sh": "conda install pytorch=0.4.1 cuda92 -c pytorch\n"})
    assert d.decision.stack.name == "torch-0.4.1-cuda9.2-py3.6"
    # a selector picks a build of a conda channel envman does not install from: no cu91 row, so the
    # preference is set aside and a wheel build of the release is taken (the framework pin stands)
    d = found({"install.sh": "conda install pytorch=0.3.1 cuda91 -c pytorch\n"})
    assert d.decision.stack.framework_version == "0.3.1" and d.decision.stack.cuda in ("8.0", "9.0")
    assert not [s for s in d.statements if s.fact.kind == "cuda" and s.hard]
    # a cudatoolkit pin is still a pin
    d = found({"environment.yml": "dependencies:\n  - pytorch=0.3.1\n  - cudatoolkit=9.1\n"})
    assert d.decision is None and "CUDA 9.1" in d.problem.what


def test_a_pinned_python_that_the_wheels_have_but_no_base_gives_is_said_not_refused(found):
    """The 0.3 wheels exist for Python 3.6, but every 0.3 build's base is ubuntu16.04 (3.5) and
    python-build-standalone starts at 3.8: a stack with 3.6 would never render. That is envman's
    limit, not the repository's, so the pin is set aside with a note naming what the bases give,
    and the stack has the Python its base gives."""
    d = found({"environment.yml": "dependencies:\n  - python=3.6\n  - pytorch=0.3.1\n"})
    assert d.decision.stack.name == "torch-0.3.1-cuda9.0-py3.5"
    assert aside(d)["environment.yml:2"] == "the wheels have it, but no base image the matrix has gives it (see the notes)"
    (note,) = [n for n in d.decision.notes if "asks for Python" in n]
    assert note.startswith("environment.yml:2 asks for Python ==3.6.*: torch-0.3.1-cuda")
    assert "has wheels for Python 3.5, 3.6, and its base images give 3.5 (python-build-standalone starts at Python 3.8)" in note
    d = found({"environment.yml": "dependencies:\n  - python=3.6\n  - pytorch=0.2.0\n  - cuda80\n"})
    assert d.decision.stack.name == "torch-0.2.0-cuda8.0-py3.5"
    # the same pin with a release whose CUDA 9.2 build is on ubuntu18.04 (3.6 packaged): that build, no note
    d = found({"environment.yml": "dependencies:\n  - python=3.6\n  - pytorch=0.4.1\n"})
    assert d.decision.stack.name == "torch-0.4.1-cuda9.2-py3.6"
    assert not [n for n in d.decision.notes if "asks for Python" in n]
    # a Python the wheels do not have at all is still the repository's own contradiction: refused
    d = found({"environment.yml": "dependencies:\n  - python=3.8\n  - pytorch=0.3.1\n"})
    assert d.decision is None and "asks for Python ==3.8.*" in d.problem.what


def test_every_answer_of_an_old_release_renders(found, matrix):
    """What detection answers is a stack that renders: the Pythons it offers are those a base
    image of the build gives."""
    from envman.render.plan import MIN_STANDALONE_PYTHON
    from envman.stack.resolve import stack_pythons

    for b in matrix.builds:
        if b.framework == "torch" and b.version < Version("1.0"):
            for p in stack_pythons(matrix, b):
                st = found({"requirements.txt": f"torch=={b.version}\n", "setup.py": f"python_requires='=={p}'\n"})
                if st.decision is not None:
                    s = st.decision.stack
                    assert s.python_strategy == "apt" or Version(s.python) >= MIN_STANDALONE_PYTHON, s.name


# --- torch 0.2.0 and 0.1.12: papers of 2017 ------------------------------------------------------


@pytest.mark.parametrize("files, name", [
    ({"README.md": "## Requirements\n\n- PyTorch 0.2.0\n", "train.py": "import torch\n"}, "torch-0.2.0-cuda8.0-py3.5"),
    # a README's Python 3.6 is advice: the CUDA 8.0 base (ubuntu16.04) gives only 3.5
    ({"README.md": "* Python 3.6\n* PyTorch 0.2\n", "train.py": "import torch\n"}, "torch-0.2.0-cuda8.0-py3.5"),
    ({"requirements.txt": "torch==0.2.0\n"}, "torch-0.2.0-cuda8.0-py3.5"),
    # the version PyTorch's wheels carry, as pip freeze writes it
    ({"requirements.txt": "torch==0.2.0.post3\ntorchvision==0.1.9\n"}, "torch-0.2.0-cuda8.0-py3.5"),
    ({"install.sh": "conda install pytorch=0.2.0 cuda80 -c soumith\n", "a.py": "import torch\n"}, "torch-0.2.0-cuda8.0-py3.5"),
    ({"environment.yml": "dependencies:\n  - python=3.5\n  - pytorch=0.2.0\n  - cuda80\n"}, "torch-0.2.0-cuda8.0-py3.5"),
    ({"install.sh": "pip install http://download.pytorch.org/whl/cu80/torch-0.2.0.post3-cp35-cp35m-manylinux1_x86_64.whl\n"},
     "torch-0.2.0-cuda8.0-py3.5"),
    ({"requirements.txt": "torch==0.1.12.post2\ntorchvision==0.1.8\n"}, "torch-0.1.12-cuda8.0-py3.5"),
    ({"README.md": "Requires PyTorch 0.1.12 and Python 3.5.\n", "a.py": "import torch\n"}, "torch-0.1.12-cuda8.0-py3.5"),
])
def test_torch_0_2_and_0_1_12_repositories_get_their_release_on_cuda_8_0(found, files, name):
    d = found(files)
    assert d.decision.stack.name == name
    assert (d.decision.stack.cuda, d.decision.stack.python in ("3.5", "3.6")) == ("8.0", True)


def test_a_torch_0_2_pin_of_a_build_the_row_does_not_install_is_unmet(found):
    # 0.2.0.post1/.post2 were earlier builds of 0.2.0: the row installs .post3, which ==0.2.0.post2 refuses
    d = found({"requirements.txt": "torch==0.2.0.post2\n"})
    assert d.decision is None and "a release the matrix does not have" in str(d.problem)
    assert d.problem.fix.startswith("nearest: torch-0.2.0-cuda8.0")
    # one past the row's build, and the same with !=: refused too
    assert found({"requirements.txt": "torch==0.2.0.post4\n"}).decision is None
    assert found({"requirements.txt": "torch!=0.2.0.post3\n"}).decision.stack.framework_version != "0.2.0"


def test_a_cu75_wheel_of_torch_0_2_is_unmet_for_want_of_a_cuda_7_5_base(found):
    d = found({"install.sh": "pip install http://download.pytorch.org/whl/cu75/torch-0.2.0.post3-cp35-cp35m-manylinux1_x86_64.whl\n"})
    assert d.decision is None
    assert "asks for CUDA 7.5" in d.problem.what and "it has CUDA 8.0" in d.problem.what


def test_a_post_release_the_rows_do_not_install_is_unmet(found):
    d = found({"requirements.txt": "torch==0.3.0.post3\n"})
    assert d.decision is None and "a release the matrix does not have" in str(d.problem)
    assert d.problem.fix.startswith("nearest: torch-0.3.0-cuda")


# --- jaxlib pins: the jax release whose rows install that jaxlib, on the pin's CUDA --------------


def _newest_pairing(matrix, jaxlib, cuda):
    return max(b.version for b in matrix.builds if b.framework == "jax" and str(b.cuda) == cuda
               and any(p.startswith(f"jaxlib=={jaxlib}+") for p in b.packages))


@pytest.mark.parametrize("text, release, cuda, refused", [
    ("jaxlib==0.1.55+cuda110\n", "0.2.3", "11.0", []),  # 0.1.77-0.2.3 install jaxlib 0.1.55: the newest of them
    ("jaxlib==0.1.52+cuda101\n", "0.1.76", "10.1", []),  # the oldest jaxlib the rows install
    ("jaxlib==0.1.56+cuda100\n", "0.2.5", "10.0", []),
    ("jaxlib==0.1.57+cuda101\n", "0.2.8", "10.1", []),  # 0.2.6-0.2.8 install jaxlib 0.1.57
    ("jax==0.2.1\njaxlib==0.1.55+cuda101\n", "0.2.1", "10.1", []),
    ("jax==0.2.5\njaxlib==0.1.56+cuda110\n", "0.2.5", "11.0", []),
    # a jaxlib no row of the jax pin installs gives way to the pin, and its CUDA still counts
    ("jax==0.2.0\njaxlib==0.1.56+cuda100\n", "0.2.0", "10.0", ["jaxlib==0.1.56+cuda100"]),
    ("jax==0.2.5\njaxlib==0.1.55+cuda101\n", "0.2.5", "10.1", ["jaxlib==0.1.55+cuda101"]),
    # a jaxlib between two the rows install goes with the earlier, which the stack then installs instead
    ("jaxlib==0.1.53+cuda100\n", "0.1.76", "10.0", ["jaxlib==0.1.53+cuda100"]),
])
def test_a_jaxlib_pin_names_the_newest_jax_release_pairing_with_it_on_its_cuda(found, matrix, text, release, cuda, refused):
    d = found({"requirements.txt": text, "a.py": "import jax\n"})
    st = d.decision.stack
    assert (st.framework, st.framework_version, st.cuda) == ("jax", release, cuda)
    if "jax==" not in text:
        jaxlib = text.split("==")[1].split("+")[0]
        assert Version(release) == _newest_pairing(matrix, jaxlib if jaxlib != "0.1.53" else "0.1.52", cuda)
    assert [line.text for line in d.layer.lines if line.outcome == "refused"] == refused


@pytest.mark.parametrize("line", ["jaxlib==0.1.56+cuda100", "jax[cuda11_pip]",
                                  "torchvision==0.9.0+cu101"])  # a companion that contradicts the pin: its CUDA goes too
def test_a_line_set_aside_lends_the_stack_no_cuda_unless_it_is_a_jaxlib_of_the_chosen_framework(found, matrix, line):
    d = found({"requirements.txt": f"torch==1.7.1\n{line}\n", "a.py": "import torch\n"})
    assert d.decision.stack.name == resolve(matrix, "torch-1.7.1").name


def test_a_readme_installing_jaxlib_from_googles_page_names_its_jax_row(found):
    d = found({"README.md": "```\npip install --upgrade jax jaxlib==0.1.55+cuda110 -f "
                            "https://storage.googleapis.com/jax-releases/jax_releases.html\n```\n",
               "a.py": "import jax\n"})
    st = d.decision.stack
    assert (st.framework_version, st.cuda, st.packages[1]) == ("0.2.3", "11.0", "jaxlib==0.1.55+cuda110")


def test_a_readme_installing_jaxlib_by_its_wheel_address_takes_the_folders_cuda(found):
    d = found({"README.md": "```\npip install --upgrade https://storage.googleapis.com/jax-releases/cuda101/"
                            "jaxlib-0.1.52-cp37-none-manylinux2010_x86_64.whl jax\n```\n", "a.py": "import jax\n"})
    st = d.decision.stack
    assert (st.framework_version, st.cuda, st.python) == ("0.1.76", "10.1", "3.7")


def test_a_pin_of_a_jaxlib_no_row_installs_is_a_release_the_matrix_lacks(found):
    d = found({"requirements.txt": "jaxlib==0.1.51+cuda101\n", "a.py": "import jax\n"})
    assert d.decision is None
    assert d.problem.what.startswith("requirements.txt:1 pins jax jaxlib==0.1.51 (jaxlib==0.1.51+cuda101), a release the "
                                     "matrix does not have (the jaxlib releases its jax rows install: 0.1.52 to ")
    assert d.problem.fix.startswith("nearest: jax-0.1.76-cuda")


@pytest.mark.parametrize("jaxlib, nearest", [
    # no jaxlib 0.2.x exists: the nearest release the rows install names its newest jax rows
    ("0.2.0", "jax-0.2.28-cuda11.1"),  # 0.1.76 (jax 0.2.21-0.2.28) is nearer than 0.3.0
    ("0.2.37", "jax-0.2.28-cuda11.1"),  # one short of half way
    ("0.2.38", "jax-0.3.1-cuda11.1"),  # half way between 0.1.76 and 0.3.0: the newer
    ("0.2.39", "jax-0.3.1-cuda11.1"),
])
def test_an_unmet_jaxlib_pin_names_the_rows_of_the_nearest_jaxlib_the_rows_install(found, jaxlib, nearest):
    d = found({"requirements.txt": f"jaxlib=={jaxlib}+cuda110\n", "a.py": "import jax\n"})
    assert d.decision is None and d.problem.fix.startswith(f"nearest: {nearest}, ")


def test_a_readme_naming_a_jaxlib_no_row_installs_is_advice_set_aside(found):
    d = found({"README.md": "pip install --upgrade jax jaxlib==0.1.51+cuda101 -f "
                            "https://storage.googleapis.com/jax-releases/jax_releases.html\n", "a.py": "import jax\n"})
    assert d.decision is not None and d.decision.stack.framework == "jax"
    assert [s.used for s in d.decision.evidence if s.fact.companion == "jaxlib==0.1.51"] == [False]


def test_companion_pairs_read_exact_pins_by_distribution_name_extras_and_local_labels_aside():
    from types import SimpleNamespace

    from envman.project.detect.decide import _companion_pairs

    rows = [SimpleNamespace(version=Version("0.2.5"), packages=("jax==0.2.5", "JAXlib[cuda]==0.1.56+cuda110")),
            SimpleNamespace(version=Version("0.2.4"), packages=("jaxlib==not-a-version", "jaxlib==0.1.56")),
            SimpleNamespace(version=Version("0.2.3"), packages=("jaxlib>=0.1.55", "jaxlibx==0.1.55", "jax==0.1.55"))]
    assert _companion_pairs(rows, "jaxlib") == {Version("0.1.56"): {Version("0.2.5"), Version("0.2.4")}}


def test_at_equal_weight_a_gpu_builds_release_comes_before_a_cpu_or_unsaid_builds(found):
    """Two environment files of equal weight pinning different releases (a training GPU one and
    an evaluation CPU one): the GPU build's release is taken whatever the file order, and the
    other one is the conflict; a weaker GPU statement (prose) does not outweigh a pin."""
    cpu = "name: p\ndependencies:\n  - python=3.6\n  - pip:\n    - tensorflow==2.0.0\n"
    gpu = "name: p\ndependencies:\n  - python=3.6\n  - cudatoolkit=10.1\n  - pip:\n    - tensorflow-gpu==2.2.0\n"
    d = found({"a_CPU.yml": cpu, "b_GPU.yml": gpu, "x.py": "import tensorflow\n"})
    assert (d.decision.stack.framework_version, d.decision.stack.cuda) == ("2.2.0", "10.1")
    assert "contradicts b_GPU.yml:6" in aside(d)["a_CPU.yml:5"]
    # the same two pins, neither saying its build: the file order decides, as before
    d = found({"a.yml": cpu, "b.yml": gpu.replace("tensorflow-gpu", "tensorflow").replace("  - cudatoolkit=10.1\n", ""),
               "x.py": "import tensorflow\n"})
    assert d.decision.stack.framework_version == "2.0.0"
    # a GPU build in a deeper file (an optional extra's requirements) does not come before the root's pin
    d = found({"pyproject.toml": "[project]\nname = 'x'\ndependencies = ['torch==2.4.1']\n",
               "requirements/extra.txt": "torch==2.7.1+cu118\n", "x.py": "import torch\n"})
    assert d.decision.stack.framework_version == "2.4.1"
    # in one file the line order holds (the GPU build's line does not jump ahead of the pin above it)
    d = found({"requirements.txt": "tensorflow==2.0.0\ntensorflow-gpu==2.2.0\n", "x.py": "import tensorflow\n"})
    assert d.decision.stack.framework_version == "2.0.0"
    # a GPU build named only in prose does not outweigh the pin
    d = found({"requirements.txt": "tensorflow==2.0.0\n", "README.md": "pip install tensorflow-gpu==2.2.0\n",
               "x.py": "import tensorflow\n"})
    assert d.decision.stack.framework_version == "2.0.0"



def test_at_equal_import_counts_the_framework_of_the_strongest_pin_wins(found):
    """The code imports two frameworks in as many files (a bundled baseline in another framework):
    the one the strongest pin names is the framework; one file more decides by the count, and
    without pins the order of before holds."""
    jax_files = {f"j{i}.py": "import jax\n" for i in range(3)}
    torch_files = {f"baseline/t{i}.py": "import torch\n" for i in range(3)}
    pins = {"requirements.txt": "jax==0.2.16\n", "baseline/requirements.txt": "torch>=1.7.1\n"}
    d = found({**jax_files, **torch_files, **pins})
    assert d.decision.stack.framework == "jax" and d.decision.stack.framework_version == "0.2.16"
    assert "a tool" in aside(d)["baseline/requirements.txt:1"] or "speaks for baseline/" in aside(d)["baseline/requirements.txt:1"]
    d = found({**jax_files, **torch_files, **pins, "baseline/t9.py": "import torch\n"})
    assert d.decision.stack.framework == "torch"  # one file more: the count decides
    d = found({**jax_files, **torch_files})
    assert d.decision.stack.framework == "torch"  # a tie and no pin: as before


def test_a_bundled_projects_dockerfile_weighs_as_an_install_command(found):
    """A Dockerfile inside a bundled project (a folder with its own setup.py or pyproject.toml and
    README, such as a vendored detection toolbox) builds that project's image: the repository's
    own install page outweighs it. A folder without a README (a helper package) or a Dockerfile
    of the repository itself keeps a base image's weight."""
    own = {"docs/install.md": "```\npip install torch==1.9.1+cu111 -f https://download.pytorch.org/whl/torch_stable.html\n```\n",
           "tools/train.py": "import torch\n"}
    docker = "FROM pytorch/pytorch:1.6.0-cuda10.1-cudnn7-devel\n"
    d = found({**own, "lib3d/setup.py": "setup(name='lib3d')\n", "lib3d/README.md": "# lib3d\n",
               "lib3d/docker/Dockerfile": docker})
    assert (d.decision.stack.framework_version, d.decision.stack.cuda) == ("1.9.1", "11.1")
    assert any(c["set_aside"].startswith("lib3d/docker/Dockerfile:1") and c["taken"].startswith("docs/install.md:2")
               for c in d.decision.conflicts)
    d = found({**own, "lib3d/pyproject.toml": "[project]\nname = 'lib3d'\n", "lib3d/README.rst": "lib3d\n",
               "lib3d/Dockerfile": docker})
    assert d.decision.stack.framework_version == "1.9.1"
    d = found({**own, "lib3d/setup.py": "setup(name='lib3d')\n", "lib3d/docker/Dockerfile": docker})
    assert d.decision.stack.framework_version == "1.6.0"  # no README: not a project of its own
    d = found({**own, "setup.py": "setup(name='x')\n", "README.md": "# x\n", "docker/Dockerfile": docker})
    assert d.decision.stack.framework_version == "1.6.0"  # the repository's own image


def test_the_cuda_of_pytorchs_wheel_index_is_torchs_alone(found):
    """``--extra-index-url .../whl/cu121`` serves PyTorch's wheels: in a TensorFlow repository (torch
    a tool beside it) that CUDA is torch's and says nothing of TensorFlow's build; in a PyTorch
    repository it chooses the CUDA as before."""
    req = "--extra-index-url https://download.pytorch.org/whl/cu121\ntorch\ntensorflow-cpu\n"
    d = found({"requirements.txt": req, **{f"m{i}.py": "import tensorflow as tf\n" for i in range(3)}, "t.py": "import torch\n"})
    assert (d.decision.stack.framework, d.decision.stack.cuda) == ("tensorflow", None)
    assert "the CUDA of torch, a tool here" in aside(d)["requirements.txt:1"]
    d = found({"requirements.txt": req, "t.py": "import torch\n"})
    assert (d.decision.stack.framework, d.decision.stack.cuda) == ("torch", "12.1")


def test_the_project_the_readme_installs_itself_comes_before_its_optional_extras(found):
    """``uv pip install .`` names the root's pyproject.toml; the requirements files of optional
    extras the README also installs, one of them a GPU build of another release, come after it."""
    files = {"pyproject.toml": '[project]\nname = "x"\ndependencies = ["torch==2.4.1"]\n',
             "requirements/requirements-a.txt": "torch==2.4.1\n",
             "requirements/requirements-gpu.txt": "torch==2.7.1+cu118\n",
             "README.md": "```\nuv pip install .\npip install -r requirements/requirements-a.txt\n"
                          "pip install -r requirements/requirements-gpu.txt\n```\n", "a.py": "import torch\n"}
    assert found(files).decision.stack.framework_version == "2.4.1"
    # without the install of the project itself, the named files decide among themselves: the GPU build's first
    files["README.md"] = files["README.md"].replace("uv pip install .\n", "")
    assert found(files).decision.stack.framework_version == "2.7.1"
