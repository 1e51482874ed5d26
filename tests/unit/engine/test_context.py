"""envman.engine.context: a build context packed as a deterministic tar (same files, same bytes), names
that would land outside the context refused, a directory read without its mtimes, owners or links."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from envman.engine.context import deterministic_tar, files_from_dir
from envman.errors import UserError

FILES = {
    "Dockerfile": b"FROM scratch\nCOPY . /ctx\n",
    "scripts/entry.sh": (b"#!/bin/sh\necho hi\n", 0o755),
    "requirements.txt": b"numpy==2.1.0\n",
    "a/b/c.txt": b"deep\n",
}


def test_tar_is_byte_identical_across_calls() -> None:
    assert deterministic_tar(FILES) == deterministic_tar(FILES)


def test_tar_ignores_dict_insertion_order() -> None:
    reversed_files = dict(reversed(list(FILES.items())))
    assert list(reversed_files) != list(FILES)
    assert deterministic_tar(reversed_files) == deterministic_tar(FILES)


def test_tar_metadata_is_normalised() -> None:
    with tarfile.open(fileobj=io.BytesIO(deterministic_tar(FILES))) as tar:
        members = tar.getmembers()
        names = [m.name for m in members]
        assert names == sorted(names)
        assert {"a", "a/b", "scripts"} <= set(names)  # parents are explicit
        for m in members:
            assert (m.uid, m.gid, m.uname, m.gname, m.mtime) == (0, 0, "", "", 0)
        modes = {m.name: m.mode for m in members}
        assert modes["scripts/entry.sh"] == 0o755
        assert modes["Dockerfile"] == 0o644
        assert modes["a/b"] == 0o755
        assert tar.extractfile("a/b/c.txt").read() == b"deep\n"


def test_tar_content_change_changes_bytes() -> None:
    changed = {**FILES, "requirements.txt": b"numpy==2.1.1\n"}
    assert deterministic_tar(changed) != deterministic_tar(FILES)


@pytest.mark.parametrize("bad", ["/etc/passwd", "../outside", "a/../../x", "", "."])
def test_tar_refuses_names_outside_the_context(bad: str) -> None:
    with pytest.raises(UserError):
        deterministic_tar({bad: b"x"})


def test_tar_refuses_file_that_is_also_a_directory() -> None:
    with pytest.raises(UserError, match="both a file and a directory"):
        deterministic_tar({"a": b"x", "a/b": b"y"})


def test_files_from_dir_ignores_mtimes_and_owner_bits(tmp_path: Path) -> None:
    def make(root: Path, mtime: int, umask_mode: int) -> bytes:
        (root / "sub").mkdir(parents=True)
        (root / "Dockerfile").write_bytes(b"FROM scratch\n")
        (root / "sub" / "run.sh").write_bytes(b"#!/bin/sh\n")
        (root / "sub" / "run.sh").chmod(umask_mode)
        (root / "Dockerfile").chmod(0o600)
        for p in (root / "Dockerfile", root / "sub" / "run.sh", root / "sub"):
            os.utime(p, (mtime, mtime))
        return deterministic_tar(files_from_dir(root))

    first = make(tmp_path / "one", 1_000_000, 0o755)
    second = make(tmp_path / "two", 1_700_000_000, 0o700)
    assert first == second
    with tarfile.open(fileobj=io.BytesIO(first)) as tar:
        assert tar.getmember("sub/run.sh").mode == 0o755
        assert tar.getmember("Dockerfile").mode == 0o644


def test_files_from_dir_refuses_symlinks(tmp_path: Path) -> None:
    (tmp_path / "link").symlink_to("/etc/passwd")
    with pytest.raises(UserError, match="symlink"):
        files_from_dir(tmp_path)


