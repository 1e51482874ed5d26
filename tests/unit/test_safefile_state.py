"""``read_state`` by rule: every way a state file is not believed gives one exact warning line
(or none with ``warn=False``), and no file is read past its limit however its size was reported."""

from __future__ import annotations

import errno
import os
import socket

import pytest

from envman import safefile
from envman.safefile import read_state, read_state_json


def _warning(what: str, where: object, why: str) -> str:
    return f"envman: warning: ignoring the {what} {where}: {why} (remove it; envman writes a new one)\n"


def test_a_path_the_system_cannot_open_is_ignored_with_the_system_s_reason(tmp_path, capfd):
    p = tmp_path / ("n" * 300)
    assert read_state(p, what="widget cache") is None
    assert capfd.readouterr().err == _warning("widget cache", p, os.strerror(errno.ENAMETOOLONG))
    assert read_state(p, warn=False) is None and capfd.readouterr().err == ""


def test_a_socket_in_place_of_a_state_file_is_named_as_one(tmp_path, capfd):
    p = tmp_path / "runs.json"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(p))
    try:
        assert read_state(p, what="run-plan cache") is None
        assert capfd.readouterr().err == _warning("run-plan cache", p, "a socket")
    finally:
        s.close()


@pytest.mark.parametrize(("size", "limit"), [(11, 10), (70_001, 70_000), (200_000, 65_536), (131_073, 131_072)])
def test_a_file_bigger_than_its_reported_size_is_never_read_past_the_limit(tmp_path, monkeypatch, capfd, size, limit):
    """A file whose size the system reports as smaller than it is (as /proc's do, or one still
    growing): the reads stop one byte past the limit and the file is ignored."""
    p = tmp_path / "s"
    p.write_bytes(b"x" * size)
    p.chmod(0o600)
    real_fstat = os.fstat
    reads: list[int] = []
    real_read = os.read

    def small_fstat(fd):
        st = real_fstat(fd)
        return os.stat_result((*st[:6], 0, *st[7:]))  # st_size 0

    def counting_read(fd, n):
        reads.append(n)
        return real_read(fd, n)

    monkeypatch.setattr(safefile.os, "fstat", small_fstat)
    monkeypatch.setattr(safefile.os, "read", counting_read)
    got = read_state(p, what="w", limit=limit)
    monkeypatch.undo()  # the capture reads its file through os too
    assert got is None
    assert capfd.readouterr().err == _warning("w", p, f"more than the {limit} bytes accepted")
    assert sum(reads) == limit + 1 and all(n <= 1 << 16 for n in reads)


@pytest.mark.parametrize("size", [0, 1, 65_535, 65_536, 65_537, 140_000])
def test_a_file_up_to_its_limit_is_read_whole_in_reads_of_at_most_64_kib(tmp_path, monkeypatch, size):
    p = tmp_path / "s"
    data = os.urandom(size)
    p.write_bytes(data)
    p.chmod(0o600)
    reads: list[int] = []
    real_read = os.read
    monkeypatch.setattr(safefile.os, "read", lambda fd, n: reads.append(n) or real_read(fd, n))
    assert read_state(p, limit=max(size, 1)) == data
    assert all(n <= 1 << 16 for n in reads)


def test_a_state_file_is_json_read_as_utf_8(tmp_path):
    p = tmp_path / "s.json"
    p.write_bytes('{"name": "café ☕"}'.encode())
    p.chmod(0o600)
    assert read_state_json(p) == {"name": "café ☕"}
    p.write_bytes('{"name": "café"}'.encode("latin-1"))
    assert read_state_json(p, warn=False) is None


@pytest.mark.parametrize("limit", [640, 1000, 4300])
def test_the_digit_limit_named_is_the_one_this_python_applies(limit):
    """The refusal of a number too long to convert names the interpreter's current limit, not a
    fixed one (PYTHONINTMAXSTRDIGITS or sys.set_int_max_str_digits may change it)."""
    import sys

    from envman.errors import UserError
    from envman.safefile import parse_toml

    before = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(limit)
    try:
        with pytest.raises(UserError) as e:
            parse_toml(f"a = {'7' * (limit + 1)}\n".encode(), what="project file", where="/p/envman.toml")
        assert e.value.what == f"line 1: a number of {limit + 1} digits, more than {limit}"
        assert parse_toml(f"a = {'7' * limit}\n".encode(), what="project file", where="W") == {"a": int("7" * limit)}
    finally:
        sys.set_int_max_str_digits(before)


