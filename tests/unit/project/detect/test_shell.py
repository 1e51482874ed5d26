"""Install scripts (envman/project/detect/shell.py): a shell or batch file that sets up the
environment speaks as a Dockerfile's RUN lines do; its variables are filled in where the script
sets them plainly; comments, and values a reader cannot know, give nothing."""

from __future__ import annotations

import json
import re

import pytest

from envman.project.detect import gather
from envman.project.detect.facts import COMMAND, RANGE
from envman.project.detect.shell import SCRIPTS, read_script
from tests.unit.project.detect.conftest import means


def test_a_batch_install_script_pins_the_release_and_its_cuda(repo):
    r = repo({"scripts/install.bat": """\
        @ECHO OFF
        FOR /F "tokens=*" %%g IN ('nvcc --version') do (set ver=%%g)
        set CUDA_VERSION=%ver:~11,4%
        REM pip install torch==0.4.0
        :: pip install torch==0.3.1
        pip install torch==1.9.0+cu111 torchvision==0.10.0+cu111 torchaudio===0.9.0 -f https://download.pytorch.org/whl/torch_stable.html
        pip install --upgrade -r scripts/requirements.txt
        """})
    got = read_script(r, "scripts/install.bat")
    assert means(got)[:2] == [("scripts/install.bat", 6, "CUDA 11.1"),
                              ("scripts/install.bat", 6, "torch ==1.9.0 (GPU build)")]
    assert all(s.source == "script" and s.strength == COMMAND and s.hard for s in got)
    assert not any("0.4.0" in m or "0.3.1" in m for _, _, m in means(got))  # comments say nothing


def test_shell_variables_set_plainly_are_filled_in_and_continuations_joined(repo):
    r = repo({"install.sh": """\
        #!/bin/bash
        TORCH=1.7.1
        export CUDA="11.0"
        PY=$(python -c 'import sys; print(sys.version[:3])')
        # pip install torch==1.0.0
        conda create -n env python=3.8 -y
        conda install -y pytorch==${TORCH} \\
            cudatoolkit=$CUDA -c pytorch
        pip install "tensorflow==$PY"
        """})
    assert [m for _, _, m in means(read_script(r, "install.sh"))] == ["Python ==3.8.*", "torch ==1.7.1", "CUDA 11.0"]
    assert [line for _, line, _ in means(read_script(r, "install.sh"))] == [6, 7, 7]


@pytest.mark.parametrize("path, read", [
    ("install.sh", True), ("scripts/install.bat", True), ("tools/setup_env.sh", True), ("Install_Requirements.CMD", True),
    ("scripts/env/conda_setup.bash", True), ("a/b/c/install.sh", False),  # three folders down
    ("train.sh", False), ("scripts/run_eval.sh", False), ("install.py", False), ("install.sh.bak", False),
])
def test_which_files_are_install_scripts(path, read):
    assert (re.fullmatch(SCRIPTS, path.lower()) is not None and path.count("/") <= 2) is read


def test_a_script_of_tests_or_ci_is_a_range_at_most(repo):
    r = repo({"install.sh": "pip install torch==1.8.0\n", "tests/install_deps.sh": "pip install torch==1.13.1\n"})
    by_file = {s.file: s for s in gather(r) if s.fact.framework == "torch" and s.fact.spec}
    assert by_file["install.sh"].strength == COMMAND
    assert by_file["tests/install_deps.sh"].strength == RANGE and not by_file["tests/install_deps.sh"].hard


def test_a_script_that_installs_nothing_and_an_unreadable_one_say_nothing(repo):
    r = repo({"setup.sh": "make -j8\npython setup.py install\n", "env.sh": b"\x00\x01binary"})
    assert read_script(r, "setup.sh") == [] and read_script(r, "env.sh") == [] and read_script(r, "gone.sh") == []


