"""envman.safefile: the name of every file type it refuses, the real path of a descriptor without
/proc, and private_dir by rule (every permission bit, every kind of thing in the way)."""

from __future__ import annotations

import os
import stat

import pytest

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
