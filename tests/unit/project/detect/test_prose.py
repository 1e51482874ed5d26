"""README sentences and commands: the grammar of 'tested with PyTorch 1.0 and CUDA 10.0'."""

from __future__ import annotations

import pytest

from envman.project.detect.facts import COMMAND, PROSE
from envman.project.detect.prose import read_prose, sentence_facts


@pytest.mark.parametrize("line, want", [
    ("Tested with PyTorch 1.0 and CUDA 10.0 on Ubuntu 16.04.", ["torch ==1.0.*", "CUDA 10.0"]),
    ("- Python 3.6+", ["Python >=3.6"]),
    ("* PyTorch >= 1.4", ["torch >=1.4"]),
    ("TensorFlow 1.14 or higher", ["tensorflow >=1.14"]),
    ("tensorflow-gpu 1.15.2", ["tensorflow ==1.15.2 (GPU build)"]),
    ("requires PyTorch 1.7.1 or later", ["torch >=1.7.1"]),
    ("64-bit Python 3.8 and PyTorch 1.9.0 (or later).", ["Python ==3.8.*", "torch >=1.9.0"]),
    ("This code will not work with PyTorch 1.0.", ["torch !=1.0.*"]),
    ("Pytorch 0.4.0 (now it does not support 0.4.1 or higher)", ["torch ==0.4.0"]),
    ("at least PyTorch 1.6", ["torch >=1.6"]),
    ("compatible with Python 3.8-3.11 and recent PyTorch versions", ["Python >=3.8,<3.12"]),
    ("We used Python 3.9.9 and [PyTorch](https://pytorch.org/) 1.10.1 to train", ["Python ==3.9.9", "torch ==1.10.1"]),
    ("![TensorFlow 1.10](https://img.shields.io/badge/tensorflow-1.10-green.svg)", ["tensorflow ==1.10.*"]),
    ("Tested with: Python 3.7.13, Pytorch 1.12.0+cu113", ["Python ==3.7.13", "torch ==1.12.0", "CUDA 11.3"]),
    ("CUDA toolkit 11.0 or later", ["CUDA >=11.0"]),
    ("CUDA 10.2 or lower", []),
    ("Requires Python 3.6+, Cuda 11.3+ and PyTorch 1.10+", ["Python >=3.6", "CUDA >=11.3", "torch >=1.10"]),
    ("JAX 0.4.x", ["jax ==0.4.*"]),
    # jaxlib's releases are not jax's: an exact one names the rows that install it, with its CUDA
    ("jax==0.1.77 jaxlib==0.1.55+cuda101", ["jax ==0.1.77", "jax as jaxlib==0.1.55 needs it", "CUDA 10.1"]),
    ("JAX 0.2.5 and jaxlib 0.1.56", ["jax ==0.2.5", "jax as jaxlib==0.1.56 needs it"]),
    ("jaxlib>=0.1.55 (tested on 0.1.57)", ["jax"]), ("jaxlib 0.1.x", ["jax"]),
    ("jaxlib==0.1.55+cpu", ["jax as jaxlib==0.1.55 needs it"]),
    ("[PyTorch (0.3.1)/CUDA 8.0](https://pytorch.org/previous-versions/)", ["torch ==0.3.1", "CUDA 8.0"]),
    ("PyTorch 0.4/Python 3.6", ["torch ==0.4.*", "Python ==3.6.*"]),
    ("export PATH=/usr/local/cuda 10.0", []), ("see lib/cuda 9.0", []),  # a path names nothing
    ("PyTorch 2 is twice as fast", []),
    ("Python 2.7", ["Python 2, which envman does not build"]),
    ("Python 2.7 is no longer supported", []),
    ("works with Python 2.7 or higher", []),
    ("This is a Torch7 implementation; install torch with luarocks", ["Lua Torch (Torch7), which envman does not build",
                                                                     "Lua Torch (Torch7), which envman does not build"]),
    ("Built on Caffe.", ["Caffe, which envman does not build"]),
    ("import torch.nn as nn", []),
    ("cuDNN 7.6", ["cuDNN 7.6"]),
    ("", []),
])
def test_sentence_facts(line, want):
    assert [f.means() for _, f in sentence_facts(line)] == want