def test_a_batch_continuation_and_a_variable_never_set(repo):
    r = repo({"install.cmd": "set TF=2.4.1\r\npip install ^\r\n  tensorflow-gpu==%TF% ^\r\n  keras==%KERAS%\r\n"})
    assert [(line, m) for _, line, m in means(read_script(r, "install.cmd"))] == [(2, "tensorflow ==2.4.1 (GPU build)")]


def _notebook(*cells: tuple[str, list[str]], nbformat: int = 4) -> str:
    made = [{"cell_type": kind, "source": lines, "metadata": {}, **({"outputs": [{"text": ["!pip install jax==0.4.1\n"]}]}
                                                                 if kind == "code" else {})} for kind, lines in cells]
    if nbformat == 3:
        return json.dumps({"worksheets": [{"cells": [{**c, "input": c.pop("source")} for c in made]}], "nbformat": 3}, indent=1)
    return json.dumps({"cells": made, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1)


def test_a_notebooks_shell_lines_speak_as_advice_commands_with_their_lines(repo):
    """``!pip``, ``%pip`` and a ``%%bash`` cell's lines of code cells; markdown cells, outputs,
    comments and lines IPython fills from Python values give nothing. A notebook is advice: it
    never ends detection."""
    text = _notebook(("markdown", ["!pip install tensorflow==2.4.0\n"]),
                     ("code", ["import torch\n", "!pip install torch==1.7.1+cu110 -f https://download.pytorch.org/whl/torch_stable.html\n",
                               "# !pip install torch==1.6.0\n", "!pip install einops=={version}\n", "!pip install jax==$v\n"]),
                     ("code", ["%pip install -q torchvision==0.8.2\n"]),
                     ("code", ["%%bash\n", "pip install tensorflow-gpu==1.15.0\n", "# pip install mxnet\n"]))
    r = repo({"demo.ipynb": text})
    from envman.project.detect.shell import read_notebook

    got = read_notebook(r, "demo.ipynb")

    def line_of(source: str) -> int:  # where nbformat wrote that source line
        return next(i for i, x in enumerate(text.splitlines(), 1) if x.strip().rstrip(",") == json.dumps(source))

    torch_line = line_of("!pip install torch==1.7.1+cu110 -f https://download.pytorch.org/whl/torch_stable.html\n")
    assert {(s.line, s.fact.means()) for s in got} == {
        (torch_line, "torch ==1.7.1 (GPU build)"), (torch_line, "CUDA 11.0"),
        (line_of("%pip install -q torchvision==0.8.2\n"), "torch as torchvision==0.8.2 needs it"),
        (line_of("pip install tensorflow-gpu==1.15.0\n"), "tensorflow ==1.15.0 (GPU build)")}
    assert all(s.source == "notebook" and s.strength == COMMAND and not s.hard for s in got)
    assert means(read_notebook(repo({"old.ipynb": _notebook(("code", ["!pip install torch==1.4.0\n"]), nbformat=3)}),
                               "old.ipynb")) == [("old.ipynb", 8, "torch ==1.4.0")]


@pytest.mark.parametrize("text", ["", "{", "[]", '{"cells": 3}', '{"cells": [3, {"cell_type": "code", "source": 7}]}',
                                  "[" * 100_000 + "]" * 100_000, '{"worksheets": [{"cells": 5}]}',
                                  '{"worksheets": [{"cells": true}, {"cells": {"cell_type": "code"}}, 3]}'])
def test_a_notebook_that_is_no_notebook_gives_nothing(repo, text):
    from envman.project.detect.shell import read_notebook

    assert read_notebook(repo({"x.ipynb": text}), "x.ipynb") == []


def test_notebooks_of_examples_and_tests_are_ranges_at_most_and_a_notebook_is_a_pin_for_nothing(repo):
    r = repo({"examples/colab.ipynb": _notebook(("code", ["!pip install torch==1.7.1\n"])),
              "requirements.txt": "torch>=1.6\n", "a.py": "import torch\n"})
    got = [s for s in gather(r) if s.source == "notebook"]
    assert got and all(s.strength == RANGE for s in got)
