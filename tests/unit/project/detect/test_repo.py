"""The bounded walk of a cloned repository and its safe reads: vendored and hidden folders left
out, limits on entries and depth, links that lead outside never read, binary files never text."""

from __future__ import annotations

import os

import pytest

from envman.errors import UserError
from envman.project.detect import repo as R
from envman.project.detect.repo import Repository


def test_the_walk_finds_files_in_order_and_leaves_out_vendored_and_hidden_folders(repo):
    r = repo({"b.py": "", "a/x.txt": "", "node_modules/p/requirements.txt": "", "third_party/t/setup.py": "",
              ".git/config": "", ".hidden/requirements.txt": "", ".devcontainer/Dockerfile": "FROM x\n"})
    assert r.files == ["b.py", ".devcontainer/Dockerfile", "a/x.txt"] and not r.truncated  # a folder's files, then its folders'


def test_depth_is_bounded_at_the_limit(repo):
    deep = "/".join(f"d{i}" for i in range(R.MAX_DEPTH - 1))
    deeper = "/".join(f"d{i}" for i in range(R.MAX_DEPTH))
    r = repo({f"{deep}/in.txt": "", f"{deeper}/out.txt": ""})
    assert f"{deep}/in.txt" in r.files and f"{deeper}/out.txt" not in r.files


def test_the_walk_stops_at_its_entry_limit_and_says_so(repo, monkeypatch):
    monkeypatch.setattr(R, "MAX_ENTRIES", 3)
    r = repo({"a": "", "b": "", "c": ""})
    assert r.files == ["a", "b", "c"] and not r.truncated
    r = repo({"a": "", "b": "", "c": "", "d": ""})
    assert r.files == ["a", "b", "c"] and r.truncated


def test_matching_is_shallowest_first_case_blind_and_bounded_in_depth(repo):
    r = repo({"sub/Requirements.txt": "", "requirements.txt": "", "a/b/c/requirements.txt": ""})
    assert r.matching(r"(.*/)?requirements\.txt") == ["requirements.txt", "sub/Requirements.txt"]
    assert r.matching(r"(.*/)?requirements\.txt", max_depth=3)[-1] == "a/b/c/requirements.txt"


def test_reads_are_text_within_the_limit_and_none_otherwise(repo):
    r = repo({"r.txt": "torch==2.0.0\n", "big.txt": "x" * 100, "bin.dat": b"\x00\x01torch", "bad.txt": b"caf\xe9\n",
              "win.txt": "torch==1.0.0\n".encode("utf-16")})
    assert r.read("r.txt") == "torch==2.0.0\n"
    assert r.read("big.txt", limit=99) is None and r.read("big.txt", limit=100) == "x" * 100
    assert r.read("bin.dat") is None and r.head("bin.dat") is None
    assert r.read("bad.txt") == "caf\ufffd\n"  # undecodable bytes replaced, never an error
    assert r.read("win.txt") == "torch==1.0.0\n"  # PowerShell's pip freeze: UTF-16 with its mark
    assert r.read("missing.txt") is None and r.head("missing.txt") is None


def test_head_reads_the_start_of_a_long_file(repo):
    r = repo({"m.py": "import torch\n" + "#" * 10_000})
    assert r.head("m.py", size=13) == "import torch\n"


def test_a_link_that_leads_outside_the_repository_is_never_read(repo, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("torch==9.9.9\n")
    r = repo({"inside.txt": "torch==1.0.0\n"})
    os.symlink(secret, r.root / "requirements.txt")
    os.symlink(r.root / "inside.txt", r.root / "alias.txt")
    r = Repository.scan(r.root)
    assert "requirements.txt" in r.files and "alias.txt" in r.files
    assert r.read("requirements.txt") is None and r.head("requirements.txt") is None
    assert r.read("alias.txt") == "torch==1.0.0\n"


@pytest.mark.parametrize("make", ["missing", "file"])
def test_scanning_what_is_no_folder_is_one_user_error(tmp_path, make):
    path = tmp_path / "x"
    if make == "file":
        path.write_text("")
    with pytest.raises(UserError) as exc:
        Repository.scan(path)
    assert "repository" in str(exc.value) and "\n" not in str(exc.value)