def test_readme_commands_weigh_more_than_its_sentences(repo):
    r = repo({"README.md": """\
        # A paper
        Tested with PyTorch 1.7.1.
        ```bash
        conda create -n paper python=3.8
        conda install pytorch==1.7.1 cudatoolkit=11.0 -c pytorch
        ```
        Install with `pip install einops==0.3` and run.
            docker run --gpus all -it nvcr.io/nvidia/pytorch:99.01-py3
        """})
    got = [(s.line, s.fact.means(), s.strength) for s in read_prose(r, "README.md")]
    assert got == [(2, "torch ==1.7.1", PROSE), (4, "Python ==3.8.*", COMMAND), (5, "torch ==1.7.1", COMMAND),
                   (5, "CUDA 11.0", COMMAND)]
    assert all(not s.hard for s in read_prose(r, "README.md"))  # a README is advice, never a pin


from hypothesis import given, settings, strategies as st  # noqa: E402

_PIECES = st.sampled_from(["PyTorch", "torch", "TensorFlow", "CUDA", "cuDNN", "Python", "jax", " ", "1.7", "3.8", "11.0",
                           "2.7", "+", "or later", "not", ">=", "-", "3.11", "[", "](", ")", "`", "*", "\n", "\u202e", "9" * 30])


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=25).map("".join) | st.text(max_size=300))
def test_any_sentence_gives_facts_or_nothing_never_an_error(line):
    for phrase, fact in sentence_facts(line):
        assert fact.kind in ("framework", "cuda", "cudnn", "python", "unsupported")
        if fact.spec and fact.kind in ("framework", "python"):
            from packaging.specifiers import SpecifierSet

            SpecifierSet(fact.spec)  # every spec it writes is one packaging reads


@pytest.mark.parametrize("line, want", [
    ("- TensorFlow 1.x", ["tensorflow ==1.*"]),
    ("does not work with PyTorch 1.5 or later", ["torch <1.5"]),
    ("[PyTorch](https://pytorch.org) >= 1.7.0 (tested on 1.8.1)", ["torch >=1.7.0", "torch ==1.8.1"]),
    ("| PyTorch | 1.6.0 |", ["torch ==1.6.0"]),
    ("| CUDA | 10.1 |", ["CUDA 10.1"]),
    ("PyTorch version" + " " * 5000 + "1.7", ["torch ==1.7.*"]),
])
def test_more_forms_real_readmes_use(line, want):
    assert [f.means() for _, f in sentence_facts(line)] == want


def test_words_around_an_install_command_still_speak(repo):
    r = repo({"README.md": "## Prerequisite\n\n- Pytorch 0.4: `conda install pytorch torchvision -c pytorch`\n"
                           "- `pip install tensorboardX` (any version)\n"})
    got = [(s.line, s.fact.means(), s.strength) for s in read_prose(r, "README.md")]
    assert got == [(3, "torch", COMMAND), (3, "torch ==0.4.*", PROSE)]


def test_items_of_a_nested_list_are_text_and_an_indented_block_is_code(repo):
    r = repo({"README.md": "## Requirements\n- versions:\n    - Python 3.5.2\n    - tensorflow 1.6.0\n"
                           "    - `conda install -y pytorch cudatoolkit=10.0 -c pytorch`\n\n"
                           "    pip install torch==1.7.1\n"})
    got = [(s.line, s.fact.means(), s.strength) for s in read_prose(r, "README.md")]
    assert got == [(3, "Python ==3.5.2", PROSE), (4, "tensorflow ==1.6.0", PROSE), (5, "torch", COMMAND),
                   (5, "CUDA 10.0", COMMAND), (7, "torch ==1.7.1", COMMAND)]