@pytest.mark.parametrize(("text", "line", "digits"), [
    ("a = {ok}\nb = {bad}\n", 2, "bad"),  # a number of exactly the limit converts: the refusal names the next
    ("a = [{ok}, {bad}]\n", 1, "bad"),
    ("\n\nc = {bad}\n", 3, "bad"),
    ("\nc = {bad}\n", 2, "bad"),
    ("c = {bad_}\n", 1, "bad"),  # underscores are not digits
])
def test_the_number_named_is_the_first_longer_than_the_limit(text, line, digits):
    import sys

    from envman.errors import UserError
    from envman.safefile import parse_toml

    limit = sys.get_int_max_str_digits()
    bad = "8" * (limit + 1)
    under = "_".join(bad[i:i + 3] for i in range(0, len(bad), 3))
    with pytest.raises(UserError) as e:
        parse_toml(text.format(ok="7" * limit, bad=bad, bad_=under).encode(), what="project file", where="/p/envman.toml")
    assert (e.value.what, e.value.where, e.value.fix) == (
        f"line {line}: a number of {limit + 1} digits, more than {limit}", "/p/envman.toml", "give a shorter value")


def test_a_file_the_system_refuses_to_open_is_one_line(tmp_path, monkeypatch):
    from envman.safefile import read_file
    from tests.support.refusal import refusal

    f = tmp_path / "f.toml"
    f.write_text("")

    def denied(*a, **k):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(safefile.os, "open", denied)
    assert refusal(lambda: read_file(f, what="widget file")) == (
        "UserError", "cannot read the widget file: permission denied", str(f), "make it readable (chmod a+r) or ask its owner")
    assert refusal(lambda: read_file(f, what="widget file", fix="F"))[3] == "F"


def test_a_path_through_a_file_is_not_found_naming_the_path(tmp_path):
    from envman.safefile import read_file

    (tmp_path / "file").write_text("")
    with pytest.raises(FileNotFoundError) as e:
        read_file(tmp_path / "file" / "x")
    assert e.value.args == (str(tmp_path / "file" / "x"),)


@pytest.mark.parametrize("step", ["open", "read"])
def test_a_state_file_the_system_fails_to_open_or_read_is_ignored_with_the_system_s_words(tmp_path, monkeypatch, capfd, step):
    p = tmp_path / "s.json"
    p.write_text("{}")
    p.chmod(0o600)
    real = getattr(os, step)

    def failing(*a, **k):
        if a and a[0] == str(p) or step == "read":
            raise OSError(errno.EACCES if step == "open" else errno.EIO, os.strerror(errno.EACCES if step == "open" else errno.EIO))
        return real(*a, **k)

    monkeypatch.setattr(safefile.os, step, failing)
    got = read_state(p, what="widget cache")
    monkeypatch.undo()
    assert got is None
    why = os.strerror(errno.EACCES if step == "open" else errno.EIO)
    assert capfd.readouterr().err == _warning("widget cache", p, why)


# --------------------------------------------------------------------------- read_file, the same reads


@pytest.mark.parametrize(("size", "limit"), [(11, 10), (70_001, 70_000), (200_000, 65_536)])
def test_read_file_refuses_a_file_bigger_than_its_reported_size_after_limit_plus_one_bytes(tmp_path, monkeypatch, size, limit):
    from envman.safefile import read_file
    from tests.support.refusal import refusal

    p = tmp_path / "f"
    p.write_bytes(b"x" * size)
    real_fstat, real_read = os.fstat, os.read
    reads: list[int] = []
    monkeypatch.setattr(safefile.os, "fstat", lambda fd: os.stat_result((*real_fstat(fd)[:6], 0, *real_fstat(fd)[7:])))
    monkeypatch.setattr(safefile.os, "read", lambda fd, n: reads.append(n) or real_read(fd, n))
    got = refusal(lambda: read_file(p, what="widget file", limit=limit))
    monkeypatch.undo()
    assert got == ("UserError", f"the widget file is more than {limit} bytes", str(p), "give a smaller file")
    assert sum(reads) == limit + 1 and all(n <= 1 << 16 for n in reads)


def test_read_file_says_what_the_system_said_when_a_read_fails(tmp_path, monkeypatch):
    from envman.safefile import read_file
    from tests.support.refusal import refusal

    p = tmp_path / "f"
    p.write_text("x")

    def failing(fd, n):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(safefile.os, "read", failing)
    got = refusal(lambda: read_file(p, what="widget file"))
    got_fix = refusal(lambda: read_file(p, what="widget file", fix="F"))
    monkeypatch.undo()
    assert got == ("UserError", f"cannot read the widget file: {os.strerror(errno.EIO)}", str(p), "check the file")
    assert got_fix[3] == "F"


def test_inside_is_judged_on_the_file_opened_not_on_the_path_read_again(tmp_path, monkeypatch):
    """The symlink is re-pointed outside between the open and the check: the check follows the
    descriptor, so it judges (and reads) the file that was opened."""
    from envman.safefile import read_file

    root = tmp_path / "root"
    root.mkdir()
    (root / "real.toml").write_text("inside")
    outside = tmp_path / "outside.toml"
    outside.write_text("outside")
    link = root / "link.toml"
    link.symlink_to(root / "real.toml")
    real_open = safefile.open_file

    def open_then_swap(*a, **k):
        opened = real_open(*a, **k)
        link.unlink()
        link.symlink_to(outside)
        return opened

    monkeypatch.setattr(safefile, "open_file", open_then_swap)
    assert read_file(link, inside=root) == b"inside"
