"""envman.safefile: the name of every file type it refuses, the real path of a descriptor without
/proc, and private_dir by rule (every permission bit, every kind of thing in the way)."""

from __future__ import annotations

import os
import stat

import pytest
from hypothesis import given, settings, strategies as st

# --------------------------------------------------------------------------- the safe reader


@pytest.mark.parametrize("kind,word", [(stat.S_IFDIR, "a directory"), (stat.S_IFIFO, "a FIFO (named pipe)"),
                                       (stat.S_IFSOCK, "a socket"), (stat.S_IFCHR, "a device"), (stat.S_IFBLK, "a device"),
                                       (stat.S_IFLNK, "not a regular file"), (0, "not a regular file")])
def test_every_file_type_is_named(kind, word):
    from envman.safefile import _kind  # the module under test

    assert _kind(kind | 0o644) == word


def test_the_real_path_falls_back_to_the_name_without_proc(tmp_path, monkeypatch):
    from envman import safefile

    (tmp_path / "real").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    fd = os.open(tmp_path / "link", os.O_RDONLY)
    try:
        assert safefile.fd_real_path(fd, str(tmp_path / "link")) == str(tmp_path / "real")

        readlink = os.readlink

        def no_proc(path, *a, **kw):
            if str(path).startswith("/proc/"):
                raise OSError(2, "no /proc")
            return readlink(path, *a, **kw)
        monkeypatch.setattr(safefile.os, "readlink", no_proc)
        assert safefile.fd_real_path(fd, str(tmp_path / "link")) == str(tmp_path / "real")
        assert safefile.fd_real_path(fd, str(tmp_path / "x" / ".." / "link")) == str(tmp_path / "real")
    finally:
        os.close(fd)


GROUP_OTHER_BITS = (0o040, 0o020, 0o010, 0o004, 0o002, 0o001)


@pytest.mark.parametrize("owner", [0o700, 0o600])
@pytest.mark.parametrize("bit", GROUP_OTHER_BITS)
def test_private_dir_takes_every_group_or_other_bit_away(tmp_path, owner, bit):
    from envman.safefile import private_dir

    d = tmp_path / "d"
    d.mkdir()
    os.chmod(d, owner | bit)
    private_dir(d)
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700


@pytest.mark.parametrize("mode", [0o700, 0o1700, 0o2700])
def test_private_dir_leaves_a_private_directory_as_it_is(tmp_path, mode):
    from envman.safefile import private_dir

    d = tmp_path / "d"
    d.mkdir()
    os.chmod(d, mode)
    private_dir(d)
    assert stat.S_IMODE(os.stat(d).st_mode) == mode


def test_a_new_private_dir_is_born_private(tmp_path, monkeypatch):
    """Created with mode 0700, never created open and narrowed afterwards (a window in which
    another user could enter and plant a file)."""
    from envman import safefile

    def no_chmod(*a, **kw):
        raise AssertionError("chmod after creation")
    monkeypatch.setattr(safefile.os, "chmod", no_chmod)
    old = os.umask(0)
    try:
        d = safefile.private_dir(tmp_path / "a" / "b")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700


@pytest.mark.parametrize("kind", ["file", "symlink-to-dir", "symlink-to-file", "dangling-symlink", "fifo"])
def test_private_dir_refuses_anything_but_a_directory_of_yours(tmp_path, kind):
    from envman.safefile import private_dir
    from tests.support.errors import refusal

    (tmp_path / "real").mkdir()
    (tmp_path / "f").write_text("x")
    p = tmp_path / "p"
    {"file": lambda: p.write_text("x"), "symlink-to-dir": lambda: p.symlink_to(tmp_path / "real"),
     "symlink-to-file": lambda: p.symlink_to(tmp_path / "f"), "dangling-symlink": lambda: p.symlink_to(tmp_path / "nope"),
     "fifo": lambda: os.mkfifo(p)}[kind]()
    assert refusal(lambda: private_dir(p)) == (
        "is not a directory of yours", str(p), "remove it, or point ENVMAN_CONFIG_DIR / ENVMAN_STATE_DIR elsewhere")


# --------------------------------------------------------------------------- numbers too long to convert


@given(st.integers(0, 5), st.integers(4301, 6000), st.booleans(), st.sampled_from(["a = {n}", "[t]\nb = [1, {n}]",
                                                                                     "c = {{ d = -{n} }}"]))
@settings(max_examples=60, deadline=None)
def test_a_number_too_long_for_python_is_one_line_naming_the_file_and_its_line(before, digits, underscores, form):
    from envman.errors import UserError
    from envman.safefile import parse_toml

    n = "9" * digits
    if underscores:
        n = "_".join(n[i:i + 3] for i in range(0, len(n), 3))
    text = "# x\n" * before + form.format(n=n) + "\n"
    with pytest.raises(UserError) as e:
        parse_toml(text.encode(), what="project file", where="/p/envman.toml")
    line = before + form.format(n="N").split("\n").index(next(ln for ln in form.format(n="N").split("\n") if "N" in ln)) + 1
    assert e.value.where == "/p/envman.toml" and e.value.what == f"line {line}: a number of {digits} digits, more than 4300"
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("words", [["project", "show", "{root}"], ["run", "{root}", "--dry-run", "--", "true"]])
@pytest.mark.parametrize("body", ['gpus = {n}\n', '[environment]\nA = {n}\n', 'ports = [{n}]\n'])
def test_every_command_reading_a_project_file_names_it_for_a_long_number(tmp_path, words, body):
    from tests.support.cli import run_envman

    root = tmp_path / "p"
    root.mkdir()
    (root / "envman.toml").write_text('name = "p"\nstack = "torch-2.4-cpu"\n' + body.format(n="7" * 5000))
    env = {**os.environ, "ENVMAN_CONFIG_DIR": str(tmp_path / "c"), "ENVMAN_STATE_DIR": str(tmp_path / "s")}
    r = run_envman([w.replace("{root}", str(root)) for w in words], env=env, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert str(root / "envman.toml") in r.stderr and "digits" in r.stderr