@pytest.mark.parametrize("line, want", [
    ("- PyTorch ( == 0.4.1, for <= 0.4.0 see branch [python36-PyTorch0.4](url))", ["torch ==0.4.1"]),
    ("Python 3.7 以上", ["Python >=3.7"]),
    ("PyTorch 1.8 及以上", ["torch >=1.8"]),
    ("TensorFlow 1.15 以下", ["tensorflow <1.16"]),
    ("We hope to support TensorFlow 2.0 soon.", []),
    ("we will support JAX 0.4.x", []),
    ("For Tensorflow 2.0 support, please use the tf2 branch", []),
    ("Python 3.8 (for TensorFlow 1.15 use the tf1 branch)", ["Python ==3.8.*"]),
    ("Deprecating Python 3.10 support", ["Python !=3.10.*"]),
    ("Support for PyTorch 1.4 was dropped", ["torch !=1.4.*"]),
    ("PyTorch 1.4 is not supported", ["torch !=1.4.*"]),
    ("(or wish to run on PyTorch 0.3 or lower), we suggest using an older commit of this repository.", []),
    ("To run with TensorFlow 1.15, check out the previous release.", []),
    ("We run on PyTorch 1.7 with CUDA 11.0, older versions may work.", ["torch ==1.7.*", "CUDA 11.0"]),
    ("- [PyTorch](https://PyTorch.org/), version 1.0.1", ["torch ==1.0.1"]),
    ("TensorFlow: version 2.4.1", ["tensorflow ==2.4.1"]),
    ("PyTorch, ver. 1.2", ["torch ==1.2.*"]),
    ("PyTorch, vision models and more", []),
])
def test_releases_spoken_of_as_elsewhere_or_to_come_and_other_spellings(line, want):
    assert [f.means() for _, f in sentence_facts(line)] == want


def test_a_comment_in_a_code_block_is_a_sentence_never_a_command(repo):
    """``# pip install torch==1.6.0`` is an install the authors commented out: at most a sentence;
    ``# the wheel for CUDA 11`` speaks as one."""
    r = repo({"README.md": "```bash\n# Installs the wheel compatible with Cuda 11 and cudnn 8.\n"
                           "# pip install torch==1.6.0\n#!/bin/sh\n## CUDA 10.0\npip install torch==1.7.1\n```\n"})
    got = [(s.line, s.fact.means(), s.strength) for s in read_prose(r, "README.md")]
    assert got == [(2, "CUDA 11", PROSE), (2, "cuDNN 8", PROSE), (3, "torch ==1.6.0", PROSE), (6, "torch ==1.7.1", COMMAND)]


def test_pins_listed_in_a_code_block_are_readme_statements(repo):
    """A 2017 README's "Requirements" block (arunmallya/piggyback): each pin of a framework or its
    companion speaks as a README sentence would; other lines of the block, and other packages, do not."""
    r = repo({"README.md": "## Requirements:\n```\nPython 2.7 or 3.xx\ntorch==0.2.0.post3\ntorchvision==0.1.9\n"
                           "torchnet (pip install git+https://github.com/pytorch/tnt.git@master)\ntqdm==4.19.5\n"
                           "tensorflow-gpu>=1.4,<1.5\nimport torch\ntorch\nx = torch==1\n```\n"})
    got = [(s.line, s.fact.means(), s.strength) for s in read_prose(r, "README.md")]
    assert got == [(4, "torch ==0.2.0.post3", PROSE), (5, "torch as torchvision==0.1.9 needs it", PROSE),
                   (8, "tensorflow >=1.4,<1.5 (GPU build)", PROSE)]


@pytest.mark.parametrize("line", [
    "torch==1" + ".1" * 20 + "1",               # a version of 42 characters: one past the 41 read
    "torch==1.0" + ",<2" * 5,                   # five more clauses: one past the four
    "a" * 82 + "==1.0",                         # a name one past 81 characters
    "torch==1.0 # the tested one",              # a comment: not a bare pin
    "torch ==1.0 and python 2",
    "torch==1.0\u202e",
    "=" * 5000,
])
def test_a_code_line_that_is_not_one_bare_pin_is_not_read_as_one(repo, line):
    # (a line with comparisons may still speak as a sentence: test_a_code_block_that_lists_...)
    r = repo({"README.md": f"```\n{line}\n```\n"})
    assert [s.notes for s in read_prose(r, "README.md") if s.notes == (line.strip(),)] == []


