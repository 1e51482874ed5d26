"""Each manifest reader, with the forms real repositories write."""

from __future__ import annotations

import pytest

from envman.project.detect.facts import PIN, RANGE
from envman.project.detect.sources import (
    conda_facts, conda_spec, read_conda, read_pipfile, read_pyproject, read_python_version, read_requirements,
    relative_path, split_option,
)
from tests.unit.project.detect.conftest import means


def test_requirements_follow_includes_inside_the_repository_once(repo):
    r = repo({
        "requirements.txt": "-r requirements/base.txt\n--requirement=requirements/gpu.txt\n-r ../outside.txt\n-r /etc/passwd\n",
        "requirements/base.txt": "numpy\n-r base.txt\ntorchvision==0.8.2  # the vision models\n",
        "requirements/gpu.txt": "torch==1.7.1+cu110 \\\n  --hash=sha256:abc\n-f https://download.pytorch.org/whl/torch_stable.html\n",
    })
    got = means(read_requirements(r, "requirements.txt"))
    assert got == [
        ("requirements/base.txt", 3, "torch as torchvision==0.8.2 needs it"),
        ("requirements/gpu.txt", 1, "CUDA 11.0"),
        ("requirements/gpu.txt", 1, "torch ==1.7.1 (GPU build)"),
    ]


def test_requirements_index_options_state_the_cuda_of_the_framework_index(repo):
    r = repo({"requirements.txt": "--extra-index-url https://download.pytorch.org/whl/cu118\ntorch==2.1.0\n"
                                  "-i https://download.pytorch.org/whl/cpu\n"})
    got = read_requirements(r, "requirements.txt")
    assert [(s.line, s.fact.means(), s.strength) for s in got] == [
        (1, "CUDA 11.8 (of torch)", PIN), (2, "torch ==2.1.0", PIN), (3, "no CUDA (a CPU build)", PIN)]


@pytest.mark.parametrize("line, option", [
    ("-r base.txt", ("-r", "base.txt")), ("-rbase.txt", ("-r", "base.txt")), ("--requirement=x.txt", ("--requirement", "x.txt")),
    ("-c constraints.txt", ("-c", "constraints.txt")), ("-f https://x/y", ("-f", "https://x/y")),
    ("--find-links=https://x", ("--find-links", "https://x")), ("-e .", None), ("torch", None), ("-r", None),
])
def test_split_option(line, option):
    assert split_option(line) == option


@pytest.mark.parametrize("base, target, rel", [
    ("requirements.txt", "base.txt", "base.txt"), ("req/a.txt", "b.txt", "req/b.txt"), ("req/a.txt", "../c.txt", "c.txt"),
    ("a.txt", "../x.txt", None), ("a.txt", "/etc/passwd", None), ("a.txt", "~/x", None), ("a.txt", "https://x/y.txt", None),
    ("a.txt", "", None), ("a.txt", ".", None),
])
def test_includes_stay_inside_the_repository(base, target, rel):
    assert relative_path(base, target) == rel


@pytest.mark.parametrize("text, parsed", [
    ("pytorch=1.7.1", ("pytorch", "==1.7.1", "")),
    ("pytorch=1.7", ("pytorch", "==1.7.*", "")),
    ("pytorch==1.7", ("pytorch", "==1.7", "")),
    ("pytorch=1.7.1=py3.8_cuda11.0.221_cudnn8.0.5_0", ("pytorch", "==1.7.1", "py3.8_cuda11.0.221_cudnn8.0.5_0")),
    ("pytorch::pytorch=1.9", ("pytorch", "==1.9.*", "")),
    ("conda-forge::cudatoolkit=11.1", ("cudatoolkit", "==11.1.*", "")),
    ("cudatoolkit=10.1.243", ("cudatoolkit", "==10.1.243", "")),
    ("python>=3.8", ("python", ">=3.8", "")),
    ("python >=3.8,<3.11", ("python", ">=3.8,<3.11", "")),
    ("pytorch 1.7.1 py3.8_cuda11.0", ("pytorch", "==1.7.1", "py3.8_cuda11.0")),
    ("pytorch[version='>=1.6']", ("pytorch", ">=1.6", "")),
    ("pytorch=1.7.*", ("pytorch", "==1.7.*", "")),
    ("cpuonly", ("cpuonly", "", "")),
    ("tensorflow-gpu=1.15", ("tensorflow-gpu", "==1.15.*", "")),
    ("::", None),
])
def test_conda_spec(text, parsed):
    assert conda_spec(text) == parsed


