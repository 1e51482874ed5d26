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


# --------------------------------------------------------------------------- reading the file


def _refused_line(path) -> str:
    from envman.errors import UserError
    from envman.project.file import load_project

    with pytest.raises(UserError) as e:
        load_project(path)
    return e.value.line()


@pytest.mark.parametrize(("make", "why"), [
    (None, "no such project file — create one with `envman project init --env STACK` in the project's root"),
    (os.mkfifo, "is a FIFO (named pipe), expected a regular project file — give a regular file"),
    (lambda p: p.write_bytes(b'name = "caf\xe9"\n'), "the project file is not UTF-8 (invalid byte at offset 11) — save it as UTF-8"),
    (lambda p: p.write_text("name = \n"), "not valid TOML (Invalid value (at line 1, column 8)) — fix the syntax (https://toml.io)"),
])
def test_a_project_file_that_cannot_be_read_is_one_line_naming_it_as_the_project_file(tmp_path, make, why):
    f = tmp_path / "envman.toml"
    if make is not None:
        make(f)
    assert _refused_line(tmp_path) == f"{f}: {why}"
    assert _refused_line(f) == f"{f}: {why}"


@pytest.mark.parametrize("name", ["torch", "x y", "-cpu", "torch-2.4-cuda12-", "torch-2.4-cuda"])
def test_a_stack_name_that_does_not_parse_is_refused_with_the_name_grammar(tmp_path, name):
    from envman.errors import UserError
    from envman.project.file import check_stack_name
    from envman.stack.names import parse_name

    try:
        parse_name(name)
    except Exception as exc:  # noqa: BLE001 - the grammar's own refusal, whatever its class
        expected = (f"key stack: {exc.what}", "W", exc.fix)  # type: ignore[attr-defined]
    else:
        pytest.skip(f"{name!r} parses")
    with pytest.raises(UserError) as e:
        check_stack_name(name, where="W")
    assert (e.value.what, e.value.where, e.value.fix) == expected and e.value.fix


@pytest.mark.parametrize(("word", "found"), [
    ("pkg@https://x.example/p.whl", ("pkg@", "https://x.example/p.whl")),
    ("pkg@git+https://u@x.example/r.git", ("pkg@", "git+https://u@x.example/r.git")),  # the first @ splits
    ("https://u@x.example/p.whl", ("", "https://u@x.example/p.whl")),
    ("git+https://x.example/r.git@v1", ("", "git+https://x.example/r.git@v1")),
    ("pkg@x.example/p", None), ("x@y", None), ("numpy", None), ("@https://x.example", ("@", "https://x.example")),
])
def test_the_url_of_a_requirement_word_and_what_stands_before_it(word, found):
    from envman.project.requirements import requirement_url

    assert requirement_url(word) == found


@pytest.mark.parametrize(("text", "lines"), [
    ("a\\\nb\\\nc\n", ["abc"]),
    ("fi\\\nle:\\\n///x\n", ["file:///x"]),
    ("a\\\n\\\nb\n", ["ab"]),
    ("a\\\nb", ["ab"]),
    ("a\\", ["a"]),
])
def test_continued_lines_join_with_nothing_between_them(text, lines):
    from envman.project.requirements import requirement_lines

    assert requirement_lines(text) == lines


@pytest.mark.parametrize(("text", "lines"), [
    ("a\\\n# c\n", ["a"]),  # a comment line after a continuation is still a comment (pip puts a space first)
    ("a\\\n#c\nb\n", ["a", "b"]),
    ("a \\\n# c\n", ["a"]),
])
def test_a_comment_after_a_continued_line_stays_a_comment(text, lines):
    from envman.project.requirements import requirement_lines

    assert requirement_lines(text) == lines