def test_a_code_block_pin_at_the_limits_is_read(repo):
    r = repo({"README.md": "```\n" + "torch==1" + ".1" * 20 + "\n" + "torch>=1.0" + ",<2" * 4 + "\n```\n"})
    assert [s.line for s in read_prose(r, "README.md")] == [2, 3]


def test_another_version_of_the_code_is_silent_to_its_paragraph_end(repo):
    """From "an earlier version of the codebase" (or "the old code") to the end of its paragraph,
    list item or section nothing is read; a line ending in ":" carries that over a blank line into
    the block it introduces, and no further."""
    r = repo({"README.md": "PyTorch 1.0 here. An earlier version of the codebase needs PyTorch 0.4.\n"  # 1
                           "`pip install torch==0.4.1`\n"                                   # 2: same paragraph
                           "\n"
                           "Python 3.6\n"                                                   # 4: a new paragraph
                           "- For the old code, CUDA 9.0\n"                                 # 5
                           "- CUDA 10.0\n"                                                  # 6: an item of its own
                           "For the old code:\n"                                            # 7
                           "\n"
                           "```\npip install torch==0.3.1\n```\n"                           # 10: introduced by 7
                           "\n"
                           "TensorFlow 1.15\n"                                              # 13: after the block
                           "Our previous release of this repository ran on CUDA 8.0\n"      # 14
                           "## Setup\n"
                           "cuDNN 7\n"})                                                    # 16: a new section
    got = [(s.line, s.fact.means()) for s in read_prose(r, "README.md")]
    assert got == [(1, "torch ==1.0.*"), (4, "Python ==3.6.*"), (6, "CUDA 10.0"), (13, "tensorflow ==1.15.*"),
                   (16, "cuDNN 7")]


def test_a_code_block_that_lists_requirements_with_comparisons_speaks_as_a_sentence(repo):
    """``Python >= 3.5.5, PyTorch == 0.3.1`` in a code block installs nothing: the statements with
    a comparison speak as a sentence; a bare name and version there (output, a path) says nothing."""
    r = repo({"README.md": "## Requirements\n```\nPython >= 3.5.5, PyTorch == 0.3.1, torchvision == 0.2.0\n```\n"
                           "```\ntorch>=1.7\nUsing PyTorch 1.4.0 on CUDA 10.1\npip install tensorflow==2.4.1\n"
                           "if torch.__version__ >= '1.7':\n# python==3.8\n```\n"})
    got = [(s.line, s.fact.means(), s.strength) for s in read_prose(r, "README.md")]
    assert got == [(3, "Python >=3.5.5", PROSE), (3, "torch ==0.3.1", PROSE), (6, "torch >=1.7", PROSE),
                   (8, "tensorflow ==2.4.1", COMMAND), (10, "Python ==3.8.*", PROSE)]


@pytest.mark.parametrize("line, want", [
    ("with Python 3.6, CUDA 10.0, and [PyTorch]((http://pytorch.org/)) v1.0.", ["Python ==3.6.*", "CUDA 10.0", "torch ==1.0.*"]),
    ("[PyTorch](https://en.wikipedia.org/wiki/Torch_(machine_learning)) 1.4", ["torch ==1.4.*"]),
    ("[PyTorch](https://pytorch.org/) 1.4", ["torch ==1.4.*"]),
    # two pairs of brackets in one address is past what a link is read as: the words stay as written
    ("[PyTorch](a(b)(c)) 1.4", []),
])
def test_a_links_address_may_hold_one_pair_of_brackets(line, want):
    assert [f.means() for _, f in sentence_facts(line)] == want


def test_the_files_a_readmes_install_commands_name(repo):
    from envman.project.detect.prose import named_files

    r = repo({"docs/README.md": "```\nconda env create -n x -f ../envs/b.yml\npip install -r requirements.txt\n```\n"
                                "Or: `pip install --upgrade -r=reqs/gpu.txt`; `mamba env update --file envs/c.yml`\n"
                                "pip install -r missing.txt; see envs/a.yml; cat -f envs/a.yml\n",
              "envs/a.yml": "", "envs/b.yml": "", "envs/c.yml": "", "requirements.txt": "", "reqs/gpu.txt": ""})
    # from the README's folder first (../envs/b.yml), else from the root (requirements.txt, envs/c.yml);
    # a file that is not there, or one named by no install command, is not named
    assert named_files(r, "docs/README.md") == {"envs/b.yml", "requirements.txt", "reqs/gpu.txt", "envs/c.yml"}