@pytest.mark.parametrize("text, want", [
    ("cudatoolkit=10.1", ["CUDA 10.1"]), ("cudatoolkit=11.3.1", ["CUDA 11.3"]), ("pytorch-cuda=12.1", ["CUDA 12.1 (of torch)"]),
    ("cuda-version=12.4", ["CUDA 12.4"]), ("cudnn=7.6.5", ["cuDNN 7.6.5"]), ("cpuonly", ["no CUDA (a CPU build)"]),
    ("python=3.7", ["Python ==3.7.*"]), ("python=3.8.5", ["Python ==3.8.5"]),
    ("pytorch=1.7.1=py3.8_cuda11.0.221_cudnn8.0.5_0", ["torch ==1.7.1", "CUDA 11.0"]),
    ("pytorch=1.13.1=py3.9_cpu_0", ["torch ==1.13.1", "no CUDA (a CPU build)"]),
    ("tensorflow-gpu=1.15", ["tensorflow ==1.15.* (GPU build)"]),
    ("torchvision=0.8.2", ["torch as torchvision==0.8.2 needs it"]),
    ("numpy=1.19", []), ("mkl", []),
    # PyTorch's channel picked the CUDA of a build before 1.1 by a bare selector package
    ("cuda80", ["CUDA 8.0 (of torch)"]), ("cuda90", ["CUDA 9.0 (of torch)"]), ("cuda92", ["CUDA 9.2 (of torch)"]),
    ("cuda100", ["CUDA 10.0 (of torch)"]), ("pytorch::cuda91", ["CUDA 9.1 (of torch)"]),
    ("cuda80=1.0", []), ("cuda9", []), ("cuda101", []), ("cuda", []),  # versioned, or no selector PyTorch published
])
def test_conda_facts(text, want):
    assert [f.means() for f in conda_facts(text)] == want


def test_conda_file_with_pip_list_and_aliases(repo):
    r = repo({"environment.yml": """\
        name: paper
        channels: [pytorch, nvidia, defaults]
        base: &base
          - python=3.8
        dependencies:
          - python=3.8.5
          - pytorch::pytorch=1.11.0
          - cudatoolkit=11.3
          - pip
          - pip:
            - --extra-index-url https://download.pytorch.org/whl/cu113
            - einops==0.3.0
            - jax[cuda11_pip]==0.3.25
        """})
    assert means(read_conda(r, "environment.yml")) == [
        ("environment.yml", 6, "Python ==3.8.5"), ("environment.yml", 7, "torch ==1.11.0"), ("environment.yml", 8, "CUDA 11.3"),
        ("environment.yml", 11, "CUDA 11.3 (of torch)"), ("environment.yml", 13, "CUDA 11"),
        ("environment.yml", 13, "jax ==0.3.25 (GPU build)")]


@pytest.mark.parametrize("text", [
    "a: &a [1, 2]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
    "dependencies: [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n",
    "dependencies:\n" + "  - " * 1 + "[" * 5000 + "]" * 5000 + "\n",
    "!!python/object/apply:os.system ['touch /tmp/envman-pwned']\n",
    "dependencies: !!python/object/apply:os.system ['touch /tmp/envman-pwned']\n",
    "- just\n- a list\n", "::: not yaml {{{", "",
])
def test_hostile_conda_files_give_nothing_and_run_nothing(repo, text):
    import os

    r = repo({"environment.yml": text})
    assert read_conda(r, "environment.yml") == [] or all(s.fact for s in read_conda(r, "environment.yml"))
    assert not os.path.exists("/tmp/envman-pwned")


