"""Install scripts (envman/project/detect/shell.py): a shell or batch file that sets up the
environment speaks as a Dockerfile's RUN lines do; its variables are filled in where the script
sets them plainly; comments, and values a reader cannot know, give nothing."""

from __future__ import annotations

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