@pytest.mark.parametrize("command, named", [
    ("pip install -e .", True), ("uv pip install .", True), ('pip install ".[cuda]"', True), ("pip install .[dev] tqdm", True),
    ("pip install --upgrade --editable .", True), ("uv sync", True), ("poetry install", True), ("pip3 install .", True),
    ("pip install ./other", False), ("pip install .. ", False), ("pip install torch", False), ("cd . && ls", False),
])
def test_an_install_of_the_project_itself_names_its_manifests(repo, command, named):
    from envman.project.detect.prose import named_files

    r = repo({"README.md": f"```\n{command}\n```\n", "pyproject.toml": "", "setup.py": "", "requirements.txt": "",
              "sub/setup.py": ""})
    assert named_files(r, "README.md") == ({"pyproject.toml", "setup.py"} if named else set())


def test_an_install_of_the_project_names_the_manifests_of_the_readmes_folder_first(repo):
    from envman.project.detect.prose import named_files

    r = repo({"sub/README.md": "pip install -e .\n", "sub/setup.py": "", "pyproject.toml": ""})
    assert named_files(r, "sub/README.md") == {"sub/setup.py"}
    r = repo({"sub/README.md": "pip install -e .\n", "pyproject.toml": ""})
    assert named_files(r, "sub/README.md") == {"pyproject.toml"}


@pytest.mark.parametrize("before, named", [(499, True), (500, False)])
def test_options_looked_at_per_readme_are_bounded(repo, before, named):
    """A README of one option repeated costs no more than a real one: the first 500 are read."""
    from envman.project.detect.prose import named_files

    r = repo({"README.md": "pip install -r missing.txt\n" * before + "pip install -r requirements.txt\n", "requirements.txt": ""})
    assert named_files(r, "README.md") == ({"requirements.txt"} if named else set())


def test_a_line_wrapped_in_triple_backticks_is_inline_code_not_a_fence(repo):
    """```` ```conda create -n x python=3.6.15``` ```` on one line is a code span (a fence's info
    string holds no backtick): its command is read and no fence opens; ```` ```bash ```` still
    opens one, and the text after its closing fence is prose again."""
    r = repo({"README.md": "First:\n\n```conda create -n x python=3.6.15```\n\nThen PyTorch 1.8:\n\n"
                           "```bash\npip install torch==1.7.1\n```\nTested with CUDA 11.0.\n"
                           "``` pip install tensorflow==2.4.0 ``\n````python\npip install jax==0.4.1\n````\n"})
    got = [(s.line, s.fact.means(), s.strength) for s in read_prose(r, "README.md")]
    assert got == [(3, "Python ==3.6.15", COMMAND), (5, "torch ==1.8.*", PROSE), (8, "torch ==1.7.1", COMMAND),
                   (10, "CUDA 11.0", PROSE), (11, "tensorflow ==2.4.0", COMMAND),
                   (13, "jax ==0.4.1", COMMAND)]


def test_thousands_of_readmes_naming_install_files_cost_linear_time(repo):
    """Each README one folder down is read for the files its install commands name; the files seen
    are made a set once, not once per README (a set of 20,000 files made for each of 10,000
    READMEs took seconds, and grows with the square of the repository)."""
    import time

    from envman.project.detect.prose import named_files

    files: dict[str, str] = {"requirements.txt": "torch==1.9.0\n"}
    for i in range(10000):
        files[f"d{i}/README.md"] = "pip install -r requirements.txt\n"
        files[f"d{i}/x.txt"] = ""
    r = repo(files)
    readmes = [f for f in r.files if f.endswith("README.md")]
    start = time.process_time()
    named = [named_files(r, rel) for rel in readmes]
    assert time.process_time() - start < 2
    assert named == [{"requirements.txt"}] * 10000
