"""Which file a project path names, by rule: every branch of ``project_file_path``, and each of
its refusals whole (the mutation run of the security group left them unchecked)."""

from __future__ import annotations

import errno
import os

import pytest

from envman.project.file import PROJECT_FILE, project_file_path
from tests.support.refusal import refusal

FIX = "give the project's directory or its envman.toml"


@pytest.mark.parametrize("text", ["a\0b", "a\nb", "\0", "\n", "proj/\n", "x\0\n.toml"])
def test_a_nul_or_a_newline_anywhere_is_refused_whole(text):
    assert refusal(lambda: project_file_path(text)) == (
        "UserError", "a project path may not contain NUL bytes or newlines", repr(text), FIX)


@pytest.mark.parametrize("text", ["a\rb", "a\tb", "a b", "\u202etoml", "a;b", "-rf"])
def test_other_characters_name_a_path(tmp_path, monkeypatch, text):
    monkeypatch.chdir(tmp_path)
    assert project_file_path(text) == tmp_path / text / PROJECT_FILE


# (what exists at the path: None, "dir" or "file"; the name) → whether the project file is inside it
_CASES = [
    ("dir", "proj", True),
    ("dir", "proj.toml", True),  # a folder named like a file is still a folder
    ("file", "envman.toml", False),
    ("file", "other.toml", False),
    ("file", "notes.txt", False),  # an existing file is the file, whatever its name
    ("file", "noext", False),
    (None, "new.toml", False),  # not there yet: a .toml name is the file
    (None, "new", True),  # not there yet: any other name is the folder
    (None, "new.TOML", True),  # the suffix is compared exactly
    (None, "new.tom", True),
    (None, "new.toml.d", True),
]


@pytest.mark.parametrize(("exists", "name", "inside"), _CASES)
def test_a_folder_holds_the_file_and_a_file_is_itself(tmp_path, exists, name, inside):
    p = tmp_path / name
    if exists == "dir":
        p.mkdir()
    elif exists == "file":
        p.write_text("")
    assert project_file_path(p) == (p / PROJECT_FILE if inside else p)
    assert project_file_path(str(p)) == project_file_path(p)


def test_a_relative_path_is_made_absolute_from_the_current_folder(tmp_path, monkeypatch):
    (tmp_path / "p").mkdir()
    monkeypatch.chdir(tmp_path)
    assert project_file_path("p") == tmp_path / "p" / PROJECT_FILE
    assert project_file_path(".") == tmp_path / PROJECT_FILE
    assert project_file_path("p").is_absolute()


@pytest.mark.parametrize("length", [256, 300, 5000])
def test_a_path_the_system_cannot_look_at_is_one_line_with_its_first_200_characters(tmp_path, length):
    text = str(tmp_path / ("n" * length))
    assert refusal(lambda: project_file_path(text)) == (
        "UserError", f"cannot use this path: {os.strerror(errno.ENAMETOOLONG)}", text[:200], FIX)