def test_pyproject_pep621_poetry_and_uv_indexes(repo):
    r = repo({"pyproject.toml": """\
        [project]
        requires-python = ">=3.9,<3.12"
        dependencies = ["torch==2.0.1", "numpy"]
        [project.optional-dependencies]
        export = ["onnxruntime>=1.15"]
        [tool.poetry.dependencies]
        python = "^3.10"
        jax = {version = "^0.4.20", extras = ["cuda12"]}
        tensorflow = "~2.12"
        [[tool.uv.index]]
        url = "https://download.pytorch.org/whl/cu118"
        """})
    assert [m for _, _, m in means(read_pyproject(r, "pyproject.toml"))] == [
        "torch ==2.0.1", "onnxruntime >=1.15 (CPU build)", "Python <3.12,>=3.9", "Python >=3.10,<4.0", "CUDA 12",
        "jax >=0.4.20,<0.5 (GPU build)", "tensorflow >=2.12,<2.13", "CUDA 11.8 (of torch)"]


def test_pipfile(repo):
    r = repo({"Pipfile": '[packages]\ntorch = "==1.4.0"\nnumpy = "*"\n[dev-packages]\ntensorflow = {version = "==2.1"}\n'
                         '[requires]\npython_version = "3.7"\n'})
    got = read_pipfile(r, "Pipfile")
    assert [(s.fact.means(), s.strength) for s in got] == [
        ("torch ==1.4.0", PIN), ("tensorflow ==2.1", RANGE), ("Python ==3.7.*", PIN)]


@pytest.mark.parametrize("name, text, want", [
    (".python-version", "3.8.10\n", ["Python ==3.8.*"]), (".python-version", "# pyenv\n3.10\n", ["Python ==3.10.*"]),
    ("runtime.txt", "python-3.7.3\n", ["Python ==3.7.*"]), (".python-version", "2.7.18\n", ["Python 2, which envman does not build"]),
    (".python-version", "pypy3.9\n", []), ("runtime.txt", "", []),
])
def test_python_version_files(repo, name, text, want):
    assert [f for _, _, f in means(read_python_version(repo({name: text}), name))] == want


from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=120))
def test_any_conda_spec_parses_or_not_never_an_error(text):
    parsed = conda_spec(text)
    if parsed is not None:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet

        name, spec, _ = parsed
        assert name == name.lower()
        try:
            SpecifierSet(spec)
        except InvalidSpecifier:
            pass  # an operator conda knows and PEP 440 does not: the readers drop it
    conda_facts(text)


def test_each_entry_is_cited_at_its_own_line_not_at_one_that_starts_alike(repo):
    r = repo({"pyproject.toml": """\
        [project]
        name = "x"
        requires-python = ">=3.10"
        dependencies = ["torch>=2.6.0", "numpy"]

        [project.optional-dependencies]
        old = [
            "torch>=2.1",
        ]

        [tool.poetry.dependencies]
        python-dateutil = "2.8"
        python = ">=3.8,<3.12"
        tensorflow-io-gcs-filesystem = "0.32.0"
        tensorflow = "2.12.1"
        """})
    got = {(s.fact.means(), s.line) for s in read_pyproject(r, "pyproject.toml")}
    assert {("torch >=2.6.0", 4), ("Python >=3.10", 3), ("Python >=3.8,<3.12", 13), ("tensorflow ==2.12.1", 15)} <= got


def _clip_reference(text: str, limit: int) -> str:
    shown = "".join(ch if ch.isprintable() else f"\\x{ord(ch):02x}" if ord(ch) < 256 else f"\\u{ord(ch):04x}"
                    for ch in text.strip())
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


