"""``envman.toml``: parsing, one-line errors, discovery by walking up, the shipped example projects."""

from __future__ import annotations

from pathlib import Path

import pytest

from envman.errors import UserError
from envman.project.file import (
    GpuRequest,
    Mount,
    Port,
    ProjectConfig,
    default_shm_size,
    find_project_file,
    load_project,
    parse_gpus,
)
from envman.project.registry import init_text, locate


FULL = """
name = "proj-a"
stack = "torch-2.4-cuda12"
requirements = "requirements.txt"
apt = ["libgl1", "ffmpeg"]
command = "python train.py --epochs 3"
gpus = "device=0,2"
shm_size = "16g"
ports = [8888, "6006:6007"]
mounts = ["~/datasets:/data:ro", "cache:/cache"]

[environment]
WANDB_MODE = "offline"
SEED = 3
"""


@pytest.fixture(autouse=True)
def dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMAN_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("ENVMAN_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def write_project(root: Path, text: str, req: str | None = "einops==0.8.0\n") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "envman.toml").write_text(text)
    if req is not None:
        (root / "requirements.txt").write_text(req)
    return root


def test_full_file_parses(tmp_path):
    root = write_project(tmp_path / "a", FULL)
    p = load_project(root)
    assert p.name == "proj-a" and p.stack == "torch-2.4-cuda12" and p.root == root
    assert p.requirements == "einops==0.8.0\n" and p.requirements_source == "requirements.txt"
    assert p.apt == ("ffmpeg", "libgl1")  # sorted: the image recipe is deterministic
    assert p.command == ("python", "train.py", "--epochs", "3")
    assert p.gpus == GpuRequest("devices", devices=("0", "2"))
    assert p.shm_size == "16g"
    assert p.ports == (Port(8888, 8888), Port(6006, 6007))
    assert p.mounts == (Mount(str(tmp_path / "home" / "datasets"), "/data", True), Mount(str(root / "cache"), "/cache", False))
    assert p.environment == (("SEED", "3"), ("WANDB_MODE", "offline"))
    assert p.needs_image


def test_minimal_file_defaults_name_to_directory(tmp_path):
    p = load_project(write_project(tmp_path / "My Project", 'stack = "torch-2.4-cuda12"\n', req=None))
    assert p.name == "my-project" and not p.needs_image and p.gpus is None and not p.gpus_set


@pytest.mark.parametrize(
    "text, key, expected",
    [
        ('stack = 3', "key stack", "stack name"),
        ('stack = "tensorflo-2"', "key stack", "cannot parse stack name"),
        ('name = "Has Spaces"', "key name", "lowercase"),
        ('apt = "ffmpeg"', "key apt", "a list of strings"),
        ('apt = ["bad;rm -rf /"]', "key apt", "Debian package names"),
        ('requirements = 3', "key requirements", "requirements file"),
        ('requirements = "missing.txt"', "key requirements", "not found"),
        ('requirements = ["-r other.txt"]', "requirements", "another index, file or folder"),
        ('requirements = ["./local/pkg"]', "requirements", "local path"),
        ('command = []', "key command", "non-empty"),
        ('command = "unterminated \'quote"', "key command", "shell-like"),
        ('gpus = "lots"', "key gpus", '"all", "none", a count or "device=0,2"'),
        ('gpus = true', "key gpus", "a count"),
        ('shm_size = "big"', "key shm_size", '"8g"'),
        ('ports = [70000]', "key ports", "1-65535"),
        ('ports = 8888', "key ports", "a list of ports"),
        ('mounts = ["/only-source"]', "key mounts", "SOURCE:TARGET"),
        ('mounts = ["/a:relative"]', "key mounts", "absolute target"),
        ('mounts = ["/a:/workspace"]', "key mounts", "/workspace"),
        ('environment = "X=1"', "key environment", "a table"),
        ('environment = { "1X" = "a" }', "key environment.1X", "variable name"),
        ('environment = { X = [1] }', "key environment.X", "a string or a number"),
        ('stak = "torch-2.4"', "unknown key stak", "known keys: name, stack"),
        ('stack = "torch-2.4"\n[x', "not valid TOML", "fix the syntax"),
    ],
)
def test_malformed_file_is_one_line_with_file_key_and_expectation(tmp_path, text, key, expected):
    root = write_project(tmp_path / "p", text + "\n", req=None)
    with pytest.raises(UserError) as e:
        load_project(root)
    line = e.value.line()
    assert e.value.exit_code == 2 and "\n" not in line
    assert line.startswith(str(root / "envman.toml")) or "requirements" in line
    assert key in line and expected in line, line


def test_walk_up_finds_the_nearest_file(tmp_path):
    outer = write_project(tmp_path / "outer", 'stack = "torch-2.4"\n', req=None)
    inner = write_project(outer / "sub" / "inner", 'stack = "torch-2.4-cpu"\n', req=None)
    deep = inner / "src" / "pkg"
    deep.mkdir(parents=True)
    assert find_project_file(deep) == inner / "envman.toml"
    assert find_project_file(outer / "sub") == outer / "envman.toml"
    assert find_project_file(tmp_path) is None
    assert locate(None, cwd=deep).stack == "torch-2.4-cpu"
    with pytest.raises(UserError, match="no envman.toml in"):
        locate(None, cwd=tmp_path)


def test_gpu_forms():
    assert parse_gpus("all", where="x") == GpuRequest("all")
    assert parse_gpus(2, where="x") == GpuRequest("count", count=2) == parse_gpus("2", where="x")
    assert parse_gpus("none", where="x") is None and parse_gpus(0, where="x") is None
    assert str(parse_gpus("device=0,GPU-1a2b", where="x")) == "device=0,GPU-1a2b"
    for bad in ("device=", "device=0;rm", -1, "two"):
        with pytest.raises(UserError):
            parse_gpus(bad, where="x")


def test_default_shm_is_8g_or_half_the_ram():
    assert default_shm_size(64 * 1024**3) == "8g"
    assert default_shm_size(8 * 1024**3) == "4g"
    assert default_shm_size(3 * 1024**3) == "1536m"


def test_init_text_is_a_valid_project_file(tmp_path):
    (tmp_path / "envman.toml").write_text(init_text("torch-2.4-cuda12", "demo"))
    p = load_project(tmp_path)
    assert (p.name, p.stack, p.needs_image) == ("demo", "torch-2.4-cuda12", False)


def proj(tmp_path, text, req=None) -> ProjectConfig:
    return load_project(write_project(tmp_path, 'stack = "torch-2.4"\nname = "demo"\n' + text, req=req))


EXAMPLES = sorted((Path(__file__).resolve().parents[3] / "examples" / "projects").glob("*/envman.toml"))


@pytest.mark.parametrize("file", EXAMPLES, ids=[f.parent.name for f in EXAMPLES])
def test_examples_are_valid_and_resolve(file):
    from envman.matrix.load import load_matrix
    from envman.stack.resolve import resolve

    p = load_project(file)
    assert p.name == file.parent.name and p.stack
    stack = resolve(load_matrix(), p.stack)  # the shipped matrix has every example's stack
    assert stack.cuda
