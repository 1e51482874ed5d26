"""envman.safefile: the name of every file type it refuses, and the real path of a descriptor
without /proc."""

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
