"""The mount grammar by rule: every refusal of ``parse_mount`` whole (what, key, value, place), for
a project file's key and the config's, with and without a project root; and what each accepted
form becomes."""

from __future__ import annotations

import os

import pytest

from envman.errors import UserError
from envman.project.file import parse_mount

FORM = '"SOURCE:TARGET[:ro]"'
LONG = f'{FORM} without NUL bytes or line breaks, at most 4096 characters'
COLON = f'{FORM} (no ":" inside the paths)'
TARGET = "an absolute target other than /, /workspace, /home/envman, /proc, /sys, /dev"

REFUSED = [  # (text, what is expected, the value shown: None for the text itself)
    ("a\0b:/x", LONG, None), ("/a:/b\n", LONG, None), ("/a\r:/b", LONG, None), ("\n", LONG, None),
    ("/" + "a" * 4096, LONG, ("/" + "a" * 4096)[:200]), ("/a:/" + "b" * 4094, LONG, ("/a:/" + "b" * 4094)[:200]),
    ("x" * 4096, COLON, None),  # exactly 4096 characters: the length is allowed, the form is not
    (":/b", COLON, None), ("/a:", COLON, None), (":", COLON, None), ("/a", COLON, None), ("", COLON, None),
    ("/a:/b:/c", COLON, None), ("/a:/b:xx", COLON, None), ("/a:/b:RO", COLON, None), ("/a:/b:ro:ro", COLON, None),
    ("/a:/b:", COLON, None), ("::ro", COLON, None),
    ("~bob/x:/b", "only ~ or ~/path (your own home) may be used, not ~user", None),
    ("/a:rel", TARGET, None), ("/a:/proc/x", TARGET, None), ("/a:/workspace", TARGET, None), ("/a:/", TARGET, None),
    ("/a://x", TARGET, None), ("/a:/dev", TARGET, None), ("/a:/sys/", TARGET, None), ("/a:/home/envman", TARGET, None),
]


@pytest.mark.parametrize("key", ["mounts", "run.mounts"])
@pytest.mark.parametrize("with_root", [False, True])
@pytest.mark.parametrize(("text", "expected", "shown"), REFUSED, ids=[f"m{i}" for i in range(len(REFUSED))])
def test_every_refusal_of_the_mount_grammar_is_one_whole_line(tmp_path, key, with_root, text, expected, shown):
    with pytest.raises(UserError) as e:
        parse_mount(text, base=tmp_path if with_root else None, where="W", key=key)
    assert (e.value.what, e.value.where, e.value.fix) == (
        f"key {key}: expected {expected}, got {text if shown is None else shown!r}", "W", None)


@pytest.mark.parametrize("key", ["mounts", "run.mounts"])
def test_a_relative_source_needs_a_project_root(tmp_path, key):
    with pytest.raises(UserError) as e:
        parse_mount("rel:/b", base=None, where="W", key=key)
    assert e.value.line() == f"W: key {key}: expected an absolute source path (or one starting with ~), got 'rel:/b'"
    m = parse_mount("rel:/b", base=tmp_path, where="W", key=key)
    assert (m.source, m.target, m.read_only) == (str(tmp_path / "rel"), "/b", False)


@pytest.mark.parametrize(("text", "target", "read_only"), [
    ("{d}:/b", "/b", False), ("{d}:/b:rw", "/b", False), ("{d}:/b:ro", "/b", True), ("{d}:/b/", "/b", False),
    ("{d}:/b/../c", "/c", False), ("{d}:/a b:ro", "/a b", True), ("{d}/:/x//y", "/x/y", False),
])
def test_each_accepted_form_becomes_its_source_target_and_mode(tmp_path, text, target, read_only):
    d = tmp_path / "data"
    d.mkdir()
    m = parse_mount(text.format(d=d), base=None, where="W")
    assert (m.source, m.target, m.read_only) == (str(d), target, read_only)


@pytest.mark.parametrize("target", ["/sys/kernel", "/dev/shm", "/proc/1", "/dev/nvidia0", "/sys/fs/cgroup"])
def test_no_mount_lands_inside_the_kernel_s_own_folders(tmp_path, target):
    with pytest.raises(UserError) as e:
        parse_mount(f"{tmp_path}:{target}", base=None, where="W")
    assert e.value.what == f"key mounts: expected {TARGET}, got '{tmp_path}:{target}'"


@pytest.mark.parametrize("text", ["../x:/b", "link:/b"])
def test_a_relative_source_leading_out_of_the_project_is_one_whole_refusal(tmp_path, text):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "link").symlink_to(tmp_path)
    with pytest.raises(UserError) as e:
        parse_mount(text, base=root, where="W")
    src = text.split(":")[0]
    assert (e.value.what, e.value.where, e.value.fix) == (
        f"key mounts: the relative source of {text!r} resolves to {os.path.realpath(root / src)}, outside the "
        f"project root {root}", "W", "relative sources must stay inside the project (no .. or symlinks leading out)")


def test_a_refused_mount_names_its_key_except_on_the_command_line():
    with pytest.raises(UserError) as e:
        parse_mount("/etc:/e", base=None, where="W", key="run.mounts")
    assert e.value.what == "key run.mounts: '/etc:/e' is refused: /etc is a host system directory (/etc)"
    with pytest.raises(UserError) as e:
        parse_mount("/etc:/e", base=None, where="--mount", key="--mount", from_file=False)
    assert e.value.what == "'/etc:/e' is refused: /etc is a host system directory (/etc)"