@pytest.mark.parametrize("n", [0, 1, 9, 10, 11, 12, 40])
@pytest.mark.parametrize("unit", ["a", "\x07", "\u2028", "é", "a\x00"])
def test_clip_text_reads_only_what_it_shows(n, unit):
    from envman.project.detect.facts import clip_text

    assert clip_text(unit * n, 10) == _clip_reference(unit * n, 10)
    assert clip_text("  " + unit * n + "\n", 10) == _clip_reference("  " + unit * n + "\n", 10)


def test_clip_text_of_a_line_of_a_megabyte_is_quick():
    import time

    from envman.project.detect.facts import clip_text

    line = "x" * 1_000_000
    start = time.perf_counter()
    for _ in range(2000):
        clip_text(line)
    assert time.perf_counter() - start < 2.0  # a copy of the whole line each time took minutes


def test_conda_package_lists_explicit_and_exported_are_read_as_conda_installs_them(repo):
    """``conda create --file``'s lists: an ``@EXPLICIT`` list's package URLs and ``conda list
    --export``'s ``name=version=build`` lines (also in a requirements file); the build string's
    CUDA counts; comments, pip lines and other text give nothing."""
    from envman.project.detect import gather
    from envman.project.detect.sources import CONDA_LISTS, read_conda_list

    explicit = ("# This file may be used to create an environment using:\n# $ conda create --name <env> --file <this file>\n"
                "@EXPLICIT\nhttps://repo.continuum.io/pkgs/free/linux-64/cudatoolkit-8.0-3.tar.bz2\n"
                "https://conda.anaconda.org/pytorch/linux-64/pytorch-0.4.0-py36_cuda8.0.61_cudnn7.1.2_1.tar.bz2\n"
                "https://repo.anaconda.com/pkgs/main/linux-64/python-3.6.5-hc3d631a_2.conda#0123abcd\n"
                "https://example.org/pkgs/not-a-package.txt\n")
    exported = "# platform: linux-64\ntensorflow-gpu=1.12.0=h0d30ee6_0\ncudatoolkit=9.0=h13b8566_0\ntorch==1.7.1\nnumpy>=1.19\n"
    r = repo({"conda_packagelist.txt": explicit, "requirements.txt": exported, "notes.txt": "pytorch=1.0.0=x\n",
              "docs/spec-file.txt": "pytorch=1.2.0=py3.7_cuda10.0.130_cudnn7.6.2_0\n"})
    assert r.matching(CONDA_LISTS) == ["conda_packagelist.txt", "docs/spec-file.txt"]
    assert means(read_conda_list(r, "conda_packagelist.txt")) == [
        ("conda_packagelist.txt", 4, "CUDA 8.0"), ("conda_packagelist.txt", 5, "torch ==0.4.0"),
        ("conda_packagelist.txt", 5, "CUDA 8.0"), ("conda_packagelist.txt", 6, "Python ==3.6.5")]
    assert means(read_conda_list(r, "requirements.txt")) == [
        ("requirements.txt", 2, "tensorflow ==1.12.0 (GPU build)"), ("requirements.txt", 3, "CUDA 9.0")]
    listed = [s for s in gather(r) if s.file == "docs/spec-file.txt"]
    assert listed and all(s.strength == RANGE for s in listed)  # a docs folder's list: a range at most
    assert not [s for s in gather(r) if s.file == "notes.txt"]


def test_a_conda_list_of_hostile_lines_is_read_quickly(repo):
    import time

    from envman.project.detect.sources import read_conda_list

    r = repo({"conda-list.txt": "http://a/" + "a-" * 400_000 + "\n" + ("https://x/" + "a-b" * 300 + ".tar.bz\n") * 3000})
    start = time.perf_counter()
    assert read_conda_list(r, "conda-list.txt") == []
    assert time.perf_counter() - start < 2


def test_a_conda_environment_file_of_any_name_is_read_by_its_content(repo):
    """A YAML file near the root whose top level is a conda environment (a ``dependencies`` list
    beside ``name`` or ``channels``) is read whatever its name (``Project_GPU.yml``); other YAML
    files (a config with a ``dependencies`` key, a deeper file, a list of mappings) give nothing."""
    from envman.project.detect import gather

    env = "name: proj\nchannels:\n  - defaults\ndependencies:\n  - python=3.6.10=h0371630_0\n  - pip:\n    - tensorflow-gpu==2.2.0\n"
    r = repo({"Proj_GPU.yml": env, "conf/proj.yaml": env.replace("name: proj\n", ""),
              "a/b/deep.yml": env, "config.yml": "model:\n  dependencies:\n    - torch==1.7.1\n",
              "chart.yaml": "dependencies:\n  - torch==1.7.1\n",  # no name nor channels: not an environment
              "ansible.yml": "name: x\ndependencies:\n  - {role: torch}\n"})
    got = {(s.file, s.line, s.fact.means()) for s in gather(r) if s.source == "conda"}
    assert got == {("Proj_GPU.yml", 5, "Python ==3.6.10"), ("Proj_GPU.yml", 7, "tensorflow ==2.2.0 (GPU build)"),
                   ("conf/proj.yaml", 4, "Python ==3.6.10"), ("conf/proj.yaml", 6, "tensorflow ==2.2.0 (GPU build)")}
    assert {s.strength for s in gather(r) if s.file == "Proj_GPU.yml"} == {PIN}
    # one for the docs' build: a range at most
    r = repo({"docs/rtd.yml": env})
    assert {(s.file, s.strength) for s in gather(r) if s.source == "conda"} == {("docs/rtd.yml", RANGE)}


@pytest.mark.parametrize("pad", [" ", "\t", " \t"])
def test_a_requirements_line_of_a_long_whitespace_run_is_read_in_linear_time(repo, pad):
    """pip's comment rule (a ``#`` at the start or after whitespace) is looked for once per
    character: a requirements line of 500,000 blanks and no ``#`` (a hostile clone) took minutes;
    a comment after such a run is still dropped and the pin before it read."""
    import time

    r = repo({"requirements.txt": "torch==1.9.0" + pad * 250_000 + "\n" + "numpy" + pad * 250_000 + "# c\n"})
    start = time.perf_counter()
    found = read_requirements(r, "requirements.txt")
    assert time.perf_counter() - start < 2
    assert ("requirements.txt", 1, "torch ==1.9.0") in means(found)


def test_conda_environment_files_are_composed_up_to_their_limit_and_a_bounded_number_of_them(repo):
    """YAML is composed at a few MB a second: an environment file is read up to CONDA_LIMIT bytes
    (one at the limit is read, one a byte past it is not), and at most MAX_CONDA files by name and
    MAX_YAML by content, so 130 files of a megabyte each (11 s) cost about a second."""
    import time

    from envman.project.detect import gather
    from envman.project.detect.sources import CONDA_LIMIT

    head = "name: x\nchannels: [defaults]\ndependencies:\n  - pytorch=1.9.0\n"
    pad = "  - numpy=1.0\n"

    def sized(n: int) -> str:
        body = head + pad * ((n - len(head) - 2) // len(pad))
        return body + "#" * (n - len(body) - 1) + "\n"

    at, past = sized(CONDA_LIMIT), sized(CONDA_LIMIT + 1)
    assert (len(at), len(past)) == (CONDA_LIMIT, CONDA_LIMIT + 1)
    r = repo({"environment.yml": at, "conda/environment.yml": past})
    assert [s.file for s in read_conda(r, "environment.yml")] == ["environment.yml"]
    assert read_conda(r, "conda/environment.yml") == []

    big = head + pad * 70_000
    files = {f"e{i}.yml": big for i in range(65)} | {f"d{i}/environment.yml": big for i in range(65)}
    r = repo(files)
    start = time.process_time()
    gather(r)
    assert time.process_time() - start < 4
